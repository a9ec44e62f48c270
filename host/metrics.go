package host

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvgate/kvgate/metricname"
	"github.com/prometheus/client_golang/prometheus"
)

// proxy_metric_type_t
const (
	metricCounter   = 0
	metricGauge     = 1
	metricHistogram = 2
)

// envoyBuckets are Envoy's default histogram bucket bounds, so a guest
// histogram has the same buckets in both hosts.
var envoyBuckets = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

// guestMetric is one series defined by the guest, shared by all instances.
type guestMetric struct {
	kind   uint32
	desc   *prometheus.Desc
	labels []string // label values
	value  atomic.Uint64
	hist   prometheus.Histogram
}

type family struct {
	kind       uint32
	labelNames []string
}

// metrics bridges proxy-wasm metrics to Prometheus. A metric name is split
// into family and labels by metricname.Decode, the rule Envoy's stats_tags
// apply; a name outside the rule is refused with BAD_ARGUMENT.
type metrics struct {
	// help returns a family's help text (Options.MetricHelp); nil or ""
	// gives a generic one.
	help     func(family string) string
	mu       sync.Mutex
	byName   map[string]uint32
	families map[string]family
	list     atomic.Pointer[[]*guestMetric] // index = id-1, copy on write
}

func (m *metrics) define(kind uint32, name string) (uint32, uint64) {
	if kind > metricHistogram {
		return 0, statusBadArgument
	}
	fam, labels, ok := metricname.Decode(name)
	if !ok {
		return 0, statusBadArgument
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := string(rune('0'+kind)) + name
	if id, ok := m.byName[key]; ok {
		return id, statusOK
	}
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i], values[i] = l.Name, l.Value
	}
	if f, ok := m.families[fam]; ok {
		if f.kind != kind || !slices.Equal(f.labelNames, names) {
			return 0, statusBadArgument
		}
	} else {
		if m.families == nil {
			m.families, m.byName = map[string]family{}, map[string]uint32{}
		}
		m.families[fam] = family{kind, names}
	}
	help := "Defined by the wasm filter as " + fam + "."
	if m.help != nil {
		if h := m.help(fam); h != "" {
			help = h
		}
	}
	g := &guestMetric{kind: kind, labels: values,
		desc: prometheus.NewDesc(fam, help, names, nil)}
	if kind == metricHistogram {
		cl := prometheus.Labels{}
		for i := range names {
			cl[names[i]] = values[i]
		}
		g.hist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: fam, Help: help, ConstLabels: cl, Buckets: envoyBuckets})
	}
	var old []*guestMetric
	if p := m.list.Load(); p != nil {
		old = *p
	}
	nl := append(slices.Clip(old), g)
	m.list.Store(&nl)
	id := uint32(len(nl))
	m.byName[key] = id
	return id, statusOK
}

func (m *metrics) lookup(id uint32) *guestMetric {
	p := m.list.Load()
	if p == nil || id == 0 || int(id) > len(*p) {
		return nil
	}
	return (*p)[id-1]
}

func (m *metrics) increment(id uint32, delta int64) uint64 {
	g := m.lookup(id)
	switch {
	case g == nil:
		return statusNotFound
	case g.kind == metricCounter && delta < 0, g.kind == metricHistogram:
		return statusBadArgument
	}
	g.value.Add(uint64(delta))
	return statusOK
}

func (m *metrics) record(id uint32, v uint64) uint64 {
	g := m.lookup(id)
	if g == nil {
		return statusNotFound
	}
	switch g.kind {
	case metricCounter: // a counter never goes down
		for {
			old := g.value.Load()
			if v <= old || g.value.CompareAndSwap(old, v) {
				break
			}
		}
	case metricGauge:
		g.value.Store(v)
	default:
		g.hist.Observe(float64(v))
	}
	return statusOK
}

func (m *metrics) get(id uint32) (uint64, uint64) {
	g := m.lookup(id)
	switch {
	case g == nil:
		return 0, statusNotFound
	case g.kind == metricHistogram:
		return 0, statusBadArgument
	}
	return g.value.Load(), statusOK
}

func (m *metrics) collect(ch chan<- prometheus.Metric) {
	p := m.list.Load()
	if p == nil {
		return
	}
	for _, g := range *p {
		switch g.kind {
		case metricCounter:
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(g.value.Load()), g.labels...)
		case metricGauge:
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(int64(g.value.Load())), g.labels...)
		default:
			g.hist.Collect(ch)
		}
	}
}

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
	h.metrics.collect(ch)
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(h.live.Load()))
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(h.memBytes.Load()))
	ch <- prometheus.MustNewConstMetric(descPoolSize, prometheus.GaugeValue, float64(h.size))
	for i, r := range replaceReasons {
		ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(h.replaced[i].Load()), r)
	}
}

var _ = math.MaxUint32
