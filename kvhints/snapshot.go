package kvhints

import (
	"bytes"
	"strconv"
)

// Snapshot is an admitted envelope: its canonical compact bytes and where
// each action sits in them. It never changes after admission, so one
// snapshot can be shared by any number of goroutines and views.
type Snapshot struct {
	b          []byte
	actionsVal span // the actions array
	actions    []actionSpan
}

type span struct{ start, end int }

type actionSpan struct {
	obj, id, typ, ver, payload span
}

// layout checks the version 0.1 structure of the canonical envelope b
// (rule 5 without the content rules, which canonicalization applied) from
// the positions c recorded while producing b. When s is not nil it is
// filled in as the snapshot of b.
func layout(b []byte, c *canonicalizer, s *Snapshot) error {
	var scratch [64]byte
	msgOK, actionsOK := false, false
	var actionsVal span
	for _, m := range c.top {
		key, val := b[m.key.start:m.key.end], b[m.val.start:m.val.end]
		switch {
		case keyIs(key, "message_id", scratch[:0]):
			msgOK = nonEmptyString(val)
		case keyIs(key, "actions", scratch[:0]):
			if val[0] != '[' {
				return errLayout
			}
			actionsOK = true
			actionsVal = m.val
		}
	}
	if !msgOK || !actionsOK {
		return errLayout
	}
	if s != nil {
		*s = Snapshot{b: b, actionsVal: actionsVal, actions: make([]actionSpan, 0, len(c.elems))}
	}
	for _, e := range c.elems {
		if b[e.val.start] != '{' {
			return errLayout
		}
		a := actionSpan{obj: e.val}
		var have [4]bool
		for _, m := range c.actionMembers[e.first:e.last] {
			key, val := b[m.key.start:m.key.end], b[m.val.start:m.val.end]
			switch {
			case keyIs(key, "action_id", scratch[:0]):
				a.id, have[0] = m.val, nonEmptyString(val)
			case keyIs(key, "action_type", scratch[:0]):
				a.typ, have[1] = m.val, nonEmptyString(val)
			case keyIs(key, "action_version", scratch[:0]):
				a.ver, have[2] = m.val, nonEmptyString(val)
			case keyIs(key, "payload", scratch[:0]):
				a.payload, have[3] = m.val, val[0] == '{'
			}
		}
		if have != [4]bool{true, true, true, true} {
			return errLayout
		}
		if s != nil {
			s.actions = append(s.actions, a)
		}
	}
	return nil
}

// parseLayout is layout for bytes that are already canonical.
func parseLayout(b []byte) (*Snapshot, error) {
	var c canonicalizer
	out, _, status := c.canonicalize(b, len(b)+1, len(b))
	if status != canonOK {
		return nil, errLayout
	}
	s := new(Snapshot)
	if err := layout(b[:len(out)], &c, s); err != nil {
		return nil, err
	}
	return s, nil
}

// elements calls fn with each raw element of the valid JSON array arr.
func elements(arr []byte, stack []byte, fn func(val []byte) error) error {
	i := skipWS(arr, 1)
	if arr[i] == ']' {
		return nil
	}
	for {
		end, s, err := skipValue(arr, i, stack)
		stack = s
		if err != nil {
			return err
		}
		if err := fn(arr[i:end]); err != nil {
			return err
		}
		i = skipWS(arr, end)
		if arr[i] == ']' {
			return nil
		}
		i = skipWS(arr, i+1)
	}
}

func nonEmptyString(val []byte) bool { return val[0] == '"' && len(val) > 2 }

// spanOf locates sub, a subslice of b, within b.
func spanOf(b, sub []byte) span {
	start := cap(b) - cap(sub)
	return span{start, start + len(sub)}
}

// Len is the size of the canonical compact encoding in bytes.
func (s *Snapshot) Len() int { return len(s.b) }

// Bytes returns a copy of the canonical compact encoding.
func (s *Snapshot) Bytes() []byte { return bytes.Clone(s.b) }

// AppendTo appends the canonical compact encoding to dst.
func (s *Snapshot) AppendTo(dst []byte) []byte { return append(dst, s.b...) }

// String describes the snapshot without its contents.
// Hint contents must never reach a log, so printing a snapshot is safe.
func (s *Snapshot) String() string {
	return "kvhints.Snapshot(" + strconv.Itoa(len(s.b)) + " bytes, " + strconv.Itoa(len(s.actions)) + " actions)"
}

// NumActions is the number of actions in producer order.
func (s *Snapshot) NumActions() int { return len(s.actions) }

// Action returns a view of action i (0 <= i < NumActions).
// Views share the snapshot; nothing is copied until a view is read.
func (s *Snapshot) Action(i int) ActionView {
	_ = s.actions[i]
	return ActionView{s: s, i: i}
}

// Decode returns a new Envelope holding the snapshot's contents.
// Each call returns an independent copy that the caller may change.
func (s *Snapshot) Decode() (*Envelope, error) { return decodeEnvelope(s.b) }

// ActionView is one action of a snapshot, with its position.
type ActionView struct {
	s *Snapshot
	i int
}

// Index is the action's position in producer order.
func (v ActionView) Index() int { return v.i }

// ID is the decoded action_id.
func (v ActionView) ID() string { return v.str(v.s.actions[v.i].id) }

// Type is the decoded action_type.
func (v ActionView) Type() string { return v.str(v.s.actions[v.i].typ) }

// Version is the decoded action_version.
func (v ActionView) Version() string { return v.str(v.s.actions[v.i].ver) }

// Payload returns a copy of the action's canonical payload object.
// Admission never interprets payloads; this is for the consumer that does.
func (v ActionView) Payload() []byte {
	p := v.s.actions[v.i].payload
	return bytes.Clone(v.s.b[p.start:p.end])
}

// Raw returns a copy of the whole canonical action object.
func (v ActionView) Raw() []byte {
	o := v.s.actions[v.i].obj
	return bytes.Clone(v.s.b[o.start:o.end])
}

// Envelope returns the one-action envelope of this action: the snapshot
// with its actions array holding this action only, every other envelope
// member (protocol_version, message_id, extra metadata) kept as it is.
func (v ActionView) Envelope() *Snapshot {
	s := v.s
	a := s.actions[v.i].obj
	out := make([]byte, 0, s.actionsVal.start+2+(a.end-a.start)+len(s.b)-s.actionsVal.end)
	out = append(out, s.b[:s.actionsVal.start]...)
	out = append(out, '[')
	out = append(out, s.b[a.start:a.end]...)
	out = append(out, ']')
	out = append(out, s.b[s.actionsVal.end:]...)
	one, err := parseLayout(out)
	if err != nil {
		panic("kvhints: one-action envelope of a valid snapshot is invalid: " + err.Error())
	}
	return one
}

func (v ActionView) str(sp span) string {
	lit := v.s.b[sp.start:sp.end]
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	d, _ := decodeString(nil, lit)
	return string(d)
}
