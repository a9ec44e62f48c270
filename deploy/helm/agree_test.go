package helm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/kvgate/kvgate/deploy/internal/series"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
)

func TestMain(m *testing.M) {
	code := m.Run()
	series.Cleanup()
	os.Exit(code)
}

// One list of values, judged by the chart (schema and template checks, as
// helm install runs them) and by kvgate-sidecar -check-config (what the
// pod runs at start-up): both must say the same, so that no value the
// chart lets through makes the pod crash-loop, and the chart refuses
// nothing the sidecar runs. Filter values are judged in the istio mode,
// whose only chart-side rule is the schema (the sidecar and standalone
// modes add one that the sidecar does not: a principal or dns_name rule
// needs tls.clientCA); ports in the sidecar mode.
func TestValuesAgreeWithSidecar(t *testing.T) {
	c := loadChart(t)
	bin := series.BuildSidecar(t)
	dir := t.TempDir()
	type tc struct {
		name string
		ok   bool
		mode string // "istio" (filter values) or "sidecar" (ports)
		set  func(v map[string]any)
	}
	filterCase := func(name string, ok bool, f map[string]any) tc {
		return tc{name, ok, "istio", func(v map[string]any) { v["filter"] = f }}
	}
	cidr := func(name string, ok bool, c string) tc {
		return filterCase("source_cidr "+name+" "+c, ok, map[string]any{"trusted_senders": []any{map[string]any{"source_cidr": c}}})
	}
	exclude := func(ok bool, p string) tc {
		return filterCase(fmt.Sprintf("exclude_paths %q", p), ok, map[string]any{"exclude_paths": []any{p}})
	}
	rule := func(ok bool, member, value string) tc {
		return filterCase(fmt.Sprintf("%s %q", member, value), ok, map[string]any{"trusted_senders": []any{map[string]any{member: value}}})
	}
	ro := func(ok bool, name string, r map[string]any) tc {
		return filterCase("router_only "+name, ok, map[string]any{"router_only": r})
	}
	ports := func(ok bool, api, admin int) tc {
		return tc{fmt.Sprintf("ports %d %d", api, admin), ok, "sidecar", func(v map[string]any) {
			v["ports"] = map[string]any{"api": api, "admin": admin}
		}}
	}
	cases := []tc{
		filterCase("empty", true, map[string]any{}),
		filterCase("grpc refuse", true, map[string]any{"grpc": "refuse"}),
		filterCase("grpc pass", true, map[string]any{"grpc": "pass"}),
		filterCase("grpc drop", false, map[string]any{"grpc": "drop"}),
		filterCase("max_depth 0", false, map[string]any{"max_depth": 0}),
		filterCase("max_depth 100000", true, map[string]any{"max_depth": 100000}),
		filterCase("max_depth 100001", false, map[string]any{"max_depth": 100001}),
		filterCase("max_body_bytes 0", false, map[string]any{"max_body_bytes": 0}),
		filterCase("max_body_bytes 256 MiB", true, map[string]any{"max_body_bytes": 268435456}),
		filterCase("max_body_bytes over", false, map[string]any{"max_body_bytes": 268435457}),
		filterCase("trust everyone and rules", false, map[string]any{"trust_kv_hints": true, "trusted_senders": []any{map[string]any{"source_cidr": "10.0.0.0/8"}}}),
		filterCase("empty rule", false, map[string]any{"trusted_senders": []any{map[string]any{}}}),
		filterCase("unknown rule member", false, map[string]any{"trusted_senders": []any{map[string]any{"principals": "x"}}}),
		filterCase("unknown member", false, map[string]any{"max_depths": 3}),
		exclude(true, "/health"), exclude(true, "/static/*"), exclude(true, "/"), exclude(true, "/*"), exclude(true, "/a/"),
		exclude(true, "/v1/models/..x"), exclude(true, "/.well-known/x"), exclude(true, "/a/.../b"), exclude(true, "/~user/a-b_c.d"),
		exclude(false, "/a/../b"), exclude(false, "/a/./b"), exclude(false, "/.."), exclude(false, "/a/.."), exclude(false, "/a//b"),
		exclude(false, "/a?x=1"), exclude(false, "/a#top"), exclude(false, "health"), exclude(false, ""), exclude(false, "/a*"),
		exclude(false, "/a/*/b"), exclude(false, "/%2e%2e"), exclude(false, `/a\b`), exclude(false, "/a b"), exclude(false, "/é"),
		exclude(false, "/**"),
		cidr("v4", true, "10.42.0.0/16"), cidr("v4 host", true, "192.168.1.7/32"), cidr("v4 all", true, "0.0.0.0/0"),
		cidr("v6", true, "fd00::/8"), cidr("v6 doc", true, "2001:db8::/32"), cidr("v6 all", true, "::/0"),
		cidr("v6 host", true, "2001:db8::1/128"), cidr("v6 full", true, "2001:db8:0:0:0:0:0:0/64"), cidr("v6 upper", true, "FD00::/8"),
		cidr("v6 partial group", true, "2001:db8:8000::/33"),
		cidr("no length", false, "10.0.0.0"), cidr("length 33", false, "10.0.0.0/33"), cidr("host bits", false, "10.0.0.1/8"),
		cidr("octet", false, "300.0.0.0/8"), cidr("leading zero", false, "010.0.0.0/8"), cidr("length leading zero", false, "10.0.0.0/08"),
		cidr("v6 host bits", false, "fd00::1/8"), cidr("v6 partial host bits", false, "2001:db8:c000::/33"),
		cidr("v6 mapped", false, "::ffff:10.0.0.0/104"), cidr("v6 mapped hex", false, "::ffff:a00:0/104"),
		cidr("zone", false, "fe80::%eth0/64"), cidr("nine groups", false, "1:2:3:4:5:6:7:8:9/128"),
		cidr("two ellipses", false, "1::2::3/128"), cidr("seven groups", false, "1:2:3:4:5:6:7/128"),
		cidr("ellipsis for none", false, "1:2:3:4:5:6:7::8/128"), cidr("group too long", false, "12345::/16"),
		cidr("length 129", false, "::/129"), cidr("name", false, "routers/16"),
		rule(true, "principal", "spiffe://cluster.local/ns/llm/sa/router"), rule(true, "principal", "spiffe://cluster.local/ns/llm/*"),
		rule(false, "principal", "/*"), rule(false, "principal", "spiffe://x*"), rule(false, "principal", "spiffe://a b"), rule(false, "principal", ""),
		rule(true, "dns_name", "router.routers.svc"), rule(false, "dns_name", "router routers"), rule(false, "dns_name", ""),
		ro(true, "all presets", map[string]any{"engines": []any{"vllm", "sglang", "trtllm", "dynamo", "llm-d"}, "untrusted": "refuse"}),
		ro(true, "own fields", map[string]any{"members": []any{"a.b.c", "my_field"}, "headers": []any{"X-Mine"}}),
		ro(true, "empty", map[string]any{}),
		ro(false, "unknown engine", map[string]any{"engines": []any{"tgi"}}),
		ro(false, "kv_hints member", map[string]any{"members": []any{"kv_hints.x"}}),
		ro(false, "dash in a member", map[string]any{"members": []any{"a-b"}}),
		ro(false, "nine deep", map[string]any{"members": []any{"a.b.c.d.e.f.g.h.i"}}),
		ro(false, "framing header", map[string]any{"headers": []any{"Content-Length"}}),
		ro(false, "header twice in other case", map[string]any{"headers": []any{"x-a", "X-A"}}),
		ro(false, "untrusted drop", map[string]any{"untrusted": "drop"}),
		ro(false, "too many fields", map[string]any{"engines": []any{"vllm", "sglang", "trtllm", "dynamo", "llm-d"}, "members": manyFields(30)}),
		ro(true, "just enough fields", map[string]any{"engines": []any{"vllm", "sglang", "trtllm", "dynamo", "llm-d"}, "members": manyFields(27)}),
		ports(true, 8080, 9090), ports(false, 8080, 8080), ports(false, 9090, 9090), ports(false, 70000, 9090),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", tc.mode+"-values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			tc.set(vals)
			_, _, chartErr := render(c, vals)

			// The sidecar's view of the same values: the filter document as
			// the values spell it, and the ports as -listen and -admin.
			f, _ := vals["filter"].(map[string]any)
			doc, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(tc.name)+".json")
			if err := os.WriteFile(file, doc, 0o600); err != nil {
				t.Fatal(err)
			}
			api, admin := 8080, 9090
			if p, ok := vals["ports"].(map[string]any); ok && tc.mode == "sidecar" {
				api, admin = intValue(t, p["api"]), intValue(t, p["admin"])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-check-config", "-upstream", "http://127.0.0.1:8000",
				"-listen", fmt.Sprintf(":%d", api), "-admin", fmt.Sprintf(":%d", admin), "-filter-config", "@"+file)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			sideErr := cmd.Run()
			var ee *exec.ExitError
			if sideErr != nil && (!errors.As(sideErr, &ee) || ee.ExitCode() != 2) {
				t.Fatalf("sidecar -check-config: %v: %s", sideErr, out.String())
			}
			t.Logf("chart: %v; sidecar: %s", chartErr, strings.TrimSpace(out.String()))
			if (chartErr == nil) != tc.ok || (sideErr == nil) != tc.ok {
				t.Errorf("want ok=%v: the chart says %v, the sidecar says %s (document %s)", tc.ok, chartErr, strings.TrimSpace(out.String()), doc)
			}
		})
	}
}

