package filter

import (
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/proxywasm"

	"bytes"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/internal/wiretest"
	"github.com/kvgate/kvgate/kvhints"
)

var grpcCT = map[string]string{"content-type": "application/grpc"}

// A gRPC request passes uninspected, counted, however its body arrives,
// and streams through once its first bytes decided; a JSON body labelled
// gRPC is inspected like any other; the content-length limit waits for
// the bytes.
func TestGRPCPassthrough(t *testing.T) {
	msg := wiretest.GRPCFrame(0, []byte("\x0a\x05hello\x12\x03abc"))
	hint := []byte(`{"kv_hints":{"protocol_version":"0.1"},"model":"m"}`)
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		t.Run(m.String(), func(t *testing.T) {
			h := newFakeHost(`{"max_body_bytes":20}`)
			p, _ := newPlugin(h)
			uninspected := metric(filterspec.MetricUninspected, "protocol", "grpc")
			for i, ct := range []string{"application/grpc", "application/grpc+proto", "application/GRPC; a=b"} {
				out := send(p, h, uint32(2+i), "POST", "/pkg.Service/Method", map[string]string{"content-type": ct}, msg, m)
				if !out.forwarded || !bytes.Equal(out.body, msg) {
					t.Fatalf("%s: %+v", ct, out)
				}
				if h.counters[uninspected] != int64(i+1) {
					t.Fatalf("%s: uninspected counter %d", ct, h.counters[uninspected])
				}
			}
			// Over the body limit: gRPC is not buffered, so no limit.
			big := wiretest.GRPCFrame(0, bytes.Repeat([]byte{0x0a}, 100))
			if out := send(p, h, 9, "POST", "/s/M", grpcCT, big, m); !out.forwarded || !bytes.Equal(out.body, big) {
				t.Fatalf("large gRPC message: %+v", out)
			}
			// JSON labelled gRPC: inspected (the hint is removed).
			h2 := newFakeHost(`{}`)
			p2, _ := newPlugin(h2)
			out := send(p2, h2, 2, "POST", "/v1/completions", grpcCT, hint, m)
			if !out.forwarded || string(out.body) != `{"model":"m"}` || out.streamed {
				t.Fatalf("JSON labelled gRPC: %+v", out)
			}
			// UTF-32-BE JSON labelled gRPC: inspected, refused as UTF-32,
			// the gRPC way (INVALID_ARGUMENT).
			out = send(p2, h2, 3, "POST", "/v1/completions", grpcCT, wiretest.UTF32BE(string(hint)), m)
			if out.forwarded || !isGRPCReply(out.local, "3", "UTF-32") || h2.counters[metric(filterspec.MetricRejected, "status", "400")] != 1 {
				t.Fatalf("UTF-32-BE JSON labelled gRPC: %+v", out)
			}
			// Over the limit and not gRPC: 413 (RESOURCE_EXHAUSTED), also
			// with a content-length.
			out = send(p, h, 10, "POST", "/v1/completions", grpcCT, []byte(`{"prompt":"0123456789012345"}`), m)
			if !isGRPCReply(out.local, "8", "limit of 20 bytes") || h.counters[metric(filterspec.MetricRejected, "status", "413")] != 1 {
				t.Fatalf("JSON over the limit labelled gRPC: %+v", out)
			}
			if h2.counters[metric(filterspec.MetricUninspected, "protocol", "grpc")] != 0 {
				t.Error("JSON counted as uninspected gRPC")
			}
			if len(p.streams) != 0 || len(p2.streams) != 0 {
				t.Error("streams leak")
			}
		})
	}
}

// A gRPC stream is decided from its first bytes, however few arrive at a
// time, and then streams: later chunks go through as they come.
func TestGRPCStreams(t *testing.T) {
	h := newFakeHost(`{}`)
	p, _ := newPlugin(h)
	body := append(wiretest.GRPCFrame(0, []byte("\x08\x01")), wiretest.GRPCFrame(0, []byte("\x08\x02"))...)
	p.OnContextCreate(2, rootID)
	h.headers = [][2]string{{":path", "/s/M"}, {"content-type", "application/grpc"}}
	if a := p.OnRequestHeaders(2, 2, false).Action; a != proxywasm.ActionContinue {
		t.Fatal(a)
	}
	// The first unit Python would decode (UTF-32-BE, the length bytes) is
	// U+0000: decided at the fifth byte.
	for i := range body {
		h.body = body[:i+1]
		want := proxywasm.ActionContinue
		if i+1 < kvhints.GRPCPrefixLen {
			want = proxywasm.ActionPause
		}
		if a := p.OnRequestBody(2, i+1, false).Action; a != want {
			t.Fatalf("after %d bytes: %v, want %v", i+1, a, want)
		}
	}
	if h.local != nil || h.counters[metric(filterspec.MetricUninspected, "protocol", "grpc")] != 1 {
		t.Fatalf("local %+v, counters %v", h.local, h.counters)
	}
}

