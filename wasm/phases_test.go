package wasm

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPhases splits a 1 KiB request's cost by callback.
func BenchmarkPhases(b *testing.B) {
	h := newWzHost(b, context.Background(), `{}`)
	defer h.close()
	body := hintBody(1 << 10)
	var t [4]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := uint64(100 + i)
		h.headers = append(h.headers[:0], [2]string{":method", "POST"}, [2]string{":path", "/v1/chat/completions"},
			[2]string{"content-type", "application/json"}, [2]string{"content-length", "1024"})
		h.body = append(h.body[:0], body...)
		t0 := time.Now()
		h.call(h.ctxCreate, id, 1)
		t1 := time.Now()
		h.call(h.onHeaders, id, 4, 0)
		t2 := time.Now()
		h.call(h.onBody, id, uint64(len(h.body)), 1)
		t3 := time.Now()
		h.call(h.onLog, id)
		h.call(h.onDelete, id)
		t4 := time.Now()
		t[0] += t1.Sub(t0)
		t[1] += t2.Sub(t1)
		t[2] += t3.Sub(t2)
		t[3] += t4.Sub(t3)
	}
	for i, n := range []string{"create", "headers", "body", "log+delete"} {
		b.ReportMetric(float64(t[i].Nanoseconds())/float64(b.N), n+"-ns")
	}
}
