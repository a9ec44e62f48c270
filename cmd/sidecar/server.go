package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/host"
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// server is the proxy: filter every request through the wasm host, then
// forward it (or answer locally).
type server struct {
	cfg      *config
	log      *slog.Logger
	host     *host.Host
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	reg      *prometheus.Registry
	ready    atomic.Bool

	failures *prometheus.CounterVec
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
	// outcomes are the requests counter's series, resolved once.
	outcomes map[outcome]prometheus.Counter
	// memPages and retireBytes are each instance's memory cap and retire
	// size (instanceMemory), fixed at start-up for the body limit
	// memSizedFor, the first policy's: what apply checks a reloaded
	// limit against, never the limit in force.
	memPages    uint32
	retireBytes uint64
	memSizedFor int64
	// cacheDir is the compilation cache in use (usableCacheDir).
	cacheDir string
	// policy is the filter configuration in force, the body limit with it
	// (reload.go): replaced whole by apply, never changed in place.
	policy  atomic.Pointer[policy]
	reloads reloadMetrics
}

// newServer starts the filter module with the policy first (apply) and
// makes the proxy to upstream.
func newServer(ctx context.Context, cfg *config, first *policy, upstream string, log *slog.Logger) (*server, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: log, upstream: u, reg: prometheus.NewRegistry()}
	s.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvgate_filter_failures_total",
		Help: "Requests answered 503 because the filter failed (trap, host error, pool timeout); nothing was forwarded.",
	}, []string{"reason"})
	for _, r := range []string{"trap", "pool_timeout", "paused", "closed_stream", "error"} {
		s.failures.WithLabelValues(r)
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvgate_sidecar_requests_total",
		Help: "Requests handled by the sidecar, by outcome.",
	}, []string{"outcome"})
	s.outcomes = map[outcome]prometheus.Counter{}
	for _, o := range outcomes {
		s.outcomes[o] = s.requests.WithLabelValues(string(o))
	}
	s.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kvgate_filter_duration_seconds",
		Help:    "Time spent in the wasm filter per request (instance wait included).",
		Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1, 0.25, 1},
	})
	s.reg.MustRegister(s.failures, s.requests, s.latency, buildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	s.reloads = newReloadMetrics(s.reg)
	s.memSizedFor = first.maxBody()
	s.memPages, s.retireBytes = instanceMemory(s.memSizedFor)
	s.cacheDir = usableCacheDir(cfg, log)
	log.Info("compiling the filter module", "filter", filterName(cfg), "cache_dir", s.cacheDir)
	if err := s.apply(ctx, first); err != nil {
		return nil, err
	}
	s.proxy = &httputil.ReverseProxy{
		Transport: bodyTransport{upstreamTransport(cfg.Worker)},
		ErrorLog:  newNetLogger(log, "proxy"),
		// FlushInterval 0: ReverseProxy itself flushes every write of a
		// text/event-stream or unknown-length (chunked) response, so
		// streamed completions reach the client as they are produced;
		// known-length responses are not flushed write by write.
		BufferPool: copyBuffers{},
		Rewrite:    s.rewrite,
		// The sidecar never asks the worker to switch protocols (rewrite
		// removes Upgrade): a 101 is a worker's error, answered 502, and
		// the connection never becomes a tunnel. The answer's body is
		// watched for a worker that stops in the middle of it.
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode == http.StatusSwitchingProtocols {
				return errUnrequestedSwitch
			}
			if x := exchangeOf(res.Request.Context()); x != nil && res.Body != nil && res.Body != http.NoBody {
				res.Body = &answerBody{ReadCloser: res.Body, x: x, ctx: res.Request.Context()}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			o, status, msg := classifyUpstream(r.Context(), err)
			if x := exchangeOf(r.Context()); x != nil {
				x.outcome = o
			}
			if o == outcomeClientGone {
				return // nobody to answer; the upstream request was cancelled
			}
			// Transport errors can quote the worker's bytes.
			log.Warn("upstream error", "outcome", string(o), "err", redactQuoted(err.Error()), "path", r.URL.Path)
			writeError(w, status, msg)
		},
	}
	s.ready.Store(true)
	return s, nil
}

