package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/tests/vectors"
)

// httpRunner sends conformance cases to one host (Envoy or the sidecar),
// each over a new HTTP/1.1 connection written byte for byte, with
// Content-Length or chunked framing (the variants), in front of the
// recording worker. Each request carries its own CaseHeader so that the
// worker's record of it can be found.
type httpRunner struct {
	name    string
	addr    map[string]string // plugin configuration -> host:port
	scrape  func(c *vectors.Case) (string, error)
	w       *Worker
	framing string // "length" or "chunked"
	n       int
}

func (*httpRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesForwardStatus | vectors.ObservesGRPCStatus | vectors.ObservesHeaders
}

func (r *httpRunner) Send(c *vectors.Case) (vectors.Result, error) {
	r.n++
	key := fmt.Sprintf("%s/%s/%d", r.name, r.framing, r.n)
	hdr := map[string]string{CaseHeader: key}
	for k, v := range c.Request.Headers {
		hdr[k] = v
	}
	resp, err := send(r.addr[c.FilterConfig()], c.Request.Method, c.Request.Path, hdr, c.Request.Body, r.framing == "chunked")
	if err != nil {
		return vectors.Result{}, err
	}
	res := vectors.Result{Status: resp.Status, Body: resp.Body, ContentType: resp.ContentType, GRPCStatus: resp.GRPCStatus}
	switch recs := r.w.Records(key); len(recs) {
	case 0:
	case 1:
		res.Forwarded, res.Body = true, recs[0].Body
		res.Headers = map[string][]string{}
		for k, v := range recs[0].Header {
			res.Headers[strings.ToLower(k)] = v
		}
	default:
		return res, fmt.Errorf("the worker received %d requests", len(recs))
	}
	return res, nil
}

func (r *httpRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	page, err := r.scrape(c)
	if err != nil {
		return vectors.Counters{}, err
	}
	return vectors.PrometheusCounters(c, page)
}

// expectedCounters sums the vectors' counter deltas as series, rejections
// by status.
func expectedCounters(cases []vectors.Case) series {
	s := series{}
	for _, c := range cases {
		k := c.Expect.Counters
		s[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] += float64(k.Untrusted)
		s[`trtllm_kv_hints_ignored_total{reason="unknown_version"}`] += float64(k.UnknownVersion)
		s[`trtllm_kv_hints_ignored_total{reason="oversized"}`] += float64(k.Oversized)
		s[`trtllm_kv_hints_ignored_total{reason="malformed"}`] += float64(k.Malformed)
		s[`kvgate_kv_hints_admitted_total{}`] += float64(k.Admitted)
		if k.RejectedBodies > 0 {
			status := c.Expect.Status
			for _, st := range filterspec.RejectStatuses { // a gRPC answer stands for an HTTP status
				if c.Expect.GRPCStatus != 0 && httperr.GRPCStatusOf(st) == c.Expect.GRPCStatus {
					status = st
				}
			}
			s[fmt.Sprintf(`kvgate_bodies_rejected_total{status="%d"}`, status)] += float64(k.RejectedBodies)
		}
		s[`kvgate_requests_uninspected_total{protocol="grpc"}`] += float64(k.GRPCUninspected)
		s[`kvgate_requests_refused_total{reason="grpc"}`] += float64(k.GRPCRefused)
		s[`kvgate_requests_refused_total{reason="router_only"}`] += float64(k.RouterOnlyRefused)
		for fam, counts := range map[string]string{filterspec.MetricRouterOnlyRemoved: k.RouterOnlyRemoved, filterspec.MetricRouterOnlyDetected: k.RouterOnlyDetected} {
			for _, e := range strings.Split(counts, ",") {
				if f, n, ok := strings.Cut(e, "="); ok {
					v, _ := strconv.Atoi(n)
					s[fam+`{field="`+f+`"}`] += float64(v)
				}
			}
		}
		s[`kvgate_kv_hints_detected_total{reason="untrusted"}`] += float64(k.DetectedUntrusted)
		s[`kvgate_kv_hints_detected_total{reason="unknown_version"}`] += float64(k.DetectedUnknownVersion)
		s[`kvgate_kv_hints_detected_total{reason="oversized"}`] += float64(k.DetectedOversized)
		s[`kvgate_kv_hints_detected_total{reason="malformed"}`] += float64(k.DetectedMalformed)
	}
	return s
}

