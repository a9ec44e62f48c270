package filter

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/tests/vectors"
)

// counterDeltas reads the vector counters from a host's metrics.
func counterDeltas(get func(name string) int64) vectors.Counters {
	rej := int64(0)
	for _, s := range RejectStatuses {
		rej += get(metric(MetricRejected, "status", strconv.Itoa(s)))
	}
	return vectors.Counters{
		Untrusted:      int(get(metric(MetricIgnored, "reason", "untrusted"))),
		UnknownVersion: int(get(metric(MetricIgnored, "reason", "unknown_version"))),
		Oversized:      int(get(metric(MetricIgnored, "reason", "oversized"))),
		Malformed:      int(get(metric(MetricIgnored, "reason", "malformed"))),
		Admitted:       int(get(MetricAdmitted)),
		RejectedBodies: int(rej),
	}
}

func sub(a, b vectors.Counters) vectors.Counters {
	return vectors.Counters{
		Untrusted:      a.Untrusted - b.Untrusted,
		UnknownVersion: a.UnknownVersion - b.UnknownVersion,
		Oversized:      a.Oversized - b.Oversized,
		Malformed:      a.Malformed - b.Malformed,
		Admitted:       a.Admitted - b.Admitted,
		RejectedBodies: a.RejectedBodies - b.RejectedBodies,
	}
}

// TestVectors runs every conformance case through the filter with the fake
// host, in each of the three ways a body can arrive. Plugins are shared by
// cases with the same configuration, so buffers are reused across requests.
func TestVectors(t *testing.T) {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no vectors")
	}
	type key struct {
		conf string
		m    mode
	}
	plugins := map[key]*Plugin{}
	hosts := map[key]*fakeHost{}
	id := uint32(10)
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		for i := range cases {
			c := &cases[i]
			k := key{c.FilterConfig(), m}
			p, h := plugins[k], hosts[k]
			if p == nil {
				h = newFakeHost(k.conf)
				var ok bool
				if p, ok = newPlugin(h); !ok {
					t.Fatalf("%s: configuration rejected: %q", c.Name, h.logs)
				}
				plugins[k], hosts[k] = p, h
			}
			h.props = nil
			if c.Sender != nil {
				// The sender's properties, under their proxy-wasm paths.
				h.props = map[string][]byte{}
				for _, name := range vectors.SenderProperties {
					if v, ok := c.Sender.Property(name); ok {
						h.props[strings.ReplaceAll(name, ".", "\x00")] = v
					}
				}
			}
			get := func(n string) int64 { return h.counters[n] }
			before := counterDeltas(get)
			id++
			out := send(p, h, id, c.Request.Method, c.Request.Path, c.Request.Headers, c.Request.Body, m)
			if out.streamed {
				t.Errorf("%s [%v]: a body chunk went upstream before the whole body was filtered", c.Name, m)
			}
			if err := checkVector(c, out.forwarded, out.body, out.local, sub(counterDeltas(get), before)); err != "" {
				t.Errorf("%s [%v]: %s", c.Name, m, err)
			}
		}
	}
}

// checkVector compares what a host did with what the case expects.
func checkVector(c *vectors.Case, forwarded bool, body []byte, local *localReply, got vectors.Counters) string {
	e := &c.Expect
	switch e.Action {
	case "forward":
		if !forwarded {
			if local != nil {
				return "rejected with " + strconv.Itoa(local.status) + ": " + string(local.body)
			}
			return "not forwarded"
		}
		if e.ForwardedBody != nil && !bytes.Equal(body, e.ForwardedBody) {
			return "forwarded body differs:\n got  " + trunc(body) + "\n want " + trunc(e.ForwardedBody)
		}
	case "reject":
		if forwarded || local == nil {
			return "forwarded, want reject " + strconv.Itoa(e.Status)
		}
		if local.status != e.Status {
			return "status " + strconv.Itoa(local.status) + ", want " + strconv.Itoa(e.Status)
		}
		var eb struct {
			Error struct {
				Type string
				Code int
			}
		}
		if err := json.Unmarshal(local.body, &eb); err != nil || eb.Error.Code != e.Status {
			return "bad error body " + string(local.body)
		}
	}
	if got != e.Counters {
		return "counters " + strconv.Quote(jsonString(got)) + ", want " + strconv.Quote(jsonString(e.Counters))
	}
	return ""
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

func trunc(b []byte) string {
	if len(b) > 300 {
		return strconv.Quote(string(b[:300])) + "... (" + strconv.Itoa(len(b)) + " bytes)"
	}
	return strconv.Quote(string(b))
}
