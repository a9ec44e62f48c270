package envoy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// envoy-native.yaml is envoy.yaml with the native module filter in place
// of the wasm one, and nothing else: the same listener, limits, connection
// manager, access log and local replies (less the wasm failure mapper),
// plus the runtime flag that keeps the counters' names.
func TestNativeBootstrap(t *testing.T) {
	n, err := envoyconfig.Parse(envoy.NativeBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := envoyconfig.NativeConfig(n)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := envoyconfig.Dig(nc, "dynamic_module_config", "do_not_close"); v != true {
		t.Errorf("dynamic_module_config.do_not_close = %v, want true: a Go runtime must never be unloaded", v)
	}
	if v, _ := envoyconfig.Dig(nc, "dynamic_module_config", "module", "local", "filename"); v != "bin/libkvgate.so" {
		t.Errorf("module file %v, want bin/libkvgate.so", v)
	}
	if rt, _ := envoyconfig.Dig(n, "layered_runtime", "layers", 0, "static_layer", "envoy.reloadable_features.dynamic_modules_strip_custom_stat_prefix"); rt != true {
		t.Errorf("the runtime flag that keeps the counters' names is %v", rt)
	}
	a, err := envoyconfig.PluginConfigOf(n)
	if err != nil {
		t.Fatal(err)
	}
	if b := mustConfigValue(t, committed(t)); a != b {
		t.Errorf("plugin configuration %s, envoy.yaml's %s", a, b)
	}
	// Everything else is envoy.yaml: render both natively and compare.
	render := func(tmpl []byte) []byte {
		b, err := envoyconfig.Render(envoyconfig.Options{Template: tmpl, AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: "/m.so", Native: true,
			Listeners: []envoyconfig.Listener{{Name: "l", Port: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := envoyconfig.Parse(b)
		delete(d, "stats_config") // the wasm filter's tags; the native filter needs none
		// The wasm failure mapper has no native counterpart.
		ms, _ := envoyconfig.Dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "local_reply_config")
		m := ms.(envoyconfig.Doc)
		var kept []any
		for _, x := range m["mappers"].([]any) {
			if e, _ := envoyconfig.Dig(x, "filter", "extension_filter", "typed_config", "expression"); e == nil || !strings.Contains(e.(string), "wasm_fail_stream") {
				kept = append(kept, x)
			}
		}
		m["mappers"] = kept
		out, _ := envoyconfig.Parse(mustJSON(t, d))
		return mustJSON(t, out)
	}
	if a, b := render(envoy.NativeBootstrap), render(envoy.Bootstrap); !bytes.Equal(a, b) {
		t.Errorf("envoy-native.yaml differs from envoy.yaml beyond the filter:\n%s\nvs\n%s", a, b)
	}
}

func mustJSON(t *testing.T, d envoyconfig.Doc) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The committed envoy-native.yaml as it is (the module at bin/libkvgate.so
// from the repository root), a rendered one and envoy-mtls.yaml rendered
// natively pass `envoy --mode validate`, which loads the module and runs
// its configuration hook; a configuration the filter refuses fails with
// the filter's reason.
func TestNativeValidate(t *testing.T) {
	bin := envoytest.Binary(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "libkvgate.so")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-buildmode=c-shared", "-o", module, "./envoy/native/libkvgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the native module: %v\n%s", err, out)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	committedFile := write("envoy-native.yaml", bytes.ReplaceAll(envoy.NativeBootstrap, []byte("filename: bin/libkvgate.so"), []byte("filename: "+module)))
	rendered, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.NativeBootstrap, AdminPort: 19911, Upstream: "127.0.0.1:18000", ModulePath: module,
		Listeners: []envoyconfig.Listener{{Name: "untrusted", Port: 18011}, {Name: "trusted", Port: 18012, PluginConfig: `{"trust_kv_hints":true,"max_body_bytes":1024}`},
			{Name: "plain", Port: 18013, NoFilter: true}}})
	if err != nil {
		t.Fatal(err)
	}
	mtls, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: testTLSFiles(t, dir), Native: true, AdminPort: 19913, Upstream: "127.0.0.1:18000",
		ModulePath: module, Listeners: []envoyconfig.Listener{{Name: "senders", Port: 18015}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]string{"committed": committedFile, "rendered": write("rendered.json", rendered), "mtls": write("mtls.json", mtls)} {
		if err := envoyconfig.Validate(bin, root, f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.NativeBootstrap, AdminPort: 19912, Upstream: "127.0.0.1:18000", ModulePath: module,
		Listeners: []envoyconfig.Listener{{Name: "bad", Port: 18014, PluginConfig: `{"trust_kv_hint":true}`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := envoyconfig.Validate(bin, root, write("bad.json", bad)); err == nil {
		t.Error("a plugin configuration with an unknown member validated")
	} else if !strings.Contains(err.Error(), "unknown member") {
		t.Errorf("validation failed without the filter's reason: %v", err)
	}
}
