package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// configMapDir lays out a directory the way Kubernetes mounts a ConfigMap:
// filter.json -> ..data/filter.json, ..data -> a timestamped directory.
// update writes a new version and swaps ..data to it atomically, as the
// kubelet does; filter.json itself is never written.
type configMapDir struct {
	dir string
	n   int
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	c := &configMapDir{dir: t.TempDir()}
	c.update(t, content)
	if err := os.Symlink(filepath.Join("..data", "filter.json"), filepath.Join(c.dir, "filter.json")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMapDir) file() string { return filepath.Join(c.dir, "filter.json") }

func (c *configMapDir) update(t *testing.T, content string) {
	t.Helper()
	c.n++
	v := fmt.Sprintf("..2026_12_02_00_00_%02d.%d", c.n, c.n)
	if err := os.Mkdir(filepath.Join(c.dir, v), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, v, "filter.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(v, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// A -filter-config file mounted from a ConfigMap is applied when the
// kubelet swaps it, on a kept-alive connection and without a restart; a
// file that does not parse, and a body limit past the instance memory, are
// kept out with one error each and counted; SIGHUP reads the file again at
// once instead of ending the process; counters carry on across reloads.
func TestReloadConfigMapSwap(t *testing.T) {
	cm := newConfigMapDir(t, `{"trust_kv_hints": false}`)
	logs := &syncbuf.Buffer{}
	cfg, err := parseFlags([]string{"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-cache-dir", testCache(t), "-upstream", "echo",
		"-filter-config", "@" + cm.file(), "-log-flush", "0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan listeners, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), started) }()
	var l listeners
	select {
	case l = <-started:
	case err := <-done:
		t.Fatalf("sidecar did not start: %v", err)
	}
	defer func() { cancel(); <-done }()

	client := &http.Client{Transport: &http.Transport{}}
	stripped := 0 // answers without the hint, each one count of untrusted
	const hinted = `{"kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},"model":"m"}`
	// ask sends the hinted body on the kept-alive connection and returns
	// whether the hint reached the echo worker, and whether the
	// connection was reused.
	ask := func() (admitted, reused bool) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+l.API+"/v1/chat/completions", strings.NewReader(hinted))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		admitted = strings.Contains(string(b), "kv_hints")
		if !admitted {
			stripped++
		}
		return admitted, reused
	}
	// waitFor asks until the answer is want, for at most d.
	waitFor := func(want bool, d time.Duration) (took time.Duration, reused bool) {
		t.Helper()
		start := time.Now()
		for {
			got, r := ask()
			if got == want {
				return time.Since(start), r
			}
			if time.Since(start) > d {
				t.Fatalf("hint admitted = %v after %v, want %v", got, time.Since(start), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	metric := func(name string) float64 { return scrape(t, l.Admin)[name] }
	// settled waits up to a second for a reload's count, which follows
	// the switch: a request can see the new configuration first.
	settled := func(name string, want float64) float64 {
		v := metric(name)
		for deadline := time.Now().Add(time.Second); v != want && time.Now().Before(deadline); v = metric(name) {
			time.Sleep(10 * time.Millisecond)
		}
		return v
	}
	const (
		success = `kvgate_config_reloads_total{result="success"}`
		failure = `kvgate_config_reloads_total{result="failure"}`
		lastOK  = `kvgate_config_last_reload_successful`
		ignored = `trtllm_kv_hints_ignored_total{reason="untrusted"}`
		notRel  = "filter configuration not reloaded"
	)
	if a, _ := ask(); a {
		t.Fatal("hint admitted under trust_kv_hints: false")
	}
	if metric(lastOK) != 1 || metric(success) != 0 {
		t.Fatalf("before any reload: last successful %v, successes %v", metric(lastOK), metric(success))
	}

	// The kubelet's swap: applied within 2 s, on the same connection.
	cm.update(t, `{"trust_kv_hints": true}`)
	took, reused := waitFor(true, 3*time.Second)
	if took > 2*time.Second+500*time.Millisecond || !reused {
		t.Errorf("the new configuration applied after %v (reused connection: %v), want within 2 s on the kept-alive connection", took, reused)
	}
	if settled(success, 1) != 1 || metric(lastOK) != 1 || metric(ignored) != float64(stripped) {
		t.Errorf("after the reload: successes %v, last successful %v, untrusted count %v (want 1, 1, %d: no series reset)", metric(success), metric(lastOK), metric(ignored), stripped)
	}

	// A file that does not parse is kept out, once.
	cm.update(t, `{"trust_kv_hints": tru`)
	time.Sleep(2500 * time.Millisecond)
	if a, _ := ask(); !a {
		t.Error("a bad file replaced the running configuration")
	}
	if metric(failure) != 1 || metric(lastOK) != 0 || logs.Count(notRel) != 1 {
		t.Errorf("a bad file: failures %v, last successful %v, %d error lines; want 1, 0, 1", metric(failure), metric(lastOK), logs.Count(notRel))
	}

	// A body limit past what instance memory was sized for needs a restart.
	cm.update(t, `{"trust_kv_hints": true, "max_body_bytes": 200000000}`)
	time.Sleep(2500 * time.Millisecond)
	if metric(failure) != 2 || logs.Count("restart the sidecar") != 1 {
		t.Errorf("a body limit past the instance memory: failures %v, %d lines naming a restart", metric(failure), logs.Count("restart the sidecar"))
	}

	// SIGHUP reads the file at once (the poll would within a second), and
	// the process goes on.
	cm.update(t, `{"trust_kv_hints": false}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	took, _ = waitFor(false, 3*time.Second)
	if settled(success, 2) != 2 || metric(lastOK) != 1 {
		t.Errorf("after SIGHUP: successes %v, last successful %v", metric(success), metric(lastOK))
	}
	t.Logf("SIGHUP applied after %v", took)
	select {
	case err := <-done:
		t.Fatalf("the sidecar stopped: %v", err)
	default:
	}
}

// A streamed answer in flight when the configuration changes finishes
// whole: the request keeps the instance and configuration it started with.
func TestReloadDuringStream(t *testing.T) {
	release := make(chan struct{})
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			if i == 0 {
				<-release
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer worker.Close()
	cm := newConfigMapDir(t, `{"trust_kv_hints": false}`)
	l, _, _ := startInProcess(t, "-upstream", worker.URL, "-filter-config", "@"+cm.file())
	resp, err := http.Post("http://"+l.API+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"kv_hints":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: 0\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	cm.update(t, `{"trust_kv_hints": true}`)
	deadline := time.Now().Add(3 * time.Second)
	for scrape(t, l.Admin)[`kvgate_config_reloads_total{result="success"}`] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the configuration was not reloaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.HasSuffix(string(rest), "data: 2\n\ndata: [DONE]\n\n") {
		t.Fatalf("the stream across the reload ended with %q, %v", rest, err)
	}
}

// A reload's policy is the one every request after it is held to, in every
// place it applies: the body limit of the 413 from Content-Length and of
// the 413 while reading a chunked body (raised and lowered), and the guest's
// configuration, so that a body the old limit refused passes the filter
// too. A reload that changes only the filter configuration is seen by the
// very next request, with the body limit as it was. -max-body-bytes wins
// over every reloaded document, as over the first.
func TestReloadedPolicyEverywhere(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	// serve starts a sidecar with the file's first content doc and returns
	// its server and API address; reloads are made by calling reload, as
	// the file watch does, so that the request after one is the next one.
	serve := func(doc string, args ...string) (*server, *config, string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "filter.json")
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags(append([]string{"-cache-dir", testCache(t), "-upstream", worker.URL, "-filter-config", "@" + file}, args...),
			func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		s, err := newServer(context.Background(), cfg, firstPolicy(t, cfg), worker.URL, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		api := s.apiServer(cfg)
		go func() { _ = api.Serve(s.limitConnections(ln, 16)) }()
		t.Cleanup(func() { _ = api.Close(); s.close() })
		return s, cfg, ln.Addr().String()
	}
	reload := func(s *server, doc string) {
		t.Helper()
		if err := s.reload(context.Background(), []byte(doc), "test"); err != nil {
			t.Fatalf("reload %s: %v", doc, err)
		}
	}
	// status posts a JSON body of n bytes, announced (Content-Length) or
	// chunked, on a connection of its own.
	status := func(api string, n int, chunked bool) int {
		t.Helper()
		body := `{"model":"m","prompt":"` + strings.Repeat("x", n-len(`{"model":"m","prompt":""}`)) + `"}`
		req, _ := http.NewRequest("POST", "http://"+api+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if chunked {
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), -1
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatalf("%d bytes (chunked %v): %v", n, chunked, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	limitIs := func(api string, limit int, when string) {
		t.Helper()
		for _, chunked := range []bool{false, true} {
			if got := status(api, limit, chunked); got != 200 {
				t.Errorf("%s: a body of the limit, %d bytes (chunked %v): %d, want 200", when, limit, chunked, got)
			}
			if got := status(api, limit+1, chunked); got != 413 {
				t.Errorf("%s: a body of %d bytes over a limit of %d (chunked %v): %d, want 413", when, limit+1, limit, chunked, got)
			}
		}
	}
	admitted := func(api string) bool {
		t.Helper()
		resp, err := http.Post("http://"+api+"/v1/chat/completions", "application/json", strings.NewReader(hinted))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a hinted request: %d", resp.StatusCode)
		}
		return string(rec.last()) == hinted
	}

	s, _, api := serve(`{"max_body_bytes":1000}`)
	limitIs(api, 1000, "at start-up")
	reload(s, `{"max_body_bytes":2000}`)
	limitIs(api, 2000, "raised by a reload")
	reload(s, `{"max_body_bytes":500}`)
	limitIs(api, 500, "lowered by a reload")
	if admitted(api) {
		t.Fatal("a hint admitted without trust")
	}
	reload(s, `{"max_body_bytes":500,"trust_kv_hints":true}`)
	if !admitted(api) {
		t.Error("the request after a reload that trusts hints: the hint was removed")
	}
	limitIs(api, 500, "after a reload of the filter configuration only")
	if p := s.policy.Load(); p.maxBody() != 500 || !p.filter.TrustKVHints {
		t.Errorf("the policy in force: max body %d, trust %v", p.maxBody(), p.filter.TrustKVHints)
	}

	s, cfg, api := serve(`{}`, "-max-body-bytes", "1000")
	reload(s, `{"max_body_bytes":3000}`)
	limitIs(api, 1000, "-max-body-bytes 1000, reloaded max_body_bytes 3000")
	if cfg.policyFlags.maxBody != 1000 {
		t.Errorf("-max-body-bytes reads %d after the reload", cfg.policyFlags.maxBody)
	}
}
