package host

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/wasm"
)

// benchBody is a chat request of size bytes carrying a client hint, so the
// untrusted filter rewrites it (the changed-body path).
func benchBody(size int) []byte {
	head := `{"model":"llama","kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},"messages":[{"role":"user","content":"`
	tail := `"}],"max_tokens":16}`
	return []byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail)
}

// BenchmarkFilter runs the embedded kvgate.wasm through Host.Filter, one
// request at a time: the host's own cost on top of the guest's.
//
//	go test -run '^$' -bench Filter -benchmem ./host
func BenchmarkFilter(b *testing.B) {
	h, err := New(context.Background(), wasm.Module, Options{PoolSize: 1, CacheDir: testCacheDir(b),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(context.Background()) })
	for _, c := range []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"4KiB", 4 << 10}, {"4MiB", 4<<20 - 1}} {
		body := benchBody(c.size)
		b.Run(c.name, func(b *testing.B) {
			hdr := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"4096"}, "User-Agent": {"bench"}, "Accept": {"*/*"}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				d, err := h.Filter(context.Background(), &Request{Method: "POST", Path: "/v1/chat/completions", Authority: "127.0.0.1:8080",
					Protocol: "HTTP/1.1", Header: hdr, Body: body, RemoteAddr: "127.0.0.1:5555", LocalAddr: "127.0.0.1:8080"})
				if err != nil || d.Local != nil || !d.BodyChanged {
					b.Fatalf("%v %+v", err, d)
				}
			}
		})
	}
}
