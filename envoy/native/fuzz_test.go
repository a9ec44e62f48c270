package native

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

// FuzzHooks drives the module through the event hooks with what crosses
// the ABI chosen by the fuzzer: the body and how Envoy splits it into
// hooks and slices, the end-of-stream flags, Content-Length and
// Content-Type, trailers, and the sender's attributes. Whatever arrives,
// no panic reaches the hooks' recovery (no "internal error" is logged),
// at most one local reply is sent, no body byte goes upstream before the
// whole body was filtered unless it passed as gRPC, and what is forwarded
// is exactly what kvhints makes of the body: the 400s, 413s and the
// rewritten bytes of the rulebook.
func FuzzHooks(f *testing.F) {
	f.Add([]byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[]}`), uint8(0), uint8(3), false, false, false, "")
	f.Add([]byte(`{"kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]}}`), uint8(1), uint8(7), true, true, false, "10.1.2.3:80")
	f.Add([]byte(`{"a":`), uint8(2), uint8(1), false, true, false, "")
	f.Add([]byte("\x00\x00\x00\x00\x05hello"), uint8(1), uint8(2), false, false, true, "")
	f.Add([]byte(`[1,2,3]`), uint8(0), uint8(0), true, false, false, "[::1]:9")
	const limit = 256
	f.Fuzz(func(t *testing.T, body []byte, how, split uint8, trusted, withLength, grpc bool, source string) {
		doc := fmt.Sprintf(`{"max_body_bytes":%d,"trusted_senders":[{"source_cidr":"10.0.0.0/8"}]}`, limit)
		e, err := newFakeEnvoy(doc)
		if err != nil {
			t.Fatal(err)
		}
		if trusted {
			source = "10.1.2.3:5"
		}
		hs := [][2]string{{":method", "POST"}, {":path", "/v1/completions"}}
		if grpc {
			hs = append(hs, [2]string{"content-type", "application/grpc"})
		}
		if withLength {
			hs = append(hs, [2]string{"content-length", fmt.Sprint(len(body))})
		}
		m := mode(how % 3)
		x := e.request(hs, body, m, func(s *fakeStream) {
			if source != "" {
				s.attrs[abi.SourceAddress] = []byte(source)
			}
			no := false
			s.mtls = &no
		})
		if errs := e.env.internalErrors(); len(errs) > 0 {
			t.Fatalf("internal errors: %q", errs)
		}
		if x.reply != nil {
			switch x.reply.status {
			case 400, 413, 415:
			case 200:
				if !grpc {
					t.Fatalf("a gRPC answer to a request not labelled gRPC: %+v", x.reply)
				}
			default:
				t.Fatalf("answer %d (%s)", x.reply.status, x.reply.body)
			}
		}
		if grpc {
			return // a body that passes as gRPC streams on uninspected
		}
		if x.streamed {
			t.Fatal("a body chunk went upstream before the whole body was filtered")
		}
		if len(body) == 0 {
			if !x.forwarded || x.reply != nil {
				t.Fatalf("an empty body: forwarded %v, reply %+v", x.forwarded, x.reply)
			}
			return
		}
		if len(body) > limit {
			if x.reply == nil || x.reply.status != 413 {
				t.Fatalf("a body of %d bytes over the limit of %d: reply %+v", len(body), limit, x.reply)
			}
			return
		}
		// The policy the rules reach for the sender.
		cfg, err := filterspec.ParseConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		pol := cfg.Policy()
		sp := filterspec.SenderProps{MTLS: []byte{0}}
		if source != "" {
			sp.SourceAddress = []byte(source)
		}
		pol.Trusted = cfg.TrustedSenders.Match(&sp) >= 0
		want, res := kvhints.Rewrite(body, pol)
		if res.Outcome == kvhints.OutcomeRejected {
			if x.reply == nil || x.reply.status != res.Status {
				t.Fatalf("a body the rules reject with %d: reply %+v, forwarded %q", res.Status, x.reply, x.body)
			}
			return
		}
		if x.reply != nil || !x.forwarded || !bytes.Equal(x.body, want) {
			t.Fatalf("forwarded %v %q (reply %+v), want %q", x.forwarded, x.body, x.reply, want)
		}
		// The headers went on with the body, with its length (chunked
		// after trailers).
		cl, ok := header(x.headers, "content-length")
		if m == modeTrailers && ok || m != modeTrailers && cl != fmt.Sprint(len(x.body)) {
			t.Fatalf("content-length %q (%v) for %d bytes forwarded (%v)", cl, ok, len(x.body), m)
		}
	})
}

// FuzzHeaderMap: the request headers Envoy hands over, whatever their
// bytes, reach the Plugin as exactly the proxy-wasm map the wasm host
// would have given it.
func FuzzHeaderMap(f *testing.F) {
	f.Add([]byte(":path\x00/v1\x00content-type\x00application/json"))
	f.Add([]byte("a\x00\x00\x00b"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		parts := bytes.Split(raw, []byte{0})
		var hs []abi.Header
		var pairs [][2]string
		for i := 0; i+1 < len(parts); i += 2 {
			hs = append(hs, abi.Header{Key: parts[i], Value: parts[i+1]})
			pairs = append(pairs, [2]string{string(parts[i]), string(parts[i+1])})
		}
		h := &host{s: &fakeStream{headers: hs}}
		got, err := h.RequestHeaders()
		if err != nil {
			t.Fatal(err)
		}
		if want := proxywasm.EncodeHeaderMap(pairs); !bytes.Equal(got, want) {
			t.Fatalf("header map %q, want %q", got, want)
		}
	})
}
