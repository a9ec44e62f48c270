package host

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/instrument"
	"github.com/kvgate/kvgate/proxywasm"
)

// Phases of an instance, deciding which buffers the guest may touch.
const (
	phaseIdle = iota
	phaseVMStart
	phaseConfigure
	phaseRequest
)

type instKey struct{}

// instance is one module instance with the proxy-wasm state of the request
// it is serving. It is used by one goroutine at a time.
type instance struct {
	h     *Host
	mod   api.Module
	mem   api.Memory
	alloc api.Function

	onContextCreate, onRequestHeaders, onRequestBody, onRequestTrailers,
	onDone, onLog, onDelete api.Function

	// ctx carries the instance to the host functions; calls made with it
	// have no deadline of their own (see begin).
	ctx context.Context
	// deadline bounds the current session's calls (instrumented modules:
	// the guest checks it through interruptFuncs).
	deadline time.Time

	memAccounted int64 // linear memory counted in Host.memBytes

	stack      [4]uint64
	out        [2][]byte // partial stdout and stderr lines
	nextID     uint32
	phase      int
	x          *exchange // the request being served, or nil
	startupLog []string
}

// exchange is the per-request state the host functions act on.
type exchange struct {
	id          uint32
	req         *Request
	headers     [][2]string
	origHeaders [][2]string // headers as first shown to the guest
	trailers    [][2]string
	body        []byte
	bodyPhase   bool // the body buffer is readable
	hdrChanged  bool
	bodyChanged bool
	trlChanged  bool
	local       *LocalReply
	continued   bool
	closed      bool
	props       map[string][]byte
}

const rootContextID = 1

// begin starts one bounded session of guest calls (start-up, or one
// request) and returns the context to make them with; end stops the clock
// and reports whether the session ran out of time, in which case the
// instance must not be reused.
func (in *instance) begin() (ctx context.Context, end func() (timedOut bool)) {
	d := in.h.opts.CallTimeout
	if !in.h.interruptible {
		cctx, cancel := context.WithTimeout(context.Background(), d)
		return context.WithValue(cctx, instKey{}, in), func() bool {
			t := cctx.Err() != nil
			cancel()
			return t
		}
	}
	in.deadline = time.Now().Add(d)
	return in.ctx, in.endSession
}

func (in *instance) endSession() bool {
	return !time.Now().Before(in.deadline)
}

// errCallTimeout is the trap of a guest that ran past its deadline.
var errCallTimeout = errors.New("the filter ran longer than its call timeout")

// interruptFuncs is the host module the instrumented guest calls every
// instrument.Every loop iterations or function entries.
func interruptFuncs() []hostFunc {
	return []hostFunc{{instrument.Func, nil, nil, func(_ context.Context, in *instance, _ []uint64) {
		if in.deadline.IsZero() || time.Now().Before(in.deadline) {
			return
		}
		panic(errCallTimeout)
	}}}
}

func (in *instance) call(ctx context.Context, fn api.Function, name string, args ...uint64) (uint64, error) {
	if fn == nil {
		return 0, nil
	}
	s := in.stack[:]
	copy(s, args)
	err := fn.CallWithStack(ctx, s)
	if len(in.out[0])+len(in.out[1]) > 0 {
		in.flushOutput()
	}
	if err != nil {
		return 0, &TrapError{Callback: name, Err: err}
	}
	return s[0], nil
}

