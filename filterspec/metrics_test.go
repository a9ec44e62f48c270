package filterspec

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
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

// The table's series indexes are MetricNames' order, each family's
// values in turn; a reason's label value is its place in kvhints.Reasons.
func TestSeries(t *testing.T) {
	names := MetricNames()
	if len(names) != NumSeries() {
		t.Fatalf("%d names, NumSeries %d", len(names), NumSeries())
	}
	seen := map[string]bool{}
	for f, fam := range Families() {
		id := FamilyID(f)
		if id.Family().Name != fam.Name || MetricHelp(fam.Name) != fam.Help {
			t.Errorf("%s: Family() or MetricHelp disagree with the table", fam.Name)
		}
		values := fam.Values
		if fam.Label == "" {
			values = []string{""}
		}
		for v, value := range values {
			want := metricname.Encode(fam.Name)
			if fam.Label != "" {
				want = metricname.Encode(fam.Name, metricname.Label{Name: fam.Label, Value: value})
			}
			if got := names[id.Series(v)]; got != want {
				t.Errorf("%s.Series(%d) names %s, want %s", fam.Name, v, got, want)
			}
			seen[want] = true
		}
	}
	if len(seen) != len(names) {
		t.Errorf("%d distinct series, %d names", len(seen), len(names))
	}
	for i, r := range kvhints.Reasons {
		if int(r) != i+1 || Ignored.Family().Values[i] != r.String() || Detected.Family().Values[i] != r.String() {
			t.Errorf("reason %v at %d: the label values are not kvhints.Reasons in order", r, i)
		}
	}
	for i, s := range RejectStatuses {
		if Rejected.Family().Values[i] != strconv.Itoa(s) {
			t.Errorf("status %d at %d", s, i)
		}
	}
	var tags int
	for _, fam := range append(Families(), RouterOnlyFamilies()...) {
		if fam.Label != "" {
			tags++
		}
	}
	if st := EnvoyStatsTags(); len(st) != tags {
		t.Errorf("%d stats tags for %d labelled families", len(st), tags)
	}
}
