package envoy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	extensions "istio.io/api/extensions/v1alpha1"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	"sigs.k8s.io/yaml"
)

// object is one Kubernetes document of a manifest file.
type object struct {
	file, kind string
	doc        map[string]json.RawMessage
}

// readObjects reads every document of the YAML files in istio/.
func readObjects(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("istio", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in istio/: %v", err)
	}
	var out []object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, part := range splitDocs(raw) {
			j, err := yaml.YAMLToJSON(part)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(j, &doc); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var kind string
			_ = json.Unmarshal(doc["kind"], &kind)
			out = append(out, object{file: f, kind: kind, doc: doc})
		}
	}
	return out
}

// splitDocs splits a YAML stream at "---" lines, dropping empty documents.
func splitDocs(b []byte) [][]byte {
	var out [][]byte
	for _, p := range bytes.Split(append([]byte("\n"), b...), []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(p))) > 0 {
			out = append(out, p)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
		}
	}
	return out
}

// strict parses JSON into an Istio API message, rejecting unknown fields.
func strict(t *testing.T, where string, j []byte, m proto.Message) {
	t.Helper()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(j, m); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// checkTop rejects unknown top-level and metadata members of a manifest.
func checkTop(t *testing.T, o object, apiVersion string) {
	t.Helper()
	for k := range o.doc {
		switch k {
		case "apiVersion", "kind", "metadata", "spec", "data":
		default:
			t.Errorf("%s %s: unknown member %q", o.file, o.kind, k)
		}
	}
	var av string
	_ = json.Unmarshal(o.doc["apiVersion"], &av)
	if av != apiVersion {
		t.Errorf("%s %s: apiVersion %q, want %q", o.file, o.kind, av, apiVersion)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(o.doc["metadata"], &meta); err != nil {
		t.Errorf("%s %s: metadata: %v", o.file, o.kind, err)
	}
	for k := range meta {
		switch k {
		case "name", "namespace", "labels", "annotations":
		default:
			t.Errorf("%s %s: unknown metadata member %q", o.file, o.kind, k)
		}
	}
	if meta["name"] == nil {
		t.Errorf("%s %s: no metadata.name", o.file, o.kind)
	}
}

// routerPrincipal is the form of a workload identity in Istio.
var routerPrincipal = regexp.MustCompile(`^spiffe://[a-z0-9.-]+/ns/[a-z0-9-]+/sa/[a-z0-9-]+$`)

// sameAsEnvoyYAML compares an Istio plugin configuration with envoy.yaml's:
// equal but for trusted_senders, which must trust exactly one workload by
// its SPIFFE principal.
func sameAsEnvoyYAML(t *testing.T, where string, got, want filterspec.Config) {
	t.Helper()
	rules := got.TrustedSenders.Rules()
	if len(rules) != 1 || !routerPrincipal.MatchString(rules[0].Principal) || rules[0].DNSName != "" || rules[0].SourceCIDR.IsValid() {
		t.Errorf("%s: trusted_senders %+v, want one rule with the router's SPIFFE principal", where, rules)
	}
	got.TrustedSenders = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: configuration %+v, envoy.yaml has %+v", where, got, want)
	}
}

// checkHCMPatch checks an EnvoyFilter patch of the inbound connection
// manager: source.address from the peer, no client XFCC (as checkHCM).
func checkHCMPatch(t *testing.T, where string, p *networking.EnvoyFilter_EnvoyConfigObjectPatch) {
	t.Helper()
	if p.GetPatch().GetOperation() != networking.EnvoyFilter_Patch_MERGE ||
		p.GetMatch().GetListener().GetFilterChain().GetFilter().GetName() != "envoy.filters.network.http_connection_manager" {
		t.Errorf("%s: NETWORK_FILTER patch must MERGE into the http_connection_manager", where)
	}
	tc, err := envoyconfig.Dig(p.GetPatch().GetValue().AsMap(), "typed_config")
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	checkHCM(t, where, envoyconfig.Doc{"static_resources": envoyconfig.Doc{"listeners": []any{envoyconfig.Doc{"filter_chains": []any{envoyconfig.Doc{"filters": []any{
		envoyconfig.Doc{"name": "envoy.filters.network.http_connection_manager", "typed_config": tc}}}}}}}})
}

// The Istio manifests parse into the istio.io/api types with unknown fields
// rejected, and say what envoy.yaml says: the same plugin configuration
// (but for the router as the one trusted sender), fail closed and reload
// after a trap, the 4 MiB buffer limit, source.address from the peer, the
// committed module's digest, and mutual TLS required.
func TestIstioManifests(t *testing.T) {
	want, err := filterspec.ParseConfig([]byte(mustConfigValue(t, committed(t))))
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := committed(t)
	kinds := map[string]int{}
	for _, o := range readObjects(t) {
		where := o.file + " " + o.kind
		kinds[filepath.Base(o.file)+" "+o.kind]++
		switch o.kind {
		case "WasmPlugin":
			checkTop(t, o, "extensions.istio.io/v1alpha1")
			var wp extensions.WasmPlugin
			strict(t, where, o.doc["spec"], &wp)
			// FAIL_RELOAD is Envoy's failure_policy FAIL_RELOAD (a trapped
			// VM is rebuilt) and falls back to FAIL_CLOSE for a module that
			// cannot be fetched or loaded; FAIL_OPEN would forward unfiltered.
			if wp.GetFailStrategy() != extensions.FailStrategy_FAIL_RELOAD {
				t.Errorf("%s: failStrategy %v, want FAIL_RELOAD", where, wp.GetFailStrategy())
			}
			if wp.GetPhase() != extensions.PluginPhase_AUTHZ {
				t.Errorf("%s: phase %v, want AUTHZ", where, wp.GetPhase())
			}
			if wp.GetType() != extensions.PluginType_HTTP {
				t.Errorf("%s: type %v, want HTTP", where, wp.GetType())
			}
			if !strings.HasPrefix(wp.GetUrl(), "oci://") {
				t.Errorf("%s: url %q, want an oci:// image", where, wp.GetUrl())
			}
			// That sha256 is the committed module's image digest:
			// deploy/internal/filterimage's test checks it.
			if len(wp.GetSha256()) != 64 {
				t.Errorf("%s: sha256 %q, want the image's manifest digest (64 hex digits)", where, wp.GetSha256())
			}
			if len(wp.GetMatch()) != 1 || len(wp.GetMatch()[0].GetPorts()) != 0 || wp.GetMatch()[0].GetMode().String() != "SERVER" {
				t.Errorf("%s: match %v, want inbound (SERVER) only", where, wp.GetMatch())
			}
			// Istio hands pluginConfig to the module as its JSON.
			j, err := protojson.Marshal(wp.GetPluginConfig())
			if err != nil {
				t.Fatal(err)
			}
			got, err := filterspec.ParseConfig(j)
			if err != nil {
				t.Errorf("%s: pluginConfig %s: %v", where, j, err)
			} else {
				sameAsEnvoyYAML(t, where+" pluginConfig", got, want)
			}
		case "EnvoyFilter":
			checkTop(t, o, "networking.istio.io/v1alpha3")
			var ef networking.EnvoyFilter
			strict(t, where, o.doc["spec"], &ef)
			if len(ef.GetWorkloadSelector().GetLabels()) == 0 {
				t.Errorf("%s: no workloadSelector: it would apply to every proxy", where)
			}
			sawLimit, sawFilter, sawHCM := false, false, false
			seen := map[string]bool{}
			for _, p := range ef.GetConfigPatches() {
				if p.GetMatch().GetContext() != networking.EnvoyFilter_SIDECAR_INBOUND {
					t.Errorf("%s: patch %v context %v, want SIDECAR_INBOUND", where, p.GetApplyTo(), p.GetMatch().GetContext())
				}
				v := p.GetPatch().GetValue().AsMap()
				switch p.GetApplyTo() {
				case networking.EnvoyFilter_LISTENER:
					sawLimit = v["per_connection_buffer_limit_bytes"] == float64(want.MaxBodyBytes+envoy.BufferHeadroom) &&
						p.GetPatch().GetOperation() == networking.EnvoyFilter_Patch_MERGE
				case networking.EnvoyFilter_CLUSTER, networking.EnvoyFilter_HTTP_ROUTE:
					seen[p.GetApplyTo().String()] = true
					checkWorkerPatch(t, where, p, bootstrap)
				case networking.EnvoyFilter_HTTP_FILTER:
					if v["name"] == envoy.StatusCheckFilterName {
						seen["status check"] = true
						checkWorkerPatch(t, where, p, bootstrap)
						continue
					}
					sawFilter = true
					c, err := envoyconfig.Dig(v, "typed_config", "config")
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					sameAsEnvoyYAML(t, where, checkWasmConfig(t, where, c.(envoyconfig.Doc)), want)
				case networking.EnvoyFilter_NETWORK_FILTER:
					sawHCM = true
					checkHCMPatch(t, where, p)
					checkWorkerPatch(t, where, p, bootstrap)
				default:
					t.Errorf("%s: unexpected patch %v", where, p.GetApplyTo())
				}
			}
			if !sawLimit {
				t.Errorf("%s: no LISTENER MERGE of per_connection_buffer_limit_bytes %d", where, want.MaxBodyBytes+envoy.BufferHeadroom)
			}
			if o.file == filepath.Join("istio", "envoyfilter.yaml") && !sawFilter {
				t.Errorf("%s: no wasm HTTP_FILTER patch", where)
			}
			if !sawHCM {
				t.Errorf("%s: no NETWORK_FILTER patch of the connection manager", where)
			}
			for _, k := range []string{"CLUSTER", "HTTP_ROUTE", "status check"} {
				if !seen[k] {
					t.Errorf("%s: no %s patch of the worker connection (docs/spec.md, The worker connection)", where, k)
				}
			}
		case "PeerAuthentication":
			checkTop(t, o, "security.istio.io/v1")
			var pa security.PeerAuthentication
			strict(t, where, o.doc["spec"], &pa)
			if pa.GetMtls().GetMode() != security.PeerAuthentication_MutualTLS_STRICT {
				t.Errorf("%s: mtls mode %v, want STRICT: without it a caller has no principal", where, pa.GetMtls().GetMode())
			}
			if pa.GetSelector().GetMatchLabels()["app"] != "llm-worker" {
				t.Errorf("%s: selector %v, want the worker pods (app: llm-worker)", where, pa.GetSelector())
			}
			if len(pa.GetPortLevelMtls()) != 0 {
				t.Errorf("%s: port-level exceptions %v", where, pa.GetPortLevelMtls())
			}
		case "AuthorizationPolicy":
			checkTop(t, o, "security.istio.io/v1")
			var ap security.AuthorizationPolicy
			strict(t, where, o.doc["spec"], &ap)
			checkWorkerPolicy(t, where, &ap)
		case "ConfigMap":
			checkTop(t, o, "v1")
			// Its custom_bootstrap.json is JSON (istioBootstrapFragment
			// fails the test otherwise), its
			// stats_tags are the metric table's (internal/statstags:
			// TestFilesUpToDate, TestGeneratedParses), and Envoy accepts
			// it merged into a bootstrap (TestValidate).
			_ = istioBootstrapFragment(t)
		case "":
			// worker-annotations.yaml: a pod template patch.
			ann := podAnnotations(t, o)
			if ann["sidecar.istio.io/bootstrapOverride"] != "kvgate-stats-bootstrap" {
				t.Errorf("%s: bootstrapOverride = %q", o.file, ann["sidecar.istio.io/bootstrapOverride"])
			}
			j, err := yaml.YAMLToJSON([]byte(ann["proxy.istio.io/config"]))
			if err != nil {
				t.Fatal(err)
			}
			var pc meshconfig.ProxyConfig
			strict(t, o.file+" proxy.istio.io/config", j, &pc)
			m := pc.GetProxyStatsMatcher()
			// The filter's counters, and the inbound connection managers'
			// request stats that the Envoy alert and panels read (Istio
			// names them http.inbound_<ip>_<port>.*).
			for _, full := range append(wasmcustom(filterspec.MetricNames()), "http.inbound_10.1.2.3_8000.downstream_rq_xx") {
				ok := false
				for _, p := range m.GetInclusionPrefixes() {
					ok = ok || strings.HasPrefix(full, p)
				}
				if !ok {
					t.Errorf("%s: proxyStatsMatcher does not include %s", o.file, full)
				}
			}
		default:
			t.Errorf("%s: unexpected kind %q", o.file, o.kind)
		}
	}
	for _, k := range []string{"wasmplugin.yaml WasmPlugin", "wasmplugin.yaml EnvoyFilter", "envoyfilter.yaml EnvoyFilter", "stats.yaml ConfigMap", "worker-annotations.yaml ", "peerauthentication.yaml PeerAuthentication", "authorizationpolicy.yaml AuthorizationPolicy"} {
		if kinds[k] != 1 {
			t.Errorf("want exactly one %q, have %d", k, kinds[k])
		}
	}
}

// checkWorkerPolicy checks the AuthorizationPolicy that keeps the worker
// reachable only through kvgate: it allows (and so refuses everything
// else) on the worker pods; each rule needs a caller with a mutual-TLS
// identity, and allows only HTTP, through an HTTP-only field (paths,
// methods or hosts), because Istio drops such a rule on a TCP filter
// chain, where no HTTP filter, kvgate included, would run.
func checkWorkerPolicy(t *testing.T, where string, ap *security.AuthorizationPolicy) {
	t.Helper()
	if ap.GetAction() != security.AuthorizationPolicy_ALLOW {
		t.Errorf("%s: action %v, want ALLOW", where, ap.GetAction())
	}
	if ap.GetSelector().GetMatchLabels()["app"] != "llm-worker" {
		t.Errorf("%s: selector %v, want the worker pods (app: llm-worker)", where, ap.GetSelector())
	}
	if len(ap.GetRules()) == 0 {
		t.Errorf("%s: no rules: an ALLOW policy without rules refuses everything", where)
	}
	for i, r := range ap.GetRules() {
		if len(r.GetFrom()) == 0 || len(r.GetTo()) == 0 {
			t.Errorf("%s: rule %d needs both from and to", where, i)
		}
		for _, f := range r.GetFrom() {
			if len(f.GetSource().GetPrincipals()) == 0 {
				t.Errorf("%s: rule %d admits callers without a mutual-TLS identity (no principals)", where, i)
			}
		}
		for _, to := range r.GetTo() {
			op := to.GetOperation()
			if len(op.GetPaths())+len(op.GetMethods())+len(op.GetHosts()) == 0 {
				t.Errorf("%s: rule %d has no HTTP-only field: it would also allow TCP, past every HTTP filter", where, i)
			}
			if len(op.GetPorts()) == 0 {
				t.Errorf("%s: rule %d names no port", where, i)
			}
		}
	}
}

// The strict parse is what catches a typo.
func TestIstioTypoFails(t *testing.T) {
	for _, c := range []struct {
		m    proto.Message
		spec string
	}{
		{&extensions.WasmPlugin{}, `{"url":"oci://x/y:1","failStrategyy":"FAIL_CLOSE"}`},
		{&extensions.WasmPlugin{}, `{"url":"oci://x/y:1","failStrategy":"FAIL_CLOSED"}`},
		{&networking.EnvoyFilter{}, `{"configPatches":[{"applyTo":"LISTENER","patchh":{}}]}`},
		{&meshconfig.ProxyConfig{}, `{"proxyStatsMatcher":{"inclusionPrefix":["x"]}}`},
		{&security.PeerAuthentication{}, `{"mtls":{"mode":"STRICTT"}}`},
		{&security.PeerAuthentication{}, `{"mTLS":{"mode":"STRICT"}}`},
		{&security.AuthorizationPolicy{}, `{"action":"ALLOWW"}`},
		{&security.AuthorizationPolicy{}, `{"rules":[{"to":[{"operation":{"path":["*"]}}]}]}`},
	} {
		if err := (protojson.UnmarshalOptions{}).Unmarshal([]byte(c.spec), c.m); err == nil {
			t.Errorf("%T accepted %s", c.m, c.spec)
		}
	}
}

func mustConfigValue(t *testing.T, d envoyconfig.Doc) string {
	t.Helper()
	wc, err := envoyconfig.WasmConfig(d)
	if err != nil {
		t.Fatal(err)
	}
	v, err := envoyconfig.Dig(wc, "configuration", "value")
	if err != nil {
		t.Fatal(err)
	}
	return v.(string)
}

func wasmcustom(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "wasmcustom." + n
	}
	return out
}

