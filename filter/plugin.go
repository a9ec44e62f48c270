package filter

import (
	"math/bits"
	"strconv"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

var jsonHeaders = proxywasm.EncodeHeaderMap([][2]string{{"content-type", "application/json"}})

// root is one plugin (root context) and its configuration.
type root struct {
	id     uint32
	ok     bool
	cfg    filterspec.Config
	policy kvhints.Policy
	// ids are the metric ids of its series, in filterspec.MetricNames'
	// order (filterspec.FamilyID.Series).
	ids []uint32
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
	// grpcLabel: the request is labelled gRPC, so the filter's own answers
	// are gRPC answers (grpc.go).
	grpcLabel bool
	// grpcUndecided: its body is being buffered until DecideGRPC can tell
	// whether it passes uninspected.
	grpcUndecided bool
	// trust is the sender, once decided: trustUnknown, or the policy's
	// Trusted as trustNo or trustYes, with rule the trusted_senders rule
	// that matched (-1 for none).
	trust uint8
	rule  int32
	// roFound are the router-only fields (bits of RouterOnly.Fields)
	// among the headers; roReported: PropertyRouterOnly is set.
	roFound    uint64
	roReported bool
}

// The values of stream.trust.
const (
	trustUnknown uint8 = iota
	trustNo
	trustYes
)

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
	// props holds copies of the sender's properties while one request's
	// sender is decided; the buffers are reused.
	props [4][]byte
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
// context (Configure), and logs it. It returns false, after logging why,
// when the configuration is not acceptable.
func (p *Plugin) OnConfigure(rootID uint32, size int) (ok bool) {
	defer func() {
		if recover() != nil {
			p.host.Log(proxywasm.LogCritical, "kvgate: internal error while configuring")
			ok = false
		}
	}()
	if r := p.root(rootID); r != nil {
		r.ok = false
	}
	var doc []byte
	if size > 0 {
		var err error
		if doc, err = p.host.PluginConfig(size); err != nil {
			p.host.Log(proxywasm.LogCritical, "kvgate: cannot read the plugin configuration: "+err.Error())
			return false
		}
	}
	cfg, err := filterspec.ParseConfig(doc)
	if err != nil {
		p.host.Log(proxywasm.LogCritical, "kvgate: "+err.Error())
		return false
	}
	if !p.Configure(rootID, cfg) {
		return false
	}
	p.host.Log(proxywasm.LogInfo, ConfiguredLine(&cfg))
	if cfg.Mode == filterspec.ModeDetect {
		p.host.Log(proxywasm.LogWarn, DetectWarning)
	}
	return true
}

// Configure applies a configuration that filterspec.ParseConfig accepted
// to a root context, creating it if needed, and defines its metrics; it
// logs only a failure. A host that parses the configuration itself (the
// native module, once per configuration) calls it instead of OnConfigure
// for each Plugin, and logs ConfiguredLine once.
func (p *Plugin) Configure(rootID uint32, cfg filterspec.Config) (ok bool) {
	defer func() {
		if recover() != nil {
			p.host.Log(proxywasm.LogCritical, "kvgate: internal error while configuring")
			ok = false
		}
	}()
	r := p.root(rootID)
	if r == nil {
		r = &root{id: rootID}
		p.roots = append(p.roots, r)
	}
	r.ok = false
	names := cfg.MetricNames()
	ids := make([]uint32, len(names))
	for i, name := range names {
		var err error
		if ids[i], err = p.host.DefineCounter(name); err != nil {
			p.host.Log(proxywasm.LogCritical, "kvgate: cannot define metric "+name+": "+err.Error())
			return false
		}
	}
	r.ids = ids
	r.cfg, r.policy, r.ok = cfg, cfg.Policy(), true
	if rs, ok := p.host.(Reserver); ok {
		rs.Reserve(filterspec.CopyBlock(cfg.MaxBodyBytes))
	}
	p.reserved = max(p.reserved, cfg.MaxBodyBytes)
	p.rw.Reserve(p.reserved)
	return true
}

// ConfiguredLine is the line every host logs once it applied a
// configuration: the filter's version and every member's value (a count
// for the lists, never their entries).
func ConfiguredLine(cfg *filterspec.Config) string {
	return "kvgate: configured: version=" + filterspec.Version + " trust_kv_hints=" + strconv.FormatBool(cfg.TrustKVHints) +
		" max_depth=" + strconv.Itoa(cfg.MaxDepth) + " max_body_bytes=" + strconv.Itoa(cfg.MaxBodyBytes) +
		" exclude_paths=" + strconv.Itoa(len(cfg.ExcludePaths)) + " grpc=" + cfg.GRPC.String() + " trusted_senders=" + strconv.Itoa(cfg.TrustedSenders.Len()) +
		" mode=" + cfg.Mode.String() + routerOnlyLine(cfg.RouterOnly)
}

// DetectWarning is logged, after ConfiguredLine, for a configuration in
// detect mode.
const DetectWarning = "kvgate: mode=detect: hints are decided and reported (kvgate_kv_hints_detected_total, the access log's hint=detected) but forwarded as received; nothing is enforced"

// Verdict is what a request callback decided. A proxy-wasm host needs
// only Action; a host that runs the Plugin natively (envoy/native) uses
// the rest instead of guessing it from the callback's side effects.
type Verdict struct {
	// Action is the proxy-wasm answer: go on, or hold what the host has.
	Action proxywasm.Action
	// Held: the body is held back until the whole of it has been filtered
	// (the Plugin removed Content-Length for it).
	Held bool
	// GRPC: the request's headers label it gRPC, so the body may be a
	// stream of messages whose sender waits for the response headers.
	GRPC bool
	// Next is what the next request body callback will do.
	Next NextBody
}

// NextBody says what the Plugin's next request body callback will do, for
// a host that can skip the call (the native module answers such chunks in
// C): Pass when every further chunk goes on (Continue) whatever it holds;
// otherwise Limit >= 0 when a chunk that does not end the stream pauses
// (Pause) as long as the body is then at most Limit bytes, and Limit < 0
// when only the call can say. Neither case changes the Plugin's state, so
// a skipped call is one made.
type NextBody struct {
	Pass  bool
	Limit int
}

// verdict is Verdict for stream id after a callback that returned a.
func (p *Plugin) verdict(id uint32, a proxywasm.Action) Verdict {
	v := Verdict{Action: a, Next: NextBody{Limit: -1}}
	s := p.stream(id)
	if s == nil {
		return v
	}
	v.GRPC = s.grpcLabel
	switch s.state {
	case stPass:
		v.Next.Pass = true
	case stBuffering:
		v.Held = true
		if r := p.root(s.root); r != nil && !s.grpcUndecided {
			v.Next.Limit = r.cfg.MaxBodyBytes
		}
	}
	return v
}

// OnRequestHeaders decides whether the request's body must be inspected. It
// refuses a gRPC request when so configured, answers 415 for an encoded
// body and 413 for a declared length over the limit (for a gRPC request
// only once its bytes show it is not gRPC); otherwise it removes
// Content-Length (the body may change length) and lets the headers go on.
// The body itself is held back by OnRequestBody until the whole of it has
// been filtered, or, for a gRPC request, until its first bytes decide.
//
// Pausing here would be wrong: Envoy turns a pause in the header callback
// into "stop all iteration" and never delivers the body to the filter, so
// the request would hang. Headers that went upstream early are harmless: a
// local reply resets the upstream stream, and no body byte is forwarded
// before the decision.
func (p *Plugin) OnRequestHeaders(id uint32, numHeaders int, endOfStream bool) Verdict {
	return p.verdict(id, p.onRequestHeaders(id, endOfStream))
}

func (p *Plugin) onRequestHeaders(id uint32, endOfStream bool) (a proxywasm.Action) {
	defer p.guard(id, &a)
	s := p.stream(id)
	var r *root
	if s != nil {
		r = p.root(s.root)
	}
	if r == nil || !r.ok || s.state != stNew {
		return p.fail(id, s, "request headers on an unknown or unconfigured stream")
	}
	ro := r.cfg.RouterOnly
	roHeaders := ro.NumHeaders() > 0
	if endOfStream && r.cfg.GRPC != filterspec.GRPCRefuse && !roHeaders {
		s.state = stPass // no body, nothing to inspect
		return proxywasm.ActionContinue
	}
	hdrs, err := p.host.RequestHeaders()
	if err != nil {
		return p.fail(id, s, "cannot read request headers: "+err.Error())
	}
	cfg := &r.cfg
	excluded, grpc, status, msg := false, false, 0, ""
	var found uint64
	err = proxywasm.ForEachHeader(hdrs, func(k, v []byte) {
		if roHeaders {
			if f := ro.Header(k); f >= 0 {
				found |= 1 << f
			}
		}
		switch {
		case string(k) == ":path":
			excluded = cfg.Excluded(v)
		case kvhints.EqualFold(k, "content-type"):
			grpc = grpc || kvhints.IsGRPCContentType(v)
		case status == 415:
		case kvhints.EqualFold(k, "content-encoding"):
			if st, m := kvhints.CheckContentEncoding(string(v)); st != 0 {
				status, msg = st, m
			}
		case status != 0:
		case kvhints.EqualFold(k, "content-length"):
			if n, ok := parseLength(v); ok {
				status, msg = kvhints.BodyTooLarge(n, cfg.MaxBodyBytes)
			}
		}
	})
	if err != nil {
		return p.fail(id, s, "cannot parse request headers: "+err.Error())
	}
	s.grpcLabel = grpc
	if found != 0 {
		// Router-only headers go (or refuse the request) whatever else
		// happens to it: excluded paths and gRPC requests included.
		if a, done := p.routerOnlyHeaders(id, s, r, found); done {
			return a
		}
	}
	if excluded {
		return p.pass(s, r)
	}
	if grpc && cfg.GRPC == filterspec.GRPCRefuse {
		return p.refuseGRPC(s, r) // with or without a body
	}
	if endOfStream {
		return p.pass(s, r)
	}
	if status == 413 && grpc {
		status = 0 // the body's bytes decide; OnRequestBody applies the limit to a body that is not gRPC
	}
	if status != 0 {
		return p.reject(s, r, status, msg)
	}
	if err := p.host.RemoveRequestHeader("content-length"); err != nil {
		return p.fail(id, s, "cannot remove content-length: "+err.Error())
	}
	s.state, s.grpcUndecided = stBuffering, grpc
	return proxywasm.ActionContinue
}

// OnRequestBody buffers the body until the end of the stream, then filters
// it. A body over the limit is answered with 413 as soon as it is seen. A
// body labelled gRPC is first held until its first bytes decide whether it
// passes uninspected; from then on it streams through.
func (p *Plugin) OnRequestBody(id uint32, bodySize int, endOfStream bool) Verdict {
	return p.verdict(id, p.onRequestBody(id, bodySize, endOfStream))
}

func (p *Plugin) onRequestBody(id uint32, bodySize int, endOfStream bool) (a proxywasm.Action) {
	defer p.guard(id, &a)
	s, r, a, ok := p.buffering(id, "request body")
	if !ok {
		return a
	}
	if s.grpcUndecided {
		if a, decided := p.decideGRPC(id, s, r, bodySize, endOfStream); decided {
			return a
		}
	}
	if status, msg := kvhints.BodyTooLarge(int64(bodySize), r.cfg.MaxBodyBytes); status != 0 {
		return p.reject(s, r, status, msg)
	}
	if !endOfStream {
		return proxywasm.ActionPause
	}
	return p.finish(id, s, r, bodySize)
}

// OnRequestTrailers filters the buffered body of a request that ends in
// trailers.
func (p *Plugin) OnRequestTrailers(id uint32, numTrailers int) Verdict {
	return p.verdict(id, p.onRequestTrailers(id))
}

func (p *Plugin) onRequestTrailers(id uint32) (a proxywasm.Action) {
	defer p.guard(id, &a)
	s, r, a, ok := p.buffering(id, "request trailers")
	if !ok {
		return a
	}
	if s.grpcUndecided {
		if a, decided := p.decideGRPC(id, s, r, -1, true); decided {
			return a
		}
	}
	return p.finish(id, s, r, -1)
}

// decideGRPC looks at the buffered start of a body labelled gRPC (size
// bytes, or all the host holds when size < 0; eos when that is the whole
// body). It returns decided = false when the body is to be inspected like
// any other (s.grpcUndecided is then cleared); otherwise the action: Continue when
// the body passes uninspected (counted; the rest of it streams through),
// Pause while more of it is needed.
func (p *Plugin) decideGRPC(id uint32, s *stream, r *root, size int, eos bool) (proxywasm.Action, bool) {
	// The first bytes nearly always decide; read up to what DecideGRPC
	// can use only when they do not.
	for _, want := range [...]int{64, kvhints.GRPCLookahead + 4} {
		n := want
		if size >= 0 {
			n = min(n, size)
		}
		b, err := p.host.RequestBody(n)
		if err != nil {
			return p.fail(id, s, "cannot read request body: "+err.Error()), true
		}
		whole := eos && ((size < 0 && len(b) < want) || len(b) == size)
		if pass, done := kvhints.DecideGRPC(b, whole); done {
			s.grpcUndecided = false
			if !pass {
				return 0, false
			}
			p.count(r.ids[filterspec.Uninspected.Series(0)])
			return p.pass(s, r), true
		}
		if len(b) < n || n == size {
			break // all the host holds
		}
	}
	if size < 0 || size > r.cfg.MaxBodyBytes {
		// Undecided at the end of the body (which DecideGRPC never is) or
		// over the limit: inspected, so a 413 as for any body.
		s.grpcUndecided = false
		return 0, false
	}
	return proxywasm.ActionPause, true
}

// buffering finds the stream of a body or trailers callback (what) and
// its root, and reports whether its body is being buffered; otherwise it
// returns the answer: go on for a stream that is not inspected, hold for
// one already decided, 503 for a callback out of order or a root that is
// gone.
func (p *Plugin) buffering(id uint32, what string) (*stream, *root, proxywasm.Action, bool) {
	s := p.stream(id)
	switch {
	case s == nil:
		return nil, nil, p.fail(id, s, what+" on an unknown stream"), false
	case s.state == stPass:
		return s, nil, proxywasm.ActionContinue, false
	case s.state == stDone:
		return s, nil, proxywasm.ActionPause, false
	case s.state != stBuffering:
		return s, nil, p.fail(id, s, what+" before request headers"), false
	}
	r := p.root(s.root)
	if r == nil {
		return s, nil, p.fail(id, s, what+" after its plugin was deleted"), false
	}
	return s, r, proxywasm.ActionContinue, true
}

// finish reads the whole buffered body (size bytes, or as much as the host
// holds when size < 0), rewrites it once and forwards, replaces or rejects.
func (p *Plugin) finish(id uint32, s *stream, r *root, size int) proxywasm.Action {
	limit := r.cfg.MaxBodyBytes
	// The sender is decided first: the body's bytes are valid only until
	// the next host call that returns bytes.
	policy, rule, err := p.sender(s, r)
	if err != nil {
		return p.fail(id, s, "cannot read the sender's properties: "+err.Error())
	}
	var body []byte
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
	if status, msg := kvhints.BodyTooLarge(int64(size), limit); status != 0 {
		return p.reject(s, r, status, msg) // a body that ended in trailers
	}
	// In detect mode the decision is made and reported, not applied: the
	// body goes on as received, so no rewritten body is made.
	detect := r.cfg.Mode == filterspec.ModeDetect
	var (
		res   kvhints.Result
		edits []kvhints.Edit
		out   []byte
	)
	ed, editor := p.host.(Editor)
	if editor || detect {
		edits, res = p.rw.Edits(body, policy)
	} else {
		out, res = p.rw.Rewrite(body, policy)
	}
	if res.Outcome == kvhints.OutcomeRejected {
		if res.RouterOnly != 0 {
			return p.refuseRouterOnly(s, r, res.RouterOnly, res.Message)
		}
		return p.reject(s, r, res.Status, res.Message)
	}
	switch {
	case detect:
	case editor && len(edits) > 0:
		if err := ed.EditRequestBody(size, edits); err != nil {
			return p.fail(id, s, "cannot edit request body: "+err.Error())
		}
	case !editor && !sameBytes(out, body):
		if err := p.host.ReplaceRequestBody(size, out); err != nil {
			return p.fail(id, s, "cannot replace request body: "+err.Error())
		}
	}
	switch res.Outcome {
	case kvhints.OutcomeAdmitted:
		p.count(r.ids[filterspec.Admitted.Series(0)])
	case kvhints.OutcomeStripped, kvhints.OutcomeDiscarded:
		// The reason's label value is its place in kvhints.Reasons.
		if v := int(res.Reason) - 1; v >= 0 && v < len(kvhints.Reasons) {
			if detect {
				p.count(r.ids[filterspec.Detected.Series(v)])
			} else {
				p.count(r.ids[filterspec.Ignored.Series(v)])
			}
		}
	}
	p.countFields(r, res.RouterOnly, detect)
	if len(body) > 0 { // an empty body is no body, which hosts do not show
		p.report(res, body, policy, rule, detect)
	}
	p.reportRouterOnly(s, r, res.RouterOnly)
	s.state = stDone
	return proxywasm.ActionContinue
}

// sender returns the policy for the stream's sender and the
// trusted_senders rule that matched (-1 for none), deciding it once per
// request: when its headers carry router-only fields, or when its body is
// filtered.
func (p *Plugin) sender(s *stream, r *root) (kvhints.Policy, int, error) {
	policy := r.policy
	if r.cfg.TrustedSenders.Len() == 0 {
		return policy, -1, nil
	}
	if s.trust == trustUnknown {
		rule, err := p.senderRule(r.cfg.TrustedSenders)
		if err != nil {
			return policy, -1, err
		}
		s.trust, s.rule = trustNo, int32(rule)
		if rule >= 0 {
			s.trust = trustYes
		}
	}
	policy.Trusted = s.trust == trustYes
	return policy, int(s.rule), nil
}

// routerOnlyHeaders handles the router-only headers of a request (found,
// bits of RouterOnly.Fields): nothing for a trusted sender; for another,
// counted and left in detect mode, the request refused under
// "untrusted": "refuse" (done), or else every value of each removed.
func (p *Plugin) routerOnlyHeaders(id uint32, s *stream, r *root, found uint64) (proxywasm.Action, bool) {
	policy, _, err := p.sender(s, r)
	if err != nil {
		return p.fail(id, s, "cannot read the sender's properties: "+err.Error()), true
	}
	if policy.Trusted {
		return 0, false
	}
	ro := r.cfg.RouterOnly
	detect := r.cfg.Mode == filterspec.ModeDetect
	if ro.Refuse && !detect {
		return p.refuseRouterOnly(s, r, found, kvhints.RefusalMessage(ro.Fields()[bits.TrailingZeros64(found)])), true
	}
	if !detect {
		for m := found; m != 0; m &= m - 1 {
			if err := p.host.RemoveRequestHeader(ro.Fields()[bits.TrailingZeros64(m)]); err != nil {
				return p.fail(id, s, "cannot remove a router-only header: "+err.Error()), true
			}
		}
	}
	p.countFields(r, found, detect)
	s.roFound = found
	return 0, false
}

// countFields counts the router-only fields in found: removed, or in
// detect mode detected.
func (p *Plugin) countFields(r *root, found uint64, detect bool) {
	for m := found; m != 0; m &= m - 1 {
		p.count(r.ids[r.cfg.RouterOnlySeries(detect, bits.TrailingZeros64(m))])
	}
}

// reportRouterOnly sets PropertyRouterOnly once, when the request carried
// router-only fields: those of its headers and body (bits of
// RouterOnly.Fields). It allocates, but only for such a request.
func (p *Plugin) reportRouterOnly(s *stream, r *root, body uint64) {
	if found := s.roFound | body; found != 0 && !s.roReported {
		s.roReported = true
		p.setProperty(filterspec.PropertyRouterOnly, r.cfg.RouterOnly.Names(found))
	}
}

// pass lets the rest of a request go on uninspected.
func (p *Plugin) pass(s *stream, r *root) proxywasm.Action {
	s.state = stPass
	p.reportRouterOnly(s, r, 0)
	return proxywasm.ActionContinue
}

// refuseRouterOnly answers an untrusted request that carries router-only
// fields (found) under "untrusted": "refuse" with 400 and msg, which names
// the first of them, and counts it.
func (p *Plugin) refuseRouterOnly(s *stream, r *root, found uint64, msg string) proxywasm.Action {
	s.state = stDone
	p.setProperty(filterspec.PropertyHint, filterspec.HintRejected)
	p.reportRouterOnly(s, r, found)
	var err error
	if s.grpcLabel {
		err = p.host.SendLocalResponse(200, filterspec.DetailsRouterOnlyRefused, nil, grpcReplyHeaders(httperr.GRPCStatusOf(400), msg))
	} else {
		err = p.host.SendLocalResponse(400, filterspec.DetailsRouterOnlyRefused, httperr.Invalid(400, msg), jsonHeaders)
	}
	if err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	p.count(r.ids[filterspec.Refused.Series(filterspec.RefusedRouterOnly)])
	return proxywasm.ActionPause
}

// routerOnlyLine is the configured line's account of router_only.
func routerOnlyLine(ro *filterspec.RouterOnly) string {
	if ro == nil {
		return ""
	}
	untrusted := "strip"
	if ro.Refuse {
		untrusted = "refuse"
	}
	return " router_only=" + strconv.Itoa(ro.NumMembers()) + "_members," + strconv.Itoa(ro.NumHeaders()) + "_headers," + untrusted
}

// senderRule decides whether the current request comes from a trusted
// sender: the index of the first trusted_senders rule that matches, or -1
// for none. It reads only the properties the rules use, each at most once,
// and the certificate's SANs only when the host says the client
// certificate was verified. The values are never logged.
func (p *Plugin) senderRule(rules *filterspec.Senders) (int, error) {
	needs := rules.Needs()
	var sp filterspec.SenderProps
	get := func(slot int, path string) ([]byte, error) {
		b, err := p.host.GetProperty(path)
		if err != nil {
			return nil, err
		}
		// Host bytes are valid only until the next host call: keep a copy.
		p.props[slot] = append(p.props[slot][:0], b...)
		return p.props[slot], nil
	}
	var err error
	if needs&filterspec.PropMTLS != 0 {
		if sp.MTLS, err = get(0, filterspec.PropertyMTLS); err != nil {
			return -1, err
		}
		if filterspec.MTLSVerified(sp.MTLS) {
			if needs&filterspec.PropURISAN != 0 {
				if sp.URISAN, err = get(1, filterspec.PropertyURISAN); err != nil {
					return -1, err
				}
			}
			if needs&filterspec.PropDNSSAN != 0 {
				if sp.DNSSAN, err = get(2, filterspec.PropertyDNSSAN); err != nil {
					return -1, err
				}
			}
		}
	}
	if needs&filterspec.PropSourceAddress != 0 {
		if sp.SourceAddress, err = get(3, filterspec.PropertySourceAddress); err != nil {
			return -1, err
		}
	}
	return rules.Match(&sp), nil
}

// OnLog forgets a stream: the request is over. A host may call it for a
// stream that saw no other callback (Envoy logging a request answered
// before it reached the filter), and then possibly not call OnDelete.
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

// reject answers the request with status and the OpenAI-style error, or
// for a request labelled gRPC with the gRPC status that stands for it.
func (p *Plugin) reject(s *stream, r *root, status int, msg string) proxywasm.Action {
	s.state = stDone
	p.setProperty(filterspec.PropertyHint, filterspec.HintRejected)
	p.reportRouterOnly(s, r, 0)
	var err error
	if s.grpcLabel {
		err = p.host.SendLocalResponse(200, filterspec.DetailsRejected, nil, grpcReplyHeaders(httperr.GRPCStatusOf(status), msg))
	} else {
		err = p.host.SendLocalResponse(status, filterspec.DetailsRejected, httperr.Invalid(status, msg), jsonHeaders)
	}
	if err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	for i, st := range filterspec.RejectStatuses {
		if st == status {
			p.count(r.ids[filterspec.Rejected.Series(i)])
		}
	}
	return proxywasm.ActionPause
}

// refuseGRPC answers a gRPC request the gRPC way (HTTP 200, grpc-status
// PERMISSION_DENIED) without looking at its body, and counts it.
func (p *Plugin) refuseGRPC(s *stream, r *root) proxywasm.Action {
	s.state = stDone
	p.setProperty(filterspec.PropertyHint, filterspec.HintRejected)
	p.reportRouterOnly(s, r, 0)
	if err := p.host.SendLocalResponse(200, filterspec.DetailsGRPCRefused, nil, grpcReplyHeaders(httperr.GRPCStatusPermissionDenied, filterspec.GRPCRefusedMessage)); err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	p.count(r.ids[filterspec.Refused.Series(filterspec.RefusedGRPC)])
	return proxywasm.ActionPause
}

// fail answers 503: the request cannot be filtered. If even the local reply
// fails, the guest traps, which the host turns into a 503 too.
func (p *Plugin) fail(id uint32, s *stream, why string) proxywasm.Action {
	p.host.Log(proxywasm.LogError, "kvgate: context "+strconv.FormatUint(uint64(id), 10)+": "+why+"; answering 503")
	var err error
	if s != nil {
		s.state = stDone
	}
	if s != nil && s.grpcLabel {
		err = p.host.SendLocalResponse(200, filterspec.DetailsFailed, nil, grpcReplyHeaders(httperr.GRPCStatusOf(503), filterspec.FailureMessage))
	} else {
		err = p.host.SendLocalResponse(503, filterspec.DetailsFailed, filterspec.FailureBody, jsonHeaders)
	}
	if err != nil {
		panic("kvgate: cannot send local response: " + err.Error())
	}
	return proxywasm.ActionPause
}

// guard turns a panic in a request callback into a 503. The shared
// Rewriter is replaced, since a panic may have left it inconsistent.
func (p *Plugin) guard(id uint32, a *proxywasm.Action) {
	if r := recover(); r != nil {
		p.rw = kvhints.Rewriter{NoSnapshot: true}
		p.rw.Reserve(p.reserved)
		*a = p.fail(id, p.stream(id), "internal error")
	}
}

func (p *Plugin) count(id uint32) {
	if err := p.host.IncrementCounter(id, 1); err != nil {
		p.host.Log(proxywasm.LogWarn, "kvgate: cannot increment a counter: "+err.Error())
	}
}

// sameBytes reports whether out is body unchanged. kvhints.Rewrite returns
// its input itself exactly when the body is forwarded unchanged, and new
// bytes that differ otherwise, so identity decides: comparing the bytes
// would read the whole body once more (a byte loop on wasm, about 1.5 ms
// per MiB) only to learn what the rewrite already said.
func sameBytes(out, body []byte) bool {
	if len(out) != len(body) {
		return false
	}
	return len(out) == 0 || &out[0] == &body[0]
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
