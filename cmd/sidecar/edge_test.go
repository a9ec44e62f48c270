package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// tunnelWorker is a worker that switches protocols whenever asked or not:
// it reads one request, answers 101 and then echoes every byte it gets. It
// records everything that reaches it, connection by connection.
type tunnelWorker struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []*bytes.Buffer
}

func startTunnelWorker(t *testing.T) *tunnelWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tw := &tunnelWorker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go tw.serve(c)
		}
	}()
	return tw
}

func (tw *tunnelWorker) URL() string { return "http://" + tw.ln.Addr().String() }

// recordingReader appends what it reads to a buffer under the worker's lock.
type recordingReader struct {
	r   io.Reader
	tw  *tunnelWorker
	buf *bytes.Buffer
}

func (rr recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	rr.tw.mu.Lock()
	rr.buf.Write(p[:n])
	rr.tw.mu.Unlock()
	return n, err
}

func (tw *tunnelWorker) serve(c net.Conn) {
	defer c.Close()
	buf := &bytes.Buffer{}
	tw.mu.Lock()
	tw.conns = append(tw.conns, buf)
	tw.mu.Unlock()
	br := bufio.NewReader(recordingReader{c, tw, buf})
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	_, _ = io.Copy(c, br)
}

// received is a copy of what each connection has received so far.
func (tw *tunnelWorker) received() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	var out []string
	for _, b := range tw.conns {
		out = append(out, b.String())
	}
	return out
}

// rawExchange sends a request on a fresh connection and returns the answer.
// With after, it then sends more bytes, as a client would after a protocol
// switch, and reports whether the sidecar closed the connection.
func rawExchange(t *testing.T, addr, request, after string) (resp *http.Response, body []byte, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	if after == "" {
		return resp, body, false
	}
	_, _ = io.WriteString(c, after) // may fail: the sidecar may have closed
	_, err = br.ReadByte()
	return resp, body, err == io.EOF || isReset(err)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// hintedBytes are what a client speaking WebSocket (or any tunnelled
// protocol) would send after a switch: a body with a hint that must never
// reach the worker unfiltered.
const hintedBytes = `{"kv_hints":{"protocol_version":"0.1","x":"tunnelled"}}`

// Upgrades and CONNECT are refused (with the connection closed), counted,
// and nothing of them reaches the worker, even one that answers 101; an
// ordinary request loses HTTP2-Settings on its way, and a worker answering
// it 101 gets 502, never a tunnel.
func TestRefusesProtocolSwitches(t *testing.T) {
	tw := startTunnelWorker(t)
	l, _, _ := startInProcess(t, "-upstream", tw.URL())
	body := `{"model":"m","kv_hints":{"protocol_version":"0.1"}}`
	for _, c := range []struct {
		name, request string
		status        int
	}{
		{"websocket", "GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", 400},
		{"h2c upgrade", fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
			"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Length: %d\r\n\r\n%s", len(body), body), 400},
		{"Connection: upgrade alone", "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, upgrade\r\n\r\n", 400},
		{"Upgrade alone", "GET /v1/models HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", 400},
		{"CONNECT", "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n", 405},
	} {
		resp, reply, closed := rawExchange(t, l.API, c.request, hintedBytes)
		if resp.StatusCode != c.status || !json.Valid(reply) || !strings.Contains(string(reply), fmt.Sprintf(`"code":%d`, c.status)) {
			t.Errorf("%s: %d %s, want %d and a JSON error", c.name, resp.StatusCode, reply, c.status)
		}
		if c.status == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", c.name)
		}
		if resp.Header.Get("Upgrade") != "" {
			t.Errorf("%s: the refusal invites an upgrade: %q", c.name, resp.Header.Get("Upgrade"))
		}
		if !closed {
			t.Errorf("%s: connection left open after the refusal", c.name)
		}
	}
	if got := tw.received(); len(got) != 0 {
		t.Fatalf("refused requests reached the worker: %q", got)
	}
	if m := scrape(t, l.Admin); m[`kvgate_sidecar_requests_total{outcome="unsupported_protocol"}`] != 5 {
		t.Fatalf("unsupported_protocol outcome: %v, want 5", m[`kvgate_sidecar_requests_total{outcome="unsupported_protocol"}`])
	}

	// No upgrade asked: forwarded without HTTP2-Settings, and the worker's
	// 101 ends in 502; the bytes sent next are never tunnelled.
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, reply, _ := rawExchange(t, l.API, req, hintedBytes)
	if resp.StatusCode != 502 || !json.Valid(reply) {
		t.Fatalf("worker answering 101: %d %s, want a 502 JSON error", resp.StatusCode, reply)
	}
	got := tw.received()
	if len(got) != 1 {
		t.Fatalf("worker connections: %q, want one", got)
	}
	fwd, err := http.ReadRequest(bufio.NewReader(strings.NewReader(got[0])))
	if err != nil {
		t.Fatalf("worker received %q: %v", got[0], err)
	}
	fb, _ := io.ReadAll(fwd.Body)
	for _, k := range []string{"Upgrade", "Connection", "Http2-Settings"} {
		if v, ok := fwd.Header[k]; ok {
			t.Errorf("forwarded %s: %q", k, v)
		}
	}
	if string(fb) != `{"model":"m"}` {
		t.Errorf("forwarded body %q", fb)
	}
	if strings.Contains(got[0], "kv_hints") || strings.Count(got[0], "HTTP/1.1") != 1 {
		t.Errorf("worker received more than the filtered request: %q", got[0])
	}
}

