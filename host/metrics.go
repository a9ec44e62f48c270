package host

import "github.com/prometheus/client_golang/prometheus"

var (
	descInstances = prometheus.NewDesc("kvgate_wasm_instances", "Live wasm filter instances.", nil, nil)
	descReplaced  = prometheus.NewDesc("kvgate_wasm_instances_replaced_total", "Wasm filter instances closed and replaced, by reason.", []string{"reason"}, nil)
	descMemory    = prometheus.NewDesc("kvgate_wasm_memory_bytes", "Linear memory of the live wasm filter instances (it never shrinks; an instance grown past the retire size is replaced).", nil, nil)
	descPoolSize  = prometheus.NewDesc("kvgate_wasm_pool_size", "Configured size of the wasm filter instance pool.", nil, nil)
)

// Describe sends nothing: the Host is an unchecked collector, since the
// guest defines its metrics at run time.
func (h *Host) Describe(chan<- *prometheus.Desc) {}

// Collect sends the guest's metrics, aggregated across instances, and the
// pool's own gauges and counters.
func (h *Host) Collect(ch chan<- prometheus.Metric) {
	h.metrics.Collect(ch)
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(h.live.Load()))
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(h.memBytes.Load()))
	ch <- prometheus.MustNewConstMetric(descPoolSize, prometheus.GaugeValue, float64(h.size))
	for i, r := range replaceReasons {
		ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(h.replaced[i].Load()), r)
	}
}
