package kvhints

import (
	"errors"
	"math/bits"
	"strconv"
	"strings"
)

// firstBit is the index of the lowest bit set in m (m != 0).
func firstBit(m uint64) int { return bits.TrailingZeros64(m) }

// RouterOnly is a compiled set of router-only member paths (docs/spec.md,
// Router-only fields): members of a request body that only a trusted
// router may send. For an untrusted sender, Rewriter.Edits removes every
// member the worker would read under one of the paths, whatever its
// spelling and however often it occurs, and reports which paths it found
// (Result.RouterOnly).
//
// A path is a top-level member name ("kv_transfer_params"), or names
// joined by dots into nested objects ("nvext.backend_instance_id": the
// member backend_instance_id of the top-level object nvext). Nothing
// deeper than a path is touched: a member of the same name elsewhere (in
// messages, say) stays. A RouterOnly is read-only once made, and safe for
// concurrent use.
type RouterOnly struct {
	paths []string
	root  roNode
	// refuse: a body that holds any of the paths is refused (400) instead
	// of having them removed.
	refuse bool
}

// roNode is one object level of the paths: the names that matter at it,
// and the sets of their lengths and first bytes, which turn most keys away
// before any comparison (see mayMatch).
type roNode struct {
	names []roName
	lens  [4]uint64 // bit n: a name of n bytes (names are at most 128)
	first [4]uint64 // bit c: a name that starts with byte c
}

// mayMatch reports whether the key literal lit can name one of the
// level's names: an escaped key always can; a plain one only with a
// length and a first byte that some name has.
func (n *roNode) mayMatch(lit []byte, escaped bool) bool {
	if escaped {
		return true
	}
	l := len(lit) - 2
	if l <= 0 || l > maxRouterOnlyName {
		return false
	}
	c := lit[1]
	return n.lens[l>>6]&(1<<(l&63)) != 0 && n.first[c>>6]&(1<<(c&63)) != 0
}

// roName is one member name at a level: removed when field >= 0 (the
// path's index), otherwise its object value holds members of deeper
// paths (sub).
type roName struct {
	name  string
	field int
	sub   *roNode
}

// Bounds of a RouterOnly.
const (
	// MaxRouterOnlyPaths caps the number of paths (one bit each in
	// Result.RouterOnly).
	MaxRouterOnlyPaths = 64
	// MaxRouterOnlyDepth caps the names in one path.
	MaxRouterOnlyDepth = 8
	// maxRouterOnlyName caps one name's length in bytes.
	maxRouterOnlyName = 128
)

// NewRouterOnly compiles paths. Each name of a path is 1 to 128 bytes of
// ASCII letters, digits and '_' (every router-only field the engines read
// is such a name), and kv_hints, which has rules of its own, is no path's
// first name. refuse makes a body that holds any of them refused rather
// than rewritten. A path listed twice is an error; a path below one that
// is removed whole is allowed, and never reported, since its member goes
// with its parent.
func NewRouterOnly(paths []string, refuse bool) (*RouterOnly, error) {
	if len(paths) > MaxRouterOnlyPaths {
		return nil, errors.New("more than " + strconv.Itoa(MaxRouterOnlyPaths) + " router-only member paths")
	}
	ro := &RouterOnly{paths: append([]string(nil), paths...), refuse: refuse}
	for i, p := range paths {
		if msg := checkPath(p); msg != "" {
			return nil, errors.New("router-only member path " + strconv.Quote(p) + ": " + msg)
		}
		n := &ro.root
		names := strings.Split(p, ".")
		for d, name := range names {
			e := n.find(name)
			if e == nil {
				n.names = append(n.names, roName{name: name, field: -1})
				e = &n.names[len(n.names)-1]
				n.lens[len(name)>>6] |= 1 << (len(name) & 63)
				n.first[name[0]>>6] |= 1 << (name[0] & 63)
			}
			if d == len(names)-1 {
				if e.field >= 0 {
					return nil, errors.New("router-only member path " + strconv.Quote(p) + " is listed twice")
				}
				e.field = i
				break
			}
			if e.sub == nil {
				e.sub = &roNode{}
			}
			n = e.sub
		}
	}
	return ro, nil
}

