package native

import (
	"errors"

	"github.com/kvgate/kvgate/envoy/native/internal/abi"
	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

// host is filter.Host on the Envoy stream of the current event hook, for
// one worker's filter.Plugin: the same Plugin, and so the same decisions,
// answers, metrics and properties, as the wasm module's, with Envoy's
// dynamic-module callbacks in place of the proxy-wasm host functions.
type host struct {
	m *Module
	// s is the stream of the hook being run; nil outside one.
	s Stream
	// inBody: the hook is a body hook, so Envoy's received body (the
	// hook's data) is part of the body besides what was buffered.
	inBody bool
	// configuring is the configuration OnConfigure is reading.
	configuring *config

	hdrs   []abi.Header
	hdrMap []byte
	chunks [][]byte
	// parts: chunks, buffered, received and apart are bodyParts' answer,
	// kept until the hook ends or the module changes the body, so that the
	// Plugin's read and the edits that follow it ask Envoy once.
	parts              bool
	buffered, received int
	apart              bool
	body               []byte
	// drain is what ReplaceRequestBody left to remove once the hook's
	// Plugin call is over: the old body's bytes at the front of the
	// buffered and received buffers. The old body stays readable until
	// then (the Plugin explains a discarded hint from it after replacing).
	drainBuffered, drainReceived int
	replaced                     bool
	// edits are what EditRequestBody left to apply once the hook's Plugin
	// call is over, to a body of editSize bytes (see applyEdits).
	edits    []kvhints.Edit
	texts    []byte // the edits' texts
	editSize int
	starts   []int
	out      []byte
}

var _ filter.Host = (*host)(nil)

var (
	errNoStream      = errors.New("no stream")
	errNoHeaders     = errors.New("envoy returned no request headers")
	errHeaderRemove  = errors.New("envoy refused to remove the header")
	errAppendBody    = errors.New("envoy refused to append to the request body")
	errDrainBody     = errors.New("envoy refused to drain the request body")
	errBodyChanged   = errors.New("request body changed size before it was rewritten")
	errUnknownMetric = errors.New("not a metric the configuration defined")
	errNoConfig      = errors.New("no configuration is being read")
	errFilterState   = errors.New("envoy refused to set the filter state")
	errUnknownProp   = errors.New("not a property the native module supplies")
)

// begin and end bracket one Plugin call in an event hook.
func (h *host) begin(s Stream, inBody bool) {
	h.s, h.inBody, h.parts = s, inBody, false
	h.replaced, h.drainBuffered, h.drainReceived = false, 0, 0
	h.edits = h.edits[:0]
}

// end applies pending body edits or a replacement and forgets the stream.
func (h *host) end() error {
	var err error
	switch {
	case len(h.edits) > 0:
		err = h.applyEdits()
		h.edits = h.edits[:0]
	case h.replaced:
		h.replaced = false
		err = h.drainFront(h.drainBuffered, h.drainReceived)
	}
	h.s = nil
	return err
}

func (h *host) Log(level proxywasm.LogLevel, msg string) {
	// proxy-wasm's levels (trace 0 … critical 5) are Envoy's.
	h.m.env.Log(int(level), msg)
}

// PluginConfig is never called: the module parses each configuration
// once and gives the Plugin the result (filter.Plugin.Configure).
func (h *host) PluginConfig(size int) ([]byte, error) { return nil, errNoConfig }

// RequestHeaders encodes Envoy's request headers as a proxy-wasm map.
func (h *host) RequestHeaders() ([]byte, error) {
	if h.s == nil {
		return nil, errNoStream
	}
	var ok bool
	if h.hdrs, ok = h.s.RequestHeaders(h.hdrs); !ok {
		return nil, errNoHeaders
	}
	h.hdrMap = proxywasm.AppendHeaderMapOf(h.hdrMap[:0], h.hdrs, headerPair)
	return h.hdrMap, nil
}

func headerPair(p abi.Header) ([]byte, []byte) { return p.Key, p.Value }

func (h *host) RemoveRequestHeader(name string) error {
	if h.s == nil {
		return errNoStream
	}
	if !h.s.RemoveRequestHeader(name) {
		return errHeaderRemove
	}
	return nil
}

// bodyParts returns the chunks of the whole body received so far: the
// buffered ones, then, in a body hook, the hook's own data (unless it is
// the buffered body itself, which an earlier filter's buffering makes it).
func (h *host) bodyParts() (chunks [][]byte, buffered, received int) {
	if h.parts {
		return h.chunks, h.buffered, h.received
	}
	s := h.s
	chunks = s.BodyChunks(abi.BufferedRequestBody, h.chunks[:0])
	for _, c := range chunks {
		buffered += len(c)
	}
	h.apart = h.inBody && !s.ReceivedBufferedRequestBody()
	if h.apart {
		n := len(chunks)
		chunks = s.BodyChunks(abi.ReceivedRequestBody, chunks)
		for _, c := range chunks[n:] {
			received += len(c)
		}
	}
	h.chunks, h.buffered, h.received, h.parts = chunks, buffered, received, true
	return chunks, buffered, received
}

// appendTo is the buffer a new body goes into: the hook's own data when
// that is apart from the buffered body (bodyParts ran), else the buffered
// body.
func (h *host) appendTo() abi.BodyType {
	if h.apart {
		return abi.ReceivedRequestBody
	}
	return abi.BufferedRequestBody
}

// appendBody and drainFront change the body, which bodyParts then reads
// anew.
func (h *host) appendBody(t abi.BodyType, b []byte) bool {
	h.parts = false
	return h.s.AppendBody(t, b)
}

// drainFront removes the first buffered bytes of the buffered body and
// the first received bytes of the hook's own data.
func (h *host) drainFront(buffered, received int) error {
	h.parts = false
	if buffered > 0 && !h.s.DrainBody(abi.BufferedRequestBody, buffered) {
		return errDrainBody
	}
	if received > 0 && !h.s.DrainBody(abi.ReceivedRequestBody, received) {
		return errDrainBody
	}
	return nil
}

// BodySize is the size of the whole body received so far, from Envoy's
// sizes alone: it runs on every body hook, and walking the buffered slices
// there would cost a 1 MiB body (64 hooks of 16 KiB) thousands of slices.
func (h *host) BodySize() int {
	return h.s.RequestBodySize(h.inBody)
}

// RequestBody returns the first limit bytes of the body: Envoy's memory
// itself when they lie in one slice, otherwise a copy.
func (h *host) RequestBody(limit int) ([]byte, error) {
	if h.s == nil {
		return nil, errNoStream
	}
	chunks, _, _ := h.bodyParts()
	switch {
	case len(chunks) == 0:
		return nil, nil
	case len(chunks) == 1 || len(chunks[0]) >= limit:
		return chunks[0][:min(limit, len(chunks[0]))], nil
	}
	b := h.body[:0]
	for _, c := range chunks {
		if len(b)+len(c) >= limit {
			b = append(b, c[:limit-len(b)]...)
			break
		}
		b = append(b, c...)
	}
	h.body = b
	return b, nil
}

// ReplaceRequestBody appends the new body after the old one and removes
// the old one when the hook's Plugin call is over (end).
func (h *host) ReplaceRequestBody(oldSize int, body []byte) error {
	if h.s == nil {
		return errNoStream
	}
	_, buffered, received := h.bodyParts()
	if buffered+received != oldSize {
		return errBodyChanged
	}
	if len(body) > 0 && !h.appendBody(h.appendTo(), body) {
		return errAppendBody
	}
	h.replaced, h.drainBuffered, h.drainReceived = true, buffered, received
	return nil
}

// EditRequestBody takes the rewrite as edits of Envoy's buffers, which
// end applies where the body lies (applyEdits): the Plugin reads the body
// it decided until its call is over.
func (h *host) EditRequestBody(oldSize int, edits []kvhints.Edit) error {
	if h.s == nil {
		return errNoStream
	}
	// applyEdits checks oldSize against the body it edits. The Plugin goes
	// on using its Rewriter before end (to explain a discarded hint), so
	// the edits and their texts are copied.
	n := 0
	for _, e := range edits {
		n += len(e.Text)
	}
	if cap(h.texts) < n {
		h.texts = make([]byte, 0, n)
	}
	texts := h.texts[:0]
	h.edits = h.edits[:0]
	for _, e := range edits {
		at := len(texts)
		texts = append(texts, e.Text...)
		e.Text = texts[at:len(texts):len(texts)]
		h.edits = append(h.edits, e)
	}
	h.texts, h.editSize = texts, oldSize
	return nil
}

// applyEdits applies the edits EditRequestBody took in Envoy's slices of
// the body and drains what is left over at the front (editInPlace). When
// they cannot be applied there, the edited body is appended after the old
// one, which is drained, as ReplaceRequestBody does.
func (h *host) applyEdits() error {
	chunks, buffered, received := h.bodyParts()
	if buffered+received != h.editSize {
		return errBodyChanged
	}
	drain, starts, ok := editInPlace(chunks, h.edits, h.starts)
	h.starts = starts
	if !ok {
		body, err := h.RequestBody(h.editSize)
		if err != nil {
			return err
		}
		out := kvhints.AppendEdited(h.out[:0], body, h.edits)
		h.out = out
		if len(out) > 0 && !h.appendBody(h.appendTo(), out) {
			return errAppendBody
		}
		drain = buffered + received
	}
	d := min(drain, buffered)
	return h.drainFront(d, drain-d)
}

func (h *host) SendLocalResponse(status int, details string, body, headers []byte) error {
	if h.s == nil {
		return errNoStream
	}
	var hs [][2]string
	if err := proxywasm.ForEachHeader(headers, func(k, v []byte) {
		hs = append(hs, [2]string{string(k), string(v)})
	}); err != nil {
		return err
	}
	h.s.SendResponse(status, hs, body, details)
	h.replaced, h.edits = false, h.edits[:0] // nothing is forwarded
	return nil
}

// filterStateKey is the filter state object of a property: the name the
// wasm filter's property gets in Envoy ("wasm.<name>"), so that one
// access-log format serves both filters.
func filterStateKey(path string) string {
	switch path {
	case filterspec.PropertyHint:
		return "wasm." + filterspec.PropertyHint
	case filterspec.PropertyHintReason:
		return "wasm." + filterspec.PropertyHintReason
	case filterspec.PropertyHintDetail:
		return "wasm." + filterspec.PropertyHintDetail
	case filterspec.PropertySenderTrusted:
		return "wasm." + filterspec.PropertySenderTrusted
	case filterspec.PropertySenderRule:
		return "wasm." + filterspec.PropertySenderRule
	}
	return "wasm." + path
}

func (h *host) SetProperty(path, value string) error {
	if h.s == nil {
		return errNoStream
	}
	if !h.s.SetFilterState(filterStateKey(path), value) {
		return errFilterState
	}
	return nil
}

// DefineCounter returns the id of a series the configuration being read
// defined when Envoy created it: its index in the module's series table.
func (h *host) DefineCounter(name string) (uint32, error) {
	c := h.configuring
	if c == nil {
		return 0, errNoConfig
	}
	for i, n := range c.names {
		if n == name {
			return c.seriesBase + uint32(i), nil
		}
	}
	return 0, errUnknownMetric
}

func (h *host) IncrementCounter(id uint32, delta int64) error {
	if h.s == nil {
		return errNoStream
	}
	s, ok := h.m.series(id)
	if !ok {
		return errUnknownMetric
	}
	h.s.Increment(s, uint64(delta))
	return nil
}

// GetProperty reads the four sender properties from Envoy's attributes,
// in the encoding Envoy gives them to a wasm filter: connection.mtls as one
// byte, the SANs and source.address as their text; nil when absent.
func (h *host) GetProperty(path string) ([]byte, error) {
	if h.s == nil {
		return nil, errNoStream
	}
	var a abi.Attribute
	switch path {
	case filterspec.PropertyMTLS:
		v, ok := h.s.AttributeBool(abi.ConnectionMTLS)
		if !ok {
			return nil, nil
		}
		if v {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case filterspec.PropertyURISAN:
		a = abi.ConnectionURISANPeerCertificate
	case filterspec.PropertyDNSSAN:
		a = abi.ConnectionDNSSANPeerCertificate
	case filterspec.PropertySourceAddress:
		a = abi.SourceAddress
	default:
		return nil, errUnknownProp
	}
	v, ok := h.s.AttributeString(a)
	if !ok || len(v) == 0 {
		return nil, nil
	}
	return v, nil
}
