// Package host runs a proxy-wasm (ABI 0.2.x) HTTP filter module on wazero.
//
// A Host compiles the module once (with an optional on-disk compilation
// cache) and keeps a bounded pool of instances. Every request takes one
// instance for its whole proxy-wasm life (context create, headers, body,
// trailers, done, log, delete) and gives it back; an instance whose call
// trapped or failed is closed and replaced, and one whose memory grew past
// Options.RetireBytes is retired after its request. Each instance's linear
// memory is a reservation outside the Go heap (internal/linmem), so that
// starting one takes milliseconds whatever the memory a guest sets aside at
// start-up. The host functions are those of Envoy's proxy-wasm host, WASI
// included, with every guest pointer and length bounds-checked: a bad call
// traps that instance only.
//
// This package is the pool and the request's way through the guest; the
// rest is internal: the proxy-wasm host functions (internal/abi), WASI
// (internal/wasi), the guest's metrics (internal/metrics), what their
// function tables share (internal/hostcall), the module rewrite that lets
// a call be stopped on time (internal/instrument), and the instances'
// linear memories (internal/linmem). The ABI is documented in package
// proxywasm.
//
// # Properties
//
// proxy_get_property answers, in Envoy's names and encoding (strings as
// their raw bytes, integers as 8-byte little-endian), the request's
// request.*, source.* and destination.* properties from Request, and these
// four that identify the sender (docs/spec.md, Trusted senders):
//
//	property                             value                                    absent when
//	connection.mtls                      one byte: 01 when Request.TLS holds a    never (00 also for plain
//	                                     client certificate whose chain was       text, Request.TLS nil)
//	                                     verified, else 00
//	connection.uri_san_peer_certificate  the first URI SAN of that certificate,   no verified certificate,
//	                                     its raw bytes                            or it has no URI SAN
//	connection.dns_san_peer_certificate  the first DNS SAN of that certificate    no verified certificate,
//	                                                                              or it has no DNS SAN
//	source.address                       Request.RemoteAddr: "ip:port",           RemoteAddr is empty
//	                                     "[ip]:port" for IPv6
//
// A certificate that was presented but not verified (tls.RequestClientCert)
// counts as none. The host verifies nothing itself: Request.TLS and
// RemoteAddr must come from the connection, never from a header.
package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/abi"
	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/host/internal/instrument"
	"github.com/kvgate/kvgate/host/internal/linmem"
	"github.com/kvgate/kvgate/host/internal/metrics"
	"github.com/kvgate/kvgate/host/internal/modcheck"
	"github.com/kvgate/kvgate/host/internal/wasi"
	"github.com/kvgate/kvgate/proxywasm"
)

var replaceReasons = [...]string{"trap", "grown", "timeout"}

const (
	reasonTrap = iota
	reasonGrown
	reasonTimeout
)

// Host is a compiled filter module with its pool of instances. It is safe
// for concurrent use.
type Host struct {
	opts     Options
	log      *slog.Logger
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	cache    wazero.CompilationCache
	epoch    time.Time
	// plugin is what the instances share: the configuration new
	// instances start with. Reconfigure replaces it; an instance made with
	// an older one is stale and is replaced instead of reused.
	plugin atomic.Pointer[abi.Plugin]
	size   int
	// interruptible: the module carries interrupt checks (package instrument)
	// and calls are bounded by a per-instance watchdog instead of wazero's
	// context termination.
	interruptible bool

	idle     chan *instance
	metrics  metrics.Set
	live     atomic.Int64
	memBytes atomic.Int64 // linear memory of live instances, as of their last request
	replaced [len(replaceReasons)]atomic.Uint64

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // instances out of the pool and replacements under way
	stop     chan struct{}
}