// hostOptions are the filter host's options, with pluginConfig the first
// policy's configuration (apply).
func (s *server) hostOptions(pluginConfig []byte) host.Options {
	return host.Options{
		PoolSize:         s.cfg.PoolSize,
		MemoryLimitPages: s.memPages,
		RetireBytes:      s.retireBytes,
		PluginConfig:     pluginConfig,
		PluginName:       "kvgate",
		RootID:           "kvgate",
		VMID:             "kvgate",
		CacheDir:         s.cacheDir,
		Logger:           s.log,
		Registerer:       s.reg,
		HeaderInPlace:    true, // the sidecar forwards r.Header and has no other use for it
		BodyAlloc:        changedBody,
		MetricHelp:       filterspec.MetricHelp,
	}
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.host.Close(ctx)
}

// rewrite points the upstream request at the worker. forward has already
// put the filter's decision (method, path, headers, body) into pr.In,
// which ReverseProxy cloned into pr.Out.
func (s *server) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme = s.upstream.Scheme
	out.URL.Host = s.upstream.Host
	out.Host = "" // the upstream's host
	// The base path goes in front of the escaped path, which is kept as
	// it is (an escaped '/' stays escaped).
	if base := s.upstream.EscapedPath(); base != "" && base != "/" {
		ep := singleJoin(base, out.URL.EscapedPath())
		if p, err := url.PathUnescape(ep); err == nil {
			out.URL.Path, out.URL.RawPath = p, ep
		}
	}
	out.Header.Del("Content-Length")
	for _, k := range hopByHopForwarded {
		out.Header.Del(k)
	}
	pr.SetXForwarded()
}

// copyBuffers lends ReverseProxy its response copy buffers.
type copyBuffers struct{}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (copyBuffers) Get() []byte  { return *copyBufPool.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { copyBufPool.Put(&b) }

func singleJoin(a, b string) string {
	switch {
	case a[len(a)-1] == '/' && len(b) > 0 && b[0] == '/':
		return a + b[1:]
	case a[len(a)-1] != '/' && (len(b) == 0 || b[0] != '/'):
		return a + "/" + b
	}
	return a + b
}

// ServeHTTP filters then forwards one request, and accounts for it: one
// count and one access line (exchange.finish), whatever path the request
// leaves by, a panic included.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := s.newExchange(w, r)
	defer x.finish()
	x.settle(s.serve(x))
}

// serve takes the request x through the sidecar, step by step, and returns
// its outcome (unless the proxy's ErrorHandler or the answer's body records
// one first): the refusals made on its headers (screen), the body (read),
// the filter (filter), then the sidecar's or the filter's own answer
// (answer) or the worker's (forward). Every buffer it reads into or is lent
// belongs to x, which gives it back.
func (s *server) serve(x *exchange) outcome {
	if o := s.screen(&x.w, x.r); o != "" {
		return o
	}
	if o := x.read(s.policy.Load().maxBody()); o != "" {
		return o
	}
	d, o := x.filter()
	if o != "" {
		return o
	}
	if x.tooLarge != "" || d.Local != nil {
		return x.answer(d)
	}
	return x.forward(d)
}

