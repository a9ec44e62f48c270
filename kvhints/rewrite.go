package kvhints

import (
	"bytes"
)

// Outcome is what the rewrite did with a request body.
type Outcome uint8

// The outcomes, one per request.
const (
	// OutcomeNoHint: the body has no top-level kv_hints member.
	OutcomeNoHint Outcome = iota
	// OutcomeNullHint: the worker would read null, since the last kv_hints
	// member is null (Python keeps the last of duplicate members); nothing
	// is counted.
	OutcomeNullHint
	// OutcomeStripped: untrusted, and a non-null hint was removed.
	OutcomeStripped
	// OutcomeAdmitted: trusted, and the hint was replaced by its snapshot.
	OutcomeAdmitted
	// OutcomeDiscarded: trusted, and the hint was removed with a reason.
	OutcomeDiscarded
	// OutcomeRejected: the body itself is unacceptable; nothing is forwarded.
	OutcomeRejected
)

// String returns the outcome's name as the vectors and the CLI spell it.
func (o Outcome) String() string {
	switch o {
	case OutcomeNoHint:
		return "no_hint"
	case OutcomeNullHint:
		return "null_hint"
	case OutcomeStripped:
		return "stripped"
	case OutcomeAdmitted:
		return "admitted"
	case OutcomeDiscarded:
		return "discarded"
	case OutcomeRejected:
		return "rejected"
	}
	return "unknown"
}

// Policy is how a host treats hints.
type Policy struct {
	// Trusted admits hints from this sender; otherwise they are removed.
	Trusted bool
	// Limits apply to admitted envelopes.
	Limits Limits
	// MaxBodyBytes rejects longer bodies with 413; 0 means no limit here
	// (hosts enforce their own limit before buffering).
	MaxBodyBytes int
	// RouterOnly, when set and the sender is not trusted, names the
	// router-only members that are removed from the body as kv_hints is
	// (or that make it refused: RouterOnly.Refuse). A trusted sender's
	// are forwarded unchanged.
	RouterOnly *RouterOnly
}

// Result describes one rewrite.
type Result struct {
	Outcome Outcome
	// Reason is set for OutcomeStripped (untrusted) and OutcomeDiscarded.
	Reason Reason
	// Snapshot is the admitted envelope for OutcomeAdmitted.
	Snapshot *Snapshot
	// Status and Message are set for OutcomeRejected: the HTTP status to
	// answer with and a message that never quotes the body.
	Status  int
	Message string
	// RouterOnly has bit i set when the body held router-only path i
	// (Policy.RouterOnly.Path(i)): removed, or the reason for a refusal.
	RouterOnly uint64
}

// Rewrite returns the body to forward and what was done. The returned
// slice is body itself exactly when the body is forwarded unchanged (no
// hint, a null hint, or an admitted envelope already in canonical form
// under the literal key); otherwise it is new memory whose bytes differ
// from body. A host can therefore tell "unchanged" by identity alone
// (same length and same first element) without comparing the bytes.
func Rewrite(body []byte, p Policy) ([]byte, Result) {
	var r Rewriter
	return r.Rewrite(body, p)
}

// Rewriter rewrites bodies, reusing its buffers from call to call so that a
// long-lived caller (the wasm guest) allocates nothing per request in steady
// state. It is not safe for concurrent use.
type Rewriter struct {
	// NoSnapshot leaves Result.Snapshot nil for admitted hints. A caller
	// that only forwards the body (the wasm guest) then allocates nothing
	// per request once the buffers have grown.
	NoSnapshot bool

	out     []byte
	stack   []byte // the scanners' container stack
	admit   Admitter
	scratch [64]byte
	vs      quickState // skip's
	calls   int        // quickScan calls for the last body (a test's measure of work)

	edits []Edit // Edits' answer, in editBuf
	// editBuf holds every edit a body can need: one per kv_hints member
	// and router-only change held, two for an admitted envelope, one for a
	// body cut as it was scanned.
	editBuf [hintRecords + roOps]Edit
	key     []byte // the literal key, as an edit's text

	st    scanState // the kv_hints members the scan holds
	hints hintSet   // what all of them add up to
	// Removal in progress: r.out holds the body up to from, with every
	// member handed to cut so far taken out.
	cutting bool
	from    int

	ro roState // the router-only changes the scan holds
}

