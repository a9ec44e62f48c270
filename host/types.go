package host

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Host. The zero value is usable.
type Options struct {
	// PoolSize is the number of module instances; 0 means runtime.GOMAXPROCS(0).
	PoolSize int
	// PluginConfig is handed to the guest as PLUGIN_CONFIGURATION in
	// proxy_on_configure (Envoy's "configuration").
	PluginConfig []byte
	// VMConfig is handed to the guest as VM_CONFIGURATION in proxy_on_vm_start.
	VMConfig []byte
	// PluginName, RootID and VMID answer the plugin_name, plugin_root_id and
	// plugin_vm_id properties.
	PluginName, RootID, VMID string
	// Env is the guest's environment ("KEY=value"), empty by default as in
	// Envoy unless configured.
	Env []string
	// CacheDir holds wazero's compilation cache on disk; empty means an
	// in-memory cache for this Host only.
	CacheDir string
	// MemoryLimitPages caps each instance's linear memory (64 KiB pages);
	// 0 means DefaultMemoryLimitPages.
	MemoryLimitPages uint32
	// RetireBytes: an instance whose linear memory grew past this size is
	// closed and replaced after the request that grew it; 0 means
	// DefaultRetireBytes.
	RetireBytes uint64
	// AcquireTimeout bounds the wait for a free instance; 0 means 5s.
	AcquireTimeout time.Duration
	// CallTimeout bounds the guest's work on one request; a guest still
	// running then is stopped and its instance replaced. 0 means 10s.
	CallTimeout time.Duration
	// Logger receives the guest's log lines and the host's own; nil means
	// slog.Default().
	Logger *slog.Logger
	// Registerer, when set, gets the Host registered as a Prometheus
	// collector (guest metrics and pool gauges).
	Registerer prometheus.Registerer

	// HeaderInPlace hands each Request's Header over to Filter: when the
	// guest only removed fields, they are deleted from Request.Header
	// itself and Decision.Header is that same map, instead of a copy. Set
	// it when the caller forwards the request and has no other use for the
	// original header; it saves a copy of the header per request.
	HeaderInPlace bool
	// BodyAlloc, when set, supplies the memory of each body a guest writes
	// (proxy_set_buffer_bytes): a slice of length n that the caller owns,
	// for example from a pool. It is called with the context given to
	// Filter, which can carry what the caller needs to account for the
	// slice, possibly more than once per request (a guest may replace the
	// body several times); only the slice in Decision.Body is used in the
	// end. When it is nil, or returns less than n bytes of capacity, the
	// host allocates.
	BodyAlloc func(ctx context.Context, n int) []byte
	// MetricHelp, when set, gives the help text of a metric family the
	// guest defines (the name before any labels, see metricname), which
	// proxy-wasm cannot carry. When nil, or for "", the help text says
	// only that the guest defined the family.
	MetricHelp func(family string) string
}

// Defaults for Options.
const (
	DefaultMemoryLimitPages = 2048     // 128 MiB
	DefaultRetireBytes      = 64 << 20 // 64 MiB
)

// Request is what the filter sees of an HTTP request.
type Request struct {
	Method    string // :method
	Path      string // :path, the request target with its query, as received
	Authority string // :authority (Host)
	Scheme    string // :scheme; "http" when empty
	Protocol  string // "HTTP/1.1", "HTTP/2"; answers request.protocol
	// Header holds the regular headers (no pseudo-headers).
	Header http.Header
	// Body is the whole request body; nil or empty means no body.
	Body []byte
	// BodyWithheld says that the request has a body the caller has not
	// read and will not forward: it refuses the request on its headers
	// (a body announced over its size limit). The guest sees the headers
	// with end_of_stream false and nothing after them, as when a proxy
	// resets a stream mid-request; Body and Trailer must be empty. A
	// Decision without a local reply must then not be forwarded.
	BodyWithheld bool
	// Trailer holds request trailers, if any.
	Trailer http.Header
	// RemoteAddr and LocalAddr are "ip:port" ("[ip]:port" for IPv6) of the
	// downstream connection: the peer's and this end's. They answer the
	// source.* and destination.* properties, as given (source.address is
	// RemoteAddr); empty means absent. Give the connection's own peer,
	// never an address a client wrote (X-Forwarded-For): source.address
	// can decide trust (docs/spec.md, Trusted senders).
	RemoteAddr, LocalAddr string
	// TLS is the downstream connection's TLS state (http.Request.TLS);
	// nil for plain text. It answers connection.mtls and the first URI and
	// DNS SANs of the client's certificate, counted only when its chain
	// was verified (VerifiedChains not empty); see Properties in the
	// package documentation. The host verifies nothing itself: put here
	// only what the caller's TLS stack verified against the CA it trusts
	// for clients.
	TLS *tls.ConnectionState
}

// LocalReply is a response the guest sent itself (proxy_send_local_response).
type LocalReply struct {
	Status  int
	Details string // status code details given by the guest
	Header  http.Header
	Body    []byte
}

// Decision is the outcome of filtering one request: either a local reply
// (Local != nil: answer the client with it and forward nothing) or the
// request to forward, with the guest's changes applied.
type Decision struct {
	Local *LocalReply

	// Method, Path and Authority are the pseudo-headers after the filter.
	Method, Path, Authority string
	// Header is the regular headers to forward. When HeaderChanged is
	// false it is the Request's own Header.
	Header        http.Header
	HeaderChanged bool
	// Body is the body to forward. When BodyChanged is false it is the
	// Request's own Body (the original bytes).
	Body        []byte
	BodyChanged bool
	// Trailer is the trailers to forward (nil when none).
	Trailer http.Header

	// Properties are the values the guest set on the request with
	// proxy_set_property, by path with its segments joined by dots
	// ("kvgate.hint"); nil when it set none. Set with a local reply too.
	// Envoy keeps such values as filter state ("wasm.<path>"), which its
	// access log can print; a caller logs these.
	Properties map[string][]byte
}

// Errors returned by Filter. Every one of them means: do not forward.
var (
	// ErrPoolTimeout: no instance became free within AcquireTimeout.
	ErrPoolTimeout = errors.New("host: no filter instance free in time")
	// ErrClosed: the Host is shut down.
	ErrClosed = errors.New("host: closed")
	// ErrPaused: the guest paused the request and never resumed it.
	ErrPaused = errors.New("host: filter paused the request and never resumed it")
	// ErrStreamClosed: the guest reset the request (proxy_close_stream).
	ErrStreamClosed = errors.New("host: filter closed the request stream")
)

// TrapError reports a guest call that trapped or failed; the instance that
// ran it has been discarded.
type TrapError struct {
	Callback string // e.g. "proxy_on_request_body"
	Err      error
}

func (e *TrapError) Error() string { return fmt.Sprintf("host: %s: %v", e.Callback, e.Err) }

// Unwrap returns the underlying error.
func (e *TrapError) Unwrap() error { return e.Err }
