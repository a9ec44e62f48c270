package kvhints

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Envelope is the KV hint envelope as Go values, for producers that build
// one and consumers that read an admitted one.
type Envelope struct {
	ProtocolVersion string
	MessageID       string
	Actions         []Action
	// Extra holds the envelope's other members in received order.
	Extra []Member
}

// Action is one entry of an envelope's actions array.
type Action struct {
	ID      string
	Type    string
	Version string
	// Payload is the action's JSON object in canonical form; it is opaque
	// to admission and read only by the consumer of Type at Version.
	Payload []byte
	// Extra holds the action's other members in received order.
	Extra []Member
}

// Member is a JSON object member whose value is kept as canonical JSON.
type Member struct {
	Name  string
	Value []byte
}

// The action this package knows how to build.
const (
	FetchActionType    = "kv.fetch"
	FetchActionVersion = "1.0"
)

// AdmitError tells a Go caller why an envelope it built would not be
// admitted, or (from Explain) why admission discarded one it received.
type AdmitError struct {
	Reason Reason
	// Path locates the value at fault in the envelope, for example
	// "actions[0].payload"; "" means the envelope as a whole. Set by
	// Explain; the builders (NewEnvelope, ...) leave it empty.
	Path string
	// Detail is the explanation, without the envelope's values.
	Detail string
}

func (e *AdmitError) Error() string {
	return "kvhints: envelope would be ignored as " + e.Reason.String() + ": " + e.Detail
}

func malformed(detail string) error {
	return &AdmitError{Reason: ReasonMalformed, Detail: detail}
}

// quote renders a caller's member name for an error message.
func quote(s string) string { return string(appendGoString(nil, strings.ToValidUTF8(s, "\uFFFD"))) }

// NewEnvelope builds a version 0.1 envelope and checks it as admission would.
func NewEnvelope(messageID string, actions []Action, extra ...Member) (*Envelope, error) {
	e := &Envelope{ProtocolVersion: ProtocolVersion, MessageID: messageID, Actions: actions, Extra: extra}
	if _, err := e.Encode(); err != nil {
		return nil, err
	}
	return e, nil
}

// NewAction builds an action from its fields and a JSON object payload.
// The payload is stored in canonical form.
func NewAction(id, typ, version string, payload []byte, extra ...Member) (Action, error) {
	for _, f := range [...]struct{ name, v string }{{"action_id", id}, {"action_type", typ}, {"action_version", version}} {
		if err := checkField(f.name, f.v); err != nil {
			return Action{}, err
		}
	}
	p, err := canonicalValue("payload", payload, DefaultMaxDepth-2)
	if err != nil {
		return Action{}, err
	}
	if p[0] != '{' {
		return Action{}, malformed("payload must be a JSON object")
	}
	if err := checkExtra(extra, "action_id", "action_type", "action_version", "payload"); err != nil {
		return Action{}, err
	}
	return Action{ID: id, Type: typ, Version: version, Payload: p, Extra: extra}, nil
}

// NewFetchAction builds a kv.fetch action of version 1.0 asking the worker to
// fetch the given root-aligned blocks from endpoint.
func NewFetchAction(id, endpoint string, blockHashes []uint64) (Action, error) {
	if err := checkField("source_control_endpoint", endpoint); err != nil {
		return Action{}, err
	}
	p := append(make([]byte, 0, 64+len(endpoint)+21*len(blockHashes)), `{"source_control_endpoint":`...)
	p = appendGoString(p, endpoint)
	p = append(p, `,"block_hashes":[`...)
	for i, h := range blockHashes {
		if i > 0 {
			p = append(p, ',')
		}
		p = strconv.AppendUint(p, h, 10)
	}
	p = append(p, "]}"...)
	return NewAction(id, FetchActionType, FetchActionVersion, p)
}

// NewMember builds an extra member from a name and a JSON value.
func NewMember(name string, value []byte) (Member, error) {
	if !utf8.ValidString(name) {
		return Member{}, malformed("member name is not valid UTF-8")
	}
	v, err := canonicalValue(name, value, DefaultMaxDepth-1)
	if err != nil {
		return Member{}, err
	}
	return Member{Name: name, Value: v}, nil
}

func checkField(name, v string) error {
	if v == "" {
		return malformed(name + " must be a non-empty string")
	}
	if !utf8.ValidString(v) {
		return malformed(name + " is not valid UTF-8")
	}
	return nil
}

func checkExtra(extra []Member, reserved ...string) error {
	seen := make(map[string]bool, len(extra))
	for _, m := range extra {
		for _, r := range reserved {
			if m.Name == r {
				return malformed("extra member " + quote(m.Name) + " repeats a field of the envelope")
			}
		}
		if seen[m.Name] {
			return malformed("extra member " + quote(m.Name) + " appears twice")
		}
		seen[m.Name] = true
	}
	return nil
}