// More stalled clients than -max-connections: each stalled body gets its
// 408 (and the connection is closed) without sending the rest of what it
// announced, stalled headers are closed, the sidecar never holds more than
// the cap, and a client that comes after them all is served.
func TestStalledConnectionsAtTheCap(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	const limit = 4
	l, _, _ := startInProcess(t, "-upstream", worker.URL, "-idle-timeout", "1s", "-max-connections", fmt.Sprint(limit))
	type result struct {
		i      int
		status int
		body   string
		closed bool
		err    error
	}
	const bodies, headers = 6, 2
	results := make(chan result, bodies+headers)
	for i := 0; i < bodies+headers; i++ {
		c, err := net.Dial("tcp", l.API)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Generous: the 408 is due after about a second, or two for the
		// connections that wait for a slot first.
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		if i < bodies {
			// Content-Length well under net/http's 256 KiB drain bound:
			// it would wait for the rest before writing an answer.
			_, _ = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"prompt\":\"")
		} else {
			_, _ = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
		}
		go func(i int, c net.Conn) {
			br := bufio.NewReader(c)
			if i >= bodies {
				_, err := br.ReadByte()
				results <- result{i: i, closed: err == io.EOF || isReset(err), err: err}
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				results <- result{i: i, err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_, err = br.ReadByte()
			results <- result{i, resp.StatusCode, string(b), err == io.EOF || isReset(err), nil}
		}(i, c)
	}
	// The sidecar reaches its cap and stays at or under it.
	deadline := time.Now().Add(30 * time.Second)
	for seen := false; !seen; {
		n := scrape(t, l.Admin)["kvgate_sidecar_connections"]
		if n > limit {
			t.Fatalf("%v connections open, cap %d", n, limit)
		}
		seen = n == limit
		if !seen && time.Now().After(deadline) {
			t.Fatalf("never reached the cap: %v open", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A client after them all is served.
	cl := &http.Client{Timeout: 60 * time.Second}
	resp, err := cl.Post("http://"+l.API+"/v1/completions", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || rec.hits.Load() != 1 {
		t.Fatalf("client after the stalled ones: %d, worker hits %d", resp.StatusCode, rec.hits.Load())
	}
	for range bodies + headers {
		r := <-results
		switch {
		case r.i >= bodies && !r.closed:
			t.Errorf("stalled headers %d: connection not closed (%v)", r.i, r.err)
		case r.i < bodies && (r.err != nil || r.status != 408 || !strings.Contains(r.body, `"code":408`) || !r.closed):
			t.Errorf("stalled body %d: status %d %s closed=%v err=%v; want a 408 JSON error, then the connection closed", r.i, r.status, r.body, r.closed, r.err)
		}
	}
	if m := scrape(t, l.Admin); m[`kvgate_sidecar_requests_total{outcome="body_timeout"}`] != bodies {
		t.Fatalf("body_timeout %v, want %d", m[`kvgate_sidecar_requests_total{outcome="body_timeout"}`], bodies)
	}
	// Every slot but the served client's kept-alive one comes back.
	cl.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); scrape(t, l.Admin)["kvgate_sidecar_connections"] != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v connections still open", scrape(t, l.Admin)["kvgate_sidecar_connections"])
		}
	}
}

// chunkedRequest is a chunked POST whose trailer is the given fields.
func chunkedRequest(body, trailer string) string {
	return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"%x\r\n%s\r\n0\r\n%s\r\n", len(body), body, trailer)
}

// waitForLines waits until the sidecar's stderr holds n lines containing
// s, and returns it.
func waitForLines(t *testing.T, p *sidecarProc, s string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out := p.stderr.String()
		if strings.Count(out, s) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lines with %s, want %d:\n%s", strings.Count(out, s), s, n, out)
		}
	}
}

