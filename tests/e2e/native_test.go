package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// The native module: $KVGATE_NATIVE_MODULE (make envoy-module's
// bin/libkvgate.so, say), or envoy/native/libkvgate built once per test
// binary with -buildmode=c-shared.
var nativeBuilds struct {
	sync.Mutex
	m map[string]*build
}

func nativeModule(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KVGATE_NATIVE_MODULE"); p != "" {
		return mustAbs(p)
	}
	return nativeModuleTagged(t, "")
}

// nativeModuleTagged builds envoy/native/libkvgate with build tags (test
// probes) once per test binary.
func nativeModuleTagged(t testing.TB, tags string) string {
	t.Helper()
	nativeBuilds.Lock()
	if nativeBuilds.m == nil {
		nativeBuilds.m = map[string]*build{}
	}
	b := nativeBuilds.m[tags]
	if b == nil {
		b = &build{}
		nativeBuilds.m[tags] = b
	}
	nativeBuilds.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, "libkvgate"+strings.ReplaceAll(tags, ",", "-")+".so")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-buildmode=c-shared",
			"-tags", tags, "-o", b.path, "./envoy/native/libkvgate")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build -buildmode=c-shared -tags %q ./envoy/native/libkvgate: %v\n%s", tags, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// startNativeEnvoy renders envoy-native.yaml with the given listeners in
// front of upstream and starts Envoy on it.
func startNativeEnvoy(t testing.TB, upstream string, listeners []envoyconfig.Listener) *envoytest.Process {
	t.Helper()
	return startNativeEnvoyWith(t, nativeModule(t), upstream, listeners)
}

func startNativeEnvoyWith(t testing.TB, module, upstream string, listeners []envoyconfig.Listener) *envoytest.Process {
	t.Helper()
	bin := envoytest.Binary(t)
	admin := envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.NativeBootstrap, AdminPort: admin, Upstream: upstream,
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
	e := startNativeEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
	checkRunsFilter(t, e, fmt.Sprintf("127.0.0.1:%d", port), w, "native-")
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
		`kvgate_requests_refused_total{reason="grpc"}`,
		`kvgate_requests_refused_total{reason="router_only"}`,
		`kvgate_kv_hints_detected_total{reason="untrusted"}`,
		`kvgate_kv_hints_detected_total{reason="unknown_version"}`,
		`kvgate_kv_hints_detected_total{reason="oversized"}`,
		`kvgate_kv_hints_detected_total{reason="malformed"}`,
	}
}

