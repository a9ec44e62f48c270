package consumer

import (
	"context"
	"errors"
	"net"
	"regexp"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

var ctx = context.Background()

// Guard 1 off: the orchestration's registry check is bypassed; the
// provider's own validation must block the destination.
func TestGuardRuntimeBypassedProviderBlocks(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, nil, []string{goodEndpoint})
	r.o.skipRegistryCheck = true
	d := r.o.Decide(ctx, pdReq(), hintOf(t, fetchAct("a1", evilEndpoint)), capsAB())
	if d.Path != PathPaired || d.Reason != ReasonProviderRejected {
		t.Fatalf("decision = %v, want paired/provider_rejected", d)
	}
	r.assertNoWork(t)
	checkPD(t, d)

	// The provider also refuses on its own inside Fetch, when nobody asked
	// Validate first: its check does not depend on the orchestration.
	h := FetchHint{Binding: "b1", Family: famA, Envelope: admit(t, envelope(fetchAct("a1", evilEndpoint))).Action(0).Envelope()}
	if err := r.fetchProv.Fetch(ctx, h); !errors.Is(err, ErrRejected) {
		t.Fatalf("direct Fetch: err = %v, want ErrRejected", err)
	}
	if r.dialer.count() != 0 {
		t.Fatal("direct Fetch dialed an unlisted endpoint")
	}
}

// Guard 2 off: the provider validates nothing; the orchestration's registry
// check must block the destination.
func TestGuardProviderBypassedRuntimeBlocks(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, nil)
	r.fetchProv.skipValidation = true
	d := r.o.Decide(ctx, pdReq(), hintOf(t, fetchAct("a1", evilEndpoint)), capsAB())
	if d.Path != PathPaired || d.Reason != ReasonEndpointNotRegistered {
		t.Fatalf("decision = %v, want paired/endpoint_not_registered", d)
	}
	if r.provider.calls() != 0 {
		t.Errorf("provider was called %d times", r.provider.calls())
	}
	r.assertNoWork(t)
	checkPD(t, d)
}

// The runtime check runs again right before submission: a registry that
// drops the endpoint between Plan and Run stops the fetch even though the
// provider checks nothing.
func TestGuardRuntimeRecheckBeforeSubmit(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, nil)
	r.fetchProv.skipValidation = true
	d := r.o.Plan(pdReq(), hintOf(t, fetchAct("a1", goodEndpoint)), capsAB())
	if d.Path != PathNamedFetch {
		t.Fatalf("plan = %v", d)
	}
	delete(r.registry.allow, goodEndpoint)
	d = r.o.Run(ctx, d)
	if d.Path != PathPaired || d.Reason != ReasonEndpointNotRegistered {
		t.Fatalf("run = %v", d)
	}
	r.assertNoWork(t)
	checkPD(t, d)
}

// Both guards on and both agreeing: exactly one connection, to the
// endpoint's address.
func TestGuardsBothPass(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
	d := r.o.Decide(ctx, pdReq(), hintOf(t, fetchAct("a1", goodEndpoint)), capsAB())
	if d.Path != PathNamedFetch || d.Fetch != FetchSucceeded || d.Binding != "b1" || d.Endpoint != goodEndpoint {
		t.Fatalf("decision = %+v", d)
	}
	if !slices.Equal(r.dialer.dials, []string{"tcp 127.0.0.1:23280"}) {
		t.Fatalf("dials = %v", r.dialer.dials)
	}
	if len(r.provider.fetches) != 1 || r.provider.fetches[0].Envelope.NumActions() != 1 {
		t.Fatalf("fetches = %v", r.provider.fetches)
	}
	checkPD(t, d)
}

func TestRequestPairedBinding(t *testing.T) {
	b := authorized("paired", famA)
	b.RequestPaired = true
	r := newRig(t, []Binding{b}, []string{goodEndpoint}, []string{goodEndpoint})
	req := pdReq()
	d := r.o.Decide(ctx, req, hintOf(t, fetchAct("a1", goodEndpoint)), capsAB())
	if d.Path != PathPaired || d.Reason != ReasonRequestPaired || d.Binding != "paired" {
		t.Fatalf("decision = %v", d)
	}
	if d.Endpoint != "" {
		t.Error("payload was read before the request-paired rejection")
	}
	r.assertNoLookup(t)
	checkPD(t, d)
	if req.Handoff != pd {
		t.Error("the request's own handoff changed")
	}
}

