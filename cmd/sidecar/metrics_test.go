package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
)

// The filter's series carry the filter's own help texts on /metrics.
func TestFilterMetricHelp(t *testing.T) {
	l, _, _ := startInProcess(t, "-upstream", "http://127.0.0.1:1")
	resp, err := http.Get("http://" + l.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	help := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			help[name] = text
		}
	}
	for _, fam := range []string{filterspec.MetricIgnored, filterspec.MetricAdmitted, filterspec.MetricRejected} {
		if got, want := help[fam], filterspec.MetricHelp(fam); got != want || want == "" {
			t.Errorf("# HELP %s %q, want %q", fam, got, want)
		}
	}
}
