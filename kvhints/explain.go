package kvhints

import (
	"errors"
	"strconv"
)

// Explain says why admission discards the kv_hints value raw (surrounding
// whitespace allowed) under lim, naming the member at fault by its place
// in the envelope: "actions[0].payload is not an object". It returns nil
// when the value is admitted or is null (no hint).
//
// The explanation never quotes the hint: it is built from the version 0.1
// field names, positions, kinds of values and limits only. Members the
// envelope does not define (inside payload, or extra members) are named by
// their position among their object's members, "{i}" counting from 0,
// because even their names are the sender's data. It is meant for logs and
// for producers (`kvhints check`); it is slower than admission and only
// worth computing for a value admission has already discarded.
//
// Its Reason is always the one admission gives (Admit); the Detail is the
// first fault found, which for an envelope with several faults may not be
// the one admission tripped over first.
func Explain(raw []byte, lim Limits) *AdmitError {
	var x explainer
	return x.explain(raw, lim)
}

// ExplainBody is Explain for the kv_hints of a request body that a trusted
// sender sent: nil unless the rewrite discards its hint (docs/spec.md,
// Admission rules). It runs the rewrite itself, so that it explains
// exactly the bodies the rewrite discards.
func ExplainBody(body []byte, lim Limits) *AdmitError {
	var r Rewriter
	return r.Explain(body, Policy{Trusted: true, Limits: lim})
}

// Explain is ExplainBody under the policy p with r's buffers; nil when p
// is untrusted. It rewrites body again, so a body r returned before is no
// longer valid: call it after that body has been used.
func (r *Rewriter) Explain(body []byte, p Policy) *AdmitError {
	p.MaxBodyBytes = 0
	_, res := r.Rewrite(body, p)
	if res.Outcome != OutcomeDiscarded {
		return nil
	}
	var x explainer
	i := skipWS(body, 0)
	if hasPrefix(body[i:], "\xef\xbb\xbf") {
		i = skipWS(body, i+3)
	}
	var last []byte
	n := 0
	_ = members(body[i:], nil, func(key, val []byte) bool {
		if keyIs(key, hintName, x.scratch[:0]) {
			last = val
			n++
		}
		return true
	})
	if n != 1 {
		return &AdmitError{Reason: res.Reason, Detail: "kv_hints appears " + strconv.Itoa(n) + " times in the body"}
	}
	if e := x.explain(last, p.Limits); e != nil && e.Reason == res.Reason {
		return e
	}
	return &AdmitError{Reason: res.Reason, Detail: "kv_hints breaks the version " + ProtocolVersion + " rules"} // not reached
}

// hintName is the top-level member admission reads.
const hintName = "kv_hints"

// explainMaxLevels bounds how deep Explain descends to find the value at
// fault; each level costs a pass over what is below it. Below that, it
// names the deepest member it reached.
const explainMaxLevels = 24

type explainer struct {
	a       Admitter
	c       canonicalizer
	stack   []byte
	scratch [64]byte
	path    []byte
}

func (x *explainer) explain(raw []byte, lim Limits) *AdmitError {
	if _, reason := x.a.admit(raw, lim); reason != ReasonMalformed {
		switch reason {
		case ReasonUnknownVersion:
			return &AdmitError{Reason: reason, Path: "protocol_version", Detail: `protocol_version is not "` + ProtocolVersion + `"`}
		case ReasonOversized:
			return &AdmitError{Reason: reason, Detail: "the envelope's compact form is over " + strconv.Itoa(MaxCompactBytes) + " bytes"}
		}
		return nil // admitted, or null
	}
	v := raw[skipWS(raw, 0):]
	end, _, err := skipValue(v, 0, x.stack)
	if (err != nil || skipWS(v, end) != len(v)) && !encodedSurrogates(v) {
		return x.fault("", "is not one JSON value")
	}
	if v[0] != '{' {
		return x.fault("", "is not an object but "+kind(v))
	}
	if e := x.version(v); e != nil {
		return e
	}
	if e := x.content(v, lim.maxDepth()); e != nil {
		return e
	}
	if e := x.structure(v); e != nil {
		return e
	}
	return &AdmitError{Reason: ReasonMalformed, Detail: "kv_hints breaks the version " + ProtocolVersion + " rules"}
}

