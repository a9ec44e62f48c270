package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// TestEnvoyECDSReload runs the ECDS variant of the committed bootstrap
// (envoy/envoy-ecds.yaml) and changes the filter's configuration under it,
// as Istio does through xDS: the file is replaced while clients keep
// sending on kept-alive connections. The next requests get the new policy
// (hints admitted instead of stripped), no request fails, no connection is
// closed, and the filter's counters carry on: every stripped request is
// one untrusted count and every admitted one an admission, across the
// change.
func TestEnvoyECDSReload(t *testing.T) {
	w := startWorker(t)
	bin := envoytest.Binary(t)
	admin, port := envoytest.FreePort(t), envoytest.FreePort(t)
	rendered, err := envoyconfig.Render(envoyconfig.Options{AdminPort: admin, Upstream: w.Addr, ModulePath: modulePath,
		Listeners: []envoyconfig.Listener{{Name: "kvgate", Port: port, PluginConfig: `{"trust_kv_hints":false}`}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ecds")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "kvgate-filter.yaml")
	cfg, resource, err := envoyconfig.ToECDS(rendered, file, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, resource, 0o644); err != nil {
		t.Fatal(err)
	}
	p := envoytest.Start(t, bin, cfg, admin, 2)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	before, err := p.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"model":"m","kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]}}`
	var stripped, admitted, failed, newConns atomic.Int64
	var sawAdmitted atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("ecds/%d/%d", c, i)
				req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set(CaseHeader, key)
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Close {
					failed.Add(1)
					continue
				}
				recs := w.Records(key)
				switch {
				case len(recs) != 1:
					failed.Add(1)
				case bytes.Contains(recs[0].Body, []byte("kv_hints")):
					admitted.Add(1)
					sawAdmitted.Store(true)
				default:
					stripped.Add(1)
				}
				if i == 0 {
					newConns.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(c)
	}
	time.Sleep(500 * time.Millisecond)
	// Replace the file in one step, as the kubelet swaps a ConfigMap.
	next, err := envoyconfig.WithPluginConfig(resource, `{"trust_kv_hints":true}`)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".next")
	if err := os.WriteFile(tmp, next, 0o644); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	for !sawAdmitted.Load() && time.Since(changed) < 5*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(changed)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if !sawAdmitted.Load() {
		t.Fatalf("the new configuration was not applied within 5s\n%s", p.Log())
	}
	t.Logf("applied after %v; %d stripped, %d admitted, %d failed", took, stripped.Load(), admitted.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed across the change", failed.Load())
	}
	if newConns.Load() != 4 {
		t.Errorf("%d connections opened, want 4: a connection was closed", newConns.Load())
	}
	after, err := p.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(after).delta(parseSeries(before))
	if got := d[`trtllm_kv_hints_ignored_total{reason="untrusted"}`]; got != float64(stripped.Load()) {
		t.Errorf("untrusted count rose by %v, want %d (one per stripped request)", got, stripped.Load())
	}
	if got := d[`kvgate_kv_hints_admitted_total{}`]; got != float64(admitted.Load()) {
		t.Errorf("admitted count rose by %v, want %d", got, admitted.Load())
	}
}