func TestLoRAGate(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
	hint := hintOf(t, fetchAct("a1", goodEndpoint))
	req := pdReq()
	req.LoRA = true
	d := r.o.Decide(ctx, req, hint, capsAB())
	if d.Path != PathPaired || d.Reason != ReasonExcludedLoRA || d.Collected || r.collected != 0 {
		t.Fatalf("LoRA decision = %+v, collected %d times", d, r.collected)
	}
	r.assertNoLookup(t)
	checkPD(t, d)

	req.LoRA = false
	d = r.o.Decide(ctx, req, hint, capsAB())
	if !d.Collected || r.collected != 1 || d.Path != PathNamedFetch || d.Fetch != FetchSucceeded {
		t.Fatalf("non-LoRA decision = %+v, collected %d times", d, r.collected)
	}
	checkPD(t, d)
}

func TestGenerationOnly(t *testing.T) {
	usable := fetchAct("a1", goodEndpoint)
	_, malformed := kvhints.Admit([]byte(`{"protocol_version":"0.1","actions":[]}`), kvhints.Limits{})
	_, unknownVersion := kvhints.Admit([]byte(`{"protocol_version":"9"}`), kvhints.Limits{})
	tests := []struct {
		name      string
		req       func(*Request)
		hint      func(t *testing.T) Hint
		bindings  []Binding
		want      Reason
		collected bool
	}{
		{name: "absent", hint: func(*testing.T) Hint { return Hint{} }, want: ReasonAbsent},
		{name: "discarded malformed", hint: func(*testing.T) Hint { return Hint{Discarded: malformed} }, want: ReasonDiscarded},
		{name: "discarded unknown version", hint: func(*testing.T) Hint { return Hint{Discarded: unknownVersion} }, want: ReasonDiscarded},
		{name: "unsupported type", hint: func(t *testing.T) Hint { return hintOf(t, act{"a", "kv.other", "1.0", ""}) },
			want: ReasonUnsupported, collected: true},
		{name: "unsupported version", hint: func(t *testing.T) Hint { return hintOf(t, act{"a", "kv.fetch", "2.0", ""}) },
			want: ReasonUnsupported, collected: true},
		{name: "no actions", hint: func(t *testing.T) Hint { return hintOf(t) }, want: ReasonUnsupported, collected: true},
		{name: "excluded LoRA", req: func(r *Request) { r.LoRA = true }, want: ReasonExcludedLoRA},
		{name: "not generation-only", req: func(r *Request) { r.GenerationOnly = false }, want: ReasonNotGenerationOnly},
		{name: "unresolved: no bindings", bindings: []Binding{}, want: ReasonUnresolved, collected: true},
		{name: "unresolved: family has no capable binding",
			bindings: []Binding{{Name: "b", Family: famA, Authorized: true, Capabilities: []ActionKey{{"kv.fetch", "2.0"}}}},
			want:     ReasonUnresolved, collected: true},
		{name: "unresolved: binding outside the supporting families",
			bindings: []Binding{authorized("c", "famC")}, want: ReasonUnresolved, collected: true},
		{name: "unauthorized", bindings: []Binding{{Name: "b", Family: famA, Capabilities: []ActionKey{fk}}},
			want: ReasonUnauthorized, collected: true},
		{name: "ambiguous", bindings: []Binding{authorized("b1", famA), authorized("b2", famA)},
			want: ReasonAmbiguous, collected: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := tt.bindings
			if bs == nil {
				bs = []Binding{authorized("b1", famA)}
			}
			r := newRig(t, bs, []string{goodEndpoint}, []string{goodEndpoint})
			req := pdReq()
			if tt.req != nil {
				tt.req(&req)
			}
			hint := Hint{}
			if tt.hint != nil {
				hint = tt.hint(t)
			} else {
				hint = hintOf(t, usable)
			}
			d := r.o.Decide(ctx, req, hint, capsAB())
			if d.Path != PathPaired || d.Reason != tt.want {
				t.Fatalf("decision = %v, want paired/%v", d, tt.want)
			}
			if d.Collected != tt.collected || r.collected != map[bool]int{false: 0, true: 1}[tt.collected] {
				t.Errorf("collected = %v (%d calls), want %v", d.Collected, r.collected, tt.collected)
			}
			if d.Fetch != FetchNotRun {
				t.Errorf("fetch = %v", d.Fetch)
			}
			r.assertNoLookup(t)
			checkPD(t, d)
		})
	}
}

