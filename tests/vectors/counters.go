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
	FamilyRefused     = "kvgate_requests_refused_total"     // label reason
	FamilyDetected    = "kvgate_kv_hints_detected_total"    // label reason

	FamilyRouterOnlyRemoved  = "kvgate_router_only_removed_total"  // label field
	FamilyRouterOnlyDetected = "kvgate_router_only_detected_total" // label field
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
	{func(c *Counters) *int { return &c.GRPCRefused }, []Series{{FamilyRefused, "reason", "grpc"}}},
	{func(c *Counters) *int { return &c.RouterOnlyRefused }, []Series{{FamilyRefused, "reason", "router_only"}}},
	{func(c *Counters) *int { return &c.DetectedUntrusted }, []Series{{FamilyDetected, "reason", "untrusted"}}},
	{func(c *Counters) *int { return &c.DetectedUnknownVersion }, []Series{{FamilyDetected, "reason", "unknown_version"}}},
	{func(c *Counters) *int { return &c.DetectedOversized }, []Series{{FamilyDetected, "reason", "oversized"}}},
	{func(c *Counters) *int { return &c.DetectedMalformed }, []Series{{FamilyDetected, "reason", "malformed"}}},
}

// CounterSeries returns every series Counters is read from for cases
// without router-only fields: the filter's fixed series.
func CounterSeries() []Series {
	var out []Series
	for _, f := range counterSeries {
		out = append(out, f.series...)
	}
	return out
}

// CaseSeries returns every series Counters is read from for case c: the
// fixed ones, then for each of its router-only fields the removed series,
// then the detected ones (the order a host defines them in).
func CaseSeries(c *Case) []Series {
	out := CounterSeries()
	for _, fam := range [...]string{FamilyRouterOnlyRemoved, FamilyRouterOnlyDetected} {
		for _, f := range c.RouterOnlyFields {
			out = append(out, Series{fam, "field", f})
		}
	}
	return out
}

// ReadCounters reads the Counters of case c through get, which returns one
// series' value in the host's own way of naming it.
func ReadCounters(c *Case, get func(Series) (float64, error)) (Counters, error) {
	var k Counters
	for _, f := range counterSeries {
		sum := 0.0
		for _, s := range f.series {
			v, err := get(s)
			if err != nil {
				return k, fmt.Errorf("%s: %w", s, err)
			}
			sum += v
		}
		*f.field(&k) = int(sum)
	}
	for _, fam := range [...]struct {
		name string
		dst  *string
	}{{FamilyRouterOnlyRemoved, &k.RouterOnlyRemoved}, {FamilyRouterOnlyDetected, &k.RouterOnlyDetected}} {
		m := fieldCounts{}
		for _, f := range c.RouterOnlyFields {
			s := Series{fam.name, "field", f}
			v, err := get(s)
			if err != nil {
				return k, fmt.Errorf("%s: %w", s, err)
			}
			m[f] = int(v)
		}
		*fam.dst = m.String()
	}
	return k, nil
}

// fieldCounts are counts by router-only field.
type fieldCounts map[string]int

// String is the form of Counters.RouterOnlyRemoved: "field=n" for each
// field with n != 0, in name order, comma-separated.
func (m fieldCounts) String() string {
	var out []string
	for _, f := range slices.Sorted(maps.Keys(m)) {
		if m[f] != 0 {
			out = append(out, f+"="+strconv.Itoa(m[f]))
		}
	}
	return strings.Join(out, ",")
}

// parseFieldCounts reads fieldCounts.String's form; a malformed entry
// counts as a field of that whole name, so that it shows in a diff.
func parseFieldCounts(s string) fieldCounts {
	m := fieldCounts{}
	if s == "" {
		return m
	}
	for _, e := range strings.Split(s, ",") {
		f, n, _ := strings.Cut(e, "=")
		v, err := strconv.Atoi(n)
		if err != nil {
			f, v = e, 1
		}
		m[f] += v
	}
	return m
}

// subFields is a - b, by field, in fieldCounts.String's form.
func subFields(a, b string) string {
	m := parseFieldCounts(a)
	for f, v := range parseFieldCounts(b) {
		m[f] -= v
	}
	return m.String()
}

// PrometheusCounters reads the Counters of case c from a Prometheus text
// exposition page (the sidecar's /metrics, Envoy's /stats/prometheus).
// Every series must be on the page: hosts define them all at start-up.
func PrometheusCounters(c *Case, page string) (Counters, error) {
	values := map[Series]float64{}
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s, v, ok := parseSample(sc.Text())
		if ok {
			values[s] += v
		}
	}
	return ReadCounters(c, func(s Series) (float64, error) {
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

		RouterOnlyRefused:  c.RouterOnlyRefused - o.RouterOnlyRefused,
		RouterOnlyRemoved:  subFields(c.RouterOnlyRemoved, o.RouterOnlyRemoved),
		RouterOnlyDetected: subFields(c.RouterOnlyDetected, o.RouterOnlyDetected),
	}
}

// String is c as the JSON object of a case's expect.counters.
func (c Counters) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// diff names the fields where c differs from want, with both values.
func (c Counters) diff(want Counters) string {
	var g, w map[string]any
	gb, _ := json.Marshal(c)
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(gb, &g)
	_ = json.Unmarshal(wb, &w)
	for k := range g {
		if _, ok := w[k]; !ok {
			w[k] = nil
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		gv, gn := g[k].(float64)
		wv, wn := w[k].(float64)
		switch {
		case gn || wn:
			if gv != wv {
				out = append(out, fmt.Sprintf("%s %+d, want %+d", k, int(gv), int(wv)))
			}
		case fmt.Sprint(g[k]) != fmt.Sprint(w[k]):
			out = append(out, fmt.Sprintf("%s %q, want %q", k, fmt.Sprint(g[k]), fmt.Sprint(w[k])))
		}
	}
	return strings.Join(out, "; ") + " (got " + c.String() + ")"
}