// An Envoy without a callback the module calls (here: a build that
// requires one no Envoy has) does not start: the module names the
// callback, Envoy reports the failed load and exits with an error, without
// a crash, and `envoy --mode validate` fails the same way.
func TestNativeABIMismatch(t *testing.T) {
	bin := envoytest.Binary(t)
	module := nativeModuleTagged(t, "kvgate_abiprobe")
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.NativeBootstrap, AdminPort: envoytest.FreePort(t), Upstream: "127.0.0.1:9",
		ModulePath: module, Listeners: []envoyconfig.Listener{{Name: "kvgate", Port: envoytest.FreePort(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envoy.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"serve", "validate"} {
		cmd := exec.Command(bin, "-c", path, "--mode", mode, "--disable-hot-restart", "-l", "info")
		done := make(chan struct{})
		var out []byte
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s: envoy did not stop on a module it cannot use", mode)
		}
		ee, ok := err.(*exec.ExitError)
		if !ok || !ee.Exited() || ee.ExitCode() == 0 {
			t.Errorf("%s: envoy ended with %v, want an exit with an error status (not a signal)", mode, err)
		}
		if want := "kvgate: this Envoy does not provide the dynamic-module callback envoy_dynamic_module_callback_kvgate_probe_absent"; !strings.Contains(string(out), want) {
			t.Errorf("%s: envoy's output lacks %q:\n%s", mode, want, tail(string(out), 30))
		}
		// Envoy's own words for the refused module: 1.40's, or 1.39's.
		if !strings.Contains(string(out), "envoy_dynamic_module_on_program_init returned null") &&
			!strings.Contains(string(out), "Failed to initialize dynamic module") {
			t.Errorf("%s: envoy does not report the module it could not load:\n%s", mode, tail(string(out), 30))
		}
	}
}

// A Go panic inside Envoy never takes Envoy down: one in the Plugin's
// callbacks and a nil dereference (a SIGSEGV in Go code) in the module's
// own code both answer the request with the filter's 503 (nothing
// forwarded), and Envoy serves the next request as before.
func TestNativePanicsFailClosed(t *testing.T) {
	w := startWorker(t)
	port := envoytest.FreePort(t)
	e := startNativeEnvoyWith(t, nativeModuleTagged(t, "kvgate_panicprobe"), w.Addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	body := []byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"}}`)
	for i, where := range []string{"plugin", "module", "plugin", "module"} {
		key := fmt.Sprintf("native-panic/%s/%d", where, i)
		r, err := send(addr, "POST", "/v1/completions", map[string]string{CaseHeader: key, "x-kvgate-test-panic": where}, body, i%2 == 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 503 || r.ContentType != "application/json" || !bytes.Equal(r.Body, filterspec.FailureBody) {
			t.Errorf("panic in the %s: %d %q %s", where, r.Status, r.ContentType, r.Body)
		}
		if n := len(w.Records(key)); n != 0 {
			t.Errorf("panic in the %s: the worker received the request", where)
		}
		key = fmt.Sprintf("native-after-panic/%d", i)
		r, err = send(addr, "POST", "/v1/completions", map[string]string{CaseHeader: key}, body, false)
		if err != nil || r.Status != 200 {
			t.Fatalf("after a panic in the %s: %v %d %s", where, err, r.Status, r.Body)
		}
		if recs := w.Records(key); len(recs) != 1 || string(recs[0].Body) != `{"model":"m"}` {
			t.Errorf("after a panic in the %s: the worker received %v", where, recs)
		}
	}
	if !strings.Contains(e.Log(), "kvgate: internal error: runtime error: invalid memory address or nil pointer dereference; answering 503") {
		t.Errorf("the module's recovery was not logged:\n%s", tail(e.Log(), 20))
	}
}

// gRPC through the native module as TestEnvoyGRPC through the wasm filter:
// a unary call passes uninspected, a client stream's first message reaches
// the worker while the stream is open, UTF-32 JSON labelled gRPC is
// refused with grpc-status 3, "grpc": "refuse" answers grpc-status 7.
func TestNativeGRPC(t *testing.T) { testGRPC(t, startNativeEnvoy) }

// The body limit is one value with the native module too: 30 MiB forwarded
// whole under a 32 MiB max_body_bytes, 33 MiB answered with the filter's
// 413 naming 32 MiB (TestEnvoyLargeBodyLimit).
func TestNativeLargeBodyLimit(t *testing.T) { testLargeBodyLimit(t, startNativeEnvoy) }

// An Envoy the module does not support ($KVGATE_ENVOY_UNSUPPORTED: make
// native-versions sets it to Envoy 1.38.3, whose ABI lacks a callback the
// module calls) stops at start-up with the module's reason, the real
// module and no probe. Skipped without the variable.
func TestNativeRefusedByUnsupportedEnvoy(t *testing.T) {
	bin := os.Getenv("KVGATE_ENVOY_UNSUPPORTED")
	if bin == "" {
		t.Skip("$KVGATE_ENVOY_UNSUPPORTED is not set")
	}
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.NativeBootstrap, AdminPort: envoytest.FreePort(t), Upstream: "127.0.0.1:9",
		ModulePath: nativeModule(t), Listeners: []envoyconfig.Listener{{Name: "kvgate", Port: envoytest.FreePort(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "envoy.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path, "--mode", "validate", "--disable-hot-restart", "-l", "info")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || !ee.Exited() || ee.ExitCode() == 0 {
		t.Errorf("envoy ended with %v, want an exit with an error status (not a signal):\n%s", err, tail(string(out), 20))
	}
	if !strings.Contains(string(out), "kvgate: this Envoy does not provide the dynamic-module callback ") {
		t.Errorf("envoy's output lacks the module's reason:\n%s", tail(string(out), 20))
	}
}