func TestGenerationOnlyNamedFetch(t *testing.T) {
	hint := hintOf(t, fetchAct("a1", goodEndpoint))

	t.Run("succeeds", func(t *testing.T) {
		r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
		plan := r.o.Plan(pdReq(), hint, capsAB())
		if plan.Path != PathNamedFetch || plan.Fetch != FetchNotRun || r.dialer.count() != 0 {
			t.Fatalf("plan = %+v (plan must not connect)", plan)
		}
		checkPD(t, plan)
		d := r.o.Run(ctx, plan)
		if d.Path != PathNamedFetch || d.Fetch != FetchSucceeded || r.dialer.count() != 1 {
			t.Fatalf("run = %+v", d)
		}
		checkPD(t, d)
		// Running the returned decision again does nothing more.
		if r.o.Run(ctx, d); r.dialer.count() != 1 {
			t.Fatal("a finished decision ran again")
		}
	})

	t.Run("fails after connecting", func(t *testing.T) {
		r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
		r.dialer.fail = errDial
		d := r.o.Decide(ctx, pdReq(), hint, capsAB())
		if d.Path != PathNamedFetch || d.Fetch != FetchFailed || !errors.Is(d.FetchErr, errDial) {
			t.Fatalf("decision = %+v", d)
		}
		if r.dialer.count() != 1 || len(r.provider.fetches) != 1 {
			t.Fatal("the one named fetch was not attempted exactly once")
		}
		checkPD(t, d)
	})

	t.Run("transfer fails", func(t *testing.T) {
		r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
		var got FetchPayload
		r.fetchProv.transfer = func(_ context.Context, _ net.Conn, p FetchPayload) error { got = p; return errDial }
		d := r.o.Decide(ctx, pdReq(), hint, capsAB())
		if d.Fetch != FetchFailed || got.SourceControlEndpoint != goodEndpoint || !slices.Equal(got.BlockHashes, []uint64{11, 22}) {
			t.Fatalf("decision = %+v, transfer saw %+v", d, got)
		}
		checkPD(t, d)
	})
}

// Overlapping families and several bindings per family.
func TestResolution(t *testing.T) {
	fetch2 := ActionKey{"kv.fetch", "2.0"}
	capable := func(name string, f Family, keys ...ActionKey) Binding {
		return Binding{Name: name, Family: f, Authorized: true, Capabilities: keys}
	}
	unauth := func(name string, f Family) Binding {
		return Binding{Name: name, Family: f, Capabilities: []ActionKey{fk}}
	}
	tests := []struct {
		name     string
		bindings []Binding
		want     Reason
		binding  string
	}{
		{name: "one authorized binding among overlapping families",
			bindings: []Binding{unauth("a-unauth", famA), capable("b-new", famB, fk), capable("c", "famC", fk)},
			binding:  "b-new"},
		// The mapping resolves among the authorized bindings first and
		// checks the capability of the one it found after, so a second
		// authorized binding makes the mapping ambiguous even when it
		// cannot handle the action.
		{name: "two authorized in one family, one capable",
			bindings: []Binding{capable("a1", famA, fk), capable("a2", famA, fetch2)}, want: ReasonAmbiguous},
		{name: "two authorized across families, one capable",
			bindings: []Binding{capable("a-old", famA, fetch2), capable("b-new", famB, fk), unauth("a-unauth", famA), capable("c", "famC", fk)},
			want:     ReasonAmbiguous},
		{name: "the one authorized binding is incapable",
			bindings: []Binding{capable("a", famA, fetch2), unauth("b", famB)}, want: ReasonUnresolved, binding: "a"},
		{name: "several bindings in one family, one authorized",
			bindings: []Binding{unauth("a1", famA), capable("a2", famA, fk), unauth("a3", famA)},
			binding:  "a2"},
		{name: "ambiguous across families",
			bindings: []Binding{capable("a", famA, fk), capable("b", famB, fk)}, want: ReasonAmbiguous},
		{name: "ambiguous within a family",
			bindings: []Binding{capable("a1", famA, fk), capable("a2", famA, fk, fetch2)}, want: ReasonAmbiguous},
		{name: "ambiguous with a request-paired binding",
			bindings: []Binding{capable("a1", famA, fk), {Name: "p", Family: famB, Authorized: true, RequestPaired: true, Capabilities: []ActionKey{fk}}},
			want:     ReasonAmbiguous},
		{name: "missing", bindings: []Binding{capable("c", "famC", fk)}, want: ReasonUnresolved},
		{name: "incapable beside a family outside", bindings: []Binding{capable("a", famA, fetch2), capable("c", "famC", fk)},
			want: ReasonUnresolved, binding: "a"},
		{name: "unauthorized only", bindings: []Binding{unauth("a", famA), unauth("b", famB)}, want: ReasonUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every registration order gives the same answer.
			for _, order := range permutations(len(tt.bindings)) {
				bs := make([]Binding, len(order))
				for i, j := range order {
					bs[i] = tt.bindings[j]
				}
				r := newRig(t, bs, []string{goodEndpoint}, []string{goodEndpoint})
				d := r.o.Plan(pdReq(), hintOf(t, fetchAct("a1", goodEndpoint)), capsAB())
				if d.Reason != tt.want {
					t.Fatalf("order %v: reason %v, want %v", order, d.Reason, tt.want)
				}
				if tt.want == ReasonNone && d.Path != PathNamedFetch || d.Binding != tt.binding {
					t.Fatalf("order %v: %+v, want binding %q", order, d, tt.binding)
				}
				if tt.want != ReasonNone {
					r.assertNoLookup(t)
				}
				checkPD(t, d)
			}
		})
	}
}

