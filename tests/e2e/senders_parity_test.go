package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/tests/pki"
)

// Trusted senders in both hosts, with the same certificates (one CA; a
// router certificate whose URI SAN is its SPIFFE ID; a client certificate
// with another; no certificate) and the same trusted_senders: real Envoy on
// the committed mTLS bootstrap, and the built sidecar with -tls-cert,
// -tls-key and -client-ca. The router's envelope is admitted byte for
// byte, every other request stripped and counted untrusted; a spoofed
// X-Forwarded-For (inside a trusted source_cidr) or x-forwarded-client-cert
// (naming the router) changes nothing, and neither host forwards the
// client's x-forwarded-client-cert. Both hosts forward the same bytes and
// move the same counters, request by request.
func TestTrustedSendersParity(t *testing.T) {
	bin := envoytest.Binary(t)
	sidecarBin := sidecarBinary(t)
	dir := t.TempDir()
	ca, err := pki.NewCA("kvgate parity CA")
	if err != nil {
		t.Fatal(err)
	}
	must := func(l *pki.Leaf, err error) *pki.Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	router := must(ca.Client([]string{routerID}, nil))
	app := must(ca.Client([]string{appID}, []string{"app.llm.svc"}))
	lf, err := ca.WriteListener(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := &envoy.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA}
	w := startWorker(t)

	admin, port := envoytest.FreePort(t), envoytest.FreePort(t)
	cfg, err := envoy.Render(envoy.Options{Template: envoy.MTLSBootstrap, TLS: files, AdminPort: admin, Upstream: w.Addr,
		ModulePath: modulePath, Listeners: []envoy.Listener{{Name: "senders", Port: port, PluginConfig: sendersConfig}}})
	if err != nil {
		t.Fatal(err)
	}
	e := envoytest.Start(t, bin, cfg, admin, 1)
	sc := startSidecar(t, sidecarBin, w.Addr, sendersConfig, t.TempDir(),
		"-tls-cert", files.Cert, "-tls-key", files.Key, "-client-ca", files.ClientCA, "-pool-size", "2")
	hosts := []struct {
		name   string
		addr   string
		scrape func() (string, error)
	}{
		{"envoy", fmt.Sprintf("127.0.0.1:%d", port), e.Prometheus},
		{"sidecar", sc.API, sc.metrics},
	}

	head, tail := `{"model":"m","kv_hints":`, `,"messages":[{"role":"user","content":"hi"}]}`
	body := []byte(head + strings.ReplaceAll(refEnvelope, ",", ",\n  ") + tail)
	admitted := head + refEnvelope + tail
	stripped := `{"model":"m"` + tail
	spoofXFF := map[string]string{"X-Forwarded-For": spoofedXFF}
	spoofXFCC := map[string]string{"X-Forwarded-Client-Cert": spoofedXFCC}
	cases := []struct {
		name    string
		cert    *pki.Leaf
		headers map[string]string
		trusted bool
	}{
		{"router", router, nil, true},
		{"other-certificate", app, nil, false},
		{"no-certificate", nil, nil, false},
		{"no-certificate-spoofed-xff", nil, spoofXFF, false},
		{"no-certificate-spoofed-xfcc", nil, spoofXFCC, false},
		{"other-certificate-spoofed-xfcc", app, spoofXFCC, false},
		{"router-spoofed-xff-xfcc", router, map[string]string{"X-Forwarded-For": spoofedXFF,
			"X-Forwarded-Client-Cert": "By=spiffe://x/y;URI=" + appID}, true},
	}
	type outcome struct {
		body  string
		delta series
	}
	got := map[string]outcome{} // host/case
	for _, h := range hosts {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				before, err := h.scrape()
				if err != nil {
					t.Fatal(err)
				}
				rec := postMTLS(t, w, ca, c.cert, "https://"+h.addr+"/v1/chat/completions", "senders-parity/"+h.name+"/"+c.name, body, c.headers)
				after, err := h.scrape()
				if err != nil {
					t.Fatal(err)
				}
				d := parseSeries(after).delta(parseSeries(before))
				got[h.name+"/"+c.name] = outcome{string(rec.Body), d}
				want, counter := stripped, `trtllm_kv_hints_ignored_total{reason="untrusted"}`
				if c.trusted {
					want, counter = admitted, `kvgate_kv_hints_admitted_total{}`
				}
				if string(rec.Body) != want {
					t.Errorf("worker received\n%s\nwant\n%s", rec.Body, want)
				}
				if v := rec.Header.Values("X-Forwarded-Client-Cert"); len(v) != 0 {
					t.Errorf("the worker received x-forwarded-client-cert %q", v)
				}
				if d[counter] != 1 {
					t.Errorf("%s rose by %g, want 1", counter, d[counter])
				}
				for k, v := range d {
					if k != counter && v != 0 {
						t.Errorf("%s changed by %g", k, v)
					}
				}
			})
		}
	}
	for _, c := range cases {
		ev, sv := got["envoy/"+c.name], got["sidecar/"+c.name]
		if ev.body != sv.body || ev.delta.String() != sv.delta.String() {
			t.Errorf("%s: the hosts differ:\nenvoy forwarded %s, counters moved\n%s\nsidecar forwarded %s, counters moved\n%s",
				c.name, ev.body, ev.delta, sv.body, sv.delta)
		}
	}
}
