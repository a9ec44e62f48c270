package host_test

import (
	"testing"

	"github.com/kvgate/kvgate/tests/vectors"
)

// Decision.Properties carries what the guest set with proxy_set_property:
// for the kvgate module, its report of every conformance case's hint, with
// forwarded and refused requests alike. Each decision's properties stay
// as they were while the instances go on serving the later cases.
func TestDecisionProperties(t *testing.T) {
	r := &hostRunner{}
	type kept struct {
		name     string
		props    map[string][]byte
		snapshot map[string]string
	}
	var all []kept
	check := vectors.Each(func(c *vectors.Case, _ string, _ vectors.Result) {
		d := r.last
		hint, reason := c.Hint()
		k := kept{name: c.Name, props: d.Properties, snapshot: map[string]string{}}
		for key, v := range d.Properties {
			k.snapshot[key] = string(v)
		}
		all = append(all, k)
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
	for _, k := range all {
		if len(k.props) != len(k.snapshot) {
			t.Errorf("%s: %d properties, %d when decided", k.name, len(k.props), len(k.snapshot))
		}
		for key, v := range k.props {
			if string(v) != k.snapshot[key] {
				t.Errorf("%s: %s is %q after later requests, %q when decided", k.name, key, v, k.snapshot[key])
			}
		}
	}
	if len(all) == 0 {
		t.Fatal("no case ran")
	}
}
