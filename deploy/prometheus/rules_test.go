// Package prometheus holds the test of kvgate's Prometheus rules
// (kvgate-rules.yaml): Prometheus's own rule parser must accept the file,
// every expression must parse as PromQL, and every rule must carry what an
// operator needs. That every series they name is exported is checked in
// deploy/internal/series.
package prometheus

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// RulesFile is the rules file, relative to this package.
const RulesFile = "kvgate-rules.yaml"

func parse(t *testing.T, b []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

var recordName = regexp.MustCompile(`^kvgate:[a-z0-9_]+:[a-z0-9_]+$`)

func TestRules(t *testing.T) {
	b, err := os.ReadFile(RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups := parse(t, b)
	p := parser.NewParser(parser.Options{})
	alerts, records := 0, 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			if _, err := p.ParseExpr(r.Expr); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if r.Record != "" {
				records++
				// level:metric:operations, as Prometheus's naming practice says.
				if !recordName.MatchString(r.Record) {
					t.Errorf("recording rule %s: want kvgate:<metric>:<operations>", r.Record)
				}
				continue
			}
			alerts++
			if !strings.HasPrefix(r.Alert, "Kvgate") {
				t.Errorf("alert %s: want the Kvgate prefix", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("alert %s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: needs a summary and a description", r.Alert)
			}
		}
	}
	// The alerts issue 16 asks for, by what they watch.
	want := map[string]string{
		"KvgateFilterFailures":    "kvgate_filter_failures_total",
		"Kvgate503RateHigh":       "kvgate:sidecar_filter_failure:ratio_rate5m",
		"KvgateEnvoy5xxRateHigh":  "kvgate:envoy_5xx:ratio_rate5m",
		"KvgateWasmPoolExhausted": `reason="pool_timeout"`,
		"KvgateMemoryNearLimit":   "go_gc_gomemlimit_bytes",
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if w, ok := want[r.Alert]; ok {
				if !strings.Contains(r.Expr, w) {
					t.Errorf("alert %s does not watch %s: %s", r.Alert, w, r.Expr)
				}
				delete(want, r.Alert)
			}
		}
	}
	for a := range want {
		t.Errorf("no alert %s", a)
	}
	t.Logf("%d recording rules, %d alerts", records, alerts)
}

// TestParserCatchesMistakes: the parser the test relies on refuses the
// mistakes it is there to catch.
func TestParserCatchesMistakes(t *testing.T) {
	for _, bad := range []string{
		// An unknown field.
		"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    severity: page\n",
		// PromQL that does not parse.
		"groups:\n- name: g\n  rules:\n  - record: a:b:c\n    expr: sum by (job (rate(x[5m]))\n",
		// A template that does not parse.
		"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    annotations:\n      summary: '{{ $labels.job'\n",
		// Both record and alert.
		"groups:\n- name: g\n  rules:\n  - record: a:b:c\n    alert: A\n    expr: up\n",
	} {
		_, errs := rulefmt.Parse([]byte(bad), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
		if len(errs) == 0 {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}
