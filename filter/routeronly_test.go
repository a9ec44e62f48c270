package filter

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/proxywasm"
)

// sendHeaders runs one request whose headers are given as pairs (so a
// name can occur twice, in any case) through p, with body (none when
// empty, as the end of the stream at the headers).
func sendHeaders(p *Plugin, h *fakeHost, id uint32, path string, hdrs [][2]string, body []byte) outcome {
	h.local, h.body, h.set = nil, nil, nil
	h.headers = append([][2]string{{":method", "POST"}, {":path", path}, {":authority", "worker"}}, hdrs...)
	p.OnContextCreate(id, rootID)
	defer func() { p.OnLog(id); p.OnDelete(id) }()
	a := p.OnRequestHeaders(id, len(h.headers), len(body) == 0).Action
	if h.local != nil {
		return outcome{local: h.local}
	}
	if len(body) == 0 {
		return outcome{forwarded: a == proxywasm.ActionContinue}
	}
	h.body = append(h.body, body...)
	if a = p.OnRequestBody(id, len(h.body), true).Action; h.local != nil {
		return outcome{local: h.local}
	}
	return outcome{forwarded: a == proxywasm.ActionContinue, body: h.body}
}

// TestRouterOnlyHeaders: every value of a router-only header goes, in any
// case, on every request an untrusted sender makes (with no body, on an
// excluded path, labelled gRPC), counted once per field and named in the
// property; a trusted sender keeps them; refuse answers 400 naming the
// header but not its value; detect counts and keeps them.
func TestRouterOnlyHeaders(t *testing.T) {
	const ro = `"router_only":{"engines":["llm-d"],"headers":["X-Mine"]}`
	removed := func(f string) string { return metric(filterspec.MetricRouterOnlyRemoved, "field", f) }
	detected := func(f string) string { return metric(filterspec.MetricRouterOnlyDetected, "field", f) }
	hdrs := [][2]string{{"content-type", "application/json"}, {"X-Prefiller-Host-Port", "10.9.9.9:1"},
		{"x-prefiller-host-port", "10.9.9.9:2"}, {"x-mine", "v"}, {"x-other", "kept"}}
	body := []byte(`{"model":"m"}`)
	for _, c := range []struct {
		name, config, path string
		body               []byte
		trusted, refused   bool
		detect             bool
	}{
		{"body", `{` + ro + `}`, "/v1/chat/completions", body, false, false, false},
		{"no body", `{` + ro + `}`, "/v1/models", nil, false, false, false},
		{"excluded path", `{"exclude_paths":["/upload"],` + ro + `}`, "/upload", body, false, false, false},
		{"trusted", `{"trust_kv_hints":true,` + ro + `}`, "/v1/chat/completions", body, true, false, false},
		{"trusted sender", `{"trusted_senders":[{"source_cidr":"10.0.0.0/8"}],` + ro + `}`, "/v1/chat/completions", body, true, false, false},
		{"refuse", `{"router_only":{"engines":["llm-d"],"headers":["X-Mine"],"untrusted":"refuse"}}`, "/v1/chat/completions", body, false, true, false},
		{"detect", `{"mode":"detect",` + ro + `}`, "/v1/chat/completions", body, false, false, true},
		{"detect refuse", `{"mode":"detect","router_only":{"engines":["llm-d"],"headers":["X-Mine"],"untrusted":"refuse"}}`, "/v1/chat/completions", body, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(c.config)
			p, ok := newPlugin(h)
			if !ok {
				t.Fatalf("configuration rejected: %q", h.logs)
			}
			if strings.Contains(c.config, "trusted_senders") {
				h.setSender(false, "", "", "10.1.2.3:5000")
			}
			out := sendHeaders(p, h, 7, c.path, hdrs, c.body)
			_, prefiller := h.header("x-prefiller-host-port")
			_, mine := h.header("x-mine")
			_, other := h.header("x-other")
			switch {
			case c.refused:
				if out.local == nil || out.local.status != 400 || out.local.details != filterspec.DetailsRouterOnlyRefused ||
					!strings.Contains(string(out.local.body), `x-prefiller-host-port`) || strings.Contains(string(out.local.body), "10.9.9.9") {
					t.Fatalf("refuse: %+v", out.local)
				}
				if h.counters[metric(filterspec.MetricRefused, "reason", "router_only")] != 1 || h.counters[removed("x-prefiller-host-port")] != 0 {
					t.Fatalf("refuse counted %v", h.counters)
				}
			case c.trusted || c.detect:
				if !out.forwarded || !prefiller || !mine || !other {
					t.Fatalf("%s: headers %q, forwarded %v", c.name, h.headers, out.forwarded)
				}
				if n := h.counters[detected("x-prefiller-host-port")]; c.detect != (n == 1) || h.counters[removed("x-prefiller-host-port")] != 0 {
					t.Fatalf("%s: counted %v", c.name, h.counters)
				}
			default:
				if !out.forwarded || prefiller || mine || !other {
					t.Fatalf("headers %q, forwarded %v", h.headers, out.forwarded)
				}
				if h.counters[removed("x-prefiller-host-port")] != 1 || h.counters[removed("x-mine")] != 1 {
					t.Fatalf("counted %v", h.counters)
				}
			}
			want := "x-prefiller-host-port,x-mine"
			if c.trusted {
				want = ""
			}
			if got := h.set[filterspec.PropertyRouterOnly]; got != want {
				t.Fatalf("%s = %q, want %q", filterspec.PropertyRouterOnly, got, want)
			}
		})
	}
}

// TestRouterOnlyGRPC: a gRPC request's router-only header goes even when
// its body passes uninspected, and a refusal is a gRPC answer.
func TestRouterOnlyGRPC(t *testing.T) {
	grpc := [][2]string{{"content-type", "application/grpc"}, {"x-dp-rank", "3"}}
	msg := []byte("\x00\x00\x00\x00\x07\x0a\x05llama")
	h := newFakeHost(`{"router_only":{"engines":["dynamo"]}}`)
	p, _ := newPlugin(h)
	if out := sendHeaders(p, h, 3, "/pkg.Svc/Call", grpc, msg); !out.forwarded {
		t.Fatalf("not forwarded: %+v", out.local)
	}
	if _, ok := h.header("x-dp-rank"); ok {
		t.Fatal("x-dp-rank forwarded")
	}
	h = newFakeHost(`{"router_only":{"engines":["dynamo"],"untrusted":"refuse"}}`)
	p, _ = newPlugin(h)
	out := sendHeaders(p, h, 4, "/pkg.Svc/Call", grpc, msg)
	if out.local == nil || out.local.status != 200 || len(out.local.body) != 0 {
		t.Fatalf("refusal %+v", out.local)
	}
	found := false
	for _, kv := range out.local.headers {
		found = found || kv == [2]string{"grpc-status", "3"}
	}
	if !found {
		t.Fatalf("refusal headers %q", out.local.headers)
	}
}
