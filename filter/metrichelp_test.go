package filter

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/metricname"
)

// Every family the filter defines has a help text.
func TestMetricHelp(t *testing.T) {
	families := map[string]bool{}
	for _, name := range MetricNames() {
		fam, _, ok := metricname.Decode(name)
		if !ok {
			t.Fatalf("%s does not decode", name)
		}
		families[fam] = true
	}
	for fam := range families {
		h := MetricHelp(fam)
		if h == "" || strings.Contains(h, "Defined by the wasm filter") || !strings.HasSuffix(h, ".") {
			t.Errorf("%s: help %q", fam, h)
		}
	}
	if MetricHelp("no_such_total") != "" {
		t.Error("help for an unknown family")
	}
}
