package consumer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

func TestCollectCounting(t *testing.T) {
	other := ActionKey{"kv.prefetch", "1.0"}
	fetch2 := ActionKey{"kv.fetch", "2.0"}
	f1 := fetchAct("a1", goodEndpoint)
	tests := []struct {
		name      string
		caps      map[Family][]ActionKey
		acts      []act
		want      []int      // candidate positions
		families  [][]Family // per candidate
		unknown   int
		unmatched int
	}{
		{name: "no actions", caps: map[Family][]ActionKey{famA: {fk}}},
		{name: "one supported", caps: map[Family][]ActionKey{famA: {fk}}, acts: []act{f1},
			want: []int{0}, families: [][]Family{{famA}}},
		{name: "empty capabilities", acts: []act{f1, {"b", "x.y", "1", ""}}, unknown: 1, unmatched: 1},
		{name: "families without pairs", caps: map[Family][]ActionKey{famA: nil, famB: {}}, acts: []act{f1}, unmatched: 1},
		{name: "fetch at an unsupported version", caps: map[Family][]ActionKey{famA: {fk}},
			acts: []act{{"a", "kv.fetch", "2.0", ""}}, unmatched: 1},
		{name: "versions match exactly", caps: map[Family][]ActionKey{famA: {fk}},
			acts: []act{{"a", "kv.fetch", "1", ""}, {"b", "kv.fetch", "1.00", ""}, {"c", "kv.fetch", " 1.0", ""}}, unmatched: 3},
		{name: "types match exactly", caps: map[Family][]ActionKey{famA: {fk}},
			acts: []act{{"a", "KV.FETCH", "1.0", ""}, {"b", "kv.fetch ", "1.0", ""}, {"c", "kv_fetch", "1.0", ""}}, unknown: 3},
		{name: "escaped type decodes to kv.fetch", caps: map[Family][]ActionKey{famA: {fk}},
			acts: []act{{"a", `kv\u002efetch`, `1\u002e0`, ""}}, want: []int{0}, families: [][]Family{{famA}}},
		{name: "only kv.fetch is a candidate, even when a family lists another type",
			caps: map[Family][]ActionKey{famA: {fk, other}}, acts: []act{{"a", other.Type, other.Version, ""}, f1},
			want: []int{1}, families: [][]Family{{famA}}, unknown: 1},
		{name: "overlapping families: one candidate, both families",
			caps: map[Family][]ActionKey{famA: {fk}, famB: {fk, fk}}, acts: []act{f1},
			want: []int{0}, families: [][]Family{{famA, famB}}},
		{name: "unmatched counted once with many families",
			caps: map[Family][]ActionKey{famA: {fk}, famB: {fk}, "famC": {fk}}, acts: []act{{"a", "kv.fetch", "9", ""}, {"b", "t", "1", ""}},
			unknown: 1, unmatched: 1},
		{name: "repeated action ids are kept", caps: map[Family][]ActionKey{famA: {fk}},
			acts: []act{f1, f1, fetchAct("a1", evilEndpoint)}, want: []int{0, 1, 2}, families: [][]Family{{famA}, {famA}, {famA}}},
		{name: "per-version families", caps: map[Family][]ActionKey{famA: {fetch2}, famB: {fk}},
			acts: []act{{"x", "kv.fetch", "2.0", ""}, f1}, want: []int{0, 1}, families: [][]Family{{famA}, {famB}}},
		{name: "mixed envelope, producer order",
			caps: map[Family][]ActionKey{famA: {fk}, famB: {fk, fetch2}},
			acts: []act{
				{"u1", "kv.evict", "1.0", ""},
				{"f1", "kv.fetch", "2.0", ""},
				{"f2", "kv.fetch", "3.0", ""},
				f1,
				{"u2", "kv.fetch.v2", "1.0", ""},
				{"f1", "kv.fetch", "1.0", `{"anything":true}`},
			},
			want: []int{1, 3, 5}, families: [][]Family{{famB}, {famA, famB}, {famA, famB}}, unknown: 2, unmatched: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps := MustCapabilities(tt.caps)
			s := admit(t, envelope(tt.acts...))
			col := Collect(s, caps)
			var got []int
			for i, c := range col.Candidates {
				got = append(got, c.Index())
				if c.Snapshot() != s {
					t.Errorf("candidate %d does not share the snapshot", i)
				}
				if c.Action().Type() != "kv.fetch" {
					t.Errorf("candidate %d has type %q", i, c.Action().Type())
				}
				if !slices.Equal(c.Families(), tt.families[i]) {
					t.Errorf("candidate %d families = %v, want %v", i, c.Families(), tt.families[i])
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("candidates at %v, want %v", got, tt.want)
			}
			if col.UnknownType != tt.unknown || col.UnmatchedVersion != tt.unmatched {
				t.Errorf("counts unknown=%d unmatched=%d, want %d %d", col.UnknownType, col.UnmatchedVersion, tt.unknown, tt.unmatched)
			}
			if n := len(col.Candidates) + col.UnknownType + col.UnmatchedVersion; n != s.NumActions() {
				t.Errorf("candidates+counts = %d, actions = %d", n, s.NumActions())
			}
		})
	}
}

