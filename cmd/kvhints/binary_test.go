package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildBinary builds the command into a temporary directory with the go
// tool, the way a user would, and returns the executable's path.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found:", err)
	}
	bin := filepath.Join(t.TempDir(), "kvhints")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/kvhints")
	cmd.Dir = filepath.Join("..", "..") // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinary runs the built executable over the same cases as TestRun, so
// flag parsing, stdin, files, output streams and exit codes are checked in
// a real process.
func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range cliCases(t) {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, c.args, c.stdin)
			c.verify(t, code, stdout, stderr)
		})
	}
}

// runBinary runs bin with args and stdin and returns its exit code and
// output streams.
func runBinary(t *testing.T, bin string, args []string, stdin string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.ExitCode()
	}
	return code, out.String(), errOut.String()
}
