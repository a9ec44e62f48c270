package native

import "github.com/kvgate/kvgate/kvhints"

// editInPlace applies edits to a body that lies in chunks (Envoy's
// slices, in order) without moving it elsewhere, and returns how many
// bytes at the front are then left over for Envoy to drain: the edited
// body is the chunks' last n-drain bytes, n being their total. Envoy's
// dynamic-module ABI can write into a body's slices and drain from its
// front, but not cut a range out of it, so the edited body is built at the
// back: each stretch of the old body moves towards the end by what the
// edits after it removed, and each edit's text lands before the stretch
// that follows it. Only the stretches before the last removal move; a hint
// near the front of a large body moves a few bytes.
//
// That works when no stretch has to move towards the front, that is when
// the edits from any one to the last remove at least as much as they
// insert. Otherwise (an admitted envelope whose canonical form is longer
// than its text, which Rewriter.Reserve allows) ok is false and nothing
// is written. starts is scratch for the chunks' offsets.
func editInPlace(chunks [][]byte, edits []kvhints.Edit, starts []int) (drain int, _ []int, ok bool) {
	shift := 0
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		if shift += e.End - e.Start - len(e.Text); shift < 0 {
			return 0, starts, false
		}
	}
	starts = starts[:0]
	n := 0
	for _, c := range chunks {
		starts = append(starts, n)
		n += len(c)
	}
	b := chunked{chunks, starts}
	// From the back: the stretch after edit i, then edit i's text.
	shift, end := 0, n
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		b.moveUp(e.End+shift, e.End, end-e.End)
		shift += e.End - e.Start - len(e.Text)
		b.write(e.Start+shift, e.Text)
		end = e.Start
	}
	b.moveUp(shift, 0, end)
	return shift, starts, true
}

// chunked is a byte sequence in pieces; starts[i] is where chunks[i]
// begins in it.
type chunked struct {
	chunks [][]byte
	starts []int
}

// at returns the chunk holding the byte before offset end (end > 0), and
// how many of its bytes lie before end.
func (b chunked) at(end int) (chunk []byte, n int) {
	lo, hi := 0, len(b.starts)-1
	for lo < hi { // the last chunk that starts before end
		mid := (lo + hi + 1) / 2
		if b.starts[mid] < end {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return b.chunks[lo], end - b.starts[lo]
}

// moveUp copies the n bytes at src to dst >= src, from the last byte to the
// first, so that bytes it overwrites have been copied already.
func (b chunked) moveUp(dst, src, n int) {
	if dst == src {
		return
	}
	for n > 0 {
		sc, sn := b.at(src + n)
		dc, dn := b.at(dst + n)
		k := min(n, sn, dn)
		copy(dc[dn-k:dn], sc[sn-k:sn])
		n -= k
	}
}

// write copies text to offset dst.
func (b chunked) write(dst int, text []byte) {
	for len(text) > 0 {
		c, n := b.at(dst + len(text))
		k := min(len(text), n)
		copy(c[n-k:n], text[len(text)-k:])
		text = text[:len(text)-k]
	}
}
