package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Memory bounds over the soak, measured after a warm-up that fills the
// instance pool, the connection pools and the body buffer pools.
//
// The live heap is read from the sidecar's own go_memstats_next_gc_bytes,
// the GC's heap goal: with GOGC=100, twice the heap live at the last
// collection. It includes the wasm instances' linear memory (Go byte
// slices), which grows while each guest's own Go runtime settles (7.5 MiB
// to about 11.5 MiB per instance over its first ~100,000 requests, then
// flat) and never shrinks; kvgate_wasm_memory_bytes reports it, and it is
// bounded per instance by RetireBytes. Everything else the sidecar keeps
// between requests is fixed in size (pooled buffers by size class, idle
// connections, metric series), so the heap goal, less twice the growth of
// the instances' memory, must not move by more than 16 MiB. That leaves
// room for what the goal also sees: the requests in flight at the
// collection (64 clients) and the spare capacity wazero's append-grown
// memory slices carry beyond their size; it still catches a leak of 80
// bytes per request (16 MB over 100,000 requests).
//
// RSS is what the issue asks to report; it does not only follow the live
// heap: under load the heap reaches its goal and the runtime returns freed
// pages to the OS lazily. Runs of 100,000 and 300,000 requests settle
// 20-30 MiB above the post-warm-up level by about 120,000 requests and stay
// flat after that. The bound, 40 MiB, allows that settling and still fails
// on a leak of 400 bytes per request.
const (
	soakHeapGoalGrowthLimit = 16 << 20
	soakRSSGrowthLimit      = 40 << 20
)

