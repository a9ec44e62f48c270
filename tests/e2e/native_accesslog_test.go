package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// The native module reports what became of each hint in Envoy's access
// log exactly as the wasm filter does: the same committed format
// (envoy-native.yaml's is envoy.yaml's) prints the same hint, hint_reason,
// sender_trusted, sender_rule, status and response code details, request
// by request, and neither log holds anything of the bodies or hints.
func TestNativeAccessLog(t *testing.T) {
	w := startWorker(t)
	secret := "secret-52a9d0"
	env := func(payload string) string {
		return `{"protocol_version":"0.1","message_id":"` + secret + `","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":` + payload + `}]}`
	}
	good := env(`{"source_control_endpoint":"tcp://` + secret + `:1","block_hashes":[1]}`)
	type req struct {
		name, method, body string
		headers            map[string]string
	}
	modes := []struct {
		config string
		reqs   []req
	}{
		{`{"trust_kv_hints":false,"max_body_bytes":1024}`, []req{
			{"stripped", "POST", `{"model":"m","kv_hints":` + good + `}`, nil},
			{"none", "POST", `{"model":"m","prompt":"` + secret + `"}`, nil},
			{"rejected", "POST", `{"model":"` + secret + `",`, nil},
			{"too-large", "POST", `{"model":"` + strings.Repeat("x", 2000) + `"}`, nil},
			{"encoded", "POST", `{}`, map[string]string{"content-encoding": "gzip"}},
			{"nobody", "GET", "", nil},
		}},
		{`{"trust_kv_hints":true}`, []req{
			{"admitted", "POST", `{"model":"m","kv_hints":` + good + `}`, nil},
			{"malformed", "POST", `{"kv_hints":` + env(`"`+secret+`"`) + `}`, nil},
			{"version", "POST", `{"kv_hints":{"protocol_version":"` + secret + `"}}`, nil},
		}},
		{`{"trusted_senders":[{"source_cidr":"10.0.0.0/8"},{"source_cidr":"127.0.0.0/8"}]}`, []req{
			{"rule-1", "POST", `{"model":"m","kv_hints":` + good + `}`, nil},
		}},
	}
	var nl, wl []envoyconfig.Listener
	for i, m := range modes {
		nl = append(nl, envoyconfig.Listener{Name: fmt.Sprintf("mode%d", i), Port: envoytest.FreePort(t), PluginConfig: m.config})
		wl = append(wl, envoyconfig.Listener{Name: fmt.Sprintf("mode%d", i), Port: envoytest.FreePort(t), PluginConfig: m.config})
	}
	hosts := map[string]*envoytest.Process{"native": startNativeEnvoy(t, w.Addr, nl), "wasm": startEnvoy(t, w.Addr, wl)}
	for i, m := range modes {
		for _, r := range m.reqs {
			for host, ls := range map[string][]envoyconfig.Listener{"native": nl, "wasm": wl} {
				hdr := map[string]string{"content-type": "application/json", CaseHeader: host + "/" + r.name, "authorization": "Bearer " + secret}
				for k, v := range r.headers {
					hdr[k] = v
				}
				if _, err := send(fmt.Sprintf("127.0.0.1:%d", ls[i].Port), r.method, "/case/"+r.name+"?q="+secret, hdr, []byte(r.body), false); err != nil {
					t.Fatalf("%s via %s: %v", r.name, host, err)
				}
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := ""
		for host, e := range hosts {
			lines := accessLines(e.Log())
			for _, m := range modes {
				for _, r := range m.reqs {
					if _, ok := lines["/case/"+r.name]; !ok {
						missing = host + " /case/" + r.name
					}
				}
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access line for %s", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nLines, wLines := accessLines(hosts["native"].Log()), accessLines(hosts["wasm"].Log())
	for _, m := range modes {
		for _, r := range m.reqs {
			n, wv := nLines["/case/"+r.name], wLines["/case/"+r.name]
			for _, field := range []string{"hint", "hint_reason", "sender_trusted", "sender_rule", "status", "details", "method"} {
				if attr(n, field) != attr(wv, field) {
					t.Errorf("%s: %s is %q natively, %q in wasm", r.name, field, attr(n, field), attr(wv, field))
				}
			}
		}
	}
	if got := attr(nLines["/case/rule-1"], "sender_rule"); got != "1" {
		t.Errorf("rule-1: sender_rule %q, want 1", got)
	}
	if got := attr(nLines["/case/stripped"], "hint"); got != "stripped" {
		t.Errorf("stripped: hint %q", got)
	}
	for name, e := range hosts {
		if strings.Contains(e.Log(), secret) {
			t.Errorf("%s Envoy's log holds body, hint, query or header bytes", name)
		}
	}
}
