// Package linmem gives wazero linear memories that live outside the Go
// heap, in a mapping reserved for the memory's maximum size at once.
//
// wazero's own linear memory is a Go slice that grows by allocating a
// larger one and copying: a filter that sets its buffers aside for a 64 MiB
// body limit at start-up grows its memory to about 130 MiB, one step at a
// time, and paid about 100 ms for the copies. In a reservation, growing is
// making more of it accessible: nothing moves, nothing is copied, and the
// pages the guest never touches (most of a buffer set aside for the
// largest body) are never backed by memory. A closed instance's memory
// goes back to the system at once, not at the next garbage collection.
//
// Where reserving is not possible (the platform, or the system refuses the
// mapping) memories are Go slices that grow by copying, as wazero's are.
package linmem

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
)

// WithAllocator returns ctx carrying the allocator; instantiate modules
// with it.
func WithAllocator(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(allocate))
}

// allocate returns a memory of up to max bytes: a reservation where the
// platform has them, else a slice.
func allocate(_, max uint64) experimental.LinearMemory {
	if m := reserve(max); m != nil {
		return m
	}
	return &sliceMemory{max: max}
}

// sliceMemory is a linear memory in the Go heap.
type sliceMemory struct {
	buf []byte
	max uint64
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	switch {
	case size > m.max:
		return nil
	case size <= uint64(cap(m.buf)):
		m.buf = m.buf[:size]
	default:
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)
	}
	return m.buf
}

func (m *sliceMemory) Free() { m.buf = nil }