// New compiles module, checks its imports and exports, and starts its first
// instance (_initialize, proxy_on_vm_start and proxy_on_configure). It fails
// when the guest rejects its configuration, with the guest's own log lines
// in the error. The other Options.PoolSize-1 instances start in the
// background (Live counts them as they come); a request finds the pool
// short only in the first milliseconds, and then waits for an instance as
// it would for a busy one.
func New(ctx context.Context, module []byte, opts Options) (*Host, error) {
	// wazero sizes its buffers from the counts a module declares, before
	// reading what they count: a corrupt file could make it allocate
	// gigabytes. Refuse one whose counts do not fit in its bytes, before
	// anything is opened.
	if err := modcheck.Check(module); err != nil {
		return nil, fmt.Errorf("host: the filter module is malformed: %w", err)
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = runtime.GOMAXPROCS(0)
	}
	if opts.MemoryLimitPages == 0 {
		opts.MemoryLimitPages = DefaultMemoryLimitPages
	}
	if opts.RetireBytes == 0 {
		opts.RetireBytes = DefaultRetireBytes
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = 5 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Host{
		opts: opts, log: opts.Logger, epoch: time.Now(),
		size: opts.PoolSize, idle: make(chan *instance, opts.PoolSize), stop: make(chan struct{}),
	}
	h.plugin.Store(h.newPlugin(opts.PluginConfig))
	h.metrics.Help = opts.MetricHelp
	var err error
	if opts.CacheDir != "" {
		h.cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache %s: %w", opts.CacheDir, err)
		}
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	fail := func(err error) (*Host, error) {
		if h.rt != nil {
			_ = h.rt.Close(ctx)
		}
		_ = h.cache.Close(ctx)
		return nil, err
	}
	// Compile the module with interrupt checks (package instrument); when it
	// cannot be rewritten, or the rewrite does not compile, fall back to
	// wazero's own (slower) termination on context expiry.
	if im, ierr := instrumentModule(module); ierr != nil {
		h.log.Warn("wasm filter module cannot be instrumented for interrupts; using wazero's context termination (slower)", "err", ierr)
	} else if err := h.compile(ctx, im, false); err == nil {
		h.interruptible = true
	} else {
		h.log.Warn("instrumented wasm filter module does not compile; using wazero's context termination (slower)", "err", err)
	}
	if !h.interruptible {
		if err := h.compile(ctx, module, true); err != nil {
			return fail(err)
		}
	}
	sigs := map[string]hostcall.Signature{}
	hostcall.AddSignatures(sigs, "env", abi.Funcs())
	hostcall.AddSignatures(sigs, "wasi_snapshot_preview1", wasi.Funcs())
	if h.interruptible {
		hostcall.AddSignatures(sigs, instrument.Module, interruptFuncs())
	}
	if err := checkModule(h.compiled, sigs); err != nil {
		return fail(err)
	}
	// The first instance alone, so that a configuration error is reported
	// once and at once; the others come in the background, and a request
	// that finds none of them free waits for one as for a busy instance.
	first, err := h.newInstance(ctx)
	if err != nil {
		return fail(err)
	}
	h.idle <- first
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(h); err != nil {
			h.drain(ctx)
			return fail(fmt.Errorf("host: register metrics: %w", err))
		}
	}
	if n := opts.PoolSize - 1; n > 0 {
		h.inflight.Add(1)
		go func() {
			defer h.inflight.Done()
			for range n {
				in := h.startInstance()
				if in == nil {
					return
				}
				h.idle <- in
			}
		}()
	}
	return h, nil
}

// hostModule is one module of host functions the guest imports: its name
// and how its functions are exported.
type hostModule struct {
	name   string
	export func(wazero.HostModuleBuilder)
}

// part returns the host functions' view of the instance they are called
// for: the part of it that f picks.
func part[T any](f func(*instance) *T) func(context.Context) (*T, bool) {
	return func(ctx context.Context) (*T, bool) {
		in, ok := instanceOf(ctx)
		if !ok {
			return nil, false
		}
		return f(in), true
	}
}

// newPlugin is the shared part of the instances, with a plugin
// configuration.
func (h *Host) newPlugin(pluginConfig []byte) *abi.Plugin {
	return &abi.Plugin{
		VMConfig: h.opts.VMConfig, PluginConfig: pluginConfig,
		Name: h.opts.PluginName, RootID: h.opts.RootID, VMID: h.opts.VMID,
		Metrics: &h.metrics, Logger: h.log, LogLevel: h.guestLogLevel, BodyAlloc: h.opts.BodyAlloc,
	}
}

// Reconfigure gives the filter a new plugin configuration without
// stopping: it starts an instance with it, and when the guest accepts it
// (proxy_on_configure), new requests are filtered with it from then on.
// Requests in flight finish in the instances they started in, which are
// then closed and replaced; idle instances are replaced at once. Metrics
// carry on. When the guest rejects the configuration, the running one
// stays and the error carries the guest's log lines, as New's does.
func (h *Host) Reconfigure(ctx context.Context, pluginConfig []byte) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	h.inflight.Add(1)
	h.mu.Unlock()
	defer h.inflight.Done()
	p := h.newPlugin(bytes.Clone(pluginConfig))
	trial, err := h.newInstanceOf(ctx, p)
	if err != nil {
		return err
	}
	h.plugin.Store(p)
	// The idle instances are stale now: the trial takes the place of the
	// first, and the others are replaced in the background.
	var idle []*instance
	for len(idle) < h.size {
		select {
		case in := <-h.idle:
			idle = append(idle, in)
			continue
		default:
		}
		break
	}
	for _, in := range idle {
		switch {
		case !h.stale(in):
			h.idle <- in
		case trial != nil:
			in.close()
			h.idle <- trial
			trial = nil
		default:
			h.replaceStale(in)
		}
	}
	if trial != nil {
		// Every instance is busy: each is replaced as its request ends
		// (release), so the trial would be one too many.
		trial.close()
	}
	return nil
}

