// Package compose holds the test of the compose quick start
// (compose.yaml): the Compose specification loader must accept it, every
// file it mounts must exist in the repository, and the configurations it
// mounts must fit the services (Prometheus's targets and rules, Grafana's
// provisioning, Envoy's bootstrap, which stays envoy/envoy.yaml with the
// compose network's addresses and passes `envoy --mode validate`).
package compose

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/repo"
)

var update = flag.Bool("update", false, "rewrite envoy.yaml from envoy/envoy.yaml")

func load(t *testing.T) *types.Project {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  wd,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(wd, "compose.yaml")}},
		Environment: types.Mapping{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mounts maps each bind mount's target to its source, per service.
func mounts(p *types.Project) map[string]map[string]string {
	out := map[string]map[string]string{}
	for name, s := range p.Services {
		out[name] = map[string]string{}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				out[name][v.Target] = v.Source
			}
		}
	}
	return out
}

func TestCompose(t *testing.T) {
	p := load(t)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range p.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"envoy", "grafana", "kvgate", "prometheus", "worker"}; !slices.Equal(names, want) {
		t.Errorf("services %v, want %v", names, want)
	}
	// Every bind mount is a file of the repository that exists.
	n := 0
	for svc, ms := range mounts(p) {
		for target, src := range ms {
			n++
			rel, err := filepath.Rel(root, src)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: %s mounts %s, outside the repository", svc, target, src)
				continue
			}
			if st, err := os.Stat(src); err != nil || st.IsDir() {
				t.Errorf("%s: %s mounts %s, which is not a file of the repository: %v", svc, target, rel, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d bind mounts", n)
	}
	m := mounts(p)
	if m["envoy"]["/etc/kvgate/kvgate.wasm"] != filepath.Join(root, "wasm", "kvgate.wasm") {
		t.Errorf("envoy mounts %v, want the committed module", m["envoy"])
	}

	// The sidecar: read-only, non-root, pointed at the worker, a writable
	// compile cache.
	k := p.Services["kvgate"]
	if !k.ReadOnly || k.User != "65532:65532" || !slices.Contains(k.CapDrop, "ALL") {
		t.Errorf("kvgate: read_only %v user %q cap_drop %v", k.ReadOnly, k.User, k.CapDrop)
	}
	cmd := strings.Join(k.Command, " ")
	if !strings.Contains(cmd, "-upstream http://worker:8000") || !strings.Contains(cmd, "-cache-dir /var/cache/kvgate") ||
		!slices.ContainsFunc(k.Tmpfs, func(s string) bool { return strings.HasPrefix(s, "/var/cache/kvgate") }) {
		t.Errorf("kvgate: command %q, tmpfs %v", cmd, k.Tmpfs)
	}
	// Only the tmpfs options Docker and Podman (through podman-compose,
	// which passes them verbatim to --tmpfs) both take.
	for _, m := range k.Tmpfs {
		_, opts, _ := strings.Cut(m, ":")
		for _, o := range strings.Split(opts, ",") {
			if name, _, _ := strings.Cut(o, "="); o != "" && !slices.Contains([]string{"size", "mode", "rw", "ro", "noexec", "nosuid", "nodev"}, name) {
				t.Errorf("kvgate: tmpfs %q: option %q is not one Podman takes", m, o)
			}
		}
	}

	// Prometheus scrapes both hosts and loads the mounted rules.
	var prom struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	readYAML(t, m["prometheus"]["/etc/prometheus/prometheus.yml"], &prom)
	for _, f := range prom.RuleFiles {
		if m["prometheus"][f] == "" {
			t.Errorf("prometheus: rule file %s is not mounted", f)
		}
	}
	paths := map[string]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, s := range sc.StaticConfigs {
			for _, target := range s.Targets {
				host, _, _ := strings.Cut(target, ":")
				if p.Services[host].Name == "" {
					t.Errorf("prometheus job %s scrapes %s, not a service", sc.JobName, target)
				}
				paths[target] = sc.MetricsPath
			}
		}
	}
	if paths["envoy:9901"] != "/stats/prometheus" || paths["kvgate:9090"] != "/metrics" {
		t.Errorf("scrape targets %v", paths)
	}

	// Grafana: the Prometheus data source and the dashboard directory.
	var ds struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool `json:"isDefault"`
		} `json:"datasources"`
	}
	readYAML(t, m["grafana"]["/etc/grafana/provisioning/datasources/kvgate.yaml"], &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana data sources %+v", ds)
	}
	var dash struct {
		APIVersion int `json:"apiVersion"`
		Providers  []struct {
			Name, Type      string
			DisableDeletion bool `json:"disableDeletion"`
			Options         struct{ Path string }
		} `json:"providers"`
	}
	readYAML(t, m["grafana"]["/etc/grafana/provisioning/dashboards/kvgate.yaml"], &dash)
	if len(dash.Providers) != 1 || m["grafana"][dash.Providers[0].Options.Path+"/kvgate.json"] != filepath.Join(root, "deploy", "grafana", "kvgate.json") {
		t.Errorf("grafana dashboards %+v do not provision deploy/grafana/kvgate.json", dash)
	}
}

