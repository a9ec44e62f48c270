package filter

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/proxywasm"
)

const refHint = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

var jsonCT = map[string]string{"content-type": "application/json"}

func metric(family, label, value string) string {
	if label == "" {
		return family
	}
	return family + "." + label + "." + value
}

func TestConfigureDefinesAllSeries(t *testing.T) {
	h := newFakeHost(`{"trust_kv_hints":true}`)
	if _, ok := newPlugin(h); !ok {
		t.Fatal(h.logs)
	}
	want := []string{
		metric(filterspec.MetricIgnored, "reason", "untrusted"), metric(filterspec.MetricIgnored, "reason", "unknown_version"),
		metric(filterspec.MetricIgnored, "reason", "oversized"), metric(filterspec.MetricIgnored, "reason", "malformed"),
		filterspec.MetricAdmitted,
		metric(filterspec.MetricRejected, "status", "400"), metric(filterspec.MetricRejected, "status", "413"), metric(filterspec.MetricRejected, "status", "415"),
		metric(filterspec.MetricUninspected, "protocol", "grpc"), metric(filterspec.MetricRefused, "reason", "grpc"), metric(filterspec.MetricRefused, "reason", "router_only"),
		metric(filterspec.MetricDetected, "reason", "untrusted"), metric(filterspec.MetricDetected, "reason", "unknown_version"),
		metric(filterspec.MetricDetected, "reason", "oversized"), metric(filterspec.MetricDetected, "reason", "malformed"),
	}
	if strings.Join(h.names, " ") != strings.Join(want, " ") {
		t.Fatalf("defined %q\nwant    %q", h.names, want)
	}
	for _, n := range want {
		if v, ok := h.counters[n]; !ok || v != 0 {
			t.Errorf("%s = %d, %v", n, v, ok)
		}
	}
}

func TestConfigureRejects(t *testing.T) {
	h := newFakeHost(`{"trust_kv_hints":true,"color":"blue"}`)
	if _, ok := newPlugin(h); ok {
		t.Fatal("accepted")
	}
	if len(h.logs) == 0 || !strings.Contains(h.logs[len(h.logs)-1], `unknown member "color"`) {
		t.Fatalf("logs %q", h.logs)
	}
	h = newFakeHost(`{}`)
	h.fail["DefineCounter"] = true
	if _, ok := newPlugin(h); ok {
		t.Fatal("accepted with failing metrics")
	}
	h = newFakeHost(`{}`)
	h.fail["PluginConfig"] = true
	if _, ok := newPlugin(h); ok {
		t.Fatal("accepted with unreadable configuration")
	}
	// An empty configuration is the defaults.
	h = newFakeHost(``)
	p, ok := newPlugin(h)
	if !ok || p.root(rootID).cfg.MaxBodyBytes != filterspec.DefaultMaxBodyBytes || p.root(rootID).cfg.TrustKVHints {
		t.Fatal("defaults")
	}
}

func TestLifecycle(t *testing.T) {
	body := []byte(`{"model":"m","kv_hints":` + refHint + `,"prompt":"hi"}`)
	stripped := []byte(`{"model":"m","prompt":"hi"}`)
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		t.Run(m.String(), func(t *testing.T) {
			h := newFakeHost(`{}`)
			p, _ := newPlugin(h)
			out := send(p, h, 2, "POST", "/v1/chat/completions", jsonCT, body, m)
			if !out.forwarded || !bytes.Equal(out.body, stripped) {
				t.Fatalf("forwarded %v %q local %+v", out.forwarded, out.body, out.local)
			}
			if _, ok := h.header("content-length"); ok {
				t.Error("content-length kept")
			}
			if h.counters[metric(filterspec.MetricIgnored, "reason", "untrusted")] != 1 {
				t.Errorf("counters %v", h.counters)
			}
			// trusted: admitted, pretty hint compacted
			h = newFakeHost(`{"trust_kv_hints":true}`)
			p, _ = newPlugin(h)
			pretty := bytes.Replace(body, []byte(`"message_id":`), []byte("\n  \"message_id\" : "), 1)
			out = send(p, h, 3, "POST", "/v1/chat/completions", jsonCT, pretty, m)
			if !out.forwarded || !bytes.Equal(out.body, body) {
				t.Fatalf("forwarded %v %q", out.forwarded, out.body)
			}
			if h.counters[filterspec.MetricAdmitted] != 1 {
				t.Errorf("counters %v", h.counters)
			}
			if len(p.streams) != 0 {
				t.Errorf("streams leak: %d", len(p.streams))
			}
		})
	}
}