// replace starts an instance for the pool in place of one closed; the
// caller has added it to inflight.
func (h *Host) replace() {
	defer h.inflight.Done()
	if n := h.startInstance(); n != nil {
		h.idle <- n
	}
}

// stale reports whether an instance was made with an older configuration.
func (h *Host) stale(in *instance) bool { return in.abi.Plugin != h.plugin.Load() }

// startInstance starts an instance for the pool, retrying with backoff
// until it succeeds or the Host closes (then it returns nil).
func (h *Host) startInstance() *instance {
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-h.stop:
			return nil
		default:
		}
		in, err := h.newInstance(context.Background())
		if err == nil {
			return in
		}
		h.log.Error("cannot start wasm filter instance", "err", err)
		select {
		case <-h.stop:
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// compile makes a runtime with the host modules and compiles module in it;
// closeOnDone selects wazero's context-based termination.
func (h *Host) compile(ctx context.Context, module []byte, closeOnDone bool) error {
	if h.rt != nil {
		_ = h.rt.Close(ctx)
		h.rt, h.compiled = nil, nil
	}
	cfg := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(h.opts.MemoryLimitPages).
		WithCloseOnContextDone(closeOnDone)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	mods := []hostModule{
		{"env", func(b wazero.HostModuleBuilder) {
			hostcall.Export(b, abi.Funcs(), part(func(in *instance) *abi.Instance { return &in.abi }))
		}},
		{"wasi_snapshot_preview1", func(b wazero.HostModuleBuilder) {
			hostcall.Export(b, wasi.Funcs(), part(func(in *instance) *wasi.System { return &in.wasi }))
		}},
	}
	if !closeOnDone {
		mods = append(mods, hostModule{instrument.Module, func(b wazero.HostModuleBuilder) { hostcall.Export(b, interruptFuncs(), instanceOf) }})
	}
	for _, m := range mods {
		b := rt.NewHostModuleBuilder(m.name)
		m.export(b)
		if _, err := b.Instantiate(ctx); err != nil {
			_ = rt.Close(ctx)
			return fmt.Errorf("host: %s module: %w", m.name, err)
		}
	}
	cm, err := modcheck.Compile(ctx, rt, module)
	if err != nil {
		_ = rt.Close(ctx)
		return fmt.Errorf("host: compile filter module: %w", err)
	}
	h.rt, h.compiled = rt, cm
	return nil
}

// withMemory is linmem.WithAllocator, replaceable by benchmarks.
var withMemory = linmem.WithAllocator

// instrumentModule is instrument.Instrument, replaceable by tests.
var instrumentModule = instrument.Instrument

// checkModule refuses a module that imports what this host does not
// provide (sigs, by "module.name"), or that lacks the exports a proxy-wasm
// filter needs.
func checkModule(cm wazero.CompiledModule, sigs map[string]hostcall.Signature) error {
	var missing []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		sig, ok := sigs[mod+"."+name]
		if !ok {
			missing = append(missing, mod+"."+name)
			continue
		}
		if !slices.Equal(sig.Params, f.ParamTypes()) || !slices.Equal(sig.Results, f.ResultTypes()) {
			missing = append(missing, fmt.Sprintf("%s.%s with parameters %s (this host's takes %s)", mod, name, typeNames(f.ParamTypes()), typeNames(sig.Params)))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("host: the filter module imports functions this host does not provide: %s", strings.Join(missing, ", "))
	}
	exp := cm.ExportedFunctions()
	if _, ok := exp["proxy_abi_version_0_2_1"]; !ok {
		if _, ok := exp["proxy_abi_version_0_2_0"]; !ok {
			return errors.New("host: the filter module exports neither proxy_abi_version_0_2_1 nor proxy_abi_version_0_2_0: not a proxy-wasm 0.2 module")
		}
	}
	_, a := exp["proxy_on_memory_allocate"]
	_, m := exp["malloc"]
	if !a && !m {
		return errors.New("host: the filter module exports no proxy_on_memory_allocate (or malloc)")
	}
	if len(cm.ExportedMemories()) == 0 {
		return errors.New("host: the filter module exports no memory")
	}
	return nil
}

func typeNames(ts []api.ValueType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = api.ValueTypeName(t)
	}
	return "(" + strings.Join(s, ",") + ")"
}

