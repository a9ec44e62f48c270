package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// -check-config runs every check a start runs on the flags and the filter
// configuration, then exits: 0 with OK, 2 with the error, never serving.
func TestCheckConfig(t *testing.T) {
	bin, _ := artifacts(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-upstream", "http://127.0.0.1:8000", "-listen", ":8080", "-admin", ":9090"}, 0, "configuration OK"},
		{[]string{"-upstream", "echo", "-filter-config", `{"grpc":"refuse","exclude_paths":["/healthz"],"trusted_senders":[{"source_cidr":"10.8.0.0/16"}]}`}, 0, "configuration OK"},
		{[]string{"-upstream", "http://127.0.0.1:8000", "-filter-config", `{"trusted_senders":[{"source_cidr":"10.8.0.0/33"}]}`}, 2, "source_cidr"},
		{[]string{"-upstream", "http://127.0.0.1:8000", "-filter-config", `{"exclude_paths":["/a/../b"]}`}, 2, "exclude_paths"},
		{[]string{"-upstream", "http://127.0.0.1:8000", "-listen", ":8080", "-admin", ":8080"}, 2, `-admin ":8080": the same port as -listen`},
		{[]string{"-upstream", "http://127.0.0.1:8000", "-listen", "127.0.0.1:8080", "-admin", "0.0.0.0:8080"}, 2, "the same port as -listen"},
		{[]string{"-upstream", "llm:8000"}, 2, "-upstream"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, append([]string{"-check-config"}, c.args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("%q: exit %d, output %q; want %d and %q", c.args, code, out.String(), c.code, c.want)
		}
		if strings.Contains(out.String(), compileMark) {
			t.Errorf("%q: -check-config compiled the module: %s", c.args, out.String())
		}
	}
}

// The admin port may not be the API port where the two sockets would
// collide; distinct hosts on one port, or port 0, are fine.
func TestDistinctPorts(t *testing.T) {
	for _, c := range []struct {
		listen, admin string
		ok            bool
	}{
		{":8080", ":9090", true},
		{":8080", ":8080", false},
		{"127.0.0.1:8080", "127.0.0.1:8080", false},
		{"[::]:8080", "127.0.0.1:8080", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", true},
		{"127.0.0.1:0", "127.0.0.1:0", true},
	} {
		if err := checkDistinctPorts(c.listen, c.admin); (err == nil) != c.ok {
			t.Errorf("-listen %s -admin %s: %v, want ok=%v", c.listen, c.admin, err, c.ok)
		}
	}
}

// Durations in the log read as durations ("30s"), not as slog's JSON
// nanoseconds (30000000000).
func TestShutdownLogDurations(t *testing.T) {
	cfg, err := parseFlags([]string{"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-cache-dir", testCache(t), "-upstream", "echo",
		"-shutdown-delay", "10ms", "-drain-timeout", "30s", "-log-flush", "0"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan listeners, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, log, started) }()
	select {
	case <-started:
	case err := <-done:
		cancel()
		t.Fatalf("sidecar did not start: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shutdown_delay": "10ms", "timeout": "30s"}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for k, v := range want {
			if got, ok := rec[k]; ok {
				if got != v {
					t.Errorf("%s: %s = %v (%T), want %q", rec["msg"], k, got, got, v)
				}
				delete(want, k)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("no log line with %v:\n%s", want, buf.String())
	}
}
