package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// -version prints one line and exits 0 before any other flag is checked:
// it works without -upstream and next to a flag that would stop start-up.
func TestVersionFlag(t *testing.T) {
	bin, _ := artifacts(t)
	want := regexp.MustCompile(`^sidecar dev \(revision (?:[0-9a-f]+(?:-dirty)?|unknown), ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	for _, args := range [][]string{{"-version"}, {"-version", "-upstream", "ftp://x"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !want.Match(out) {
			t.Errorf("%q printed %q", args, out)
		}
	}
}

// /metrics carries kvgate_build_info with the binary's version, revision
// and Go version, at 1.
func TestBuildInfoMetric(t *testing.T) {
	l, _, _ := startInProcess(t, "-upstream", "http://127.0.0.1:1")
	found := false
	for series, v := range scrape(t, l.Admin) {
		if !strings.HasPrefix(series, "kvgate_build_info{") {
			continue
		}
		found = true
		for _, label := range []string{`version="dev"`, `goversion="` + runtime.Version() + `"`, `revision="`} {
			if !strings.Contains(series, label) {
				t.Errorf("%s lacks %s", series, label)
			}
		}
		if v != 1 {
			t.Errorf("%s = %v, want 1", series, v)
		}
	}
	if !found {
		t.Error("no kvgate_build_info on /metrics")
	}
}