// newInstance instantiates the module, its linear memory a reservation
// outside the Go heap (package linmem), and runs the guest's start-up:
// _initialize, proxy_on_vm_start, proxy_on_context_create(root) and
// proxy_on_configure.
func (h *Host) newInstance(ctx context.Context) (*instance, error) {
	return h.newInstanceOf(ctx, h.plugin.Load())
}

// newInstanceOf starts an instance with the shared part p.
func (h *Host) newInstanceOf(ctx context.Context, p *abi.Plugin) (_ *instance, err error) {
	mod, err := h.rt.InstantiateModule(withMemory(ctx), h.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("host: instantiate filter module: %w", err)
	}
	h.live.Add(1)
	in := &instance{h: h, mod: mod, startupLog: []string{}}
	in.ctx = context.WithValue(context.Background(), instKey{}, in)
	for name := range mod.ExportedMemoryDefinitions() {
		in.mem = mod.ExportedMemory(name)
		break
	}
	alloc := mod.ExportedFunction("proxy_on_memory_allocate")
	if alloc == nil {
		alloc = mod.ExportedFunction("malloc")
	}
	mem := hostcall.NewMemory(in.mem)
	in.abi = abi.Instance{Plugin: p, Mem: mem, Alloc: alloc, Log: in.guestLog}
	in.wasi = wasi.System{Mem: mem, Env: h.opts.Env, Epoch: h.epoch, Log: in.guestLog, Logger: h.log}
	in.onContextCreate = mod.ExportedFunction("proxy_on_context_create")
	in.onRequestHeaders = mod.ExportedFunction("proxy_on_request_headers")
	in.onRequestBody = mod.ExportedFunction("proxy_on_request_body")
	in.onRequestTrailers = mod.ExportedFunction("proxy_on_request_trailers")
	in.onDone = mod.ExportedFunction("proxy_on_done")
	in.onLog = mod.ExportedFunction("proxy_on_log")
	in.onDelete = mod.ExportedFunction("proxy_on_delete")
	defer func() {
		if err != nil {
			in.close()
		}
	}()
	cctx, end := in.begin()
	defer func() {
		if end() && err != nil {
			err = fmt.Errorf("%w (start-up ran longer than %v)", err, h.opts.CallTimeout)
		}
	}()
	failed := func(what string, err error) error {
		msg := fmt.Sprintf("host: filter start-up failed in %s", what)
		if err != nil {
			msg += ": " + err.Error()
		}
		if len(in.startupLog) > 0 {
			msg += "; the filter logged: " + strings.Join(in.startupLog, " | ")
		}
		return errors.New(msg)
	}
	if f := mod.ExportedFunction("_initialize"); f != nil {
		if _, err := in.call(cctx, f, "_initialize"); err != nil {
			return nil, failed("_initialize", err)
		}
	} else if f := mod.ExportedFunction("_start"); f != nil {
		if _, err := in.call(cctx, f, "_start"); err != nil {
			return nil, failed("_start", err)
		}
	}
	in.abi.Phase = abi.PhaseVMStart
	if f := mod.ExportedFunction("proxy_on_vm_start"); f != nil {
		ok, err := in.call(cctx, f, "proxy_on_vm_start", 0, uint64(len(p.VMConfig)))
		if err != nil || uint32(ok) == 0 {
			return nil, failed("proxy_on_vm_start", err)
		}
	}
	in.abi.Phase = abi.PhaseIdle
	if _, err := in.call(cctx, in.onContextCreate, "proxy_on_context_create", abi.RootContextID, 0); err != nil {
		return nil, failed("proxy_on_context_create", err)
	}
	in.abi.Phase = abi.PhaseConfigure
	if f := mod.ExportedFunction("proxy_on_configure"); f != nil {
		ok, err := in.call(cctx, f, "proxy_on_configure", abi.RootContextID, uint64(len(p.PluginConfig)))
		if err != nil || uint32(ok) == 0 {
			return nil, failed("proxy_on_configure (the filter rejected its configuration)", err)
		}
	}
	in.abi.Phase = abi.PhaseIdle
	in.startupLog = nil
	in.nextID = abi.RootContextID
	in.accountMemory()
	return in, nil
}

