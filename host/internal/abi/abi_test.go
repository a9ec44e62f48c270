package abi

import "testing"

func TestSpliceAndPropertyKey(t *testing.T) {
	for _, c := range []struct {
		start, size uint64
		want        string
	}{{0, 5, "X"}, {0, 0, "Xhello"}, {5, 0, "helloX"}, {99, 99, "helloX"}, {1, 3, "hXo"}, {0, 1 << 32, "X"}} {
		if got := string(splice([]byte("hello"), c.start, c.size, []byte("X"), nil)); got != c.want {
			t.Errorf("splice(%d,%d) = %q, want %q", c.start, c.size, got, c.want)
		}
	}
	// The caller's memory is used when it is given, and never aliases the input.
	pool := make([]byte, 16)
	if got := splice([]byte("hello"), 1, 3, []byte("X"), func(n int) []byte { return pool[:n] }); string(got) != "hXo" || &got[0] != &pool[0] {
		t.Errorf("splice with alloc = %q (own memory: %v)", got, &got[0] == &pool[0])
	}
	if got := splice([]byte("hello"), 0, 0, []byte("X"), func(n int) []byte { return nil }); string(got) != "Xhello" {
		t.Errorf("splice with a failing alloc = %q", got)
	}
	for in, want := range map[string]string{"request\x00path\x00": "request.path", "request\x00path": "request.path", "plugin_name": "plugin_name"} {
		if got := propertyKey([]byte(in)); got != want {
			t.Errorf("propertyKey(%q) = %q", in, got)
		}
	}
}
