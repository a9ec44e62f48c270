package native

import (
	"strings"
	"testing"
)

// BenchmarkRequest is the module's Go side of one request, the Plugin
// included, as Envoy drives it (headers, one body hook, destroy) against
// the fake Envoy: what the native filter adds to Envoy's own work, less
// the cgo transitions (tests/envoybench measures the whole in Envoy).
func BenchmarkRequest(b *testing.B) {
	for _, c := range []struct {
		name, config string
		body         string
	}{
		{"untrusted-4KiB", `{}`, `{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"}]}`},
		{"no-hint-4KiB", `{}`, `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 4030) + `"}]}`},
		{"untrusted-1MiB", `{}`, `{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := mustFake(b, c.config)
			body := []byte(c.body)
			hs := withLength(len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				x := e.request(hs, body, modeLength, func(s *fakeStream) { s.chunk = 16 << 10 })
				if x.reply != nil || !x.forwarded {
					b.Fatal(x.reply)
				}
			}
		})
	}
}