// With "grpc": "refuse" a gRPC request is answered the gRPC way, from its
// headers, whatever its body; other requests are filtered as ever.
func TestGRPCRefuse(t *testing.T) {
	h := newFakeHost(`{"grpc":"refuse"}`)
	p, _ := newPlugin(h)
	for i, body := range [][]byte{wiretest.GRPCFrame(0, []byte("x")), []byte(`{"kv_hints":1}`)} {
		for _, m := range []mode{modeLength, modeChunked} {
			out := send(p, h, uint32(2+i), "POST", "/s/M", map[string]string{"content-type": "application/grpc+proto", "content-encoding": "gzip"}, body, m)
			if out.forwarded || out.local == nil {
				t.Fatalf("%q: %+v", body, out)
			}
			lr := out.local
			want := [][2]string{{"content-type", "application/grpc"}, {"grpc-status", "7"}, {"grpc-message", filterspec.GRPCRefusedMessage}}
			if lr.status != 200 || lr.details != filterspec.DetailsGRPCRefused || len(lr.body) != 0 || !equalHeaders(lr.headers, want) {
				t.Fatalf("reply %+v", lr)
			}
		}
	}
	// Without a body too; other requests without a body pass.
	p.OnContextCreate(5, rootID)
	h.local, h.headers = nil, [][2]string{{":path", "/s/M"}, {"content-type", "application/grpc"}}
	if a := p.OnRequestHeaders(5, 2, true).Action; a != proxywasm.ActionPause || h.local == nil || h.local.status != 200 {
		t.Fatalf("gRPC without a body: %v %+v", a, h.local)
	}
	p.OnContextCreate(6, rootID)
	h.local, h.headers = nil, [][2]string{{":path", "/v1/models"}, {"content-encoding", "gzip"}}
	if a := p.OnRequestHeaders(6, 2, true).Action; a != proxywasm.ActionContinue || h.local != nil {
		t.Fatalf("GET without a body: %v %+v", a, h.local)
	}
	if n := h.counters[metric(filterspec.MetricRefused, "reason", "grpc")]; n != 5 {
		t.Errorf("refused %d, want 5", n)
	}
	for _, c := range filterspec.GRPCRefusedMessage {
		if c < 0x20 || c > 0x7e || c == '%' {
			t.Fatalf("grpc-message needs percent-encoding: %q", c)
		}
	}
	if out := send(p, h, 9, "POST", "/v1/chat", jsonCT, []byte(`{"kv_hints":1,"a":2}`), modeLength); !out.forwarded || string(out.body) != `{"a":2}` {
		t.Errorf("JSON with refuse: %+v", out)
	}
	// An excluded path is not touched, gRPC or not.
	h = newFakeHost(`{"grpc":"refuse","exclude_paths":["/grpc/*"]}`)
	p, _ = newPlugin(h)
	if out := send(p, h, 2, "POST", "/grpc/M", grpcCT, wiretest.GRPCFrame(0, nil), modeLength); !out.forwarded {
		t.Errorf("excluded gRPC: %+v", out)
	}
}

// isGRPCReply reports whether lr is a gRPC answer with grpc-status code and
// a grpc-message that contains msg.
func isGRPCReply(lr *localReply, code, msg string) bool {
	if lr == nil || lr.status != 200 || len(lr.body) != 0 || len(lr.headers) != 3 {
		return false
	}
	return lr.headers[0] == [2]string{"content-type", "application/grpc"} && lr.headers[1] == [2]string{"grpc-status", code} &&
		lr.headers[2][0] == "grpc-message" && strings.Contains(lr.headers[2][1], msg)
}

// Every answer of the filter to a request labelled gRPC is a gRPC answer:
// 415 as UNIMPLEMENTED, a failure as UNAVAILABLE; the grpc-message is
// percent-encoded.
func TestGRPCAnswers(t *testing.T) {
	h := newFakeHost(`{}`)
	p, _ := newPlugin(h)
	out := send(p, h, 2, "POST", "/s/M", map[string]string{"content-type": "application/grpc", "content-encoding": "gzip"}, wiretest.GRPCFrame(0, nil), modeLength)
	if !isGRPCReply(out.local, "12", "") || h.counters[metric(filterspec.MetricRejected, "status", "415")] != 1 {
		t.Errorf("415: %+v", out)
	}
	h.fail["RequestBody"] = true
	out = send(p, h, 3, "POST", "/s/M", grpcCT, wiretest.GRPCFrame(0, nil), modeLength)
	if !isGRPCReply(out.local, "14", "could not be filtered") || out.local.details != filterspec.DetailsFailed {
		t.Errorf("failure: %+v", out)
	}
}

func equalHeaders(a, b [][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
