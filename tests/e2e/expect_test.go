package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// expectAnswer is what a client that sent Expect: 100-continue received.
type expectAnswer struct {
	Continues int // interim 100 Continue answers
	Status    int // the final status
	Took      time.Duration
}

// sendExpecting sends the headers of a request with Expect: 100-continue,
// waits up to a second for 100 Continue (as curl does) and sends the body
// after it or after the wait, then reads every interim answer and the
// final one.
func sendExpecting(addr, key string, body []byte, announce int) (expectAnswer, error) {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return expectAnswer{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", CaseHeader, key, announce); err != nil {
		return expectAnswer{}, err
	}
	br := bufio.NewReader(c)
	tp := textproto.NewReader(br)
	var a expectAnswer
	// The status line of the next answer, or "" when none came within the
	// wait.
	next := func(wait time.Duration) (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		line, err := tp.ReadLine()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if _, err := tp.ReadMIMEHeader(); err != nil {
			return "", err
		}
		return line, nil
	}
	first, err := next(time.Second)
	if err != nil {
		return a, err
	}
	if first == "" || strings.HasPrefix(first, "HTTP/1.1 100 ") {
		if first != "" {
			a.Continues++
		}
		if _, err := c.Write(body); err != nil {
			return a, err
		}
		first = ""
	}
	for {
		line := first
		first = ""
		if line == "" {
			if line, err = next(10 * time.Second); err != nil {
				return a, err
			}
			if line == "" {
				return a, fmt.Errorf("no answer")
			}
		}
		var code int
		if _, err := fmt.Sscanf(line, "HTTP/1.1 %d", &code); err != nil {
			return a, fmt.Errorf("status line %q", line)
		}
		if code == http.StatusContinue {
			a.Continues++
			continue
		}
		a.Status, a.Took = code, time.Since(start)
		return a, nil
	}
}

// TestExpectContinue sends Expect: 100-continue through Envoy and the
// sidecar side by side, to uvicorn (which answers 100 when its app reads
// the body) and to a worker that never sends 100. Each host answers the
// client's Expect itself and forwards a whole body without it: the client
// gets one 100 at most, then the final status, at once; the worker never
// sees Expect. A body announced over the limit gets 413 without being
// read; the sidecar sends it no 100 (Envoy's connection manager sends its
// 100 before any filter runs: docs/spec.md, The worker connection).
func TestExpectContinue(t *testing.T) {
	bin := sidecarBinary(t)
	uv := startUvicorn(t, "h11")
	silent := startFailingWorker(t) // answers 200 "{}" and never 100
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"kv_hints":{"protocol_version":"0.1"}}`)
	for _, wk := range []struct{ name, addr string }{{"uvicorn", uv.Addr}, {"never-100", silent.Addr}} {
		t.Run(wk.name, func(t *testing.T) {
			port := envoytest.FreePort(t)
			startEnvoy(t, wk.addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
			sc := startSidecar(t, bin, wk.addr, `{}`, t.TempDir())
			for host, addr := range map[string]string{"envoy": fmt.Sprintf("127.0.0.1:%d", port), "sidecar": sc.API} {
				key := "expect/" + wk.name + "/" + host
				a, err := sendExpecting(addr, key, body, len(body))
				if err != nil {
					t.Fatalf("%s: %v", host, err)
				}
				if a.Continues != 1 || a.Status != 200 || a.Took > 500*time.Millisecond {
					t.Errorf("%s in front of %s: %d × 100 Continue, then %d after %v; want one 100, then 200 at once", host, wk.name, a.Continues, a.Status, a.Took)
				}
				if wk.name == "uvicorn" {
					recs := uv.Records(t, key)
					if len(recs) != 1 {
						t.Fatalf("%s: %d requests at the worker, want 1", host, len(recs))
					}
					if recs[0].Expect != nil {
						t.Errorf("%s forwarded Expect: %q to the worker", host, *recs[0].Expect)
					}
					if recs[0].KVHints != nil {
						t.Errorf("%s: the worker's model read kv_hints %v from an untrusted client", host, recs[0].KVHints)
					}
				}
				// Over the limit (4 MiB): 413 from the headers, the body unread.
				over, err := sendExpecting(addr, key+"/over", nil, 5<<20)
				if err != nil {
					t.Fatalf("%s over the limit: %v", host, err)
				}
				wantContinues := 0
				if host == "envoy" {
					wantContinues = 1
				}
				if over.Status != 413 || over.Continues != wantContinues || over.Took > 1500*time.Millisecond {
					t.Errorf("%s, body announced over the limit: %d × 100 Continue, then %d after %v; want %d, then 413", host, over.Continues, over.Status, over.Took, wantContinues)
				}
			}
			if t.Failed() {
				t.Logf("sidecar log:\n%s", tail(sc.log.String(), 20))
			}
		})
	}
}