// member is one top-level kv_hints member of the body.
type member struct {
	idx              int // position among all top-level members
	key, val, valEnd int // offsets of the key's quote, the value, the value's end
	next             int // offset of the next member's key, or -1 when last
}

// hintRecords is how many kv_hints members a scan holds at a time. When
// more come, those held are cut out of the body into the output at once
// (see Rewriter.flush): the rewrite's memory does not depend on how many
// members a body has, and a body of a million of them, which only a
// hostile client sends, costs one pass.
const hintRecords = 64

// scanState is what the body scan carries from member to member:
// st.firstKept, and st.n members held in recs. quickScan writes the
// records right after its state, so recs must follow it.
type scanState struct {
	quickState
	recs [hintRecords]member
}

// hintSet sums up the kv_hints members of a body.
type hintSet struct {
	count    int
	first    member // the first of them, the one admission reads
	lastNull bool   // the last one is null: the worker reads no hint
}

// Reserve makes room for the rewrite of a body of n bytes, so that no
// later Rewrite of a body of at most n bytes allocates its output: removal
// only cuts, and an admitted envelope is replaced by its canonical form,
// which is at most MaxCompactBytes and can be longer than its text (a
// float is written as Python writes it: 1e15 is 1000000000000000.0), so a
// rewritten body is shorter than n + MaxCompactBytes, the room reserved.
// The wasm guest reserves its body limit once at start-up: its linear
// memory never shrinks and its garbage collector seldom runs, so an output
// buffer grown step by step would leave every smaller one behind as garbage.
func (r *Rewriter) Reserve(n int) {
	if n += MaxCompactBytes; n > cap(r.out) {
		r.out = make([]byte, 0, n)
	}
}

// Rewrite is the package-level Rewrite with reusable buffers. A changed body
// is returned in the Rewriter's own buffer, valid until the next call.
func (r *Rewriter) Rewrite(body []byte, p Policy) ([]byte, Result) {
	edits, res := r.Edits(body, p)
	switch {
	case len(edits) == 0:
		if res.Outcome == OutcomeRejected {
			return nil, res
		}
		return body, res
	case len(edits) == 1 && edits[0].Start == 0 && edits[0].End == len(body):
		return edits[0].Text, res // the removal was done as the scan went
	}
	r.out = AppendEdited(r.out[:0], body, edits)
	return r.out, res
}

// AppendEdited appends body with edits applied (Rewriter.Edits' answer
// for it) to dst and returns the extended slice.
func AppendEdited(dst, body []byte, edits []Edit) []byte {
	from := 0
	for _, e := range edits {
		dst = append(dst, body[from:e.Start]...)
		dst = append(dst, e.Text...)
		from = e.End
	}
	return append(dst, body[from:]...)
}

// An Edit is one change that Rewriter.Edits makes to a body: the bytes
// body[Start:End] replaced by Text, which is empty for bytes removed.
type Edit struct {
	Start, End int
	Text       []byte
}

