package main

import (
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/tests/pki"
)

const (
	routerID = "spiffe://cluster.local/ns/llm/sa/router"
	appID    = "spiffe://cluster.local/ns/llm/sa/app"
	// hinted is a body whose envelope is admitted as it is (compact), or
	// removed: stripped.
	hinted   = `{"model":"m","kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},"x":1}`
	stripped = `{"model":"m","x":1}`
)

func mustLeaf(t testing.TB) func(*pki.Leaf, error) *pki.Leaf {
	return func(l *pki.Leaf, err error) *pki.Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func mustCA(t testing.TB, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// tlsFileSet is a directory holding -tls-cert, -tls-key and -client-ca.
type tlsFileSet struct{ cert, key, ca string }

func newTLSFileSet(t testing.TB, server *pki.Leaf, clientCA *pki.CA) tlsFileSet {
	t.Helper()
	dir := t.TempDir()
	fs := tlsFileSet{filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "client-ca.crt")}
	fs.put(t, server, clientCA)
	return fs
}

// put replaces the files' contents the way a rotation does: each file
// written whole and renamed into place.
func (fs tlsFileSet) put(t testing.TB, server *pki.Leaf, clientCA *pki.CA) {
	t.Helper()
	if server != nil {
		replaceFile(t, fs.cert, server.CertPEM)
		replaceFile(t, fs.key, server.KeyPEM)
	}
	if clientCA != nil {
		replaceFile(t, fs.ca, clientCA.PEM)
	}
}

func (fs tlsFileSet) args() []string {
	return []string{"-tls-cert", fs.cert, "-tls-key", fs.key, "-client-ca", fs.ca}
}

func replaceFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// clientConfig trusts ca for the server and presents cert (none when nil)
// whatever CAs the server names.
func clientConfig(ca *pki.CA, cert *pki.Leaf) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	return cfg
}

// handshake connects to addr and returns the serial number of the
// certificate the server presented, after the server accepted the
// client's (in TLS 1.3 a refusal shows only once the client reads).
func handshake(addr string, ca *pki.CA, cert *pki.Leaf) (*big.Int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, clientConfig(ca, cert))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return nil, err
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

func serial(l *pki.Leaf) *big.Int { return l.TLS.Leaf.SerialNumber }

// A listener on tlsFiles with a clock the test moves: the files are read
// again at most once a second; changed files are served to new handshakes;
// files that do not load keep the previous certificate, with one warning
// per set of bad files; a new client CA takes effect the same way.
func TestTLSReload(t *testing.T) {
	ca, ca2 := mustCA(t, "CA one"), mustCA(t, "CA two")
	must := mustLeaf(t)
	a, b, c := must(ca.Server("127.0.0.1")), must(ca.Server("127.0.0.1")), must(ca.Server("127.0.0.1"))
	router := must(ca.Client([]string{routerID}, nil))
	router2 := must(ca2.Client([]string{routerID}, nil))
	files := newTLSFileSet(t, a, ca)
	f, err := loadTLS(files.cert, files.key, files.ca)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick := func() { mu.Lock(); now = now.Add(tlsReloadEvery); mu.Unlock() }
	var logs syncbuf.Buffer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := f.listener(ln, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer tln.Close()
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
				}
			}()
		}
	}()
	addr := ln.Addr().String()
	expect := func(step string, client *pki.Leaf, want *pki.Leaf) {
		t.Helper()
		got, err := handshake(addr, ca, client)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got.Cmp(serial(want)) != 0 {
			t.Fatalf("%s: the server presented serial %x, want %x", step, got, serial(want))
		}
	}
	warnings := func() int { return strings.Count(logs.String(), `"level":"WARN"`) }

	expect("start", router, a)
	files.put(t, b, nil)
	expect("changed, within the second", router, a)
	tick()
	expect("changed, a second later", router, b)

	replaceFile(t, files.cert, []byte("not a certificate"))
	for i := range 3 {
		tick()
		expect("bad certificate file", nil, b)
		if i == 0 && !strings.Contains(logs.String(), "-tls-cert "+files.cert) {
			t.Errorf("the warning does not name the file: %s", logs.String())
		}
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings for one set of bad files, want 1:\n%s", n, logs.String())
	}
	// Half a rotation: the new certificate next to the old key.
	replaceFile(t, files.cert, c.CertPEM)
	tick()
	expect("certificate and key do not match", nil, b)
	if n := warnings(); n != 2 || !strings.Contains(logs.String(), "private key does not match") {
		t.Errorf("%d warnings after another bad set, want 2:\n%s", n, logs.String())
	}
	replaceFile(t, files.key, c.KeyPEM)
	tick()
	expect("rotation complete", nil, c)

	// The client CA rotates too: the router's new certificate is refused
	// until the new CA is in place, the old one after.
	if _, err := handshake(addr, ca, router2); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client certificate from a CA not yet configured: %v, want a refused handshake", err)
	}
	files.put(t, nil, ca2)
	tick()
	expect("new client CA", router2, c)
	if _, err := handshake(addr, ca, router); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client certificate from the CA rotated out: %v, want a refused handshake", err)
	}
	if n := strings.Count(logs.String(), "TLS files reloaded"); n != 3 {
		t.Errorf("%d reloads logged, want 3:\n%s", n, logs.String())
	}
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings, want 2:\n%s", n, logs.String())
	}
}

