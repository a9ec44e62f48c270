package kvhints_test

import (
	"testing"

	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/tests/vectors"
)

// ExplainBody explains every conformance case a trusted sender's hint is
// discarded in, with the case's reason, and none of the others.
func TestExplainVectors(t *testing.T) {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if !c.Trusted || c.Expect.Action != "forward" {
			continue
		}
		e := kvhints.ExplainBody(c.Request.Body, kvhints.Limits{MaxDepth: c.MaxDepth})
		switch {
		case c.Expect.Outcome == "discarded" && (e == nil || e.Reason.String() != c.Expect.Reason):
			t.Errorf("%s: discarded as %s, explained %+v", c.Name, c.Expect.Reason, e)
		case c.Expect.Outcome != "discarded" && e != nil:
			t.Errorf("%s: %s, yet explained %+v", c.Name, c.Expect.Outcome, e)
		case e != nil:
			n++
		}
	}
	if n == 0 {
		t.Fatal("no discarded case explained")
	}
	t.Logf("%d discarded cases explained", n)
}