// Edits decides a body as Rewrite does and returns the rewrite as edits of
// body instead of a new body: applied in order, they turn body into the
// body Rewrite returns. They are sorted, disjoint and not adjacent, and
// there are none when the body goes on unchanged or is rejected. A host
// that can change the body where it lies (Envoy's buffers, in the native
// module) moves only the bytes the edits shift, where Rewrite copies the
// whole body. The slice and every Text are the Rewriter's memory, valid
// until the next call.
//
// A body of more than hintRecords kv_hints members, which only a hostile
// client sends, is cut as it is scanned (see flush): its edit is one, the
// whole body replaced by the rewritten one.
func (r *Rewriter) Edits(body []byte, p Policy) ([]Edit, Result) {
	r.edits = r.editBuf[:0]
	if p.MaxBodyBytes > 0 {
		if status, msg := BodyTooLarge(int64(len(body)), p.MaxBodyBytes); status != 0 {
			return nil, reject(status, msg)
		}
	}
	if len(body) == 0 {
		// No body, no hint: hosts forward body-less requests uninspected,
		// and the worker answers an empty POST itself.
		return nil, Result{Outcome: OutcomeNoHint}
	}
	r.ro.set = nil
	if p.RouterOnly.Len() > 0 && !p.Trusted {
		r.ro.set = p.RouterOnly
		if r.ro.ops == nil {
			r.ro.ops = make([]roOp, 0, roOps)
		}
	}
	if msg := r.scan(body); msg != "" {
		return nil, reject(400, msg)
	}
	if r.ro.set != nil && (r.ro.found != 0 || len(r.ro.ops) > 0 || r.cutting) {
		return r.routerOnly(body)
	}
	if r.hints.count == 0 {
		return nil, Result{Outcome: OutcomeNoHint}
	}
	// What the worker would read: with duplicates, Python keeps the last.
	lastNull := r.hints.lastNull
	if !p.Trusted {
		return r.remove(body), untrustedResult(lastNull)
	}
	if r.hints.count > 1 {
		// Every member goes, so that no reader that keeps another
		// duplicate than Python does sees a hint we did not admit.
		res := Result{Outcome: OutcomeDiscarded, Reason: ReasonMalformed}
		if lastNull {
			res = Result{Outcome: OutcomeNullHint}
		}
		return r.remove(body), res
	}
	if lastNull {
		return nil, Result{Outcome: OutcomeNullHint}
	}
	h := r.hints.first
	canon, reason := r.admit.admit(body[h.val:h.valEnd], p.Limits)
	if canon == nil {
		return r.remove(body), Result{Outcome: OutcomeDiscarded, Reason: reason}
	}
	res := Result{Outcome: OutcomeAdmitted}
	if !r.NoSnapshot {
		res.Snapshot = new(Snapshot)
		_ = layout(bytes.Clone(canon), &r.admit.canon, res.Snapshot) // checked by admit
	}
	// The envelope goes out under the literal key, whatever spelling it
	// came under, so that a reader matching the key byte for byte sees it
	// too. An escaped spelling is longer, so the key never grows the
	// body (the canonical envelope may: see Reserve).
	keyEnd := h.key + len(hintKey)
	if keyEnd > len(body) || string(body[h.key:keyEnd]) != hintKey {
		keyEnd, _, _ = scanString(body, h.key) // scanned before: no error
		r.key = append(r.key[:0], hintKey...)
		r.edits = append(r.edits, Edit{h.key, keyEnd, r.key})
	} else if bytes.Equal(canon, body[h.val:h.valEnd]) {
		// Already canonical under the literal key, the common case for a
		// router that encodes with this package: the body goes out as it
		// came, neither copied nor compared again by the host (see the
		// Rewrite contract). The comparison reads only the envelope.
		return nil, res
	}
	r.edits = append(r.edits, Edit{h.val, h.valEnd, canon})
	return r.edits, res
}

// untrustedResult is the result of an untrusted body's hints.
func untrustedResult(lastNull bool) Result {
	if lastNull {
		return Result{Outcome: OutcomeNullHint}
	}
	return Result{Outcome: OutcomeStripped, Reason: ReasonUntrusted}
}

// routerOnly decides an untrusted body in which the scan found router-only
// members: refused, or every one of them and every hint member removed.
func (r *Rewriter) routerOnly(body []byte) ([]Edit, Result) {
	found := r.ro.found
	if r.ro.set.refuse && found != 0 {
		r.st.n, r.ro.ops, r.ro.nest = 0, r.ro.ops[:0], r.ro.nest[:0]
		res := reject(400, RefusalMessage(r.ro.set.paths[firstBit(found)]))
		res.RouterOnly = found
		return nil, res
	}
	res := Result{Outcome: OutcomeNoHint}
	if r.hints.count > 0 {
		res = untrustedResult(r.hints.lastNull)
	}
	res.RouterOnly = found
	return r.remove(body), res
}

// hintKey is the literal every admitted envelope is forwarded under.
const hintKey = `"kv_hints"`

func reject(status int, msg string) Result {
	return Result{Outcome: OutcomeRejected, Status: status, Message: msg}
}

// scan reads the body as Python's json.loads does and finds every
// top-level kv_hints member: r.hints sums them up, and r.st holds those
// not yet cut out (see flush), with the index of the first top-level
// member that is not a hint. It returns a message when the body is not
// acceptable JSON.
func (r *Rewriter) scan(b []byte) (msg string) { return r.scanBody(b, bulkPlain) }

// scanBody is scan, with quickScan when quick is set and it can.
func (r *Rewriter) scanBody(b []byte, quick bool) (msg string) {
	r.reset()
	if m := unsupportedEncoding(b); m != "" {
		return m
	}
	i := 0
	if hasPrefix(b, "\xef\xbb\xbf") {
		i = 3
	}
	if quick && bulkPlain && r.ro.set == nil {
		return r.scanQuick(b, i)
	}
	return r.scanGo(b, i)
}