// recordingWorker records each request's body and headers.
type recordingWorker struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	body   string
	header http.Header
}

func (w *recordingWorker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.reqs = append(w.reqs, recorded{string(b), r.Header.Clone()})
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write([]byte(`{"ok":true}`))
}

func (w *recordingWorker) take() []recorded {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.reqs
	w.reqs = nil
	return r
}

// The sidecar serving TLS with -client-ca and trusted_senders: the
// router's certificate makes it a trusted sender; another certificate, no
// certificate, and spoofed X-Forwarded-For or x-forwarded-client-cert
// headers do not; a certificate from another CA fails the handshake. The
// worker never gets the client's x-forwarded-client-cert. Replacing the
// server's certificate files while it runs: new handshakes present the
// new certificate.
func TestTLSTrustedSenders(t *testing.T) {
	ca, rogue := mustCA(t, "kvgate CA"), mustCA(t, "rogue CA")
	must := mustLeaf(t)
	server := must(ca.Server("127.0.0.1"))
	router := must(ca.Client([]string{routerID}, []string{"router.llm.svc"}))
	app := must(ca.Client([]string{appID}, []string{"app.llm.svc"}))
	rogueRouter := must(rogue.Client([]string{routerID}, nil))
	files := newTLSFileSet(t, server, ca)
	w := &recordingWorker{}
	up := httptest.NewServer(w)
	defer up.Close()
	conf := `{"trusted_senders":[{"principal":"` + routerID + `"},{"source_cidr":"10.8.0.0/16"}]}`
	l, _, _ := startInProcess(t, append(files.args(), "-upstream", up.URL, "-filter-config", conf)...)

	post := func(cert *pki.Leaf, hdr map[string]string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", "https://"+l.API+"/v1/chat/completions", strings.NewReader(hinted))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: clientConfig(ca, cert), DisableKeepAlives: true}}
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	xfcc := "By=spiffe://cluster.local/ns/llm/sa/worker;URI=" + routerID
	for _, c := range []struct {
		name    string
		cert    *pki.Leaf
		hdr     map[string]string
		trusted bool
	}{
		{"router", router, nil, true},
		{"other certificate", app, nil, false},
		{"no certificate", nil, nil, false},
		{"spoofed x-forwarded-for", nil, map[string]string{"X-Forwarded-For": "10.8.1.1"}, false},
		{"spoofed x-forwarded-client-cert", app, map[string]string{"X-Forwarded-Client-Cert": xfcc}, false},
		{"router with x-forwarded-client-cert", router, map[string]string{"X-Forwarded-Client-Cert": xfcc}, true},
	} {
		before := scrape(t, l.Admin)
		resp, err := post(c.cert, c.hdr)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", c.name, err, resp)
		}
		recs := w.take()
		if len(recs) != 1 {
			t.Fatalf("%s: %d requests at the worker", c.name, len(recs))
		}
		want, counter := stripped, `trtllm_kv_hints_ignored_total{reason="untrusted"}`
		if c.trusted {
			want, counter = hinted, `kvgate_kv_hints_admitted_total`
		}
		if recs[0].body != want {
			t.Errorf("%s: the worker got %s, want %s", c.name, recs[0].body, want)
		}
		if v := recs[0].header.Values("X-Forwarded-Client-Cert"); len(v) > 0 {
			t.Errorf("%s: the worker got x-forwarded-client-cert %q", c.name, v)
		}
		if got := scrape(t, l.Admin)[counter] - before[counter]; got != 1 {
			t.Errorf("%s: %s rose by %g, want 1", c.name, counter, got)
		}
	}
	if _, err := post(rogueRouter, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client certificate from another CA: %v, want a refused handshake", err)
	}
	if len(w.take()) != 0 {
		t.Error("the rogue client's request reached the worker")
	}
	// A plain-text request to the TLS listener gets no further.
	if resp, err := http.Post("http://"+l.API+"/v1/chat/completions", "application/json", strings.NewReader(hinted)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain text served on the TLS listener")
		}
	}
	if len(w.take()) != 0 {
		t.Error("a plain-text request reached the worker")
	}

	// Rotation: new handshakes present the new certificate (the files are
	// looked at again at most once a second; wait for it, without timing
	// anything).
	next := must(ca.Server("127.0.0.1"))
	files.put(t, next, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := handshake(l.API, ca, router)
		if err != nil {
			t.Fatal(err)
		}
		if got.Cmp(serial(next)) == 0 {
			break
		}
		if got.Cmp(serial(server)) != 0 {
			t.Fatalf("serial %x is neither the old nor the new certificate's", got)
		}
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 20s of the rotation")
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.take() // the handshakes' own requests
	if resp, err := post(router, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the rotation: %v", err)
	}
	if recs := w.take(); len(recs) != 1 || recs[0].body != hinted {
		t.Errorf("after the rotation the router's envelope was not admitted: %+v", recs)
	}
}