// TestComposeLoaderRefuses: the loader catches what the test relies on it for.
func TestComposeLoaderRefuses(t *testing.T) {
	for _, bad := range []string{
		"services:\n  a:\n    image: x\n    imagee: y\n",
		"services:\n  a:\n    image: x\n    ports: [\"notaport\"]\n",
		"services:\n  a:\n    image: x\n    depends_on: [b]\n",
	} {
		dir := t.TempDir()
		f := filepath.Join(dir, "compose.yaml")
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
			WorkingDir: dir, ConfigFiles: []types.ConfigFile{{Filename: f}}, Environment: types.Mapping{},
		}, func(o *loader.Options) { o.SetProjectName("x", true) })
		if err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// composeBootstrap is envoy/envoy.yaml with the compose network's
// addresses: every other line stays the same.
func composeBootstrap(t *testing.T, committed []byte) []byte {
	t.Helper()
	i := bytes.Index(committed, []byte("\nadmin:\n"))
	if i < 0 {
		t.Fatal("envoy/envoy.yaml: no admin section")
	}
	header := "# kvgate in Envoy for the compose quick start (compose.yaml): envoy/envoy.yaml\n" +
		"# with the compose network's addresses. Only these differ, and a Go test\n" +
		"# (deploy/compose) keeps everything else equal to envoy/envoy.yaml:\n" +
		"#   admin     0.0.0.0:9901 (Prometheus scrapes /stats/prometheus)\n" +
		"#   module    /etc/kvgate/kvgate.wasm (wasm/kvgate.wasm, mounted)\n" +
		"#   worker    the \"worker\" service, resolved by DNS\n"
	s := header + string(committed[i+1:])
	for _, r := range [][2]string{
		{"    socket_address: { address: 127.0.0.1, port_value: 9901 }", "    socket_address: { address: 0.0.0.0, port_value: 9901 }"},
		{"                      filename: wasm/kvgate.wasm", "                      filename: /etc/kvgate/kvgate.wasm"},
		{"    type: STATIC\n", "    type: STRICT_DNS\n"},
		{"              socket_address: { address: 127.0.0.1, port_value: 8000 }", "              socket_address: { address: worker, port_value: 8000 }"},
	} {
		if strings.Count(s, r[0]) != 1 {
			t.Fatalf("envoy/envoy.yaml changed shape: %q is not there exactly once; update composeBootstrap", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return []byte(s)
}

// TestEnvoyBootstrap: compose's envoy.yaml is envoy/envoy.yaml with the
// compose network's addresses, and Envoy accepts it.
func TestEnvoyBootstrap(t *testing.T) {
	want := composeBootstrap(t, envoy.Bootstrap)
	got, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("envoy.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
		got = want
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/compose/envoy.yaml is not envoy/envoy.yaml with the compose addresses: run `go test ./compose -run TestEnvoyBootstrap -update` in deploy/")
	}

	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("KVGATE_ENVOY") == "" {
		if p := filepath.Join(root, ".venv", "bin", "envoy"); fileExists(p) {
			t.Setenv("KVGATE_ENVOY", p)
		}
	}
	bin := envoytest.Binary(t)
	// Validate with the module where this machine has it.
	local := bytes.Replace(got, []byte("/etc/kvgate/kvgate.wasm"), []byte(filepath.Join(root, "wasm", "kvgate.wasm")), -1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "envoy.yaml"), local, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := envoyconfig.Validate(bin, dir, "envoy.yaml"); err != nil {
		t.Fatal(err)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	dec := jsonDecoder(j)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
