package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// accessLines returns the JSON access log lines in log that have a path,
// by path.
func accessLines(log string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, l := range strings.Split(log, "\n") {
		i := strings.IndexByte(l, '{')
		if i < 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l[i:]), &m) != nil {
			continue
		}
		if p, ok := m["path"].(string); ok && m["status"] != nil {
			out[p] = m
		}
	}
	return out
}

// attr is an access log attribute as text; absent, null and "-" are "".
func attr(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case string:
		if v == "-" {
			return ""
		}
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// What became of each request's hint is in the access log of both hosts,
// with the same words, as the filter reported it: Envoy prints the filter
// state the guest set (envoy/envoy.yaml's access log format), the sidecar
// the same properties. Neither log holds anything of the bodies or hints.
func TestAccessLogBothHosts(t *testing.T) {
	w := startWorker(t)
	secret := "secret-7c41e9"
	env := func(payload string) string {
		return `{"protocol_version":"0.1","message_id":"` + secret + `","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":` + payload + `}]}`
	}
	good := env(`{"source_control_endpoint":"tcp://` + secret + `:1","block_hashes":[1]}`)
	type req struct {
		name, method, body string
		hint, reason       string // "" for none
	}
	modes := []struct {
		config string
		reqs   []req
	}{
		{`{"trust_kv_hints":false}`, []req{
			{"stripped", "POST", `{"model":"m","kv_hints":` + good + `}`, "stripped", "untrusted"},
			{"none", "POST", `{"model":"m","prompt":"` + secret + `"}`, "none", ""},
			{"rejected", "POST", `{"model":"` + secret + `",`, "rejected", ""},
			{"nobody", "GET", "", "", ""},
		}},
		{`{"trust_kv_hints":true}`, []req{
			{"admitted", "POST", `{"model":"m","kv_hints":` + good + `}`, "admitted", ""},
			{"malformed", "POST", `{"kv_hints":` + env(`"`+secret+`"`) + `}`, "discarded:malformed", "malformed"},
			{"version", "POST", `{"kv_hints":{"protocol_version":"` + secret + `"}}`, "discarded:unknown_version", "unknown_version"},
		}},
	}

	// Envoy: one listener per mode.
	var listeners []envoyconfig.Listener
	for i, m := range modes {
		listeners = append(listeners, envoyconfig.Listener{Name: fmt.Sprintf("mode%d", i), Port: envoytest.FreePort(t), PluginConfig: m.config})
	}
	e := startEnvoy(t, w.Addr, listeners)
	bin := sidecarBinary(t)
	cache := t.TempDir()
	hosts := map[string]func() string{"envoy": e.Log}
	for i, m := range modes {
		sc := startLoggingSidecar(t, bin, w.Addr, m.config, cache)
		hosts[fmt.Sprintf("sidecar%d", i)] = sc.String
		for _, r := range m.reqs {
			for _, addr := range []string{sc.addr, fmt.Sprintf("127.0.0.1:%d", listeners[i].Port)} {
				hdr := map[string]string{"content-type": "application/json", CaseHeader: r.name, "authorization": "Bearer " + secret}
				if _, err := send(addr, r.method, "/case/"+r.name+"?q="+secret, hdr, []byte(r.body), false); err != nil {
					t.Fatalf("%s via %s: %v", r.name, addr, err)
				}
			}
		}
	}
	// Both hosts buffer access lines for about a second.
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := ""
		for i, m := range modes {
			for _, r := range m.reqs {
				for name, log := range hosts {
					if name != "envoy" && name != fmt.Sprintf("sidecar%d", i) {
						continue
					}
					if _, ok := accessLines(log())["/case/"+r.name]; !ok {
						missing = name + " /case/" + r.name
					}
				}
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access line for %s:\n%s", missing, hosts[strings.Fields(missing)[0]]())
		}
		time.Sleep(200 * time.Millisecond)
	}
	envoyLines := accessLines(e.Log())
	for i, m := range modes {
		sideLines := accessLines(hosts[fmt.Sprintf("sidecar%d", i)]())
		for _, r := range m.reqs {
			for host, l := range map[string]map[string]any{"envoy": envoyLines["/case/"+r.name], "sidecar": sideLines["/case/"+r.name]} {
				if got := attr(l, "hint"); got != r.hint {
					t.Errorf("%s %s: hint %q, want %q (%v)", host, r.name, got, r.hint, l)
				}
				if got := attr(l, "hint_reason"); got != r.reason {
					t.Errorf("%s %s: hint_reason %q, want %q", host, r.name, got, r.reason)
				}
				if attr(l, "request_id") == "" {
					t.Errorf("%s %s: no request_id: %v", host, r.name, l)
				}
			}
		}
	}
	for name, log := range hosts {
		if strings.Contains(log(), secret) {
			t.Errorf("%s's log holds body, hint, query or header bytes:\n%s", name, log())
		}
	}
}

// loggingSidecar is the sidecar binary with its log readable while it runs.
type loggingSidecar struct {
	*syncbuf.Buffer
	addr string
}

func startLoggingSidecar(t *testing.T, bin, upstream, config, cache string) loggingSidecar {
	t.Helper()
	s := loggingSidecar{Buffer: &syncbuf.Buffer{}, addr: fmt.Sprintf("127.0.0.1:%d", envoytest.FreePort(t))}
	admin := fmt.Sprintf("127.0.0.1:%d", envoytest.FreePort(t))
	cmd := exec.Command(bin, "-listen", s.addr, "-admin", admin, "-upstream", "http://"+upstream,
		"-filter", modulePath, "-filter-config", config, "-cache-dir", cache)
	startProcess(t, cmd, s.Buffer, "sidecar", httpOK("http://"+admin+"/readyz"))
	return s
}
