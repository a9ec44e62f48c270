package kvhints

import (
	"bytes"
	"errors"
)

// Reason says why a hint was ignored; the zero value means it was not.
type Reason uint8

// The reasons, as the label values of trtllm_kv_hints_ignored_total.
const (
	ReasonNone Reason = iota
	// ReasonUntrusted: the sender may not send hints, so the hint was removed.
	ReasonUntrusted
	// ReasonUnknownVersion: protocol_version is a string other than "0.1".
	ReasonUnknownVersion
	// ReasonOversized: the compact envelope is over MaxCompactBytes.
	ReasonOversized
	// ReasonMalformed: the envelope breaks a structural or content rule.
	ReasonMalformed
)

// Reasons lists every reason that is counted, in label order.
var Reasons = [...]Reason{ReasonUntrusted, ReasonUnknownVersion, ReasonOversized, ReasonMalformed}

// String returns the metric label value ("untrusted", ...), or "" for ReasonNone.
func (r Reason) String() string {
	switch r {
	case ReasonUntrusted:
		return "untrusted"
	case ReasonUnknownVersion:
		return "unknown_version"
	case ReasonOversized:
		return "oversized"
	case ReasonMalformed:
		return "malformed"
	}
	return ""
}

const (
	// ProtocolVersion is the one envelope version this package admits.
	ProtocolVersion = "0.1"
	// MaxCompactBytes bounds the canonical compact encoding of an envelope.
	MaxCompactBytes = 65536
	// DefaultMaxDepth is the default nesting limit; the envelope is depth 1.
	DefaultMaxDepth = 128
)

// Limits are the operator's knobs for admission.
type Limits struct {
	// MaxDepth is the deepest nesting admitted; 0 means DefaultMaxDepth.
	MaxDepth int
}

func (l Limits) maxDepth() int {
	if l.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return l.MaxDepth
}

// Admitter admits envelopes, reusing its scratch buffers across calls.
// The zero value is ready to use; an Admitter is not safe for concurrent use,
// but the snapshots it returns are.
type Admitter struct {
	stack   []byte
	canon   canonicalizer
	scratch [64]byte
}

// Admit decides one kv_hints value given as raw JSON bytes (surrounding
// whitespace allowed). It returns the snapshot of an admitted envelope, or
// the reason it was ignored. A JSON null returns (nil, ReasonNone): no hint.
func Admit(raw []byte, lim Limits) (*Snapshot, Reason) {
	var a Admitter
	return a.Admit(raw, lim)
}

// Admit is the package-level Admit with reusable scratch space: rules 1 to 5
// of docs/spec.md ("Admission rules"), in order.
func (a *Admitter) Admit(raw []byte, lim Limits) (*Snapshot, Reason) {
	canon, reason := a.admit(raw, lim)
	if canon == nil {
		return nil, reason
	}
	s := new(Snapshot)
	if err := layout(bytes.Clone(canon), &a.canon, s); err != nil {
		return nil, ReasonMalformed // not reached: admit checked the layout
	}
	return s, ReasonNone
}

