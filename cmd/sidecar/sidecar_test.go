package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// artifacts builds the sidecar binary and the host's test guest once.
func artifacts(t testing.TB) (binary, testGuest string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "kvgate-sidecar-test")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "sidecar"), ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
			return
		}
		cmd = exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, "guest.wasm"), "../../host/testdata/guest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "sidecar"), filepath.Join(buildDir, "guest.wasm")
}

func testCache(t testing.TB) string {
	_, _ = artifacts(t)
	return filepath.Join(buildDir, "cache")
}

// startInProcess runs the sidecar in this process and returns its addresses.
func startInProcess(t testing.TB, args ...string) (listeners, context.CancelFunc, <-chan error) {
	t.Helper()
	return startWithLog(t, nil, args...)
}

// startWithLog is startInProcess with h as the sidecar's log handler; nil
// is the one main builds, here writing to nowhere.
func startWithLog(t testing.TB, h slog.Handler, args ...string) (listeners, context.CancelFunc, <-chan error) {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-cache-dir", testCache(t), "-upstream", "echo"}, args...)
	cfg, err := parseFlags(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan listeners, 1)
	done := make(chan error, 1)
	sink := newLogSink(io.Discard, cfg.LogFlush)
	if h == nil {
		h = flushOnWarn{slog.NewJSONHandler(sink, nil), sink}
	}
	log := slog.New(h)
	finished := make(chan struct{})
	go func() { done <- run(ctx, cfg, log, started); sink.Close(); close(finished) }()
	select {
	case l := <-started:
		t.Cleanup(func() { cancel(); <-finished })
		return l, cancel, done
	case err := <-done:
		cancel()
		t.Fatalf("sidecar did not start: %v", err)
	}
	panic("unreachable")
}

// firstPolicy is the policy start-up applies for cfg.
func firstPolicy(t testing.TB, cfg *config) *policy {
	t.Helper()
	p, err := cfg.policyOf(cfg.filterDoc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is a worker that records what reaches it: bodies and request
// targets, as received.
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	targets []string
	hits    atomic.Int64
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.hits.Add(1)
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, b)
	rc.targets = append(rc.targets, r.RequestURI)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// lastTarget is the request target of the last request received.
func (rc *recorder) lastTarget() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.targets) == 0 {
		return ""
	}
	return rc.targets[len(rc.targets)-1]
}

func (rc *recorder) last() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) == 0 {
		return nil
	}
	return rc.bodies[len(rc.bodies)-1]
}