func TestCollectNil(t *testing.T) {
	col := Collect(nil, capsAB())
	if len(col.Candidates) != 0 || col.UnknownType != 0 || col.UnmatchedVersion != 0 {
		t.Fatalf("nil snapshot: %+v", col)
	}
}

func TestCollectIsPure(t *testing.T) {
	s := admit(t, envelope(fetchAct("a", goodEndpoint), act{"b", "x", "1", ""}))
	before := s.Bytes()
	caps := capsAB()
	first := Collect(s, caps)
	second := Collect(s, caps)
	if len(first.Candidates) != len(second.Candidates) || first.UnknownType != second.UnknownType {
		t.Fatal("collect is not repeatable")
	}
	if !bytes.Equal(before, s.Bytes()) {
		t.Fatal("collect changed the snapshot")
	}
}

func TestCandidateEnvelope(t *testing.T) {
	raw := envelope(act{"u", "other", "1", `{"z":1}`}, fetchAct("a1", goodEndpoint), fetchAct("a2", evilEndpoint))
	s := admit(t, raw)
	col := Collect(s, capsAB())
	if len(col.Candidates) != 2 {
		t.Fatalf("%d candidates", len(col.Candidates))
	}
	c := col.Candidates[1]
	one := c.Envelope()
	if one.NumActions() != 1 {
		t.Fatalf("one-action envelope has %d actions", one.NumActions())
	}
	if !bytes.Equal(one.Action(0).Raw(), s.Action(2).Raw()) {
		t.Error("the action changed in the one-action envelope")
	}
	env, err := one.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if env.ProtocolVersion != "0.1" || env.MessageID != "msg-123" {
		t.Errorf("envelope header lost: %q %q", env.ProtocolVersion, env.MessageID)
	}
	var names []string
	for _, m := range env.Extra {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"trace", "tail"}) {
		t.Errorf("extra metadata = %v", names)
	}
	a := env.Actions[0]
	if a.ID != "a2" || a.Type != "kv.fetch" || a.Version != "1.0" {
		t.Errorf("action = %+v", a)
	}
	want := `{"protocol_version":"0.1","message_id":"msg-123","trace":{"k":[1,2]},"actions":[` +
		`{"action_id":"a2","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"` + evilEndpoint + `","block_hashes":[11,22]}}` +
		`],"tail":"x"}`
	if got := string(one.Bytes()); got != want {
		t.Errorf("one-action envelope\n got %s\nwant %s", got, want)
	}
	// The source snapshot is untouched.
	if s.NumActions() != 3 {
		t.Error("source snapshot changed")
	}
}

func TestCapabilitiesAreCopied(t *testing.T) {
	keys := []ActionKey{fk}
	m := map[Family][]ActionKey{famA: keys}
	caps := MustCapabilities(m)
	keys[0] = ActionKey{"kv.fetch", "2.0"}
	m[famB] = []ActionKey{fk}
	delete(m, famA)
	if !caps.Supports(famA, fk) || caps.Supports(famB, fk) || caps.Supports(famA, keys[0]) {
		t.Fatalf("capabilities changed after construction: %v", caps)
	}
	col := Collect(admit(t, envelope(fetchAct("a", goodEndpoint))), caps)
	fams := col.Candidates[0].Families()
	fams[0] = "mutated"
	if !slices.Equal(col.Candidates[0].Families(), []Family{famA}) {
		t.Fatal("Families returned shared memory")
	}
}

func TestCapabilitiesErrors(t *testing.T) {
	for _, m := range []map[Family][]ActionKey{
		{"": {fk}},
		{famA: {{"", "1.0"}}},
		{famA: {{"kv.fetch", ""}}},
	} {
		if _, err := NewCapabilities(m); err == nil {
			t.Errorf("NewCapabilities(%v) accepted", m)
		}
	}
	var zero Capabilities
	if !zero.Empty() || zero.Supports(famA, fk) {
		t.Error("zero Capabilities supports something")
	}
}

func TestCollectDoesNotReadPayloads(t *testing.T) {
	// A payload that is not a kv.fetch payload at all is still a candidate:
	// collection never interprets payloads.
	s := admit(t, envelope(act{"a", "kv.fetch", "1.0", `{"block_hashes":"nope"}`}))
	if col := Collect(s, capsAB()); len(col.Candidates) != 1 {
		t.Fatal("payload influenced collection")
	}
	_ = kvhints.FetchActionType
}