// TestParity sends every conformance vector (each case under its own plugin
// configuration, in both modes), with Content-Length and chunked framing,
// through three hosts in front of the recording worker, as runners of the
// conformance kit: Envoy with the wasm filter (envoy.yaml), Envoy with the
// native module (envoy-native.yaml) and the sidecar. Each host must agree
// with the vectors case by case (status, bytes, error replies, counter
// deltas) and with the Python oracle; then all must have forwarded the
// same bytes with the same statuses and show the same counter series and
// values.
func TestParity(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end parity run")
	}
	cases, err := vectors.Load(filepath.Join(repoRoot, "tests", "vectors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 500 {
		t.Fatalf("only %d vectors", len(cases))
	}
	// Cases with a sender need per-request connection properties (a client
	// certificate, a source address) that these plain listeners cannot
	// give: TestTrustedSendersEnvoy runs trusted senders through real mTLS.
	kept, skipped := cases[:0], 0
	for _, c := range cases {
		if c.Sender != nil {
			skipped++
			continue
		}
		kept = append(kept, c)
	}
	cases = kept
	t.Logf("%d vectors with a sender skipped: their properties need an mTLS connection per sender", skipped)
	python := envoytest.Python(t)
	bin := sidecarBinary(t)
	w := startWorker(t)

	// One Envoy listener and one sidecar per distinct configuration.
	var configs []string
	seen := map[string]bool{}
	for i := range cases {
		// Every vector runs in both modes (vectors.BothModes).
		d := vectors.DetectCase(cases[i])
		for _, k := range []string{cases[i].FilterConfig(), d.FilterConfig()} {
			if !seen[k] {
				seen[k] = true
				configs = append(configs, k)
			}
		}
	}
	sort.Strings(configs)
	// Envoy's counters are one set for all its listeners (the guest's
	// metrics are shared by every plugin of the VM).
	envoyRunner := func(name string, start func(t testing.TB, upstream string, ls []envoyconfig.Listener) *envoytest.Process) *httpRunner {
		r := &httpRunner{name: name, addr: map[string]string{}, w: w}
		var ls []envoyconfig.Listener
		for i, k := range configs {
			p := envoytest.FreePort(t)
			ls = append(ls, envoyconfig.Listener{Name: fmt.Sprintf("kvgate_%d", i), Port: p, PluginConfig: k})
			r.addr[k] = fmt.Sprintf("127.0.0.1:%d", p)
		}
		e := start(t, w.Addr, ls)
		r.scrape = func(*vectors.Case) (string, error) { return e.Prometheus() }
		return r
	}
	ev := envoyRunner("envoy", startEnvoy)
	sc := &httpRunner{name: "sidecar", addr: map[string]string{}, w: w}
	cache := t.TempDir()
	sidecars := map[string]*sidecar{}
	for _, k := range configs {
		s := startSidecar(t, bin, w.Addr, k, cache, "-pool-size", "2")
		sidecars[k] = s
		sc.addr[k] = s.API
	}
	sc.scrape = func(c *vectors.Case) (string, error) { return sidecars[c.FilterConfig()].metrics() }
	hosts := []*httpRunner{ev, sc}
	if nativeEnvoy(t) {
		hosts = append(hosts, envoyRunner("native", startNativeEnvoy))
	} else {
		t.Log("this Envoy predates the native module's ABI: the native module is not a host here")
	}
	// A host's series: an Envoy's one set, the sidecars' summed.
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
			one := parseSeries(page)
			if want := configSeries(t, k); len(one) != want {
				return nil, fmt.Errorf("the sidecar of %s shows %d series, its configuration makes %d:\n%s", k, len(one), want, one)
			}
			sum.add(one)
		}
		return sum, nil
	}

	for _, r := range hosts {
		for _, k := range configs {
			preflight(t, w, r.name+" "+k, r.addr[k])
		}
	}

	// Every series exists from start-up, at 0, with the same names and
	// labels in every host.
	before := map[string]series{}
	for _, r := range hosts {
		s, err := seriesOf(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := configSeries(t, configs...); len(s) != want {
			t.Errorf("%s: %d series at start-up, want %d:\n%s", r.name, len(s), want, s)
		}
		for k, v := range s {
			if v != 0 {
				t.Errorf("%s: %s = %g at start-up", r.name, k, v)
			}
		}
		before[r.name] = s
	}
	for _, r := range hosts[1:] {
		if a, b := strings.Join(before["envoy"].keys(), "\n"), strings.Join(before[r.name].keys(), "\n"); a != b {
			t.Fatalf("series differ at start-up:\nenvoy:\n%s\n%s:\n%s", a, r.name, b)
		}
	}

	outDir := t.TempDir()
	if d := os.Getenv("KVGATE_E2E_OUT"); d != "" {
		outDir = d
	}
	framings := []string{"length", "chunked"}
	results := map[string]map[string]vectors.Result{} // host -> case/framing -> result
	for _, r := range hosts {
		got := map[string]vectors.Result{}
		results[r.name] = got
		var lines bytes.Buffer
		t.Run(r.name, func(t *testing.T) {
			vectors.Run(t, r, vectors.BothModes(), vectors.Variants(func(v string) { r.framing = v }, framings...),
				vectors.Skip("a sender's properties need an mTLS connection per sender (TestTrustedSendersEnvoy)",
					func(c *vectors.Case) bool { return c.Sender != nil }),
				vectors.Oracle(&lines),
				vectors.Each(func(c *vectors.Case, v string, res vectors.Result) { got[c.Name+"/"+v] = res }))
		})
		if err := os.WriteFile(filepath.Join(outDir, r.name+".jsonl"), lines.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The same traffic: the same statuses and forwarded bytes in every
	// host, every vector in both modes.
	for _, c := range cases[:len(cases):len(cases)] {
		cases = append(cases, vectors.DetectCase(c))
	}
	if len(results["envoy"]) != len(cases)*len(framings) {
		t.Errorf("envoy ran %d requests, want %d", len(results["envoy"]), len(cases)*len(framings))
	}
	for _, r := range hosts[1:] {
		diffs := 0
		for _, k := range slices.Sorted(maps.Keys(results["envoy"])) {
			er, or := results["envoy"][k], results[r.name][k]
			if er.Status != or.Status || er.Forwarded != or.Forwarded || !bytes.Equal(er.Body, or.Body) {
				if diffs++; diffs <= 20 {
					t.Errorf("%s: envoy %d forwarded=%v %.100q, %s %d forwarded=%v %.100q", k,
						er.Status, er.Forwarded, er.Body, r.name, or.Status, or.Forwarded, or.Body)
				}
			}
		}
		if diffs > 0 {
			t.Errorf("envoy and %s differ on %d requests", r.name, diffs)
		}
	}
	// The same series moved by what the vectors say, rejections by status,
	// and every host shows the same page.
	want := expectedCounters(cases)
	for k := range want {
		want[k] *= float64(len(framings))
	}
	after := map[string]series{}
	for _, r := range hosts {
		s, err := seriesOf(r)
		if err != nil {
			t.Fatal(err)
		}
		after[r.name] = s
		got := s.delta(before[r.name])
		for _, k := range got.keys() {
			if got[k] != want[k] {
				t.Errorf("%s: %s rose by %g, the vectors say %g", r.name, k, got[k], want[k])
			}
		}
	}
	for _, r := range hosts[1:] {
		if a, b := after["envoy"].String(), after[r.name].String(); a != b {
			t.Errorf("counters differ after the run:\nenvoy:\n%s\n%s:\n%s", a, r.name, b)
		}
	}

	// The Python oracle reads what each host forwarded as the worker would.
	cmd := exec.Command(python, filepath.Join(repoRoot, "tests", "oracle", "oracle.py"), "--forwarded", outDir, "--require-all")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("oracle on %s: %v\n%s", outDir, err, tail(string(out), 60))
	} else {
		t.Logf("oracle: %s", strings.TrimSpace(tail(string(out), 1)))
	}
}

// nativeEnvoy reports whether the Envoy under test can load the native
// module: 1.39 and later (envoy/native.SupportedEnvoy lists the versions
// it is tested on; make test-envoy-versions runs older ones too).
func nativeEnvoy(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(envoytest.Binary(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("envoy --version: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`/(\d+)\.(\d+)\.\d+/`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("envoy --version: no version in %q", out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return major > 1 || major == 1 && minor >= 39
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// configSeries is the number of distinct series the configurations make
// the filter define: the fixed ones, and those of their router-only
// fields (one Envoy shows them for all its listeners).
func configSeries(t testing.TB, configs ...string) int {
	names := map[string]bool{}
	for _, k := range configs {
		cfg, err := filterspec.ParseConfig([]byte(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		for _, n := range cfg.MetricNames() {
			names[n] = true
		}
	}
	return len(names)
}
