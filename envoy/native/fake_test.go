package native

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
	"github.com/kvgate/kvgate/metricname"
)

// fakeEnv is the process side of a fake Envoy: a log and the counters a
// configuration defines.
type fakeEnv struct {
	logs     []string
	families []family
	counts   map[string]uint64 // metricname-encoded series -> value
	failDef  bool
}

type family struct {
	name   string
	labels []string
}

func newFakeEnv() *fakeEnv { return &fakeEnv{counts: map[string]uint64{}} }

func (e *fakeEnv) Log(level int, msg string) {
	e.logs = append(e.logs, fmt.Sprintf("%d %s", level, msg))
}

func (e *fakeEnv) DefineCounter(name string, labels []string) (uint, error) {
	if e.failDef {
		return 0, errors.New("stats creation is frozen")
	}
	e.families = append(e.families, family{name, append([]string(nil), labels...)})
	return uint(len(e.families) - 1), nil
}

func (e *fakeEnv) NewSeries(id uint, values []string) abi.Series { return abi.NewSeries(id, values) }

func (e *fakeEnv) Touch(s abi.Series) error {
	e.counts[e.key(s)] += 0
	return nil
}

// key is the series' name as the wasm filter encodes it.
func (e *fakeEnv) key(s abi.Series) string {
	f := e.families[s.ID()]
	var ls []metricname.Label
	for i, v := range s.Values() {
		ls = append(ls, metricname.Label{Name: f.labels[i], Value: v})
	}
	return metricname.Encode(f.name, ls...)
}

func (e *fakeEnv) internalErrors() []string {
	var out []string
	for _, l := range e.logs {
		if strings.Contains(l, "internal error") {
			out = append(out, l)
		}
	}
	return out
}

// fakeStream is one request in a fake Envoy, with Envoy's body model: the
// data of the current body hook ("received") and what the filter buffered
// before it.
type fakeStream struct {
	env      *fakeEnv
	headers  []abi.Header
	buffered []byte
	received []byte
	inBody   bool
	state    map[string]string
	attrs    map[abi.Attribute][]byte
	mtls     *bool
	reply    *localReply
	// panicOn makes the named callback panic (tests of the recovery).
	panicOn string
	// refuse makes the named callback report failure.
	refuse string
	// onAppend, when set, is called on every AppendBody.
	onAppend func()
	// chunk is the size of the slices BodyChunks returns (7 when 0).
	chunk int
}

type localReply struct {
	status  int
	headers [][2]string
	body    []byte
	details string
}

func (s *fakeStream) check(name string) {
	if s.panicOn == name {
		panic("fake Envoy: " + name)
	}
}

func (s *fakeStream) RequestHeaders(dst []abi.Header) ([]abi.Header, bool) {
	s.check("RequestHeaders")
	return append(dst[:0], s.headers...), s.refuse != "RequestHeaders"
}

func (s *fakeStream) RemoveRequestHeader(key string) bool {
	s.check("RemoveRequestHeader")
	kept := s.headers[:0]
	for _, h := range s.headers {
		if !strings.EqualFold(string(h.Key), key) {
			kept = append(kept, h)
		}
	}
	s.headers = kept
	return s.refuse != "RemoveRequestHeader"
}

func (s *fakeStream) SetRequestHeader(key string, value []byte) bool {
	s.check("SetRequestHeader")
	s.RemoveRequestHeader(key)
	s.headers = append(s.headers, abi.Header{Key: []byte(key), Value: append([]byte(nil), value...)})
	return s.refuse != "SetRequestHeader"
}

func (s *fakeStream) SendResponse(status int, headers [][2]string, body []byte, details string) {
	if s.reply != nil {
		panic("fake Envoy: a second local reply")
	}
	s.reply = &localReply{status, headers, append([]byte(nil), body...), details}
}

func (s *fakeStream) buf(t abi.BodyType) *[]byte {
	if t == abi.ReceivedRequestBody {
		if !s.inBody {
			return nil
		}
		return &s.received
	}
	return &s.buffered
}

