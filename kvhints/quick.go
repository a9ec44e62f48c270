package kvhints

// This file drives quickScan (quickscan_wasm.s), the scanner the wasm guest
// reads bodies with. It reads what the Go scanner reads, with the same
// verdicts, the same kv_hints members and the same error at the same
// offset, and never gives up: it stops only to hand over a full batch of
// members, to have its container stack grown, or at the end. So a body is
// read once, in one compact loop, whatever its shape. Natively bulkPlain
// is false and the Go scanner does the work; quickScan is a stub.

// quickState is where quickScan starts, stops and resumes. The assembly
// reads and writes its fields by offset (ST_* in quickscan_wasm.s): keep their
// order. In a body scan it is the head of a scanState, whose records
// follow it in memory.
type quickState struct {
	pos       int // in: where to start; out: where it stopped
	depth     int // in and out: closers held at the bottom of the stack
	closer    int // in: 0 to start, or the closer to push on resuming
	code      int // out: the errCode of quickError
	body      int // in: 1 to scan a body, 0 to skip one value
	idx       int // body: index of the top-level member last started
	firstKept int // body: index of the first member that is not kv_hints, or -1
	n         int // body: members held in the records (room for hintRecords)
	flags     int // body: quickScan's flags (R15) while it is away
}

// quickScan's answers.
const (
	quickDone      = iota // the value or the body ended well; a value at pos
	quickFull             // body: the records are full; a member starts at pos
	quickDeep             // the stack is full: grow it and resume
	quickError            // not JSON: code at pos
	quickNotObject        // body: the top-level value at pos is not an object
)

// growStack returns a stack of more than twice the capacity that starts
// with the depth closers of stack. Doubling keeps what a hostile nesting
// leaves behind to the size of the stack it needed (see push).
func growStack(stack []byte, depth int) []byte {
	s := make([]byte, 2*cap(stack)+64)
	copy(s, stack[:depth])
	return s
}

// scanQuick is scan with quickScan, from offset i after the encoding checks.
func (r *Rewriter) scanQuick(b []byte, i int) (msg string) {
	st := &r.st
	st.pos, st.depth, st.closer, st.body, st.idx, st.flags = i, 0, 0, 1, -1, 0
	if len(r.stack) < 64 {
		r.stack = make([]byte, 64)
	}
	for {
		r.calls++
		switch quickScan(b, &st.quickState, r.stack[:cap(r.stack)]) {
		case quickDone:
			r.tally(b)
			return ""
		case quickFull:
			r.flush(b)
		case quickDeep:
			r.stack = growStack(r.stack, st.depth)
		case quickError:
			if errCode(st.code) == errBlank {
				return blankBody
			}
			return invalidJSON(errAt(st.pos, errCode(st.code)))
		default: // quickNotObject: the Go scanner skips it, through skip
			r.reset()
			return r.scanGo(b, i)
		}
	}
}

// skip validates the value at b[i] (whitespace already skipped) and
// returns the offset just past it: with quickScan on wasm, with skipValue
// elsewhere. stack is scratch for the container stack, returned grown; qs
// is quickScan's state.
func skip(b []byte, i int, stack []byte, qs *quickState) (int, []byte, error) {
	if !bulkPlain {
		return skipValue(b, i, stack)
	}
	if cap(stack) < 64 {
		stack = make([]byte, 64)
	}
	*qs = quickState{pos: i}
	for {
		switch quickScan(b, qs, stack[:cap(stack)]) {
		case quickDone:
			return qs.pos, stack, nil
		case quickDeep:
			stack = growStack(stack, qs.depth)
		default:
			return 0, stack, errAt(qs.pos, errCode(qs.code))
		}
	}
}
