package native

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/metricname"
	"github.com/kvgate/kvgate/tests/vectors"
)

func mustFake(t testing.TB, doc string) *fakeEnvoy {
	t.Helper()
	e, err := newFakeEnvoy(doc)
	if err != nil {
		t.Fatalf("configuration %s: %v", doc, err)
	}
	return e
}

var jsonPost = [][2]string{{":method", "POST"}, {":path", "/v1/chat/completions"}, {"content-type", "application/json"}}

func withLength(n int) [][2]string {
	return append(append([][2]string(nil), jsonPost...), [2]string{"content-length", fmt.Sprint(n)})
}

func ignored(reason string) string {
	return metricname.Encode(filterspec.MetricIgnored, metricname.Label{Name: "reason", Value: reason})
}

// Every series the wasm filter defines exists from the configuration on,
// at 0, as one family per metric with Envoy labels.
func TestSeriesDefined(t *testing.T) {
	e := mustFake(t, "")
	if len(e.env.counts) != len(filterspec.MetricNames()) {
		t.Fatalf("%d series, want %d: %v", len(e.env.counts), len(filterspec.MetricNames()), e.env.counts)
	}
	for _, n := range filterspec.MetricNames() {
		if v, ok := e.env.counts[n]; !ok || v != 0 {
			t.Errorf("series %s: %d, %v", n, v, ok)
		}
	}
	var names []string
	for _, f := range e.env.families {
		names = append(names, f.name+"{"+strings.Join(f.labels, ",")+"}")
	}
	want := "trtllm_kv_hints_ignored_total{reason} kvgate_kv_hints_admitted_total{} kvgate_bodies_rejected_total{status} " +
		"kvgate_requests_uninspected_total{protocol} kvgate_requests_refused_total{reason} kvgate_kv_hints_detected_total{reason}"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("families %s, want %s", got, want)
	}
}

// The configuration document is the wasm filter's, read by the same code:
// the same errors, word for word.
func TestConfigErrors(t *testing.T) {
	for _, doc := range []string{`{"trust_kv_hint":true}`, `{"max_body_bytes":-1}`, `[]`, `{"trust_kv_hints":true,"trusted_senders":[{"principal":"x"}]}`} {
		_, werr := filterspec.ParseConfig([]byte(doc))
		_, err := newFakeEnvoy(doc)
		if werr == nil || err == nil || err.Error() != werr.Error() {
			t.Errorf("%s: native %v, filterspec.ParseConfig %v", doc, err, werr)
		}
	}
	env := newFakeEnv()
	env.failDef = true
	if _, err := New(env).NewConfig(env, "x", nil); err == nil || !strings.Contains(err.Error(), "cannot define metric") {
		t.Errorf("a counter Envoy refuses: %v", err)
	}
}

