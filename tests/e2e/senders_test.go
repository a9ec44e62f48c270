package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/tests/pki"
)

const (
	routerID = "spiffe://cluster.local/ns/llm/sa/router"
	appID    = "spiffe://cluster.local/ns/llm/sa/app"
	// refEnvelope is a canonical envelope: admitted, these are the bytes
	// the worker receives in place of the pretty-printed one sent.
	refEnvelope = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`
	// sendersConfig trusts the router by its principal or its DNS name,
	// and a source CIDR that does not hold 127.0.0.1, so that a spoofed
	// X-Forwarded-For inside it shows whether Envoy believed the header.
	sendersConfig = `{"trusted_senders":[{"principal":"` + routerID + `"},{"dns_name":"router.llm.svc"},{"source_cidr":"10.8.0.0/16"}]}`
	spoofedXFF    = "10.8.1.1"
	spoofedXFCC   = `By=spiffe://cluster.local/ns/llm/sa/worker;Hash=00;URI=` + routerID
)

// buildProbe is the test-only property probe (testdata/propprobe), built
// once per test binary.
func buildProbe(t *testing.T) string { return built(t, "./tests/e2e/testdata/propprobe", true) }

// withProbe puts the probe filter before kvgate's on every listener of a
// rendered bootstrap.
func withProbe(t *testing.T, d envoyconfig.Doc, probe string) {
	t.Helper()
	ls, _ := envoyconfig.Dig(d, "static_resources", "listeners")
	for _, l := range ls.([]any) {
		tc, err := envoyconfig.Dig(l, "filter_chains", 0, "filters", 0, "typed_config")
		if err != nil {
			t.Fatal(err)
		}
		name := l.(envoyconfig.Doc)["name"].(string) + "_probe"
		p := envoyconfig.Doc{"name": "kvgate.test.propprobe", "typed_config": envoyconfig.Doc{
			"@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
			"config": envoyconfig.Doc{"name": name, "root_id": name, "vm_config": envoyconfig.Doc{
				"vm_id": name, "runtime": "envoy.wasm.runtime.v8", "code": envoyconfig.Doc{"local": envoyconfig.Doc{"filename": probe}}}}}}
		tc.(envoyconfig.Doc)["http_filters"] = append([]any{p}, tc.(envoyconfig.Doc)["http_filters"].([]any)...)
	}
}

// tlsClient returns a client that trusts ca and presents cert (none when
// nil) whatever CAs the server asks for, on a new connection per request.
func tlsClient(ca *pki.CA, cert *pki.Leaf) *http.Client {
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Not Certificates: crypto/tls would quietly send nothing when the
		// certificate's issuer is not among the server's acceptable CAs.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// postMTLS posts body to url over TLS, presenting cert (none when nil) and
// the extra headers, tagged key for the recording worker, and returns the
// one request the worker received; any other answer fails the test.
func postMTLS(t *testing.T, w *Worker, ca *pki.CA, cert *pki.Leaf, url, key string, body []byte, headers map[string]string) Record {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(CaseHeader, key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := tlsClient(ca, cert).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, reply)
	}
	recs := w.Records(key)
	if len(recs) != 1 {
		t.Fatalf("%d requests at the worker", len(recs))
	}
	return recs[0]
}

