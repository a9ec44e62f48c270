package native

import (
	"bytes"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

// applied is the edited body the plain way, the oracle of editInPlace.
func applied(body []byte, edits []kvhints.Edit) []byte {
	var out []byte
	from := 0
	for _, e := range edits {
		out = append(append(out, body[from:e.Start]...), e.Text...)
		from = e.End
	}
	return append(out, body[from:]...)
}

// split cuts body into chunks of the sizes sizes cycles through (1 when
// empty), each chunk its own array, as Envoy's slices are.
func split(body []byte, sizes []byte) [][]byte {
	var chunks [][]byte
	for i := 0; len(body) > 0; i++ {
		n := 1
		if len(sizes) > 0 {
			n = max(1, int(sizes[i%len(sizes)]))
		}
		n = min(n, len(body))
		chunks = append(chunks, bytes.Clone(body[:n]))
		body = body[n:]
	}
	return chunks
}

func checkEditInPlace(t *testing.T, body []byte, edits []kvhints.Edit, sizes []byte) {
	t.Helper()
	chunks := split(body, sizes)
	want := applied(body, edits)
	drain, _, ok := editInPlace(chunks, edits, nil)
	got := bytes.Join(chunks, nil)
	if !ok {
		if len(want) <= len(body) && shrinksFromEveryEdit(edits) {
			t.Fatalf("refused edits it can apply: %+v", edits)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("refused, yet wrote: %q", got)
		}
		return
	}
	if drain != len(body)-len(want) || !bytes.Equal(got[drain:], want) {
		t.Fatalf("in place %q (drain %d), want %q", got, drain, want)
	}
}

// shrinksFromEveryEdit: the edits from any one to the last remove at least
// as much as they insert.
func shrinksFromEveryEdit(edits []kvhints.Edit) bool {
	shift := 0
	for i := len(edits) - 1; i >= 0; i-- {
		if shift += edits[i].End - edits[i].Start - len(edits[i].Text); shift < 0 {
			return false
		}
	}
	return true
}

func TestEditInPlace(t *testing.T) {
	body := []byte(`{"kv_hints":{"a": 1},"model":"m","messages":[],"kv_hints":2}`)
	for _, c := range []struct {
		name  string
		edits []kvhints.Edit
	}{
		{"one removal at the front", []kvhints.Edit{{Start: 1, End: 22}}},
		{"one removal at the end", []kvhints.Edit{{Start: 47, End: 59}}},
		{"two removals", []kvhints.Edit{{Start: 1, End: 22}, {Start: 47, End: 59}}},
		{"a shorter text", []kvhints.Edit{{Start: 12, End: 20, Text: []byte(`{"a":1}`)}}},
		{"a text as long", []kvhints.Edit{{Start: 12, End: 20, Text: []byte(`{"a":22}`)}}},
		{"a longer text", []kvhints.Edit{{Start: 12, End: 20, Text: []byte(`{"a":1.0}`)}}},
		{"longer after shorter", []kvhints.Edit{{Start: 1, End: 11, Text: []byte(`"k"`)}, {Start: 12, End: 20, Text: []byte(`{"a":1.0}`)}}},
		{"the whole body", []kvhints.Edit{{Start: 0, End: len(body), Text: []byte(`{}`)}}},
	} {
		for _, sizes := range [][]byte{nil, {7}, {3, 16, 1}, {100}} {
			t.Run(c.name, func(t *testing.T) { checkEditInPlace(t, body, c.edits, sizes) })
		}
	}
}

// FuzzEditInPlace: edits chosen by the fuzzer on a body cut into slices
// chosen by it come out as the plain edit makes them, or are refused
// exactly when a stretch would move towards the front.
func FuzzEditInPlace(f *testing.F) {
	f.Add([]byte(`{"kv_hints":1,"a":"text"}`), []byte{1, 12, 0, 5, 17, 3}, []byte{7})
	f.Add([]byte(`0123456789abcdef`), []byte{2, 4, 3, 8, 9, 1}, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, body, plan, sizes []byte) {
		// plan: triples (gap before the edit, length replaced, text length).
		var edits []kvhints.Edit
		from := 0
		for i := 0; i+2 < len(plan) && len(edits) < 8; i += 3 {
			start := from + int(plan[i]%16)
			if len(edits) > 0 && start == from {
				start++ // not adjacent, as kvhints makes them
			}
			end := start + int(plan[i+1]%32)
			if end > len(body) {
				break
			}
			text := bytes.Repeat([]byte{'#'}, int(plan[i+2]%8))
			edits = append(edits, kvhints.Edit{Start: start, End: end, Text: text})
			from = end
		}
		checkEditInPlace(t, body, edits, sizes)
	})
}

// TestEditTextsOutliveTheRewriter: the host applies edits after the
// Plugin's callback, which may run its Rewriter again first (to explain a
// discarded hint), so it keeps its own copy of the edits' texts.
func TestEditTextsOutliveTheRewriter(t *testing.T) {
	s := &fakeStream{inBody: true, received: []byte(`{"kv_hints":{"a": 1},"m":1}`)}
	var h host
	h.begin(s, true)
	text := []byte(`{"a":1}`)
	edits := []kvhints.Edit{{Start: 12, End: 20, Text: text}}
	if err := h.EditRequestBody(len(s.received), edits); err != nil {
		t.Fatal(err)
	}
	copy(text, "1234567") // the Rewriter's memory, reused
	edits[0] = kvhints.Edit{}
	if err := h.end(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(s.received), `{"kv_hints":{"a":1},"m":1}`; got != want {
		t.Fatalf("edited to %q, want %q", got, want)
	}
}
