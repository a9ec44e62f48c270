package e2e

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/tests/pki"
)

// What the trusted-senders parity tests share (TestTrustedSendersParity:
// Envoy and the sidecar; TestNativeTrustedSendersParity: the native
// module, the wasm filter and the sidecar): one set of certificates, the
// cases, and the per-request check run on every host, with the hosts
// compared case by case.

// senderPKI is the certificates of a trusted-senders parity test: one CA
// for the listeners and the clients.
type senderPKI struct {
	ca *pki.CA
	// files are the listener's certificate for 127.0.0.1, its key and the
	// CA that client certificates must chain to, for Envoy's TLS listener
	// and the sidecar's flags (sidecarArgs).
	files *envoyconfig.TLSFiles
	// router has the router's SPIFFE ID (routerID) as its URI SAN, which
	// sendersConfig's principal rule trusts.
	router *pki.Leaf
	// app has another SPIFFE ID (appID) and DNS name: no rule trusts it.
	app *pki.Leaf
	// dnsRouter has only the DNS SAN router.llm.svc, which sendersConfig's
	// dns_name rule trusts.
	dnsRouter *pki.Leaf
}

// newSenderPKI makes a CA named name and the certificates of senderPKI,
// the listener's written to a temporary directory of the test.
func newSenderPKI(t *testing.T, name string) senderPKI {
	t.Helper()
	ca, err := pki.NewCA(name)
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
	lf, err := ca.WriteListener(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return senderPKI{
		ca:        ca,
		files:     &envoyconfig.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA},
		router:    must(ca.Client([]string{routerID}, nil)),
		app:       must(ca.Client([]string{appID}, []string{"app.llm.svc"})),
		dnsRouter: must(ca.Client(nil, []string{"router.llm.svc"})),
	}
}

// sidecarArgs are the sidecar's flags for serving mTLS with p's files.
func (p senderPKI) sidecarArgs() []string {
	return []string{"-tls-cert", p.files.Cert, "-tls-key", p.files.Key, "-client-ca", p.files.ClientCA, "-pool-size", "2"}
}

// senderCase is one request of a trusted-senders parity test.
type senderCase struct {
	name string
	// loopback sends it to the host's loopback listener (senderHost.loop)
	// instead of its sendersConfig one.
	loopback bool
	// cert is the client certificate presented; none when nil.
	cert *pki.Leaf
	// headers are sent besides the body's.
	headers map[string]string
	// trusted says whether the host must admit the envelope.
	trusted bool
}

// senderCases are the cases every host runs against sendersConfig: the
// router admitted, every other sender stripped, and spoofed X-Forwarded-For
// (inside the trusted source_cidr) or x-forwarded-client-cert (naming the
// router) changing nothing.
func senderCases(p senderPKI) []senderCase {
	spoofXFF := map[string]string{"X-Forwarded-For": spoofedXFF}
	spoofXFCC := map[string]string{"X-Forwarded-Client-Cert": spoofedXFCC}
	return []senderCase{
		{name: "router", cert: p.router, trusted: true},
		{name: "other-certificate", cert: p.app},
		{name: "no-certificate"},
		{name: "no-certificate-spoofed-xff", headers: spoofXFF},
		{name: "no-certificate-spoofed-xfcc", headers: spoofXFCC},
		{name: "other-certificate-spoofed-xfcc", cert: p.app, headers: spoofXFCC},
		{name: "router-spoofed-xff-xfcc", cert: p.router, headers: map[string]string{"X-Forwarded-For": spoofedXFF,
			"X-Forwarded-Client-Cert": "By=spiffe://x/y;URI=" + appID}, trusted: true},
	}
}

// senderHost is one host of a trusted-senders parity test: its listener
// with sendersConfig and, for loopback cases, one whose trusted_senders
// admit 127.0.0.0/8, each with the scrape of its counters.
type senderHost struct {
	name               string
	addr, loop         string
	scrape, scrapeLoop func() (string, error)
}

// runSenderParity runs every case on every host, a subtest each
// (checkSenderRequest, the worker's key tag/host/case), then fails the
// test for each case where a host forwarded other bytes or moved other
// counters than the first host (sameSenderResult).
func runSenderParity(t *testing.T, w *Worker, p senderPKI, tag string, hosts []senderHost, cases []senderCase) {
	t.Helper()
	got := map[string]senderResult{} // host/case
	for _, h := range hosts {
		for _, c := range cases {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				addr, scrape := h.addr, h.scrape
				if c.loopback {
					if h.loop == "" {
						t.Fatalf("%s has no loopback listener", h.name)
					}
					addr, scrape = h.loop, h.scrapeLoop
				}
				got[h.name+"/"+c.name] = checkSenderRequest(t, w, p.ca, c.cert, addr, tag+"/"+h.name+"/"+c.name, c.headers, c.trusted, scrape)
			})
		}
	}
	first := hosts[0].name
	for _, c := range cases {
		for _, h := range hosts[1:] {
			sameSenderResult(t, c.name, first, got[first+"/"+c.name], h.name, got[h.name+"/"+c.name])
		}
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
