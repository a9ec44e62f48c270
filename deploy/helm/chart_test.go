// Package helm holds the test of the kvgate Helm chart (kvgate/): it renders
// the chart with Helm's own library for every values file in kvgate/ci,
// decodes every object strictly into its Kubernetes or Istio API type, and
// checks that the pieces fit together (selectors, ports, probes, mounts, the
// filter configuration the sidecar reads). Values that break the schema
// must fail before anything is rendered.
package helm

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kvgate/kvgate/deploy/internal/filterimage"
	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/wasm"
)

const chartDir = "kvgate"

// kubeVersion is the oldest Kubernetes the chart supports (Chart.yaml).
const kubeVersion = "v1.30.0"

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the chart as `helm template --namespace llm kvgate` would,
// with the schema checked, and returns the rendered files.
func render(c *chart.Chart, vals map[string]any) (map[string]string, chartutil.Values, error) {
	caps := *chartutil.DefaultCapabilities
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, nil, err
	}
	caps.KubeVersion = *kv
	top, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "kvgate", Namespace: "llm", IsInstall: true}, &caps)
	if err != nil {
		return nil, nil, err
	}
	files, err := engine.Engine{Strict: true}.Render(c, top)
	if err != nil {
		return nil, nil, err
	}
	v, err := top.Table("Values")
	return files, v, err
}

// objects are the rendered objects, decoded.
type objects struct {
	names       []string // kind/name
	deployment  *appsv1.Deployment
	testPod     *corev1.Pod
	service     *corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	pdb         *policyv1.PodDisruptionBudget
	netpols     map[string]*networkingv1.NetworkPolicy
	accounts    map[string]*corev1.ServiceAccount
	monitor     *serviceMonitor
	wasmPlugin  *extensions.WasmPlugin
	envoyFilter *networking.EnvoyFilter
	peerAuth    *security.PeerAuthentication
	authzPolicy *security.AuthorizationPolicy
	rule        *prometheusRule
	istioMeta   map[string]metav1.ObjectMeta
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor
// the chart uses; strict decoding rejects any other field.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// prometheusRule is monitoring.coreos.com/v1 PrometheusRule; its groups
// are the Prometheus rule file format, checked against the rules file.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups json.RawMessage `json:"groups"`
	} `json:"spec"`
}

// istioObject is an Istio custom resource; its spec is decoded with
// protojson into the istio.io/api type.
type istioObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

// strict decodes j into v as the API server would: unknown fields,
// duplicate fields and fields in the wrong case are errors.
func strict(j []byte, v any) error {
	serr, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(serr...)
}

