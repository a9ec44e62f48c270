package consumer

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

func FuzzParseFetchPayload(f *testing.F) {
	for _, s := range []string{
		`{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}`,
		`{"source_control_endpoint":"x","block_hashes":[18446744073709551615],"e":{"a":[]}}`,
		`{"source_control_endpoint":"x","block_hashes":[1.0]}`,
		`{"source_control_endpoint":"x","source_control_endpoint":"y","block_hashes":[1]}`,
		`{"source_control_endpoint":"a\ud800","block_hashes":[1]}`,
		`[1]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseFetchPayload(b)
		if err != nil {
			if _, ok := err.(*PayloadError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if p.SourceControlEndpoint == "" || len(p.SourceControlEndpoint) > MaxEndpointBytes || len(p.BlockHashes) == 0 {
			t.Fatalf("accepted an invalid payload: %+v", p)
		}
		// Whatever was accepted is valid JSON and reads back the same once
		// re-encoded in the simplest form.
		if !json.Valid(b) {
			t.Fatal("accepted invalid JSON")
		}
		re, err := json.Marshal(map[string]any{"source_control_endpoint": p.SourceControlEndpoint, "block_hashes": p.BlockHashes})
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseFetchPayload(re)
		if err != nil || q.SourceControlEndpoint != p.SourceControlEndpoint || !slices.Equal(q.BlockHashes, p.BlockHashes) {
			t.Fatalf("round trip: %+v %v, want %+v", q, err, p)
		}
	})
}

// fuzzCaps picks capabilities from the low bits of sel.
func fuzzCaps(sel uint8) Capabilities {
	keys := []ActionKey{fk, {"kv.fetch", "2.0"}, {"kv.other", "1.0"}, {"kv.fetch", "1"}}
	m := map[Family][]ActionKey{}
	for i, f := range []Family{famA, famB} {
		for j, k := range keys {
			if sel&(1<<(i*4+j)) != 0 {
				m[f] = append(m[f], k)
			}
		}
	}
	return MustCapabilities(m)
}

func FuzzCollect(f *testing.F) {
	f.Add([]byte(envelope(fetchAct("a1", goodEndpoint))), uint8(1))
	f.Add([]byte(envelope(fetchAct("a", goodEndpoint), act{"b", "kv.other", "1.0", ""}, act{"c", "kv.fetch", "2.0", ""}, fetchAct("a", evilEndpoint))), uint8(0x31))
	f.Add([]byte(envelope(act{"x", `kv\u002efetch`, "1", ""})), uint8(0xff))
	f.Add([]byte(envelope()), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, sel uint8) {
		s, _ := kvhints.Admit(raw, kvhints.Limits{})
		if s == nil {
			return
		}
		caps := fuzzCaps(sel)
		before := s.Bytes()
		col := Collect(s, caps)
		n := s.NumActions()
		if len(col.Candidates)+col.UnknownType+col.UnmatchedVersion != n {
			t.Fatalf("%d candidates + %d unknown + %d unmatched != %d actions",
				len(col.Candidates), col.UnknownType, col.UnmatchedVersion, n)
		}
		prev := -1
		for _, c := range col.Candidates {
			if c.Index() <= prev || c.Index() >= n {
				t.Fatalf("candidate positions out of order: %d after %d", c.Index(), prev)
			}
			prev = c.Index()
			v := c.Action()
			k := ActionKey{v.Type(), v.Version()}
			if k.Type != kvhints.FetchActionType || k != c.Key() || len(c.Families()) == 0 {
				t.Fatalf("candidate %d: key %v families %v", c.Index(), k, c.Families())
			}
			for _, fam := range caps.Families() {
				if caps.Supports(fam, k) != c.SupportedBy(fam) {
					t.Fatalf("candidate %d: family %s support disagrees", c.Index(), fam)
				}
			}
			one := c.Envelope()
			if one.NumActions() != 1 || !bytes.Equal(one.Action(0).Raw(), v.Raw()) {
				t.Fatalf("candidate %d: one-action envelope differs", c.Index())
			}
		}
		if !bytes.Equal(before, s.Bytes()) {
			t.Fatal("snapshot changed")
		}
	})
}
