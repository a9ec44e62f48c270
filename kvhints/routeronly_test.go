package kvhints

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var roPaths = []string{"kv_transfer_params", "bootstrap_room", "nvext.backend_instance_id", "nvext.deep.x", "a.b"}

func mustRO(t testing.TB, paths []string, refuse bool) *RouterOnly {
	t.Helper()
	ro, err := NewRouterOnly(paths, refuse)
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

// TestRouterOnlyStrip: what an untrusted body becomes, byte for byte, and
// which paths were found.
func TestRouterOnlyStrip(t *testing.T) {
	ro := mustRO(t, roPaths, false)
	for _, c := range []struct {
		name, body, want string
		found            uint64
	}{
		{"none", `{"model":"m","prompt":"p"}`, `{"model":"m","prompt":"p"}`, 0},
		{"first", `{"kv_transfer_params":{"remote_host":"h"},"model":"m"}`, `{"model":"m"}`, 1},
		{"last", `{"model":"m", "kv_transfer_params" : {"x":1} }`, `{"model":"m" }`, 1},
		{"only", `{ "bootstrap_room": 7 }`, `{  }`, 2},
		{"escaped", `{"model":"m","kv\u005ftransfer_params":1}`, `{"model":"m"}`, 1},
		{"escaped all", `{"\u0062\u006f\u006fTSTRAP_room":1,"b\u006fotstrap_room":2}`, `{"\u0062\u006f\u006fTSTRAP_room":1}`, 2},
		{"duplicates", `{"bootstrap_room":1,"m":2,"bootstrap_room":3,"n":4,"bootstrap_room":5}`, `{"m":2,"n":4}`, 2},
		{"with hints", `{"kv_hints":{},"m":1,"bootstrap_room":2,"kv_hints":3}`, `{"m":1}`, 2},
		{"nested", `{"nvext":{"backend_instance_id":3,"ignore_eos":true},"m":1}`, `{"nvext":{"ignore_eos":true},"m":1}`, 4},
		{"nested last", `{"nvext":{"ignore_eos":true, "backend_instance_id":3 },"m":1}`, `{"nvext":{"ignore_eos":true },"m":1}`, 4},
		{"nested only", `{"m":1,"nvext":{ "backend_instance_id" : 3 }}`, `{"m":1,"nvext":{  }}`, 4},
		{"nested duplicates", `{"nvext":{"backend_instance_id":1,"backend_instance_id":2,"k":0},"nvext":{"backend_instance_id":3}}`, `{"nvext":{"k":0},"nvext":{}}`, 4},
		{"deeper", `{"nvext":{"deep":{"x":1,"y":2},"backend_instance_id":0}}`, `{"nvext":{"deep":{"y":2}}}`, 4 | 8},
		{"deeper kept", `{"nvext":{"deep":{"y":[{"x":1}]}}}`, `{"nvext":{"deep":{"y":[{"x":1}]}}}`, 0},
		{"level not an object", `{"nvext":[{"backend_instance_id":1}],"a":"b"}`, `{"nvext":[{"backend_instance_id":1}],"a":"b"}`, 0},
		{"same name elsewhere", `{"messages":[{"kv_transfer_params":1,"bootstrap_room":2}],"backend_instance_id":1,"x":{"b":1}}`, `{"messages":[{"kv_transfer_params":1,"bootstrap_room":2}],"backend_instance_id":1,"x":{"b":1}}`, 0},
		{"not top level", `[{"kv_transfer_params":1}]`, `[{"kv_transfer_params":1}]`, 0},
		{"a.b and a", `{"a":{"b":1,"c":2},"kv_transfer_params":null}`, `{"a":{"c":2}}`, 1 | 16},
		{"replace then cut", `{"a":{"b":1},"bootstrap_room":2}`, `{"a":{}}`, 2 | 16},
		{"cut then replace", `{"bootstrap_room":2,"a":{"b":1}}`, `{"a":{}}`, 2 | 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Policy{RouterOnly: ro}
			body := []byte(c.body)
			out, res := Rewrite(body, p)
			if string(out) != c.want || res.RouterOnly != c.found {
				t.Fatalf("got %s (found %b), want %s (found %b)", out, res.RouterOnly, c.want, c.found)
			}
			var r Rewriter
			checkEdits(t, &r, body, p, out, res)
			// Trusted: unchanged and nothing reported.
			p.Trusted = true
			if out, res := Rewrite([]byte(c.body), p); res.RouterOnly != 0 || strings.Contains(c.body, "kv_hints") == false && string(out) != c.body {
				t.Fatalf("trusted: %s (found %b)", out, res.RouterOnly)
			}
		})
	}
}