func decode(t *testing.T, files map[string]string) *objects {
	t.Helper()
	o := &objects{configMaps: map[string]*corev1.ConfigMap{}, netpols: map[string]*networkingv1.NetworkPolicy{},
		accounts: map[string]*corev1.ServiceAccount{}, istioMeta: map[string]metav1.ObjectMeta{}}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if strings.HasSuffix(p, "NOTES.txt") {
			continue
		}
		for i, doc := range strings.Split(files[p], "\n---\n") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s #%d: %v\n%s", p, i, err, doc)
			}
			if string(j) == "null" {
				continue
			}
			var head struct{ APIVersion, Kind string }
			if err := json.Unmarshal(j, &head); err != nil {
				t.Fatalf("%s #%d: %v", p, i, err)
			}
			where := fmt.Sprintf("%s #%d (%s %s)", p, i, head.APIVersion, head.Kind)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v\n%s", where, err, doc)
				}
			}
			var meta metav1.ObjectMeta
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 Deployment":
				if o.deployment != nil {
					t.Fatalf("%s: a second Deployment", where)
				}
				o.deployment = &appsv1.Deployment{}
				must(strict(j, o.deployment))
				meta = o.deployment.ObjectMeta
			case "v1 Pod":
				o.testPod = &corev1.Pod{}
				must(strict(j, o.testPod))
				meta = o.testPod.ObjectMeta
			case "v1 Service":
				o.service = &corev1.Service{}
				must(strict(j, o.service))
				meta = o.service.ObjectMeta
			case "v1 ConfigMap":
				cm := &corev1.ConfigMap{}
				must(strict(j, cm))
				o.configMaps[cm.Name], meta = cm, cm.ObjectMeta
			case "v1 ServiceAccount":
				sa := &corev1.ServiceAccount{}
				must(strict(j, sa))
				o.accounts[sa.Name], meta = sa, sa.ObjectMeta
			case "policy/v1 PodDisruptionBudget":
				o.pdb = &policyv1.PodDisruptionBudget{}
				must(strict(j, o.pdb))
				meta = o.pdb.ObjectMeta
			case "networking.k8s.io/v1 NetworkPolicy":
				np := &networkingv1.NetworkPolicy{}
				must(strict(j, np))
				o.netpols[np.Name], meta = np, np.ObjectMeta
			case "monitoring.coreos.com/v1 ServiceMonitor":
				o.monitor = &serviceMonitor{}
				must(strict(j, o.monitor))
				meta = o.monitor.Metadata
			case "monitoring.coreos.com/v1 PrometheusRule":
				o.rule = &prometheusRule{}
				must(strict(j, o.rule))
				meta = o.rule.Metadata
			case "extensions.istio.io/v1alpha1 WasmPlugin", "networking.istio.io/v1alpha3 EnvoyFilter", "security.istio.io/v1 PeerAuthentication",
				"security.istio.io/v1 AuthorizationPolicy":
				var io istioObject
				must(strict(j, &io))
				var m proto.Message
				switch head.Kind {
				case "WasmPlugin":
					o.wasmPlugin = &extensions.WasmPlugin{}
					m = o.wasmPlugin
				case "EnvoyFilter":
					o.envoyFilter = &networking.EnvoyFilter{}
					m = o.envoyFilter
				case "PeerAuthentication":
					o.peerAuth = &security.PeerAuthentication{}
					m = o.peerAuth
				case "AuthorizationPolicy":
					o.authzPolicy = &security.AuthorizationPolicy{}
					m = o.authzPolicy
				}
				must(protojson.UnmarshalOptions{}.Unmarshal(io.Spec, m))
				o.istioMeta[head.Kind], meta = io.Metadata, io.Metadata
			default:
				t.Fatalf("%s: a kind the test does not know; add its API type", where)
			}
			checkMeta(t, where, meta)
			o.names = append(o.names, head.Kind+"/"+meta.Name)
		}
	}
	return o
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func checkMeta(t *testing.T, where string, m metav1.ObjectMeta) {
	t.Helper()
	if len(m.Name) > 63 || !dns1123.MatchString(m.Name) {
		t.Errorf("%s: name %q is not a DNS label", where, m.Name)
	}
	for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"} {
		if m.Labels[k] == "" {
			t.Errorf("%s: no label %s", where, k)
		}
	}
}

func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), "-values.yaml"))
	}
	for _, want := range []string{"sidecar", "standalone", "istio", "tls"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s/ci/%s-values.yaml", chartDir, want)
		}
	}
	return files
}

func TestChartMetadata(t *testing.T) {
	c := loadChart(t)
	if !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, kubeVersion) {
		t.Errorf("kubeVersion %q does not admit %s", c.Metadata.KubeVersion, kubeVersion)
	}
	if chartutil.IsCompatibleRange(c.Metadata.KubeVersion, "v1.29.9") {
		t.Errorf("kubeVersion %q admits 1.29, which has no preStop sleep action", c.Metadata.KubeVersion)
	}
	if c.Schema == nil {
		t.Fatal("no values.schema.json")
	}
}

// TestCIValues renders every values file in ci/ and checks the result.
func TestCIValues(t *testing.T) {
	c := loadChart(t)
	for _, f := range valuesFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			user, err := chartutil.ReadValuesFile(f)
			if err != nil {
				t.Fatal(err)
			}
			files, vals, err := render(c, user)
			if err != nil {
				t.Fatal(err)
			}
			o := decode(t, files)
			t.Logf("objects: %s", strings.Join(o.names, ", "))
			switch mode := vals["mode"]; mode {
			case "sidecar", "standalone":
				checkPod(t, o, vals)
			case "istio":
				checkIstio(t, o, vals)
			default:
				t.Fatalf("mode %v", mode)
			}
		})
	}
}

