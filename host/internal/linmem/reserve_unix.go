//go:build linux || darwin

package linmem

import (
	"math"
	"syscall"
)

// mappedMemory is a linear memory in a private anonymous mapping of its
// maximum size: the first len bytes are readable and writable, the rest is
// reserved (PROT_NONE, charged to no one) until the memory grows into it.
type mappedMemory struct {
	mem       []byte // the whole reservation
	committed uint64 // bytes made accessible
}

func reserve(max uint64) *mappedMemory {
	if max == 0 || max > math.MaxInt {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return &mappedMemory{mem: b}
}

// Reallocate makes the first size bytes accessible and returns them; the
// address never changes. It returns nil when size is past the reservation
// or the system refuses the memory, which fails the guest's memory.grow.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.mem)) {
		return nil
	}
	if size > m.committed {
		// Wasm pages are 64 KiB, so size is a multiple of any system page.
		if err := syscall.Mprotect(m.mem[m.committed:size], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = size
	}
	return m.mem[:size:size]
}

// Free unmaps the memory. The module is closed: nothing runs in it.
func (m *mappedMemory) Free() {
	if m.mem != nil {
		_ = syscall.Munmap(m.mem)
		m.mem, m.committed = nil, 0
	}
}