// fault is a malformed verdict about the value at path ("" for the
// envelope itself); what completes the sentence.
func (x *explainer) fault(path, what string) *AdmitError {
	subject := path
	if subject == "" {
		subject = hintName
	}
	return &AdmitError{Reason: ReasonMalformed, Path: path, Detail: subject + " " + what}
}

// version applies rule 3's checks on the raw object.
func (x *explainer) version(obj []byte) *AdmitError {
	n, isString := 0, false
	_ = members(obj, x.stack, func(key, val []byte) bool {
		if keyIs(key, "protocol_version", x.scratch[:0]) {
			n++
			isString = val[0] == '"'
		}
		return true
	})
	switch {
	case n == 0:
		return x.fault("protocol_version", "is missing")
	case n > 1:
		return x.fault("protocol_version", "appears "+strconv.Itoa(n)+" times")
	case !isString:
		return x.fault("protocol_version", "is not a string")
	}
	return nil
}

// content finds the value that breaks a content rule: it checks each
// child of a container on its own and goes down into the first that fails,
// until it reaches a value whose children all pass.
func (x *explainer) content(v []byte, maxDepth int) *AdmitError {
	deep := len(v) + 2 // no value nests deeper than it has bytes
	if _, _, st := x.c.canonicalize(v, deep, grownBound(len(v))); st == canonOK {
		if _, _, st := x.c.canonicalize(v, maxDepth, grownBound(len(v))); st != canonOK {
			return x.fault("", "is nested deeper than max_depth ("+strconv.Itoa(maxDepth)+")")
		}
		return nil
	}
	x.path = x.path[:0]
	level := envelopeLevel
	for range explainMaxLevels {
		var bad, seg []byte
		var e *AdmitError
		var scanErr error
		switch v[0] {
		case '{':
			var names []string
			i := 0
			scanErr = members(v, x.stack, func(key, val []byte) bool {
				name, lone := decodeString(nil, key)
				switch {
				case lone:
					e = x.fault(string(x.path), "has a member name with a lone surrogate")
					return false
				case containsName(names, string(name)):
					e = x.fault(string(x.path), "has "+memberName(level, string(name))+" twice")
					return false
				}
				names = append(names, string(name))
				if _, _, st := x.c.canonicalize(val, deep, grownBound(len(val))); st != canonOK {
					bad, seg = val, x.segment(level, string(name), i)
					return false
				}
				i++
				return true
			})
		case '[':
			i := 0
			scanErr = elements(v, x.stack, func(val []byte) error {
				if _, _, st := x.c.canonicalize(val, deep, grownBound(len(val))); st != canonOK {
					bad, seg = val, append(append(append([]byte(nil), '['), strconv.Itoa(i)...), ']')
					return errStop
				}
				i++
				return nil
			})
		case '"':
			return x.fault(string(x.path), "is a string that holds a lone surrogate")
		default:
			return x.fault(string(x.path), "is "+numberFault(v))
		}
		if e != nil {
			return e
		}
		if bad == nil {
			// Every value passed and no name repeats, or the scan stopped
			// short: what is left is text the scanner does not take for
			// JSON, which in a body the worker reads means a string (a
			// name, when the scan finished) with UTF-8-encoded surrogates.
			if scanErr != nil && scanErr != errStop {
				return x.fault(string(x.path), "holds a string with a lone surrogate")
			}
			return x.fault(string(x.path), "has a member name with a lone surrogate")
		}
		if len(x.path) == 0 && seg[0] == '.' {
			seg = seg[1:]
		}
		x.path = append(x.path, seg...)
		v, level = bad[skipWS(bad, 0):], level.next(v[0], seg)
	}
	return x.fault(string(x.path), "holds a value that breaks a content rule (a duplicate member, NaN or Infinity, a number out of range or a lone surrogate)")
}

// errStop ends an iteration early.
var errStop = errors.New("stop")