// A rejection of the first candidate never moves on to another candidate,
// family or binding, although the second candidate would be usable.
func TestNoFallback(t *testing.T) {
	fetch2 := ActionKey{"kv.fetch", "2.0"}
	caps := MustCapabilities(map[Family][]ActionKey{famA: {fk}, famB: {fetch2}})
	second := act{"a2", "kv.fetch", "2.0", `{"source_control_endpoint":"` + goodEndpoint + `","block_hashes":[1]}`}
	goodB := Binding{Name: "b", Family: famB, Authorized: true, Capabilities: []ActionKey{fetch2}}
	tests := []struct {
		name     string
		first    act
		bindings []Binding
		runtime  []string
		provider []string
		want     Reason
	}{
		{name: "unauthorized binding", first: fetchAct("a1", goodEndpoint),
			bindings: []Binding{{Name: "a", Family: famA, Capabilities: []ActionKey{fk}}, authorized("a-other-family", famB), goodB},
			want:     ReasonUnauthorized},
		{name: "payload invalid", first: act{"a1", "kv.fetch", "1.0", `{"source_control_endpoint":"` + goodEndpoint + `","block_hashes":[-1]}`},
			bindings: []Binding{authorized("a", famA), goodB}, want: ReasonPayloadInvalid},
		{name: "endpoint not registered", first: fetchAct("a1", evilEndpoint),
			bindings: []Binding{authorized("a", famA), goodB}, provider: []string{evilEndpoint}, want: ReasonEndpointNotRegistered},
		{name: "provider rejected", first: fetchAct("a1", evilEndpoint),
			bindings: []Binding{authorized("a", famA), goodB}, runtime: []string{evilEndpoint}, want: ReasonProviderRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.bindings, append([]string{goodEndpoint}, tt.runtime...), append([]string{goodEndpoint}, tt.provider...))
			d := r.o.Decide(ctx, pdReq(), hintOf(t, tt.first, second), caps)
			if d.Path != PathPaired || d.Reason != tt.want || d.Action != 0 {
				t.Fatalf("decision = %+v, want paired/%v on action 0", d, tt.want)
			}
			if d.Candidates != 2 {
				t.Fatalf("candidates = %d; the test needs a usable second one", d.Candidates)
			}
			for _, h := range r.provider.validates {
				if h.Binding != "a" || h.Envelope.Action(0).ID() != "a1" {
					t.Errorf("provider saw binding %s action %s", h.Binding, h.Envelope.Action(0).ID())
				}
			}
			for _, e := range r.registry.lookups {
				if e != tt.first.endpoint() {
					t.Errorf("registry looked up %q", e)
				}
			}
			r.assertNoWork(t)
			checkPD(t, d)
		})
	}
}

func (a act) endpoint() string {
	p, err := ParseFetchPayload([]byte(a.payload))
	if err != nil {
		return ""
	}
	return p.SourceControlEndpoint
}

