package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// chatBody returns an OpenAI chat body of about n bytes with the reference
// hint, which the (untrusted) filter removes.
func chatBody(n int) []byte {
	head := `{"model":"kvgate-test","max_tokens":16,"kv_hints":` + canonicalEnvelope + `,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return []byte(head + strings.Repeat("lorem ipsum ", (n-len(head)-len(tail))/12+1)[:n-len(head)-len(tail)] + tail)
}

// load is the outcome of one measurement.
type load struct {
	p50, p99 time.Duration
	rps      float64
	errors   int
}

// measure sends body to url from clients goroutines for d and returns the
// latency percentiles and throughput.
func measure(url string, body []byte, clients int, d time.Duration) load {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				resp, err := cl.Post(url, "application/json", bytes.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						bad++
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	l := load{rps: float64(len(lat)) / el.Seconds(), errors: errs}
	if len(lat) > 0 {
		l.p50, l.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return l
}

// BenchmarkHosts measures, side by side in one run on loopback, Envoy
// without the filter, Envoy with it and the sidecar, in front of the same
// worker: p50/p99 latency and requests per second for a 4 KiB chat request
// at 64 concurrent clients, and the extra latency of a 1 MiB body (p50 at
// one client, 1 MiB minus 4 KiB). Each host gets a fixed load of
// KVGATE_BENCH_TIME (default 10s), so the benchmark runs once whatever
// -benchtime says. It prints a Markdown table (also written to
// $KVGATE_BENCH_OUT if set):
//
//	KVGATE_ENVOY=$PWD/.venv/bin/envoy go test ./tests/e2e -run '^$' -bench Hosts -timeout 10m
func BenchmarkHosts(t *testing.B) {
	d := 10 * time.Second
	if v, err := time.ParseDuration(os.Getenv("KVGATE_BENCH_TIME")); err == nil {
		d = v
	}
	bin := sidecarBinary(t)
	w := startWorker(t)
	pf, pp := envoytest.FreePort(t), envoytest.FreePort(t)
	startEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "filter", Port: pf}, {Name: "plain", Port: pp, NoFilter: true}})
	sc := startSidecar(t, bin, w.Addr, `{}`, t.TempDir())
	targets := []struct{ name, url string }{
		{"Envoy, no filter", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", pp)},
		{"Envoy + kvgate.wasm (V8)", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", pf)},
		{"sidecar (wazero)", "http://" + sc.API + "/v1/chat/completions"},
	}
	small, big := chatBody(4096), chatBody(1<<20)
	var b strings.Builder
	fmt.Fprintf(&b, "| host | 4 KiB p50 | 4 KiB p99 | 4 KiB req/s | errors | 1 MiB p50 (1 client) | 4 KiB p50 (1 client) | extra for 1 MiB |\n|---|---|---|---|---|---|---|---|\n")
	for _, tg := range targets {
		measure(tg.url, small, 64, time.Second) // warm up
		l := measure(tg.url, small, 64, d)
		s1 := measure(tg.url, small, 1, d/3)
		b1 := measure(tg.url, big, 1, d/3)
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %d | %s | %s | %s |\n", tg.name, ms(l.p50), ms(l.p99), l.rps, l.errors+s1.errors+b1.errors,
			ms(b1.p50), ms(s1.p50), ms(b1.p50-s1.p50))
	}
	t.Logf("\n%s", b.String())
	if p := os.Getenv("KVGATE_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
