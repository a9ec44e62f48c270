package version

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestRevision(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "abc123"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "abc123"}}, "abc123-dirty"},
	} {
		if got := revision(tc.settings); got != tc.want {
			t.Errorf("revision(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	i := Info{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.99"}
	if got, want := i.Line("sidecar"), "sidecar v1.2.3 (revision abc, go1.99)"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if g := Get(); g.GoVersion != runtime.Version() || g.Version != Version || g.Revision == "" {
		t.Errorf("Get() = %+v", g)
	}
}

// The -X flag that `make release` passes reaches Version: build a tiny
// program that prints it, with and without the flag.
func TestLinkerFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	for _, tc := range []struct{ ldflags, want string }{
		{"", "dev"},
		{"-X github.com/kvgate/kvgate/internal/version.Version=v9.8.7", "v9.8.7"},
	} {
		out, err := exec.Command("go", "run", "-ldflags="+tc.ldflags, "./testdata/printversion").CombinedOutput()
		if err != nil {
			t.Fatalf("go run -ldflags=%q: %v\n%s", tc.ldflags, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("-ldflags=%q: Version = %q, want %q", tc.ldflags, got, tc.want)
		}
	}
}
