// Package syncbuf is a byte buffer that one goroutine writes while others
// read it: the output of a process or a logger under test. Tests import
// it; nothing in a binary does.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer whose methods may be called concurrently. The
// zero value is empty and ready.
type Buffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Writes returns how many calls to Write there were.
func (b *Buffer) Writes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

// Count returns how many times s occurs in what was written.
func (b *Buffer) Count(s string) int { return strings.Count(b.String(), s) }