// TestRouterOnlyRefuse: refuse answers 400 naming the first path found,
// and forwards nothing; a body without one goes on.
func TestRouterOnlyRefuse(t *testing.T) {
	ro := mustRO(t, roPaths, true)
	out, res := Rewrite([]byte(`{"m":1,"nvext":{"backend_instance_id":"secret-value"},"kv_transfer_params":{}}`), Policy{RouterOnly: ro})
	if out != nil || res.Outcome != OutcomeRejected || res.Status != 400 || res.RouterOnly != 1|4 {
		t.Fatalf("got %q %+v", out, res)
	}
	if !strings.Contains(res.Message, `"kv_transfer_params"`) || strings.Contains(res.Message, "secret") {
		t.Fatalf("message %q", res.Message)
	}
	body := []byte(`{"m":1,"kv_hints":{}}`)
	if out, res := Rewrite(body, Policy{RouterOnly: ro}); string(out) != `{"m":1}` || res.Outcome != OutcomeStripped {
		t.Fatalf("hint only: %q %+v", out, res)
	}
	if _, res := Rewrite([]byte(`{"kv_transfer_params":1}`), Policy{RouterOnly: ro, Trusted: true}); res.Outcome != OutcomeNoHint {
		t.Fatalf("trusted refused: %+v", res)
	}
}

func TestNewRouterOnlyErrors(t *testing.T) {
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{""}, "1 to 128 bytes"},
		{[]string{"a..b"}, "1 to 128 bytes"},
		{[]string{"a-b"}, "only ASCII letters"},
		{[]string{"kv_hints"}, "rules of its own"},
		{[]string{"kv_hints.x"}, "rules of its own"},
		{[]string{"a", "a"}, "listed twice"},
		{[]string{"a.b.c.d.e.f.g.h.i"}, "more than 8"},
		{make([]string, 65), "more than 64"},
	} {
		if _, err := NewRouterOnly(c.paths, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.paths, err, c.want)
		}
	}
	if _, err := NewRouterOnly([]string{"a", "a.b", "x.y", "x.z"}, false); err != nil {
		t.Fatal(err)
	}
}

// TestRouterOnlyManyMembers: more router-only members than the scan holds,
// mixed with hint members, are all cut, and the rest stays.
func TestRouterOnlyManyMembers(t *testing.T) {
	ro := mustRO(t, []string{"r", "n.x"}, false)
	for _, total := range []int{3, roOps + 1, 3*roOps + 5} {
		var b, want bytes.Buffer
		b.WriteString("{")
		want.WriteString("{")
		kept := 0
		for i := 0; i < total; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			switch i % 4 {
			case 0:
				b.WriteString(`"r":1`)
			case 1:
				b.WriteString(`"kv_hints":2`)
			case 2:
				b.WriteString(`"n":{"x":1,"y":2}`)
				if kept > 0 {
					want.WriteString(",")
				}
				want.WriteString(`"n":{"y":2}`)
				kept++
			case 3:
				b.WriteString(`"k":3`)
				if kept > 0 {
					want.WriteString(",")
				}
				want.WriteString(`"k":3`)
				kept++
			}
		}
		b.WriteString("}")
		want.WriteString("}")
		var r Rewriter
		out, res := r.Rewrite(b.Bytes(), Policy{RouterOnly: ro})
		if string(out) != want.String() {
			t.Fatalf("%d members: got %s, want %s", total, out, want.String())
		}
		checkEdits(t, &r, b.Bytes(), Policy{RouterOnly: ro}, out, res)
	}
}

