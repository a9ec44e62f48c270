package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRedactQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"no quotes":                          "no quotes",
		`a "b" c "d\"e" f`:                   `a "…" c "…" f`,
		`malformed HTTP response "{\"kv\"}"`: `malformed HTTP response "…"`,
		`trailing "unterminated \" more`:     `trailing "…"`,
		`ends in "\\"`:                       `ends in "…"`,
	} {
		if got := redactQuoted(in); got != want {
			t.Errorf("redactQuoted(%q) = %q, want %q", in, got, want)
		}
	}
}

// Each line net/http logs becomes one record with a fixed message and
// nothing a peer sent.
func TestNetLog(t *testing.T) {
	var buf bytes.Buffer
	l := newNetLogger(slog.New(slog.NewJSONHandler(&buf, nil)), "server")
	l.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=%v", "HTTP/1.1 200 OK\r\n\r\nsecret-1", nil)
	l.Printf("http: invalid Content-Length of %q", "secret-2")
	l.Printf("http: panic serving %v: %v\n%s", "1.2.3.4:5", "boom", "goroutine 1 [running]:")
	out := buf.String()
	if strings.Contains(out, "secret") || strings.Count(out, "\n") != 3 {
		t.Fatalf("records:\n%s", out)
	}
	for _, want := range []string{`"level":"WARN","msg":"the worker sent bytes on an idle connection`, `"detail":"http: invalid Content-Length of \"…\""`,
		`"level":"ERROR","msg":"net/http error","source":"server","detail":"http: panic serving 1.2.3.4:5: boom`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}

// A worker that writes a response on an idle kept-alive connection: the
// sidecar's transport reports it, and the sidecar logs that without any
// of the worker's bytes.
func TestUnsolicitedResponseNotLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const secret = "SECRET-WORKER-BYTES-4242"
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
				// Once the connection is idle in the sidecar's pool:
				// an answer to no request.
				time.Sleep(200 * time.Millisecond)
				body := `{"kv_hints":"` + secret + `"}`
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
				time.Sleep(2 * time.Second)
			}(c)
		}
	}()
	p := startBinaryProc(t, "-upstream", "http://"+ln.Addr().String())
	resp, body := post(t, "http://"+p.api+"/v1/chat/completions", `{"a":1}`)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` {
		t.Fatalf("request: %d %s", resp.StatusCode, body)
	}
	logs := waitForLines(t, p, "idle", 1)
	if strings.Contains(logs, secret) || strings.Contains(logs, "Unsolicited") {
		t.Fatalf("the worker's bytes reached the log:\n%s", logs)
	}
	if !strings.Contains(logs, `"level":"WARN","msg":"the worker sent bytes on an idle connection`) {
		t.Fatalf("no warning for the unsolicited response:\n%s", logs)
	}
}
