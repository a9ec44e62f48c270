package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/internal/envoytest"
)

// The native module: $KVGATE_NATIVE_MODULE (make envoy-module's
// bin/libkvgate.so, say), or envoy/native/libkvgate built once per test
// binary with -buildmode=c-shared.
var nativeBuild struct {
	once sync.Once
	path string
	err  error
}

func nativeModule(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KVGATE_NATIVE_MODULE"); p != "" {
		return mustAbs(p)
	}
	nativeBuild.once.Do(func() {
		nativeBuild.path = filepath.Join(buildDir, "libkvgate.so")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-buildmode=c-shared",
			"-o", nativeBuild.path, "./envoy/native/libkvgate")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			nativeBuild.err = fmt.Errorf("go build -buildmode=c-shared ./envoy/native/libkvgate: %v\n%s", err, out)
		}
	})
	if nativeBuild.err != nil {
		t.Fatal(nativeBuild.err)
	}
	return nativeBuild.path
}

// startNativeEnvoy renders envoy-native.yaml with the given listeners in
// front of upstream and starts Envoy on it.
func startNativeEnvoy(t testing.TB, upstream string, listeners []envoy.Listener) *envoytest.Process {
	t.Helper()
	bin := envoytest.Binary(t)
	module := nativeModule(t)
	admin := envoytest.FreePort(t)
	cfg, err := envoy.Render(envoy.Options{Template: envoy.NativeBootstrap, AdminPort: admin, Upstream: upstream,
		ModulePath: module, Listeners: listeners})
	if err != nil {
		t.Fatal(err)
	}
	return envoytest.Start(t, bin, cfg, admin, 2)
}

// The native module really runs in the pinned Envoy: started on
// envoy-native.yaml, every series exists at 0 under the wasm filter's
// names and labels, a hint is removed and counted, and a body one byte
// over the 4 MiB limit gets the filter's 413 however it is framed, while
// one of exactly 4 MiB is forwarded whole.
func TestNativeEnvoyRunsModule(t *testing.T) {
	w := startWorker(t)
	port := envoytest.FreePort(t)
	e := startNativeEnvoy(t, w.Addr, []envoy.Listener{{Name: "kvgate", Port: port}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	page, err := e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	start := parseSeries(page)
	want := series{}
	for _, k := range allSeries() {
		want[k] = 0
	}
	if start.String() != want.String() {
		t.Fatalf("series at start-up:\n%s\nwant:\n%s\nfull page:\n%s", start, want, grep(page, "kv"))
	}

	hdr := map[string]string{"content-type": "application/json", CaseHeader: "native-hint"}
	r, err := send(addr, "POST", "/v1/chat/completions", hdr, []byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[]}`), false)
	if err != nil || r.Status != 200 {
		t.Fatalf("hinted request: %v %d %s", err, r.Status, r.Body)
	}
	if recs := w.Records("native-hint"); len(recs) != 1 || string(recs[0].Body) != `{"model":"m","messages":[]}` {
		t.Fatalf("worker received %d records %v, want the body without kv_hints", len(recs), recs)
	}

	limit := filter.DefaultMaxBodyBytes
	for _, c := range []struct {
		key     string
		size    int
		chunked bool
		status  int
	}{
		{"native-exact-length", limit, false, 200},
		{"native-exact-chunked", limit, true, 200},
		{"native-over-length", limit + 1, false, 413},
		{"native-over-chunked", limit + 1, true, 413},
	} {
		hdr := map[string]string{"content-type": "application/json", CaseHeader: c.key}
		body := bodyOfSize(c.size)
		r, err := send(addr, "POST", "/v1/chat/completions", hdr, body, c.chunked)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %.200s", c.key, r.Status, c.status, r.Body)
		}
		recs := w.Records(c.key)
		if c.status != 200 {
			var e struct {
				Error struct {
					Type string `json:"type"`
					Code int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Code != 413 || e.Error.Type != "invalid_request_error" {
				t.Errorf("%s: reply %q is not the filter's OpenAI-style 413", c.key, r.Body)
			}
			if len(recs) != 0 {
				t.Errorf("%s: the worker received %d bytes of a rejected body", c.key, len(recs[0].Body))
			}
			continue
		}
		want := bytes.Replace(body, []byte(`"kv_hints":{"protocol_version":"0.1"},`), nil, 1)
		if len(recs) != 1 || !bytes.Equal(recs[0].Body, want) {
			got := 0
			if len(recs) == 1 {
				got = len(recs[0].Body)
			}
			t.Errorf("%s: worker did not receive the whole body without the hint (%d records, %d bytes, want %d)", c.key, len(recs), got, len(want))
		}
	}

	page, err = e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(page).delta(start)
	if d[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] != 3 || d[`kvgate_bodies_rejected_total{status="413"}`] != 2 {
		t.Errorf("counter deltas:\n%s\nwant untrusted 3 and rejected 413 2", d)
	}
}

// allSeries are the filter's series as a scrape names them.
func allSeries() []string {
	return []string{
		`trtllm_kv_hints_ignored_total{reason="untrusted"}`,
		`trtllm_kv_hints_ignored_total{reason="unknown_version"}`,
		`trtllm_kv_hints_ignored_total{reason="oversized"}`,
		`trtllm_kv_hints_ignored_total{reason="malformed"}`,
		`kvgate_kv_hints_admitted_total{}`,
		`kvgate_bodies_rejected_total{status="400"}`,
		`kvgate_bodies_rejected_total{status="413"}`,
		`kvgate_bodies_rejected_total{status="415"}`,
		`kvgate_requests_uninspected_total{protocol="grpc"}`,
		`kvgate_requests_refused_total{protocol="grpc"}`,
	}
}