// accountMemory brings Host.memBytes up to date with the instance's
// linear memory.
func (in *instance) accountMemory() {
	if in.mem == nil {
		return
	}
	n := int64(in.mem.Size())
	in.h.memBytes.Add(n - in.memAccounted)
	in.memAccounted = n
}

func (in *instance) close() {
	in.h.memBytes.Add(-in.memAccounted)
	in.memAccounted = 0
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
		in.mod = nil
		in.h.live.Add(-1)
	}
}

// Filter runs one request through the filter. On success the Decision says
// what to send: a local reply or the (possibly changed) request. Any error
// means the request must not be forwarded; a *TrapError means the guest
// failed and its instance was replaced.
func (h *Host) Filter(ctx context.Context, r *Request) (*Decision, error) {
	in, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	cctx, end := in.begin()
	d, err := in.run(cctx, ctx, r)
	timedOut := end()
	switch {
	case timedOut && err != nil:
		h.release(in, reasonTimeout)
		err = &TrapError{Callback: callbackName(err), Err: fmt.Errorf("%w: the filter ran longer than %v", context.DeadlineExceeded, h.opts.CallTimeout)}
	case err != nil && isTrap(err):
		h.release(in, reasonTrap)
	case uint64(in.mem.Size()) > h.opts.RetireBytes:
		h.release(in, reasonGrown)
	default:
		h.release(in, -1)
	}
	return d, err
}

func callbackName(err error) string {
	var t *TrapError
	if errors.As(err, &t) {
		return t.Callback
	}
	return "filter"
}

func isTrap(err error) bool {
	var t *TrapError
	return errors.As(err, &t)
}

func (h *Host) acquire(ctx context.Context) (*instance, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	h.inflight.Add(1)
	h.mu.Unlock()
	select {
	case in := <-h.idle:
		if !h.stale(in) {
			return in, nil
		}
		h.replaceStale(in)
	default:
	}
	t := time.NewTimer(h.opts.AcquireTimeout)
	defer t.Stop()
	for {
		select {
		case in := <-h.idle:
			if !h.stale(in) {
				return in, nil
			}
			h.replaceStale(in)
			continue
		case <-t.C:
			h.inflight.Done()
			return nil, ErrPoolTimeout
		case <-ctx.Done():
			h.inflight.Done()
			return nil, ctx.Err()
		case <-h.stop:
			h.inflight.Done()
			return nil, ErrClosed
		}
	}
}

// replaceStale closes an instance of an older configuration that was
// idle, and starts one with the current configuration in its place.
func (h *Host) replaceStale(in *instance) {
	in.close()
	h.inflight.Add(1)
	go h.replace()
}

// release returns an instance to the pool, or closes it and starts a
// replacement when reason >= 0 or the configuration changed meanwhile.
func (h *Host) release(in *instance, reason int) {
	if reason < 0 && h.stale(in) {
		in.close()
		go h.replace() // takes over in's inflight count
		return
	}
	if reason < 0 {
		in.accountMemory()
		h.idle <- in
		h.inflight.Done()
		return
	}
	h.replaced[reason].Add(1)
	in.close()
	go func() {
		defer h.inflight.Done()
		if n := h.startInstance(); n != nil {
			h.idle <- n
		}
	}()
}

// guestLogLevel is the proxy_log_level_t below which guest lines are dropped.
func (h *Host) guestLogLevel() proxywasm.LogLevel {
	ctx := context.Background()
	switch {
	case h.log.Enabled(ctx, slog.LevelDebug):
		return proxywasm.LogDebug
	case h.log.Enabled(ctx, slog.LevelInfo):
		return proxywasm.LogInfo
	case h.log.Enabled(ctx, slog.LevelWarn):
		return proxywasm.LogWarn
	}
	return proxywasm.LogError
}

// Live reports how many instances exist (idle, busy or starting).
func (h *Host) Live() int { return int(h.live.Load()) }

// Size reports the pool size.
func (h *Host) Size() int { return h.size }

// Close waits for requests in flight (until ctx is done), then closes every
// instance, the runtime and the compilation cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(h.stop)
	h.drain(ctx)
	if err != nil {
		// Requests still run in instances out of the pool: closing the
		// runtime would unmap the memory under them. What is left goes
		// with the process.
		h.log.Warn("wasm filter instances still busy at close; left running", "busy", h.live.Load())
		return err
	}
	if e := h.rt.Close(context.Background()); err == nil {
		err = e
	}
	_ = h.cache.Close(context.Background())
	if err == nil {
		h.live.Store(0)
	}
	return err
}

func (h *Host) drain(context.Context) {
	for {
		select {
		case in := <-h.idle:
			in.close()
		default:
			return
		}
	}
}