// probeLine returns the probe's log line for a case, as key=value pairs.
func probeLine(t *testing.T, e *envoytest.Process, key string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`kvgate-probe case="` + regexp.QuoteMeta(key) + `" (.*)`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(e.Log()); m != nil {
			out := map[string]string{}
			for _, kv := range regexp.MustCompile(`(\S+?)=("(?:[^"\\]|\\.)*"|\S+)`).FindAllStringSubmatch(m[1], -1) {
				out[kv[1]] = kv[2]
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe line for %s in the Envoy log", key)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Trusted senders through real Envoy on the committed mTLS bootstrap, with
// certificates made here: the router's envelope is admitted byte for byte
// in canonical form; a client with another certificate, a client without
// one, a certificate whose router SAN is not the first, and spoofed
// X-Forwarded-For and x-forwarded-client-cert headers are all handled as
// untrusted, and the worker never sees the client's XFCC. A test-only probe
// filter logs what Envoy supplies for each property (go test -v shows it);
// a control listener with Envoy's default address handling shows the
// X-Forwarded-For spoof working there, so the test can tell the two apart.
func TestTrustedSendersEnvoy(t *testing.T) {
	bin := envoytest.Binary(t)
	dir := t.TempDir()
	ca, err := pki.NewCA("kvgate test CA")
	if err != nil {
		t.Fatal(err)
	}
	rogueCA, _ := pki.NewCA("rogue CA")
	must := func(l *pki.Leaf, err error) *pki.Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	router := must(ca.Client([]string{routerID}, []string{"router.llm.svc"}))
	// The router's DNS name as a second DNS SAN: hosts read only the first.
	app := must(ca.Client([]string{appID}, []string{"app.llm.svc", "router.llm.svc"}))
	routerSecond := must(ca.Client([]string{appID, routerID}, nil))
	rogueRouter := must(rogueCA.Client([]string{routerID}, []string{"router.llm.svc"}))
	lf, err := ca.WriteListener(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := &envoyconfig.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA}
	probe := buildProbe(t)
	w := startWorker(t)

	admin, port, control := envoytest.FreePort(t), envoytest.FreePort(t), envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{Template: envoy.MTLSBootstrap, TLS: files, AdminPort: admin, Upstream: w.Addr,
		ModulePath: modulePath, Listeners: []envoyconfig.Listener{
			{Name: "senders", Port: port, PluginConfig: sendersConfig},
			{Name: "xff_control", Port: control, PluginConfig: sendersConfig},
		}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := envoyconfig.Parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withProbe(t, d, probe)
	// The control listener: Envoy's default, the address from X-Forwarded-For.
	hcm, _ := envoyconfig.Dig(d, "static_resources", "listeners", 1, "filter_chains", 0, "filters", 0, "typed_config")
	delete(hcm.(envoyconfig.Doc), "use_remote_address")
	delete(hcm.(envoyconfig.Doc), "xff_num_trusted_hops")
	cfg, _ = json.Marshal(d)
	e := envoytest.Start(t, bin, cfg, admin, 1)

	head, tail := `{"model":"m","kv_hints":`, `,"messages":[{"role":"user","content":"hi"}]}`
	body := []byte(head + strings.ReplaceAll(refEnvelope, ",", ",\n  ") + tail)
	admitted := head + refEnvelope + tail
	stripped := `{"model":"m"` + tail

	for _, c := range []struct {
		name    string
		port    int
		cert    *pki.Leaf
		headers map[string]string
		trusted bool
		// what the probe must log
		mtls, uri, dns string
		source         *regexp.Regexp
	}{
		{"router", port, router, nil, true, "hex:01", `"` + routerID + `"`, `"router.llm.svc"`, regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"other-certificate", port, app, nil, false, "hex:01", `"` + appID + `"`, `"app.llm.svc"`, regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"no-certificate", port, nil, nil, false, "hex:00", "absent:1", "absent:1", regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"router-second-uri-san", port, routerSecond, nil, false, "hex:01", `"` + appID + `"`, "absent:1", regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"spoofed-xff", port, nil, map[string]string{"X-Forwarded-For": spoofedXFF}, false, "hex:00", "absent:1", "absent:1", regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"spoofed-xfcc", port, app, map[string]string{"X-Forwarded-Client-Cert": spoofedXFCC}, false, "hex:01", `"` + appID + `"`, `"app.llm.svc"`, regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		{"spoofed-xfcc-no-certificate", port, nil, map[string]string{"X-Forwarded-Client-Cert": spoofedXFCC, "X-Forwarded-For": spoofedXFF}, false, "hex:00", "absent:1", "absent:1", regexp.MustCompile(`^"127\.0\.0\.1:\d+"$`)},
		// With Envoy's default the spoof works: the reason for the setting.
		{"control-spoofed-xff", control, nil, map[string]string{"X-Forwarded-For": spoofedXFF}, true, "hex:00", "absent:1", "absent:1", regexp.MustCompile(`^"10\.8\.1\.1:0"$`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := e.Prometheus()
			if err != nil {
				t.Fatal(err)
			}
			key := "senders/" + c.name
			rec := postMTLS(t, w, ca, c.cert, fmt.Sprintf("https://127.0.0.1:%d/v1/chat/completions", c.port), key, body, c.headers)
			want, counter := stripped, `trtllm_kv_hints_ignored_total{reason="untrusted"}`
			if c.trusted {
				want, counter = admitted, `kvgate_kv_hints_admitted_total{}`
			}
			if got := string(rec.Body); got != want {
				t.Errorf("worker received\n%s\nwant\n%s", got, want)
			}
			if v := rec.Header.Values("X-Forwarded-Client-Cert"); len(v) != 0 {
				t.Errorf("the worker received x-forwarded-client-cert %q", v)
			}
			after, err := e.Prometheus()
			if err != nil {
				t.Fatal(err)
			}
			d := parseSeries(after).delta(parseSeries(before))
			for k, v := range d {
				if want := map[bool]float64{true: 1, false: 0}[k == counter]; v != want {
					t.Errorf("%s changed by %g, want %g", k, v, want)
				}
			}
			p := probeLine(t, e, key)
			t.Logf("Envoy supplied: connection.mtls=%s uri_san=%s dns_san=%s source.address=%s; the filters saw x-forwarded-for=%s x-forwarded-client-cert=%s; the worker got x-forwarded-for=%q",
				p["connection.mtls"], p["connection.uri_san_peer_certificate"], p["connection.dns_san_peer_certificate"], p["source.address"],
				p["x-forwarded-for"], p["x-forwarded-client-cert"], rec.Header.Values("X-Forwarded-For"))
			if p["connection.mtls"] != c.mtls || p["connection.uri_san_peer_certificate"] != c.uri ||
				p["connection.dns_san_peer_certificate"] != c.dns || !c.source.MatchString(p["source.address"]) {
				t.Errorf("Envoy supplied %v, want mtls %s, uri %s, dns %s, source %s", p, c.mtls, c.uri, c.dns, c.source)
			}
		})
	}

	// A certificate from another CA never gets as far as a request: the
	// handshake fails, so connection.mtls is true only for a verified one.
	t.Run("certificate-from-another-ca", func(t *testing.T) {
		before := w.Count()
		req, _ := http.NewRequest("POST", fmt.Sprintf("https://127.0.0.1:%d/v1/chat/completions", port), bytes.NewReader(body))
		req.Header.Set(CaseHeader, "senders/rogue")
		resp, err := tlsClient(ca, rogueRouter).Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("a certificate from another CA was accepted: status %d", resp.StatusCode)
		}
		t.Logf("refused: %v", err)
		if w.Count() != before {
			t.Error("the request reached the worker")
		}
	})
}
