package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
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

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/tests/pki"
	"github.com/kvgate/kvgate/tests/vectors"
)

// freeAddr is a free loopback address whose port no earlier call in this
// test binary returned: a listener opened and closed just after another
// may be handed the same port, and a sidecar given one port twice (as
// -listen and -admin) refuses to start.
func freeAddr(t testing.TB) string {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(a, true); !dup {
			return a
		}
	}
}

// handedOut is every address freeAddr returned.
var handedOut sync.Map

// freeAddrPair is two free addresses that differ.
func freeAddrPair(t testing.TB) (string, string) { return freeAddr(t), freeAddr(t) }

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
	stderr     *syncbuf.Buffer // what it has written to stderr so far
}

// startBinaryProc is startBinary that also returns the process id and its
// stderr.
func startBinaryProc(t testing.TB, args ...string) *sidecarProc {
	t.Helper()
	return startBinaryEnv(t, nil, args...)
}

// startBinaryEnv is startBinaryProc with env ("KEY=value") added to the
// environment.
func startBinaryEnv(t testing.TB, env []string, args ...string) *sidecarProc {
	t.Helper()
	bin, _ := artifacts(t)
	api, admin := freeAddrPair(t)
	cmd := exec.Command(bin, append([]string{"-listen", api, "-admin", admin, "-cache-dir", testCache(t), "-upstream", "echo"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncbuf.Buffer{}
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

// binaryRunner sends conformance cases through the real sidecar binary, one
// process per plugin configuration, in front of a recording worker, over
// HTTP with Content-Length. It reads the counters from /metrics. A
// configuration with trusted_senders is served over TLS with -client-ca,
// and each case's sender connects with a client certificate that carries
// the case's SANs (or none), from loopback.
type binaryRunner struct {
	worker     string // the recording worker's URL
	rec        *recorder
	client     *http.Client
	api, admin string // the sidecar serving the current configuration
	tls        *senderPKI
	scheme     string // of the current sidecar
}

// senderPKI is the CA and server certificate of the runner's TLS sidecars
// (the CA also issues the senders' client certificates).
type senderPKI struct {
	ca    *pki.CA
	files []string // -tls-cert … -client-ca flags
}

func (*binaryRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesForwardStatus
}

func (r *binaryRunner) Configure(t testing.TB, conf string) {
	args := []string{"-upstream", r.worker, "-filter-config", conf, "-pool-size", "2"}
	r.scheme = "http"
	if fc, err := filterspec.ParseConfig([]byte(conf)); err == nil && fc.TrustedSenders != nil {
		if r.tls == nil {
			r.tls = newSenderPKI(t)
		}
		args, r.scheme = append(args, r.tls.files...), "https"
	}
	r.api, r.admin = startBinary(t, args...)
}

func newSenderPKI(t testing.TB) *senderPKI {
	t.Helper()
	ca, err := pki.NewCA("vectors CA")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteListener(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &senderPKI{ca: ca, files: []string{"-tls-cert", f.Cert, "-tls-key", f.Key, "-client-ca", f.ClientCA}}
}

// client returns a client whose one connection is the sender's: with a
// certificate carrying its URI and DNS SANs when its mtls is true.
func (p *senderPKI) client(s *vectors.Sender) (*http.Client, error) {
	cfg := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if *s.MTLS {
		leaf, err := p.ca.ClientFor(s.URISAN, s.DNSSAN)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &leaf.TLS, nil }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}, nil
}

// The sender cases the binary runner cannot produce over a real connection
// from loopback, each for its reason. Those it runs connect from
// 127.0.0.1: the source port is the client's own, not the case's, and no
// rule reads ports.
var binarySenderSkips = append(vectors.SkipNotFromTLS(),
	vectors.Skip("the sidecar always supplies source.address, the connection's peer",
		func(c *vectors.Case) bool { return c.Sender != nil && c.Sender.SourceAddress == nil }),
	vectors.Skip("the case's source address is not 127.0.0.1, where the test's connections come from",
		func(c *vectors.Case) bool {
			s := c.Sender
			if s == nil {
				return false
			}
			host, _, err := net.SplitHostPort(*s.SourceAddress)
			return err != nil || host != "127.0.0.1"
		}),
)

func (r *binaryRunner) Send(c *vectors.Case) (vectors.Result, error) {
	req, err := http.NewRequest(c.Request.Method, r.scheme+"://"+r.api+c.Request.Path, bytes.NewReader(c.Request.Body))
	if err != nil {
		return vectors.Result{}, err
	}
	for h, v := range c.Request.Headers {
		req.Header.Set(h, v)
	}
	client := r.client
	if c.Sender != nil {
		if client, err = r.tls.client(c.Sender); err != nil {
			return vectors.Result{}, err
		}
	}
	hits := r.rec.hits.Load()
	resp, err := client.Do(req)
	if err != nil {
		return vectors.Result{}, err
	}
	reply, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return vectors.Result{}, err
	}
	res := vectors.Result{Status: resp.StatusCode, Body: reply, ContentType: resp.Header.Get("Content-Type")}
	switch n := r.rec.hits.Load() - hits; n {
	case 0:
	case 1:
		res.Forwarded, res.Body = true, r.rec.last()
	default:
		return res, fmt.Errorf("the worker received %d requests", n)
	}
	return res, nil
}

func (r *binaryRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	resp, err := r.client.Get("http://" + r.admin + "/metrics")
	if err != nil {
		return vectors.Counters{}, err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		return vectors.Counters{}, err
	}
	return vectors.PrometheusCounters(c, string(page))
}

// Every conformance vector through the real sidecar binary and a recording
// worker: status, forwarded bytes, error replies and /metrics deltas, then
// what the worker received through the Python oracle.
func TestVectorsThroughBinary(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	// What the worker received (or, for a rejected request, the reply),
	// one JSON line per vector, for the Python oracle.
	var lines bytes.Buffer
	vectors.Run(t, &binaryRunner{worker: worker.URL, rec: rec, client: &http.Client{Timeout: 30 * time.Second}},
		append([]vectors.Option{vectors.Oracle(&lines), vectors.BothModes()}, binarySenderSkips...)...)

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

// TestFreeAddrDistinct checks that freeAddr never returns one address
// twice: two calls in a row once gave a benchmark's sidecar the same port
// for -listen and -admin, and it refused to start.
func TestFreeAddrDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a := freeAddr(t)
		if seen[a] {
			t.Fatalf("freeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
