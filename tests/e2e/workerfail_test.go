package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/httperr"
)

// failingWorker is a worker that fails in the way each request's
// CaseHeader names, after reading the whole request:
//
//	reset           reset the connection (RST), no answer
//	close           close the connection (FIN), no answer
//	invalid-status  answer with the status line "HTTP/1.1 2000 OK"
//	cut-length      200 with Content-Length: 100, then 10 bytes and close
//	cut-chunked     200, chunked, one chunk of 10 bytes and close
type failingWorker struct {
	Addr string
	ln   net.Listener
}

func startFailingWorker(t *testing.T) *failingWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &failingWorker{Addr: ln.Addr().String(), ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go w.serve(c)
		}
	}()
	return w
}

func (w *failingWorker) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		switch req.Header.Get(CaseHeader) {
		case "reset":
			_ = c.(*net.TCPConn).SetLinger(0)
			return
		case "close":
			return
		case "invalid-status":
			_, _ = io.WriteString(c, "HTTP/1.1 2000 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		case "cut-length":
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"x\",")
			return
		case "cut-chunked":
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\na\r\ndata: {}\n\n\r\n")
			time.Sleep(50 * time.Millisecond)
			return
		default:
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		}
	}
}

// refusedAddr is a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", envoytest.FreePort(t))
}

// unansweredAddr is a loopback address whose listener never accepts and
// whose accept queue is full: a connection to it is neither refused nor
// established, and opening one times out.
func unansweredAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// A backlog of 0 holds one connection: fill it.
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c2, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c2.Close()
		t.Fatal("the full accept queue accepted another connection")
	}
	return addr
}

// failAnswer is what a client got from a host in front of a failing
// worker.
type failAnswer struct {
	Status      int
	ContentType string
	Body        string
	// Closed: the host closed the connection after the answer.
	Closed bool
	// Cut: the body ended before its framing said (short of its
	// Content-Length, or chunked without the last chunk).
	Cut  bool
	Took time.Duration
}

// askOn sends one request on c (a kept-alive connection) and reads the
// answer as far as it goes.
func askOn(c net.Conn, key string) (failAnswer, error) {
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	body := `{"model":"m","messages":[],"kv_hints":{"protocol_version":"0.1"}}`
	if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", CaseHeader, key, len(body), body); err != nil {
		return failAnswer{}, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		return failAnswer{}, err
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := failAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(b), Took: time.Since(start)}
	a.Cut = rerr != nil
	if resp.Close || a.Cut {
		a.Closed = true
	} else {
		// The host keeps the connection: a read must wait, not end.
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := br.ReadByte(); err != nil {
			var ne net.Error
			a.Closed = !(errorsAs(err, &ne) && ne.Timeout())
		}
	}
	return a, nil
}

func errorsAs(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

// TestWorkerFailures puts Envoy and the sidecar side by side in front of
// workers that fail in each way docs/spec.md ("The worker connection")
// decides, and checks that both give the client the same answer: the same
// status, an OpenAI-style JSON error where the client gets a body (so the
// OpenAI SDK reports it), the same end of a cut answer, in the same time.
func TestWorkerFailures(t *testing.T) {
	bin := sidecarBinary(t)
	fw := startFailingWorker(t)
	upstreams := map[string]string{"failing": fw.Addr, "refused": refusedAddr(t), "unanswered": unansweredAddr(t)}
	type host struct{ envoy, sidecar string }
	hosts := map[string]host{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, up := range upstreams {
		port := envoytest.FreePort(t)
		startEnvoy(t, up, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := startSidecar(t, bin, up, `{}`, t.TempDir())
			mu.Lock()
			hosts[name] = host{envoy: fmt.Sprintf("127.0.0.1:%d", port), sidecar: sc.API}
			mu.Unlock()
		}()
	}
	wg.Wait()
	jsonErr := func(status int, msg string) string {
		return string(httperr.Body(status, httperr.TypeServer, msg))
	}
	cases := []struct {
		name, upstream, key string
		want                failAnswer
		// slow: the answer takes two attempts at the connect timeout
		// (2 × 3 s), else it comes at once (well under Envoy's default
		// delayed close of 1 s).
		slow bool
	}{
		{"refused", "refused", "ok", failAnswer{Status: 502, ContentType: "application/json", Body: jsonErr(502, httperr.MsgWorkerUnavailable)}, false},
		{"connect timeout", "unanswered", "ok", failAnswer{Status: 502, ContentType: "application/json", Body: jsonErr(502, httperr.MsgWorkerTimeout)}, true},
		{"reset before answering", "failing", "reset", failAnswer{Status: 502, ContentType: "application/json", Body: jsonErr(502, httperr.MsgWorkerReset)}, false},
		{"closed before answering", "failing", "close", failAnswer{Status: 502, ContentType: "application/json", Body: jsonErr(502, httperr.MsgWorkerReset)}, false},
		{"invalid status line", "failing", "invalid-status", failAnswer{Status: 502, ContentType: "application/json", Body: jsonErr(502, httperr.MsgWorkerInvalid)}, false},
		{"cut with Content-Length", "failing", "cut-length", failAnswer{Status: 200, ContentType: "application/json", Body: `{"id":"x",`, Closed: true, Cut: true}, false},
		{"cut chunked", "failing", "cut-chunked", failAnswer{Status: 200, ContentType: "text/event-stream", Body: "data: {}\n\n", Closed: true, Cut: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := hosts[c.upstream]
			got := map[string]failAnswer{}
			var gmu sync.Mutex
			var wg sync.WaitGroup
			for name, addr := range map[string]string{"envoy": h.envoy, "sidecar": h.sidecar} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// On a kept-alive connection: first a request that
					// succeeds (where the worker can answer), then the
					// failing one.
					conn, err := net.Dial("tcp", addr)
					if err != nil {
						t.Error(err)
						return
					}
					defer conn.Close()
					if c.upstream == "failing" {
						if a, err := askOn(conn, "ok"); err != nil || a.Status != 200 || a.Closed {
							t.Errorf("%s: warm-up request: %+v %v", name, a, err)
							return
						}
					}
					a, err := askOn(conn, c.key)
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					gmu.Lock()
					got[name] = a
					gmu.Unlock()
				}()
			}
			wg.Wait()
			for name, a := range got {
				took := a.Took
				a.Took = 0
				want := c.want
				if want.Status >= 500 {
					// An error answer keeps the connection unless the host
					// must close it; both hosts must do the same.
					want.Closed = got["sidecar"].Closed
				}
				if a != want {
					t.Errorf("%s: got %+v\nwant %+v", name, a, want)
				}
				switch {
				case c.slow && (took < 5500*time.Millisecond || took > 9*time.Second):
					t.Errorf("%s: answered after %v, want two attempts at the 3s connect timeout", name, took)
				case !c.slow && took > 800*time.Millisecond:
					t.Errorf("%s: answered after %v, want at once", name, took)
				}
			}
			if len(got) == 2 && got["envoy"].Closed != got["sidecar"].Closed {
				t.Errorf("connection after the answer: envoy closed=%v, sidecar closed=%v", got["envoy"].Closed, got["sidecar"].Closed)
			}
		})
	}
}