// reset forgets the last body's members.
func (r *Rewriter) reset() {
	r.st.firstKept, r.st.n, r.calls = -1, 0, 0
	r.hints = hintSet{}
	r.cutting, r.from = false, 0
	r.ro.found, r.ro.ops, r.ro.nest = 0, r.ro.ops[:0], r.ro.nest[:0]
}

// tally adds the members held in r.st to r.hints.
func (r *Rewriter) tally(b []byte) {
	for _, h := range r.st.recs[:r.st.n] {
		if r.hints.count == 0 {
			r.hints.first = h
		}
		r.hints.count++
		r.hints.lastNull = string(b[h.val:h.valEnd]) == "null"
	}
}

// flush is called when r.st (or r.ro) is full and another member starts:
// more than hintRecords members mean removal whatever the policy
// (untrusted removes all; trusted discards several), and router-only
// changes are made only for an untrusted body, so the members held are
// tallied and cut out of the body into r.out now, and r.st and r.ro are
// free for the next ones.
func (r *Rewriter) flush(b []byte) {
	r.tally(b)
	r.cut(b)
}

// blankBody is the message for a body of whitespace only.
const blankBody = "request body holds only whitespace; expected a JSON object"

// scanGo is scan after the encoding checks, from offset i, in Go.
func (r *Rewriter) scanGo(b []byte, i int) (msg string) {
	i = skipWS(b, i)
	if i == len(b) {
		return blankBody
	}
	st := &r.st
	if b[i] != '{' {
		// No member can be a hint; the value only has to be valid JSON.
		end, err := r.skipValue(b, i)
		if err != nil {
			return invalidJSON(err)
		}
		i = end
	} else if i = skipWS(b, i+1); i < len(b) && b[i] == '}' {
		i++
	} else {
		for idx := 0; ; idx++ {
			// As quickScan: first the record of the member before, then
			// room for this one, then its name.
			if n := st.n; n > 0 && st.recs[n-1].next == -1 && st.recs[n-1].idx == idx-1 {
				st.recs[n-1].next = i
			}
			if n := len(r.ro.ops); n > 0 && r.ro.ops[n-1].m.idx == idx-1 {
				r.ro.ops[n-1].m.next = i
			}
			if st.n == len(st.recs) {
				r.flush(b)
			}
			if i >= len(b) || b[i] != '"' {
				return invalidJSON(errAt(i, errName))
			}
			kend, escaped, err := scanString(b, i)
			if err != nil {
				return invalidJSON(err)
			}
			key := i
			if i = skipWS(b, kend); i >= len(b) || b[i] != ':' {
				return invalidJSON(errAt(i, errColon))
			}
			val := skipWS(b, i+1)
			hint := isHintKey(b[key:kend], escaped, r.scratch[:0])
			var end int
			taken := false
			if r.ro.set != nil && !hint && r.ro.set.root.mayMatch(b[key:kend], escaped) {
				taken, end, err = r.topMember(b, idx, key, kend, escaped, val)
			}
			if end == 0 && err == nil {
				end, err = r.skipValue(b, val)
			}
			if err != nil {
				return invalidJSON(err)
			}
			if taken {
				// a router-only member, held in r.ro.ops
			} else if hint {
				st.recs[st.n] = member{idx: idx, key: key, val: val, valEnd: end, next: -1}
				st.n++
			} else if st.firstKept < 0 {
				st.firstKept = idx
			}
			if i = skipWS(b, end); i < len(b) && b[i] == '}' {
				i++
				break
			}
			if i >= len(b) || b[i] != ',' {
				return invalidJSON(errAt(i, errComma))
			}
			i = skipWS(b, i+1)
		}
	}
	if j := skipWS(b, i); j != len(b) {
		return invalidJSON(errAt(j, errExtra))
	}
	r.tally(b)
	return ""
}

// skipValue is skip with the Rewriter's buffers.
func (r *Rewriter) skipValue(b []byte, i int) (int, error) {
	if bulkPlain {
		r.calls++
	}
	end, stack, err := skip(b, i, r.stack, &r.vs)
	r.stack = stack
	return end, err
}

