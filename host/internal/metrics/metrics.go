// Package metrics keeps the metrics a proxy-wasm guest defines, shared by
// every instance of a host, and serves them to Prometheus. A metric name is
// split into family and labels by metricname.Decode, the rule Envoy's
// stats_tags apply, so a guest's series look the same in both hosts.
package metrics

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvgate/kvgate/metricname"
	"github.com/kvgate/kvgate/proxywasm"
	"github.com/prometheus/client_golang/prometheus"
)

// envoyBuckets are Envoy's default histogram bucket bounds, so a guest
// histogram has the same buckets in both hosts.
var envoyBuckets = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

// guestMetric is one series defined by the guest, shared by all instances.
type guestMetric struct {
	kind   proxywasm.MetricType
	desc   *prometheus.Desc
	labels []string // label values
	value  atomic.Uint64
	hist   prometheus.Histogram
}

type family struct {
	kind       proxywasm.MetricType
	labelNames []string
}

// Set is the metrics of one host's guests; the zero value is empty. Its
// methods answer the proxy-wasm metric calls, status included: a name
// outside metricname's rule, or one that clashes with its family's kind or
// labels, is refused with StatusBadArgument. It is safe for concurrent use.
type Set struct {
	// Help, when set, gives a family's help text (host.Options.MetricHelp);
	// nil or "" gives a generic one.
	Help     func(family string) string
	mu       sync.Mutex
	byName   map[string]uint32
	families map[string]family
	list     atomic.Pointer[[]*guestMetric] // index = id-1, copy on write
}

// Define defines a metric, or finds the one defined under that kind and
// name, and returns its id.
func (m *Set) Define(kind proxywasm.MetricType, name string) (uint32, proxywasm.Status) {
	if kind > proxywasm.MetricHistogram {
		return 0, proxywasm.StatusBadArgument
	}
	fam, labels, ok := metricname.Decode(name)
	if !ok {
		return 0, proxywasm.StatusBadArgument
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := string(rune('0'+kind)) + name
	if id, ok := m.byName[key]; ok {
		return id, proxywasm.StatusOK
	}
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i], values[i] = l.Name, l.Value
	}
	if f, ok := m.families[fam]; ok {
		if f.kind != kind || !slices.Equal(f.labelNames, names) {
			return 0, proxywasm.StatusBadArgument
		}
	} else {
		if m.families == nil {
			m.families, m.byName = map[string]family{}, map[string]uint32{}
		}
		m.families[fam] = family{kind, names}
	}
	help := "Defined by the wasm filter as " + fam + "."
	if m.Help != nil {
		if h := m.Help(fam); h != "" {
			help = h
		}
	}
	g := &guestMetric{kind: kind, labels: values,
		desc: prometheus.NewDesc(fam, help, names, nil)}
	if kind == proxywasm.MetricHistogram {
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
	return id, proxywasm.StatusOK
}

func (m *Set) lookup(id uint32) *guestMetric {
	p := m.list.Load()
	if p == nil || id == 0 || int(id) > len(*p) {
		return nil
	}
	return (*p)[id-1]
}

// Increment adds delta to a counter or gauge.
func (m *Set) Increment(id uint32, delta int64) proxywasm.Status {
	g := m.lookup(id)
	switch {
	case g == nil:
		return proxywasm.StatusNotFound
	case g.kind == proxywasm.MetricCounter && delta < 0, g.kind == proxywasm.MetricHistogram:
		return proxywasm.StatusBadArgument
	}
	g.value.Add(uint64(delta))
	return proxywasm.StatusOK
}

// Record sets a gauge, raises a counter to v, or observes v in a histogram.
func (m *Set) Record(id uint32, v uint64) proxywasm.Status {
	g := m.lookup(id)
	if g == nil {
		return proxywasm.StatusNotFound
	}
	switch g.kind {
	case proxywasm.MetricCounter: // a counter never goes down
		for {
			old := g.value.Load()
			if v <= old || g.value.CompareAndSwap(old, v) {
				break
			}
		}
	case proxywasm.MetricGauge:
		g.value.Store(v)
	default:
		g.hist.Observe(float64(v))
	}
	return proxywasm.StatusOK
}

// Get returns a counter's or gauge's value.
func (m *Set) Get(id uint32) (uint64, proxywasm.Status) {
	g := m.lookup(id)
	switch {
	case g == nil:
		return 0, proxywasm.StatusNotFound
	case g.kind == proxywasm.MetricHistogram:
		return 0, proxywasm.StatusBadArgument
	}
	return g.value.Load(), proxywasm.StatusOK
}

// Collect sends every metric to Prometheus.
func (m *Set) Collect(ch chan<- prometheus.Metric) {
	p := m.list.Load()
	if p == nil {
		return
	}
	for _, g := range *p {
		switch g.kind {
		case proxywasm.MetricCounter:
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(g.value.Load()), g.labels...)
		case proxywasm.MetricGauge:
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(int64(g.value.Load())), g.labels...)
		default:
			g.hist.Collect(ch)
		}
	}
}
