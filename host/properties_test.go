package host_test

import (
	"testing"

	"github.com/kvgate/kvgate/tests/vectors"
)

// Decision.Properties carries what the guest set with proxy_set_property:
// for the kvgate module, its report of every conformance case's hint, with
// forwarded and refused requests alike.
func TestDecisionProperties(t *testing.T) {
	r := &hostRunner{}
	check := vectors.Each(func(c *vectors.Case, _ string, _ vectors.Result) {
		d := r.last
		hint, reason := c.Hint()
		if got := string(d.Properties["kvgate.hint"]); got != hint {
			t.Errorf("%s: kvgate.hint %q, want %q", c.Name, got, hint)
		}
		if got := string(d.Properties["kvgate.hint_reason"]); got != reason {
			t.Errorf("%s: kvgate.hint_reason %q, want %q", c.Name, got, reason)
		}
		if hint == "" && d.Properties != nil {
			t.Errorf("%s: properties %q for a request the guest did not inspect", c.Name, d.Properties)
		}
	})
	vectors.Run(t, r, append(vectors.SkipNotFromTLS(), check)...)
}
