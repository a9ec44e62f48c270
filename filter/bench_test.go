package filter

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/proxywasm"
)

// BenchmarkRequest is one 1 KiB request through the plugin with a host
// that answers without work: the filter's own cost per request. Built for
// wasip1 and run under a wasm runtime, it shows the guest's cost alone.
func BenchmarkRequest(b *testing.B) {
	h := newFakeHost(`{}`)
	p, _ := newPlugin(h)
	body := []byte(`{"model":"m","kv_hints":` + refHint + `,"prompt":"` + strings.Repeat("x", 1024-len(refHint)-40) + `"}`)
	hdrs := proxywasm.EncodeHeaderMap([][2]string{{":method", "POST"}, {":path", "/v1/chat/completions"},
		{"content-type", "application/json"}, {"content-length", "1024"}})
	p.host = &allocFreeHost{fakeHost: h, hdrs: hdrs, body: body}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.OnContextCreate(2, rootID)
		p.OnRequestHeaders(2, 4, false)
		p.OnRequestBody(2, len(body), true)
		p.OnLog(2)
		p.OnDelete(2)
	}
}
