package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// exchange is one request on its way through the sidecar, from ServeHTTP
// to its access line, and the one owner of what the request holds:
//
//   - w, the response writer every answer goes through, which records the
//     status and the bytes sent;
//   - the outcome, set by whichever part of the request path learns what
//     became of the request (serve's steps, the proxy's ErrorHandler, the
//     answer's body), and counted and logged by finish, once;
//   - what one step learns for the next: whether the body is over the
//     limit (read), the request target (filter);
//   - the buffers of the body: as read, as the filter rewrote it, as
//     forwarded, each given back by release when the request is done,
//     whichever of them was forwarded.
//
// Code that runs on the request's behalf with nothing but a context (the
// host's BodyAlloc, the proxy's hooks, the upstream transport) finds the
// exchange with exchangeOf: it is the only value of its own the sidecar
// puts in a request's context.
type exchange struct {
	s     *server
	r     *http.Request
	start time.Time
	w     statusWriter
	// outcome, once set, is what became of the request.
	outcome outcome
	accessInfo
	// localAddr is the address the request came in on, "ip:port", for the
	// filter (destination.address); "" when net/http gave none.
	localAddr string
	// ctx is r's context with the exchange in it (context), made when
	// the request is first filtered.
	ctx context.Context

	// body is the request body as read (readBody); nil until it is, and
	// when it is withheld: announced over the limit, never read, the
	// filter shown the headers only. tooLarge is the 413's message for a
	// body over the limit, announced or read (read), "" for one within it.
	body     *bodyBuf
	withheld bool
	tooLarge string
	// target is the request target as the filter saw it and the worker
	// gets it (forwardTarget), set by filter.
	target string
	// rewritten is the pooled buffer that holds the body the filter wrote
	// last (changedBody), nil when the filter wrote none or the host
	// allocated it. replaced is the one it wrote before, which the host
	// copies from while it fills rewritten, so it goes back to its pool
	// only at the next write or with the rest.
	rewritten, replaced *bodyBuf
	// forwarded is the body handed to the proxy when it is in a pooled
	// buffer (body or rewritten), which its readers share; inMemory is
	// that body when it is in memory of its own, for bodyTransport.
	forwarded *pooledBody
	inMemory  []byte
}

// exchangeKey carries, in the context the request is filtered and
// forwarded with, its *exchange.
type exchangeKey struct{}

// newExchange starts r's exchange, answered through w. r carries its
// request id from here on (requestID).
func (s *server) newExchange(w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{s: s, r: r, start: time.Now(), w: statusWriter{ResponseWriter: w}}
	x.requestID = requestID(r.Header)
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		x.localAddr = la.String() // formatted once per connection (localAddr)
	}
	return x
}

// exchangeOf returns the exchange ctx belongs to, or nil.
func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// context returns the request's context with the exchange in it, made on
// first use: requests refused before the filter never need one.
func (x *exchange) context() context.Context {
	if x.ctx == nil {
		x.ctx = context.WithValue(x.r.Context(), exchangeKey{}, x)
	}
	return x.ctx
}

// settle records o as the outcome unless one is recorded already (by the
// proxy's ErrorHandler or the answer's body, which know better).
func (x *exchange) settle(o outcome) {
	if x.outcome == "" {
		x.outcome = o
	}
}

// finish ends the exchange, deferred by ServeHTTP: it gives the buffers
// back, counts the outcome and writes the access line, whatever path the
// request left by. An answer already written in full (w.complete) is first
// flushed, so that the client has it while the line is written: the
// bookkeeping is off the request's critical path, and costs no write, for
// net/http finds nothing left to send when the handler returns. A panic
// (http.ErrAbortHandler, with which ReverseProxy ends an answer cut short)
// is accounted too, as what the request path recorded or else
// outcomeAborted, then goes on (net/http closes the connection); an answer
// the worker cut is first flushed, so that what it sent before it stopped
// reaches the client.
func (x *exchange) finish() {
	p := recover()
	if p != nil {
		x.settle(outcomeAborted)
		if x.outcome == outcomeUpstreamReset && x.w.status != 0 {
			x.w.Flush()
		}
	} else if x.w.complete() {
		x.w.Flush()
	}
	x.release()
	x.account()
	if p != nil {
		panic(p)
	}
}

// release gives every pooled buffer of the request back, each once. The
// forwarded body goes first, under its lock, for the transport may still
// be reading it (the worker answered before reading it all); body and
// rewritten are then already back if one of them was the forwarded one
// (bodyBuf.release is once only).
func (x *exchange) release() {
	if x.forwarded != nil {
		x.forwarded.release()
	}
	x.body.release()
	x.rewritten.release()
	x.replaced.release()
}

// account counts the request's outcome and writes its access line, the
// only place that does either: no body, no header values, no query (it
// may carry data). The record goes straight to the handler: no caller PC
// (the line's source is always here) and one clock read for time and
// duration.
func (x *exchange) account() {
	s, r := x.s, x.r
	s.outcomes[x.outcome].Inc()
	ctx := r.Context()
	if h := s.log.Handler(); h.Enabled(ctx, slog.LevelInfo) {
		end := time.Now()
		rec := slog.NewRecord(end, slog.LevelInfo, "request", 0)
		rec.AddAttrs(slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", x.w.status),
			slog.Int64("bytes", x.w.n), slog.String("outcome", string(x.outcome)),
			slog.Float64("duration_ms", float64(end.Sub(x.start).Microseconds())/1000),
			slog.String("remote", r.RemoteAddr))
		x.addAttrs(&rec, h.Enabled(ctx, slog.LevelDebug))
		_ = h.Handle(ctx, rec)
	}
}

// changedBody is the host's BodyAlloc: the memory of a body the filter
// writes, from the pools, held by the request's exchange as rewritten.
// A small body is left to the host (nil), and rewritten is then nil too:
// it always says whether the filter's last body is in a pooled buffer.
func changedBody(ctx context.Context, n int) []byte {
	x := exchangeOf(ctx)
	if x == nil {
		return nil // the host allocates
	}
	x.replaced.release() // two writes back: nothing reads it now
	x.replaced, x.rewritten = x.rewritten, nil
	if n <= smallBody {
		return nil
	}
	p, c := getBuf(n)
	x.rewritten = &bodyBuf{b: p, n: n, class: c}
	return x.rewritten.bytes()
}

// upstreamRequest returns the request to hand ReverseProxy: a shallow copy of r,
// in the exchange's context, with body as its body. buf is the buffer that
// holds body (x.body or x.rewritten), nil for memory the host allocated.
//
// The copy can be replayed (GetBody), so that the transport may retry a
// request of which it wrote nothing on a connection the worker had closed
// (upstreamTransport). A body in a pooled buffer becomes x.forwarded, which
// release gives back: every reader of it, the first and any replay, fails
// from then on, so a recycled buffer is never sent, even by a writer still
// running after the worker answered before reading the whole body. Closing
// a reader releases nothing. A body in memory of its own is left to the
// garbage collector, and reaches the transport as an in-memory reader
// (bodyTransport, which finds it as x.inMemory).
func (x *exchange) upstreamRequest(body []byte, buf *bodyBuf) *http.Request {
	out := x.r.WithContext(x.context())
	switch {
	case len(body) == 0:
		out.Body, out.GetBody = http.NoBody, nil
	case buf.pooled():
		pb := &pooledBody{body: body, buf: buf}
		x.forwarded = pb
		out.Body = pb.reader()
		out.GetBody = func() (io.ReadCloser, error) { return pb.reader(), nil }
	default:
		x.inMemory = body
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	out.ContentLength = int64(len(body))
	return out
}