// canonicalValue checks one JSON value against the content rules and
// returns its canonical bytes.
func canonicalValue(what string, v []byte, depth int) ([]byte, error) {
	var c canonicalizer
	out, end, status := c.canonicalize(v, depth, MaxCompactBytes)
	if status == canonSyntax || status == canonOK && skipWS(v, end) != len(v) {
		return nil, malformed(what + " is not one JSON value")
	}
	if status == canonOversized {
		return nil, &AdmitError{Reason: ReasonOversized, Detail: what + " alone is over the size limit"}
	}
	if status == canonContent {
		return nil, malformed(what + " breaks a content rule (duplicate key, NaN or Infinity, integer out of range, lone surrogate or nesting too deep)")
	}
	return bytes.Clone(out), nil
}

// Encode returns the canonical compact encoding, the exact bytes admission
// would forward, or an *AdmitError saying why admission would ignore it.
func (e *Envelope) Encode() ([]byte, error) {
	if e.ProtocolVersion != ProtocolVersion {
		return nil, &AdmitError{Reason: ReasonUnknownVersion, Detail: "protocol_version must be " + ProtocolVersion}
	}
	if err := checkField("message_id", e.MessageID); err != nil {
		return nil, err
	}
	if err := checkExtra(e.Extra, "protocol_version", "message_id", "actions"); err != nil {
		return nil, err
	}
	b := append([]byte(nil), `{"protocol_version":`...)
	b = appendGoString(b, e.ProtocolVersion)
	b = append(b, `,"message_id":`...)
	b = appendGoString(b, e.MessageID)
	b = append(b, `,"actions":[`...)
	for i, a := range e.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		for _, f := range [...]struct{ name, v string }{{"action_id", a.ID}, {"action_type", a.Type}, {"action_version", a.Version}} {
			if err := checkField(f.name, f.v); err != nil {
				return nil, inAction(i, err)
			}
		}
		if err := checkExtra(a.Extra, "action_id", "action_type", "action_version", "payload"); err != nil {
			return nil, inAction(i, err)
		}
		b = append(b, `{"action_id":`...)
		b = appendGoString(b, a.ID)
		b = append(b, `,"action_type":`...)
		b = appendGoString(b, a.Type)
		b = append(b, `,"action_version":`...)
		b = appendGoString(b, a.Version)
		b = append(b, `,"payload":`...)
		b = append(b, a.Payload...)
		b = appendMembers(b, a.Extra)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendMembers(b, e.Extra)
	b = append(b, '}')
	snap, reason := Admit(b, Limits{})
	if reason != ReasonNone {
		return nil, &AdmitError{Reason: reason, Detail: "the encoding (" + strconv.Itoa(len(b)) + " bytes) is not admitted"}
	}
	return snap.b, nil
}

// inAction places an error about action i.
func inAction(i int, err error) error {
	e := *err.(*AdmitError)
	e.Detail = "action " + strconv.Itoa(i) + ": " + e.Detail
	return &e
}

// Snapshot encodes the envelope and admits it under lim.
func (e *Envelope) Snapshot(lim Limits) (*Snapshot, error) {
	b, err := e.Encode()
	if err != nil {
		return nil, err
	}
	s, reason := Admit(b, lim)
	if reason != ReasonNone {
		return nil, &AdmitError{Reason: reason, Detail: "not admitted under the given limits"}
	}
	return s, nil
}

func appendMembers(b []byte, ms []Member) []byte {
	for _, m := range ms {
		b = append(b, ',')
		b = appendGoString(b, m.Name)
		b = append(b, ':')
		b = append(b, m.Value...)
	}
	return b
}

// appendGoString appends the canonical JSON string for valid UTF-8 s.
func appendGoString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		dst = appendCanonRune(dst, r)
	}
	return append(dst, '"')
}

var errNotEnvelope = errors.New("kvhints: bytes are not an admitted envelope")

// decodeEnvelope builds an Envelope from canonical bytes that passed admission.
func decodeEnvelope(b []byte) (*Envelope, error) {
	e := &Envelope{}
	var stack []byte
	var scratch [64]byte
	var bad error
	err := members(b, stack, func(key, val []byte) bool {
		switch {
		case keyIs(key, "protocol_version", scratch[:0]):
			e.ProtocolVersion = decodeGoString(val)
		case keyIs(key, "message_id", scratch[:0]):
			e.MessageID = decodeGoString(val)
		case keyIs(key, "actions", scratch[:0]):
			e.Actions = []Action{}
			bad = elements(val, stack, func(obj []byte) error {
				var a Action
				err := members(obj, stack, func(key, val []byte) bool {
					switch {
					case keyIs(key, "action_id", scratch[:0]):
						a.ID = decodeGoString(val)
					case keyIs(key, "action_type", scratch[:0]):
						a.Type = decodeGoString(val)
					case keyIs(key, "action_version", scratch[:0]):
						a.Version = decodeGoString(val)
					case keyIs(key, "payload", scratch[:0]):
						a.Payload = bytes.Clone(val)
					default:
						a.Extra = append(a.Extra, Member{Name: decodeGoString(key), Value: bytes.Clone(val)})
					}
					return true
				})
				e.Actions = append(e.Actions, a)
				return err
			})
		default:
			e.Extra = append(e.Extra, Member{Name: decodeGoString(key), Value: bytes.Clone(val)})
		}
		return bad == nil
	})
	if err != nil || bad != nil {
		return nil, errNotEnvelope
	}
	return e, nil
}

func decodeGoString(lit []byte) string {
	d, _ := decodeString(nil, lit)
	return string(d)
}
