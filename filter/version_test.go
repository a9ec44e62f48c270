package filter

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
)

// The configured line names the module's version, a release version.
func TestConfiguredLineHasVersion(t *testing.T) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(filterspec.Version) {
		t.Errorf("filterspec.Version %q is not a release version (vMAJOR.MINOR.PATCH)", filterspec.Version)
	}
	h := newFakeHost(`{}`)
	if _, ok := newPlugin(h); !ok {
		t.Fatal(h.logs)
	}
	for _, l := range h.logs {
		if strings.HasPrefix(l, "kvgate: configured: version="+filterspec.Version+" ") {
			return
		}
	}
	t.Errorf("no configured line with version=%s in %q", filterspec.Version, h.logs)
}