// A trailer that names how the message is framed, routed or read is the
// client's error: 400 JSON, counted, nothing forwarded, and no warning in
// the log (it is no trouble of the sidecar's). Another trailer field does
// not stop the request.
func TestForbiddenTrailers(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	p := startBinaryProc(t, "-upstream", worker.URL, "-log-flush", "0")
	body := `{"model":"m","kv_hints":{"protocol_version":"0.1"}}`
	bad := []string{"Content-Length: 5", "Transfer-Encoding: chunked", "Host: elsewhere", "Trailer: X-Y",
		"Content-Type: text/plain", "Content-Encoding: gzip"}
	for _, tr := range bad {
		resp, reply, _ := rawExchange(t, p.api, chunkedRequest(body, tr+"\r\n"), "")
		if resp.StatusCode != 400 || !json.Valid(reply) || !strings.Contains(string(reply), `"code":400`) {
			t.Errorf("trailer %q: %d %s, want a 400 JSON error", tr, resp.StatusCode, reply)
		}
	}
	if rec.hits.Load() != 0 {
		t.Fatalf("%d requests with a forbidden trailer reached the worker", rec.hits.Load())
	}
	resp, reply, _ := rawExchange(t, p.api, chunkedRequest(body, "X-Checksum: 1\r\n"), "")
	if resp.StatusCode != 200 || rec.hits.Load() != 1 || string(rec.last()) != `{"model":"m"}` {
		t.Fatalf("an ordinary trailer: %d %s, worker got %q", resp.StatusCode, reply, rec.last())
	}
	if m := scrape(t, p.admin); m[`kvgate_sidecar_requests_total{outcome="bad_request"}`] != float64(len(bad)) {
		t.Fatalf("bad_request outcome: %v, want %d", m[`kvgate_sidecar_requests_total{outcome="bad_request"}`], len(bad))
	}
	logs := waitForLines(t, p, `"msg":"request"`, len(bad)+1)
	if strings.Contains(logs, `"level":"WARN"`) || strings.Contains(logs, `"level":"ERROR"`) {
		t.Fatalf("the client's error was logged as the sidecar's trouble:\n%s", logs)
	}
}

// exclude_paths is decided on the request target exactly as it is
// forwarded: a raw '#' is refused, targets the worker gets in another form
// than they came are inspected, and the forwarded target is the one the
// filter saw, byte for byte (after the upstream's base path, if any).
func TestExclusionOnTheForwardedPath(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	fc := `{"exclude_paths":["/v1/models","/v1/{x}","/static/*"]}`
	hinted := `{"model":"m","kv_hints":{"protocol_version":"0.1"}}`
	const stripped = `{"model":"m"}`
	for _, base := range []string{"", "/base"} {
		l, _, _ := startInProcess(t, "-upstream", worker.URL+base, "-filter-config", fc)
		for _, c := range []struct {
			target    string
			status    int
			forwarded string // the target the worker gets, less the base path
			excluded  bool
		}{
			{"/v1/models#/../chat/completions", 400, "", false},
			{"/v1/models#", 400, "", false},
			{"/v1/models?x=1#f", 400, "", false},
			{"/v1/models", 200, "/v1/models", true},
			{"/v1/models?x=1", 200, "/v1/models?x=1", true},
			{"/static/a", 200, "/static/a", true},
			{"/v1/models/../chat/completions", 200, "/v1/models/../chat/completions", false},
			{"/v1/models%2F..%2Fchat%2Fcompletions", 200, "/v1/models%2F..%2Fchat%2Fcompletions", false},
			{"/v1/model%73", 200, "/v1/model%73", false},
			{"//v1/models", 200, "//v1/models", false},
			{"/static//a", 200, "/static//a", false},
			// Forwarded escaped, so not the excluded path.
			{"/v1/{x}", 200, "/v1/%7Bx%7D", false},
			// Absolute form: the worker gets the path.
			{"http://elsewhere/v1/models", 200, "/v1/models", true},
		} {
			hits := rec.hits.Load()
			req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", c.target, len(hinted), hinted)
			resp, reply, _ := rawExchange(t, l.API, req, "")
			if resp.StatusCode != c.status {
				t.Errorf("%s%s: %d %s, want %d", base, c.target, resp.StatusCode, reply, c.status)
				continue
			}
			if c.status != 200 {
				if !json.Valid(reply) || rec.hits.Load() != hits {
					t.Errorf("%s%s: %s, forwarded=%v; want a JSON error and nothing forwarded", base, c.target, reply, rec.hits.Load() != hits)
				}
				continue
			}
			want := stripped
			if c.excluded {
				want = hinted
			}
			if got := rec.lastTarget(); got != base+c.forwarded || string(rec.last()) != want {
				t.Errorf("%s%s: worker got %s with %s, want %s with %s", base, c.target, got, rec.last(), base+c.forwarded, want)
			}
		}
	}
}

