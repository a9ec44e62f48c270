package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// chatBody is a 4 KiB chat completion request carrying a client hint (so
// the filter removes it: the rewrite path, not the pass-through one).
func chatBody(size int) []byte {
	head := `{"model":"llama","kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},"messages":[{"role":"user","content":"`
	tail := `"}],"max_tokens":16}`
	return []byte(head + strings.Repeat("a", size-len(head)-len(tail)) + tail)
}

type targets struct{ direct, plain, sidecar string }

func benchTargets(b *testing.B) targets {
	echo := httptest.NewServer(echoHandler())
	b.Cleanup(echo.Close)
	u, _ := url.Parse(echo.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}
	plain := httptest.NewServer(rp)
	b.Cleanup(plain.Close)
	args := []string{"-upstream", echo.URL}
	if f := os.Getenv("KVGATE_BENCH_FILTER"); f != "" {
		args = append(args, "-filter", f)
	}
	l, _, _ := startInProcess(b, args...)
	return targets{echo.URL, plain.URL, "http://" + l.API}
}

// BenchmarkChat4KiB: 64 concurrent clients, one 4 KiB chat request each at
// a time; reports p50 latency and requests per second.
//
//	go test -run '^$' -bench Chat4KiB -benchtime 20000x ./cmd/sidecar
func BenchmarkChat4KiB(b *testing.B) {
	tg := benchTargets(b)
	body := chatBody(4096)
	for _, c := range []struct{ name, url string }{{"direct", tg.direct}, {"reverseproxy", tg.plain}, {"sidecar", tg.sidecar}} {
		b.Run(c.name, func(b *testing.B) { runClients(b, c.url+"/v1/chat/completions", body, 64) })
	}
}

// BenchmarkChat4KiBSerial: one client, to read the added latency.
func BenchmarkChat4KiBSerial(b *testing.B) {
	tg := benchTargets(b)
	body := chatBody(4096)
	for _, c := range []struct{ name, url string }{{"direct", tg.direct}, {"reverseproxy", tg.plain}, {"sidecar", tg.sidecar}} {
		b.Run(c.name, func(b *testing.B) { runClients(b, c.url+"/v1/chat/completions", body, 1) })
	}
}

// BenchmarkChat4KiBPaired: one client sends each 4 KiB request twice in a
// row, through the plain proxy and through the sidecar (in alternating
// order), so both see the same machine at the same moment. It reports each
// side's p50 and the p50 of the per-pair difference: the latency the
// sidecar adds, with the drift of a shared machine cancelled out.
//
//	go test -run '^$' -bench Chat4KiBPaired -benchtime 5000x ./cmd/sidecar
func BenchmarkChat4KiBPaired(b *testing.B) {
	tg := benchTargets(b)
	body := chatBody(4096)
	tr := &http.Transport{MaxIdleConnsPerHost: 2, MaxIdleConns: 4}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	do := func(url string) time.Duration { return timedPost(b, cl, url+"/v1/chat/completions", body) }
	for range 64 {
		do(tg.plain)
		do(tg.sidecar)
	}
	plain := make([]time.Duration, b.N)
	side := make([]time.Duration, b.N)
	diff := make([]time.Duration, b.N)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			plain[i] = do(tg.plain)
			side[i] = do(tg.sidecar)
		} else {
			side[i] = do(tg.sidecar)
			plain[i] = do(tg.plain)
		}
		diff[i] = side[i] - plain[i]
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50(plain), "proxy-p50-µs")
	b.ReportMetric(p50(side), "sidecar-p50-µs")
	b.ReportMetric(p50(diff), "added-p50-µs")
}

// BenchmarkBody4MiB: one client, a 4 MiB body (the default limit).
func BenchmarkBody4MiB(b *testing.B) {
	tg := benchTargets(b)
	body := chatBody(4<<20 - 1)
	for _, c := range []struct{ name, url string }{{"direct", tg.direct}, {"reverseproxy", tg.plain}, {"sidecar", tg.sidecar}} {
		b.Run(c.name, func(b *testing.B) { runClients(b, c.url+"/v1/chat/completions", body, 1) })
	}
}

func runClients(b *testing.B, url string, body []byte, clients int) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	do := func() time.Duration { return timedPost(b, cl, url, body) }
	for i := 0; i < clients; i++ { // warm connections and instances
		do()
	}
	lat := make([]time.Duration, b.N)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= int64(b.N) {
					return
				}
				lat[i] = do()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/el.Seconds(), "req/s")
	_ = fmt.Sprint
}

// timedPost sends one chat request, reads the whole answer and returns how
// long that took; anything but a 200 fails the benchmark.
func timedPost(b *testing.B, cl *http.Client, url string, body []byte) time.Duration {
	t0 := time.Now()
	resp, err := cl.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return time.Since(t0)
}
