package vectors

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/metricname"
)

// The metric families behind Counters (docs/spec.md, Metrics). The filter
// defines the same names (filterspec.MetricIgnored, MetricAdmitted,
// MetricRejected, MetricUninspected, MetricRefused); its vector test checks
// that they agree.
const (
	FamilyIgnored     = "trtllm_kv_hints_ignored_total" // label reason
	FamilyAdmitted    = "kvgate_kv_hints_admitted_total"
	FamilyRejected    = "kvgate_bodies_rejected_total"      // label status
	FamilyUninspected = "kvgate_requests_uninspected_total" // label protocol
	FamilyRefused     = "kvgate_requests_refused_total"     // label protocol
	FamilyDetected    = "kvgate_kv_hints_detected_total"    // label reason
)

// Series is one metric series: a family with at most one label.
type Series struct {
	Family       string
	Label, Value string // both empty for a series without labels
}

// ProxyWasmName is the series' proxy-wasm metric name, labels folded into
// the name as metricname.Encode does (what a proxy-wasm host is given).
func (s Series) ProxyWasmName() string {
	if s.Label == "" {
		return s.Family
	}
	return metricname.Encode(s.Family, metricname.Label{Name: s.Label, Value: s.Value})
}

// String is the series in Prometheus text form: family{label="value"}.
func (s Series) String() string {
	if s.Label == "" {
		return s.Family
	}
	return s.Family + "{" + s.Label + `="` + s.Value + `"}`
}

// counterSeries are the series each Counters field sums.
var counterSeries = []struct {
	field  func(*Counters) *int
	series []Series
}{
	{func(c *Counters) *int { return &c.Untrusted }, []Series{{FamilyIgnored, "reason", "untrusted"}}},
	{func(c *Counters) *int { return &c.UnknownVersion }, []Series{{FamilyIgnored, "reason", "unknown_version"}}},
	{func(c *Counters) *int { return &c.Oversized }, []Series{{FamilyIgnored, "reason", "oversized"}}},
	{func(c *Counters) *int { return &c.Malformed }, []Series{{FamilyIgnored, "reason", "malformed"}}},
	{func(c *Counters) *int { return &c.Admitted }, []Series{{FamilyAdmitted, "", ""}}},
	{func(c *Counters) *int { return &c.RejectedBodies }, []Series{
		{FamilyRejected, "status", "400"}, {FamilyRejected, "status", "413"}, {FamilyRejected, "status", "415"}}},
	{func(c *Counters) *int { return &c.GRPCUninspected }, []Series{{FamilyUninspected, "protocol", "grpc"}}},
	{func(c *Counters) *int { return &c.GRPCRefused }, []Series{{FamilyRefused, "protocol", "grpc"}}},
	{func(c *Counters) *int { return &c.DetectedUntrusted }, []Series{{FamilyDetected, "reason", "untrusted"}}},
	{func(c *Counters) *int { return &c.DetectedUnknownVersion }, []Series{{FamilyDetected, "reason", "unknown_version"}}},
	{func(c *Counters) *int { return &c.DetectedOversized }, []Series{{FamilyDetected, "reason", "oversized"}}},
	{func(c *Counters) *int { return &c.DetectedMalformed }, []Series{{FamilyDetected, "reason", "malformed"}}},
}

// CounterSeries returns every series Counters is read from: the filter's
// fourteen series.
func CounterSeries() []Series {
	var out []Series
	for _, f := range counterSeries {
		out = append(out, f.series...)
	}
	return out
}

// ReadCounters reads Counters through get, which returns one series' value
// in the host's own way of naming it.
func ReadCounters(get func(Series) (float64, error)) (Counters, error) {
	var c Counters
	for _, f := range counterSeries {
		sum := 0.0
		for _, s := range f.series {
			v, err := get(s)
			if err != nil {
				return c, fmt.Errorf("%s: %w", s, err)
			}
			sum += v
		}
		*f.field(&c) = int(sum)
	}
	return c, nil
}

// PrometheusCounters reads Counters from a Prometheus text exposition page
// (the sidecar's /metrics, Envoy's /stats/prometheus). Every series must be
// on the page: hosts define them all at start-up.
func PrometheusCounters(page string) (Counters, error) {
	values := map[Series]float64{}
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s, v, ok := parseSample(sc.Text())
		if ok {
			values[s] += v
		}
	}
	return ReadCounters(func(s Series) (float64, error) {
		v, ok := values[s]
		if !ok {
			return 0, fmt.Errorf("not on the page")
		}
		return v, nil
	})
}

// parseSample reads one sample line with at most one label, the only shape
// of the filter's series; anything else is not one of them.
func parseSample(line string) (Series, float64, bool) {
	if line == "" || line[0] == '#' {
		return Series{}, 0, false
	}
	name, rest, ok := strings.Cut(line, " ")
	if !ok {
		return Series{}, 0, false
	}
	value, _, _ := strings.Cut(strings.TrimSpace(rest), " ") // drop a timestamp
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return Series{}, 0, false
	}
	var s Series
	fam, labels, hasLabels := strings.Cut(name, "{")
	s.Family = fam
	if hasLabels && labels != "}" {
		l, val, ok := strings.Cut(strings.TrimSuffix(labels, "}"), `="`)
		if !ok || strings.ContainsAny(val, `,{}`) || !strings.HasSuffix(val, `"`) {
			return Series{}, 0, false
		}
		s.Label, s.Value = l, strings.TrimSuffix(val, `"`)
	}
	return s, v, true
}

// Sub returns c - o field by field: the change between two readings.
func (c Counters) Sub(o Counters) Counters {
	return Counters{
		Untrusted:       c.Untrusted - o.Untrusted,
		UnknownVersion:  c.UnknownVersion - o.UnknownVersion,
		Oversized:       c.Oversized - o.Oversized,
		Malformed:       c.Malformed - o.Malformed,
		Admitted:        c.Admitted - o.Admitted,
		RejectedBodies:  c.RejectedBodies - o.RejectedBodies,
		GRPCUninspected: c.GRPCUninspected - o.GRPCUninspected,
		GRPCRefused:     c.GRPCRefused - o.GRPCRefused,

		DetectedUntrusted:      c.DetectedUntrusted - o.DetectedUntrusted,
		DetectedUnknownVersion: c.DetectedUnknownVersion - o.DetectedUnknownVersion,
		DetectedOversized:      c.DetectedOversized - o.DetectedOversized,
		DetectedMalformed:      c.DetectedMalformed - o.DetectedMalformed,
	}
}

// String is c as the JSON object of a case's expect.counters.
func (c Counters) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// diff names the fields where c differs from want, with both values.
func (c Counters) diff(want Counters) string {
	var g, w map[string]int
	gb, _ := json.Marshal(c)
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(gb, &g)
	_ = json.Unmarshal(wb, &w)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if g[k] != w[k] {
			out = append(out, fmt.Sprintf("%s %+d, want %+d", k, g[k], w[k]))
		}
	}
	return strings.Join(out, "; ") + " (got " + c.String() + ")"
}
