package native

import (
	"runtime"
	"testing"
	"time"
)

// TestYieldByClock checks that a worker yields to the Go scheduler on the
// first hook once yieldEvery has passed since its last yield, however few
// hooks ran in between: counted in hooks (every 64th), a thread serving a
// few hundred requests a second went 40 ms without a yield, and sysmon
// took its P away on every tick (RATIONALE.md).
func TestYieldByClock(t *testing.T) {
	yields := 0
	gosched = func() { yields++ }
	defer func() { gosched = runtime.Gosched }()
	e := mustFake(t, `{}`)
	body := []byte(`{"model":"m"}`)
	request := func() {
		t.Helper()
		if x := e.request(withLength(len(body)), body, modeLength, nil); !x.forwarded {
			t.Fatalf("not forwarded: %+v", x.reply)
		}
	}
	request() // configures the Plugin: may outlast yieldEvery
	if yields == 0 {
		t.Fatal("first request: no yield, though the worker had never yielded")
	}
	yields = 1
	w := e.m.worker(e.slot)
	for range 3 {
		w.yielded = time.Now()
		request()
		// A request runs in microseconds; one that took longer than
		// yieldEvery (a loaded machine) rightly yields.
		if yields != 1 && time.Since(w.yielded) < yieldEvery {
			t.Fatalf("request within %v of a yield: %d yields, want 1", yieldEvery, yields)
		}
		yields = 1
		w.yielded = time.Now().Add(-yieldEvery)
		request()
		if yields != 2 {
			t.Fatalf("request %v after a yield: %d yields, want 2", yieldEvery, yields)
		}
		yields = 1
	}
}
