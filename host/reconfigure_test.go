package host

import (
	"context"
	"strings"
	"testing"
)

// Reconfigure swaps the plugin configuration under a running pool: new
// requests see the new one, an instance busy across the swap finishes and
// is replaced instead of reused, a configuration the guest rejects leaves
// the running one, and the pool keeps its size.
func TestReconfigure(t *testing.T) {
	h, _ := newTestHost(t, Options{PluginConfig: []byte(`{"v":1}`), PoolSize: 2})
	waitLive(t, h, 2)
	if got := mustFilter(t, h, "config", "").Header.Get("X-Config"); got != `{"v":1}` {
		t.Fatalf("before: %q", got)
	}
	busy, err := h.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reconfigure(context.Background(), []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if got := mustFilter(t, h, "config", "").Header.Get("X-Config"); got != `{"v":2}` {
			t.Fatalf("request %d after the swap saw %q", i, got)
		}
	}
	if !h.stale(busy) {
		t.Fatal("the instance busy across the swap is not stale")
	}
	h.release(busy, -1)
	err = h.Reconfigure(context.Background(), []byte("bad"))
	if err == nil || !strings.Contains(err.Error(), "invalid configuration: bad") {
		t.Fatalf("a rejected configuration: err = %v", err)
	}
	for i := 0; i < 4; i++ {
		if got := mustFilter(t, h, "config", "").Header.Get("X-Config"); got != `{"v":2}` {
			t.Fatalf("after a rejected configuration, request %d saw %q", i, got)
		}
	}
	waitLive(t, h, 2)
}