// manyFields are n distinct member paths.
func manyFields(n int) []any {
	var out []any
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("own_field_%d", i))
	}
	return out
}

// TestRouterOnlySpecFile: files/router-only.json, which the chart checks
// router_only with, holds filterspec's presets, the 64-field limit and
// the headers the filter refuses to name.
func TestRouterOnlySpecFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "router-only.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		MaxFields      int                                            `json:"max_fields"`
		FramingHeaders []string                                       `json:"framing_headers"`
		Engines        map[string]struct{ Members, Headers []string } `json:"engines"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.MaxFields != kvhints.MaxRouterOnlyPaths {
		t.Errorf("max_fields %d, the filter takes %d", spec.MaxFields, kvhints.MaxRouterOnlyPaths)
	}
	if len(spec.Engines) != len(filterspec.Presets()) {
		t.Errorf("%d engines, filterspec has %d", len(spec.Engines), len(filterspec.Presets()))
	}
	for _, p := range filterspec.Presets() {
		e := spec.Engines[p.Engine]
		if !slices.Equal(e.Members, p.Members) || !slices.Equal(e.Headers, p.Headers) {
			t.Errorf("%s: %+v, filterspec %+v", p.Engine, e, p)
		}
	}
	for _, h := range spec.FramingHeaders {
		if _, err := filterspec.NewRouterOnly(nil, nil, []string{h}, false); err == nil {
			t.Errorf("framing header %q: the filter takes it", h)
		}
	}
	for _, h := range []string{"host", "content-length", "transfer-encoding"} {
		if !slices.Contains(spec.FramingHeaders, h) {
			t.Errorf("framing_headers lacks %s", h)
		}
	}
}
