package main

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"
)

// Request bodies are read into pooled buffers, one pool per power-of-two
// size class from 4 KiB to 64 MiB, so that a stream of large bodies does
// not make the garbage collector churn through fresh buffers.
const (
	minClassBits = 12
	maxClassBits = 26
)

var bodyPools [maxClassBits - minClassBits + 1]sync.Pool

func sizeClass(n int) int {
	if n <= 1<<minClassBits {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassBits
}

// bodyBuf is one request's body, in a pooled buffer when b != nil.
type bodyBuf struct {
	b     *[]byte
	n     int
	class int
	done  atomic.Bool
}

func (b *bodyBuf) bytes() []byte {
	if b == nil || b.b == nil {
		return nil
	}
	return (*b.b)[:b.n]
}

// release gives the buffer back to its pool, once.
func (b *bodyBuf) release() {
	if b == nil || b.b == nil || !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.class >= 0 {
		bodyPools[b.class].Put(b.b)
	}
}

func getBuf(n int) (*[]byte, int) {
	c := sizeClass(n)
	if c >= len(bodyPools) {
		b := make([]byte, n)
		return &b, -1
	}
	if p, ok := bodyPools[c].Get().(*[]byte); ok {
		return p, c
	}
	b := make([]byte, 1<<(c+minClassBits))
	return &b, c
}

// readBody reads r's body, at most max+1 bytes: into a buffer of exactly
// the announced size when Content-Length is known and within the limit,
// else into a buffer grown as data arrives.
func readBody(r *http.Request, max int64) (*bodyBuf, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return &bodyBuf{}, nil
	}
	limit := max + 1
	if cl := r.ContentLength; cl > 0 && cl <= max {
		p, c := getBuf(int(cl))
		bb := &bodyBuf{b: p, class: c}
		n, err := io.ReadFull(r.Body, (*p)[:cl])
		bb.n = n
		if err != nil {
			bb.release()
			return nil, err
		}
		return bb, nil
	}
	// Unknown or over-long length: grow up to max+1 bytes.
	size := int64(32 << 10)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, limit)
	}
	size = min(size, limit)
	p, c := getBuf(int(size))
	bb := &bodyBuf{b: p, class: c}
	for int64(bb.n) < limit {
		if bb.n == len(*bb.b) {
			np, nc := getBuf(int(min(2*int64(len(*bb.b)), limit)))
			copy(*np, (*bb.b)[:bb.n])
			bb.release()
			bb = &bodyBuf{b: np, n: bb.n, class: nc}
		}
		buf := (*bb.b)[bb.n:min(int64(len(*bb.b)), limit)]
		m, err := r.Body.Read(buf)
		bb.n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			bb.release()
			return nil, err
		}
	}
	return bb, nil
}

// forwardBody is the body handed to the transport. Close releases the
// buffer, and it can come while the transport's writer still reads (the
// worker answered before reading the whole body, and ReverseProxy closes
// the body when it returns): reads and Close are serialised, and a read
// after Close fails, so a recycled buffer is never sent.
type forwardBody struct {
	mu     sync.Mutex
	r      *bytes.Reader
	buf    *bodyBuf
	closed bool
}

func (f *forwardBody) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errBodyClosed
	}
	return f.r.Read(p)
}

func (f *forwardBody) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		f.buf.release()
	}
	return nil
}

var errBodyClosed = errors.New("request body read after close")