// run takes one request through the guest's per-request callbacks.
func (in *instance) run(ctx context.Context, r *Request) (*Decision, error) {
	in.nextID++
	if in.nextID <= rootContextID {
		in.nextID = rootContextID + 1
	}
	x := &exchange{id: in.nextID, req: r, body: r.Body}
	x.headers = requestFields(r)
	x.origHeaders = x.headers
	if len(r.Trailer) > 0 {
		x.trailers = headerFields(nil, r.Trailer)
	}
	in.x = x
	in.phase = phaseRequest
	defer func() { in.x = nil; in.phase = phaseIdle }()

	id := uint64(x.id)
	if _, err := in.call(ctx, in.onContextCreate, "proxy_on_context_create", id, rootContextID); err != nil {
		return nil, err
	}
	hasBody := len(r.Body) > 0
	hasTrailers := len(x.trailers) > 0
	act, err := in.call(ctx, in.onRequestHeaders, "proxy_on_request_headers", id, uint64(len(x.headers)), b2u(!hasBody && !hasTrailers))
	if err != nil {
		return nil, err
	}
	paused := uint32(act) == 1 && !x.continued
	if x.local == nil && !x.closed && hasBody {
		x.continued = false
		x.bodyPhase = true
		act, err = in.call(ctx, in.onRequestBody, "proxy_on_request_body", id, uint64(len(x.body)), b2u(!hasTrailers))
		if err != nil {
			return nil, err
		}
		paused = uint32(act) == 1 && !x.continued
	}
	if x.local == nil && !x.closed && hasTrailers {
		x.continued = false
		act, err = in.call(ctx, in.onRequestTrailers, "proxy_on_request_trailers", id, uint64(len(x.trailers)))
		if err != nil {
			return nil, err
		}
		paused = uint32(act) == 1 && !x.continued
	}
	if _, err := in.call(ctx, in.onDone, "proxy_on_done", id); err != nil {
		return nil, err
	}
	if _, err := in.call(ctx, in.onLog, "proxy_on_log", id); err != nil {
		return nil, err
	}
	if _, err := in.call(ctx, in.onDelete, "proxy_on_delete", id); err != nil {
		return nil, err
	}
	switch {
	case x.local != nil:
		return &Decision{Local: x.local}, nil
	case x.closed:
		return nil, ErrStreamClosed
	case paused:
		return nil, ErrPaused
	}
	return x.decision(), nil
}

func (x *exchange) decision() *Decision {
	r := x.req
	d := &Decision{Method: r.Method, Path: r.Path, Authority: r.Authority, Header: r.Header, Body: r.Body, Trailer: r.Trailer}
	if x.bodyChanged {
		d.Body, d.BodyChanged = x.body, true
	}
	if x.hdrChanged {
		d.HeaderChanged = true
		if removed, ok := onlyRemoved(x.origHeaders, x.headers); ok {
			// The common case (the kvgate filter drops content-length):
			// the request's own header, less some fields.
			h := r.Header
			if !r.HeaderOwned {
				h = h.Clone()
			}
			for k := range h {
				if slices.Contains(removed, lowerName(k)) {
					delete(h, k)
				}
			}
			d.Header = h
		} else {
			d.Method, d.Path, d.Authority = "", "", ""
			h := make(http.Header, len(x.headers))
			for _, f := range x.headers {
				switch f[0] {
				case ":method":
					d.Method = f[1]
				case ":path":
					d.Path = f[1]
				case ":authority":
					d.Authority = f[1]
				case ":scheme":
				default:
					if !strings.HasPrefix(f[0], ":") {
						h.Add(f[0], f[1])
					}
				}
			}
			d.Header = h
		}
	}
	if x.trlChanged {
		t := make(http.Header, len(x.trailers))
		for _, f := range x.trailers {
			t.Add(f[0], f[1])
		}
		d.Trailer = t
	}
	return d
}

