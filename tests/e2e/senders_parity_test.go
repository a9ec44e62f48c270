package e2e

import (
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
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
	p := newSenderPKI(t, "kvgate parity CA")
	w := startWorker(t)

	admin, port := envoytest.FreePort(t), envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: p.files, AdminPort: admin, Upstream: w.Addr,
		ModulePath: modulePath, Listeners: []envoyconfig.Listener{{Name: "senders", Port: port, PluginConfig: sendersConfig}}})
	if err != nil {
		t.Fatal(err)
	}
	e := envoytest.Start(t, bin, cfg, admin, 1)
	sc := startSidecar(t, sidecarBin, w.Addr, sendersConfig, t.TempDir(), p.sidecarArgs()...)
	runSenderParity(t, w, p, "senders-parity", []senderHost{
		{name: "envoy", addr: fmt.Sprintf("127.0.0.1:%d", port), scrape: e.Prometheus},
		{name: "sidecar", addr: sc.API, scrape: sc.metrics},
	}, senderCases(p))
}
