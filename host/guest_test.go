package host

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

var (
	guestOnce sync.Once
	guestWasm []byte
	guestErr  error
)

// testGuest builds testdata/guest (a Go proxy-wasm module) once per test
// binary.
func testGuest(t testing.TB) []byte {
	t.Helper()
	guestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kvgate-host-guest")
		if err != nil {
			guestErr = err
			return
		}
		out := filepath.Join(dir, "guest.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./testdata/guest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			guestErr = err
			guestWasm = b
			return
		}
		guestWasm, guestErr = os.ReadFile(out)
	})
	if guestErr != nil {
		t.Fatalf("build test guest: %v\n%s", guestErr, guestWasm)
	}
	return guestWasm
}

var (
	cacheOnce sync.Once
	cacheDir  string
)

// testCacheDir is one on-disk compilation cache for the whole test binary,
// so the guest is compiled once, not once per test.
func testCacheDir(t testing.TB) string {
	cacheOnce.Do(func() {
		d, err := os.MkdirTemp("", "kvgate-host-cache")
		if err != nil {
			t.Fatal(err)
		}
		cacheDir = d
	})
	return cacheDir
}

func newTestLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil))
}

func newTestHost(t testing.TB, opts Options) (*Host, *syncbuf.Buffer) {
	t.Helper()
	lb := &syncbuf.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 2
	}
	if opts.CacheDir == "" {
		opts.CacheDir = testCacheDir(t)
	}
	h, err := New(context.Background(), testGuest(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, lb
}

func testRequest(action string, body string) *Request {
	hd := http.Header{}
	if action != "" {
		hd.Set("X-Test-Action", action)
	}
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Remove", "gone")
	return &Request{
		Method: "POST", Path: "/v1/chat/completions?x=1", Authority: "worker:8000",
		Header: hd, Body: []byte(body), RemoteAddr: "127.0.0.1:5555", LocalAddr: "127.0.0.1:8080",
	}
}
