package filter

import (
	"testing"

	"github.com/kvgate/kvgate/proxywasm"
)

// TestVerdict checks what each callback tells a native host beside its
// action: the native module holds headers, answers body chunks in C and
// picks gRPC's order from these fields alone.
func TestVerdict(t *testing.T) {
	cont, pause := proxywasm.ActionContinue, proxywasm.ActionPause
	noNext := NextBody{Limit: -1}
	buffered := NextBody{Limit: 100}
	passing := NextBody{Pass: true, Limit: -1}
	type step struct {
		body string // "" for the headers callback
		eos  bool
		want Verdict
	}
	for _, tc := range []struct {
		name    string
		config  string
		headers [][2]string
		steps   []step
	}{
		{"inspected body held", `{"max_body_bytes":100}`, [][2]string{{":path", "/v1/chat"}, {"content-length", "2"}},
			[]step{{"", false, Verdict{Action: cont, Held: true, Next: buffered}},
				{"{", false, Verdict{Action: pause, Held: true, Next: buffered}},
				{"{}", true, Verdict{Action: cont, Next: noNext}}}},
		{"no body passes", `{}`, [][2]string{{":path", "/v1/models"}},
			[]step{{"", true, Verdict{Action: cont, Next: passing}}}},
		{"excluded path passes", `{"exclude_paths":["/static/*"]}`, [][2]string{{":path", "/static/a"}},
			[]step{{"", false, Verdict{Action: cont, Next: passing}},
				{"xx", false, Verdict{Action: cont, Next: passing}}}},
		{"declared length over the limit answered", `{"max_body_bytes":10}`, [][2]string{{":path", "/"}, {"content-length", "11"}},
			[]step{{"", false, Verdict{Action: pause, Next: noNext}}}},
		{"body over the limit answered", `{"max_body_bytes":100}`, [][2]string{{":path", "/"}},
			[]step{{"", false, Verdict{Action: cont, Held: true, Next: buffered}},
				{string(make([]byte, 101)), false, Verdict{Action: pause, Next: noNext}}}},
		{"grpc undecided, then streamed through", `{"max_body_bytes":100}`, [][2]string{{":path", "/svc/M"}, {"content-type", "application/grpc"}},
			[]step{{"", false, Verdict{Action: cont, Held: true, GRPC: true, Next: noNext}},
				{"\x00\x00\x00\x00\x05hello", false, Verdict{Action: cont, GRPC: true, Next: passing}}}},
		{"grpc refused", `{"grpc":"refuse"}`, [][2]string{{":path", "/svc/M"}, {"content-type", "application/grpc"}},
			[]step{{"", false, Verdict{Action: pause, GRPC: true, Next: noNext}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(tc.config)
			p, ok := newPlugin(h)
			if !ok {
				t.Fatal(h.logs)
			}
			p.OnContextCreate(2, rootID)
			h.headers = tc.headers
			for i, st := range tc.steps {
				var got Verdict
				if i == 0 {
					got = p.OnRequestHeaders(2, len(h.headers), st.eos)
				} else {
					h.body = []byte(st.body)
					got = p.OnRequestBody(2, len(h.body), st.eos)
				}
				if got != st.want {
					t.Fatalf("step %d: %+v, want %+v", i, got, st.want)
				}
			}
		})
	}
	// A stream the Plugin does not know: only the call can say.
	p, _ := newPlugin(newFakeHost(`{}`))
	if got := p.OnRequestBody(77, 1, false); got.Action != pause || got.Held || got.Next != noNext {
		t.Fatalf("unknown stream: %+v", got)
	}
}