// TestDefaultValues: the chart's defaults alone render (helm lint and
// helm template with no values work): the sidecar mode without a worker
// image is kvgate alone with its built-in echo worker, and NOTES.txt says
// it is a demonstration.
func TestDefaultValues(t *testing.T) {
	files, vals, err := render(loadChart(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, files)
	checkPod(t, o, vals)
	if a := args(t, *container(t, o.deployment.Spec.Template.Spec, "kvgate")); a["-upstream"] != "echo" {
		t.Errorf("-upstream %q, want echo", a["-upstream"])
	}
	if notes := files["kvgate/templates/NOTES.txt"]; !strings.Contains(notes, "worker.image is not set") {
		t.Errorf("NOTES.txt does not say the echo worker is a demonstration:\n%s", notes)
	}
}

// TestBadValues: each change to a valid values file must stop rendering,
// with an error that names the problem.
func TestBadValues(t *testing.T) {
	c := loadChart(t)
	base := func(t *testing.T, name string) map[string]any {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", name+"-values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	filterOf := func(v map[string]any) map[string]any {
		f, _ := v["filter"].(map[string]any)
		if f == nil {
			f = map[string]any{}
			v["filter"] = f
		}
		return f
	}
	for _, tc := range []struct {
		name, values, want string
		change             func(map[string]any)
	}{
		{"max_body_bytes a string", "sidecar", "max_body_bytes", func(v map[string]any) { filterOf(v)["max_body_bytes"] = "4194304" }},
		{"max_body_bytes over 256 MiB", "sidecar", "max_body_bytes", func(v map[string]any) { filterOf(v)["max_body_bytes"] = 268435457 }},
		{"max_depth zero", "sidecar", "max_depth", func(v map[string]any) { filterOf(v)["max_depth"] = 0 }},
		{"unknown filter member", "sidecar", "trust_kv_hint", func(v map[string]any) { filterOf(v)["trust_kv_hint"] = true }},
		{"relative exclude path", "sidecar", "exclude_paths", func(v map[string]any) { filterOf(v)["exclude_paths"] = []any{"health"} }},
		{"unknown rule member", "tls", "principals", func(v map[string]any) {
			filterOf(v)["trusted_senders"] = []any{map[string]any{"principals": "spiffe://x/ns/a/sa/b"}}
		}},
		{"empty rule", "standalone", "trusted_senders", func(v map[string]any) { filterOf(v)["trusted_senders"] = []any{map[string]any{}} }},
		{"trust everyone and trusted senders", "standalone", "trusted_senders", func(v map[string]any) { filterOf(v)["trust_kv_hints"] = true }},
		{"principal without client certificates", "sidecar", "tls.clientCA.secretName", func(v map[string]any) {
			filterOf(v)["trusted_senders"] = []any{map[string]any{"principal": "spiffe://cluster.local/ns/r/sa/r"}}
		}},
		{"tls without a secret", "tls", "secretName", func(v map[string]any) { v["tls"].(map[string]any)["secretName"] = "" }},
		{"standalone without upstream", "standalone", "url", func(v map[string]any) { delete(v["upstream"].(map[string]any), "url") }},
		{"upstream not a URL", "standalone", "url", func(v map[string]any) { v["upstream"].(map[string]any)["url"] = "llm-worker:8000" }},
		{"unknown mode", "sidecar", "mode", func(v map[string]any) { v["mode"] = "ambient" }},
		{"istio without digest", "istio", "filterSHA256", func(v map[string]any) { delete(v["istio"].(map[string]any), "filterSHA256") }},
		{"istio without selector", "istio", "workerSelector", func(v map[string]any) { delete(v["istio"].(map[string]any), "workerSelector") }},
		{"unknown top-level key", "sidecar", "replicas", func(v map[string]any) { v["replicas"] = 2 }},
		{"port out of range", "sidecar", "api", func(v map[string]any) { v["ports"] = map[string]any{"api": 70000, "admin": 9090} }},
		{"api port is the admin port", "sidecar", "ports.admin 8080: the same port as ports.api", func(v map[string]any) { v["ports"] = map[string]any{"api": 8080, "admin": 8080} }},
		{"worker on kvgate's port", "sidecar", "worker.port 9090: kvgate listens there", func(v map[string]any) { v["worker"].(map[string]any)["port"] = 9090 }},
		{"source_cidr host bits", "standalone", `filter.trusted_senders[0].source_cidr "10.42.0.1/16": host bits are set`, func(v map[string]any) {
			filterOf(v)["trusted_senders"] = []any{map[string]any{"source_cidr": "10.42.0.1/16"}}
		}},
		{"unknown grpc mode", "sidecar", "grpc", func(v map[string]any) { filterOf(v)["grpc"] = "drop" }},
		{"shm size not a quantity", "sidecar", "sizeLimit", func(v map[string]any) {
			v["worker"].(map[string]any)["shm"] = map[string]any{"enabled": true, "sizeLimit": "lots"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := base(t, tc.values)
			tc.change(v)
			_, _, err := render(c, v)
			if err == nil {
				t.Fatal("rendered")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not name %q:\n%v", tc.want, err)
			}
		})
	}
}

// args reads a container's "-flag value" pairs.
func args(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("%s: command %q replaces the image's entrypoint", c.Name, c.Command)
	}
	m := map[string]string{}
	for i := 0; i < len(c.Args); i += 2 {
		if !strings.HasPrefix(c.Args[i], "-") || i+1 == len(c.Args) {
			t.Fatalf("%s: args %q are not -flag value pairs", c.Name, c.Args)
		}
		if _, dup := m[c.Args[i]]; dup {
			t.Errorf("%s: %s given twice", c.Name, c.Args[i])
		}
		m[c.Args[i]] = c.Args[i+1]
	}
	return m
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func portNamed(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// selects reports whether selector picks the labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// mountedFile returns the volume that serves file in c, and the file's path
// inside the volume.
func mountedFile(t *testing.T, spec corev1.PodSpec, c *corev1.Container, file string) (*corev1.Volume, string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(file, m.MountPath+"/"); ok {
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == m.Name {
					return &spec.Volumes[i], rel
				}
			}
			t.Fatalf("mount %s names no volume", m.Name)
		}
	}
	t.Fatalf("%s: %s is on no volume", c.Name, file)
	return nil, ""
}

func intValue(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			t.Fatal(err)
		}
		return int(i)
	}
	t.Fatalf("%v (%T) is not a number", v, v)
	return 0
}

