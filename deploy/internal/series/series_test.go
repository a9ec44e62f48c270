package series

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

var (
	rulesFile     = filepath.Join("..", "..", "prometheus", "kvgate-rules.yaml")
	dashboardFile = filepath.Join("..", "..", "grafana", "kvgate.json")
)

// TestQueriedSeriesExist: every series and label that the dashboard and
// the rules query is exported by a real sidecar (built from cmd/sidecar)
// or a real Envoy (the committed bootstrap and module), or recorded by a
// rule. A panel that names a series nobody exports fails here.
func TestQueriedSeriesExist(t *testing.T) {
	guest, err := Guest()
	if err != nil {
		t.Fatal(err)
	}
	sidecar, envoy := FromSidecar(t), FromEnvoy(t)
	// The guest's families, with every label value, in both hosts: the
	// panels that query them serve both.
	for fam, ls := range guest {
		for host, got := range map[string]Names{"sidecar": sidecar, "Envoy": envoy} {
			if got[fam] == nil {
				t.Errorf("%s does not export the filter's %s", host, fam)
				continue
			}
			for l, vs := range ls {
				for v := range vs {
					if !got[fam][l][v] {
						t.Errorf("%s does not export %s{%s=%q}", host, fam, l, v)
					}
				}
			}
		}
	}
	exported := Names{}
	exported.Add(sidecar)
	exported.Add(envoy)
	// Prometheus writes up itself, for every target it scrapes (with the
	// target's job and instance, like every series).
	exported.Add(Names{"up": Labels{}})

	rules, recorded, err := RuleQueries(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ReadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	queries := append(rules, d.Queries()...)
	if len(queries) < 20 {
		t.Fatalf("only %d queries found", len(queries))
	}
	for _, p := range Check(queries, exported, recorded) {
		t.Error(p)
	}

	// The check finds what it is for.
	bad := []Query{
		{"unknown series", `rate(kvgate_hints_admitted_total[5m])`},
		{"unknown label", `kvgate_kv_hints_admitted_total{reason="x"}`},
		{"unknown value", `trtllm_kv_hints_ignored_total{reason="spoofed"}`},
		{"envoy label on a sidecar series", `kvgate_filter_failures_total{envoy_response_code_class="5"}`},
	}
	if got := Check(bad, exported, recorded); len(got) != len(bad) {
		t.Errorf("Check found %d problems in %d bad queries: %q", len(got), len(bad), got)
	}
}

func TestParse(t *testing.T) {
	n, err := Parse(`# TYPE a_seconds histogram
a_seconds_bucket{le="0.1",job_kind="x"} 1
a_seconds_bucket{le="+Inf",job_kind="x"} 1
a_seconds_sum{job_kind="x"} 0.05
a_seconds_count{job_kind="x"} 1
# TYPE c_total counter
c_total{reason="r"} 3
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a_seconds", "a_seconds_bucket", "a_seconds_sum", "a_seconds_count", "c_total"} {
		if n[name] == nil {
			t.Errorf("no %s in %v", name, n.Sorted())
		}
	}
	if !n["a_seconds_bucket"]["le"]["0.1"] || !n["c_total"]["reason"]["r"] || n["c_total"]["le"] != nil {
		t.Errorf("labels: %v", n)
	}
	if got := strings.Join(n.Sorted(), " "); got != "a_seconds a_seconds_bucket a_seconds_count a_seconds_sum c_total" {
		t.Errorf("names %s", got)
	}
}
