package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// TestKeepAliveRace fires bursts of requests across the moment uvicorn
// closes the hosts' idle upstream connections (its 5 s keep-alive), through
// Envoy and through the sidecar side by side, with both of uvicorn's HTTP
// implementations. A request the worker never received must not fail: the
// hosts close idle connections to the worker before it does
// (docs/spec.md, "The worker connection"), and retry, once, a request that
// provably never reached it. Every request must succeed.
func TestKeepAliveRace(t *testing.T) {
	bin := sidecarBinary(t)
	for _, impl := range []string{"h11", "httptools"} {
		t.Run(impl, func(t *testing.T) {
			t.Parallel()
			w := startUvicorn(t, impl)
			port := envoytest.FreePort(t)
			startEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
			sc := startSidecar(t, bin, w.Addr, `{}`, t.TempDir())
			hosts := map[string]string{"envoy": fmt.Sprintf("127.0.0.1:%d", port), "sidecar": sc.API}
			var wg sync.WaitGroup
			for name, addr := range hosts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sent, failed := raceBursts(t, addr, 3, 32, 64)
					if failed > 0 {
						t.Errorf("%s in front of uvicorn (%s): %d of %d requests fired across the worker's keep-alive close failed", name, impl, failed, sent)
					} else {
						t.Logf("%s (%s): %d requests across the keep-alive close, none failed", name, impl, sent)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				t.Logf("sidecar log:\n%s", tail(sc.log.String(), 30))
			}
		})
	}
}

// raceBursts runs rounds of: warm concurrent requests (which leave that
// many idle connections from the host to the worker), then, when the
// worker's keep-alive is about to close them, burst requests spread over
// 100 ms around that moment. It returns how many were sent after warm-up
// and how many did not get a 200.
func raceBursts(t *testing.T, addr string, rounds, warm, burst int) (sent, failed int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: warm + burst, DisableCompression: true}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"kv_hints":{"protocol_version":"0.1"}}`)
	one := func() error {
		resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		return nil
	}
	var nfail atomic.Int64
	var firstErr sync.Once
	report := func(err error) {
		if err != nil {
			nfail.Add(1)
			firstErr.Do(func() { t.Logf("%s: first failure: %v", addr, err) })
		}
	}
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for i := 0; i < warm; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); report(one()) }()
		}
		wg.Wait()
		idle := time.Now()
		// The burst spans the worker's close: 50 ms before to 50 ms after.
		start := idle.Add(uvicornKeepAlive - 50*time.Millisecond)
		for i := 0; i < burst; i++ {
			at := start.Add(time.Duration(i) * 100 * time.Millisecond / time.Duration(burst))
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(at))
				report(one())
			}()
		}
		wg.Wait()
		sent += burst
	}
	return sent, int(nfail.Load())
}
