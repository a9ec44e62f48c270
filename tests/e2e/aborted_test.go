package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// logLinesByRemote returns the JSON access lines of a log by remote (the
// client's address: Envoy replaces a client's X-Request-Id, so each
// request comes on a connection of its own).
func logLinesByRemote(log string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, l := range strings.Split(log, "\n") {
		i := strings.IndexByte(l, '{')
		if i < 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l[i:]), &m) != nil || m["path"] == nil || m["status"] == nil {
			continue
		}
		if r, ok := m["remote"].(string); ok {
			out[r] = append(out[r], m)
		}
	}
	return out
}

// abortCase is one request that leaves by an unusual path.
type abortCase struct {
	name string
	// upstream: "uvicorn" or "failing".
	upstream string
	headers  map[string]string
	stream   bool
	// leaveAfter: the client closes its connection this long after
	// sending (0: it reads the answer to its end); with stream, after the
	// first bytes of the answer.
	leaveAfter time.Duration
	// want is the sidecar's outcome and status.
	outcome string
	status  int
}

// TestEveryRequestAccounted sends requests that leave by every path but
// the plain one, through the sidecar and Envoy side by side: a client that
// leaves before the answer and one that leaves in the middle of a stream,
// a worker that cuts its answer, an Expect: 100-continue request. Each gets
// exactly one access line in each host, and in the sidecar one count, with
// an outcome that says what happened and the final status (never a 100).
func TestEveryRequestAccounted(t *testing.T) {
	bin := sidecarBinary(t)
	uv := startUvicorn(t, "h11")
	fw := startFailingWorker(t)
	type host struct {
		name, addr string
		log        func() string
		metrics    func() (string, error)
	}
	var hosts = map[string][]host{}
	for up, addr := range map[string]string{"uvicorn": uv.Addr, "failing": fw.Addr} {
		port := envoytest.FreePort(t)
		e := startEnvoy(t, addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
		sc := startSidecar(t, bin, addr, `{}`, t.TempDir(), "-log-flush", "0")
		hosts[up] = []host{
			{"envoy", fmt.Sprintf("127.0.0.1:%d", port), e.Log, nil},
			{"sidecar", sc.API, sc.log.String, sc.metrics},
		}
	}
	cases := []abortCase{
		{name: "client leaves before the answer", upstream: "uvicorn", headers: map[string]string{"X-Kvgate-Delay": "1"}, leaveAfter: 300 * time.Millisecond, outcome: "client_gone", status: 0},
		{name: "client leaves mid-stream", upstream: "uvicorn", headers: map[string]string{"X-Kvgate-Token-Delay": "0.3"}, stream: true, leaveAfter: time.Millisecond, outcome: "client_gone", status: 200},
		{name: "worker cuts its answer", upstream: "failing", headers: map[string]string{CaseHeader: "cut-length"}, outcome: "upstream_reset", status: 200},
		{name: "worker resets", upstream: "failing", headers: map[string]string{CaseHeader: "reset"}, outcome: "upstream_reset", status: 502},
		{name: "expect 100-continue", upstream: "uvicorn", headers: map[string]string{"Expect": "100-continue"}, outcome: "forwarded", status: 200},
	}
	before := map[string]series{}
	for up, hs := range hosts {
		page, err := hs[1].metrics()
		if err != nil {
			t.Fatal(err)
		}
		before[up] = parseAny(page)
	}
	remotes := map[string]string{} // case/host -> the client's address
	for _, c := range cases {
		for _, h := range hosts[c.upstream] {
			remote, err := abortRequest(h.addr, c)
			if err != nil {
				t.Errorf("%s via %s: %v", c.name, h.name, err)
			}
			remotes[c.name+"/"+h.name] = remote
		}
	}
	// The hosts notice a client that left and log at the end of the
	// request (the slowest ends with the worker's delayed answer), and
	// Envoy writes its access log once a second: wait for every line, then
	// a moment more for any second line.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		all := true
		for _, c := range cases {
			for _, h := range hosts[c.upstream] {
				all = all && len(logLinesByRemote(h.log())[remotes[c.name+"/"+h.name]]) > 0
			}
		}
		if all {
			break
		}
	}
	time.Sleep(1500 * time.Millisecond)
	for _, c := range cases {
		for _, h := range hosts[c.upstream] {
			lines := logLinesByRemote(h.log())[remotes[c.name+"/"+h.name]]
			if len(lines) != 1 {
				t.Errorf("%s via %s: %d access lines from %s, want exactly 1\n%s", c.name, h.name, len(lines), remotes[c.name+"/"+h.name], tail(h.log(), 12))
				continue
			}
			l := lines[0]
			t.Logf("%s via %s: status %v, %s", c.name, h.name, l["status"], attr(l, map[string]string{"envoy": "details", "sidecar": "outcome"}[h.name]))
			if h.name == "sidecar" {
				if attr(l, "outcome") != c.outcome || attr(l, "status") != fmt.Sprint(c.status) {
					t.Errorf("%s via the sidecar: outcome %q status %v, want %q %d", c.name, attr(l, "outcome"), l["status"], c.outcome, c.status)
				}
			} else if c.status != 0 && attr(l, "status") != fmt.Sprint(c.status) {
				t.Errorf("%s via Envoy: status %v, want %d", c.name, l["status"], c.status)
			}
		}
	}
	// One count per request, by outcome.
	want := map[string]map[string]float64{}
	for _, c := range cases {
		if want[c.upstream] == nil {
			want[c.upstream] = map[string]float64{}
		}
		want[c.upstream][c.outcome]++
	}
	for up, hs := range hosts {
		page, err := hs[1].metrics()
		if err != nil {
			t.Fatal(err)
		}
		d := parseAny(page).delta(before[up])
		total := 0.0
		for k, v := range d {
			if strings.HasPrefix(k, "kvgate_sidecar_requests_total{") {
				total += v
			}
		}
		n := 0.0
		for o, v := range want[up] {
			n += v
			if got := d[`kvgate_sidecar_requests_total{outcome="`+o+`"}`]; got != v {
				t.Errorf("sidecar in front of %s: kvgate_sidecar_requests_total{outcome=%q} rose by %v, want %v", up, o, got, v)
			}
		}
		if total != n {
			t.Errorf("sidecar in front of %s: %v requests counted, want %v", up, total, n)
		}
	}
}

// abortRequest sends one request as c says, on a connection of its own,
// and leaves when c says. It returns the connection's local address.
func abortRequest(addr string, c abortCase) (string, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.LocalAddr().String(), abortOn(conn, c)
}

func abortOn(conn net.Conn, c abortCase) error {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":%v}`, c.stream)
	var b strings.Builder
	fmt.Fprintf(&b, "POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	for k, v := range c.headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	expect := c.headers["Expect"] != ""
	if !expect {
		b.WriteString(body)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	if expect {
		resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
		if err != nil || resp.StatusCode != http.StatusContinue {
			return fmt.Errorf("want 100 Continue first: %v", err)
		}
		if _, err := io.WriteString(conn, body); err != nil {
			return err
		}
	}
	switch {
	case c.stream:
		resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
		if err != nil {
			return err
		}
		one := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, one); err != nil {
			return err
		}
		time.Sleep(c.leaveAfter)
		return nil // the deferred Close leaves mid-stream
	case c.leaveAfter > 0:
		time.Sleep(c.leaveAfter)
		return nil
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}
