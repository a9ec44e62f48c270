package host

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/abi"
	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/host/internal/instrument"
	"github.com/kvgate/kvgate/host/internal/wasi"
	"github.com/kvgate/kvgate/proxywasm"
)

type instKey struct{}

// instance is one module instance: its proxy-wasm and WASI state, and the
// request it is serving. It is used by one goroutine at a time.
type instance struct {
	h    *Host
	mod  api.Module
	mem  api.Memory
	abi  abi.Instance
	wasi wasi.System

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
	stream     abi.Stream // the request being served
	endFn      func() bool
	nextID     uint32
	startupLog []string
	names      nameCache
}

// instanceOf finds the instance a host function is called for.
func instanceOf(ctx context.Context) (*instance, bool) {
	in, _ := ctx.Value(instKey{}).(*instance)
	return in, in != nil
}

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
	if in.endFn == nil {
		in.endFn = in.endSession // once: a method value is an allocation
	}
	return in.ctx, in.endFn
}

func (in *instance) endSession() bool {
	return !time.Now().Before(in.deadline)
}

// errCallTimeout is the trap of a guest that ran past its deadline.
var errCallTimeout = errors.New("the filter ran longer than its call timeout")

// interruptFuncs is the host module the instrumented guest calls every
// instrument.Every loop iterations or function entries.
func interruptFuncs() []hostcall.Func[*instance] {
	return []hostcall.Func[*instance]{{Name: instrument.Func, Fn: func(_ context.Context, in *instance, _ []uint64) {
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
	if in.wasi.Pending() {
		in.wasi.Flush()
	}
	if err != nil {
		return 0, &TrapError{Callback: name, Err: err}
	}
	return s[0], nil
}

// run takes one request through the guest's per-request callbacks, made
// with ctx; caller is the context the request is filtered with.
func (in *instance) run(ctx, caller context.Context, r *Request) (*Decision, error) {
	in.nextID++
	if in.nextID <= abi.RootContextID {
		in.nextID = abi.RootContextID + 1
	}
	x := &in.stream
	*x = abi.Stream{ID: in.nextID, Body: r.Body, Context: caller, Properties: (*requestProps)(r)}
	x.Headers = in.names.requestFields(r)
	orig := x.Headers // as first shown to the guest
	if len(r.Trailer) > 0 {
		x.Trailers = in.names.headerFields(nil, r.Trailer)
	}
	in.abi.Stream = x
	in.abi.Phase = abi.PhaseRequest
	defer func() { in.abi.Stream = nil; in.abi.Phase = abi.PhaseIdle; in.stream = abi.Stream{} }()

	id := uint64(x.ID)
	if _, err := in.call(ctx, in.onContextCreate, "proxy_on_context_create", id, abi.RootContextID); err != nil {
		return nil, err
	}
	hasBody := len(r.Body) > 0 && !r.BodyWithheld
	hasTrailers := len(x.Trailers) > 0 && !r.BodyWithheld
	act, err := in.call(ctx, in.onRequestHeaders, "proxy_on_request_headers", id, uint64(len(x.Headers)), b2u(!hasBody && !hasTrailers && !r.BodyWithheld))
	if err != nil {
		return nil, err
	}
	paused := pauses(act) && !x.Continued
	if x.Local == nil && !x.Closed && hasBody {
		x.Continued = false
		x.BodyReadable = true
		act, err = in.call(ctx, in.onRequestBody, "proxy_on_request_body", id, uint64(len(x.Body)), b2u(!hasTrailers))
		if err != nil {
			return nil, err
		}
		paused = pauses(act) && !x.Continued
	}
	if x.Local == nil && !x.Closed && hasTrailers {
		x.Continued = false
		act, err = in.call(ctx, in.onRequestTrailers, "proxy_on_request_trailers", id, uint64(len(x.Trailers)))
		if err != nil {
			return nil, err
		}
		paused = pauses(act) && !x.Continued
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
	case x.Local != nil:
		return &Decision{Local: localReply(x.Local), Properties: x.GuestProperties()}, nil
	case x.Closed:
		return nil, ErrStreamClosed
	case paused && !r.BodyWithheld: // waiting for a body that will not come is no failure
		return nil, ErrPaused
	}
	d := in.decision(r, x, orig)
	d.Properties = x.GuestProperties()
	return d, nil
}

// pauses reports whether a callback's result stops the request.
func pauses(act uint64) bool { return proxywasm.Action(act) == proxywasm.ActionPause }

func localReply(l *abi.LocalReply) *LocalReply {
	lr := &LocalReply{Status: l.Status, Details: l.Details, Body: l.Body, Header: make(http.Header, len(l.Headers))}
	for _, f := range l.Headers {
		lr.Header.Add(f[0], f[1])
	}
	return lr
}

// decision is the request to forward after the guest's changes to x; orig
// is the header map as it was first shown to the guest.
func (in *instance) decision(r *Request, x *abi.Stream, orig [][2]string) *Decision {
	d := &Decision{Method: r.Method, Path: r.Path, Authority: r.Authority, Header: r.Header, Body: r.Body, Trailer: r.Trailer}
	if x.BodyChanged {
		d.Body, d.BodyChanged = x.Body, true
	}
	if x.HeadersChanged {
		d.HeaderChanged = true
		if removed, ok := onlyRemoved(orig, x.Headers); ok {
			// A common case (a filter that drops a framing or hop header):
			// the request's own header, less some fields.
			h := r.Header
			if !in.h.opts.HeaderInPlace {
				h = h.Clone()
			}
			for k := range h {
				if slices.Contains(removed, in.names.lower(k)) {
					delete(h, k)
				}
			}
			d.Header = h
		} else {
			d.Method, d.Path, d.Authority = "", "", ""
			h := make(http.Header, len(x.Headers))
			for _, f := range x.Headers {
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
	if x.TrailersChanged {
		t := make(http.Header, len(x.Trailers))
		for _, f := range x.Trailers {
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

// requestFields is the request's header map as the guest sees it:
// pseudo-headers first, then every field, names in lower case.
func (c *nameCache) requestFields(r *Request) [][2]string {
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
	return c.headerFields(fs, r.Header)
}

func (c *nameCache) headerFields(fs [][2]string, h http.Header) [][2]string {
	for k, vs := range h {
		lk := c.lower(k)
		for _, v := range vs {
			fs = append(fs, [2]string{lk, v})
		}
	}
	return fs
}

// nameCache maps the header names an instance has seen to their lower-case
// form, which the guest sees, so that requests with the usual names need no
// new strings for them. It keeps at most maxCachedNames names of at most
// maxCachedName bytes: a client sending ever new names only makes the rest
// be lowered each time.
type nameCache map[string]string

const (
	maxCachedNames = 256
	maxCachedName  = 64
)

// lower returns k in lower case.
func (c *nameCache) lower(k string) string {
	if lk, ok := (*c)[k]; ok {
		return lk
	}
	lk := strings.ToLower(k)
	if len(k) <= maxCachedName && len(*c) < maxCachedNames {
		if *c == nil {
			*c = nameCache{}
		}
		(*c)[k] = lk
	}
	return lk
}

// guestLog sends a guest's log line (proxy_log, stdout, stderr) to the
// host's log; before the instance serves requests, it also keeps it for the
// error New returns when the guest fails to start.
func (in *instance) guestLog(level proxywasm.LogLevel, msg string) {
	var l slog.Level
	switch level {
	case proxywasm.LogTrace, proxywasm.LogDebug:
		l = slog.LevelDebug
	case proxywasm.LogInfo:
		l = slog.LevelInfo
	case proxywasm.LogWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelError
	}
	if in.abi.Phase != abi.PhaseRequest && len(in.startupLog) < 64 {
		in.startupLog = append(in.startupLog, msg)
	}
	in.h.log.Log(context.Background(), l, msg, "source", "wasm", "plugin", in.h.opts.PluginName)
}
