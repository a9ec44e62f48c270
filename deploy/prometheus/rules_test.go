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
	"sigs.k8s.io/yaml"
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
	runbooks := runbookAnchors(t)
	tested := testedAlerts(t)
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
			if r.For <= 0 {
				t.Errorf("alert %s: no for: (one evaluation must not page or open a ticket)", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], RunbookURL+"#")
			if !ok || !runbooks[anchor] {
				t.Errorf("alert %s: runbook_url %q, want %s#<a section of docs/runbooks.md>", r.Alert, r.Annotations["runbook_url"], RunbookURL)
			}
			if !tested[r.Alert] {
				t.Errorf("alert %s: no test in %s that expects it to fire", r.Alert, TestFile)
			}
		}
	}
	// The alerts issue 16 asks for, by what they watch.
	want := map[string]string{
		"KvgateTargetDown":        "up{",
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

// RunbookURL is docs/runbooks.md as the alerts link it.
const RunbookURL = "https://github.com/kvgate/kvgate/blob/main/docs/runbooks.md"

// TestFile is the promtool unit test of the rules (promtool test rules).
const TestFile = "kvgate-rules.test.yaml"

// runbookAnchors are the GitHub anchors of docs/runbooks.md's "## " headings.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			out[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))] = true
		}
	}
	return out
}

// testedAlerts are the alerts that a test of TestFile expects to fire.
func testedAlerts(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(TestFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.RuleFiles) != 1 || f.RuleFiles[0] != RulesFile {
		t.Errorf("%s tests %v, want %s", TestFile, f.RuleFiles, RulesFile)
	}
	out := map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				out[a.Alertname] = true
			}
		}
	}
	return out
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
