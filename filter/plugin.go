package filter

import (
	"bytes"
	"strconv"

	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/metricname"
)

// Metric families the filter defines (docs/spec.md, Metrics). Each series is
// defined through Host.DefineCounter under its metricname.Encode name.
const (
	// MetricIgnored counts ignored hints, label reason (kvhints.Reasons).
	MetricIgnored = "trtllm_kv_hints_ignored_total"
	// MetricAdmitted counts admitted envelopes.
	MetricAdmitted = "kvgate_kv_hints_admitted_total"
	// MetricRejected counts bodies answered locally, label status.
	MetricRejected = "kvgate_bodies_rejected_total"
)

// RejectStatuses are the status label values of MetricRejected.
var RejectStatuses = [...]int{400, 413, 415}

// MetricNames returns every series name the filter defines, in definition
// order: the four ignored reasons, admitted, then the rejected statuses.
func MetricNames() []string {
	var names []string
	for _, r := range kvhints.Reasons {
		names = append(names, metricname.Encode(MetricIgnored, metricname.Label{Name: "reason", Value: r.String()}))
	}
	names = append(names, metricname.Encode(MetricAdmitted))
	for _, s := range RejectStatuses {
		names = append(names, metricname.Encode(MetricRejected, metricname.Label{Name: "status", Value: strconv.Itoa(s)}))
	}
	return names
}

// Local replies.
const (
	// DetailsRejected is the response code details of a rejected body.
	DetailsRejected = "kvgate_body_rejected"
	// DetailsFailed is the response code details of a filter failure.
	DetailsFailed = "kvgate_filter_failed"
)

// FailureBody is the 503 answer when the filter cannot do its job.
var FailureBody = httperr.Body(503, httperr.TypeServer, "the request could not be filtered")

var jsonHeaders = SerializeHeaders([][2]string{{"content-type", "application/json"}})

// counters are the metric ids of one root context.
type counters struct {
	ignored  [len(kvhints.Reasons) + 1]uint32 // by kvhints.Reason
	admitted uint32
	rejected [len(RejectStatuses)]uint32
}

// root is one plugin (root context) and its configuration.
type root struct {
	id     uint32
	ok     bool
	cfg    Config
	policy kvhints.Policy
	ids    counters
}

// Stream states.
const (
	stNew       uint8 = iota // created, headers not seen yet
	stBuffering              // body being buffered for inspection
	stPass                   // nothing to inspect (no body or excluded path)
	stDone                   // forwarded after inspection or answered locally
)

// stream is one HTTP request's state. It holds no pointers (its root is
// named by id), so that creating and forgetting one, several times per
// request, needs no write barriers or typed clearing: on wasm those are
// calls into the runtime.
type stream struct {
	id    uint32
	root  uint32 // the root context's id
	state uint8
}

// Plugin is the filter of one VM: its root contexts, its in-flight streams
// and the kvhints.Rewriter they share (a VM runs one callback at a time).
// Its methods are the proxy-wasm callbacks; it is not safe for concurrent
// use. A *stream points into streams and is valid until the next context
// is created or released.
//
// Streams and roots are kept in small slices searched linearly: a VM holds
// few at a time, and on wasm this is several times cheaper than a map.
type Plugin struct {
	host    Host
	rw      kvhints.Rewriter
	roots   []*root
	streams []stream
	// reserved is the largest body limit configured so far: the rewriter's
	// output buffer holds a body of that size from start-up on.
	reserved int
}

// New returns a Plugin that talks to host.
func New(host Host) *Plugin {
	return &Plugin{host: host, rw: kvhints.Rewriter{NoSnapshot: true}}
}

func (p *Plugin) stream(id uint32) *stream {
	for i := range p.streams {
		if p.streams[i].id == id {
			return &p.streams[i]
		}
	}
	return nil
}

func (p *Plugin) root(id uint32) *root {
	for _, r := range p.roots {
		if r.id == id {
			return r
		}
	}
	return nil
}

