package arena

import (
	"testing"
	"unsafe"
)

func TestArena(t *testing.T) {
	var a Arena
	p1 := a.Alloc(10)
	p2 := a.Alloc(0)
	p3 := a.Alloc(100 << 10) // forces a new chunk; p1's chunk is retired
	if p1%align != 0 || p2%align != 0 || p3%align != 0 {
		t.Fatal("unaligned")
	}
	for _, c := range []struct {
		p  uintptr
		n  int
		ok bool
	}{{p1, 10, true}, {p1 + 2, 8, true}, {p1, 11, false}, {p3, 100 << 10, true}, {p3 + 1, 100 << 10, false}, {p2, 0, true}, {12345, 1, false}} {
		b, ok := a.Lookup(c.p, c.n)
		if ok != c.ok || (ok && c.n > 0 && uintptr(unsafe.Pointer(&b[0])) != c.p) || (ok && len(b) != c.n) {
			t.Errorf("Lookup(%x,%d) = %d bytes, %v", c.p, c.n, len(b), ok)
		}
	}
	if len(a.retired) != 1 {
		t.Fatalf("retired %d", len(a.retired))
	}
	a.Reset()
	if _, ok := a.Lookup(p3, 1); ok {
		t.Fatal("block survived Reset")
	}
	capBefore := a.Cap()
	if n := testing.AllocsPerRun(100, func() { a.Reset(); a.Alloc(1 << 10); a.Alloc(50 << 10) }); n != 0 {
		t.Fatalf("%v allocations in steady state", n)
	}
	if a.Cap() != capBefore {
		t.Fatal("chunk changed")
	}
	a.Reset()
	a.Reserve(1 << 20)
	if a.Cap() < 1<<20 {
		t.Fatal("Reserve")
	}
	if n := testing.AllocsPerRun(10, func() { a.Reset(); a.Alloc(1 << 20) }); n != 0 {
		t.Fatalf("%v allocations after Reserve", n)
	}
}
