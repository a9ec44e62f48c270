package e2e

import (
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/tests/pki"
)

// Trusted senders through the native module, the wasm filter and the
// sidecar, with the same certificates and trusted_senders (as
// TestTrustedSendersParity): the router's envelope is admitted byte for
// byte, every other request stripped and counted untrusted, spoofed
// headers change nothing; a DNS SAN rule and a source CIDR rule (the
// loopback peer) are admitted too. The three hosts forward the same bytes
// and move the same counters, request by request.
func TestNativeTrustedSendersParity(t *testing.T) {
	bin := envoytest.Binary(t)
	sidecarBin := sidecarBinary(t)
	dir := t.TempDir()
	ca, err := pki.NewCA("kvgate native parity CA")
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
	dnsRouter := must(ca.Client(nil, []string{"router.llm.svc"}))
	lf, err := ca.WriteListener(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := &envoyconfig.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA}
	w := startWorker(t)
	const loopbackConfig = `{"trusted_senders":[{"source_cidr":"127.0.0.0/8"}]}`

	startMTLS := func(native bool, module string) (string, string, *envoytest.Process) {
		admin, p1, p2 := envoytest.FreePort(t), envoytest.FreePort(t), envoytest.FreePort(t)
		cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: files, AdminPort: admin, Upstream: w.Addr,
			ModulePath: module, Native: native, Listeners: []envoyconfig.Listener{
				{Name: "senders", Port: p1, PluginConfig: sendersConfig},
				{Name: "loopback", Port: p2, PluginConfig: loopbackConfig}}})
		if err != nil {
			t.Fatal(err)
		}
		e := envoytest.Start(t, bin, cfg, admin, 1)
		return fmt.Sprintf("127.0.0.1:%d", p1), fmt.Sprintf("127.0.0.1:%d", p2), e
	}
	nSenders, nLoop, ne := startMTLS(true, nativeModule(t))
	wSenders, wLoop, we := startMTLS(false, modulePath)
	sidecarArgs := []string{"-tls-cert", files.Cert, "-tls-key", files.Key, "-client-ca", files.ClientCA, "-pool-size", "2"}
	sc := startSidecar(t, sidecarBin, w.Addr, sendersConfig, t.TempDir(), sidecarArgs...)
	scLoop := startSidecar(t, sidecarBin, w.Addr, loopbackConfig, t.TempDir(), sidecarArgs...)
	type hostAddrs struct {
		name            string
		senders, loop   string
		scrape, scrapeL func() (string, error)
	}
	hosts := []hostAddrs{
		{"native", nSenders, nLoop, ne.Prometheus, ne.Prometheus},
		{"wasm", wSenders, wLoop, we.Prometheus, we.Prometheus},
		{"sidecar", sc.API, scLoop.API, sc.metrics, scLoop.metrics},
	}

	spoofXFF := map[string]string{"X-Forwarded-For": spoofedXFF}
	spoofXFCC := map[string]string{"X-Forwarded-Client-Cert": spoofedXFCC}
	cases := []struct {
		name     string
		loopback bool // the listener that trusts 127.0.0.0/8
		cert     *pki.Leaf
		headers  map[string]string
		trusted  bool
	}{
		{"router", false, router, nil, true},
		{"dns-router", false, dnsRouter, nil, true},
		{"other-certificate", false, app, nil, false},
		{"no-certificate", false, nil, nil, false},
		{"no-certificate-spoofed-xff", false, nil, spoofXFF, false},
		{"no-certificate-spoofed-xfcc", false, nil, spoofXFCC, false},
		{"other-certificate-spoofed-xfcc", false, app, spoofXFCC, false},
		{"router-spoofed-xff-xfcc", false, router, map[string]string{"X-Forwarded-For": spoofedXFF,
			"X-Forwarded-Client-Cert": "By=spiffe://x/y;URI=" + appID}, true},
		{"loopback-no-certificate", true, nil, nil, true},
		{"loopback-other-certificate", true, app, nil, true},
	}
	got := map[string]senderResult{} // host/case
	for _, h := range hosts {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				addr, scrape := h.senders, h.scrape
				if c.loopback {
					addr, scrape = h.loop, h.scrapeL
				}
				got[h.name+"/"+c.name] = checkSenderRequest(t, w, ca, c.cert, addr, "native-senders/"+h.name+"/"+c.name, c.headers, c.trusted, scrape)
			})
		}
	}
	for _, c := range cases {
		for _, other := range []string{"wasm", "sidecar"} {
			sameSenderResult(t, c.name, "native", got["native/"+c.name], other, got[other+"/"+c.name])
		}
	}
}
