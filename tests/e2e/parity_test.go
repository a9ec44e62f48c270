package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/tests/vectors"
)

// result is what one host did with one case in one framing.
type result struct {
	Status    int
	Reply     []byte // the client's response body
	Forwarded []byte // what the worker received; nil when nothing arrived
	Records   int
	Err       string
}

// hostRun is one host under test: where each configuration listens and how
// to read its metrics.
type hostRun struct {
	name   string
	addr   map[string]string // plugin configuration -> host:port
	scrape func() (series, error)
}

// expectedCounters sums the vectors' counter deltas as series.
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
			s[fmt.Sprintf(`kvgate_bodies_rejected_total{status="%d"}`, c.Expect.Status)] += float64(k.RejectedBodies)
		}
	}
	return s
}

// runCases sends cases to a host with bounded parallelism, each tagged so
// that the worker's record can be found, and collects the results.
func runCases(t *testing.T, w *Worker, h hostRun, tag string, cases []vectors.Case, chunked bool) []result {
	out := make([]result, len(cases))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c := &cases[i]
			key := fmt.Sprintf("%s/%s/%d", h.name, tag, i)
			hdr := map[string]string{CaseHeader: key}
			for k, v := range c.Request.Headers {
				hdr[k] = v
			}
			r, err := send(h.addr[c.FilterConfig()], c.Request.Method, c.Request.Path, hdr, c.Request.Body, chunked)
			res := result{Status: r.Status, Reply: r.Body}
			if err != nil {
				res.Err = err.Error()
			}
			recs := w.Records(key)
			res.Records = len(recs)
			if len(recs) > 0 {
				res.Forwarded = recs[0].Body
			}
			out[i] = res
		}(i)
	}
	wg.Wait()
	return out
}

// checkExpect compares a result with the case's expectation.
func checkExpect(c *vectors.Case, r result) string {
	switch {
	case r.Err != "":
		return "request failed: " + r.Err
	case c.Expect.Action == "reject":
		if r.Status != c.Expect.Status {
			return fmt.Sprintf("status %d, want %d (reply %.120q)", r.Status, c.Expect.Status, r.Reply)
		}
		if r.Records != 0 {
			return fmt.Sprintf("rejected, but the worker received %d request(s)", r.Records)
		}
	default:
		if r.Status != 200 || r.Records != 1 {
			return fmt.Sprintf("status %d with %d worker record(s), want 200 and one forward (reply %.120q)", r.Status, r.Records, r.Reply)
		}
		if c.Expect.ForwardedBody != nil && !bytes.Equal(r.Forwarded, c.Expect.ForwardedBody) {
			return fmt.Sprintf("forwarded %.120q, want %.120q", r.Forwarded, c.Expect.ForwardedBody)
		}
	}
	return ""
}