// onlyRemoved reports whether now is orig with every field of some names
// taken out (and nothing else changed), and returns those names.
func onlyRemoved(orig, now [][2]string) (removed []string, ok bool) {
	j := 0
	for _, f := range orig {
		if j < len(now) && now[j] == f {
			j++
			continue
		}
		if strings.HasPrefix(f[0], ":") {
			return nil, false
		}
		if !slices.Contains(removed, f[0]) {
			removed = append(removed, f[0])
		}
	}
	if j != len(now) {
		return nil, false
	}
	// A removed name must be gone entirely, not thinned out.
	for _, f := range now {
		if slices.Contains(removed, f[0]) {
			return nil, false
		}
	}
	return removed, true
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func requestFields(r *Request) [][2]string {
	fs := make([][2]string, 0, 4+len(r.Header))
	scheme := r.Scheme
	if scheme == "" {
		scheme = "http"
	}
	fs = append(fs,
		[2]string{":authority", r.Authority},
		[2]string{":path", r.Path},
		[2]string{":method", r.Method},
		[2]string{":scheme", scheme})
	return headerFields(fs, r.Header)
}

func headerFields(fs [][2]string, h http.Header) [][2]string {
	for k, vs := range h {
		lk := lowerName(k)
		for _, v := range vs {
			fs = append(fs, [2]string{lk, v})
		}
	}
	return fs
}

// lowerNames maps common canonical header names to their lower-case form,
// which the guest sees, so that most requests need no new strings for it.
var lowerNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Host", "Openai-Organization",
		"Openai-Project", "Origin", "Referer", "Traceparent", "Tracestate", "Transfer-Encoding", "User-Agent",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id", "X-Stainless-Arch",
		"X-Stainless-Async", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version",
		"X-Stainless-Retry-Count", "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Read-Timeout"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// lowerName returns a header name in lower case, from lowerNames when it
// is there.
func lowerName(k string) string {
	if lk, ok := lowerNames[k]; ok {
		return lk
	}
	return strings.ToLower(k)
}

// --- guest memory, every access bounds-checked ---

func (in *instance) read(fn string, ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		panic(&memoryFault{fn, ptr, n})
	}
	return b
}

// checkRange traps unless [ptr, ptr+n) lies inside guest memory.
func (in *instance) checkRange(fn string, ptr uint32, n uint64) {
	if uint64(ptr)+n > uint64(in.mem.Size()) {
		panic(&memoryFault{fn, ptr, uint32(min(n, math.MaxUint32))})
	}
}

func (in *instance) readString(fn string, ptr, n uint32) string {
	return string(in.read(fn, ptr, n))
}

func (in *instance) writeU32(fn string, ptr, v uint32) {
	if !in.mem.WriteUint32Le(ptr, v) {
		panic(&memoryFault{fn, ptr, 4})
	}
}

func (in *instance) writeU64(fn string, ptr uint32, v uint64) {
	if !in.mem.WriteUint64Le(ptr, v) {
		panic(&memoryFault{fn, ptr, 8})
	}
}

func (in *instance) write(fn string, ptr uint32, b []byte) {
	if !in.mem.Write(ptr, b) {
		panic(&memoryFault{fn, ptr, uint32(len(b))})
	}
}

// copyOut places data in memory allocated by the guest's allocator and
// writes its address and size to the guest's return pointers.
func (in *instance) copyOut(ctx context.Context, fn string, data []byte, retPtr, retSize uint32) proxywasm.Status {
	// Check the return pointers before calling into the guest.
	if _, ok := in.mem.Read(retPtr, 4); !ok {
		panic(&memoryFault{fn, retPtr, 4})
	}
	if _, ok := in.mem.Read(retSize, 4); !ok {
		panic(&memoryFault{fn, retSize, 4})
	}
	var addr uint32
	if len(data) > 0 {
		if uint64(len(data)) > math.MaxUint32 {
			return proxywasm.StatusInvalidMemoryAccess
		}
		var s [1]uint64
		s[0] = uint64(len(data))
		if err := in.alloc.CallWithStack(ctx, s[:]); err != nil {
			panic(fmt.Errorf("%s: guest allocator failed: %w", fn, err))
		}
		addr = uint32(s[0])
		if addr == 0 {
			return proxywasm.StatusInvalidMemoryAccess
		}
		in.write(fn, addr, data)
	}
	in.writeU32(fn, retPtr, addr)
	in.writeU32(fn, retSize, uint32(len(data)))
	return proxywasm.StatusOK
}
