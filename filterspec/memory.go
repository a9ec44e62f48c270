package filterspec

import "github.com/kvgate/kvgate/kvhints"

// Memory is the linear memory the kvgate guest needs at a body limit, for
// a host that sizes its instances to it (the sidecar caps each instance's
// memory and replaces one that grew past its working set).
type Memory struct {
	// Reserved is what the guest sets aside when it is configured (see
	// OnConfigure): the block the host copies a body into, one byte
	// longer than the limit so that an over-long body shows, and the
	// rewriter's output, as long as the limit and an envelope's canonical
	// form (kvhints.Rewriter.Reserve). Both are held from then on,
	// whatever bodies come.
	Reserved uint64
	// Runtime is the allowance for the rest of a steady instance: the Go
	// runtime, heap and stacks, a few MiB (wasm's TestMemoryBounded).
	Runtime uint64
	// Hostile is how far past its working set a body within the limit
	// can grow an instance: a body nested as deep as it is long needs a
	// container stack of its length, which costs up to four times that in
	// linear memory once the heap has grown around it. Five times the
	// limit is allowed.
	Hostile uint64
}

// WorkingSet is what an instance holds whatever bodies within the limit
// come, hostile ones aside: Reserved plus Runtime.
func (m Memory) WorkingSet() uint64 { return m.Reserved + m.Runtime }

// Peak is the most a body within the limit can grow an instance to.
func (m Memory) Peak() uint64 { return m.WorkingSet() + m.Hostile }

// MemoryAt returns the guest's memory needs at a body limit of
// maxBodyBytes (Config.MaxBodyBytes).
func MemoryAt(maxBodyBytes int) Memory {
	n := uint64(max(maxBodyBytes, 0))
	return Memory{
		Reserved: uint64(CopyBlock(maxBodyBytes)) + n + kvhints.MaxCompactBytes,
		Runtime:  16 << 20,
		Hostile:  5 * n,
	}
}

// CopyBlock is the size of the block the guest asks the host glue to set
// aside for a body at a limit: one byte past it, so that a body over the
// limit is seen as such.
func CopyBlock(maxBodyBytes int) int { return maxBodyBytes + 1 }
