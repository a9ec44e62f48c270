package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	"sigs.k8s.io/yaml"
)

// istioDir holds the hand-applied Istio manifests (envoy/README.md).
var istioDir = filepath.Join("..", "..", "envoy", "istio")

// istioManifests reads the specs of envoy/istio/'s objects by kind and
// name (envoyfilter.yaml, the alternative to the WasmPlugin, is left out).
func istioManifests(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, f := range []string{"wasmplugin.yaml", "peerauthentication.yaml", "authorizationpolicy.yaml", "stats.yaml"} {
		b, err := os.ReadFile(filepath.Join(istioDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o struct {
				Kind string          `json:"kind"`
				Spec json.RawMessage `json:"spec"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(j, &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "ConfigMap" {
				o.Spec = o.Data
			}
			out[o.Kind] = o.Spec
		}
	}
	return out
}

// The chart's istio mode is envoy/istio/: rendered with the values those
// files are written for (the llm-worker pods, the router as the trusted
// sender, the worker on port 8000), every object's spec is the file's,
// field by field, and the plugin configuration reads the same.
func TestIstioModeIsEnvoyIstio(t *testing.T) {
	want := istioManifests(t)
	var wp extensions.WasmPlugin
	if err := protojson.Unmarshal(want["WasmPlugin"], &wp); err != nil {
		t.Fatal(err)
	}
	pc, err := wp.GetPluginConfig().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var fvals map[string]any
	if err := json.Unmarshal(pc, &fvals); err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{
		"mode":   "istio",
		"filter": fvals,
		"istio": map[string]any{
			"workerSelector": map[string]any{"app": "llm-worker"},
			"filterImage":    wp.GetUrl(),
			"filterSHA256":   wp.GetSha256(),
			"workerPort":     8000,
		},
	}
	files, _, err := render(loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, files)

	// WasmPlugin: equal but for the plugin configuration, which the
	// chart writes out in full; the filter must read both alike.
	got := proto.Clone(o.wasmPlugin).(*extensions.WasmPlugin)
	gotPC, _ := got.GetPluginConfig().MarshalJSON()
	got.PluginConfig, wp.PluginConfig = nil, nil
	if !proto.Equal(got, &wp) {
		t.Errorf("WasmPlugin\n got %v\nwant %v (envoy/istio/wasmplugin.yaml)", got, &wp)
	}
	a, errA := filterspec.ParseConfig(gotPC)
	b, errB := filterspec.ParseConfig(pc)
	if errA != nil || errB != nil || string(a.JSON()) != string(b.JSON()) {
		t.Errorf("pluginConfig: the chart's %s (%v) is not envoy/istio's %s (%v)", gotPC, errA, pc, errB)
	}

	for _, c := range []struct {
		kind string
		got  proto.Message
		want proto.Message
	}{
		{"EnvoyFilter", o.envoyFilter, &networking.EnvoyFilter{}},
		{"PeerAuthentication", o.peerAuth, &security.PeerAuthentication{}},
		{"AuthorizationPolicy", o.authzPolicy, &security.AuthorizationPolicy{}},
	} {
		if err := protojson.Unmarshal(want[c.kind], c.want); err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		if c.got == nil || !proto.Equal(c.got, c.want) {
			t.Errorf("%s\n got %v\nwant %v (envoy/istio/)", c.kind, c.got, c.want)
		}
	}

	var wantData map[string]string
	if err := json.Unmarshal(want["ConfigMap"], &wantData); err != nil {
		t.Fatal(err)
	}
	cm := o.configMaps["kvgate-stats-bootstrap"]
	if cm == nil {
		t.Fatal("no stats bootstrap ConfigMap")
	}
	var g, w any
	if err := json.Unmarshal([]byte(cm.Data["custom_bootstrap.json"]), &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(wantData["custom_bootstrap.json"]), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("custom_bootstrap.json\n got %v\nwant %v (envoy/istio/stats.yaml)", g, w)
	}
}