func (s *fakeStream) BodySize(t abi.BodyType) int {
	if b := s.buf(t); b != nil {
		return len(*b)
	}
	return 0
}

// RequestBodySize is what Envoy's kvgate_request_body_size computes, from
// the fake's own calls.
func (s *fakeStream) RequestBodySize(inBody bool) int {
	n := s.BodySize(abi.BufferedRequestBody)
	if inBody && !s.ReceivedBufferedRequestBody() {
		n += s.BodySize(abi.ReceivedRequestBody)
	}
	return n
}

// BodyChunks returns the buffer in slices of at most s.chunk bytes, 7 by
// default (Envoy's are 16 KiB; small ones exercise the joining).
func (s *fakeStream) BodyChunks(t abi.BodyType, dst [][]byte) [][]byte {
	s.check("BodyChunks")
	b := s.buf(t)
	if b == nil {
		return dst
	}
	for rest := *b; len(rest) > 0; {
		n := min(len(rest), cmp.Or(s.chunk, 7))
		dst = append(dst, rest[:n:n])
		rest = rest[n:]
	}
	return dst
}

func (s *fakeStream) AppendBody(t abi.BodyType, data []byte) bool {
	s.check("AppendBody")
	b := s.buf(t)
	if b == nil || s.refuse == "AppendBody" {
		return false
	}
	if s.onAppend != nil {
		s.onAppend()
	}
	// A new array, so that slices handed out before stay as they were,
	// as Envoy's slices do when data is appended after them.
	*b = append(append([]byte(nil), *b...), data...)
	return true
}

func (s *fakeStream) DrainBody(t abi.BodyType, n int) bool {
	s.check("DrainBody")
	b := s.buf(t)
	if b == nil || s.refuse == "DrainBody" {
		return false
	}
	*b = (*b)[min(n, len(*b)):]
	return true
}

func (s *fakeStream) ReceivedBufferedRequestBody() bool { return false }

func (s *fakeStream) SetFilterState(key, value string) bool {
	s.state[key] = value
	return true
}

func (s *fakeStream) AttributeString(a abi.Attribute) ([]byte, bool) {
	s.check("AttributeString")
	v, ok := s.attrs[a]
	return v, ok
}

func (s *fakeStream) AttributeBool(a abi.Attribute) (bool, bool) {
	s.check("AttributeBool")
	if a != abi.ConnectionMTLS || s.mtls == nil {
		return false, false
	}
	return *s.mtls, true
}

func (s *fakeStream) Increment(sr abi.Series, v uint64) { s.env.counts[s.env.key(sr)] += v }

// fakeEnvoy drives a Module as Envoy drives a dynamic module: a
// configuration, then per request the hooks in order, with the request's
// stream behind a filter pointer of its own.
type fakeEnvoy struct {
	env     *fakeEnv
	m       *Module
	cfg     uintptr
	streams map[abi.Filter]*fakeStream
	next    uint32
	slot    int
	anchors []*byte
	// predicted counts the body hooks answered ahead from the Next the
	// previous hook returned.
	predicted int
}

func newFakeEnvoy(doc string) (*fakeEnvoy, error) {
	e := &fakeEnvoy{env: newFakeEnv(), streams: map[abi.Filter]*fakeStream{}, slot: 1}
	e.m = New(e.env)
	e.m.SetStreamFactory(func(f abi.Filter) Stream { return e.streams[f] })
	h, err := e.m.NewConfig(e.env, "test", []byte(doc))
	if err != nil {
		return nil, err
	}
	e.cfg = h
	return e, nil
}

// exchange is what became of one request.
type exchange struct {
	reply     *localReply
	forwarded bool
	body      []byte
	streamed  bool // a chunk went on before the end of the body
	held      bool // the headers were still held at the end
	headers   []abi.Header
	state     map[string]string
}

// mode is how a body arrives: whole, in parts, in parts then trailers.
type mode int

const (
	modeLength mode = iota
	modeChunked
	modeTrailers
)

func (m mode) String() string { return [...]string{"length", "chunked", "trailers"}[m] }

