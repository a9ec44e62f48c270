package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
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
	return vectors.ObservesReply | vectors.ObservesForwardStatus | vectors.ObservesGRPCStatus
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
	return vectors.PrometheusCounters(page)
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
				if c.Expect.GRPCStatus != 0 && filter.GRPCStatusOf(st) == c.Expect.GRPCStatus {
					status = st
				}
			}
			s[fmt.Sprintf(`kvgate_bodies_rejected_total{status="%d"}`, status)] += float64(k.RejectedBodies)
		}
		s[`kvgate_requests_uninspected_total{protocol="grpc"}`] += float64(k.GRPCUninspected)
		s[`kvgate_requests_refused_total{protocol="grpc"}`] += float64(k.GRPCRefused)
		s[`kvgate_kv_hints_detected_total{reason="untrusted"}`] += float64(k.DetectedUntrusted)
		s[`kvgate_kv_hints_detected_total{reason="unknown_version"}`] += float64(k.DetectedUnknownVersion)
		s[`kvgate_kv_hints_detected_total{reason="oversized"}`] += float64(k.DetectedOversized)
		s[`kvgate_kv_hints_detected_total{reason="malformed"}`] += float64(k.DetectedMalformed)
	}
	return s
}

// TestParity sends every conformance vector (each case under its own plugin
// configuration), with Content-Length and chunked framing, through Envoy
// and through the sidecar, each in front of the recording worker, as two
// runners of the conformance kit. Each host must agree with the vectors
// case by case (status, bytes, error replies, counter deltas) and with the
// Python oracle; then both hosts must have forwarded the same bytes with
// the same statuses and show the same counter series and values.
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
	ev := &httpRunner{name: "envoy", addr: map[string]string{}, w: w}
	var listeners []envoy.Listener
	for i, k := range configs {
		p := envoytest.FreePort(t)
		listeners = append(listeners, envoy.Listener{Name: fmt.Sprintf("kvgate_%d", i), Port: p, PluginConfig: k})
		ev.addr[k] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	e := startEnvoy(t, w.Addr, listeners)
	// Envoy's counters are one set for all its listeners (the guest's
	// metrics are shared by every plugin of the VM).
	ev.scrape = func(*vectors.Case) (string, error) { return e.Prometheus() }
	sc := &httpRunner{name: "sidecar", addr: map[string]string{}, w: w}
	cache := t.TempDir()
	sidecars := map[string]*sidecar{}
	for _, k := range configs {
		s := startSidecar(t, bin, w.Addr, k, cache, "-pool-size", "2")
		sidecars[k] = s
		sc.addr[k] = s.API
	}
	sc.scrape = func(c *vectors.Case) (string, error) { return sidecars[c.FilterConfig()].metrics() }
	// The sidecars' series, summed, to compare with Envoy's one set.
	sidecarSeries := func() (series, error) {
		sum := series{}
		for _, k := range configs {
			page, err := sidecars[k].metrics()
			if err != nil {
				return nil, err
			}
			one := parseSeries(page)
			if len(sum) > 0 && strings.Join(one.keys(), " ") != strings.Join(sum.keys(), " ") {
				return nil, fmt.Errorf("sidecars disagree on their series:\n%s\nvs\n%s", one, sum)
			}
			sum.add(one)
		}
		return sum, nil
	}
	envoySeries := func() (series, error) {
		page, err := e.Prometheus()
		return parseSeries(page), err
	}

	for _, k := range configs {
		preflight(t, w, "envoy "+k, ev.addr[k])
		preflight(t, w, "sidecar "+k, sc.addr[k])
	}

	// Every series exists from start-up, at 0, with the same names and
	// labels in both hosts.
	hosts := []struct {
		r      *httpRunner
		series func() (series, error)
	}{{ev, envoySeries}, {sc, sidecarSeries}}
	before := map[string]series{}
	for _, h := range hosts {
		s, err := h.series()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != len(filterspec.MetricNames()) {
			t.Errorf("%s: %d series at start-up, want %d:\n%s", h.r.name, len(s), len(filterspec.MetricNames()), s)
		}
		for k, v := range s {
			if v != 0 {
				t.Errorf("%s: %s = %g at start-up", h.r.name, k, v)
			}
		}
		before[h.r.name] = s
	}
	if a, b := strings.Join(before["envoy"].keys(), "\n"), strings.Join(before["sidecar"].keys(), "\n"); a != b {
		t.Fatalf("series differ at start-up:\nenvoy:\n%s\nsidecar:\n%s", a, b)
	}

	outDir := t.TempDir()
	if d := os.Getenv("KVGATE_E2E_OUT"); d != "" {
		outDir = d
	}
	framings := []string{"length", "chunked"}
	results := map[string]map[string]vectors.Result{} // host -> case/framing -> result
	for _, h := range hosts {
		r := h.r
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

	// The same traffic: the same statuses and forwarded bytes in both hosts,
	// every vector in both modes.
	for _, c := range cases[:len(cases):len(cases)] {
		cases = append(cases, vectors.DetectCase(c))
	}
	if len(results["envoy"]) != len(cases)*len(framings) {
		t.Errorf("envoy ran %d requests, want %d", len(results["envoy"]), len(cases)*len(framings))
	}
	for _, k := range slices.Sorted(maps.Keys(results["envoy"])) {
		er, sr := results["envoy"][k], results["sidecar"][k]
		if er.Status != sr.Status || er.Forwarded != sr.Forwarded || !bytes.Equal(er.Body, sr.Body) {
			t.Errorf("%s: envoy %d forwarded=%v %.100q, sidecar %d forwarded=%v %.100q", k,
				er.Status, er.Forwarded, er.Body, sr.Status, sr.Forwarded, sr.Body)
		}
	}
	// The same series moved by what the vectors say, rejections by status,
	// and both hosts show the same page.
	want := expectedCounters(cases)
	for k := range want {
		want[k] *= float64(len(framings))
	}
	after := map[string]series{}
	for _, h := range hosts {
		s, err := h.series()
		if err != nil {
			t.Fatal(err)
		}
		after[h.r.name] = s
		got := s.delta(before[h.r.name])
		for _, k := range got.keys() {
			if got[k] != want[k] {
				t.Errorf("%s: %s rose by %g, the vectors say %g", h.r.name, k, got[k], want[k])
			}
		}
	}
	if a, b := after["envoy"].String(), after["sidecar"].String(); a != b {
		t.Errorf("counters differ after the run:\nenvoy:\n%s\nsidecar:\n%s", a, b)
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

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