// checkPath says what is wrong with a member path, or "".
func checkPath(p string) string {
	names := strings.Split(p, ".")
	if len(names) > MaxRouterOnlyDepth {
		return "more than " + strconv.Itoa(MaxRouterOnlyDepth) + " names"
	}
	if names[0] == "kv_hints" {
		return "kv_hints has rules of its own and is not a router-only field"
	}
	for _, name := range names {
		if name == "" || len(name) > maxRouterOnlyName {
			return "each name, between dots, must be 1 to " + strconv.Itoa(maxRouterOnlyName) + " bytes"
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return "names may hold only ASCII letters, digits and '_'"
			}
		}
	}
	return ""
}

// find returns the entry of name at this level, or nil.
func (n *roNode) find(name string) *roName {
	for i := range n.names {
		if n.names[i].name == name {
			return &n.names[i]
		}
	}
	return nil
}

// Len is the number of paths.
func (ro *RouterOnly) Len() int {
	if ro == nil {
		return 0
	}
	return len(ro.paths)
}

// Path returns path i, in the order given to NewRouterOnly: bit i of
// Result.RouterOnly.
func (ro *RouterOnly) Path(i int) string { return ro.paths[i] }

// Refuse reports whether a body holding any of the paths is refused.
func (ro *RouterOnly) Refuse() bool { return ro != nil && ro.refuse }

// match returns the entry at this level that the key literal names once
// decoded as Python decodes it, or nil. Names are ASCII, so a literal
// that decodes to one is at most six bytes a character.
func (n *roNode) match(lit []byte, escaped bool, scratch []byte) *roName {
	if !n.mayMatch(lit, escaped) {
		return nil
	}
	for i := range n.names {
		e := &n.names[i]
		if !escaped {
			if len(lit) == len(e.name)+2 && string(lit[1:len(lit)-1]) == e.name {
				return e
			}
			continue
		}
		if keyIs(lit, e.name, scratch) {
			return e
		}
	}
	return nil
}

// roOp is one change the router-only scan makes at the top level of a
// body: member idx removed (text nil), or its value [val, valEnd)
// replaced by text (members of deeper paths taken out of it).
type roOp struct {
	m       member
	replace bool
	text    [2]int // replace: the new value, r.nest[text[0]:text[1]]
}

// roOps is how many top-level changes the scan holds before it cuts them
// into the output as it goes (see Rewriter.flush), as for hint members.
const roOps = 64

// roState is the router-only part of a Rewriter's scan.
type roState struct {
	set   *RouterOnly
	found uint64 // bits of the paths found
	ops   []roOp // held top-level changes, in body order; cap roOps
	// nest holds the rewritten texts of replaced values.
	nest []byte
}

// RefusalMessage is the message of the 400 answer to an untrusted
// request that holds router-only fields under "untrusted": "refuse": it
// names the first field (a configured path or header name), never a
// value.
func RefusalMessage(field string) string {
	return "the request carries the router-only field " + strconv.Quote(field) +
		", which only a trusted router may send"
}

// topMember handles a top-level member of a body scanned with router-only
// paths: key literal at b[key:kend], value from val. It reports whether
// the member is the scan's (removed, or its value rewritten) and where
// its value ends; a member it does not take is skipped by the caller.
func (r *Rewriter) topMember(b []byte, idx, key, kend int, escaped bool, val int) (taken bool, end int, err error) {
	e := r.ro.set.root.match(b[key:kend], escaped, r.scratch[:0])
	if e == nil {
		return false, 0, nil
	}
	if len(r.ro.ops) == cap(r.ro.ops) {
		// No room for another change: cut those held into the output
		// (before this member's rewritten text goes into nest).
		r.flush(b)
	}
	m := member{idx: idx, key: key, val: val, next: -1}
	if e.field >= 0 {
		if end, err = r.skipValue(b, val); err != nil {
			return false, 0, err
		}
		r.ro.found |= 1 << e.field
		m.valEnd = end
		r.addOp(b, roOp{m: m})
		return true, end, nil
	}
	if val >= len(b) || b[val] != '{' {
		return false, 0, nil // not an object: nothing below it to remove
	}
	mark := len(r.ro.nest)
	end, changed, err := r.walkObject(b, val, e.sub, 1)
	if err != nil {
		// The value is not JSON: say so as a body without router-only
		// paths would be told (skipValue reads the same grammar).
		r.ro.nest = r.ro.nest[:mark]
		_, err = r.skipValue(b, val)
		return false, 0, err
	}
	if !changed {
		r.ro.nest = r.ro.nest[:mark]
		return false, end, nil
	}
	m.valEnd = end
	r.addOp(b, roOp{m: m, replace: true, text: [2]int{mark, len(r.ro.nest)}})
	return false, end, nil // rewritten, but kept: the caller counts it as kept
}

