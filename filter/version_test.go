package filter

import (
	"regexp"
	"strings"
	"testing"
)

// The configured line names the module's version, a release version.
func TestConfiguredLineHasVersion(t *testing.T) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version) {
		t.Errorf("Version %q is not a release version (vMAJOR.MINOR.PATCH)", Version)
	}
	h := newFakeHost(`{}`)
	if _, ok := newPlugin(h); !ok {
		t.Fatal(h.logs)
	}
	for _, l := range h.logs {
		if strings.HasPrefix(l, "kvgate: configured: version="+Version+" ") {
			return
		}
	}
	t.Errorf("no configured line with version=%s in %q", Version, h.logs)
}
