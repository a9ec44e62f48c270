package main

import (
	"bytes"
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

// pooled reports whether the body is in a pooled buffer, which must be
// released once nothing reads it.
func (b *bodyBuf) pooled() bool { return b != nil && b.b != nil && b.class >= 0 }

// release gives the buffer back to its pool, once.
func (b *bodyBuf) release() {
	if b == nil || b.b == nil || !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.class >= 0 {
		bodyPools[b.class].Put(b.b)
	}
}

// smallBody is the longest body read into memory of its own rather than a
// pooled buffer. A small body is forwarded as an in-memory reader, which
// the transport writes together with the headers, in one write. A body in
// a pooled buffer must be forwarded as a type of the sidecar's own, whose
// Close gives the buffer back once the transport is done with it, and
// net/http writes the headers of a request whose body it does not know in
// a write of their own, before the body: one more system call, and one
// more segment for the worker to wait for. Small allocations cost the
// garbage collector little; the pools are for the large ones.
const smallBody = 32 << 10

// getBuf returns a buffer of at least n bytes and its size class: a
// buffer of its own (class -1) for a small or an enormous body, else one
// from its class's pool.
func getBuf(n int) (*[]byte, int) {
	if n <= smallBody {
		b := make([]byte, n)
		return &b, -1
	}
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

// bodyTransport is the upstream transport, handing it a body in memory of
// its own as an in-memory reader. ReverseProxy wraps every body in a
// reader of its own, and net/http writes the headers of a body it does not
// know in a write of their own, before the body; given the bytes, it writes
// headers and a small body in one, and the worker reads them in one piece.
type bodyTransport struct{ http.RoundTripper }

// It also retries, once, a request whose connection to the worker could
// not be opened (refused, or not established within the connect timeout):
// such a request provably never reached the worker, and Envoy's
// reset-before-request retry covers the same case (docs/spec.md, The
// worker connection).
func (t bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if x := exchangeOf(r.Context()); x != nil && x.inMemory != nil && r.Body != nil && r.ContentLength == int64(len(x.inMemory)) {
		r2 := *r // RoundTrip must not change the request it is given
		r2.Body = io.NopCloser(bytes.NewReader(x.inMemory))
		r = &r2
	}
	res, err := t.RoundTripper.RoundTrip(r)
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" || r.Context().Err() != nil {
		return res, err
	}
	r2 := *r
	if r.Body != nil && r.Body != http.NoBody {
		if r.GetBody == nil {
			return nil, err
		}
		body, gerr := r.GetBody()
		if gerr != nil {
			return nil, err
		}
		r2.Body = body
	}
	return t.RoundTripper.RoundTrip(&r2)
}

// pooledBody is the body of a forwarded request in a pooled buffer, read
// by one forwardBody per attempt. release can come while the transport's
// writer still reads (the worker answered before reading the whole body):
// reads and release are serialised, and a read after release fails.
type pooledBody struct {
	mu       sync.Mutex
	body     []byte
	buf      *bodyBuf
	released bool
}

func (p *pooledBody) reader() *forwardBody { return &forwardBody{p: p, r: bytes.NewReader(p.body)} }

func (p *pooledBody) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.released = true
		p.buf.release()
	}
}

// forwardBody is one reading of a pooledBody.
type forwardBody struct {
	p *pooledBody
	r *bytes.Reader
}

func (f *forwardBody) Read(b []byte) (int, error) {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	if f.p.released {
		return 0, errBodyClosed
	}
	return f.r.Read(b)
}

// Close releases nothing: the buffer goes back in exchange.release.
func (f *forwardBody) Close() error { return nil }

var errBodyClosed = errors.New("request body read after close")
