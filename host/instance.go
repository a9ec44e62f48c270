package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// proxy_status_t
const (
	statusOK                  = 0
	statusNotFound            = 1
	statusBadArgument         = 2
	statusSerializationFailed = 3
	statusInvalidMemoryAccess = 6
	statusEmpty               = 7
	statusCasMismatch         = 8
	statusInternalFailure     = 10
	statusUnimplemented       = 12
)

// proxy_buffer_type_t
const (
	bufRequestBody   = 0
	bufResponseBody  = 1
	bufVMConfig      = 6
	bufPluginConfig  = 7
	bufMax           = 8
	mapRequestHeader = 0
	mapRequestTrail  = 1
	mapResponseHead  = 2
	mapResponseTrail = 3
	mapMax           = 7
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
	headers     []Field
	origHeaders []Field // headers as first shown to the guest
	trailers    []Field
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
// interruptMask+1 loop iterations or function entries (interrupt.go).
func interruptFuncs() []hostFunc {
	return []hostFunc{{interruptFunc, nil, nil, func(_ context.Context, in *instance, _ []uint64) {
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
	hasBody := len(r.Body) > 0 && !r.BodyWithheld
	hasTrailers := len(x.trailers) > 0 && !r.BodyWithheld
	act, err := in.call(ctx, in.onRequestHeaders, "proxy_on_request_headers", id, uint64(len(x.headers)), b2u(!hasBody && !hasTrailers && !r.BodyWithheld))
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
		return &Decision{Local: x.local, Properties: x.props}, nil
	case x.closed:
		return nil, ErrStreamClosed
	case paused && !r.BodyWithheld: // waiting for a body that will not come is no failure
		return nil, ErrPaused
	}
	d := x.decision()
	d.Properties = x.props
	return d, nil
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
				switch f.Name {
				case ":method":
					d.Method = f.Value
				case ":path":
					d.Path = f.Value
				case ":authority":
					d.Authority = f.Value
				case ":scheme":
				default:
					if !strings.HasPrefix(f.Name, ":") {
						h.Add(f.Name, f.Value)
					}
				}
			}
			d.Header = h
		}
	}
	if x.trlChanged {
		t := make(http.Header, len(x.trailers))
		for _, f := range x.trailers {
			t.Add(f.Name, f.Value)
		}
		d.Trailer = t
	}
	return d
}

// onlyRemoved reports whether now is orig with every field of some names
// taken out (and nothing else changed), and returns those names.
func onlyRemoved(orig, now []Field) (removed []string, ok bool) {
	j := 0
	for _, f := range orig {
		if j < len(now) && now[j] == f {
			j++
			continue
		}
		if strings.HasPrefix(f.Name, ":") {
			return nil, false
		}
		if !slices.Contains(removed, f.Name) {
			removed = append(removed, f.Name)
		}
	}
	if j != len(now) {
		return nil, false
	}
	// A removed name must be gone entirely, not thinned out.
	for _, f := range now {
		if slices.Contains(removed, f.Name) {
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

func requestFields(r *Request) []Field {
	fs := make([]Field, 0, 4+len(r.Header))
	scheme := r.Scheme
	if scheme == "" {
		scheme = "http"
	}
	fs = append(fs,
		Field{":authority", r.Authority},
		Field{":path", r.Path},
		Field{":method", r.Method},
		Field{":scheme", scheme})
	return headerFields(fs, r.Header)
}

func headerFields(fs []Field, h http.Header) []Field {
	for k, vs := range h {
		lk := lowerName(k)
		for _, v := range vs {
			fs = append(fs, Field{lk, v})
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
func (in *instance) copyOut(ctx context.Context, fn string, data []byte, retPtr, retSize uint32) uint64 {
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
			return statusInvalidMemoryAccess
		}
		var s [1]uint64
		s[0] = uint64(len(data))
		if err := in.alloc.CallWithStack(ctx, s[:]); err != nil {
			panic(fmt.Errorf("%s: guest allocator failed: %w", fn, err))
		}
		addr = uint32(s[0])
		if addr == 0 {
			return statusInvalidMemoryAccess
		}
		in.write(fn, addr, data)
	}
	in.writeU32(fn, retPtr, addr)
	in.writeU32(fn, retSize, uint32(len(data)))
	return statusOK
}

// --- header map serialization (proxy-wasm "serialized pairs") ---

func serializeFields(fs []Field) []byte {
	n := 4
	for _, f := range fs {
		n += 8 + len(f.Name) + len(f.Value) + 2
	}
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, uint32(len(fs)))
	p := 4
	for _, f := range fs {
		binary.LittleEndian.PutUint32(b[p:], uint32(len(f.Name)))
		binary.LittleEndian.PutUint32(b[p+4:], uint32(len(f.Value)))
		p += 8
	}
	for _, f := range fs {
		p += copy(b[p:], f.Name) + 1
		p += copy(b[p:], f.Value) + 1
	}
	return b
}

func serializedSize(fs []Field) int {
	n := 4
	for _, f := range fs {
		n += 8 + len(f.Name) + len(f.Value) + 2
	}
	return n
}

// parseFields decodes serialized pairs; ok is false when they are malformed.
func parseFields(b []byte) ([]Field, bool) {
	if len(b) == 0 || len(b) == 1 && b[0] == 0 {
		return nil, true
	}
	if len(b) < 4 {
		return nil, false
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if 4+8*n > uint64(len(b)) {
		return nil, false
	}
	fs := make([]Field, 0, n)
	sizes := b[4 : 4+8*n]
	data := b[4+8*n:]
	for i := uint64(0); i < n; i++ {
		kn := uint64(binary.LittleEndian.Uint32(sizes[8*i:]))
		vn := uint64(binary.LittleEndian.Uint32(sizes[8*i+4:]))
		if kn+vn+2 > uint64(len(data)) {
			return nil, false
		}
		k := string(data[:kn])
		v := string(data[kn+1 : kn+1+vn])
		data = data[kn+vn+2:]
		fs = append(fs, Field{k, v})
	}
	return fs, true
}
