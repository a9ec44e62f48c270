package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// planConfigJSON is a configuration under which refEnvelope resolves to one
// binding; edit tweaks it per case.
func planConfigJSON(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	fetch := []any{map[string]any{"type": "kv.fetch", "version": "1.0"}}
	cfg := map[string]any{
		"capabilities": map[string]any{"trtllm": fetch, "kvcm": fetch},
		"bindings": []any{
			map[string]any{"name": "kvcm-a", "family": "kvcm", "authorized": true, "capabilities": fetch},
			map[string]any{"name": "kvcm-b", "family": "kvcm", "authorized": false, "capabilities": fetch},
			map[string]any{"name": "nixl", "family": "trtllm", "authorized": false, "capabilities": []any{}},
		},
		"registry": []any{hintEndpoint},
		"request": map[string]any{
			"lora": false, "generation_only": true,
			"pd": map[string]any{"required": true, "ctx_request_id": 77, "source": "ctx-0:8000", "opaque_state": "c3RhdGU="},
		},
	}
	if edit != nil {
		edit(cfg)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var wantPD = map[string]any{"required": true, "ctx_request_id": float64(77), "source": "ctx-0:8000", "opaque_state": "c3RhdGU="}

type planCase struct {
	name     string
	edit     func(map[string]any)
	args     func(cfg string) []string // default: --config cfg -
	stdin    string
	code     int
	path     string
	reason   any // string or nil
	check    func(t *testing.T, out map[string]any)
	noStdout bool
}

// noBinding checks that a plan names no binding: resolution found none.
func noBinding(t *testing.T, out map[string]any) {
	t.Helper()
	if out["binding"] != nil {
		t.Errorf("binding = %v, want null", out["binding"])
	}
}

func request(cfg map[string]any) map[string]any { return cfg["request"].(map[string]any) }

func planCases() []planCase {
	return []planCase{
		{name: "named fetch", stdin: refPretty, code: exitOK, path: "named_fetch", reason: nil,
			check: func(t *testing.T, out map[string]any) {
				want := map[string]any{"admission": "admitted", "collected": true, "candidates": float64(1),
					"unknown_action_types": float64(0), "unmatched_fetch_versions": float64(0), "action": float64(0),
					"action_id": "a1", "binding": "kvcm-a", "endpoint": hintEndpoint}
				for k, v := range want {
					if out[k] != v {
						t.Errorf("%s = %v, want %v", k, out[k], v)
					}
				}
				if fams, _ := json.Marshal(out["families"]); string(fams) != `["kvcm","trtllm"]` {
					t.Errorf("families = %s", fams)
				}
			}},
		{name: "endpoint not registered", edit: func(c map[string]any) { c["registry"] = []any{"tcp://10.0.0.1:1"} },
			stdin: refEnvelope, code: exitRejected, path: "paired", reason: "endpoint_not_registered"},
		{name: "provider rejects", edit: func(c map[string]any) { c["provider_allowlist"] = []any{} },
			stdin: refEnvelope, code: exitRejected, path: "paired", reason: "provider_rejected"},
		{name: "LoRA", edit: func(c map[string]any) { request(c)["lora"] = true },
			stdin: refEnvelope, code: exitRejected, path: "paired", reason: "excluded_lora",
			check: func(t *testing.T, out map[string]any) {
				if out["collected"] != false || out["action"] != nil {
					t.Errorf("LoRA request reached collection: %v", out)
				}
			}},
		{name: "not generation-only", edit: func(c map[string]any) { request(c)["generation_only"] = false },
			stdin: refEnvelope, code: exitRejected, path: "paired", reason: "not_generation_only"},
		{name: "request-paired binding", edit: func(c map[string]any) {
			c["bindings"].([]any)[0].(map[string]any)["request_paired"] = true
		}, stdin: refEnvelope, code: exitRejected, path: "paired", reason: "request_paired",
			check: func(t *testing.T, out map[string]any) {
				if out["endpoint"] != nil || out["binding"] != "kvcm-a" {
					t.Errorf("out = %v", out)
				}
			}},
		{name: "ambiguous", edit: func(c map[string]any) {
			c["bindings"].([]any)[1].(map[string]any)["authorized"] = true
		}, stdin: refEnvelope, code: exitRejected, path: "paired", reason: "ambiguous"},
		// Resolution comes before capability: a second authorized binding
		// in a supporting family is ambiguous even when it cannot handle
		// the action, within the family and across families.
		{name: "ambiguous with an incapable binding in the family", edit: func(c map[string]any) {
			b := c["bindings"].([]any)[1].(map[string]any)
			b["authorized"], b["capabilities"] = true, []any{}
		}, stdin: refEnvelope, code: exitRejected, path: "paired", reason: "ambiguous", check: noBinding},
		{name: "ambiguous with an incapable binding in another family", edit: func(c map[string]any) {
			c["bindings"].([]any)[2].(map[string]any)["authorized"] = true
		}, stdin: refEnvelope, code: exitRejected, path: "paired", reason: "ambiguous", check: noBinding},
		{name: "the one authorized binding is incapable", edit: func(c map[string]any) {
			c["bindings"].([]any)[0].(map[string]any)["capabilities"] = []any{}
		}, stdin: refEnvelope, code: exitRejected, path: "paired", reason: "unresolved_missing",
			check: func(t *testing.T, out map[string]any) {
				if out["binding"] != "kvcm-a" || out["endpoint"] != nil {
					t.Errorf("binding = %v, endpoint = %v, want kvcm-a and null", out["binding"], out["endpoint"])
				}
			}},
		{name: "unresolved", edit: func(c map[string]any) { c["bindings"] = []any{} },
			stdin: refEnvelope, code: exitRejected, path: "paired", reason: "unresolved_missing", check: noBinding},
		{name: "unsupported", stdin: noFetch, code: exitRejected, path: "paired", reason: "unsupported",
			check: func(t *testing.T, out map[string]any) {
				if out["unknown_action_types"] != float64(1) {
					t.Errorf("unknown_action_types = %v", out["unknown_action_types"])
				}
			}},
		{name: "discarded", stdin: unknownVersion, code: exitRejected, path: "paired", reason: "discarded",
			check: func(t *testing.T, out map[string]any) {
				if out["admission"] != "unknown_version" {
					t.Errorf("admission = %v", out["admission"])
				}
			}},
		{name: "absent", stdin: "null", code: exitRejected, path: "paired", reason: "absent",
			check: func(t *testing.T, out map[string]any) {
				if out["admission"] != "null" {
					t.Errorf("admission = %v", out["admission"])
				}
			}},
		{name: "envelope from a file, flags after it", stdin: "",
			args: func(cfg string) []string {
				p := filepath.Join(filepath.Dir(cfg), "env.json")
				os.WriteFile(p, []byte(refEnvelope), 0o600)
				return []string{p, "--config", cfg}
			}, code: exitOK, path: "named_fetch", reason: nil},
		{name: "missing --config", args: func(string) []string { return []string{"-"} }, code: exitUsage, noStdout: true},
		{name: "both on stdin", args: func(string) []string { return []string{"--config", "-", "-"} }, code: exitUsage, noStdout: true},
		{name: "unknown config field", edit: func(c map[string]any) { c["registy"] = []any{} },
			stdin: refEnvelope, code: exitUsage, noStdout: true},
		{name: "bad binding", edit: func(c map[string]any) { c["bindings"] = []any{map[string]any{"name": "x"}} },
			stdin: refEnvelope, code: exitUsage, noStdout: true},
		{name: "no such config", args: func(cfg string) []string { return []string{"--config", cfg + ".missing", "-"} },
			code: exitUsage, noStdout: true},
	}
}

func (c planCase) verify(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != c.code {
		t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, stderr)
	}
	if strings.Contains(stderr, hintEndpoint) {
		t.Errorf("hint contents on stderr: %s", stderr)
	}
	if c.noStdout {
		if stdout != "" {
			t.Errorf("stdout = %q, want nothing", stdout)
		}
		return
	}
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("want one line, got %q", stdout)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if out["path"] != c.path || out["reason"] != c.reason {
		t.Errorf("path %v reason %v, want %v %v (detail %v)", out["path"], out["reason"], c.path, c.reason, out["detail"])
	}
	pd, _ := json.Marshal(out["pd"])
	want, _ := json.Marshal(wantPD)
	if !bytes.Equal(pd, want) {
		t.Errorf("pd = %s, want %s", pd, want)
	}
	if c.check != nil {
		c.check(t, out)
	}
}

func (c planCase) argv(t *testing.T) []string {
	cfg := planConfigJSON(t, c.edit)
	if c.args != nil {
		return c.args(cfg)
	}
	return []string{"--config", cfg, "-"}
}

func TestPlan(t *testing.T) {
	for _, c := range planCases() {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"plan"}, c.argv(t)...), strings.NewReader(c.stdin), &stdout, &stderr)
			c.verify(t, code, stdout.String(), stderr.String())
		})
	}
}

func TestPlanHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", "-h"}, nil, &stdout, &stderr); code != exitOK || !strings.HasPrefix(stdout.String(), "Usage: kvhints plan") {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
}

// TestPlanBinary builds the command and runs the plan cases in a real
// process.
func TestPlanBinary(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range planCases() {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runBinary(t, bin, append([]string{"plan"}, c.argv(t)...), c.stdin)
			c.verify(t, code, stdout, stderr)
		})
	}
}
