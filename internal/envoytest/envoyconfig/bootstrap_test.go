package envoyconfig

import (
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/envoy"
)

func committed(t *testing.T) Doc {
	t.Helper()
	d, err := Parse(envoy.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Render keeps everything but what it is asked to change: the stats
// tags as they are, the module path it is given, and a NoFilter listener
// without the wasm filter.
func TestRenderKeeps(t *testing.T) {
	d := committed(t)
	out, err := Render(Options{AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: "/m.wasm",
		Listeners: []Listener{{Name: "a", Port: 3}, {Name: "b", Port: 4, NoFilter: true}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Dig(r, "stats_config"); !reflect.DeepEqual(got, d["stats_config"]) {
		t.Error("Render changed stats_config")
	}
	rc, err := WasmConfig(r)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := Dig(rc, "vm_config", "code", "local", "filename"); f != "/m.wasm" {
		t.Errorf("rendered module path = %v", f)
	}
	if hf, _ := Dig(r, "static_resources", "listeners", 1, "filter_chains", 0, "filters", 0, "typed_config", "http_filters"); len(hf.([]any)) != 2 {
		t.Errorf("NoFilter listener keeps %d http filters, want the status check and the router", len(hf.([]any)))
	}
}

// Render needs the certificate files for a TLS listener (envoy-mtls.yaml's)
// and refuses them for a plain one; it points the listener at them and
// keeps the rest of its TLS settings.
func TestRenderTLS(t *testing.T) {
	opts := Options{Template: envoy.MTLSBootstrap, AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: "/m.wasm",
		Listeners: []Listener{{Name: "a", Port: 3}}}
	if _, err := Render(opts); err == nil {
		t.Error("rendered the mTLS bootstrap without TLS files")
	}
	opts.TLS = &TLSFiles{Cert: "/c.crt", Key: "/c.key", ClientCA: "/ca.crt"}
	out, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := Parse(out)
	for path, want := range map[string][]any{
		"/c.crt":  {"common_tls_context", "tls_certificates", 0, "certificate_chain", "filename"},
		"/c.key":  {"common_tls_context", "tls_certificates", 0, "private_key", "filename"},
		"/ca.crt": {"common_tls_context", "validation_context", "trusted_ca", "filename"},
	} {
		got, err := Dig(r, append([]any{"static_resources", "listeners", 0, "filter_chains", 0, "transport_socket", "typed_config"}, want...)...)
		if err != nil || got != path {
			t.Errorf("rendered %v = %v (%v), want %s", want, got, err, path)
		}
	}
	if got, _ := Dig(r, "static_resources", "listeners", 0, "filter_chains", 0, "transport_socket", "typed_config", "require_client_certificate"); got != false {
		t.Errorf("Render changed require_client_certificate: %v", got)
	}
	opts.Template = nil
	if _, err := Render(opts); err == nil {
		t.Error("rendered TLS files into the plain bootstrap")
	}
}
