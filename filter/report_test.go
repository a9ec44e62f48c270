package filter

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/tests/vectors"
)

func (h *fakeHost) SetProperty(path, value string) error {
	if err := h.check("SetProperty"); err != nil {
		return err
	}
	if h.set == nil {
		h.set = map[string]string{}
	}
	h.set[path] = value
	return nil
}

func (*allocFreeHost) SetProperty(string, string) error { return nil }

// The filter reports what became of each conformance case's hint in its
// properties, as the case's expectations say, in every way a body arrives.
func TestReportedHint(t *testing.T) {
	r := &fakeRunner{id: 10}
	modes := map[string]mode{}
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		modes[m.String()] = m
	}
	vectors.Run(t, r, vectors.Variants(func(v string) { r.m = modes[v] },
		modeLength.String(), modeChunked.String(), modeTrailers.String()),
		vectors.Each(func(c *vectors.Case, v string, _ vectors.Result) {
			defer clear(r.h.set)
			hint, reason := c.Hint()
			if got := r.h.set[filterspec.PropertyHint]; got != hint {
				t.Errorf("%s/%s: %s = %q, want %q", c.Name, v, filterspec.PropertyHint, got, hint)
			}
			if got := r.h.set[filterspec.PropertyHintReason]; got != reason {
				t.Errorf("%s/%s: %s = %q, want %q", c.Name, v, filterspec.PropertyHintReason, got, reason)
			}
			// The router-only fields the case carried, by name: removed,
			// refused for, or detected.
			var want []string
			for _, e := range strings.Split(c.Expect.Counters.RouterOnlyRemoved+","+c.Expect.RouterOnlyFound, ",") {
				if f, _, _ := strings.Cut(e, "="); f != "" {
					want = append(want, f)
				}
			}
			got := strings.Split(r.h.set[filterspec.PropertyRouterOnly], ",")
			slices.Sort(want)
			slices.Sort(got)
			if _, set := r.h.set[filterspec.PropertyRouterOnly]; set != (len(want) > 0) || set && !slices.Equal(got, want) {
				t.Errorf("%s/%s: %s = %q, want %q", c.Name, v, filterspec.PropertyRouterOnly, r.h.set[filterspec.PropertyRouterOnly], want)
			}
			detail, ok := r.h.set[filterspec.PropertyHintDetail]
			if ok != strings.HasPrefix(hint, filterspec.HintDiscarded) || ok && detail == "" {
				t.Errorf("%s/%s: %s = %q (set: %v) for %s", c.Name, v, filterspec.PropertyHintDetail, detail, ok, hint)
			}
		}))
}

// A discarded envelope's explanation is logged at debug level; a host that
// refuses a property costs a warning, never the request.
func TestReportDetailAndRefusedProperty(t *testing.T) {
	h := newFakeHost(`{"trust_kv_hints":true}`)
	p, _ := newPlugin(h)
	body := []byte(`{"kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"t","action_version":"1","payload":"top-secret"}]}}`)
	out := send(p, h, 2, "POST", "/v1/x", jsonCT, body, modeLength)
	want := "actions[0].payload is not an object but a string"
	if !out.forwarded || h.set[filterspec.PropertyHintDetail] != want || h.set[filterspec.PropertyHint] != "discarded:malformed" {
		t.Fatalf("%+v %q", out, h.set)
	}
	if last := h.logs[len(h.logs)-1]; last != "kvgate: kv_hints discarded (malformed): "+want {
		t.Errorf("debug line %q", last)
	}
	for _, l := range h.logs {
		if strings.Contains(l, "top-secret") {
			t.Errorf("logged hint contents: %q", l)
		}
	}
	h.fail["SetProperty"] = true
	out = send(p, h, 3, "POST", "/v1/x", jsonCT, []byte(`{"kv_hints":null}`), modeLength)
	if !out.forwarded || !strings.Contains(strings.Join(h.logs, "\n"), "cannot set property kvgate.hint:") {
		t.Errorf("%+v %q", out, h.logs)
	}
}