// TestSoak sends 100,000 small requests from 64 concurrent clients through
// the real binary (SOAK_REQUESTS overrides the count), changing the filter
// configuration every two seconds meanwhile, then checks that the
// sidecar's RSS stayed flat and that /metrics adds up exactly to what was
// sent. Under -race the client side is too slow for make test's budget and
// the sidecar binary is not race-instrumented anyway: it is skipped there.
func TestSoak(t *testing.T) {
	if raceEnabled {
		t.Skip("soak: run without -race (the sidecar binary it measures is built without it)")
	}
	if testing.Short() {
		t.Skip("soak: -short")
	}
	total := 100_000
	if v := os.Getenv("SOAK_REQUESTS"); v != "" {
		total, _ = strconv.Atoi(v)
	}
	const clients = 64
	var hits, hinted atomic.Int64
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits.Add(1)
		if bytes.Contains(b, []byte("kv_hints")) {
			hinted.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer worker.Close()
	// The filter configuration changes every two seconds while the soak
	// runs (the sidecar's reload, as a ConfigMap update does it: a new file
	// renamed over the old), between two documents that decide alike, so
	// that every count below must still add up exactly.
	cfgFile := t.TempDir() + "/filter.json"
	configs := []string{`{"max_depth": 128}`, `{"max_depth": 129, "exclude_paths": ["/never-used"]}`}
	if err := os.WriteFile(cfgFile, []byte(configs[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	api, admin, pid := startBinaryPID(t, "-upstream", worker.URL, "-filter-config", "@"+cfgFile)
	stopReloads := make(chan struct{})
	var rewrites atomic.Int64
	reloadsDone := make(chan struct{})
	go func() {
		defer close(reloadsDone)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-stopReloads:
				return
			case <-tick.C:
			}
			tmp := cfgFile + ".next"
			if os.WriteFile(tmp, []byte(configs[n%2]), 0o644) == nil && os.Rename(tmp, cfgFile) == nil {
				rewrites.Add(1)
			}
		}
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	// Request i: every 10th is not JSON (400, never forwarded), every 3rd
	// of the rest carries no hint, the others carry one (removed: untrusted).
	kind := func(i int) int { // 0 bad, 1 no hint, 2 hint
		switch {
		case i%10 == 0:
			return 0
		case i%3 == 0:
			return 1
		}
		return 2
	}
	send := func(from, to int) (fail int64) {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		var failed atomic.Int64
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= to {
						return
					}
					var body string
					want := 200
					switch kind(i) {
					case 0:
						body, want = fmt.Sprintf(`{"model":"m","n":%d,`, i), 400
					case 1:
						body = fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hello %d"}]}`, i)
					default:
						body = fmt.Sprintf(`{"model":"m","kv_hints":{"protocol_version":"0.1","message_id":"m%d","actions":[]},"messages":[{"role":"user","content":"hello"}]}`, i)
					}
					resp, err := cl.Post("http://"+api+"/v1/chat/completions", "application/json", strings.NewReader(body))
					if err != nil {
						failed.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						failed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return failed.Load()
	}
	count := func(from, to int) (bad, plain, hint int) {
		for i := from; i < to; i++ {
			switch kind(i) {
			case 0:
				bad++
			case 1:
				plain++
			default:
				hint++
			}
		}
		return
	}

	warm := min(5000, total/10)
	if f := send(0, warm); f != 0 {
		t.Fatalf("warm-up: %d failed requests", f)
	}
	before := scrapeSettled(t, admin, warm)
	goalBefore := before["go_memstats_next_gc_bytes"]
	hitsBefore, hintedBefore := hits.Load(), hinted.Load()
	rssBefore := rss(t, pid)
	start := time.Now()
	const phases = 5
	for p := 0; p < phases; p++ {
		from, to := warm+p*total/phases, warm+(p+1)*total/phases
		if f := send(from, to); f != 0 {
			t.Fatalf("%d of %d requests failed or had the wrong status", f, to-from)
		}
		m := scrape(t, admin)
		t.Logf("soak: after %d requests: RSS %.1f MiB, GC heap goal %.1f MiB, heap in use %.1f MiB, goroutines %.0f",
			to-warm, float64(rss(t, pid))/(1<<20), m["go_memstats_next_gc_bytes"]/(1<<20), m["go_memstats_heap_inuse_bytes"]/(1<<20), m["go_goroutines"])
	}
	elapsed := time.Since(start)
	close(stopReloads)
	<-reloadsDone
	// The last rewrite is applied within a poll of the file.
	time.Sleep(1500 * time.Millisecond)
	rssAfter := rss(t, pid)
	after := scrapeSettled(t, admin, warm+total)
	goalAfter := after["go_memstats_next_gc_bytes"]
	t.Logf("soak: %d requests from %d clients in %v (%.0f req/s); sidecar RSS %.1f MiB before, %.1f MiB after (%+.1f MiB); GC heap goal %.1f -> %.1f MiB",
		total, clients, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20), float64(rssAfter-rssBefore)/(1<<20),
		goalBefore/(1<<20), goalAfter/(1<<20))

	bad, plain, hint := count(warm, warm+total)
	delta := func(k string) int { return int(after[k] - before[k]) }
	reloads := after[`kvgate_config_reloads_total{result="success"}`]
	t.Logf("soak: %d configuration changes during the run, %.0f reloads", rewrites.Load(), reloads)
	if rewrites.Load() > 0 && (reloads < 1 || reloads > float64(rewrites.Load())) {
		t.Errorf("%.0f reloads for %d configuration changes", reloads, rewrites.Load())
	}
	if f := after[`kvgate_config_reloads_total{result="failure"}`]; f != 0 || after["kvgate_config_last_reload_successful"] != 1 {
		t.Errorf("%.0f failed reloads, last successful %v", f, after["kvgate_config_last_reload_successful"])
	}
	for _, c := range []struct {
		series string
		want   int
	}{
		{`kvgate_sidecar_requests_total{outcome="forwarded"}`, plain + hint},
		{`kvgate_sidecar_requests_total{outcome="local_reply"}`, bad},
		{`kvgate_sidecar_requests_total{outcome="filter_failure"}`, 0},
		{`kvgate_sidecar_requests_total{outcome="too_large"}`, 0},
		{`kvgate_sidecar_requests_total{outcome="bad_request"}`, 0},
		{`trtllm_kv_hints_ignored_total{reason="untrusted"}`, hint},
		{`trtllm_kv_hints_ignored_total{reason="malformed"}`, 0},
		{`kvgate_bodies_rejected_total{status="400"}`, bad},
		{`kvgate_filter_duration_seconds_count`, total},
		{`kvgate_wasm_instances_replaced_total{reason="trap"}`, 0},
		{`kvgate_wasm_instances_replaced_total{reason="grown"}`, 0},
		{`kvgate_wasm_instances_replaced_total{reason="timeout"}`, 0},
	} {
		if got := delta(c.series); got != c.want {
			t.Errorf("%s: +%d, want +%d", c.series, got, c.want)
		}
	}
	if got := hits.Load() - hitsBefore; got != int64(plain+hint) {
		t.Errorf("worker got %d requests, want %d", got, plain+hint)
	}
	if got := hinted.Load() - hintedBefore; got != 0 {
		t.Errorf("%d forwarded bodies still carry kv_hints", got)
	}
	wasmGrowth := after["kvgate_wasm_memory_bytes"] - before["kvgate_wasm_memory_bytes"]
	t.Logf("soak: wasm linear memory %.1f -> %.1f MiB", before["kvgate_wasm_memory_bytes"]/(1<<20), after["kvgate_wasm_memory_bytes"]/(1<<20))
	if g := goalAfter - goalBefore - 2*wasmGrowth; g > soakHeapGoalGrowthLimit {
		t.Errorf("sidecar GC heap goal grew by %.1f MiB over %d requests beyond twice the wasm memory growth (%.1f MiB; limit %d MiB): a leak",
			g/(1<<20), total, wasmGrowth/(1<<20), soakHeapGoalGrowthLimit>>20)
	}
	if rssAfter-rssBefore > soakRSSGrowthLimit {
		t.Errorf("sidecar RSS grew by %.1f MiB over %d requests (limit %d MiB)",
			float64(rssAfter-rssBefore)/(1<<20), total, soakRSSGrowthLimit>>20)
	}
}

// rss reads VmRSS of a process from /proc.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
