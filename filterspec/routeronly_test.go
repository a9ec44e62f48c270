package filterspec

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/metricname"
)

func TestRouterOnlyConfig(t *testing.T) {
	doc := `{"router_only":{"engines":["vllm","dynamo"],"members":["my_field","nvext.dp_rank"],"headers":["X-My-Router"],"untrusted":"refuse"}}`
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ro := cfg.RouterOnly
	if !ro.Refuse || !slices.Equal(ro.Headers, []string{"x-my-router"}) {
		t.Fatalf("%+v", ro)
	}
	fields := ro.Fields()
	// presets first, then the operator's; a field named twice is one.
	wantMembers := []string{"kv_transfer_params", "ec_transfer_params"}
	dyn, _ := PresetOf("dynamo")
	wantMembers = append(wantMembers, dyn.Members...)
	wantMembers = append(wantMembers, "my_field")
	if !slices.Equal(fields[:ro.NumMembers()], wantMembers) {
		t.Fatalf("members %q, want %q", fields[:ro.NumMembers()], wantMembers)
	}
	if fields[ro.NumMembers()] != "x-data-parallel-rank" || fields[len(fields)-1] != "x-my-router" || ro.NumHeaders() != len(dyn.Headers)+1 {
		t.Fatalf("headers %q", fields[ro.NumMembers():])
	}
	if i := ro.Header([]byte("X-MY-ROUTER")); i != len(fields)-1 {
		t.Fatalf("Header = %d", i)
	}
	if ro.Header([]byte("x-my-route")) != -1 || ro.Header([]byte("content-length")) != -1 {
		t.Fatal("matched a header that is not router-only")
	}
	if !cfg.Policy().RouterOnly.Refuse() || cfg.RouterOnly.Body(true).Refuse() {
		t.Fatal("refuse in enforce, strip in detect")
	}
	if got := ro.Names(1 | 1<<uint(len(fields)-1)); got != "kv_transfer_params,x-my-router" {
		t.Fatalf("Names = %q", got)
	}
	// JSON reads back to the same configuration.
	back, err := ParseConfig(cfg.JSON())
	if err != nil {
		t.Fatalf("%s: %v", cfg.JSON(), err)
	}
	if !slices.Equal(back.RouterOnly.Fields(), fields) || back.RouterOnly.Refuse != ro.Refuse || string(back.JSON()) != string(cfg.JSON()) {
		t.Fatalf("round trip: %s", back.JSON())
	}
	// One series per field and family, after the fixed ones, each
	// decodable with its field as the label value.
	names := cfg.MetricNames()
	if len(names) != NumSeries()+2*len(fields) {
		t.Fatalf("%d names", len(names))
	}
	for i, f := range fields {
		for _, detected := range []bool{false, true} {
			fam, labels, ok := metricname.Decode(names[cfg.RouterOnlySeries(detected, i)])
			want := MetricRouterOnlyRemoved
			if detected {
				want = MetricRouterOnlyDetected
			}
			if !ok || fam != want || labels[0].Value != f {
				t.Fatalf("series of %s: %q", f, names[cfg.RouterOnlySeries(detected, i)])
			}
		}
	}
	// Without router_only: today's configuration.
	plain, _ := ParseConfig([]byte(`{}`))
	if plain.RouterOnly != nil || plain.Policy().RouterOnly != nil || len(plain.MetricNames()) != NumSeries() || strings.Contains(string(plain.JSON()), "router_only") {
		t.Fatal("router_only without the member")
	}
}

func TestRouterOnlyConfigErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"router_only":[]}`, "router_only: expected an object"},
		{`{"router_only":{"engines":["vllm","tgi"]}}`, `unknown engine "tgi"; known: vllm, sglang, trtllm, dynamo, llm-d`},
		{`{"router_only":{"members":["a-b"]}}`, `router_only.members: router-only member path "a-b"`},
		{`{"router_only":{"members":["kv_hints"]}}`, "rules of its own"},
		{`{"router_only":{"members":["a","a"]}}`, `router_only.members: "a": listed twice`},
		{`{"router_only":{"headers":["Content-Length"]}}`, "framing"},
		{`{"router_only":{"headers":[":path"]}}`, "only ASCII letters"},
		{`{"router_only":{"headers":["x-a","X-A"]}}`, "listed twice"},
		{`{"router_only":{"untrusted":"drop"}}`, `expected "strip" or "refuse"`},
		{`{"router_only":{"engine":["vllm"]}}`, `unknown member "engine"; known: engines, members, headers, untrusted`},
		{`{"router_only":{"members":[]},"router_only":{}}`, "duplicate member"},
		{`{"router_only":{"members":[1]}}`, "router_only.members"},
	} {
		_, err := ParseConfig([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	var many []string
	for i := 0; i < 60; i++ {
		many = append(many, `"f`+strings.Repeat("x", i)+`"`)
	}
	_, err := ParseConfig([]byte(`{"router_only":{"engines":["dynamo"],"members":[` + strings.Join(many, ",") + `]}}`))
	if err == nil || !strings.Contains(err.Error(), "more than 64") {
		t.Fatalf("too many fields: %v", err)
	}
}

// TestPresets: every preset field is a valid field, and no field is in two
// presets under different kinds.
func TestPresets(t *testing.T) {
	var engines []string
	for _, p := range Presets() {
		engines = append(engines, p.Engine)
		if len(p.Members)+len(p.Headers) == 0 {
			t.Errorf("%s: empty preset", p.Engine)
		}
		for _, h := range p.Headers {
			if msg := checkHeader(h); msg != "" {
				t.Errorf("%s: header %q: %s", p.Engine, h, msg)
			}
		}
	}
	ro, err := NewRouterOnly(engines, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if ro.NumMembers() == 0 || ro.NumHeaders() == 0 {
		t.Fatal("no fields")
	}
}
