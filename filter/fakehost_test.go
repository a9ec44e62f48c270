package filter

import (
	"errors"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

// fakeHost is an in-memory proxy: one plugin configuration, one stream at a
// time, counters by name.
type fakeHost struct {
	config   []byte
	headers  [][2]string
	body     []byte // the host's buffered request body
	edits    bool   // the host is an Editor (see editingHost)
	local    *localReply
	logs     []string
	names    []string // metric id -> name
	counters map[string]int64
	set      map[string]string // properties set by the filter (SetProperty), by path

	// props are the host properties by proxy-wasm path (NUL-separated);
	// propReads counts the reads of each path.
	props     map[string][]byte
	propReads map[string]int

	// returned is the last byte slice a Host method returned; the next one
	// poisons it, as a real host's memory is reused (see Host).
	returned []byte

	// failures to inject, by Host method name
	fail map[string]bool
	// panicOn makes a Host method panic
	panicOn string
}

type localReply struct {
	status  int
	details string
	body    []byte
	headers [][2]string
}

var errInjected = errors.New("injected failure")

func newFakeHost(config string) *fakeHost {
	return &fakeHost{config: []byte(config), counters: map[string]int64{}, fail: map[string]bool{}}
}

func (h *fakeHost) check(m string) error {
	if h.panicOn == m {
		panic("injected panic in " + m)
	}
	if h.fail[m] {
		return errInjected
	}
	return nil
}

func (h *fakeHost) Log(level proxywasm.LogLevel, msg string) { h.logs = append(h.logs, msg) }

// give returns a copy of b as guest memory, valid until the next call that
// returns bytes: that call overwrites it, so a filter that keeps host bytes
// too long sees garbage.
func (h *fakeHost) give(b []byte) []byte {
	for i := range h.returned {
		h.returned[i] = 0xee
	}
	h.returned = append([]byte(nil), b...)
	return h.returned
}

func (h *fakeHost) PluginConfig(size int) ([]byte, error) {
	if err := h.check("PluginConfig"); err != nil {
		return nil, err
	}
	return h.give(h.config[:min(size, len(h.config))]), nil
}

func (h *fakeHost) RequestHeaders() ([]byte, error) {
	if err := h.check("RequestHeaders"); err != nil {
		return nil, err
	}
	return h.give(proxywasm.EncodeHeaderMap(h.headers)), nil
}

func (h *fakeHost) RemoveRequestHeader(name string) error {
	if err := h.check("RemoveRequestHeader"); err != nil {
		return err
	}
	kept := h.headers[:0]
	for _, p := range h.headers {
		if !strings.EqualFold(p[0], name) {
			kept = append(kept, p)
		}
	}
	h.headers = kept
	return nil
}

func (h *fakeHost) RequestBody(limit int) ([]byte, error) {
	if err := h.check("RequestBody"); err != nil {
		return nil, err
	}
	if len(h.body) == 0 {
		return nil, nil
	}
	return h.give(h.body[:min(limit, len(h.body))]), nil
}

func (h *fakeHost) ReplaceRequestBody(oldSize int, body []byte) error {
	if err := h.check("ReplaceRequestBody"); err != nil {
		return err
	}
	if oldSize != len(h.body) {
		return errors.New("replace must cover the whole body")
	}
	h.body = append([]byte(nil), body...)
	return nil
}

// editingHost is the fake host as an Editor, the way the native module
// hosts the filter.
type editingHost struct{ *fakeHost }

func (h editingHost) EditRequestBody(oldSize int, edits []kvhints.Edit) error {
	if err := h.check("EditRequestBody"); err != nil {
		return err
	}
	if oldSize != len(h.body) || len(edits) == 0 {
		return errors.New("edits must cover the whole body and change it")
	}
	var b []byte // a new array: the body the filter read stays as it was
	from := 0
	for _, e := range edits {
		if e.Start < from || e.End < e.Start || e.End > len(h.body) {
			return errors.New("edits out of order")
		}
		b = append(append(b, h.body[from:e.Start]...), e.Text...)
		from = e.End
	}
	h.body = append(b, h.body[from:]...)
	return nil
}

func (h *fakeHost) SendLocalResponse(status int, details string, body, headers []byte) error {
	if err := h.check("SendLocalResponse"); err != nil {
		return err
	}
	if h.local != nil {
		return errors.New("second local response")
	}
	lr := &localReply{status: status, details: details, body: append([]byte(nil), body...)}
	if err := proxywasm.ForEachHeader(headers, func(k, v []byte) {
		lr.headers = append(lr.headers, [2]string{string(k), string(v)})
	}); err != nil {
		return err
	}
	h.local = lr
	return nil
}

func (h *fakeHost) DefineCounter(name string) (uint32, error) {
	if err := h.check("DefineCounter"); err != nil {
		return 0, err
	}
	for i, n := range h.names {
		if n == name {
			return uint32(i), nil
		}
	}
	h.names = append(h.names, name)
	h.counters[name] += 0
	return uint32(len(h.names) - 1), nil
}

func (h *fakeHost) IncrementCounter(id uint32, delta int64) error {
	if err := h.check("IncrementCounter"); err != nil {
		return err
	}
	if int(id) >= len(h.names) {
		return errors.New("unknown metric")
	}
	h.counters[h.names[id]] += delta
	return nil
}

func (h *fakeHost) GetProperty(path string) ([]byte, error) {
	if err := h.check("GetProperty"); err != nil {
		return nil, err
	}
	if h.propReads == nil {
		h.propReads = map[string]int{}
	}
	h.propReads[path]++
	v, ok := h.props[path]
	if !ok || len(v) == 0 {
		return nil, nil
	}
	return h.give(v), nil
}

// setSender sets the four sender properties as Envoy encodes them; an empty
// string leaves a property absent.
func (h *fakeHost) setSender(mtls bool, uri, dns, src string) {
	h.props = map[string][]byte{filterspec.PropertyMTLS: {0}}
	if mtls {
		h.props[filterspec.PropertyMTLS] = []byte{1}
	}
	for path, v := range map[string]string{filterspec.PropertyURISAN: uri, filterspec.PropertyDNSSAN: dns, filterspec.PropertySourceAddress: src} {
		if v != "" {
			h.props[path] = []byte(v)
		}
	}
}

func (h *fakeHost) header(name string) (string, bool) {
	for _, p := range h.headers {
		if strings.EqualFold(p[0], name) {
			return p[1], true
		}
	}
	return "", false
}

// mode is how a request's body reaches the filter.
type mode int

const (
	modeLength   mode = iota // content-length, one body callback
	modeChunked              // no content-length, three body callbacks
	modeTrailers             // no content-length, body callbacks then trailers
)

func (m mode) String() string { return [...]string{"length", "chunked", "trailers"}[m] }

// outcome is what the proxy did with a request.
type outcome struct {
	forwarded bool   // the request went upstream
	body      []byte // the forwarded body
	local     *localReply
	// streamed is set when a body chunk was let through before the end of
	// the stream: right for excluded paths, a leak for inspected ones.
	streamed bool
}

const rootID = 1

// newPlugin configures a plugin on h and fails the test on error.
func newPlugin(h *fakeHost) (*Plugin, bool) {
	var host Host = h
	if h.edits {
		host = editingHost{h}
	}
	p := New(host)
	p.OnContextCreate(rootID, 0)
	p.OnVMStart(0)
	ok := p.OnConfigure(rootID, len(h.config))
	return p, ok
}

// send runs one request with a body through p the way a proxy does: the
// proxy stops at the first ActionPause that comes with a local reply, and
// forwards once every callback it made has returned ActionContinue.
func send(p *Plugin, h *fakeHost, id uint32, method, path string, hdrs map[string]string, body []byte, m mode) outcome {
	h.local = nil
	h.body = nil
	h.headers = [][2]string{{":method", method}, {":path", path}, {":authority", "worker"}}
	for k, v := range hdrs {
		h.headers = append(h.headers, [2]string{k, v})
	}
	if m == modeLength {
		h.headers = append(h.headers, [2]string{"content-length", strconv.Itoa(len(body))})
	}
	p.OnContextCreate(id, rootID)
	defer func() {
		p.OnLog(id)
		p.OnDelete(id)
	}()
	a := p.OnRequestHeaders(id, len(h.headers), false).Action
	if h.local != nil {
		return outcome{local: h.local}
	}
	_ = a
	streamed := false
	var chunks [][]byte
	switch m {
	case modeLength:
		chunks = [][]byte{body}
	default:
		n := len(body)
		chunks = [][]byte{body[:n/3], body[n/3 : 2*n/3], body[2*n/3:]}
	}
	last := proxywasm.ActionContinue
	for i, c := range chunks {
		h.body = append(h.body, c...)
		eos := i == len(chunks)-1 && m != modeTrailers
		last = p.OnRequestBody(id, len(h.body), eos).Action
		if h.local != nil {
			return outcome{local: h.local}
		}
		if last == proxywasm.ActionContinue && !eos {
			streamed = true // this chunk went upstream as it came
		}
	}
	if m == modeTrailers {
		last = p.OnRequestTrailers(id, 1).Action
		if h.local != nil {
			return outcome{local: h.local}
		}
	}
	if last != proxywasm.ActionContinue {
		return outcome{streamed: streamed}
	}
	return outcome{forwarded: true, body: h.body, streamed: streamed}
}