// admit applies the rules and returns the canonical bytes of an admitted
// envelope, aliasing a's scratch space (valid until the next call), or nil
// and the reason. It allocates nothing once a's buffers have grown.
func (a *Admitter) admit(raw []byte, lim Limits) ([]byte, Reason) {
	i := skipWS(raw, 0)
	v := raw[i:]
	// Rule 1 and 2.
	if hasPrefix(v, "null") && skipWS(v, 4) == len(v) {
		return nil, ReasonNone
	}
	if len(v) == 0 || v[0] != '{' {
		return nil, ReasonMalformed
	}
	// Rule 4's bound on the work comes with the encoding: it stops as soon
	// as its output passes the limit. Every significant byte read adds to
	// the output, at worst one byte for six (\u0041 is A), so a value of
	// any size costs at most 6 × 65,536 significant bytes of encoding;
	// insignificant whitespace is skipped and never counted, so a
	// pretty-printed envelope whose compact form fits is admitted however
	// wide its indentation. Rule 3 still comes first (versionOr).
	canon, end, status := a.canon.canonicalize(v, lim.maxDepth(), MaxCompactBytes)
	switch {
	case status == canonOK && skipWS(v, end) != len(v):
		return nil, ReasonMalformed // trailing data: not one JSON value
	case status == canonOversized:
		return nil, a.versionOr(v, ReasonOversized)
	case status != canonOK:
		return nil, a.versionOr(v, ReasonMalformed)
	}
	// Rule 3 on the checked encoding: the same decoded names and values as
	// the raw object, and now known to have no duplicate member.
	version, found := []byte(nil), false
	for _, m := range a.canon.top {
		if keyIs(canon[m.key.start:m.key.end], "protocol_version", a.scratch[:0]) {
			version, found = canon[m.val.start:m.val.end], true
		}
	}
	if !found || version[0] != '"' {
		return nil, ReasonMalformed
	}
	if d, _ := decodeString(a.scratch[:0], version); string(d) != ProtocolVersion {
		return nil, ReasonUnknownVersion
	}
	// Rule 5's structure.
	if err := layout(canon, &a.canon, nil); err != nil {
		return nil, ReasonMalformed
	}
	return canon, ReasonNone
}

// versionOr applies rule 3 to the raw object v and returns its verdict, or
// otherwise when the version is the supported one. It is the slow path, for
// envelopes that are already known to be ignored.
func (a *Admitter) versionOr(v []byte, otherwise Reason) Reason {
	if r := checkVersion(v, a.stack); r != ReasonNone {
		return r
	}
	return otherwise
}

// checkVersion finds protocol_version among the members of the valid JSON
// object obj. A missing, non-string or repeated version is malformed.
func checkVersion(obj []byte, stack []byte) Reason {
	var version []byte
	found, isString := false, false
	var name [64]byte
	err := members(obj, stack, func(key, val []byte) bool {
		if !keyIs(key, "protocol_version", name[:0]) {
			return true
		}
		if found || val[0] != '"' {
			found, isString = true, false
			return false
		}
		found, isString = true, true
		version, _ = decodeString(version, val)
		return true
	})
	if err != nil || !isString {
		return ReasonMalformed
	}
	if string(version) != ProtocolVersion {
		return ReasonUnknownVersion
	}
	return ReasonNone
}

// members calls fn with the raw key literal and raw value of each member of
// the JSON object at the start of obj, in order, until fn returns false.
func members(obj []byte, stack []byte, fn func(key, val []byte) bool) error {
	var qs quickState
	i := skipWS(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errAt(i, errName)
		}
		kend, _, err := scanString(obj, i)
		if err != nil {
			return err
		}
		key := obj[i:kend]
		vstart, err := skipKey(obj, i)
		if err != nil {
			return err
		}
		vend, s, err := skip(obj, vstart, stack, &qs)
		stack = s
		if err != nil {
			return err
		}
		if !fn(key, obj[vstart:vend]) {
			return nil
		}
		i = skipWS(obj, vend)
		if i < len(obj) && obj[i] == '}' {
			return nil
		}
		if i >= len(obj) || obj[i] != ',' {
			return errAt(i, errComma)
		}
		i = skipWS(obj, i+1)
	}
}

// keyIs reports whether the key literal decodes to name, using scratch for
// escaped keys. Only short literals can decode to a short name.
func keyIs(lit []byte, name string, scratch []byte) bool {
	if len(lit) == len(name)+2 && string(lit[1:len(lit)-1]) == name {
		return true
	}
	if len(lit) < len(name)+2 || len(lit) > 6*len(name)+2 || bytes.IndexByte(lit, '\\') < 0 {
		return false
	}
	dec, lone := decodeString(scratch, lit)
	return !lone && string(dec) == name
}

var errLayout = errors.New("kvhints: envelope does not have the version 0.1 structure")
