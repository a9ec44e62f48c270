package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// tunnelWorker is a worker that opens every tunnel asked of it: it answers
// an upgrade request with 101 and a CONNECT with 200, then echoes what
// follows. It records what it saw, so a test can tell whether a host let
// the request through.
type tunnelWorker struct {
	Addr string
	mu   sync.Mutex
	seen []string // "METHOD upgrade=<Upgrade header>" per request
}

func startTunnelWorker(t *testing.T) *tunnelWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	w := &tunnelWorker{Addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					w.mu.Lock()
					w.seen = append(w.seen, req.Method+" upgrade="+req.Header.Get("Upgrade"))
					w.mu.Unlock()
					switch {
					case req.Header.Get("Upgrade") != "":
						fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", req.Header.Get("Upgrade"))
						_, _ = io.Copy(c, br)
						return
					case req.Method == http.MethodConnect:
						io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
						_, _ = io.Copy(c, br)
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
				}
			}()
		}
	}()
	return w
}

func (w *tunnelWorker) Seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// TestNoTunnels asks Envoy, with the committed bootstrap, and the sidecar,
// side by side, for every kind of tunnel (docs/spec.md, "No tunnels") in
// front of a worker that would open each: WebSocket and h2c upgrades, and
// CONNECT. Neither host may answer 101 or 200, and the worker must never
// see an upgrade request or a CONNECT, nor the bytes sent after.
func TestNoTunnels(t *testing.T) {
	bin := sidecarBinary(t)
	w := startTunnelWorker(t)
	port := envoytest.FreePort(t)
	startEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
	sc := startSidecar(t, bin, w.Addr, `{}`, t.TempDir())
	hosts := map[string]string{"envoy": fmt.Sprintf("127.0.0.1:%d", port), "sidecar": sc.API}
	const after = `{"kv_hints":{"protocol_version":"0.1"},"smuggled":true}`
	cases := []struct{ name, request string }{
		{"websocket", "GET /v1/realtime HTTP/1.1\r\nHost: worker\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"},
		{"websocket POST", "POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\n{}"},
		{"h2c", "GET / HTTP/1.1\r\nHost: worker\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"},
		{"custom upgrade", "POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\nConnection: upgrade\r\nUpgrade: kvgate-tunnel\r\nContent-Length: 2\r\n\r\n{}"},
		{"CONNECT", "CONNECT worker:443 HTTP/1.1\r\nHost: worker:443\r\n\r\n"},
	}
	for _, c := range cases {
		for host, addr := range hosts {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			// The request and, at once, bytes meant for the tunnel.
			if _, err := io.WriteString(conn, c.request+after); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.Fields(c.request)[0]})
			switch {
			case err != nil:
				t.Logf("%s via %s: no HTTP answer (%v)", c.name, host, err)
			case resp.StatusCode == http.StatusSwitchingProtocols || (c.name == "CONNECT" && resp.StatusCode/100 == 2):
				t.Errorf("%s via %s: %s: a tunnel was opened", c.name, host, resp.Status)
			default:
				t.Logf("%s via %s: %s", c.name, host, resp.Status)
			}
			conn.Close()
		}
	}
	time.Sleep(200 * time.Millisecond)
	for _, s := range w.Seen() {
		if !strings.HasSuffix(s, "upgrade=") || strings.HasPrefix(s, "CONNECT") {
			t.Errorf("the worker saw %q", s)
		}
	}
}
