package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
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
	files := &envoyconfig.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA}
	w := startWorker(t)

	admin, port := envoytest.FreePort(t), envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: files, AdminPort: admin, Upstream: w.Addr,
		ModulePath: modulePath, Listeners: []envoyconfig.Listener{{Name: "senders", Port: port, PluginConfig: sendersConfig}}})
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
	got := map[string]senderResult{} // host/case
	for _, h := range hosts {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				got[h.name+"/"+c.name] = checkSenderRequest(t, w, ca, c.cert, h.addr, "senders-parity/"+h.name+"/"+c.name, c.headers, c.trusted, h.scrape)
			})
		}
	}
	for _, c := range cases {
		sameSenderResult(t, c.name, "envoy", got["envoy/"+c.name], "sidecar", got["sidecar/"+c.name])
	}
}

// senderBodies returns the request every trusted-senders case posts, with
// the router's envelope pretty-printed, and what the worker must receive
// from it: the envelope in canonical form when the sender is trusted
// (admitted), removed when it is not (stripped).
func senderBodies() (body []byte, admitted, stripped string) {
	head, tail := `{"model":"m","kv_hints":`, `,"messages":[{"role":"user","content":"hi"}]}`
	return []byte(head + strings.ReplaceAll(refEnvelope, ",", ",\n  ") + tail), head + refEnvelope + tail, `{"model":"m"` + tail
}

// senderResult is what one trusted-senders case did on one host: the body
// the worker received and how the host's counters moved.
type senderResult struct {
	body  string
	delta series
}

// checkSenderRequest sends one trusted-senders request (senderBodies) to
// the host at addr over mTLS, presenting cert (none when nil) and the extra
// headers, tagged key for the worker, and checks what the host did: the
// worker received the envelope admitted when trusted, else stripped, and
// no x-forwarded-client-cert; of the host's counters (scrape, before and
// after), kvgate_kv_hints_admitted_total rose by one when trusted, the
// untrusted count of trtllm_kv_hints_ignored_total otherwise, and nothing
// else moved. It returns what it saw, for comparing hosts
// (sameSenderResult).
func checkSenderRequest(t *testing.T, w *Worker, ca *pki.CA, cert *pki.Leaf, addr, key string, headers map[string]string,
	trusted bool, scrape func() (string, error)) senderResult {
	t.Helper()
	body, admitted, stripped := senderBodies()
	before, err := scrape()
	if err != nil {
		t.Fatal(err)
	}
	rec := postMTLS(t, w, ca, cert, "https://"+addr+"/v1/chat/completions", key, body, headers)
	after, err := scrape()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(after).delta(parseSeries(before))
	want, counter := stripped, `trtllm_kv_hints_ignored_total{reason="untrusted"}`
	if trusted {
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
	return senderResult{string(rec.Body), d}
}

// sameSenderResult fails the test when hosts a and b forwarded different
// bytes for a trusted-senders case, or moved different counters.
func sameSenderResult(t *testing.T, name, aName string, a senderResult, bName string, b senderResult) {
	t.Helper()
	if a.body != b.body || a.delta.String() != b.delta.String() {
		t.Errorf("%s: %s and %s differ:\n%s forwarded %s, counters moved\n%s\n%s forwarded %s, counters moved\n%s",
			name, aName, bName, aName, a.body, a.delta, bName, b.body, b.delta)
	}
}