// read reads the request body, at most limit bytes of it, into x.body, and
// is the one place the body limit is applied: a body over it is decided
// here (x.tooLarge, the 413's message), from Content-Length or while
// reading a longer or chunked one; answer sends the 413 once the filter
// has seen the request. It returns an outcome only for a request it
// answers itself: a body that stalls (408), cannot be read or ends in a
// trailer that carries a field a trailer must not (400).
//
// A body announced over the limit is refused from the headers: none of it
// is read (a client that sent Expect: 100-continue gets no 100 Continue),
// and the filter sees the headers only (x.withheld), so that it answers
// 413 and counts it as Envoy's would. Otherwise at most limit+1 bytes are
// buffered: a longer body without Content-Length is still shown to the
// filter (cut at limit+1 bytes) for the same reason. An over-long body is
// never forwarded, and the connection is closed after the 413 rather than
// drained of a body nobody wants.
func (x *exchange) read(limit int64) outcome {
	w, r := &x.w, x.r
	_, x.tooLarge = kvhints.BodyTooLarge(r.ContentLength, int(limit))
	x.withheld = x.tooLarge != ""
	if !x.withheld {
		idle := x.s.cfg.IdleTimeout
		var err error
		x.body, err = readBody(r, limit, idleTimer{set: http.NewResponseController(w).SetReadDeadline, d: idle})
		switch {
		case err != nil && errTimeout(err):
			closeAfterReply(w) // answer now, not once the rest of the body came
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body stalled: no data for %v", idle))
			return outcomeBodyTimeout
		case err != nil:
			closeAfterReply(w) // what is left of the connection is not a request
			writeError(w, http.StatusBadRequest, "cannot read the request body")
			return outcomeBadRequest
		}
	}
	if k := forbiddenTrailer(r.Trailer); k != "" {
		writeError(w, http.StatusBadRequest, "the request's trailer carries "+k+", which a trailer must not")
		return outcomeBadRequest
	}
	if !x.withheld {
		_, x.tooLarge = kvhints.BodyTooLarge(int64(len(x.body.bytes())), int(limit))
	}
	if x.tooLarge != "" {
		// After the handler, net/http would wait for up to 256 KiB more of
		// the body before closing: nobody wants it.
		closeAfterReply(w)
	}
	return ""
}

// filter runs the request through the wasm filter and returns its
// decision, or the outcome of a request it could not filter: the client
// went away, or the filter failed (503, nothing forwarded).
//
// The filter sees the request target exactly as it will be forwarded
// (forwardTarget, x.target), so that exclude_paths is matched on the bytes
// the worker gets. A client's x-forwarded-client-cert is removed before the
// filter and never forwarded, as Envoy's forward_client_cert_details:
// SANITIZE does: identity comes from this connection's TLS state (r.TLS,
// with the peer's verified certificate) and r.RemoteAddr, never a header.
// A body the filter changes is written into pooled memory too
// (changedBody, x.rewritten).
func (x *exchange) filter() (*host.Decision, outcome) {
	s, r := x.s, x.r
	x.target = forwardTarget(r.URL)
	delete(r.Header, "X-Forwarded-Client-Cert")
	req := &host.Request{
		Method: r.Method, Path: x.target, Authority: r.Host, Protocol: r.Proto,
		Header: r.Header, Body: x.body.bytes(), BodyWithheld: x.withheld, RemoteAddr: r.RemoteAddr, LocalAddr: x.localAddr,
		Trailer: r.Trailer, TLS: r.TLS,
	}
	if r.TLS != nil {
		req.Scheme = "https"
	}
	start := time.Now()
	d, err := s.host.Filter(x.context(), req)
	took := time.Since(start)
	s.latency.Observe(took.Seconds())
	x.noteFilter(d, took)
	if err != nil {
		reason := failureReason(err)
		if errors.Is(err, context.Canceled) {
			return nil, outcomeClientGone
		}
		s.failures.WithLabelValues(reason).Inc()
		s.log.Error("filter failed; request not forwarded", "reason", reason, "err", err, "path", r.URL.Path)
		writeError(&x.w, http.StatusServiceUnavailable, "the request filter failed; the request was not forwarded")
		return nil, outcomeFilterFailure
	}
	return d, ""
}

// answer answers the request without the worker: with the filter's own
// answer (d.Local), which stands when the body is also too large (its 413,
// or 415 for an encoded body, counted as Envoy's would be), or else with
// the 413 read decided on.
func (x *exchange) answer(d *host.Decision) outcome {
	w := &x.w
	if d.Local == nil {
		writeError(w, http.StatusRequestEntityTooLarge, x.tooLarge)
		return outcomeTooLarge
	}
	h := w.Header()
	for k, vs := range d.Local.Header {
		h[k] = vs
	}
	h.Set("Content-Length", strconv.Itoa(len(d.Local.Body)))
	w.WriteHeader(d.Local.Status)
	_, _ = w.Write(d.Local.Body)
	return outcomeLocalReply
}

