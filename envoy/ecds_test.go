package envoy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest"
)

// envoy-ecds.yaml and kvgate-filter.yaml are envoy.yaml by construction:
// ToECDS of envoy.yaml gives both, and Envoy accepts the pair.
func TestECDSBootstrap(t *testing.T) {
	b, r, err := ToECDS(Bootstrap, "/etc/kvgate/ecds/kvgate-filter.yaml", "/etc/kvgate/ecds")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want []byte
	}{{"envoy-ecds.yaml", b, ECDSBootstrap}, {"kvgate-filter.yaml", r, FilterResource}} {
		g, err := Parse(c.got)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Parse(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s is not what ToECDS makes of envoy.yaml", c.name)
		}
	}
	out, err := WithPluginConfig(FilterResource, `{"trust_kv_hints":true}`)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Parse(out)
	if v, _ := Dig(d, "resources", 0, "typed_config", "config", "configuration", "value"); v != `{"trust_kv_hints":true}` {
		t.Errorf("WithPluginConfig: %v", v)
	}

	bin := envoytest.Binary(t)
	dir := t.TempDir()
	ecdsDir := filepath.Join(dir, "ecds")
	if err := os.MkdirAll(ecdsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ecdsDir, "kvgate-filter.yaml")
	rendered, err := Render(Options{AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: filepath.Join("..", "wasm", "kvgate.wasm"), Listeners: []Listener{{Name: "a", Port: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	b, r, err = ToECDS(rendered, file, ecdsDir)
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
	wd, _ := os.Getwd()
	if err := Validate(bin, wd, cfg); err != nil {
		t.Fatal(err)
	}
}
