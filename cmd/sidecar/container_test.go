package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// proc is the built sidecar binary running with its own environment.
type proc struct {
	api, admin string
	cmd        *exec.Cmd
	logs       *syncbuf.Buffer
	done       chan struct{}
}

// startProc starts the binary with env as its whole environment (none for
// nil) and args
// after the listen and admin addresses, and waits for /readyz.
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	bin, _ := artifacts(t)
	api, admin := freeAddrPair(t)
	p := &proc{api: api, admin: admin, logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"-listen", p.api, "-admin", p.admin, "-log-flush", "0"}, args...)...)
	p.cmd.Env = append([]string{}, env...) // never nil: nil would inherit ours
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("sidecar log:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := get(p.admin, "/readyz"); code == 200 {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("sidecar exited during start-up: %v\n%s", p.cmd.ProcessState, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready:\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get returns the status of GET http://addr+path, 0 when it failed.
func get(addr, path string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A compile cache that cannot be used is a warning, not a failed start:
// the sidecar serves with the cache in memory. That covers a -cache-dir
// that cannot be created, and the default one when $HOME is unset or is
// not a directory (a container with a read-only root or no home).
func TestCacheDirFallsBackToMemory(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"-cache-dir not creatable", nil, []string{"-cache-dir", filepath.Join(plain, "cache")}, `"msg":"-cache-dir cannot be used; the compiled filter is cached in memory only"`},
		{"no HOME", nil, nil, `"msg":"no default -cache-dir; the compiled filter is cached in memory only"`},
		{"HOME is a file", []string{"HOME=" + plain}, nil, `"msg":"-cache-dir cannot be used; the compiled filter is cached in memory only"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProc(t, c.env, append([]string{"-upstream", "echo"}, c.args...)...)
			resp, body := post(t, "http://"+p.api+"/v1/x", `{"kv_hints":{},"a":1}`)
			if resp.StatusCode != 200 || string(body) != `{"a":1}` {
				t.Errorf("served %d %q", resp.StatusCode, body)
			}
			logs := p.logs.String()
			if !strings.Contains(logs, c.want) || !strings.Contains(logs, `"level":"WARN"`) {
				t.Errorf("no warning %s in:\n%s", c.want, logs)
			}
		})
	}
}

// Forgetting -upstream stops the binary before anything is compiled, with
// an error that names the flag and the way to get the echo worker; only an
// explicit -upstream echo starts it.
func TestUpstreamRequired(t *testing.T) {
	bin, _ := artifacts(t)
	listen, admin := freeAddrPair(t)
	cmd := exec.Command(bin, "-listen", listen, "-admin", admin, "-log-flush", "0")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2: %s", err, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "-upstream: missing") || !strings.Contains(out, "-upstream echo") || strings.Contains(out, compileMark) {
		t.Errorf("stderr: %s", out)
	}
	p := startProc(t, nil, "-upstream", "echo", "-cache-dir", testCache(t))
	if !strings.Contains(p.logs.String(), "-upstream echo: using the built-in echo worker") {
		t.Errorf("no echo worker line:\n%s", p.logs.String())
	}
}

// SIGTERM with -shutdown-delay: /readyz answers 503 at once while the API
// keeps serving new requests, with Connection: close; when the delay is
// over the sidecar drains and exits 0.
func TestShutdownDelay(t *testing.T) {
	p := startProc(t, nil, "-upstream", "echo", "-cache-dir", testCache(t), "-shutdown-delay", "5s")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		code, err := get(p.admin, "/readyz")
		if err != nil {
			t.Fatalf("admin stopped answering during the delay: %v", err)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, body := post(t, "http://"+p.api+"/v1/x", `{"kv_hints":{},"a":1}`)
	if resp.StatusCode != 200 || string(body) != `{"a":1}` {
		t.Errorf("during the delay: %d %q", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("a response during the delay keeps its connection open")
	}
	<-p.done
	if !p.cmd.ProcessState.Success() {
		t.Errorf("exit: %v", p.cmd.ProcessState)
	}
	logs := p.logs.String()
	i := strings.Index(logs, "serving new requests until the shutdown delay ends")
	j := strings.Index(logs, `"msg":"drained"`)
	if i < 0 || j < i {
		t.Errorf("want the delay, then the drain, in the log:\n%s", logs)
	}
}
