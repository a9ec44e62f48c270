package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/kvgate/kvgate/tests/vectors"
)

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBinary runs the real sidecar binary and waits for /readyz.
func startBinary(t testing.TB, args ...string) (api, admin string) {
	t.Helper()
	bin, _ := artifacts(t)
	api, admin = freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, append([]string{"-listen", api, "-admin", admin, "-cache-dir", testCache(t)}, args...)...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return api, admin
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type counterSet struct{ untrusted, unknownVersion, oversized, malformed, admitted, rejected float64 }

func counters(m map[string]float64) counterSet {
	return counterSet{
		untrusted:      m[`trtllm_kv_hints_ignored_total{reason="untrusted"}`],
		unknownVersion: m[`trtllm_kv_hints_ignored_total{reason="unknown_version"}`],
		oversized:      m[`trtllm_kv_hints_ignored_total{reason="oversized"}`],
		malformed:      m[`trtllm_kv_hints_ignored_total{reason="malformed"}`],
		admitted:       m[`kvgate_kv_hints_admitted_total`],
		rejected: m[`kvgate_bodies_rejected_total{status="400"}`] + m[`kvgate_bodies_rejected_total{status="413"}`] +
			m[`kvgate_bodies_rejected_total{status="415"}`],
	}
}

// Every conformance vector through the real sidecar binary and a recording
// worker: status, forwarded bytes and /metrics deltas.
func TestVectorsThroughBinary(t *testing.T) {
	cases, err := vectors.Load("../../tests/vectors")
	if err != nil {
		t.Fatalf("no vectors: %v", err)
	}
	type key struct {
		trusted         bool
		depth, maxBytes int
	}
	groups := map[key][]vectors.Case{}
	var order []key
	for _, c := range cases {
		k := key{c.Trusted, c.MaxDepth, c.MaxBodyBytes}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	client := &http.Client{Timeout: 30 * time.Second}
	for _, k := range order {
		fc := map[string]any{"trust_kv_hints": k.trusted}
		if k.depth > 0 {
			fc["max_depth"] = k.depth
		}
		if k.maxBytes > 0 {
			fc["max_body_bytes"] = k.maxBytes
		}
		cfgJSON, _ := json.Marshal(fc)
		api, admin := startBinary(t, "-upstream", worker.URL, "-filter-config", string(cfgJSON), "-pool-size", "2")
		for _, c := range groups[k] {
			before := counters(scrape(t, admin))
			hitsBefore := rec.hits.Load()
			req, _ := http.NewRequest(c.Request.Method, "http://"+api+c.Request.Path, bytes.NewReader(c.Request.Body))
			for h, v := range c.Request.Headers {
				req.Header.Set(h, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s: %v", c.Name, err)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			after := counters(scrape(t, admin))
			forwarded := rec.hits.Load() > hitsBefore
			switch c.Expect.Action {
			case "reject":
				if resp.StatusCode != c.Expect.Status || forwarded {
					t.Errorf("%s: status %d forwarded=%v, want %d and nothing forwarded", c.Name, resp.StatusCode, forwarded, c.Expect.Status)
				}
			default:
				if resp.StatusCode != 200 || !forwarded {
					t.Errorf("%s: status %d forwarded=%v, want forwarded", c.Name, resp.StatusCode, forwarded)
					continue
				}
				want := c.Expect.ForwardedBody
				if want == nil && c.Expect.Unchanged {
					want = c.Request.Body
				}
				if want != nil && !bytes.Equal(rec.last(), want) {
					t.Errorf("%s: forwarded %.200q, want %.200q", c.Name, rec.last(), want)
				}
			}
			e := c.Expect.Counters
			wantDelta := counterSet{float64(e.Untrusted), float64(e.UnknownVersion), float64(e.Oversized), float64(e.Malformed), float64(e.Admitted), float64(e.RejectedBodies)}
			got := counterSet{after.untrusted - before.untrusted, after.unknownVersion - before.unknownVersion, after.oversized - before.oversized,
				after.malformed - before.malformed, after.admitted - before.admitted, after.rejected - before.rejected}
			if got != wantDelta {
				t.Errorf("%s: counter deltas %+v, want %+v", c.Name, got, wantDelta)
			}
		}
	}
	t.Logf("%d vectors in %d sidecar configurations", len(cases), len(order))
	_ = fmt.Sprint
}
