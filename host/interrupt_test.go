package host

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/host/internal/instrument"
	"github.com/kvgate/kvgate/wasm"
)

// Both the test guest and the real filter run instrumented (package
// instrument tests the rewrite itself).
func TestInstrumentModules(t *testing.T) {
	for name, mod := range map[string][]byte{"guest": testGuest(t), "kvgate": wasm.Module} {
		h, err := New(context.Background(), mod, Options{PoolSize: 1, CacheDir: testCacheDir(t), Logger: newTestLogger()})
		if err != nil {
			t.Fatal(err)
		}
		interruptible := h.interruptible
		_ = h.Close(context.Background())
		if !interruptible {
			t.Fatalf("%s: host did not use the instrumented module", name)
		}
	}
}

// A module the rewrite cannot take runs with wazero's own termination,
// and the call timeout still holds.
func TestCallTimeoutWithoutInstrumentation(t *testing.T) {
	instrumentModule = func([]byte) ([]byte, error) { return nil, errors.New("test: no rewrite") }
	defer func() { instrumentModule = instrument.Instrument }()
	lb := &syncbuf.Buffer{}
	h, err := New(context.Background(), testGuest(t), Options{PoolSize: 1, CallTimeout: 200 * time.Millisecond, CacheDir: testCacheDir(t),
		Logger: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "test: no rewrite") {
		t.Fatalf("fallback not logged: %s", lb.String())
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	if h.interruptible {
		t.Fatal("instrumented")
	}
	if _, err := filter(t, h, "loop", ""); err == nil {
		t.Fatal("loop returned")
	}
	waitLive(t, h, 1)
	mustFilter(t, h, "", "{}")
}

// A looping guest is stopped even while the Go runtime keeps trying to
// stop the world: the guest reaches a Go safe point regularly.
func TestCallTimeoutUnderGC(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1, CallTimeout: 300 * time.Millisecond})
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer close(stop)
	start := time.Now()
	_, err := filter(t, h, "loop", "")
	var te *TrapError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("stopped after %v", el)
	}
	waitLive(t, h, 1)
	if h.replaced[reasonTimeout].Load() != 1 {
		t.Fatal("not counted as timeout")
	}
}