// invalidJSON is the message of a body that is not JSON. It is kept out of
// line so that the message is built in one place and the member loop
// stays small (half the wasm size; no measured change in time).
//
//go:noinline
func invalidJSON(err error) string {
	return "request body is not valid JSON: " + err.Error()
}

// isHintKey reports whether a top-level key literal names kv_hints once
// decoded, as Python would decode it.
func isHintKey(lit []byte, escaped bool, scratch []byte) bool {
	if !escaped {
		return string(lit) == hintKey
	}
	return keyIs(lit, "kv_hints", scratch)
}

// remove returns the edits that take the body's kv_hints members out,
// with the router-only changes of an untrusted body (Policy.RouterOnly):
// those cut out already and those still held. The text before the first
// member and after the last one stays; each kept member keeps the
// separator that preceded it, except the first kept member, which needs
// none. So a member before the first kept one is cut with the separator
// after it, and any later one with the separator before it. Once the scan
// has cut members out (flush), the rest is cut too and the edit is the
// whole body. A rewritten value's text is in r.ro.nest, valid until the
// next call.
func (r *Rewriter) remove(b []byte) []Edit {
	if r.cutting {
		r.cut(b)
		r.out = append(r.out, b[r.from:]...)
		r.edits = append(r.edits, Edit{0, len(b), r.out})
		return r.edits
	}
	c := r.held()
	for {
		start, end, text, ok := c.next(b)
		if !ok {
			break
		}
		if n := len(r.edits); n > 0 && text == nil && start <= r.edits[n-1].End {
			r.edits[n-1].End = max(r.edits[n-1].End, end)
			continue
		}
		r.edits = append(r.edits, Edit{Start: start, End: end, Text: text})
	}
	r.st.n, r.ro.ops = 0, r.ro.ops[:0]
	return r.edits
}

// cutRange is the bytes removed with member h: the member and the
// separator that goes with it (see remove).
func cutRange(b []byte, h member, firstKept int) (start, end int) {
	start, end = h.key, h.valEnd
	switch {
	case firstKept >= 0 && h.idx > firstKept:
		start = separatorStart(b, h.key)
	case h.next >= 0:
		end = h.next
	}
	return start, end
}

// cut appends the body from r.from to r.out up to each change held (a
// kv_hints member, or a router-only change: a member cut or a value
// rewritten), moves r.from past it and empties r.st and r.ro. Which
// separator goes with a member depends only on the members before it, so
// members can be cut while the scan goes on: st.firstKept is final for
// every member held.
func (r *Rewriter) cut(b []byte) {
	if !r.cutting {
		r.out, r.from, r.cutting = r.out[:0], 0, true
	}
	out, from := r.out, r.from
	c := r.held()
	for {
		start, end, text, ok := c.next(b)
		if !ok {
			break
		}
		if start > from {
			out = append(out, b[from:start]...)
		}
		out = append(out, text...)
		from = end
	}
	r.out, r.from, r.st.n = out, from, 0
	r.ro.ops, r.ro.nest = r.ro.ops[:0], r.ro.nest[:0]
}

// separatorStart returns where the separator before the member whose key
// starts at key begins: the end of the previous member's value. Only
// whitespace and one comma lie between the two.
func separatorStart(b []byte, key int) int {
	i := key - 1
	for isWS(b[i]) {
		i--
	}
	i-- // the comma
	for isWS(b[i]) {
		i--
	}
	return i + 1
}

// unsupportedEncoding recognises UTF-16 and UTF-32 bodies, with or without
// a byte order mark, the way Python's json.detect_encoding does.
func unsupportedEncoding(b []byte) string {
	switch {
	case hasPrefix(b, "\x00\x00\xfe\xff"), hasPrefix(b, "\xff\xfe\x00\x00"):
		return "request body is UTF-32; only UTF-8 JSON is supported"
	case hasPrefix(b, "\xfe\xff"), hasPrefix(b, "\xff\xfe"):
		return "request body is UTF-16; only UTF-8 JSON is supported"
	case len(b) >= 4 && b[0] == 0 && b[1] == 0, len(b) >= 4 && b[1] == 0 && b[2] == 0 && b[3] == 0:
		return "request body is UTF-32; only UTF-8 JSON is supported"
	case len(b) >= 2 && (b[0] == 0 || b[1] == 0):
		return "request body is UTF-16; only UTF-8 JSON is supported"
	}
	return ""
}
