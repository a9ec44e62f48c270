package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, nil, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
			t.Errorf("%s: exit %d, stderr %q", arg, code, stderr.String())
		}
		if got := stdout.String(); !strings.HasPrefix(got, "kvhints dev (revision ") || !strings.HasSuffix(got, ", "+runtime.Version()+")\n") {
			t.Errorf("%s printed %q", arg, got)
		}
	}
}

// The version `make release` links in is the one -version prints.
func TestVersionLinked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "kvhints")
	cmd := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X github.com/kvgate/kvgate/internal/version.Version=v1.2.3", "./cmd/kvhints")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "kvhints v1.2.3 (revision ") {
		t.Errorf("-version printed %q", out)
	}
}