// One untrusted request, in each way a body arrives: the hint is removed,
// Content-Length goes, the counter and the access-log state say so.
func TestStrips(t *testing.T) {
	e := mustFake(t, "")
	body := []byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[]}`)
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		x := e.request(withLength(len(body)), body, m, nil)
		if x.reply != nil || !x.forwarded || string(x.body) != `{"model":"m","messages":[]}` {
			t.Errorf("%v: reply %+v forwarded %v body %q", m, x.reply, x.forwarded, x.body)
		}
		// The headers wait for the body and go on with its length; a
		// body that ends in trailers goes on chunked.
		cl, ok := header(x.headers, "content-length")
		if m == modeTrailers && ok || m != modeTrailers && cl != fmt.Sprint(len(x.body)) {
			t.Errorf("%v: content-length %q (%v) for %d bytes", m, cl, ok, len(x.body))
		}
		if x.state["wasm.kvgate.hint"] != "stripped" || x.state["wasm.kvgate.hint_reason"] != "untrusted" || x.state["wasm.kvgate.sender_trusted"] != "false" {
			t.Errorf("%v: filter state %v", m, x.state)
		}
	}
	if n := e.env.counts[ignored("untrusted")]; n != 3 {
		t.Errorf("untrusted counted %d times, want 3", n)
	}
	if errs := e.env.internalErrors(); len(errs) > 0 {
		t.Errorf("internal errors: %q", errs)
	}
}

// A body that does not change is forwarded as it came, from Envoy's own
// memory; an admitted envelope in canonical form.
func TestUnchangedAndAdmitted(t *testing.T) {
	e := mustFake(t, `{"trust_kv_hints":true}`)
	plain := []byte(`{"model":"m","messages":[]}`)
	x := e.request(jsonPost, plain, modeLength, nil)
	if !x.forwarded || !bytes.Equal(x.body, plain) || x.state["wasm.kvgate.hint"] != "none" {
		t.Errorf("plain body: %+v", x)
	}
	env := `{"protocol_version":"0.1","message_id":"m1","actions":[]}`
	pretty := []byte(`{"kv_hints": {"protocol_version" : "0.1", "message_id":"m1", "actions":[ ]}, "model":"m"}`)
	x = e.request(jsonPost, pretty, modeChunked, nil)
	if want := `{"kv_hints": ` + env + `, "model":"m"}`; string(x.body) != want || x.state["wasm.kvgate.hint"] != "admitted" {
		t.Errorf("envelope: forwarded %q (state %v), want %q", x.body, x.state, want)
	}
	if e.env.counts[metricname.Encode(filterspec.MetricAdmitted)] != 1 {
		t.Errorf("admitted not counted: %v", e.env.counts)
	}
}

// The filter's own answers: 413 from Content-Length, 415, 400; each the
// OpenAI-style JSON error, counted by status.
func TestAnswers(t *testing.T) {
	e := mustFake(t, `{"max_body_bytes":64}`)
	for _, c := range []struct {
		name    string
		headers [][2]string
		body    string
		status  int
	}{
		{"413", withLength(65), strings.Repeat(" ", 65), 413},
		{"413-chunked", jsonPost, `{"a":"` + strings.Repeat("x", 70) + `"}`, 413},
		{"415", append(withLength(2), [2]string{"content-encoding", "gzip"}), `{}`, 415},
		{"400", jsonPost, `{"a":`, 400},
	} {
		x := e.request(c.headers, []byte(c.body), modeChunked, nil)
		if x.reply == nil || x.reply.status != c.status || x.reply.details != filterspec.DetailsRejected {
			t.Errorf("%s: reply %+v, want %d", c.name, x.reply, c.status)
			continue
		}
		if !bytes.Contains(x.reply.body, []byte(fmt.Sprintf(`"code":%d`, c.status))) || x.reply.headers[0] != [2]string{"content-type", "application/json"} {
			t.Errorf("%s: reply %s %v", c.name, x.reply.body, x.reply.headers)
		}
		if x.state["wasm.kvgate.hint"] != "rejected" {
			t.Errorf("%s: filter state %v", c.name, x.state)
		}
	}
	for st, n := range map[string]uint64{"413": 2, "415": 1, "400": 1} {
		k := metricname.Encode(filterspec.MetricRejected, metricname.Label{Name: "status", Value: st})
		if e.env.counts[k] != n {
			t.Errorf("%s: %d, want %d", k, e.env.counts[k], n)
		}
	}
}

// A panic anywhere in a hook, in the Plugin's callbacks or around them,
// answers 503 and never escapes into Envoy; a worker that panicked outside
// the Plugin gets a fresh Plugin and serves the next request.
func TestPanicsFailClosed(t *testing.T) {
	body := []byte(`{"kv_hints":1,"model":"m"}`)
	for _, where := range []string{"RequestHeaders", "BodyChunks", "AttributeString", "DrainBody", "AppendBody"} {
		e, first := mustFake(t, `{"trusted_senders":[{"source_cidr":"10.0.0.0/8"}]}`), body
		if where == "AppendBody" { // only a rewrite that grows the body appends
			e, first = mustFake(t, `{"trust_kv_hints":true}`), growingBody
		}
		x := e.request(withLength(len(first)), first, modeChunked, func(s *fakeStream) { s.panicOn = where })
		if x.reply == nil || x.reply.status != 503 || x.reply.details != filterspec.DetailsFailed || !bytes.Equal(x.reply.body, filterspec.FailureBody) {
			t.Errorf("panic in %s: reply %+v, forwarded %v %q", where, x.reply, x.forwarded, x.body)
		}
		x = e.request(withLength(len(body)), body, modeChunked, nil)
		if x.reply != nil || string(x.body) != `{"model":"m"}` {
			t.Errorf("after a panic in %s: reply %+v, body %q", where, x.reply, x.body)
		}
	}
	// A host call that fails is a 503 too.
	for _, where := range []string{"RequestHeaders", "RemoveRequestHeader", "AppendBody", "DrainBody"} {
		e := mustFake(t, `{"trust_kv_hints":true}`)
		body := body
		if where == "AppendBody" {
			body = growingBody // appended: it cannot be edited in place
		}
		x := e.request(withLength(len(body)), body, modeLength, func(s *fakeStream) { s.refuse = where })
		if x.reply == nil || x.reply.status != 503 {
			t.Errorf("%s failing: reply %+v, forwarded %v %q", where, x.reply, x.forwarded, x.body)
		}
	}
}

// growingBody's canonical envelope is longer than its text (a float as
// Python writes it), so its rewrite cannot be done in Envoy's slices.
var growingBody = []byte(`{"kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[],"x":1e15},"model":"m"}`)

// TestEditsInEnvoysSlices: a rewritten body is edited where it lies in
// Envoy's buffers, without appending, when the edits shrink it; one the
// rewrite grows is appended and the old one drained. Either way what goes
// on is the rulebook's body, however Envoy slices and splits it.
func TestEditsInEnvoysSlices(t *testing.T) {
	for _, c := range []struct {
		name     string
		body     []byte
		appended bool
	}{
		{"untrusted, hint first", []byte(`{"kv_hints":{"a":1},"model":"m","messages":[{"role":"user","content":"hello there"}]}`), false},
		{"untrusted, hint last", []byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}], "kv_hints":[1,2]}`), false},
		{"untrusted, two hints", []byte(`{"kv_hints":1,"model":"m","kv_hints":2,"x":3}`), false},
		{"trusted, spaced", []byte(`{"model":"m","kv_hints": {"protocol_version": "0.1", "message_id": "m", "actions": []}}`), false},
		{"trusted, grown", growingBody, true},
	} {
		trusted := strings.HasPrefix(c.name, "trusted")
		want, _ := kvhints.Rewrite(c.body, kvhints.Policy{Trusted: trusted})
		for _, chunk := range []int{1, 5, 16384} {
			for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
				e := mustFake(t, fmt.Sprintf(`{"trust_kv_hints":%v}`, trusted))
				appended := false
				x := e.request(withLength(len(c.body)), c.body, m, func(s *fakeStream) {
					s.chunk = chunk
					s.onAppend = func() { appended = true }
				})
				if x.reply != nil || !bytes.Equal(x.body, want) {
					t.Errorf("%s, %d-byte slices, %v: reply %+v, forwarded %q, want %q", c.name, chunk, m, x.reply, x.body, want)
				}
				if appended != c.appended {
					t.Errorf("%s, %d-byte slices, %v: appended %v, want %v", c.name, chunk, m, appended, c.appended)
				}
			}
		}
	}
}

// A stream handle the module did not make, or of a configuration that is
// gone, is answered 503.
func TestUnknownHandles(t *testing.T) {
	e := mustFake(t, "")
	s := &fakeStream{env: e.env, state: map[string]string{}}
	anchor := new(byte)
	f := abi.FilterOf(unsafePointer(anchor))
	e.streams[f] = s
	if st, _ := e.m.RequestHeaders(f, 12345, true); st != HeadersStopIteration || s.reply == nil || s.reply.status != 503 {
		t.Errorf("handle without a slot: status %d reply %+v", st, s.reply)
	}
	s.reply = nil
	e.m.DestroyConfig(e.cfg)
	h := uintptr(1)<<handleSlotShift | e.cfg<<handleConfigShift | 99
	if st, _ := e.m.RequestHeaders(f, h, true); st != HeadersStopIteration || s.reply == nil || s.reply.status != 503 {
		t.Errorf("destroyed configuration: status %d reply %+v", st, s.reply)
	}
	e.m.Destroy(h)
	e.m.Destroy(0)
}

// In an ordinary executable Envoy's callbacks are absent, and the module
// says so instead of crashing: this is the start-up error an Envoy
// outside the supported versions gets.
func TestCheckABI(t *testing.T) {
	why := CheckABI()
	if !strings.Contains(why, "does not provide the dynamic-module callback envoy_dynamic_module_callback_") || !strings.Contains(why, SupportedEnvoy) {
		t.Errorf("CheckABI() = %q", why)
	}
}

// fakeRunner runs conformance cases through the module and the fake
// Envoy, with the sender's properties as Envoy attributes.
type fakeRunner struct {
	e *fakeEnvoy
	m mode
}

func (*fakeRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesGRPCStatus
}

func (r *fakeRunner) Configure(t testing.TB, conf string) { r.e = mustFake(t, conf) }

func (r *fakeRunner) Send(c *vectors.Case) (vectors.Result, error) {
	var hs [][2]string
	hs = append(hs, [2]string{":method", c.Request.Method}, [2]string{":path", c.Request.Path})
	for k, v := range c.Request.Headers {
		hs = append(hs, [2]string{k, v})
	}
	uninspected := metricname.Encode(filterspec.MetricUninspected, metricname.Label{Name: "protocol", Value: "grpc"})
	before := r.e.env.counts[uninspected]
	x := r.e.request(hs, c.Request.Body, r.m, func(s *fakeStream) {
		if c.Sender == nil {
			return
		}
		s.mtls = c.Sender.MTLS
		for name, a := range map[string]abi.Attribute{"connection.uri_san_peer_certificate": abi.ConnectionURISANPeerCertificate,
			"connection.dns_san_peer_certificate": abi.ConnectionDNSSANPeerCertificate, "source.address": abi.SourceAddress} {
			if v, ok := c.Sender.Property(name); ok {
				s.attrs[a] = v
			}
		}
	})
	if errs := r.e.env.internalErrors(); len(errs) > 0 {
		return vectors.Result{}, fmt.Errorf("internal errors: %q", errs)
	}
	if x.streamed && r.e.env.counts[uninspected] == before {
		return vectors.Result{}, fmt.Errorf("a body chunk went upstream before the whole body was filtered")
	}
	if x.reply != nil {
		res := vectors.Result{Status: x.reply.status, Body: x.reply.body}
		for _, h := range x.reply.headers {
			switch h[0] {
			case "content-type":
				res.ContentType = h[1]
			case "grpc-status":
				res.GRPCStatus = h[1]
			}
		}
		return res, nil
	}
	return vectors.Result{Forwarded: x.forwarded, Body: x.body}, nil
}

func (r *fakeRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	return vectors.ReadCounters(c, func(s vectors.Series) (float64, error) {
		return float64(r.e.env.counts[s.ProxyWasmName()]), nil
	})
}

// TestVectors runs every conformance case, trusted senders included,
// through the module with the fake Envoy, in each of the three ways a
// body can arrive.
func TestVectors(t *testing.T) {
	r := &fakeRunner{}
	modes := map[string]mode{}
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		modes[m.String()] = m
	}
	vectors.Run(t, r, vectors.Dir(filepath.Join("..", "..", "tests", "vectors")),
		vectors.Variants(func(v string) { r.m = modes[v] }, modeLength.String(), modeChunked.String(), modeTrailers.String()))
}

// The body chunks that libkvgate/hooks.c answers in C, from the Next that
// each Go hook returns: the chunks before the end of a held body within
// the limit, and every chunk of a body that passes uninspected. The fake
// Envoy checks on every body hook of every test that the C answer would
// be the Go hook's; this test checks that the C path is taken where it
// should be, and not for a chunk that takes the body over the limit.
func TestNextBody(t *testing.T) {
	body := []byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[{"role":"user","content":"` + strings.Repeat("a", 300) + `"}]}`)
	chunked := append(append([][2]string(nil), jsonPost...), [2]string{"transfer-encoding", "chunked"})
	for _, c := range []struct {
		name, config string
		headers      [][2]string
		predicted    int  // body hooks answered ahead, of 3
		status       int  // the local reply, 0 for none
		stripped     bool // the hint was removed from what went on
	}{
		{"held", `{}`, chunked, 2, 0, true},
		{"over the limit", `{"max_body_bytes":200}`, chunked, 1, 413, false},
		{"excluded path", `{"exclude_paths":["/v1/chat/completions"]}`, chunked, 3, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := mustFake(t, c.config)
			x := e.request(c.headers, body, modeChunked, nil)
			if e.predicted != c.predicted {
				t.Errorf("%d body hooks answered ahead, want %d", e.predicted, c.predicted)
			}
			switch {
			case c.status != 0:
				if x.reply == nil || x.reply.status != c.status {
					t.Fatalf("reply %+v, want %d", x.reply, c.status)
				}
			case x.reply != nil || !x.forwarded:
				t.Fatalf("reply %+v, forwarded %v", x.reply, x.forwarded)
			case bytes.Contains(x.body, []byte("kv_hints")) == c.stripped:
				t.Errorf("forwarded %s", x.body)
			}
		})
	}
}