// structure applies rule 5's shape checks to a value whose content passed.
func (x *explainer) structure(obj []byte) *AdmitError {
	var msg, actions []byte
	haveMsg, haveActions := false, false
	_ = members(obj, x.stack, func(key, val []byte) bool {
		switch {
		case keyIs(key, "message_id", x.scratch[:0]):
			msg, haveMsg = val, true
		case keyIs(key, "actions", x.scratch[:0]):
			actions, haveActions = val, true
		}
		return true
	})
	if e := x.field("message_id", msg, haveMsg); e != nil {
		return e
	}
	switch {
	case !haveActions:
		return x.fault("actions", "is missing")
	case actions[0] != '[':
		return x.fault("actions", "is not an array but "+kind(actions))
	}
	var e *AdmitError
	i := 0
	_ = elements(actions, x.stack, func(el []byte) error {
		p := "actions[" + strconv.Itoa(i) + "]"
		i++
		if el[0] != '{' {
			e = x.fault(p, "is not an object but "+kind(el))
			return errStop
		}
		var vals [4][]byte
		var have [4]bool
		_ = members(el, x.stack, func(key, val []byte) bool {
			for j, name := range actionFields {
				if keyIs(key, name, x.scratch[:0]) {
					vals[j], have[j] = val, true
				}
			}
			return true
		})
		for j, name := range actionFields[:3] {
			if e = x.field(p+"."+name, vals[j], have[j]); e != nil {
				return errStop
			}
		}
		switch {
		case !have[3]:
			e = x.fault(p+".payload", "is missing")
		case vals[3][0] != '{':
			e = x.fault(p+".payload", "is not an object but "+kind(vals[3]))
		}
		if e != nil {
			return errStop
		}
		return nil
	})
	return e
}

// actionFields are the members of a version 0.1 action.
var actionFields = [...]string{"action_id", "action_type", "action_version", "payload"}

// field checks a member that must be a non-empty string.
func (x *explainer) field(path string, val []byte, present bool) *AdmitError {
	switch {
	case !present:
		return x.fault(path, "is missing")
	case val[0] != '"':
		return x.fault(path, "is not a string but "+kind(val))
	}
	if d, _ := decodeString(x.scratch[:0], val); len(d) == 0 {
		return x.fault(path, "is an empty string")
	}
	return nil
}

// level is where in the envelope a value is, so that the names of the
// members version 0.1 defines can be written out and all others cannot.
type level uint8

const (
	envelopeLevel level = iota // the envelope object
	actionsLevel               // the actions array
	actionLevel                // an element of actions
	opaqueLevel                // anywhere else: payloads, extra members
)

// next is the level of a child reached through seg from a value at l
// whose first byte is open.
func (l level) next(open byte, seg []byte) level {
	switch {
	case l == envelopeLevel && string(seg) == "actions":
		return actionsLevel
	case l == actionsLevel && open == '[':
		return actionLevel
	}
	return opaqueLevel
}

// known reports whether name is a member version 0.1 defines at l.
func (l level) known(name string) bool {
	switch l {
	case envelopeLevel:
		return name == "protocol_version" || name == "message_id" || name == "actions"
	case actionLevel:
		for _, f := range actionFields {
			if name == f {
				return true
			}
		}
	}
	return false
}

// segment is the path step to member i (named name) of an object at l.
func (*explainer) segment(l level, name string, i int) []byte {
	if l.known(name) {
		return []byte("." + name)
	}
	return []byte("{" + strconv.Itoa(i) + "}")
}

// memberName names a member in a sentence: its name when version 0.1
// defines it at l, otherwise "a member".
func memberName(l level, name string) string {
	if l.known(name) {
		return name
	}
	return "a member"
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// encodedSurrogates reports whether b holds UTF-8-encoded surrogates
// (ED A0 80 to ED BF BF), which Python reads in a body and a scanner that
// follows UTF-8 strictly does not.
func encodedSurrogates(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == 0xED && b[i+1] >= 0xA0 && b[i+1] <= 0xBF {
			return true
		}
	}
	return false
}

// kind names the JSON kind of the value at the start of v, never the value.
func kind(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case 'N', 'I':
		return "NaN or Infinity"
	case '-':
		if len(v) > 1 && v[1] == 'I' {
			return "NaN or Infinity"
		}
	}
	return "a number"
}

// numberFault says what is wrong with a number literal that fails the
// content rules.
func numberFault(v []byte) string {
	if k := kind(v); k != "a number" {
		return k
	}
	for _, c := range v {
		if c == '.' || c == 'e' || c == 'E' {
			return "a number that is not finite as a float64"
		}
	}
	return "an integer outside -2^63 to 2^64-1"
}
