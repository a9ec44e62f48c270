package envoy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/tests/pki"
)

// testTLSFiles writes a CA and a server certificate for 127.0.0.1 to dir.
func testTLSFiles(t *testing.T, dir string) *envoyconfig.TLSFiles {
	t.Helper()
	ca, err := pki.NewCA("kvgate test CA")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteListener(dir, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return &envoyconfig.TLSFiles{Cert: f.Cert, Key: f.Key, ClientCA: f.ClientCA}
}

func committed(t *testing.T) envoyconfig.Doc {
	t.Helper()
	d, err := envoyconfig.Parse(envoy.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkWasmConfig checks an Envoy wasm PluginConfig as kvgate needs it and
// returns its plugin configuration.
func checkWasmConfig(t *testing.T, where string, c envoyconfig.Doc) filterspec.Config {
	t.Helper()
	str := func(path ...any) string {
		v, err := envoyconfig.Dig(c, path...)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return ""
		}
		s, _ := v.(string)
		return s
	}
	// FAIL_RELOAD: 503 while the VM is down, never a forward, and a fresh
	// VM after a trap (FAIL_CLOSED kept a worker thread answering 503 until
	// Envoy restarted: tests/e2e TestTrapRecovers).
	if got := str("failure_policy"); got != "FAIL_RELOAD" {
		t.Errorf("%s: failure_policy = %q, want FAIL_RELOAD", where, got)
	}
	if _, ok := c["fail_open"]; ok {
		t.Errorf("%s: fail_open is deprecated; use failure_policy", where)
	}
	if got := str("vm_config", "runtime"); got != "envoy.wasm.runtime.v8" {
		t.Errorf("%s: runtime = %q, want envoy.wasm.runtime.v8", where, got)
	}
	if got := str("configuration", "@type"); got != "type.googleapis.com/google.protobuf.StringValue" {
		t.Errorf("%s: configuration type = %q", where, got)
	}
	cfg, err := filterspec.ParseConfig([]byte(str("configuration", "value")))
	if err != nil {
		t.Errorf("%s: plugin configuration: %v", where, err)
	}
	return cfg
}

// The committed bootstrap: the module on V8, fail closed, a configuration the
// filter accepts whose body limit is the listener's buffer limit and the
// sidecar's default, the admin listener on loopback.
func TestCommittedBootstrap(t *testing.T) {
	d := committed(t)
	wc, err := envoyconfig.WasmConfig(d)
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkWasmConfig(t, "envoy.yaml", wc)
	if cfg.MaxBodyBytes != filterspec.DefaultMaxBodyBytes {
		t.Errorf("max_body_bytes = %d, want the default %d", cfg.MaxBodyBytes, filterspec.DefaultMaxBodyBytes)
	}
	if cfg.TrustKVHints {
		t.Error("the committed bootstrap must not trust hints")
	}
	checkHCM(t, "envoy.yaml", d)
	limit, err := envoyconfig.Dig(d, "static_resources", "listeners", 0, "per_connection_buffer_limit_bytes")
	if err != nil || limit != float64(cfg.MaxBodyBytes+envoy.BufferHeadroom) {
		t.Errorf("listener per_connection_buffer_limit_bytes = %v (%v), want max_body_bytes %d + %d", limit, err, cfg.MaxBodyBytes, envoy.BufferHeadroom)
	}
	hf, err := envoyconfig.Dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters")
	if err != nil {
		t.Fatal(err)
	}
	var names []any
	for _, f := range hf.([]any) {
		names = append(names, f.(envoyconfig.Doc)["name"])
	}
	if want := []any{envoy.WasmFilterName, envoy.StatusCheckFilterName, "envoy.filters.http.router"}; !reflect.DeepEqual(names, want) {
		t.Errorf("http filters %v, want %v", names, want)
	}
	file, err := envoyconfig.Dig(wc, "vm_config", "code", "local", "filename")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("..", file.(string))); err != nil {
		t.Errorf("module %v (relative to the repository root): %v", file, err)
	}
	if a, err := envoyconfig.Dig(d, "admin", "address", "socket_address", "address"); err != nil || a != "127.0.0.1" {
		t.Errorf("admin address = %v (%v), want 127.0.0.1", a, err)
	}
}

// checkHCM checks that every HTTP connection manager of a bootstrap takes
// source.address from the connection's peer (never from X-Forwarded-For)
// and drops a client's x-forwarded-client-cert.
func checkHCM(t *testing.T, where string, d envoyconfig.Doc) {
	t.Helper()
	ls, err := envoyconfig.Dig(d, "static_resources", "listeners")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for li, l := range ls.([]any) {
		for ci, fc := range l.(envoyconfig.Doc)["filter_chains"].([]any) {
			for _, f := range fc.(envoyconfig.Doc)["filters"].([]any) {
				if f.(envoyconfig.Doc)["name"] != "envoy.filters.network.http_connection_manager" {
					continue
				}
				n++
				tc := f.(envoyconfig.Doc)["typed_config"].(envoyconfig.Doc)
				at := fmt.Sprintf("%s listener %d chain %d", where, li, ci)
				if tc["use_remote_address"] != true {
					t.Errorf("%s: use_remote_address = %v, want true", at, tc["use_remote_address"])
				}
				if v, ok := tc["xff_num_trusted_hops"]; !ok || v != float64(0) {
					t.Errorf("%s: xff_num_trusted_hops = %v, want an explicit 0", at, v)
				}
				if tc["forward_client_cert_details"] != "SANITIZE" {
					t.Errorf("%s: forward_client_cert_details = %v, want SANITIZE", at, tc["forward_client_cert_details"])
				}
				for _, k := range []string{"original_ip_detection_extensions", "skip_xff_append", "set_current_client_cert_details", "internal_address_config"} {
					if _, ok := tc[k]; ok {
						t.Errorf("%s: %s is set: source.address must be the peer", at, k)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no HTTP connection manager", where)
	}
}

// envoy-mtls.yaml is envoy.yaml behind TLS that verifies client
// certificates when presented, with a trusted_senders configuration:
// nothing else differs. (envoyconfig's TestRenderTLS: rendering it needs
// the certificate files.)
func TestMTLSBootstrap(t *testing.T) {
	plain := committed(t)
	m, err := envoyconfig.Parse(envoy.MTLSBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	checkHCM(t, "envoy-mtls.yaml", m)
	wc, err := envoyconfig.WasmConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkWasmConfig(t, "envoy-mtls.yaml", wc)
	if cfg.TrustKVHints || cfg.TrustedSenders.Len() == 0 {
		t.Errorf("envoy-mtls.yaml: trust_kv_hints %v with %d trusted_senders, want trusted_senders only", cfg.TrustKVHints, cfg.TrustedSenders.Len())
	}
	for _, r := range cfg.TrustedSenders.Rules() {
		if !strings.HasPrefix(r.Principal, "spiffe://") {
			t.Errorf("envoy-mtls.yaml: example rule %+v, want a SPIFFE principal", r)
		}
	}
	ts, err := envoyconfig.Dig(m, "static_resources", "listeners", 0, "filter_chains", 0, "transport_socket")
	if err != nil {
		t.Fatal(err)
	}
	tc := ts.(envoyconfig.Doc)["typed_config"].(envoyconfig.Doc)
	if tc["@type"] != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext" {
		t.Errorf("transport socket %v", tc["@type"])
	}
	if tc["require_client_certificate"] != false {
		t.Errorf("require_client_certificate = %v, want false: clients without a certificate are served untrusted", tc["require_client_certificate"])
	}
	vc, err := envoyconfig.Dig(tc, "common_tls_context", "validation_context")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envoyconfig.Dig(vc, "trusted_ca", "filename"); err != nil {
		t.Errorf("validation_context: %v", err)
	}
	if v, ok := vc.(envoyconfig.Doc)["trust_chain_verification"]; ok && v != "VERIFY_TRUST_CHAIN" {
		t.Errorf("trust_chain_verification = %v: connection.mtls would be true for unverified certificates", v)
	}
	// Everything else is envoy.yaml.
	c, ok := wc["configuration"].(envoyconfig.Doc)
	if !ok {
		t.Fatal("envoy-mtls.yaml: the wasm filter has no configuration")
	}
	c["value"] = mustConfigValue(t, plain)
	l := m["static_resources"].(envoyconfig.Doc)["listeners"].([]any)[0].(envoyconfig.Doc)
	delete(l["filter_chains"].([]any)[0].(envoyconfig.Doc), "transport_socket")
	l["address"] = plain["static_resources"].(envoyconfig.Doc)["listeners"].([]any)[0].(envoyconfig.Doc)["address"]
	if !reflect.DeepEqual(m, plain) {
		a, _ := json.MarshalIndent(m, "", " ")
		b, _ := json.MarshalIndent(plain, "", " ")
		t.Errorf("envoy-mtls.yaml differs from envoy.yaml beyond TLS, address and plugin configuration:\n%s\nvs\n%s", a, b)
	}
}

// bodyLimits returns what follows the body limit in a listener of a parsed
// bootstrap: its buffer limit and the body of its own 413.
func bodyLimits(t *testing.T, d envoyconfig.Doc, listener int) (buffer any, tooLarge string) {
	t.Helper()
	l, err := envoyconfig.Dig(d, "static_resources", "listeners", listener)
	if err != nil {
		t.Fatal(err)
	}
	m, err := envoyconfig.TooLargeMapper(l.(envoyconfig.Doc))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := envoyconfig.Dig(m, "body", "inline_string")
	s, _ := body.(string)
	return l.(envoyconfig.Doc)["per_connection_buffer_limit_bytes"], s
}

// The body limit is one value, the plugin configuration's max_body_bytes:
// the listener's and the cluster's buffer limits and the limit named by
// Envoy's own 413 follow it, in the committed bootstrap and in every
// rendered one, listener by listener.
func TestBodyLimitIsOneValue(t *testing.T) {
	d := committed(t)
	limit := checkWasmConfig(t, "envoy.yaml", mustWasmConfig(t, d)).MaxBodyBytes
	buf, body := bodyLimits(t, d, 0)
	if buf != float64(envoyconfig.BufferLimit(limit)) || body != envoyconfig.TooLargeBody(limit) {
		t.Errorf("envoy.yaml: buffer limit %v and 413 body %s, want %d and %s for max_body_bytes %d", buf, body, envoyconfig.BufferLimit(limit), envoyconfig.TooLargeBody(limit), limit)
	}
	if got, _ := envoyconfig.Dig(d, "static_resources", "clusters", 0, "per_connection_buffer_limit_bytes"); got != float64(envoyconfig.BufferLimit(limit)) {
		t.Errorf("envoy.yaml: cluster buffer limit %v, want %d", got, envoyconfig.BufferLimit(limit))
	}
	if !strings.Contains(body, fmt.Sprintf("limit of %d bytes", limit)) {
		t.Errorf("envoy.yaml: 413 body %s does not name the limit %d", body, limit)
	}

	const big = 32 << 20
	out, err := envoyconfig.Render(envoyconfig.Options{AdminPort: 1, Upstream: "127.0.0.1:2", ModulePath: "/m.wasm", Listeners: []envoyconfig.Listener{
		{Name: "big", Port: 3, PluginConfig: fmt.Sprintf(`{"max_body_bytes":%d}`, big)},
		{Name: "default", Port: 4},
		{Name: "small", Port: 5, PluginConfig: `{"max_body_bytes":1000}`},
		{Name: "plain", Port: 6, NoFilter: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := envoyconfig.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{big, limit, 1000, limit} {
		buf, body := bodyLimits(t, r, i)
		if buf != float64(envoyconfig.BufferLimit(want)) || body != envoyconfig.TooLargeBody(want) {
			t.Errorf("listener %d: buffer limit %v and 413 body %s, want %d and %s", i, buf, body, envoyconfig.BufferLimit(want), envoyconfig.TooLargeBody(want))
		}
	}
	if got, _ := envoyconfig.Dig(r, "static_resources", "clusters", 0, "per_connection_buffer_limit_bytes"); got != float64(envoyconfig.BufferLimit(big)) {
		t.Errorf("rendered cluster buffer limit %v, want %d (the largest listener's)", got, envoyconfig.BufferLimit(big))
	}
}

func mustWasmConfig(t *testing.T, d envoyconfig.Doc) envoyconfig.Doc {
	t.Helper()
	wc, err := envoyconfig.WasmConfig(d)
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

// Every configuration in envoy/ and each one the tests and the Istio
// manifests build passes `envoy --mode validate`, which loads the module on
// V8 and runs its configuration callbacks.
func TestValidate(t *testing.T) {
	bin := envoytest.Binary(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(root, "wasm", "kvgate.wasm")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type job struct {
		name, config string
		extra        []string
	}
	var jobs []job
	tlsFiles := testTLSFiles(t, dir)
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		if f == "envoy-native.yaml" {
			continue // needs the built native module: native_test.go validates it
		}
		abs, _ := filepath.Abs(f)
		switch f {
		case "kvgate-filter.yaml":
			continue // not a bootstrap: the ECDS resource, validated with envoy-ecds.yaml
		case "envoy-ecds.yaml":
			// The committed file as it is, with its resource file at a
			// path of the test's.
			ecds := filepath.Join(dir, "ecds")
			if err := os.MkdirAll(ecds, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ecds, "kvgate-filter.yaml"), envoy.FilterResource, 0o644); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(f)
			b = bytes.ReplaceAll(b, []byte("/etc/kvgate/ecds"), []byte(ecds))
			abs = write("envoy-ecds.yaml", b)
		}
		if f == "envoy-mtls.yaml" {
			// The committed file as it is, with the test's certificates
			// in place of the operator's.
			b, _ := os.ReadFile(f)
			b = bytes.ReplaceAll(b, []byte("/etc/kvgate/tls/server.crt"), []byte(tlsFiles.Cert))
			b = bytes.ReplaceAll(b, []byte("/etc/kvgate/tls/server.key"), []byte(tlsFiles.Key))
			b = bytes.ReplaceAll(b, []byte("/etc/kvgate/tls/client-ca.crt"), []byte(tlsFiles.ClientCA))
			abs = write("envoy-mtls.yaml", b)
		}
		jobs = append(jobs, job{name: f, config: abs})
	}
	rendered, err := envoyconfig.Render(envoyconfig.Options{AdminPort: 19901, Upstream: "127.0.0.1:18000", ModulePath: module,
		Listeners: []envoyconfig.Listener{
			{Name: "untrusted", Port: 18001},
			{Name: "trusted", Port: 18002, PluginConfig: `{"trust_kv_hints":true,"max_depth":4,"max_body_bytes":1024,"exclude_paths":["/health"]}`},
			{Name: "plain", Port: 18003, NoFilter: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, job{name: "rendered", config: write("rendered.json", rendered)})
	renderedMTLS, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: tlsFiles, AdminPort: 19903, Upstream: "127.0.0.1:18000", ModulePath: module,
		Listeners: []envoyconfig.Listener{{Name: "senders", Port: 18005}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, job{name: "rendered-mtls", config: write("rendered-mtls.json", renderedMTLS)})

	// Istio: the bootstrap fragment of stats.yaml merged into a bootstrap
	// without stats tags, as Istio merges it into its own.
	base := committed(t)
	delete(base, "stats_config")
	wc, _ := envoyconfig.WasmConfig(base)
	wc["vm_config"].(envoyconfig.Doc)["code"] = envoyconfig.Doc{"local": envoyconfig.Doc{"filename": module}}
	b, _ := json.Marshal(base)
	frag, _ := json.Marshal(istioBootstrapFragment(t))
	jobs = append(jobs, job{name: "istio/stats.yaml overlay", config: write("nostats.json", b), extra: []string{"--config-yaml", string(frag)}})

	// Istio: the EnvoyFilter patches applied to the committed listener.
	jobs = append(jobs, job{name: "istio/envoyfilter.yaml patches", config: write("envoyfilter.json", envoyFilterApplied(t, module))})

	for _, j := range jobs {
		t.Run(strings.ReplaceAll(j.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			if err := envoyconfig.Validate(bin, root, j.config, j.extra...); err != nil {
				t.Error(err)
			}
		})
	}
	// A configuration the filter refuses must fail validation: the plugin
	// configuration is checked at start-up, not at request time.
	t.Run("unknown_member_fails", func(t *testing.T) {
		t.Parallel()
		bad, err := envoyconfig.Render(envoyconfig.Options{AdminPort: 19902, Upstream: "127.0.0.1:18000", ModulePath: module,
			Listeners: []envoyconfig.Listener{{Name: "bad", Port: 18004, PluginConfig: `{"trust_kv_hint":true}`}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := envoyconfig.Validate(bin, root, write("bad.json", bad)); err == nil {
			t.Error("a plugin configuration with an unknown member validated")
		} else if !strings.Contains(err.Error(), "unknown member") {
			t.Errorf("validation failed without the filter's reason: %v", err)
		}
	})
}
