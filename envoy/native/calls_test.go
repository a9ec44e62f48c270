package native

import (
	"maps"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
)

// countingStream counts the module's calls into Envoy by name.
type countingStream struct {
	Stream
	n map[string]int
}

func (c countingStream) RequestHeaders(dst []abi.Header) ([]abi.Header, bool) {
	c.n["RequestHeaders"]++
	return c.Stream.RequestHeaders(dst)
}
func (c countingStream) RemoveRequestHeader(k string) bool {
	c.n["RemoveRequestHeader"]++
	return c.Stream.RemoveRequestHeader(k)
}
func (c countingStream) SetRequestHeader(k string, v []byte) bool {
	c.n["SetRequestHeader"]++
	return c.Stream.SetRequestHeader(k, v)
}
func (c countingStream) BodySize(t abi.BodyType) int { c.n["BodySize"]++; return c.Stream.BodySize(t) }
func (c countingStream) RequestBodySize(inBody bool) int {
	c.n["RequestBodySize"]++
	return c.Stream.RequestBodySize(inBody)
}
func (c countingStream) BodyChunks(t abi.BodyType, dst [][]byte) [][]byte {
	c.n["BodyChunks"]++
	return c.Stream.BodyChunks(t, dst)
}
func (c countingStream) AppendBody(t abi.BodyType, b []byte) bool {
	c.n["AppendBody"]++
	return c.Stream.AppendBody(t, b)
}
func (c countingStream) DrainBody(t abi.BodyType, n int) bool {
	c.n["DrainBody"]++
	return c.Stream.DrainBody(t, n)
}
func (c countingStream) ReceivedBufferedRequestBody() bool {
	c.n["ReceivedBufferedRequestBody"]++
	return c.Stream.ReceivedBufferedRequestBody()
}
func (c countingStream) SetFilterState(k, v string) bool {
	c.n["SetFilterState"]++
	return c.Stream.SetFilterState(k, v)
}
func (c countingStream) AttributeString(a abi.Attribute) ([]byte, bool) {
	c.n["AttributeString"]++
	return c.Stream.AttributeString(a)
}
func (c countingStream) AttributeBool(a abi.Attribute) (bool, bool) {
	c.n["AttributeBool"]++
	return c.Stream.AttributeBool(a)
}
func (c countingStream) Increment(s abi.Series, v uint64) {
	c.n["Increment"]++
	c.Stream.Increment(s, v)
}

// TestEnvoyCallsPerRequest pins the calls into Envoy that one request
// costs the module, as the C module of tests/envoybench's row nk makes
// them: each is a cgo call and work in Envoy (BENCHMARKS.md §4), so a
// change that adds one shows here. The body is read once per hook, and
// the edits that follow the Plugin's read reuse its slices.
func TestEnvoyCallsPerRequest(t *testing.T) {
	hint := `{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"}]}`
	plain := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 4030) + `"}]}`
	common := map[string]int{
		"RequestHeaders": 1, "RemoveRequestHeader": 1, // decide, and drop Content-Length
		"RequestBodySize": 2, "BodyChunks": 2, "ReceivedBufferedRequestBody": 1, // the body's size, then its slices
		"SetFilterState": 3, "Increment": 1, // the access log's properties, the outcome's counter
		"SetRequestHeader": 1, // the held headers' Content-Length
	}
	// with is common with some counts changed (0: no such call).
	with := func(kn ...any) map[string]int {
		m := maps.Clone(common)
		for i := 0; i < len(kn); i += 2 {
			if n := kn[i+1].(int); n > 0 {
				m[kn[i].(string)] = n
			} else {
				delete(m, kn[i].(string))
			}
		}
		return m
	}
	for _, c := range []struct {
		name string
		body string
		want map[string]int
	}{
		{"untrusted hint", hint, with("DrainBody", 1)},                // the edit, in Envoy's slices
		{"no hint", plain, with("SetFilterState", 2, "Increment", 0)}, // nothing to count
	} {
		t.Run(c.name, func(t *testing.T) {
			e := mustFake(t, `{}`)
			got := map[string]int{}
			e.m.WrapStreams(func(s Stream) Stream { return countingStream{s, got} })
			x := e.request(withLength(len(c.body)), []byte(c.body), modeLength, func(s *fakeStream) { s.chunk = 16 << 10 })
			if x.reply != nil || !x.forwarded {
				t.Fatalf("not forwarded: %+v", x.reply)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("calls into Envoy:\n got  %v\n want %v", got, c.want)
			}
		})
	}
}