// TestParity sends every conformance vector, untrusted and trusted (each case
// under its own plugin configuration), with Content-Length and chunked
// framing, through Envoy and through the sidecar, each in front of the
// recording worker. Both hosts must forward the same bytes and answer the
// same statuses, agree with the vectors and with the Python oracle, and
// show the same counter series and values.
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
	python := envoy.Python(t)
	bin := sidecarBinary(t)
	w := startWorker(t)

	// One Envoy listener and one sidecar per distinct configuration.
	var configs []string
	seen := map[string]bool{}
	for i := range cases {
		if k := cases[i].FilterConfig(); !seen[k] {
			seen[k] = true
			configs = append(configs, k)
		}
	}
	sort.Strings(configs)
	ev := hostRun{name: "envoy", addr: map[string]string{}}
	var listeners []envoy.Listener
	for i, k := range configs {
		p := envoy.FreePort(t)
		listeners = append(listeners, envoy.Listener{Name: fmt.Sprintf("kvgate_%d", i), Port: p, PluginConfig: k})
		ev.addr[k] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	e := startEnvoy(t, w.Addr, listeners)
	ev.scrape = func() (series, error) {
		page, err := e.Prometheus()
		return parseSeries(page), err
	}
	sc := hostRun{name: "sidecar", addr: map[string]string{}}
	cache := t.TempDir()
	var sidecars []*sidecar
	for _, k := range configs {
		s := startSidecar(t, bin, w.Addr, k, cache, "-pool-size", "2")
		sidecars = append(sidecars, s)
		sc.addr[k] = s.API
	}
	// The sidecars' counters are summed: Envoy's are one set for all its
	// listeners (the guest's metrics are shared by every plugin of the VM).
	sc.scrape = func() (series, error) {
		sum := series{}
		for _, s := range sidecars {
			page, err := s.metrics()
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

	for _, k := range configs {
		preflight(t, w, "envoy "+k, ev.addr[k])
		preflight(t, w, "sidecar "+k, sc.addr[k])
	}

	// Every series exists from start-up, at 0, with the same names and
	// labels in both hosts.
	before := map[string]series{}
	for _, h := range []hostRun{ev, sc} {
		s, err := h.scrape()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != len(filter.MetricNames()) {
			t.Errorf("%s: %d series at start-up, want %d:\n%s", h.name, len(s), len(filter.MetricNames()), s)
		}
		for k, v := range s {
			if v != 0 {
				t.Errorf("%s: %s = %g at start-up", h.name, k, v)
			}
		}
		before[h.name] = s
	}
	if a, b := strings.Join(before["envoy"].keys(), "\n"), strings.Join(before["sidecar"].keys(), "\n"); a != b {
		t.Fatalf("series differ at start-up:\nenvoy:\n%s\nsidecar:\n%s", a, b)
	}

	var untrusted, trusted []vectors.Case
	for _, c := range cases {
		if c.Trusted {
			trusted = append(trusted, c)
		} else {
			untrusted = append(untrusted, c)
		}
	}
	outDir := t.TempDir()
	if d := os.Getenv("KVGATE_E2E_OUT"); d != "" {
		outDir = d
	}
	for _, phase := range []struct {
		name  string
		cases []vectors.Case
	}{{"untrusted", untrusted}, {"trusted", trusted}} {
		for _, chunked := range []bool{false, true} {
			framing := map[bool]string{false: "length", true: "chunked"}[chunked]
			tag := phase.name + "-" + framing
			results := map[string][]result{}
			for _, h := range []hostRun{ev, sc} {
				start, err := h.scrape()
				if err != nil {
					t.Fatal(err)
				}
				results[h.name] = runCases(t, w, h, tag, phase.cases, chunked)
				end, err := h.scrape()
				if err != nil {
					t.Fatal(err)
				}
				got, want := end.delta(start), expectedCounters(phase.cases)
				for _, k := range got.keys() {
					if got[k] != want[k] {
						t.Errorf("%s %s: %s rose by %g, the vectors say %g", h.name, tag, k, got[k], want[k])
					}
				}
				writeForwarded(t, filepath.Join(outDir, h.name+"-"+tag+".jsonl"), phase.cases, results[h.name])
			}
			// The same traffic moved the same series in both hosts.
			for i := range phase.cases {
				c := &phase.cases[i]
				er, sr := results["envoy"][i], results["sidecar"][i]
				if er.Status != sr.Status || !bytes.Equal(er.Forwarded, sr.Forwarded) || er.Records != sr.Records {
					t.Errorf("%s [%s]: envoy %d %d-fwd %.100q, sidecar %d %d-fwd %.100q", c.Name, framing,
						er.Status, er.Records, er.Forwarded, sr.Status, sr.Records, sr.Forwarded)
				}
				for _, h := range []string{"envoy", "sidecar"} {
					if msg := checkExpect(c, results[h][i]); msg != "" {
						t.Errorf("%s [%s, %s]: %s", c.Name, h, framing, msg)
					}
				}
			}
		}
	}
	after := map[string]series{}
	for _, h := range []hostRun{ev, sc} {
		s, err := h.scrape()
		if err != nil {
			t.Fatal(err)
		}
		after[h.name] = s
	}
	if a, b := after["envoy"].String(), after["sidecar"].String(); a != b {
		t.Errorf("counters differ after the run:\nenvoy:\n%s\nsidecar:\n%s", a, b)
	}

	// The Python oracle reads what each host forwarded as the worker would.
	cmd := exec.Command(python, filepath.Join(repoRoot, "tests", "oracle", "oracle.py"), "--forwarded", outDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("oracle on %s: %v\n%s", outDir, err, tail(string(out), 60))
	} else {
		t.Logf("oracle: %s", strings.TrimSpace(tail(string(out), 1)))
	}
}

// writeForwarded writes one oracle line per case: the status the client saw
// and the bytes the worker received (or the local reply when rejected).
func writeForwarded(t *testing.T, path string, cases []vectors.Case, results []result) {
	var b bytes.Buffer
	for i, c := range cases {
		r := results[i]
		body := r.Reply
		if r.Status == 200 {
			body = r.Forwarded
		}
		mode := "untrusted"
		if c.Trusted {
			mode = "trusted"
		}
		line, _ := json.Marshal(map[string]any{"name": c.Name, "mode": mode, "status": r.Status,
			"body_base64": base64.StdEncoding.EncodeToString(body)})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
