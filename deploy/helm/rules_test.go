package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// rulesFile is the rules file the chart's PrometheusRule carries a copy of.
var rulesFile = filepath.Join("..", "prometheus", "kvgate-rules.yaml")

// The PrometheusRule is deploy/prometheus/kvgate-rules.yaml: the chart's
// copy has the same bytes, and the rendered groups are the file's groups.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	want, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	copyFile := filepath.Join(chartDir, "files", "kvgate-rules.yaml")
	if got, err := os.ReadFile(copyFile); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not %s (%v): cp %s %s", copyFile, rulesFile, err, rulesFile, copyFile)
	}
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", "sidecar-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := render(loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, files)
	if o.rule == nil {
		t.Fatal("no PrometheusRule with prometheusRule.enabled")
	}
	if o.rule.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack prometheusRule.labels", o.rule.Metadata.Labels)
	}
	var file struct {
		Groups json.RawMessage `json:"groups"`
	}
	j, err := yaml.YAMLToJSON(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &file); err != nil {
		t.Fatal(err)
	}
	var g, w any
	_ = json.Unmarshal(o.rule.Spec.Groups, &g)
	_ = json.Unmarshal(file.Groups, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("PrometheusRule groups are not the rules file's:\n got %v\nwant %v", g, w)
	}
}