// TestRouterOnlyAllocatesNothing: a Rewriter that has seen a body once
// strips router-only members from it again without allocating.
func TestRouterOnlyAllocatesNothing(t *testing.T) {
	ro := mustRO(t, roPaths, false)
	body := []byte(`{"nvext":{"backend_instance_id":1,"k":2},"kv_transfer_params":{"remote_host":"h"},"model":"m","kv_hints":{}}`)
	r := Rewriter{NoSnapshot: true}
	r.Reserve(len(body))
	p := Policy{RouterOnly: ro}
	r.Edits(body, p)
	if n := testing.AllocsPerRun(100, func() { r.Edits(body, p) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { r.Rewrite(body, p) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// jnode is a JSON value read by encoding/json, objects kept in order with
// duplicates: the reference reading of FuzzRouterOnly.
type jnode struct {
	obj  bool
	mems []jmem
	raw  string // compacted, for a value that is not an object
}

type jmem struct {
	name string
	val  *jnode
}

func readNode(d *json.Decoder) (*jnode, error) {
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		return nil, err
	}
	return nodeOf(raw)
}

func nodeOf(raw []byte) (*jnode, error) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '{' {
		var c bytes.Buffer
		err := json.Compact(&c, raw)
		return &jnode{raw: c.String()}, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	n := &jnode{obj: true}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil, err
		}
		v, err := readNode(d)
		if err != nil {
			return nil, err
		}
		n.mems = append(n.mems, jmem{k.(string), v})
	}
	return n, nil
}

// prune is the reference removal: every member a path names, at its
// level, whatever else is there.
func prune(n *jnode, paths []string, prefix string) (found map[string]bool) {
	found = map[string]bool{}
	if !n.obj {
		return found
	}
	kept := n.mems[:0:0]
	for _, m := range n.mems {
		p := prefix + m.name
		hit, level := false, false
		for _, q := range paths {
			hit = hit || q == p
			level = level || strings.HasPrefix(q, p+".")
		}
		if hit {
			found[p] = true
			continue
		}
		if level && m.val.obj {
			for k := range prune(m.val, paths, p+".") {
				found[k] = true
			}
		}
		kept = append(kept, m)
	}
	n.mems = kept
	return found
}

func (n *jnode) String() string {
	if !n.obj {
		return n.raw
	}
	var b strings.Builder
	b.WriteString("{")
	for i, m := range n.mems {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(m.name)
		b.Write(k)
		b.WriteString(":")
		b.WriteString(m.val.String())
	}
	b.WriteString("}")
	return b.String()
}

// FuzzRouterOnly checks the router-only removal against the reference
// reading of encoding/json: the body the worker reads is the original
// with exactly the named members gone (and kv_hints, which is untrusted
// too), and the paths reported are those it held.
func FuzzRouterOnly(f *testing.F) {
	for _, s := range []string{
		`{"kv_transfer_params":{"remote_host":"h"},"model":"m"}`, `{"m":1,"bootstrap_room":2,"kv_hints":3}`,
		`{"nvext":{"backend_instance_id":1,"deep":{"x":1,"x":2,"y":3}},"nvext":{"b":1}}`, `{"\u0061":{"\u0062":1}, "a" : { "c" : 2 , "b":3}}`,
		`{"a":[{"b":1}],"messages":[{"kv_transfer_params":1}]}`, `{"nvext":{"deep":{"x":{"x":1}}}}`, `{ }`, `[1]`, `{"a":{"b":1}} x`,
		`{"a":{"b":1,}}`, `{"a":{"b":}`, `{"kv_transfer_params":1,"kv_transfer_params":2}`,
	} {
		f.Add([]byte(s))
	}
	ro := mustRO(f, roPaths, false)
	var er Rewriter
	f.Fuzz(func(t *testing.T, body []byte) {
		p := Policy{RouterOnly: ro}
		out, res := Rewrite(body, p)
		checkEdits(t, &er, body, p, out, res)
		plain, pres := Rewrite(body, Policy{})
		if (res.Outcome == OutcomeRejected) != (pres.Outcome == OutcomeRejected) || res.Message != pres.Message {
			t.Fatalf("router-only paths changed the decision: %+v, without %+v", res, pres)
		}
		if res.Outcome == OutcomeRejected {
			return
		}
		if res.RouterOnly == 0 && !bytes.Equal(out, plain) {
			t.Fatalf("nothing found, yet %q differs from %q", out, plain)
		}
		if !json.Valid(body) || !pythonUTF8(body) || !intsFit(body) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("unreadable after removal: %q -> %q", body, out)
		}
		in, err := nodeOf(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")))
		if err != nil {
			t.Fatal(err)
		}
		got, err := nodeOf(bytes.TrimPrefix(out, []byte("\xef\xbb\xbf")))
		if err != nil {
			t.Fatal(err)
		}
		found := prune(in, append([]string{"kv_hints"}, roPaths...), "")
		delete(found, "kv_hints")
		if in.String() != got.String() {
			t.Fatalf("worker reads %s, want %s (from %q)", got, in, body)
		}
		var mask uint64
		for i, q := range roPaths {
			if found[q] {
				mask |= 1 << i
			}
		}
		if mask != res.RouterOnly {
			t.Fatalf("found %b, want %b in %q", res.RouterOnly, mask, body)
		}
	})
}