// OnContextCreate creates a root context (parent 0) or an HTTP stream.
func (p *Plugin) OnContextCreate(id, parent uint32) {
	if parent == 0 {
		if p.root(id) == nil {
			p.roots = append(p.roots, &root{id: id})
		}
		return
	}
	p.release(id) // a reused id starts afresh
	p.streams = append(p.streams, stream{id: id, root: parent})
}

// OnVMStart accepts any VM configuration.
func (p *Plugin) OnVMStart(vmConfigSize int) bool { return true }

// OnConfigure reads, checks and applies the plugin configuration of a root
// context, and defines the metrics. It returns false, after logging why,
// when the configuration is not acceptable.
func (p *Plugin) OnConfigure(rootID uint32, size int) (ok bool) {
	defer func() {
		if recover() != nil {
			p.host.Log(LogCritical, "kvgate: internal error while configuring")
			ok = false
		}
	}()
	r := p.root(rootID)
	if r == nil {
		r = &root{id: rootID}
		p.roots = append(p.roots, r)
	}
	r.ok = false
	var doc []byte
	if size > 0 {
		var err error
		if doc, err = p.host.PluginConfig(size); err != nil {
			p.host.Log(LogCritical, "kvgate: cannot read the plugin configuration: "+err.Error())
			return false
		}
	}
	cfg, err := ParseConfig(doc)
	if err != nil {
		p.host.Log(LogCritical, "kvgate: "+err.Error())
		return false
	}
	names := MetricNames()
	ids := make([]uint32, len(names))
	for i, name := range names {
		if ids[i], err = p.host.DefineCounter(name); err != nil {
			p.host.Log(LogCritical, "kvgate: cannot define metric "+name+": "+err.Error())
			return false
		}
	}
	for i, reason := range kvhints.Reasons {
		r.ids.ignored[reason] = ids[i]
	}
	r.ids.admitted = ids[len(kvhints.Reasons)]
	copy(r.ids.rejected[:], ids[len(kvhints.Reasons)+1:])
	r.cfg, r.policy, r.ok = cfg, cfg.Policy(), true
	if rs, ok := p.host.(Reserver); ok {
		rs.Reserve(copyBlock(cfg.MaxBodyBytes))
	}
	p.reserved = max(p.reserved, cfg.MaxBodyBytes)
	p.rw.Reserve(p.reserved)
	p.host.Log(LogInfo, "kvgate: configured: version="+Version+" trust_kv_hints="+strconv.FormatBool(cfg.TrustKVHints)+
		" max_depth="+strconv.Itoa(cfg.MaxDepth)+" max_body_bytes="+strconv.Itoa(cfg.MaxBodyBytes)+
		" exclude_paths="+strconv.Itoa(len(cfg.ExcludePaths)))
	return true
}

