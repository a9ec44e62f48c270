package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// BenchmarkReady starts the sidecar binary with a warm compilation cache
// and polls /readyz every millisecond until it answers 200: time-to-ready
// (ready-ms, the median of the starts), and then until both instances of
// the pool are live (full-ms). Each op is one start, at the default body
// limit and at 64 MiB. With KVGATE_A_BIN set (another build), each op
// starts that binary too, in alternating order, and reports its figures as
// A-ready-ms and A-full-ms: start-up is as sensitive to a loaded machine as
// latency is.
//
//	go test -run '^$' -bench Ready -benchtime 20x ./cmd/sidecar
//	KVGATE_A_BIN=$PWD/sidecar-old go test -run '^$' -bench Ready -benchtime 20x ./cmd/sidecar
func BenchmarkReady(b *testing.B) {
	for _, limit := range []int{4 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("limit=%dMiB", limit>>20), func(b *testing.B) {
			bin, _ := artifacts(b)
			bins := []string{bin}
			if a := os.Getenv("KVGATE_A_BIN"); a != "" {
				bins = append(bins, a)
			}
			args := []string{"-upstream", "echo", "-cache-dir", testCache(b), "-max-body-bytes", strconv.Itoa(limit), "-pool-size", "2"}
			cl := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			start := func(bin string) (ready, full time.Duration) {
				api, admin := freeAddrPair(b)
				cmd := exec.Command(bin, append([]string{"-listen", api, "-admin", admin}, args...)...)
				logs := &syncbuf.Buffer{}
				cmd.Stderr = logs
				t0 := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				exited := make(chan struct{})
				go func() { _ = cmd.Wait(); close(exited) }()
				defer func() { _ = cmd.Process.Kill(); <-exited }()
				for ready == 0 || full == 0 {
					select {
					case <-exited:
						b.Fatalf("sidecar exited before it was ready: %s", logs.String())
					default:
					}
					if time.Since(t0) > 60*time.Second {
						b.Fatalf("not ready after a minute: %s", logs.String())
					}
					if ready == 0 {
						if r, err := cl.Get("http://" + admin + "/readyz"); err == nil {
							r.Body.Close()
							if r.StatusCode == 200 {
								ready = time.Since(t0)
							}
						}
					} else if scrape(b, admin)["kvgate_wasm_instances"] == 2 {
						full = time.Since(t0)
					}
					time.Sleep(time.Millisecond)
				}
				return ready, full
			}
			for _, bin := range bins {
				start(bin) // the cache is warm from here on
			}
			ready := make([][]time.Duration, len(bins))
			full := make([][]time.Duration, len(bins))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for k := range bins {
					k = (k + i) % len(bins)
					r, f := start(bins[k])
					ready[k], full[k] = append(ready[k], r), append(full[k], f)
				}
			}
			b.ReportMetric(median(ready[0])/1e3, "ready-ms")
			b.ReportMetric(median(full[0])/1e3, "full-ms")
			if len(bins) > 1 {
				b.ReportMetric(median(ready[1])/1e3, "A-ready-ms")
				b.ReportMetric(median(full[1])/1e3, "A-full-ms")
			}
		})
	}
}