// wantFilterDoc is the plugin configuration the values ask for.
func wantFilterDoc(t *testing.T, vals chartutil.Values) map[string]any {
	t.Helper()
	f := vals["filter"].(map[string]any)
	doc := map[string]any{
		"trust_kv_hints": f["trust_kv_hints"],
		"max_depth":      float64(intValue(t, f["max_depth"])),
		"max_body_bytes": float64(intValue(t, f["max_body_bytes"])),
	}
	if g, ok := f["grpc"].(string); ok && g != "" {
		doc["grpc"] = g
	}
	for _, k := range []string{"exclude_paths", "trusted_senders"} {
		if l, _ := f[k].([]any); len(l) > 0 {
			b, _ := json.Marshal(l)
			var v any
			_ = json.Unmarshal(b, &v)
			doc[k] = v
		}
	}
	// router_only: the engines listed, or worker.engine's preset when
	// none is; nothing without an engine, a member or a header.
	ro, _ := f["router_only"].(map[string]any)
	engines, _ := ro["engines"].([]any)
	if w, _ := vals["worker"].(map[string]any); len(engines) == 0 && w["engine"] != nil && w["engine"] != "" {
		engines = []any{w["engine"]}
	}
	members, _ := ro["members"].([]any)
	headers, _ := ro["headers"].([]any)
	if len(engines)+len(members)+len(headers) > 0 {
		r := map[string]any{"untrusted": "strip"}
		if u, _ := ro["untrusted"].(string); u != "" {
			r["untrusted"] = u
		}
		for k, l := range map[string][]any{"engines": engines, "members": members, "headers": headers} {
			if len(l) > 0 {
				r[k] = l
			}
		}
		doc["router_only"] = r
	}
	return doc
}

// checkFilterDoc checks a rendered plugin configuration against the values
// and has the filter parse it. Until the filter knows trusted_senders
// (docs/spec.md, Trusted senders), a document with rules is parsed without
// them after checking that this is the only complaint.
func checkFilterDoc(t *testing.T, where string, doc []byte, vals chartutil.Values) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if want := wantFilterDoc(t, vals); !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", where, got, want)
	}
	cfg, err := filterspec.ParseConfig(doc)
	if err != nil && got["trusted_senders"] != nil && strings.Contains(err.Error(), "trusted_senders") {
		t.Logf("%s: this filter does not know trusted_senders yet (%v); parsing the rest", where, err)
		delete(got, "trusted_senders")
		rest, _ := json.Marshal(got)
		cfg, err = filterspec.ParseConfig(rest)
	}
	if err != nil {
		t.Fatalf("%s: the filter refuses the rendered configuration: %v\n%s", where, err, doc)
	}
	if cfg.MaxBodyBytes != int(got["max_body_bytes"].(float64)) || cfg.MaxDepth != int(got["max_depth"].(float64)) {
		t.Errorf("%s: the filter read %+v", where, cfg)
	}
}