// The module parses a configuration once and logs it once, in the line
// every host logs, with every member; the threads' Plugins that take it
// log nothing more.
func TestConfiguredOnce(t *testing.T) {
	e := mustFake(t, `{"mode":"detect","max_depth":7,"exclude_paths":["/healthz"],"router_only":{"engines":["vllm"]}}`)
	for slot := 1; slot <= 3; slot++ {
		e.slot = slot
		if x := e.request(withLength(2), []byte(`{}`), modeLength, nil); x.reply != nil || !x.forwarded {
			t.Fatalf("slot %d: %+v", slot, x)
		}
	}
	var configured, detect int
	for _, l := range e.env.logs {
		switch {
		case strings.Contains(l, "kvgate: configured: "):
			configured++
			for _, want := range []string{"version=" + filterspec.Version + " ", "trust_kv_hints=false", "max_depth=7", "max_body_bytes=4194304",
				"exclude_paths=1", "grpc=pass", "trusted_senders=0", "mode=detect", "router_only=", " filter=test"} {
				if !strings.Contains(l, want) {
					t.Errorf("configured line %q lacks %q", l, want)
				}
			}
		case strings.Contains(l, "mode=detect: hints are decided"):
			detect++
		}
	}
	if configured != 1 || detect != 1 {
		t.Fatalf("%d configured lines and %d detect warnings for one configuration on 3 threads, want 1 and 1: %q", configured, detect, e.env.logs)
	}
}