// OnRequestHeaders decides whether the request's body must be inspected. It
// answers 415 for an encoded body and 413 for a declared length over the
// limit; otherwise it removes Content-Length (the body may change length)
// and lets the headers go on. The body itself is held back by
// OnRequestBody until the whole of it has been filtered.
//
// Pausing here would be wrong: Envoy turns a pause in the header callback
// into "stop all iteration" and never delivers the body to the filter, so
// the request would hang. Headers that went upstream early are harmless: a
// local reply resets the upstream stream, and no body byte is forwarded
// before the decision.
func (p *Plugin) OnRequestHeaders(id uint32, numHeaders int, endOfStream bool) (a Action) {
	defer p.guard(id, &a)
	s := p.stream(id)
	var r *root
	if s != nil {
		r = p.root(s.root)
	}
	if r == nil || !r.ok || s.state != stNew {
		return p.fail(id, s, "request headers on an unknown or unconfigured stream")
	}
	if endOfStream {
		s.state = stPass
		return Continue
	}
	hdrs, err := p.host.RequestHeaders()
	if err != nil {
		return p.fail(id, s, "cannot read request headers: "+err.Error())
	}
	cfg := &r.cfg
	excluded, status, msg := false, 0, ""
	err = ForEachHeader(hdrs, func(k, v []byte) {
		switch {
		case string(k) == ":path":
			excluded = cfg.Excluded(v)
		case status == 415:
		case equalFold(k, "content-encoding"):
			if st, m := httperr.CheckContentEncoding(string(v)); st != 0 {
				status, msg = st, m
			}
		case status != 0:
		case equalFold(k, "content-length"):
			if n, ok := parseLength(v); ok {
				status, msg = httperr.BodyTooLarge(n, cfg.MaxBodyBytes)
			}
		}
	})
	if err != nil {
		return p.fail(id, s, "cannot parse request headers: "+err.Error())
	}
	if excluded {
		s.state = stPass
		return Continue
	}
	if status != 0 {
		return p.reject(s, r, status, msg)
	}
	if err := p.host.RemoveRequestHeader("content-length"); err != nil {
		return p.fail(id, s, "cannot remove content-length: "+err.Error())
	}
	s.state = stBuffering
	return Continue
}

// OnRequestBody buffers the body until the end of the stream, then filters
// it. A body over the limit is answered with 413 as soon as it is seen.
func (p *Plugin) OnRequestBody(id uint32, bodySize int, endOfStream bool) (a Action) {
	defer p.guard(id, &a)
	s, r, a, ok := p.buffering(id, "request body")
	if !ok {
		return a
	}
	if status, msg := httperr.BodyTooLarge(int64(bodySize), r.cfg.MaxBodyBytes); status != 0 {
		return p.reject(s, r, status, msg)
	}
	if !endOfStream {
		return Pause
	}
	return p.finish(id, s, r, bodySize)
}

// OnRequestTrailers filters the buffered body of a request that ends in
// trailers.
func (p *Plugin) OnRequestTrailers(id uint32, numTrailers int) (a Action) {
	defer p.guard(id, &a)
	s, r, a, ok := p.buffering(id, "request trailers")
	if !ok {
		return a
	}
	return p.finish(id, s, r, -1)
}

// buffering finds the stream of a body or trailers callback (what) and
// its root, and reports whether its body is being buffered; otherwise it
// returns the answer: go on for a stream that is not inspected, hold for
// one already decided, 503 for a callback out of order or a root that is
// gone.
func (p *Plugin) buffering(id uint32, what string) (*stream, *root, Action, bool) {
	s := p.stream(id)
	switch {
	case s == nil:
		return nil, nil, p.fail(id, s, what+" on an unknown stream"), false
	case s.state == stPass:
		return s, nil, Continue, false
	case s.state == stDone:
		return s, nil, Pause, false
	case s.state != stBuffering:
		return s, nil, p.fail(id, s, what+" before request headers"), false
	}
	r := p.root(s.root)
	if r == nil {
		return s, nil, p.fail(id, s, what+" after its plugin was deleted"), false
	}
	return s, r, Continue, true
}

// finish reads the whole buffered body (size bytes, or as much as the host
// holds when size < 0), rewrites it once and forwards, replaces or rejects.
func (p *Plugin) finish(id uint32, s *stream, r *root, size int) Action {
	limit := r.cfg.MaxBodyBytes
	var body []byte
	var err error
	switch {
	case size > 0:
		body, err = p.host.RequestBody(size)
		if err == nil && len(body) != size {
			return p.fail(id, s, "request body shorter than announced")
		}
	case size < 0:
		body, err = p.host.RequestBody(limit + 1)
	}
	if err != nil {
		return p.fail(id, s, "cannot read request body: "+err.Error())
	}
	size = len(body)
	if status, msg := httperr.BodyTooLarge(int64(size), limit); status != 0 {
		return p.reject(s, r, status, msg) // a body that ended in trailers
	}
	out, res := p.rw.Rewrite(body, r.policy)
	if res.Outcome == kvhints.OutcomeRejected {
		return p.reject(s, r, res.Status, res.Message)
	}
	if !sameBytes(out, body) {
		if err := p.host.ReplaceRequestBody(size, out); err != nil {
			return p.fail(id, s, "cannot replace request body: "+err.Error())
		}
	}
	ids := &r.ids
	switch res.Outcome {
	case kvhints.OutcomeAdmitted:
		p.count(ids.admitted)
	case kvhints.OutcomeStripped, kvhints.OutcomeDiscarded:
		if int(res.Reason) < len(ids.ignored) && res.Reason != kvhints.ReasonNone {
			p.count(ids.ignored[res.Reason])
		}
	}
	if len(body) > 0 { // an empty body is no body, which hosts do not show
		p.report(res, body, r.policy)
	}
	s.state = stDone
	return Continue
}

