package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
	api, admin, _ = startBinaryPID(t, args...)
	return api, admin
}

// startBinaryPID is startBinary that also returns the process id.
func startBinaryPID(t testing.TB, args ...string) (api, admin string, pid int) {
	t.Helper()
	p := startBinaryProc(t, args...)
	return p.api, p.admin, p.pid
}

// sidecarProc is a running sidecar binary.
type sidecarProc struct {
	api, admin string
	pid        int
	stderr     *syncBuffer // what it has written to stderr so far
}

// syncBuffer is a bytes.Buffer written by one goroutine and read by others.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startBinaryProc is startBinary that also returns the process id and its
// stderr.
func startBinaryProc(t testing.TB, args ...string) *sidecarProc {
	t.Helper()
	bin, _ := artifacts(t)
	api, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, append([]string{"-listen", api, "-admin", admin, "-cache-dir", testCache(t)}, args...)...)
	logs := &syncBuffer{}
	cmd.Stderr = logs
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
				return &sidecarProc{api, admin, cmd.Process.Pid, logs}
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
	// What the worker received (or, for a rejected request, the reply),
	// one JSON line per vector, for the Python oracle.
	type oracleLine struct {
		Name       string `json:"name"`
		Mode       string `json:"mode"`
		Status     int    `json:"status"`
		BodyBase64 string `json:"body_base64"`
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
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
			reply, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			after := counters(scrape(t, admin))
			forwarded := rec.hits.Load() > hitsBefore
			line := oracleLine{Name: c.Name, Mode: "untrusted", Status: resp.StatusCode}
			if c.Trusted {
				line.Mode = "trusted"
			}
			if forwarded {
				line.BodyBase64 = base64.StdEncoding.EncodeToString(rec.last())
			} else {
				line.BodyBase64 = base64.StdEncoding.EncodeToString(reply)
			}
			if err := enc.Encode(line); err != nil {
				t.Fatal(err)
			}
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

	// The Python oracle reads every forwarded body with json.loads, as the
	// worker does.
	py, why := python()
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Python oracle not run: %s", why)
		}
		t.Skipf("Python oracle not run: %s", why)
	}
	f := filepath.Join(t.TempDir(), "forwarded.jsonl")
	if err := os.WriteFile(f, lines.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "../../tests/oracle/oracle.py", "--forwarded", f, "--require-all").CombinedOutput()
	if err != nil {
		t.Fatalf("oracle on the forwarded bodies: %v\n%s", err, out)
	}
	t.Logf("oracle: %s", bytes.TrimSpace(out))
}

// python is $KVGATE_PYTHON (set by the Makefile), else python3 from PATH.
func python() (path, why string) {
	if p := os.Getenv("KVGATE_PYTHON"); p != "" {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, ""
		}
		why = "$KVGATE_PYTHON=" + p + " is not a file; "
		if os.Getenv("CI") == "true" {
			return "", why + "under CI it must be"
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", why + "no python3 on PATH"
	}
	return p, ""
}
