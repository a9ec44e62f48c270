package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/tests/pki"
	"github.com/kvgate/kvgate/tests/vectors"
)

// TestNativeParity runs every conformance vector (each under its own plugin
// configuration, with Content-Length and chunked framing) through three
// hosts in front of the recording worker, as runners of the conformance
// kit: Envoy with the native module (envoy-native.yaml), Envoy with the
// wasm filter (envoy.yaml) and the sidecar. Each must agree with the
// vectors case by case; then the native module must have forwarded
// byte-identical bodies with the same statuses as both others, and moved
// the same counters by the same amounts.
func TestNativeParity(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end parity run")
	}
	cases, err := vectors.Load(filepath.Join(repoRoot, "tests", "vectors"))
	if err != nil {
		t.Fatal(err)
	}
	kept := cases[:0]
	for _, c := range cases {
		if c.Sender == nil { // TestNativeTrustedSendersParity runs senders through mTLS
			kept = append(kept, c)
		}
	}
	cases = kept
	w := startWorker(t)
	var configs []string
	seen := map[string]bool{}
	for i := range cases {
		if k := cases[i].FilterConfig(); !seen[k] {
			seen[k] = true
			configs = append(configs, k)
		}
	}
	sort.Strings(configs)

	envoyRunner := func(name string, start func(t testing.TB, upstream string, ls []envoy.Listener) *envoytest.Process) *httpRunner {
		r := &httpRunner{name: name, addr: map[string]string{}, w: w}
		var ls []envoy.Listener
		for i, k := range configs {
			p := envoytest.FreePort(t)
			ls = append(ls, envoy.Listener{Name: fmt.Sprintf("kvgate_%d", i), Port: p, PluginConfig: k})
			r.addr[k] = fmt.Sprintf("127.0.0.1:%d", p)
		}
		e := start(t, w.Addr, ls)
		r.scrape = func(*vectors.Case) (string, error) { return e.Prometheus() }
		return r
	}
	native := envoyRunner("native", startNativeEnvoy)
	wasm := envoyRunner("wasm", startEnvoy)
	sc := &httpRunner{name: "sidecar", addr: map[string]string{}, w: w}
	sidecars := map[string]*sidecar{}
	bin, cache := sidecarBinary(t), t.TempDir()
	for _, k := range configs {
		s := startSidecar(t, bin, w.Addr, k, cache, "-pool-size", "2")
		sidecars[k] = s
		sc.addr[k] = s.API
	}
	sc.scrape = func(c *vectors.Case) (string, error) { return sidecars[c.FilterConfig()].metrics() }
	hosts := []*httpRunner{native, wasm, sc}
	// Each host's series: Envoy's one set for all listeners, the
	// sidecars' summed.
	seriesOf := func(r *httpRunner) (series, error) {
		if r != sc {
			page, err := r.scrape(nil)
			return parseSeries(page), err
		}
		sum := series{}
		for _, k := range configs {
			page, err := sidecars[k].metrics()
			if err != nil {
				return nil, err
			}
			sum.add(parseSeries(page))
		}
		return sum, nil
	}
	for _, r := range hosts {
		for _, k := range configs {
			preflight(t, w, r.name+" "+k, r.addr[k])
		}
	}
	before := map[string]series{}
	for _, r := range hosts {
		s, err := seriesOf(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != len(filterspec.MetricNames()) {
			t.Errorf("%s: %d series at start-up, want %d:\n%s", r.name, len(s), len(filterspec.MetricNames()), s)
		}
		before[r.name] = s
	}

	framings := []string{"length", "chunked"}
	results := map[string]map[string]vectors.Result{}
	for _, r := range hosts {
		got := map[string]vectors.Result{}
		results[r.name] = got
		t.Run(r.name, func(t *testing.T) {
			vectors.Run(t, r, vectors.Variants(func(v string) { r.framing = v }, framings...),
				vectors.Skip("a sender's properties need an mTLS connection per sender (TestNativeTrustedSendersParity)",
					func(c *vectors.Case) bool { return c.Sender != nil }),
				vectors.Each(func(c *vectors.Case, v string, res vectors.Result) { got[c.Name+"/"+v] = res }))
		})
	}
	if len(results["native"]) != len(cases)*len(framings) {
		t.Errorf("native ran %d requests, want %d", len(results["native"]), len(cases)*len(framings))
	}
	for _, other := range []string{"wasm", "sidecar"} {
		diffs := 0
		for _, k := range slices.Sorted(maps.Keys(results["native"])) {
			nr, or := results["native"][k], results[other][k]
			if nr.Status != or.Status || nr.Forwarded != or.Forwarded || !bytes.Equal(nr.Body, or.Body) {
				if diffs++; diffs <= 20 {
					t.Errorf("%s: native %d forwarded=%v %.100q, %s %d forwarded=%v %.100q", k,
						nr.Status, nr.Forwarded, nr.Body, other, or.Status, or.Forwarded, or.Body)
				}
			}
		}
		if diffs > 0 {
			t.Errorf("native and %s differ on %d requests", other, diffs)
		}
	}
	want := expectedCounters(cases)
	for k := range want {
		want[k] *= float64(len(framings))
	}
	deltas := map[string]string{}
	for _, r := range hosts {
		s, err := seriesOf(r)
		if err != nil {
			t.Fatal(err)
		}
		d := s.delta(before[r.name])
		for _, k := range d.keys() {
			if d[k] != want[k] {
				t.Errorf("%s: %s rose by %g, the vectors say %g", r.name, k, d[k], want[k])
			}
		}
		deltas[r.name] = d.String()
	}
	for _, other := range []string{"wasm", "sidecar"} {
		if deltas["native"] != deltas[other] {
			t.Errorf("counter deltas differ:\nnative:\n%s\n%s:\n%s", deltas["native"], other, deltas[other])
		}
	}
}

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
	files := &envoy.TLSFiles{Cert: lf.Cert, Key: lf.Key, ClientCA: lf.ClientCA}
	w := startWorker(t)
	const loopbackConfig = `{"trusted_senders":[{"source_cidr":"127.0.0.0/8"}]}`

	startMTLS := func(native bool, module string) (string, string, *envoytest.Process) {
		admin, p1, p2 := envoytest.FreePort(t), envoytest.FreePort(t), envoytest.FreePort(t)
		cfg, err := envoy.Render(envoy.Options{Template: envoy.MTLSBootstrap, TLS: files, AdminPort: admin, Upstream: w.Addr,
			ModulePath: module, Native: native, Listeners: []envoy.Listener{
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
