package wasm

import (
	"context"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvhints"
)

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"4MiB", 4 << 20}}

// timeGuest sends body b.N times through h and reports the time and rate
// in the guest (guestTime).
func timeGuest(b *testing.B, h *wzHost, body []byte) {
	b.SetBytes(int64(len(body)))
	guest := guestTime(b, h, body)
	b.ReportMetric(float64(len(body))*float64(b.N)/guest.Seconds()/1e6, "guest-MB/s")
}

// guestTime sends body b.N times through h, reports the time per request
// in the guest and returns it in all: the wall time less the time spent
// in host functions.
func guestTime(b *testing.B, h *wzHost, body []byte) time.Duration {
	h.hostTime = 0
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.request("/v1/chat/completions", body)
	}
	b.StopTimer()
	guest := time.Since(start) - h.hostTime
	b.ReportMetric(float64(guest.Nanoseconds())/float64(b.N), "guest-ns/op")
	return guest
}

// BenchmarkLifecycle measures one request through the compiled module under
// wazero's compiler (context create, headers, the whole body, log,
// delete; the untrusted hint is stripped, so the body is replaced) next to
// the same kvhints rewrite natively. MB/s is body bytes per second.
//
//	go test -run '^$' -bench Lifecycle -benchtime 2s ./wasm
func BenchmarkLifecycle(b *testing.B) {
	for _, s := range benchSizes {
		body := hintBody(s.n)
		b.Run("wasm/"+s.name, func(b *testing.B) {
			h := newWzHost(b, context.Background(), `{}`)
			defer h.close()
			if r := h.request("/v1/chat/completions", body); !r.forwarded || len(r.body) >= len(body) {
				b.Fatal("not stripped")
			}
			timeGuest(b, h, body)
			b.ReportMetric(float64(h.memSize())/(1<<20), "MiB-linear-memory")
		})
		b.Run("wasm-trusted/"+s.name, func(b *testing.B) {
			// The same body from a trusted sender: its canonical envelope
			// is admitted and the body forwarded as it came, not replaced.
			h := newWzHost(b, context.Background(), sendersDoc(1))
			defer h.close()
			setSender(h, true, routerID, "10.0.0.1:41000")
			if r := h.request("/v1/chat/completions", body); !r.forwarded || string(r.body) != string(body) || h.replaces != 0 {
				b.Fatal("not admitted unchanged")
			}
			timeGuest(b, h, body)
		})
		b.Run("native/"+s.name, func(b *testing.B) {
			var rw kvhints.Rewriter
			p := kvhints.Policy{MaxBodyBytes: 4 << 20}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, res := rw.Rewrite(body, p); res.Outcome != kvhints.OutcomeStripped {
					b.Fatal(res.Outcome)
				}
			}
		})
	}
}

// BenchmarkLifecycleRouterOnlyPaired alternates BenchmarkLifecycle's untrusted
// request through two hosts, without and with every preset configured (the
// body carries none of the fields), in blocks of 32 requests and
// reports each one's guest time per request and their ratio.
//
//	go test -run '^$' -bench LifecycleRouterOnlyPaired -count 6 ./wasm
func BenchmarkLifecycleRouterOnlyPaired(b *testing.B) {
	for _, s := range benchSizes[:3] {
		body := hintBody(s.n)
		b.Run(s.name, func(b *testing.B) {
			off := newWzHost(b, context.Background(), `{}`)
			defer off.close()
			on := newWzHost(b, context.Background(), `{"router_only":{"engines":["vllm","sglang","trtllm","dynamo","llm-d"]}}`)
			defer on.close()
			for _, h := range []*wzHost{off, on} {
				if r := h.request("/v1/chat/completions", body); !r.forwarded || len(r.body) >= len(body) {
					b.Fatal("not stripped")
				}
			}
			var tOff, tOn time.Duration
			run := func(h *wzHost, n int) time.Duration {
				h.hostTime = 0
				start := time.Now()
				for i := 0; i < n; i++ {
					h.request("/v1/chat/completions", body)
				}
				return time.Since(start) - h.hostTime
			}
			b.ResetTimer()
			for done := 0; done < b.N; done += 32 {
				n := min(32, b.N-done)
				tOff += run(off, n)
				tOn += run(on, n)
			}
			b.ReportMetric(float64(tOff.Nanoseconds())/float64(b.N), "off-guest-ns/op")
			b.ReportMetric(float64(tOn.Nanoseconds())/float64(b.N), "presets-guest-ns/op")
			b.ReportMetric(float64(tOn)/float64(tOff), "presets/off")
		})
	}
}