func envValue(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkPod checks the sidecar and standalone modes.
func checkPod(t *testing.T, o *objects, vals chartutil.Values) {
	d := o.deployment
	if d == nil || o.service == nil {
		t.Fatal("no Deployment or Service")
	}
	spec := d.Spec.Template.Spec
	podLabels := d.Spec.Template.Labels
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment selector %v does not pick its pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	if !selects(o.service.Spec.Selector, podLabels) {
		t.Errorf("Service selector %v does not pick the pods", o.service.Spec.Selector)
	}
	if pdb := vals["podDisruptionBudget"].(map[string]any); pdb["enabled"] == true {
		if o.pdb == nil || !selects(o.pdb.Spec.Selector.MatchLabels, podLabels) || o.pdb.Spec.MaxUnavailable == nil {
			t.Errorf("PodDisruptionBudget missing or not for the pods: %+v", o.pdb)
		}
	}
	if spec.ServiceAccountName == "" || (len(o.accounts) > 0 && o.accounts[spec.ServiceAccountName] == nil) {
		t.Errorf("service account %q is not the rendered one", spec.ServiceAccountName)
	}

	// A filter change rolls standalone pods, never the GPU worker's pod:
	// in sidecar mode the sidecar reloads the mounted ConfigMap, which must
	// be a whole-directory mount (a subPath mount is never updated).
	_, rolls := d.Spec.Template.Annotations["checksum/filter"]
	if sidecarMode := vals["mode"] == "sidecar"; rolls == sidecarMode {
		t.Errorf("mode %v: checksum/filter on the pod template = %v", vals["mode"], rolls)
	}
	kv := container(t, spec, "kvgate")
	for _, m := range kv.VolumeMounts {
		if m.Name == "filter-config" && m.SubPath != "" {
			t.Errorf("the filter configuration is mounted with subPath %q: the kubelet never updates it", m.SubPath)
		}
	}
	if !strings.HasPrefix(args(t, *kv)["-filter-config"], "@") {
		t.Errorf("-filter-config %q: want @FILE, which the sidecar watches", args(t, *kv)["-filter-config"])
	}
	a := args(t, *kv)
	ports := vals["ports"].(map[string]any)
	for flag, name := range map[string]string{"-listen": "api", "-admin": "admin"} {
		want := fmt.Sprintf(":%d", intValue(t, ports[name]))
		if a[flag] != want || portNamed(kv, name) != int32(intValue(t, ports[name])) {
			t.Errorf("%s %q, container port %s %d; want %s", flag, a[flag], name, portNamed(kv, name), want)
		}
	}
	// Probes: /readyz gates start-up and traffic, /healthz restarts, both
	// on the admin port.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", kv.StartupProbe, "/readyz"}, {"readiness", kv.ReadinessProbe, "/readyz"}, {"liveness", kv.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("%s probe %+v, want GET %s on admin", p.name, p.probe, p.path)
		}
	}
	shutdown := vals["shutdown"].(map[string]any)
	preStop, drain := intValue(t, shutdown["preStopSeconds"]), intValue(t, shutdown["drainSeconds"])
	if kv.Lifecycle == nil || kv.Lifecycle.PreStop == nil || kv.Lifecycle.PreStop.Sleep == nil || kv.Lifecycle.PreStop.Sleep.Seconds != int64(preStop) {
		t.Errorf("kvgate preStop %+v, want a %ds sleep (no shell in the image)", kv.Lifecycle, preStop)
	}
	if a["-drain-timeout"] != fmt.Sprintf("%ds", drain) {
		t.Errorf("-drain-timeout %q, want %ds", a["-drain-timeout"], drain)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= int64(preStop+drain) {
		t.Errorf("terminationGracePeriodSeconds %v does not cover preStop %d + drain %d", g, preStop, drain)
	}
	sc := kv.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("kvgate securityContext %+v", sc)
	}
	if _, ok := envValue(kv, "TRTLLM_TRUST_KV_HINTS"); ok {
		t.Error("kvgate has TRTLLM_TRUST_KV_HINTS: its trust comes from the filter configuration only")
	}
	if res := vals["resources"].(map[string]any); res["limits"] != nil && res["limits"].(map[string]any)["memory"] != nil {
		e, ok := envValue(kv, "GOMEMLIMIT")
		if !ok || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" ||
			e.ValueFrom.ResourceFieldRef.ContainerName != "kvgate" {
			t.Errorf("GOMEMLIMIT %+v, want the container's memory limit", e)
		}
		if kv.Resources.Limits.Memory().IsZero() {
			t.Error("no memory limit on the container")
		}
	}

	// helm test: -check-config with the container's own arguments and
	// files, under PodSecurity restricted.
	if ht, _ := vals["helmTest"].(map[string]any); ht["enabled"] == true {
		p := o.testPod
		if p == nil || p.Annotations["helm.sh/hook"] != "test" || len(p.Spec.Containers) != 1 {
			t.Fatalf("no helm test Pod: %+v", p)
		}
		c := p.Spec.Containers[0]
		if want := append(slices.Clone(kv.Args), "-check-config"); !reflect.DeepEqual(c.Args, want) || c.Image != kv.Image {
			t.Errorf("helm test runs %s %q, want %s %q", c.Image, c.Args, kv.Image, want)
		}
		for flag, file := range a {
			if !strings.HasPrefix(flag, "-") || !strings.HasPrefix(strings.TrimPrefix(file, "@"), "/etc/") {
				continue
			}
			tv, rel := mountedFile(t, p.Spec, &c, strings.TrimPrefix(file, "@"))
			kvv, krel := mountedFile(t, spec, kv, strings.TrimPrefix(file, "@"))
			if rel != krel || !reflect.DeepEqual(tv.VolumeSource, kvv.VolumeSource) {
				t.Errorf("helm test: %s %s is on %+v, kvgate's on %+v", flag, file, tv.VolumeSource, kvv.VolumeSource)
			}
		}
		if v := podSecurity(t, corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}, "restricted"); len(v) > 0 {
			t.Errorf("helm test Pod: PodSecurity restricted: %q", v)
		}
	} else if o.testPod != nil {
		t.Error("a helm test Pod with helmTest.enabled false")
	}

	// The compile cache is on an emptyDir, the only writable place.
	if v, _ := mountedFile(t, spec, kv, a["-cache-dir"]+"/x"); v.EmptyDir == nil {
		t.Errorf("-cache-dir %s is not on an emptyDir", a["-cache-dir"])
	}
	// The filter configuration: the ConfigMap's file, as the filter reads it.
	cfgPath, ok := strings.CutPrefix(a["-filter-config"], "@")
	if !ok {
		t.Fatalf("-filter-config %q is not a file", a["-filter-config"])
	}
	v, rel := mountedFile(t, spec, kv, cfgPath)
	if v.ConfigMap == nil || o.configMaps[v.ConfigMap.Name] == nil {
		t.Fatalf("%s is not on a rendered ConfigMap", cfgPath)
	}
	doc := o.configMaps[v.ConfigMap.Name].Data[rel]
	checkFilterDoc(t, "filter.json", []byte(doc), vals)
	admits := strings.Contains(doc, `"trust_kv_hints":true`) || strings.Contains(doc, "trusted_senders")

	// TLS: every file the flags name is in its secret.
	tls := vals["tls"].(map[string]any)
	if tls["enabled"] == true {
		ca := tls["clientCA"].(map[string]any)
		for flag, secret := range map[string]string{"-tls-cert": tls["secretName"].(string), "-tls-key": tls["secretName"].(string), "-client-ca": ca["secretName"].(string)} {
			if a[flag] == "" {
				t.Errorf("no %s", flag)
				continue
			}
			v, rel := mountedFile(t, spec, kv, a[flag])
			if v.Secret == nil || v.Secret.SecretName != secret {
				t.Errorf("%s %s: volume %+v, want secret %s", flag, a[flag], v, secret)
			}
			if len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == rel }) {
				t.Errorf("%s: %s is not among the secret's items", flag, rel)
			}
		}
		if want := map[string]string{"-tls-cert": "tls.crt", "-tls-key": "tls.key", "-client-ca": ca["key"].(string)}; filepath.Base(a["-tls-cert"]) != want["-tls-cert"] ||
			filepath.Base(a["-tls-key"]) != want["-tls-key"] || filepath.Base(a["-client-ca"]) != want["-client-ca"] {
			t.Errorf("TLS files %s %s %s", a["-tls-cert"], a["-tls-key"], a["-client-ca"])
		}
	} else if a["-tls-cert"] != "" || a["-client-ca"] != "" {
		t.Error("TLS flags without tls.enabled")
	}

	switch vals["mode"] {
	case "sidecar":
		w := vals["worker"].(map[string]any)
		if w["image"] == "" {
			if a["-upstream"] != "echo" || len(spec.Containers) != 1 {
				t.Errorf("no worker.image: -upstream %q and %d containers, want echo and kvgate alone", a["-upstream"], len(spec.Containers))
			}
			break
		}
		wc := container(t, spec, w["name"].(string))
		if want := fmt.Sprintf("http://127.0.0.1:%d", intValue(t, w["port"])); a["-upstream"] != want {
			t.Errorf("-upstream %q, want the worker on loopback %s", a["-upstream"], want)
		}
		e, ok := envValue(wc, "TRTLLM_TRUST_KV_HINTS")
		if admits != (ok && e.Value == "1") {
			t.Errorf("worker TRTLLM_TRUST_KV_HINTS=%q, while kvgate admits hints: %v", e.Value, admits)
		}
		if len(wc.Ports) != 0 {
			t.Errorf("the worker declares ports %v: it is reached through kvgate only", wc.Ports)
		}
		if wc.Lifecycle == nil || wc.Lifecycle.PreStop == nil || wc.Lifecycle.PreStop.Sleep == nil || wc.Lifecycle.PreStop.Sleep.Seconds < int64(preStop+drain) {
			t.Errorf("worker preStop %+v ends before kvgate's drain", wc.Lifecycle)
		}
		if len(spec.Containers) != 2 {
			t.Errorf("%d containers", len(spec.Containers))
		}
	case "standalone":
		if want := vals["upstream"].(map[string]any)["url"]; a["-upstream"] != want {
			t.Errorf("-upstream %q, want %v", a["-upstream"], want)
		}
		if len(spec.Containers) != 1 {
			t.Errorf("%d containers", len(spec.Containers))
		}
		if sel, _ := vals["upstream"].(map[string]any)["workerPodSelector"].(map[string]any); len(sel) > 0 {
			np := o.netpols["kvgate-worker"]
			if np == nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
				!selects(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, podLabels) {
				t.Errorf("worker NetworkPolicy %+v does not admit kvgate only", np)
			}
		}
	}

	// Service ports name container ports; the ServiceMonitor names a Service port.
	svcPorts := map[string]bool{}
	for _, p := range o.service.Spec.Ports {
		svcPorts[p.Name] = true
		if portNamed(kv, p.TargetPort.StrVal) == 0 {
			t.Errorf("Service port %s targets %v, not a kvgate port", p.Name, p.TargetPort)
		}
	}
	if m := o.monitor; vals["serviceMonitor"].(map[string]any)["enabled"] == true {
		if m == nil || len(m.Spec.Endpoints) != 1 || !svcPorts[m.Spec.Endpoints[0].Port] || m.Spec.Endpoints[0].Path != "/metrics" ||
			!selects(m.Spec.Selector.MatchLabels, o.service.Labels) {
			t.Errorf("ServiceMonitor %+v does not scrape the Service's admin port", m)
		}
	}
	if vals["networkPolicy"].(map[string]any)["enabled"] == true {
		np := o.netpols["kvgate"]
		if np == nil || !selects(np.Spec.PodSelector.MatchLabels, podLabels) || len(np.Spec.Ingress) != 1 {
			t.Fatalf("pod NetworkPolicy %+v", np)
		}
		var open []string
		for _, p := range np.Spec.Ingress[0].Ports {
			open = append(open, p.Port.StrVal)
		}
		if sort.Strings(open); !reflect.DeepEqual(open, []string{"admin", "api"}) {
			t.Errorf("NetworkPolicy opens %v, want kvgate's api and admin ports only", open)
		}
	}
}

