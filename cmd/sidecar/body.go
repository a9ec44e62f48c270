package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/bits"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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

// changedBodyKey carries, in the context a request is filtered with, where
// the body the filter writes goes: a *bodyBuf that changedBody fills.
type changedBodyKey struct{}

// changedBody is the host's BodyAlloc: the memory of a body the filter
// writes, from the pools, recorded in the request's changedBodyKey slot
// (the previous one, if the guest writes again, goes back to its pool).
func changedBody(ctx context.Context, n int) []byte {
	slot, _ := ctx.Value(changedBodyKey{}).(**bodyBuf)
	if slot == nil {
		return nil // the host allocates
	}
	(*slot).release()
	p, c := getBuf(n)
	*slot = &bodyBuf{b: p, n: n, class: c}
	return (*slot).bytes()
}

// firstChunk is the buffer a body whose length is unknown, or longer than
// this, starts in.
const firstChunk = 32 << 10

// idleTimer bounds the wait for each part of a body: set (the connection's
// read deadline) is moved to d from now before reading and again while data
// arrives, and cleared when the body is read. The zero value waits forever.
type idleTimer struct {
	set func(time.Time) error
	d   time.Duration
}

func (t idleTimer) arm() time.Time {
	if t.set == nil || t.d <= 0 {
		return time.Time{}
	}
	now := time.Now()
	_ = t.set(now.Add(t.d))
	return now
}

func (t idleTimer) clear() {
	if t.set != nil && t.d > 0 {
		_ = t.set(time.Time{})
	}
}

// readBody reads r's body, at most limit+1 bytes, into a pooled buffer that
// grows with what arrives: a body announced at up to firstChunk bytes gets
// a buffer of its size at once, a longer or chunked one starts at
// firstChunk and doubles, up to the announced size. Memory then follows
// the bytes received, not the bytes announced: a client that announces
// 4 MiB and sends nothing holds 32 KiB. The wait for each part is bounded
// by idle; a body that stalls ends in an error that errTimeout reports.
func readBody(r *http.Request, limit int64, idle idleTimer) (*bodyBuf, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return &bodyBuf{}, nil
	}
	want := limit + 1 // unknown or over-long length: read one byte past the limit
	if cl := r.ContentLength; cl > 0 && cl <= limit {
		want = cl
	}
	p, c := getBuf(int(min(want, firstChunk)))
	bb := &bodyBuf{b: p, class: c}
	armed := idle.arm()
	defer idle.clear()
	for int64(bb.n) < want {
		if bb.n == len(*bb.b) {
			np, nc := getBuf(int(min(2*int64(len(*bb.b)), want)))
			copy(*np, (*bb.b)[:bb.n])
			bb.release()
			bb = &bodyBuf{b: np, n: bb.n, class: nc}
		}
		m, err := r.Body.Read((*bb.b)[bb.n:min(int64(len(*bb.b)), want)])
		bb.n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			bb.release()
			return nil, err
		}
		if m > 0 && !armed.IsZero() && time.Since(armed) > idle.d/4 {
			armed = idle.arm()
		}
	}
	if want == r.ContentLength && int64(bb.n) < want {
		bb.release()
		return nil, io.ErrUnexpectedEOF
	}
	return bb, nil
}

// errTimeout reports whether err is a read that ran into its deadline.
func errTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
