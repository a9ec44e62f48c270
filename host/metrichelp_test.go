package host

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Options.MetricHelp gives the guest's families their help texts, for
// counters, gauges and histograms alike; a family it has none for ("")
// keeps the generic one.
func TestMetricHelpOption(t *testing.T) {
	reg := prometheus.NewRegistry()
	help := map[string]string{
		"kvtest_requests_total": "Requests the test guest saw.",
		"kvtest_body_bytes":     "Body sizes the test guest saw.",
	}
	h, _ := newTestHost(t, Options{PoolSize: 1, Registerer: reg, MetricHelp: func(f string) string { return help[f] }})
	mustFilter(t, h, "", "12345")
	expected := `
# HELP kvtest_requests_total Requests the test guest saw.
# TYPE kvtest_requests_total counter
kvtest_requests_total{kind="http"} 1
# HELP kvtest_inflight Defined by the wasm filter as kvtest_inflight.
# TYPE kvtest_inflight gauge
kvtest_inflight 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kvtest_requests_total", "kvtest_inflight"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kvtest_body_bytes" {
			found = true
			if mf.GetHelp() != help["kvtest_body_bytes"] {
				t.Errorf("histogram help %q", mf.GetHelp())
			}
		}
	}
	if !found {
		t.Error("no kvtest_body_bytes histogram")
	}
}