// addOp holds a top-level change; topMember has made room for it.
func (r *Rewriter) addOp(_ []byte, op roOp) {
	r.ro.ops = append(r.ro.ops, op)
}

// walkObject reads the object at b[i] (its '{'), the value of a member
// whose name is a level of some paths (n), removing the members that n
// names as fields and descending into those it names as levels. It
// returns the offset past the object and, when anything was removed,
// changed with the object's new text appended to r.ro.nest. A member that
// is removed takes the separator before it when a kept member precedes
// it, and the one after it otherwise, as at the top level (remove).
func (r *Rewriter) walkObject(b []byte, i int, n *roNode, depth int) (end int, changed bool, err error) {
	from := i     // b[from:] is not yet copied to nest (once changed)
	cutFrom := -1 // a run of removed members before the first kept one starts here
	kept := false // a member has been kept
	prevEnd := -1 // the end of the previous member's value
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, false, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false, errAt(i, errName)
		}
		key := i
		kend, escaped, err := scanString(b, i)
		if err != nil {
			return 0, false, err
		}
		if i = skipWS(b, kend); i >= len(b) || b[i] != ':' {
			return 0, false, errAt(i, errColon)
		}
		val := skipWS(b, i+1)
		e := n.match(b[key:kend], escaped, r.scratch[:0])
		removed := e != nil && e.field >= 0
		if cutFrom >= 0 && !removed { // the run of removed members ends at this kept one
			r.ro.nest = append(r.ro.nest, b[from:cutFrom]...)
			from, cutFrom = key, -1
		}
		var vend int
		switch {
		case removed:
			if vend, err = r.skipValue(b, val); err != nil {
				return 0, false, err
			}
			r.ro.found |= 1 << e.field
			changed = true
			switch {
			case kept:
				r.ro.nest = append(r.ro.nest, b[from:prevEnd]...)
				from = vend
			case cutFrom < 0:
				cutFrom = key
			}
		case e != nil && val < len(b) && b[val] == '{' && depth < MaxRouterOnlyDepth:
			mark := len(r.ro.nest)
			r.ro.nest = append(r.ro.nest, b[from:val]...)
			var sub bool
			if vend, sub, err = r.walkObject(b, val, e.sub, depth+1); err != nil {
				return 0, false, err
			}
			if sub {
				changed, from = true, vend
			} else {
				r.ro.nest = r.ro.nest[:mark]
			}
			kept = true
		default:
			if vend, err = r.skipValue(b, val); err != nil {
				return 0, false, err
			}
			kept = true
		}
		prevEnd = vend
		if i = skipWS(b, vend); i < len(b) && b[i] == '}' {
			i++
			break
		}
		if i >= len(b) || b[i] != ',' {
			return 0, false, errAt(i, errComma)
		}
		i = skipWS(b, i+1)
	}
	if !changed {
		return i, false, nil
	}
	if cutFrom >= 0 { // every member from cutFrom on was removed: keep what follows the last value
		r.ro.nest = append(r.ro.nest, b[from:cutFrom]...)
		from = prevEnd
	}
	r.ro.nest = append(r.ro.nest, b[from:i]...)
	return i, true, nil
}

// changes walks the changes a Rewriter holds in body order: the kv_hints
// members of r.st and the router-only changes of r.ro.ops, merged by their
// index among the top-level members. remove and cut read it.
type changes struct {
	hints     []member
	ops       []roOp
	nest      []byte
	firstKept int
}

// held returns the walk over what r holds now.
func (r *Rewriter) held() changes {
	return changes{r.st.recs[:r.st.n], r.ro.ops, r.ro.nest, r.st.firstKept}
}

// next returns the next change: the bytes [start, end) of b become text
// (nil for bytes removed); ok is false when there is none.
func (c *changes) next(b []byte) (start, end int, text []byte, ok bool) {
	switch {
	case len(c.hints) > 0 && (len(c.ops) == 0 || c.hints[0].idx < c.ops[0].m.idx):
		h := c.hints[0]
		c.hints = c.hints[1:]
		start, end = cutRange(b, h, c.firstKept)
		return start, end, nil, true
	case len(c.ops) > 0:
		op := c.ops[0]
		c.ops = c.ops[1:]
		if op.replace {
			return op.m.val, op.m.valEnd, c.nest[op.text[0]:op.text[1]], true
		}
		start, end = cutRange(b, op.m, c.firstKept)
		return start, end, nil, true
	}
	return 0, 0, nil, false
}