// forward hands the worker the request the filter decided on and relays
// its answer: a shallow copy of r carrying the decision, its body d.Body:
// the bytes read, or the filter's, in the pooled buffer x.rewritten or
// (nil) in memory the host allocated. The proxy's ErrorHandler and the
// answer's body record what went wrong in x.outcome, which ServeHTTP keeps
// over the one returned.
func (x *exchange) forward(d *host.Decision) outcome {
	r := x.r
	src := x.body
	if d.BodyChanged {
		src = x.rewritten
	}
	out := x.upstreamRequest(d.Body, src)
	if d.HeaderChanged {
		out.Header = d.Header // ReverseProxy clones it and drops hop-by-hop fields
		if d.Method != "" {
			out.Method = d.Method
		}
		if d.Path != "" && d.Path != x.target {
			if u, err := url.ParseRequestURI(d.Path); err == nil {
				nu := *r.URL
				nu.Path, nu.RawPath, nu.RawQuery = u.Path, u.RawPath, u.RawQuery
				out.URL = &nu
			}
		}
	}
	x.s.proxy.ServeHTTP(&x.w, out)
	return outcomeForwarded
}

func failureReason(err error) string {
	var te *host.TrapError
	switch {
	case errors.As(err, &te):
		return "trap"
	case errors.Is(err, host.ErrPoolTimeout), errors.Is(err, context.DeadlineExceeded):
		return "pool_timeout"
	case errors.Is(err, host.ErrPaused):
		return "paused"
	case errors.Is(err, host.ErrStreamClosed):
		return "closed_stream"
	}
	return "error"
}

// writeError answers with an OpenAI-style JSON error (the guest's own
// shape): type invalid_request_error for a 4xx, server_error for a 5xx.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ := httperr.TypeInvalidRequest
	if status >= 500 {
		typ = httperr.TypeServer
	}
	w.Header().Set("Content-Type", "application/json")
	b := httperr.Body(status, typ, msg)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() || s.host.Live() == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

// statusWriter is a request's response writer (exchange.w) and what its
// access line says of the answer: the final status and the bytes sent. It
// keeps flushing available to the reverse proxy.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
	// writeFailed is set when a write to the client failed: it is gone.
	writeFailed bool
}

// WriteHeader records the final status. An interim answer is not the
// status of the request: a 100 Continue from the worker is dropped (the
// sidecar never forwards Expect, and net/http has already sent the client
// its own 100 if it asked for one), other 1xx (103 Early Hints) pass
// through unrecorded.
func (w *statusWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		if code == http.StatusContinue {
			return
		}
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	if err != nil {
		w.writeFailed = true
	}
	return n, err
}

// complete reports whether the answer has been written in full: a final
// status and as many body bytes as its Content-Length announced. A HEAD
// answer or one without a body (1xx, 204, 304), and a chunked one, whose
// last chunk net/http writes only after the handler, are not.
func (w *statusWriter) complete() bool {
	if w.status < 200 || w.status == http.StatusNoContent || w.status == http.StatusNotModified || w.writeFailed {
		return false
	}
	n, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64)
	return err == nil && n == w.n
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// echoServer is the built-in worker used when -upstream is empty.
type echoServer struct {
	Addr string
	srv  *http.Server
}

func (e *echoServer) Close() { _ = e.srv.Close() }

func startEcho(log *slog.Logger) (*echoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: echoHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &echoServer{Addr: ln.Addr().String(), srv: srv}, nil
}

// echoHandler answers every request with its own body, content type and
// request line (X-Echo-Method, X-Echo-Path).
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := w.Header()
		if ct := r.Header.Get("Content-Type"); ct != "" {
			h.Set("Content-Type", ct)
		}
		h.Set("X-Echo-Method", r.Method)
		h.Set("X-Echo-Path", r.URL.RequestURI())
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}