func scrape(t testing.TB, admin string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// scrapeSettled scrapes once the sidecar has accounted for n requests in
// all (kvgate_sidecar_requests_total over its outcomes), or after 5 s.
// A request's outcome is counted after its answer of known length has
// reached the client (the answer goes first), so a scrape straight after
// the last answer can miss its count.
func scrapeSettled(t testing.TB, admin string, n int) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := scrape(t, admin)
		sum := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "kvgate_sidecar_requests_total{") {
				sum += v
			}
		}
		if int(sum) == n || time.Now().After(deadline) {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func post(t testing.TB, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

func TestFlags(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "TRTLLM_TRUST_KV_HINTS" {
				return v
			}
			return ""
		}
	}
	// -upstream is required; every case below adds it first.
	parseFlags := func(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
		return parseFlags(append([]string{"-upstream", "echo"}, args...), getenv, stderr)
	}
	def := filterspec.DefaultConfig()
	cfg, err := parseFlags(nil, env(""), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := firstPolicy(t, cfg); cfg.Listen != "127.0.0.1:8080" || cfg.Admin != "127.0.0.1:9090" || !reflect.DeepEqual(p.filter, def) ||
		p.maxBody() != 4<<20 || cfg.IdleTimeout != 5*time.Minute || cfg.MaxConnections < 64 {
		t.Fatalf("defaults: %+v %+v", cfg, p)
	}
	// The guest is handed exactly the configuration checked here.
	for _, args := range [][]string{nil, {"-filter-config", `{"exclude_paths":["/healthz","/static/*"]}`, "-trust-kv-hints"}} {
		cfg, err := parseFlags(args, env(""), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		p := firstPolicy(t, cfg)
		if back, err := filterspec.ParseConfig(p.json); err != nil || !bytes.Equal(back.JSON(), p.filter.JSON()) {
			t.Fatalf("%q: the guest would read %s as %+v (%v), not %+v", args, p.json, back, err, p.filter)
		}
	}
	with := func(f func(*filterspec.Config)) filterspec.Config { c := def; f(&c); return c }
	f := filepath.Join(t.TempDir(), "c.json")
	_ = os.WriteFile(f, []byte(`{"max_depth":64,"max_body_bytes":1000}`), 0o600)
	senders := `{"trusted_senders":[{"principal":"spiffe://cluster.local/ns/llm/sa/router"}]}`
	withSenders := func(trust bool) filterspec.Config {
		c, err := filterspec.ParseConfig([]byte(senders))
		if err != nil {
			t.Fatal(err)
		}
		c.TrustKVHints = trust
		return c
	}
	trusted := with(func(c *filterspec.Config) { c.TrustKVHints = true })
	for _, c := range []struct {
		args   []string
		env    string
		want   filterspec.Config
		source string // trust_source in the start-up log
		warn   bool   // the environment was set but did not decide
	}{
		{nil, "", def, "default", false},
		{nil, "1", trusted, "env TRTLLM_TRUST_KV_HINTS", false},
		// Only the value 1 turns trust on, as in the worker.
		{nil, "TRUE", def, "default", true},
		{nil, "true", def, "default", true},
		{nil, "yes", def, "default", true},
		{nil, " 1", def, "default", true},
		{nil, "0", def, "default", false},
		// An explicit false always wins over the environment.
		{[]string{"-trust-kv-hints=false"}, "1", def, "flag", true},
		{[]string{"-filter-config", `{"trust_kv_hints":false}`}, "1", def, "filter-config", true},
		{[]string{"-filter-config", `{"trust_kv_hints":true}`, "-trust-kv-hints=false"}, "1", def, "flag", true},
		{[]string{"-filter-config", `{"trust_kv_hints":true}`}, "", trusted, "filter-config", false},
		{[]string{"-filter-config", `{"trust_kv_hints":false}`, "-trust-kv-hints"}, "", trusted, "flag", false},
		{[]string{"-trust-kv-hints"}, "", trusted, "flag", false},
		// trusted_senders is explicit: the prototype switch in the
		// environment does not widen it to every sender.
		{[]string{"-filter-config", senders}, "1", withSenders(false), "filter-config", true},
		{[]string{"-filter-config", senders}, "", withSenders(false), "filter-config", false},
		{[]string{"-filter-config", senders, "-trust-kv-hints=false"}, "1", withSenders(false), "flag", true},
		{[]string{"-filter-config", "@" + f, "-trust-kv-hints"}, "",
			with(func(c *filterspec.Config) { c.MaxDepth, c.MaxBodyBytes, c.TrustKVHints = 64, 1000, true }), "flag", false},
		{[]string{"-filter-config", "@" + f, "-max-body-bytes", "2000"}, "",
			with(func(c *filterspec.Config) { c.MaxDepth, c.MaxBodyBytes = 64, 2000 }), "default", false},
		{[]string{"-max-body-bytes", "77"}, "", with(func(c *filterspec.Config) { c.MaxBodyBytes = 77 }), "default", false},
		{[]string{"-max-body-bytes", strconv.Itoa(filterspec.MaxMaxBodyBytes)}, "", with(func(c *filterspec.Config) { c.MaxBodyBytes = filterspec.MaxMaxBodyBytes }), "default", false},
	} {
		cfg, err := parseFlags(c.args, env(c.env), io.Discard)
		if err != nil {
			t.Errorf("%q env %q: %v", c.args, c.env, err)
			continue
		}
		p := firstPolicy(t, cfg)
		if !reflect.DeepEqual(p.filter.TrustedSenders.Rules(), c.want.TrustedSenders.Rules()) {
			t.Errorf("%q env %q: trusted_senders %+v, want %+v", c.args, c.env, p.filter.TrustedSenders.Rules(), c.want.TrustedSenders.Rules())
		}
		// JSON writes out every setting, so it compares them all.
		if got, want := p.filter.JSON(), c.want.JSON(); !bytes.Equal(got, want) || p.maxBody() != int64(c.want.MaxBodyBytes) {
			t.Errorf("%q env %q: %+v (max body %d), want %+v", c.args, c.env, p.filter, p.maxBody(), c.want)
		}
		if p.trust.source != c.source || (p.trust.ignored != "") != c.warn {
			t.Errorf("%q env %q: trust from %q (env ignored: %q), want %q (ignored %v)", c.args, c.env, p.trust.source, p.trust.ignored, c.source, c.warn)
		}
		// The guest reads back what was decided.
		if back, err := filterspec.ParseConfig(p.json); err != nil || back.TrustKVHints != c.want.TrustKVHints ||
			back.TrustedSenders.Len() != c.want.TrustedSenders.Len() {
			t.Errorf("%q env %q: the guest gets %s (%v)", c.args, c.env, p.json, err)
		}
	}
	// Trust for every sender and for some: a contradiction, refused.
	if _, err := parseFlags([]string{"-filter-config", senders, "-trust-kv-hints"}, env(""), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "-trust-kv-hints") || !strings.Contains(err.Error(), "trusted_senders") {
		t.Errorf("-trust-kv-hints with trusted_senders: %v", err)
	}
	for _, bad := range [][]string{
		{"-upstream", "ftp://x"}, {"-listen", "nope"}, {"-pool-size", "-1"}, {"-max-body-bytes", "0"},
		{"-filter-config", "[1]"}, {"-filter", "/no/such.wasm"}, {"-bogus"}, {"extra"}, {"-idle-timeout", "-1s"}, {"-max-connections", "0"},
	} {
		if _, err := parseFlags(bad, env(""), io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// A guest that refuses its configuration stops start-up with its message.
// The sidecar checks -filter-config itself, so this takes a configuration
// that did not come from the flags.
func TestInvalidFilterConfigStopsStartup(t *testing.T) {
	cfg, err := parseFlags([]string{"-cache-dir", testCache(t), "-upstream", "echo"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := firstPolicy(t, cfg)
	p.json = []byte(`{"no_such_field":1}`)
	_, err = newServer(context.Background(), cfg, p, "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "no_such_field") {
		t.Fatalf("err = %v", err)
	}
}

// A trapping guest: 503 JSON, counted, nothing forwarded; the instance is
// replaced and the next requests go through.
func TestTrapFailsClosed(t *testing.T) {
	_, guest := artifacts(t)
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	l, _, _ := startInProcess(t, "-filter", guest, "-upstream", worker.URL, "-pool-size", "2")
	resp, body := post(t, "http://"+l.API+"/v1/chat/completions", `{"a":1}`, "X-Test-Action", "trap")
	if resp.StatusCode != 503 || !json.Valid(body) || !strings.Contains(string(body), `"code":503`) {
		t.Fatalf("trap: %d %s", resp.StatusCode, body)
	}
	if rec.hits.Load() != 0 {
		t.Fatal("the failed request reached the worker")
	}
	if m := scrape(t, l.Admin); m[`kvgate_filter_failures_total{reason="trap"}`] != 1 {
		t.Fatalf("failures metric: %v", m[`kvgate_filter_failures_total{reason="trap"}`])
	}
	for i := 0; i < 10; i++ {
		resp, _ := post(t, "http://"+l.API+"/v1/chat/completions", `{"a":1}`, "X-Test-Action", "upper")
		if resp.StatusCode != 200 {
			t.Fatalf("after trap: %d", resp.StatusCode)
		}
	}
	if rec.hits.Load() != 10 || string(rec.last()) != `{"A":1}` {
		t.Fatalf("hits=%d last=%s", rec.hits.Load(), rec.last())
	}
	// The replacement is started in the background; it must arrive.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape(t, l.Admin)
		if m[`kvgate_wasm_instances_replaced_total{reason="trap"}`] != 1 {
			t.Fatalf("replaced instances: %v, want 1", m[`kvgate_wasm_instances_replaced_total{reason="trap"}`])
		}
		if m[`kvgate_wasm_instances`] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool after trap: %v instances, want 2", m[`kvgate_wasm_instances`])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that announces a body and stops sending gets a 408 once
// -idle-timeout passes without data, and nothing reaches the worker; a
// kept-alive connection that stays idle that long is closed. A body whose
// parts each come within the timeout, though the whole takes longer, goes
// through.
func TestIdleTimeout(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	const idle = 300 * time.Millisecond
	l, _, _ := startInProcess(t, "-upstream", worker.URL, "-idle-timeout", idle.String())
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", l.API)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	c, br := dial()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n{\"prompt\":\"")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !json.Valid(body) || !strings.Contains(string(body), `"code":408`) {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, body)
	}
	if waited := time.Since(start); waited < idle*3/4 || waited > idle+5*time.Second {
		t.Fatalf("408 after %v, idle timeout %v", waited, idle)
	}
	// A body sent in parts, each within the timeout, the whole longer.
	c, br = dial()
	parts := []string{`{"a":"`, strings.Repeat("x", 1000), `","kv_hints":1`, `}`}
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(strings.Join(parts, "")))
	for _, p := range parts {
		time.Sleep(idle / 2)
		_, _ = io.WriteString(c, p)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(rec.last()) != `{"a":"`+strings.Repeat("x", 1000)+`"}` {
		t.Fatalf("slow body: %d, worker got %.80s", resp.StatusCode, rec.last())
	}
	// The connection is kept alive, then closed once idle.
	idleStart := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if waited := time.Since(idleStart); waited < idle*3/4 {
		t.Fatalf("idle connection closed after %v", waited)
	}
	if rec.hits.Load() != 1 {
		t.Fatalf("worker saw %d requests, want the slow one only", rec.hits.Load())
	}
	if m := scrape(t, l.Admin); m[`kvgate_sidecar_requests_total{outcome="body_timeout"}`] != 1 {
		t.Fatalf("body_timeout outcome: %v", m[`kvgate_sidecar_requests_total{outcome="body_timeout"}`])
	}
}

func TestBodyLimitAndEcho(t *testing.T) {
	l, _, _ := startInProcess(t, "-max-body-bytes", "1000")
	resp, body := post(t, "http://"+l.API+"/v1/chat/completions", `{"kv_hints":{"x":1},"a":2}`)
	if resp.StatusCode != 200 || string(body) != `{"a":2}` || resp.Header.Get("X-Echo-Path") != "/v1/chat/completions" {
		t.Fatalf("echo: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	big := `{"a":"` + strings.Repeat("x", 2000) + `"}`
	resp, body = post(t, "http://"+l.API+"/v1/chat/completions", big)
	if resp.StatusCode != 413 || !json.Valid(body) {
		t.Fatalf("big: %d %s", resp.StatusCode, body)
	}
	// Chunked, no Content-Length.
	req, _ := http.NewRequest("POST", "http://"+l.API+"/x", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 413 {
		t.Fatalf("chunked big: %d", r2.StatusCode)
	}
	m := scrape(t, l.Admin)
	if m[`kvgate_bodies_rejected_total{status="413"}`] != 2 || m[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] != 1 {
		t.Fatalf("metrics: 413=%v untrusted=%v", m[`kvgate_bodies_rejected_total{status="413"}`], m[`trtllm_kv_hints_ignored_total{reason="untrusted"}`])
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		r, err := http.Get("http://" + l.Admin + p)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, r, err)
		}
		r.Body.Close()
	}
}

// Server-sent events reach the client as the worker produces them.
func TestStreamsResponses(t *testing.T) {
	second := make(chan struct{})
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-second:
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	}))
	defer worker.Close()
	l, _, _ := startInProcess(t, "-upstream", worker.URL)
	resp, err := http.Post("http://"+l.API+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	close(second)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("rest %q", rest)
	}
}

// A client that goes away cancels the upstream request.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	}))
	defer worker.Close()
	l, _, _ := startInProcess(t, "-upstream", worker.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+l.API+"/v1/completions", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request not cancelled")
	}
}

// SIGTERM (here: the run context) drains a request in flight.
func TestGracefulDrain(t *testing.T) {
	entered := make(chan struct{})
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	}))
	defer worker.Close()
	l, stop, done := startInProcess(t, "-upstream", worker.URL)
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+l.API+"/x", "application/json", strings.NewReader(`{}`))
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	stop()
	if b := <-got; b != "done" {
		t.Fatalf("in-flight request: %q", b)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := http.Post("http://"+l.API+"/x", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Fatal("still serving after drain")
	}
}

// 64 concurrent clients through the real module (run with -race); every
// hint is removed and the counter adds up exactly.
func TestConcurrentClients(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	l, _, _ := startInProcess(t, "-upstream", worker.URL)
	const clients, each = 64, 10
	var wg sync.WaitGroup
	var bad atomic.Int64
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body := fmt.Sprintf(`{"c":%d,"kv_hints":{"protocol_version":"0.1"},"i":%d}`, c, i)
				resp, err := cl.Post("http://"+l.API+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					bad.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d failed requests", bad.Load())
	}
	rec.mu.Lock()
	for _, b := range rec.bodies {
		if bytes.Contains(b, []byte("kv_hints")) {
			t.Errorf("hint forwarded: %s", b)
		}
	}
	rec.mu.Unlock()
	if m := scrape(t, l.Admin); m[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] != clients*each || rec.hits.Load() != clients*each {
		t.Fatalf("untrusted=%v hits=%d", m[`trtllm_kv_hints_ignored_total{reason="untrusted"}`], rec.hits.Load())
	}
}
