package envoyconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
)

// WithPluginConfig replaces the plugin configuration of an ECDS filter
// file.
func TestWithPluginConfig(t *testing.T) {
	out, err := WithPluginConfig(envoy.FilterResource, `{"trust_kv_hints":true}`)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Parse(out)
	if v, _ := Dig(d, "resources", 0, "typed_config", "config", "configuration", "value"); v != `{"trust_kv_hints":true}` {
		t.Errorf("WithPluginConfig: %v", v)
	}
}

// ToECDS of a rendered bootstrap gives a pair that Envoy accepts, as
// tests/e2e runs it. (envoy's TestECDSBootstrap: ToECDS of envoy.yaml is
// the committed pair.)
func TestToECDSRendered(t *testing.T) {
	bin := envoytest.Binary(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ecdsDir := filepath.Join(dir, "ecds")
	if err := os.MkdirAll(ecdsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ecdsDir, "kvgate-filter.yaml")
	rendered, err := Render(Options{AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: filepath.Join("wasm", "kvgate.wasm"), Listeners: []Listener{{Name: "a", Port: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	b, r, err := ToECDS(rendered, file, ecdsDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, r, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "envoy.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Validate(bin, root, cfg); err != nil {
		t.Fatal(err)
	}
}