// OnDone ends a context; it always agrees.
func (p *Plugin) OnDone(id uint32) bool {
	p.release(id)
	return true
}

// OnLog is the last callback of a stream on hosts that do not call OnDone.
func (p *Plugin) OnLog(id uint32) { p.release(id) }

// OnDelete forgets a context.
func (p *Plugin) OnDelete(id uint32) {
	p.release(id)
	for i, r := range p.roots {
		if r.id == id {
			p.roots = append(p.roots[:i], p.roots[i+1:]...)
			break
		}
	}
}

func (p *Plugin) release(id uint32) {
	for i, s := range p.streams {
		if s.id == id {
			last := len(p.streams) - 1
			p.streams[i] = p.streams[last]
			p.streams = p.streams[:last]
			return
		}
	}
}

// reject answers the request with status and the OpenAI-style error.
func (p *Plugin) reject(s *stream, r *root, status int, msg string) Action {
	s.state = stDone
	p.setProperty(PropertyHint, HintRejected)
	if err := p.host.SendLocalResponse(status, DetailsRejected, httperr.Invalid(status, msg), jsonHeaders); err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	for i, st := range RejectStatuses {
		if st == status {
			p.count(r.ids.rejected[i])
		}
	}
	return Pause
}

// fail answers 503: the request cannot be filtered. If even the local reply
// fails, the guest traps, which the host turns into a 503 too.
func (p *Plugin) fail(id uint32, s *stream, why string) Action {
	p.host.Log(LogError, "kvgate: context "+strconv.FormatUint(uint64(id), 10)+": "+why+"; answering 503")
	if s != nil {
		s.state = stDone
	}
	if err := p.host.SendLocalResponse(503, DetailsFailed, FailureBody, jsonHeaders); err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	return Pause
}

// guard turns a panic in a request callback into a 503. The shared
// Rewriter is replaced, since a panic may have left it inconsistent.
func (p *Plugin) guard(id uint32, a *Action) {
	if r := recover(); r != nil {
		p.rw = kvhints.Rewriter{NoSnapshot: true}
		p.rw.Reserve(p.reserved)
		*a = p.fail(id, p.stream(id), "internal error")
	}
}

func (p *Plugin) count(id uint32) {
	if err := p.host.IncrementCounter(id, 1); err != nil {
		p.host.Log(LogWarn, "kvgate: cannot increment a counter: "+err.Error())
	}
}

// sameBytes reports whether out is body unchanged: the same memory (the
// rewrite returns its input when nothing changes) or equal bytes.
func sameBytes(out, body []byte) bool {
	if len(out) != len(body) {
		return false
	}
	if len(out) == 0 || &out[0] == &body[0] {
		return true
	}
	return bytes.Equal(out, body)
}

// parseLength parses a Content-Length value; huge values saturate.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < 1<<40 {
			n = n*10 + int64(c-'0')
		}
	}
	return n, true
}

// equalFold reports whether an ASCII header name equals lower (lower case).
func equalFold(k []byte, lower string) bool {
	if len(k) != len(lower) {
		return false
	}
	for i := range k {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