// checkIstio checks the istio mode.
func checkIstio(t *testing.T, o *objects, vals chartutil.Values) {
	if o.deployment != nil || o.service != nil {
		t.Error("istio mode renders a kvgate Deployment or Service")
	}
	is := vals["istio"].(map[string]any)
	sel := map[string]string{}
	for k, v := range is["workerSelector"].(map[string]any) {
		sel[k] = v.(string)
	}
	wp := o.wasmPlugin
	if wp == nil {
		t.Fatal("no WasmPlugin")
	}
	if !reflect.DeepEqual(wp.GetSelector().GetMatchLabels(), sel) {
		t.Errorf("WasmPlugin selector %v, want %v", wp.GetSelector().GetMatchLabels(), sel)
	}
	if wp.GetUrl() != is["filterImage"] {
		t.Errorf("url %q", wp.GetUrl())
	}
	d, err := filterimage.Digest(wasm.Module)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(d, "sha256:"); wp.GetSha256() != want {
		t.Errorf("sha256 %s is not the digest of the filter image of the committed module: %s", wp.GetSha256(), want)
	}
	if wp.GetFailStrategy() != extensions.FailStrategy_FAIL_RELOAD || wp.GetPhase() != extensions.PluginPhase_AUTHZ ||
		wp.GetType() != extensions.PluginType_HTTP || len(wp.GetMatch()) != 1 || wp.GetMatch()[0].GetMode() != 2 /* SERVER */ {
		t.Errorf("WasmPlugin failStrategy %v phase %v type %v match %v", wp.GetFailStrategy(), wp.GetPhase(), wp.GetType(), wp.GetMatch())
	}
	pc, err := wp.GetPluginConfig().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	checkFilterDoc(t, "pluginConfig", pc, vals)

	maxBody := intValue(t, vals["filter"].(map[string]any)["max_body_bytes"])
	ef := o.envoyFilter
	if ef == nil || len(ef.GetConfigPatches()) != 5 || !reflect.DeepEqual(ef.GetWorkloadSelector().GetLabels(), sel) {
		t.Fatalf("EnvoyFilter %v", ef)
	}
	limit := ef.GetConfigPatches()[0].GetPatch().GetValue().GetFields()["per_connection_buffer_limit_bytes"].GetNumberValue()
	if int(limit) != maxBody+envoy.BufferHeadroom {
		t.Errorf("buffer limit %v, want max_body_bytes + %d", limit, envoy.BufferHeadroom)
	}
	if pa := o.peerAuth; pa == nil || pa.GetMtls().GetMode() != security.PeerAuthentication_MutualTLS_STRICT ||
		!reflect.DeepEqual(pa.GetSelector().GetMatchLabels(), sel) {
		t.Errorf("PeerAuthentication %v, want STRICT for the workers", pa)
	}
	cm := o.configMaps["kvgate-stats-bootstrap"]
	if cm == nil {
		t.Fatal("no stats bootstrap ConfigMap")
	}
	var boot struct {
		StatsConfig struct {
			StatsTags []struct {
				TagName string `json:"tag_name"`
				Regex   string `json:"regex"`
			} `json:"stats_tags"`
		} `json:"stats_config"`
	}
	if err := json.Unmarshal([]byte(cm.Data["custom_bootstrap.json"]), &boot); err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, tag := range filterspec.EnvoyStatsTags() {
		want = append(want, tag.TagName+" "+tag.Regex)
	}
	for _, tag := range boot.StatsConfig.StatsTags {
		got = append(got, tag.TagName+" "+tag.Regex)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats_tags %v, want filterspec.EnvoyStatsTags %v", got, want)
	}
	if is["authorizationPolicy"].(map[string]any)["enabled"] == true {
		ap := o.authzPolicy
		if ap == nil || !reflect.DeepEqual(ap.GetSelector().GetMatchLabels(), sel) || ap.GetAction() != security.AuthorizationPolicy_ALLOW ||
			len(ap.GetRules()) != 1 || len(ap.GetRules()[0].GetTo()) != 1 ||
			!reflect.DeepEqual(ap.GetRules()[0].GetTo()[0].GetOperation().GetPorts(), []string{fmt.Sprint(intValue(t, is["workerPort"]))}) {
			t.Errorf("AuthorizationPolicy %v, want mutual-TLS HTTP callers to the worker's port only", ap)
		}
	}
}
