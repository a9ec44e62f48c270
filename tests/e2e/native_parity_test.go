package e2e

import (
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
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
	p := newSenderPKI(t, "kvgate native parity CA")
	w := startWorker(t)
	const loopbackConfig = `{"trusted_senders":[{"source_cidr":"127.0.0.0/8"}]}`

	startMTLS := func(native bool, module string) (string, string, *envoytest.Process) {
		admin, p1, p2 := envoytest.FreePort(t), envoytest.FreePort(t), envoytest.FreePort(t)
		cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: p.files, AdminPort: admin, Upstream: w.Addr,
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
	sc := startSidecar(t, sidecarBin, w.Addr, sendersConfig, t.TempDir(), p.sidecarArgs()...)
	scLoop := startSidecar(t, sidecarBin, w.Addr, loopbackConfig, t.TempDir(), p.sidecarArgs()...)
	hosts := []senderHost{
		{"native", nSenders, nLoop, ne.Prometheus, ne.Prometheus},
		{"wasm", wSenders, wLoop, we.Prometheus, we.Prometheus},
		{"sidecar", sc.API, scLoop.API, sc.metrics, scLoop.metrics},
	}
	cases := append(senderCases(p),
		senderCase{name: "dns-router", cert: p.dnsRouter, trusted: true},
		senderCase{name: "loopback-no-certificate", loopback: true, trusted: true},
		senderCase{name: "loopback-other-certificate", loopback: true, cert: p.app, trusted: true})
	runSenderParity(t, w, p, "native-senders", hosts, cases)
}
