package depcheck

import (
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// TestNoTestingInProduction: no package of the module but a test-support
// one (named ...test, like net/http/httptest, or under tests/, like the
// conformance kit) has the testing package among
// its dependencies, natively or built for wasip1 (the guest). A production
// package that imports a test-support package fails too, since that links
// testing.
func TestNoTestingInProduction(t *testing.T) {
	for _, env := range [][]string{nil, {"GOOS=wasip1", "GOARCH=wasm"}} {
		cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "github.com/kvgate/kvgate/...")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v", env, err)
		}
		n := 0
		for line := range strings.Lines(string(out)) {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			n++
			pkg, deps := fields[0], fields[1:]
			if strings.HasSuffix(path.Base(pkg), "test") || strings.HasPrefix(pkg, "github.com/kvgate/kvgate/tests/") {
				continue // test support (…test, or the tests/ tree): imports testing by design
			}
			for _, d := range deps {
				if d == "testing" {
					t.Errorf("%v: %s links testing", env, pkg)
				}
			}
		}
		if n < 10 {
			t.Fatalf("%v: go list gave %d packages", env, n)
		}
	}
}
