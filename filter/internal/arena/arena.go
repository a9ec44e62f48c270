// Package arena hands out the guest memory that a proxy-wasm host fills
// through proxy_on_memory_allocate.
//
// The host asks for memory while the guest waits in a host call (for example
// proxy_get_buffer_bytes), writes into it and returns its address; the guest
// then reads it. Go memory that nothing references may be freed by the next
// garbage collection, so every block stays referenced by the Arena until
// Reset, which the guest calls before the next host call that returns memory.
// Blocks are carved from one reusable buffer, so in steady state handing
// memory to the host allocates nothing and cannot start a garbage collection.
package arena

import "unsafe"

// align is the alignment of every block.
const align = 8

// minChunk is the smallest buffer the arena allocates.
const minChunk = 64 << 10

// Arena is a bump allocator whose blocks live until Reset. The zero value is
// ready to use. It is not safe for concurrent use.
type Arena struct {
	buf     []byte   // current chunk
	off     int      // next free offset in buf
	retired [][]byte // earlier chunks with live blocks, kept until Reset
	blocks  []block  // blocks handed out since Reset
}

type block struct {
	addr uintptr
	b    []byte
}

// Reserve makes sure that a block of n bytes can be handed out after the
// next Reset without allocating. Call it between host calls only.
func (a *Arena) Reserve(n int) {
	if need := roundUp(n); need > len(a.buf) {
		if a.off > 0 {
			a.retired = append(a.retired, a.buf)
		}
		a.buf, a.off = make([]byte, need), 0
	}
}

// Alloc returns the address of a fresh block of n bytes (n may be 0) that
// stays valid until Reset.
func (a *Arena) Alloc(n int) uintptr {
	need := roundUp(n)
	if a.off+need > len(a.buf) {
		if a.off > 0 {
			a.retired = append(a.retired, a.buf)
		}
		size := max(need, 2*len(a.buf), minChunk)
		a.buf, a.off = make([]byte, size), 0
	}
	b := a.buf[a.off : a.off+n : a.off+n]
	addr := uintptr(unsafe.Pointer(&a.buf[a.off]))
	a.off += need
	a.blocks = append(a.blocks, block{addr, b})
	return addr
}

// Lookup returns the n bytes at addr, which must lie inside a block handed
// out since the last Reset; ok is false otherwise.
func (a *Arena) Lookup(addr uintptr, n int) (b []byte, ok bool) {
	if n == 0 {
		return nil, true
	}
	for i := len(a.blocks) - 1; i >= 0; i-- {
		blk := a.blocks[i]
		if addr >= blk.addr && addr-blk.addr <= uintptr(len(blk.b)) && uintptr(n) <= uintptr(len(blk.b))-(addr-blk.addr) {
			off := int(addr - blk.addr)
			return blk.b[off : off+n : off+n], true
		}
	}
	return nil, false
}

// Reset forgets every block. Slices returned by Lookup must no longer be
// used. The largest chunk is kept for reuse.
func (a *Arena) Reset() {
	a.off = 0
	clear(a.retired)
	a.retired = a.retired[:0]
	clear(a.blocks)
	a.blocks = a.blocks[:0]
}

// Cap is the size of the reusable chunk.
func (a *Arena) Cap() int { return len(a.buf) }

func roundUp(n int) int {
	if n <= 0 {
		return align
	}
	return (n + align - 1) &^ (align - 1)
}