// istioBootstrapFragment returns custom_bootstrap.json of istio/stats.yaml.
func istioBootstrapFragment(t *testing.T) envoyconfig.Doc {
	t.Helper()
	for _, o := range readObjects(t) {
		if o.kind != "ConfigMap" {
			continue
		}
		var data map[string]string
		if err := json.Unmarshal(o.doc["data"], &data); err != nil {
			t.Fatal(err)
		}
		var d envoyconfig.Doc
		dec := json.NewDecoder(strings.NewReader(data["custom_bootstrap.json"]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: custom_bootstrap.json: %v", o.file, err)
		}
		return d
	}
	t.Fatal("no ConfigMap with custom_bootstrap.json in istio/")
	return nil
}

func podAnnotations(t *testing.T, o object) map[string]string {
	t.Helper()
	var p struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	b, _ := json.Marshal(o.doc)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", o.file, err)
	}
	return p.Spec.Template.Metadata.Annotations
}

// envoyFilterApplied returns the committed bootstrap with the patches of
// istio/envoyfilter.yaml applied to its listener the way Istio applies them
// to the inbound listener: LISTENER and NETWORK_FILTER merged, the wasm
// HTTP_FILTER inserted first (in place of the committed wasm filter), the
// module path set to module. The worker-connection patches (CLUSTER,
// HTTP_ROUTE, the status check) are what the committed bootstrap already
// has, as checkWorkerPatch shows.
func envoyFilterApplied(t *testing.T, module string) []byte {
	t.Helper()
	d := committed(t)
	l, _ := envoyconfig.Dig(d, "static_resources", "listeners", 0)
	tc, _ := envoyconfig.Dig(l, "filter_chains", 0, "filters", 0, "typed_config")
	for _, o := range readObjects(t) {
		if o.kind != "EnvoyFilter" || o.file != filepath.Join("istio", "envoyfilter.yaml") {
			continue
		}
		var ef networking.EnvoyFilter
		strict(t, o.file, o.doc["spec"], &ef)
		for _, p := range ef.GetConfigPatches() {
			v := p.GetPatch().GetValue().AsMap()
			switch p.GetApplyTo() {
			case networking.EnvoyFilter_LISTENER:
				for k, x := range v {
					l.(envoyconfig.Doc)[k] = x
				}
			case networking.EnvoyFilter_NETWORK_FILTER:
				for k, x := range v["typed_config"].(envoyconfig.Doc) {
					tc.(envoyconfig.Doc)[k] = x
				}
			case networking.EnvoyFilter_HTTP_FILTER:
				if v["name"] == envoy.StatusCheckFilterName {
					continue // the committed bootstrap has it (checkWorkerPatch: the same)
				}
				c, _ := envoyconfig.Dig(v, "typed_config", "config", "vm_config")
				c.(envoyconfig.Doc)["code"] = envoyconfig.Doc{"local": envoyconfig.Doc{"filename": module}}
				var rest []any
				for _, f := range tc.(envoyconfig.Doc)["http_filters"].([]any) {
					if f.(envoyconfig.Doc)["name"] != envoy.WasmFilterName {
						rest = append(rest, f)
					}
				}
				tc.(envoyconfig.Doc)["http_filters"] = append([]any{v}, rest...)
			}
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkWorkerPatch checks that an EnvoyFilter patch of the inbound
// cluster, route, connection manager or status check says what
// envoy.yaml says of the worker connection (docs/spec.md, The worker
// connection): the connect and idle timeouts, the one retry, the short
// delayed close, the 502 answers, and the status check before the router.
func checkWorkerPatch(t *testing.T, where string, p *networking.EnvoyFilter_EnvoyConfigObjectPatch, bootstrap envoyconfig.Doc) {
	t.Helper()
	v := envoyconfig.Doc(p.GetPatch().GetValue().AsMap())
	hcm := []any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config"}
	same := func(what string, got any, at ...any) {
		t.Helper()
		want, err := envoyconfig.Dig(bootstrap, at...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s = %v, envoy.yaml has %v", where, what, got, want)
		}
	}
	switch p.GetApplyTo() {
	case networking.EnvoyFilter_CLUSTER:
		same("connect_timeout", v["connect_timeout"], "static_resources", "clusters", 0, "connect_timeout")
		opts := "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
		got, _ := envoyconfig.Dig(v, "typed_extension_protocol_options", opts, "common_http_protocol_options")
		same("idle timeout", got, "static_resources", "clusters", 0, "typed_extension_protocol_options", opts, "common_http_protocol_options")
	case networking.EnvoyFilter_HTTP_ROUTE:
		got, _ := envoyconfig.Dig(v, "route", "retry_policy")
		same("retry_policy", got, append(hcm, "route_config", "virtual_hosts", 0, "routes", 0, "route", "retry_policy")...)
	case networking.EnvoyFilter_HTTP_FILTER:
		if p.GetPatch().GetOperation() != networking.EnvoyFilter_Patch_INSERT_BEFORE ||
			p.GetMatch().GetListener().GetFilterChain().GetFilter().GetSubFilter().GetName() != "envoy.filters.http.router" {
			t.Errorf("%s: the status check must go right before the router", where)
		}
		same("status check", v["typed_config"], append(hcm, "http_filters", 1, "typed_config")...)
	case networking.EnvoyFilter_NETWORK_FILTER:
		tc, _ := envoyconfig.Dig(v, "typed_config")
		same("delayed_close_timeout", tc.(envoyconfig.Doc)["delayed_close_timeout"], append(hcm, "delayed_close_timeout")...)
		got, _ := envoyconfig.Dig(tc, "local_reply_config", "mappers")
		all, err := envoyconfig.Dig(bootstrap, append(hcm, "local_reply_config", "mappers")...)
		if err != nil {
			t.Fatal(err)
		}
		var want []any
		for _, m := range all.([]any) {
			if m.(envoyconfig.Doc)["status_code"] == float64(502) {
				want = append(want, m)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: local_reply_config mappers %v, want envoy.yaml's 502 mappers %v", where, got, want)
		}
	}
}
