package linmem

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero"
)

// Both kinds of memory grow within their maximum, keep what was written,
// start zeroed, and refuse to grow past the maximum.
func TestMemories(t *testing.T) {
	const page = 64 << 10
	for name, m := range map[string]interface {
		Reallocate(uint64) []byte
		Free()
	}{"allocate": allocate(0, 8*page), "slice": &sliceMemory{max: 8 * page}} {
		b := m.Reallocate(page)
		if len(b) != page || !bytes.Equal(b, make([]byte, page)) {
			t.Fatalf("%s: first page: %d bytes, zeroed %v", name, len(b), bytes.Equal(b, make([]byte, page)))
		}
		copy(b, "hello")
		b = m.Reallocate(8 * page)
		if len(b) != 8*page || string(b[:5]) != "hello" || !bytes.Equal(b[page:], make([]byte, 7*page)) {
			t.Fatalf("%s: after growing: %d bytes, %q", name, len(b), b[:5])
		}
		b[8*page-1] = 1
		if m.Reallocate(9*page) != nil {
			t.Fatalf("%s: grew past its maximum", name)
		}
		m.Free()
	}
}

// A reservation never moves: growing keeps the address.
func TestReservationDoesNotMove(t *testing.T) {
	m := reserve(1 << 30)
	if m == nil {
		t.Skip("no reservations on this platform")
	}
	defer m.Free()
	a := unsafe.SliceData(m.Reallocate(64 << 10))
	b := m.Reallocate(512 << 20)
	if unsafe.SliceData(b) != a {
		t.Fatal("the memory moved")
	}
	b[len(b)-1] = 1 // committed and writable
}

// A module that grows its memory runs in these memories under wazero.
func TestWazero(t *testing.T) {
	// (memory (export "mem") 1 4)
	// (func (export "grow") (result i32) (memory.grow (i32.const 3)))
	mod := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x05\x01\x60\x00\x01\x7f" + // type () -> i32
		"\x03\x02\x01\x00" + // func 0: type 0
		"\x05\x04\x01\x01\x01\x04" + // memory min 1 max 4
		"\x07\x0e\x02\x04grow\x00\x00\x03mem\x02\x00" + // exports
		"\x0a\x08\x01\x06\x00\x41\x03\x40\x00\x0b") // i32.const 3, memory.grow
	ctx := WithAllocator(context.Background())
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	m, err := rt.InstantiateWithConfig(ctx, mod, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	mem := m.ExportedMemory("mem")
	mem.WriteByte(10, 42)
	r, err := m.ExportedFunction("grow").Call(ctx)
	if err != nil || r[0] != 1 || mem.Size() != 4<<16 {
		t.Fatalf("grow = %v, %v; size %d", r, err, mem.Size())
	}
	if v, _ := mem.ReadByte(10); v != 42 {
		t.Fatalf("byte 10 = %d after growing", v)
	}
	if !mem.WriteByte(4<<16-1, 1) || mem.WriteByte(4<<16, 1) {
		t.Fatal("bounds after growing")
	}
	r, err = m.ExportedFunction("grow").Call(ctx)
	if err != nil || int32(r[0]) != -1 {
		t.Fatalf("grow past the maximum = %v, %v; want -1", r, err)
	}
}