func TestProviderErrors(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
	two := admit(t, envelope(fetchAct("a", goodEndpoint), fetchAct("b", goodEndpoint)))
	for name, h := range map[string]FetchHint{
		"nil envelope":       {},
		"two actions":        {Envelope: two},
		"wrong type":         {Envelope: admit(t, envelope(act{"a", "kv.other", "1.0", `{"source_control_endpoint":"` + goodEndpoint + `","block_hashes":[1]}`}))},
		"wrong version":      {Envelope: admit(t, envelope(act{"a", "kv.fetch", "1.1", `{"source_control_endpoint":"` + goodEndpoint + `","block_hashes":[1]}`}))},
		"bad payload":        {Envelope: admit(t, envelope(act{"a", "kv.fetch", "1.0", `{}`}))},
		"not tcp":            {Envelope: admit(t, envelope(fetchAct("a", "http://127.0.0.1:23280")))},
		"not on a allowlist": {Envelope: admit(t, envelope(fetchAct("a", "tcp://127.0.0.1:23281")))},
	} {
		if err := r.fetchProv.Validate(h); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: Validate err = %v", name, err)
		}
		if err := r.fetchProv.Fetch(ctx, h); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: Fetch err = %v", name, err)
		}
	}
	if r.dialer.count() != 0 {
		t.Fatalf("dials = %v", r.dialer.dials)
	}
}

func TestNilParts(t *testing.T) {
	hint := hintOf(t, fetchAct("a1", goodEndpoint))
	d := NewOrchestrator(nil, nil, nil).Decide(ctx, pdReq(), hint, capsAB())
	if d.Reason != ReasonUnresolved {
		t.Fatalf("nil bindings: %v", d)
	}
	bs := MustBindings(authorized("b1", famA))
	if d := NewOrchestrator(bs, nil, nil).Decide(ctx, pdReq(), hint, capsAB()); d.Reason != ReasonEndpointNotRegistered {
		t.Fatalf("nil registry: %v", d)
	}
	if d := NewOrchestrator(bs, NewEndpointSet(goodEndpoint), nil).Decide(ctx, pdReq(), hint, capsAB()); d.Reason != ReasonProviderRejected {
		t.Fatalf("nil provider: %v", d)
	}
}

func TestBindingsErrors(t *testing.T) {
	for _, bs := range [][]Binding{
		{{Family: famA}},
		{{Name: "x"}},
		{authorized("x", famA), authorized("x", famB)},
	} {
		if _, err := NewBindings(bs...); err == nil {
			t.Errorf("NewBindings(%v) accepted", bs)
		}
	}
}

func TestDecisionStringHidesContents(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
	d := r.o.Plan(pdReq(), hintOf(t, fetchAct("secret-id", goodEndpoint)), capsAB())
	s := d.String()
	if s != "consumer.Decision(named_fetch action=0 binding=b1)" {
		t.Fatalf("String = %s", s)
	}
}

func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// A planned decision run by an orchestrator without a provider is refused,
// not a crash.
func TestRunWithoutProvider(t *testing.T) {
	r := newRig(t, []Binding{authorized("b1", famA)}, []string{goodEndpoint}, []string{goodEndpoint})
	d := r.o.Plan(pdReq(), hintOf(t, fetchAct("a1", goodEndpoint)), capsAB())
	other := NewOrchestrator(MustBindings(authorized("b1", famA)), NewEndpointSet(goodEndpoint), nil)
	if d = other.Run(ctx, d); d.Path != PathPaired || d.Reason != ReasonProviderRejected {
		t.Fatalf("decision = %v", d)
	}
	r.assertNoWork(t)
	checkPD(t, d)
}

// TestNameStyle: the reason and path names are snake_case, the style of
// kvhints' own reasons, so one log or metric label set reads the same.
func TestNameStyle(t *testing.T) {
	style := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	var names []string
	for r := ReasonNone + 1; int(r) < len(reasonNames); r++ {
		names = append(names, r.String())
	}
	for p := range pathNames {
		names = append(names, Path(p).String())
	}
	for _, r := range kvhints.Reasons {
		names = append(names, r.String()) // the style this follows
	}
	for _, n := range names {
		if !style.MatchString(n) {
			t.Errorf("%q is not snake_case", n)
		}
	}
}
