// Package abi is the host side of the proxy-wasm ABI 0.2.1: the functions of
// module "env" that Envoy's proxy-wasm host provides, each with the answers
// Envoy gives, acting on one guest instance's state (Instance) and the
// request it serves (Stream). The ABI itself is documented in package
// proxywasm.
//
// The functions come in groups, one per part of the ABI: logging and time,
// buffers, header maps, the HTTP stream, metrics, properties, and the calls
// this host answers without doing the work (outgoing HTTP and gRPC calls,
// shared data and queues, foreign functions). A module that imports any of
// them instantiates; one that relies on the last group sees the statuses
// Envoy gives when there is nothing to find or no such upstream.
//
// Every pointer and length a guest passes is checked against its memory
// (hostcall.Memory); a bad one traps the calling instance.
package abi

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/kvgate/kvgate/host/internal/hostcall"
	"github.com/kvgate/kvgate/host/internal/metrics"
	"github.com/kvgate/kvgate/proxywasm"
)

// RootContextID is the id of the plugin's root context, created once per
// instance; stream contexts get the ids after it.
const RootContextID = 1

// Plugin is what every instance of one host shares.
type Plugin struct {
	// VMConfig and PluginConfig are the VM_CONFIGURATION and
	// PLUGIN_CONFIGURATION buffers.
	VMConfig, PluginConfig []byte
	// Name, RootID and VMID answer the plugin_name, plugin_root_id and
	// plugin_vm_id properties.
	Name, RootID, VMID string
	// Metrics holds the metrics the guests define.
	Metrics *metrics.Set
	// Logger receives the host's own notes on the guest's calls.
	Logger *slog.Logger
	// LogLevel answers proxy_get_log_level: the level below which guest
	// log lines are dropped.
	LogLevel func() proxywasm.LogLevel
	// BodyAlloc, when set, supplies the memory of a body the guest writes:
	// a slice of length n, called with the Stream's Context.
	BodyAlloc func(ctx context.Context, n int) []byte

	tickWarn sync.Once
}

// Phase is where an instance is in its life; it decides which buffers the
// guest may read.
type Phase int

// The phases.
const (
	PhaseIdle Phase = iota
	PhaseVMStart
	PhaseConfigure
	PhaseRequest
)

// Instance is one guest instance's proxy-wasm state. It is used by one
// goroutine at a time.
type Instance struct {
	Plugin *Plugin
	Mem    hostcall.Memory
	// Alloc is the guest's proxy_on_memory_allocate (or malloc).
	Alloc api.Function
	// Log receives the guest's proxy_log lines.
	Log   func(level proxywasm.LogLevel, msg string)
	Phase Phase
	// Stream is the HTTP request being served, or nil.
	Stream *Stream

	scratch    []byte    // a header map on its way to the guest, reused
	allocStack [1]uint64 // the guest allocator's argument and result
}

// Stream is one HTTP request's proxy-wasm state: what the guest sees and
// what it changed.
type Stream struct {
	ID uint32
	// Headers (pseudo-headers first) and Trailers are the request's header
	// maps, names in lower case.
	Headers, Trailers [][2]string
	// Body is the request body; BodyReadable says whether the guest may
	// read it yet (from proxy_on_request_body on).
	Body         []byte
	BodyReadable bool
	// What the guest changed.
	HeadersChanged, TrailersChanged, BodyChanged bool
	// Local is the guest's local reply, if it sent one.
	Local *LocalReply
	// Continued: the guest resumed the request (proxy_continue_stream)
	// since the host last cleared it; Closed: the guest reset it.
	Continued, Closed bool
	// Properties answers the request's properties (request.*, source.*,
	// destination.*); nil answers none.
	Properties Properties
	// Context is the context the request is filtered with, for
	// Plugin.BodyAlloc.
	Context context.Context

	props map[string][]byte // set by the guest
	vals  []byte            // props' values
}

// GuestProperties returns the properties the guest set on the stream
// (proxy_set_property), by dotted key; nil when it set none. Envoy keeps
// them as filter state, which an access log can print.
func (x *Stream) GuestProperties() map[string][]byte { return x.props }

// LocalReply is a response the guest sent itself.
type LocalReply struct {
	Status  int
	Details string
	Headers [][2]string
	Body    []byte
}

// Properties answers property lookups by dotted key ("request.path").
type Properties interface {
	Property(key string) ([]byte, bool)
}

type hostFunc = hostcall.Func[*Instance]

// call is the body of a proxy-wasm host function: it reads its arguments
// from s and returns its status, which fn writes back as the result.
type call func(ctx context.Context, in *Instance, s []uint64) proxywasm.Status

func fn(name string, params []api.ValueType, c call) hostFunc {
	return hostFunc{Name: name, Params: params, Results: hostcall.R32, Fn: func(ctx context.Context, in *Instance, s []uint64) {
		s[0] = uint64(guarded(ctx, in, s, c))
	}}
}

// guarded runs c, and answers a pointer or size outside the guest's memory
// (a *hostcall.Fault) with InvalidMemoryAccess, as Envoy's proxy-wasm host
// does, instead of trapping the guest's call. Any other panic goes on.
func guarded(ctx context.Context, in *Instance, s []uint64, c call) (st proxywasm.Status) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(*hostcall.Fault); !ok {
				panic(r)
			}
			st = proxywasm.StatusInvalidMemoryAccess
		}
	}()
	return c(ctx, in, s)
}

var ps = hostcall.I32s

// Funcs are the proxy-wasm host functions (module "env").
func Funcs() []hostFunc {
	var fs []hostFunc
	for _, group := range [][]hostFunc{logFuncs(), bufferFuncs(), headerMapFuncs(), streamFuncs(),
		metricFuncs(), propertyFuncs(), unsupportedFuncs()} {
		fs = append(fs, group...)
	}
	return fs
}

// copyOut places data in memory from the guest's allocator and writes its
// address and size to the guest's return slots.
func (in *Instance) copyOut(ctx context.Context, fn string, data []byte, retPtr, retSize uint32) proxywasm.Status {
	// Check the return slots before calling into the guest.
	in.Mem.Read(fn, retPtr, 4)
	in.Mem.Read(fn, retSize, 4)
	var addr uint32
	if len(data) > 0 {
		if uint64(len(data)) > math.MaxUint32 {
			return proxywasm.StatusInvalidMemoryAccess
		}
		s := in.allocStack[:]
		s[0] = uint64(len(data))
		if err := in.Alloc.CallWithStack(ctx, s); err != nil {
			panic(fmt.Errorf("%s: guest allocator failed: %w", fn, err))
		}
		addr = uint32(s[0])
		if addr == 0 {
			return proxywasm.StatusInvalidMemoryAccess
		}
		in.Mem.Write(fn, addr, data)
	}
	in.Mem.WriteU32(fn, retPtr, addr)
	in.Mem.WriteU32(fn, retSize, uint32(len(data)))
	return proxywasm.StatusOK
}