// h2c with prior knowledge is refused in HTTP/2 (GOAWAY with
// HTTP_1_1_REQUIRED), counted, and nothing reaches the worker; a real
// HTTP/2 client reports it as such.
func TestRefusesH2CPriorKnowledge(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	l, _, _ := startInProcess(t, "-upstream", worker.URL)

	c, err := net.Dial("tcp", l.API)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	// The client preface and an empty SETTINGS frame.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("read: %v (after %q)", err, got)
	}
	// Frames: 3-byte length, type, flags, 4-byte stream id, payload.
	var types []byte
	var goaway []byte
	for p := got; len(p) >= 9; {
		n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
		if len(p) < 9+n {
			t.Fatalf("truncated frame in %q", got)
		}
		types = append(types, p[3])
		if p[3] == 0x7 {
			goaway = p[9 : 9+n]
		}
		p = p[9+n:]
	}
	if !bytes.Equal(types, []byte{0x4, 0x7}) || len(goaway) < 8 || !bytes.Equal(goaway[4:8], []byte{0, 0, 0, 0xd}) {
		t.Fatalf("answer %q: frame types %v, want SETTINGS then GOAWAY with HTTP_1_1_REQUIRED", got, types)
	}

	// Go's own HTTP/2 client, with prior knowledge.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Post("http://"+l.API+"/v1/chat/completions",
		"application/json", strings.NewReader(`{"kv_hints":{"protocol_version":"0.1"}}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("h2c client: %s, want an error", resp.Status)
	}
	if !strings.Contains(err.Error(), "HTTP_1_1_REQUIRED") {
		t.Fatalf("h2c client: %v, want HTTP_1_1_REQUIRED", err)
	}

	// PRI over HTTP/1.1 is no request either.
	resp, reply, _ := rawExchange(t, l.API, "PRI * HTTP/1.1\r\nHost: x\r\n\r\n", "")
	if resp.StatusCode != 405 || !json.Valid(reply) {
		t.Fatalf("PRI over HTTP/1.1: %d %s, want a 405 JSON error", resp.StatusCode, reply)
	}
	if rec.hits.Load() != 0 {
		t.Fatalf("%d refused requests reached the worker", rec.hits.Load())
	}
	// Counted once the handler returns, which can be after the client
	// has read the GOAWAY. The Go client may retry once: 3 or 4 refusals.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := scrape(t, l.Admin)[`kvgate_sidecar_requests_total{outcome="unsupported_protocol"}`]
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unsupported_protocol outcome: %v, want 3 or more", n)
		}
	}
}

// Headers over 60 KiB (Envoy's default bound) are refused with 431 and
// never forwarded; headers under it pass.
func TestHeaderSizeBound(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	l, _, _ := startInProcess(t, "-upstream", worker.URL)
	for _, c := range []struct {
		size   int
		status int
	}{{50 << 10, 200}, {70 << 10, 431}} {
		resp, _ := post(t, "http://"+l.API+"/v1/chat/completions", `{}`, "X-Big", strings.Repeat("a", c.size))
		if resp.StatusCode != c.status {
			t.Errorf("%d-byte header: %d, want %d", c.size, resp.StatusCode, c.status)
		}
	}
	if rec.hits.Load() != 1 {
		t.Fatalf("worker saw %d requests, want the one under the bound", rec.hits.Load())
	}
}