func TestNoBodyAndExcluded(t *testing.T) {
	h := newFakeHost(`{"exclude_paths":["/static/*"]}`)
	p, _ := newPlugin(h)
	p.OnContextCreate(2, rootID)
	h.headers = [][2]string{{":path", "/v1/models"}}
	if a := p.OnRequestHeaders(2, 1, true).Action; a != proxywasm.ActionContinue || h.local != nil {
		t.Fatal("headers-only request not passed")
	}
	p.OnLog(2)
	bad := []byte(`{"kv_hints":1`)
	out := send(p, h, 3, "POST", "/static/x", nil, bad, modeChunked)
	if !out.forwarded || !bytes.Equal(out.body, bad) {
		t.Fatalf("excluded path inspected: %+v", out)
	}
	out = send(p, h, 4, "POST", "/static/../v1/chat", nil, bad, modeChunked)
	if out.forwarded || out.local == nil || out.local.status != 400 {
		t.Fatalf("non-canonical path excluded: %+v", out)
	}
}

func TestRejections(t *testing.T) {
	h := newFakeHost(`{"max_body_bytes":10}`)
	p, _ := newPlugin(h)
	check := func(out outcome, status int) {
		t.Helper()
		if out.forwarded || out.local == nil || out.local.status != status {
			t.Fatalf("got %+v, want local %d", out, status)
		}
		if out.local.details != filterspec.DetailsRejected || len(out.local.headers) != 1 || out.local.headers[0] != [2]string{"content-type", "application/json"} {
			t.Fatalf("reply %+v", out.local)
		}
		var e struct {
			Error struct {
				Message string
				Type    string
				Code    int
			}
		}
		if err := json.Unmarshal(out.local.body, &e); err != nil || e.Error.Code != status || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Fatalf("body %s (%v)", out.local.body, err)
		}
	}
	check(send(p, h, 2, "POST", "/", map[string]string{"content-encoding": "gzip"}, []byte(`{}`), modeLength), 415)
	check(send(p, h, 3, "POST", "/", map[string]string{"Content-Encoding": "identity, br"}, []byte(`{}`), modeChunked), 415)
	check(send(p, h, 4, "POST", "/", nil, []byte(`{"a":"0123456789"}`), modeLength), 413)
	check(send(p, h, 5, "POST", "/", nil, []byte(`{"a":"0123456789"}`), modeChunked), 413)
	check(send(p, h, 6, "POST", "/", nil, []byte(`{"a":"0123456789"}`), modeTrailers), 413)
	check(send(p, h, 7, "POST", "/", nil, []byte(`{"a":`), modeTrailers), 400)
	check(send(p, h, 8, "POST", "/", nil, []byte(" \n"), modeChunked), 400)
	// 415 wins over 413 in whatever order the headers come.
	check(send(p, h, 9, "POST", "/", map[string]string{"content-encoding": "gzip"}, []byte(`{"a":"0123456789"}`), modeLength), 415)
	want := map[string]int64{"400": 2, "413": 3, "415": 3}
	for s, n := range want {
		if got := h.counters[metric(filterspec.MetricRejected, "status", s)]; got != n {
			t.Errorf("rejected %s = %d want %d", s, got, n)
		}
	}
	if len(h.logs) != 1 { // only the configure line; rejections are not logged
		t.Errorf("logs %q", h.logs)
	}
}

