package host

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/host/internal/linmem"
	"github.com/kvgate/kvgate/wasm"
)

// benchBody is a chat request of size bytes carrying a client hint, so the
// untrusted filter rewrites it (the changed-body path).
func benchBody(size int) []byte {
	head := `{"model":"llama","kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},"messages":[{"role":"user","content":"`
	tail := `"}],"max_tokens":16}`
	return []byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail)
}

// benchHeader is the header of the Filter benchmarks' requests: a client's
// usual fields.
func benchHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Content-Length": {"4096"}, "User-Agent": {"bench"}, "Accept": {"*/*"}}
}

// benchRequest is a chat completion of body with hdr, from and to loopback.
func benchRequest(hdr http.Header, body []byte) *Request {
	return &Request{Method: "POST", Path: "/v1/chat/completions", Authority: "127.0.0.1:8080",
		Protocol: "HTTP/1.1", Header: hdr, Body: body, RemoteAddr: "127.0.0.1:5555", LocalAddr: "127.0.0.1:8080"}
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
			hdr := benchHeader()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				d, err := h.Filter(context.Background(), benchRequest(hdr, body))
				if err != nil || d.Local != nil || !d.BodyChanged {
					b.Fatalf("%v %+v", err, d)
				}
			}
		})
	}
}

// BenchmarkFilterCache is BenchmarkFilter/4KiB as a serving process meets
// it: with the caches warm from the previous call (cache=warm), and after
// 2 MiB of other memory was written, untimed, between calls
// (cache=evicted: the L2 of this machine's cores, 1 MiB, twice over), as the
// network, net/http and the proxy's own work do between two filter calls.
// guest=kvgate is the embedded module; guest=noop the test guest, a Go
// proxy-wasm module that only reads the body and continues: the floor of a
// guest built with Go on this host.
//
//	go test -run '^$' -bench FilterCache -count 6 ./host | benchstat -col /cache -
func BenchmarkFilterCache(b *testing.B) {
	body := benchBody(4 << 10)
	other := make([]byte, 2<<20)
	for _, guest := range []string{"kvgate", "noop"} {
		module := wasm.Module
		if guest == "noop" {
			module = testGuest(b)
		}
		h, err := New(context.Background(), module, Options{PoolSize: 1, CacheDir: testCacheDir(b),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		for _, cache := range []string{"warm", "evicted"} {
			b.Run("guest="+guest+"/cache="+cache, func(b *testing.B) {
				hdr := benchHeader()
				for b.Loop() {
					if cache == "evicted" {
						b.StopTimer()
						for i := 0; i < len(other); i += 64 {
							other[i]++
						}
						b.StartTimer()
					}
					d, err := h.Filter(context.Background(), benchRequest(hdr, body))
					if err != nil || d.Local != nil || d.BodyChanged != (guest == "kvgate") {
						b.Fatalf("%v %+v", err, d)
					}
				}
			})
		}
		_ = h.Close(context.Background())
	}
}

// startBenchHost is a Host of one kvgate instance at a body limit, its
// memory capped as the sidecar caps it, that retires its instance after
// every request when retire is set.
func startBenchHost(b *testing.B, limit int, retire bool) *Host {
	b.Helper()
	opts := Options{PoolSize: 1, CacheDir: testCacheDir(b), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PluginConfig:     []byte(fmt.Sprintf(`{"max_body_bytes":%d}`, limit)),
		MemoryLimitPages: uint32(max(filterspec.MemoryAt(limit).Peak()>>16+1, DefaultMemoryLimitPages)),
		RetireBytes:      1 << 40,
	}
	if retire {
		opts.RetireBytes = 1
	}
	h, err := New(context.Background(), wasm.Module, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// BenchmarkStartInstance: one kvgate instance started and configured (what
// a replacement costs), at the default body limit and at 64 MiB, with the
// linear memory reserved outside the Go heap (internal/linmem) and, for
// comparison in the same run, in the Go heap as wazero makes it.
//
//	go test -run '^$' -bench StartInstance -count 6 ./host
func BenchmarkStartInstance(b *testing.B) {
	for _, limit := range []int{4 << 20, 64 << 20} {
		for _, mem := range []string{"reserved", "heap"} {
			b.Run(fmt.Sprintf("limit=%dMiB/memory=%s", limit>>20, mem), func(b *testing.B) {
				if mem == "heap" {
					withMemory = func(ctx context.Context) context.Context { return ctx }
					defer func() { withMemory = linmem.WithAllocator }()
				}
				h := startBenchHost(b, limit, false)
				for b.Loop() {
					in, err := h.newInstance(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					in.close()
				}
			})
		}
	}
}

// BenchmarkReplace: in a pool of one instance retired after every request,
// each op is a 4 KiB request that waits for the replacement of the
// previous op's instance: what a client meets after a trap or a grown
// instance.
//
//	go test -run '^$' -bench Replace -count 6 ./host
func BenchmarkReplace(b *testing.B) {
	body := benchBody(4 << 10)
	for _, limit := range []int{4 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("limit=%dMiB", limit>>20), func(b *testing.B) {
			h := startBenchHost(b, limit, true)
			hdr := http.Header{"Content-Type": {"application/json"}}
			for b.Loop() {
				d, err := h.Filter(context.Background(), &Request{Method: "POST", Path: "/v1/chat/completions", Authority: "a",
					Protocol: "HTTP/1.1", Header: hdr.Clone(), Body: body})
				if err != nil || !d.BodyChanged {
					b.Fatalf("%v %+v", err, d)
				}
			}
			b.StopTimer()
			if n := h.replaced[reasonGrown].Load(); n < uint64(b.N) {
				b.Fatalf("%d instances replaced in %d requests", n, b.N)
			}
		})
	}
}