// parts splits a body as a mode sends it.
func (m mode) parts(body []byte) [][]byte {
	if m == modeLength || len(body) < 3 {
		return [][]byte{body}
	}
	n := len(body)
	return [][]byte{body[:n/3], body[n/3 : 2*n/3], body[2*n/3:]}
}

// request sends one request and returns what became of it; prep adjusts
// the stream (sender attributes, faults) before the first hook.
func (e *fakeEnvoy) request(headers [][2]string, body []byte, m mode, prep func(*fakeStream)) exchange {
	s := &fakeStream{env: e.env, state: map[string]string{}, attrs: map[abi.Attribute][]byte{}}
	for _, h := range headers {
		s.headers = append(s.headers, abi.Header{Key: []byte(strings.ToLower(h[0])), Value: []byte(h[1])})
	}
	if prep != nil {
		prep(s)
	}
	anchor := new(byte)
	e.anchors = append(e.anchors, anchor)
	f := abi.FilterOf(unsafe.Pointer(anchor))
	e.streams[f] = s
	e.next++
	handle := uintptr(e.slot)<<handleSlotShift | e.cfg<<handleConfigShift | uintptr(e.next)
	defer func() {
		e.m.Destroy(handle)
		delete(e.streams, f)
	}()

	var out exchange
	finish := func() exchange {
		out.reply, out.headers, out.state = s.reply, s.headers, s.state
		if s.reply != nil {
			out.forwarded, out.body = false, nil
		}
		return out
	}
	eos := len(body) == 0
	// held: the headers wait (StopIteration) until a later hook lets the
	// stream go on, which Envoy does for headers and body together.
	hst, next := e.m.RequestHeaders(f, handle, eos)
	held := hst != HeadersContinue
	if s.reply != nil {
		return finish()
	}
	out.forwarded = !held
	if eos {
		return finish()
	}
	parts := m.parts(body)
	streaming := false
	for i, p := range parts {
		last := i == len(parts)-1 && m != modeTrailers
		s.received, s.inBody = append([]byte(nil), p...), true
		// What libkvgate/hooks.c answers in C from the last hook's Next
		// must be what the Go hook answers: every body hook of every test
		// checks it.
		predicted := -1
		switch {
		case next.Pass:
			predicted = BodyContinue
		case !last && next.Limit >= 0 && s.RequestBodySize(true) <= next.Limit:
			predicted = BodyStopAndBuffer
		}
		var st int
		st, next = e.m.RequestBody(f, handle, last)
		s.inBody = false
		if predicted >= 0 && (st != predicted || s.reply != nil) {
			panic(fmt.Sprintf("fake Envoy: Next predicted body status %d, the hook returned %d (reply %v)", predicted, st, s.reply != nil))
		}
		if predicted >= 0 {
			e.predicted++
		}
		if s.reply != nil {
			return finish()
		}
		switch {
		case st == BodyContinue:
			if !last {
				out.streamed = true
			}
			streaming, held, out.forwarded = true, false, true
			out.body = append(out.body, s.buffered...)
			out.body = append(out.body, s.received...)
			s.buffered = nil
		case streaming:
			out.body = append(out.body, s.received...)
		default:
			s.buffered = append(s.buffered, s.received...)
		}
		s.received = nil
	}
	if m == modeTrailers {
		st := e.m.RequestTrailers(f, handle)
		if s.reply != nil {
			return finish()
		}
		if st == TrailersContinue {
			out.body = append(out.body, s.buffered...)
			s.buffered = nil
			out.forwarded = true
		} else {
			out.forwarded = false
		}
	} else if len(s.buffered) > 0 || held {
		out.forwarded = false // still held at the end of the stream
	}
	out.held = held
	return finish()
}

func header(hs []abi.Header, name string) (string, bool) {
	for _, h := range hs {
		if bytes.EqualFold(h.Key, []byte(name)) {
			return string(h.Value), true
		}
	}
	return "", false
}

func unsafePointer(p *byte) unsafe.Pointer { return unsafe.Pointer(p) }
