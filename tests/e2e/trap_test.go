package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// trapGuest is testdata/trapguest, the test-only module that traps on
// demand, built once per test binary.
func trapGuest(t testing.TB) string { return built(t, "./tests/e2e/testdata/trapguest", true) }

// trapModes are the ways testdata/trapguest fails on request (its x-trap
// header): a wasm trap in the body callback (after the headers went
// upstream), one in the headers callback, and an unrecovered Go panic.
var trapModes = []string{"1", "headers", "panic"}

// A guest trap costs one request, not the host: with the committed
// bootstrap (failure_policy FAIL_RELOAD) and one worker thread, Envoy
// answers the trapping request 503 without forwarding its body, answers
// 503 (never a forward) while the VM is rebuilt, and then serves requests
// again, for each kind of trap. The sidecar, running the same module with a
// pool of one instance, answers the trapping request the same way and the
// very next one normally. Under FAIL_CLOSED Envoy answered 503 to every
// later request on that thread until it restarted.
func TestTrapRecovers(t *testing.T) {
	mod := trapGuest(t)
	w := startWorker(t)

	bin := envoytest.Binary(t)
	admin, port := envoytest.FreePort(t), envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{AdminPort: admin, Upstream: w.Addr, ModulePath: mod,
		Listeners: []envoyconfig.Listener{{Name: "trap", Port: port}}})
	if err != nil {
		t.Fatal(err)
	}
	e := envoytest.Start(t, bin, cfg, admin, 1)
	sc := startSidecar(t, sidecarBinary(t), w.Addr, "{}", t.TempDir(), "-filter", mod, "-pool-size", "1")

	// answers holds each host's answer to a trap, to compare them.
	answers := map[string]response{}
	n := 0
	call := func(host, addr, mode string) (response, string) {
		t.Helper()
		n++
		key := fmt.Sprintf("trap/%s/%d", host, n)
		h := map[string]string{CaseHeader: key, "content-type": "application/json"}
		if mode != "" {
			h["x-trap"] = mode
		}
		r, err := send(addr, "POST", "/v1/chat/completions", h, []byte(`{"model":"m","messages":[]}`), false)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return r, key
	}
	ok := func(host, addr string) {
		t.Helper()
		r, key := call(host, addr, "")
		if r.Status != 200 || len(w.Records(key)) != 1 {
			t.Fatalf("%s: status %d, %d records at the worker, want 200 and the request forwarded: %.200s", key, r.Status, len(w.Records(key)), r.Body)
		}
	}
	failed := func(host string, r response, key string) {
		t.Helper()
		if r.Status != 503 || len(w.Records(key)) != 0 {
			t.Fatalf("%s: status %d, %d records at the worker, want 503 and nothing forwarded: %.200s", key, r.Status, len(w.Records(key)), r.Body)
		}
		var e struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if r.ContentType != "application/json" || json.Unmarshal(r.Body, &e) != nil || e.Error.Code != 503 {
			t.Errorf("%s: %q %q is not an OpenAI-style JSON 503", key, r.ContentType, r.Body)
		}
		if a, seen := answers[host]; seen && (a.ContentType != r.ContentType || string(a.Body) != string(r.Body)) {
			t.Errorf("%s: answer %q differs from the earlier %q", key, r.Body, a.Body)
		}
		answers[host] = r
	}

	for _, host := range []struct {
		name, addr string
		// reload: the host rebuilds the VM after a backoff (Envoy)
		// rather than before the next request (the sidecar).
		reload bool
	}{
		{"envoy", fmt.Sprintf("127.0.0.1:%d", port), true},
		{"sidecar", sc.API, false},
	} {
		ok(host.name, host.addr)
		for _, mode := range trapModes {
			r, key := call(host.name, host.addr, mode)
			failed(host.name, r, key)
			// While the VM is down every request is answered 503 without
			// a forward; Envoy's reload backoff is 1 to 2 s, the deadline
			// only stops a hang.
			for deadline := time.Now().Add(30 * time.Second); ; {
				r, key := call(host.name, host.addr, "")
				if r.Status == 200 {
					if len(w.Records(key)) != 1 {
						t.Fatalf("%s: 200 but not forwarded", key)
					}
					break
				}
				if !host.reload {
					t.Fatalf("%s after x-trap %s: status %d, want the next request served: %.200s", key, mode, r.Status, r.Body)
				}
				failed(host.name, r, key)
				if time.Now().After(deadline) {
					t.Fatalf("%s: still 503 30 s after x-trap %s: the VM was not rebuilt", host.name, mode)
				}
				time.Sleep(100 * time.Millisecond)
			}
			for range 3 {
				ok(host.name, host.addr)
			}
		}
	}
	if a, b := answers["envoy"], answers["sidecar"]; a.ContentType != b.ContentType || string(a.Body) != string(b.Body) {
		t.Errorf("a filter failure is answered differently:\nenvoy   %q %s\nsidecar %q %s", a.ContentType, a.Body, b.ContentType, b.Body)
	}

	// One reload per trap, none failed.
	for name, want := range map[string]uint64{"wasm.trap.vm_reload_success": uint64(len(trapModes)), "wasm.trap.vm_reload_failure": 0} {
		if got, err := e.Stat(name); err != nil || got != want {
			t.Errorf("envoy %s = %d (%v), want %d", name, got, err, want)
		}
	}
	page, err := sc.metrics()
	if err != nil {
		t.Fatal(err)
	}
	if got := parseAny(page)[`kvgate_filter_failures_total{reason="trap"}`]; got != float64(len(trapModes)) {
		t.Errorf(`sidecar kvgate_filter_failures_total{reason="trap"} = %g, want %d`, got, len(trapModes))
	}
}
