package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A body announced over -max-body-bytes is refused from its headers,
// through the built binary over a real socket: the first response is 413
// (no 100 Continue for a client that sent Expect: 100-continue, and no
// wait for a body the client has not sent), the filter counts it as
// Envoy's would, nothing reaches the worker, and the connection is closed
// after the answer; the filter's own answer from the headers (415 for an
// encoded body) stands. A body within the limit still gets its 100 Continue,
// and a chunked body that runs over the limit gets 413 and a closed
// connection too.
func TestAnnouncedOversizeRefusedFromHeaders(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	const limit = 1000
	api, admin := startBinary(t, "-upstream", worker.URL, "-max-body-bytes", "1000")

	// dial opens a connection with a guard deadline: a server that waits
	// for the body fails the test instead of hanging it.
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", api)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	send := func(c net.Conn, s string) {
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
	}
	head := func(length int, extra string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(length) + "\r\n" + extra + "\r\n"
	}
	// refused reads the first response and checks that it is the
	// filter's 413 and that the server closes the connection after it.
	refused := func(name string, c net.Conn, br *bufio.Reader, status int) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no response before the body was sent: %v", name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code int } `json:"error"`
		}
		if resp.StatusCode != status || err != nil || json.Unmarshal(body, &e) != nil || e.Error.Code != status {
			t.Fatalf("%s: first response %d %q (%v), want %d", name, resp.StatusCode, body, err, status)
		}
		if !resp.Close {
			t.Errorf("%s: the %d does not say Connection: close", name, status)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("%s: connection not closed after the %d: read %d bytes, %v", name, status, n, err)
		}
	}

	c, br := dial()
	send(c, head(limit+1, "Expect: 100-continue\r\n"))
	refused("Expect: 100-continue", c, br, 413)

	c, br = dial()
	send(c, head(50<<20, ""))
	refused("headers only", c, br, 413)

	// The filter's answer from the headers stands, as in Envoy: an encoded
	// body is refused with 415 even when it is also too long.
	c, br = dial()
	send(c, head(50<<20, "Content-Encoding: gzip\r\n"))
	refused("encoded and too long", c, br, 415)

	c, br = dial()
	send(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	send(c, "7d0\r\n"+strings.Repeat("x", 2000)+"\r\n")
	refused("chunked over the limit", c, br, 413)

	// Within the limit, Expect: 100-continue is answered with 100 Continue
	// and the body goes through.
	c, br = dial()
	body := `{"model":"m","prompt":"hi"}`
	send(c, head(len(body), "Expect: 100-continue\r\n"))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("within the limit: first response %v %v, want 100 Continue", resp, err)
	}
	send(c, body)
	for resp.StatusCode == http.StatusContinue { // the worker's own 100 is relayed too
		if resp, err = http.ReadResponse(br, nil); err != nil {
			t.Fatalf("within the limit: %v", err)
		}
	}
	if resp.StatusCode != 200 {
		t.Fatalf("within the limit: %v", resp)
	}
	resp.Body.Close()

	if n := rec.hits.Load(); n != 1 {
		t.Fatalf("%d requests reached the worker, want 1", n)
	}
	m := scrape(t, admin)
	if got := m[`kvgate_bodies_rejected_total{status="413"}`]; got != 3 {
		t.Errorf("413s counted by the filter: %v, want 3", got)
	}
	if got := m[`kvgate_bodies_rejected_total{status="415"}`]; got != 1 {
		t.Errorf("415s counted by the filter: %v, want 1", got)
	}
	if got := m[`kvgate_sidecar_requests_total{outcome="local_reply"}`]; got != 4 {
		t.Errorf("local replies: %v, want 4", got)
	}
}