// TestFailClosed checks that every host failure and panic ends in a 503 and
// never in a forwarded body.
func TestFailClosed(t *testing.T) {
	body := []byte(`{"kv_hints":{"x":1},"p":1}`)
	for _, m := range []string{"RequestHeaders", "RemoveRequestHeader", "RequestBody", "ReplaceRequestBody"} {
		for _, panics := range []bool{false, true} {
			for _, md := range []mode{modeLength, modeTrailers} {
				h := newFakeHost(`{}`)
				p, _ := newPlugin(h)
				if panics {
					h.panicOn = m
				} else {
					h.fail[m] = true
				}
				out := send(p, h, 2, "POST", "/", nil, body, md)
				if out.forwarded || out.local == nil || out.local.status != 503 || out.local.details != filterspec.DetailsFailed {
					t.Errorf("%s panics=%v %v: %+v", m, panics, md, out)
				}
				if h.counters[metric(filterspec.MetricIgnored, "reason", "untrusted")] != 0 {
					t.Errorf("%s: counted a hint that was not forwarded", m)
				}
				// The plugin keeps working afterwards.
				h.fail, h.panicOn = map[string]bool{}, ""
				if out := send(p, h, 3, "POST", "/", nil, body, md); !out.forwarded || string(out.body) != `{"p":1}` {
					t.Errorf("%s: after a failure: %+v", m, out)
				}
			}
		}
	}
	// Unconfigured root, unknown stream.
	h := newFakeHost(`{"bad":1}`)
	p, _ := newPlugin(h)
	if out := send(p, h, 2, "POST", "/", nil, body, modeLength); out.forwarded || out.local == nil || out.local.status != 503 {
		t.Errorf("unconfigured: %+v", out)
	}
	h.local = nil
	if a := p.OnRequestBody(99, 3, true).Action; a != proxywasm.ActionPause || h.local == nil || h.local.status != 503 {
		t.Errorf("unknown stream body: %v %+v", a, h.local)
	}
	// If even the local reply fails, the guest traps (panics out).
	h = newFakeHost(`{}`)
	p, _ = newPlugin(h)
	h.fail["RequestBody"], h.fail["SendLocalResponse"] = true, true
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no trap when the 503 cannot be sent")
			}
		}()
		send(p, h, 2, "POST", "/", nil, body, modeLength)
	}()
}

func TestUnchangedBodyNotReplaced(t *testing.T) {
	h := newFakeHost(`{"trust_kv_hints":true}`)
	p, _ := newPlugin(h)
	body := []byte(`{"kv_hints":` + refHint + `}`)
	h.fail["ReplaceRequestBody"] = true // must not be called
	for _, b := range [][]byte{body, []byte(`{"a":1}`), []byte(`[1]`), []byte(`{"kv_hints":null}`)} {
		if out := send(p, h, 2, "POST", "/", nil, b, modeLength); !out.forwarded || !bytes.Equal(out.body, b) {
			t.Errorf("%s: %+v", b, out)
		}
	}
}

func TestSteadyStateAllocations(t *testing.T) {
	// Also with every router-only preset on, for a request that carries
	// none of the fields.
	for _, doc := range []string{`{}`, `{"router_only":{"engines":["vllm","sglang","trtllm","dynamo","llm-d"]}}`} {
		h := newFakeHost(doc)
		p, _ := newPlugin(h)
		body := []byte(`{"model":"m","kv_hints":` + refHint + `,"prompt":"` + strings.Repeat("x", 1000) + `"}`)
		hdrs := proxywasm.EncodeHeaderMap([][2]string{{":path", "/v1/chat/completions"}, {"content-length", "1234"}, {"x-session-id", "s"}})
		host := &allocFreeHost{fakeHost: h, hdrs: hdrs, body: body}
		p.host = host
		if n := requestAllocs(p, len(body)); n != 0 {
			t.Errorf("%s: %v allocations per request", doc, n)
		}
	}
}

// requestAllocs is the allocations of one request of size body bytes
// through p's whole lifecycle (context 2 of rootID), after a first
// request that warms its buffers.
func requestAllocs(p *Plugin, size int) float64 {
	run := func() {
		p.OnContextCreate(2, rootID)
		p.OnRequestHeaders(2, 2, false)
		p.OnRequestBody(2, size, true)
		p.OnLog(2)
	}
	run()
	return testing.AllocsPerRun(100, run)
}

// allocFreeHost answers without allocating, to measure the filter alone.
type allocFreeHost struct {
	*fakeHost
	hdrs, body []byte
}

func (h *allocFreeHost) RequestHeaders() ([]byte, error)      { return h.hdrs, nil }
func (h *allocFreeHost) RemoveRequestHeader(string) error     { return nil }
func (h *allocFreeHost) RequestBody(int) ([]byte, error)      { return h.body, nil }
func (h *allocFreeHost) ReplaceRequestBody(int, []byte) error { return nil }
func (h *allocFreeHost) IncrementCounter(uint32, int64) error { return nil }
