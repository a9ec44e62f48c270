package vectors

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// replay is a Runner that answers every case with what it expects, and
// counts as a host would: the kit must pass it, and fail it when one answer
// is wrong.
type replay struct {
	totals Counters
	// spoil, when set, changes the answer for the case of that name.
	spoil func(r *Result, totals *Counters)
	name  string
	sent  int
}

func (p *replay) Observes() Observes {
	return ObservesOutcome | ObservesHint | ObservesReply | ObservesForwardStatus | ObservesGRPCStatus
}

func (p *replay) Send(c *Case) (Result, error) {
	p.sent++
	e := c.Expect
	r := Result{Forwarded: e.Action == "forward", Status: 200, Body: e.ForwardedBody,
		Outcome: e.Outcome, Reason: e.Reason, CanonicalHint: e.CanonicalHint}
	switch {
	case !r.Forwarded && e.GRPCStatus != 0:
		r.Status, r.ContentType, r.Body, r.GRPCStatus = e.Status, "application/grpc", nil, strconv.Itoa(e.GRPCStatus)
	case !r.Forwarded:
		r.Status, r.ContentType = e.Status, "application/json"
		r.Body = []byte(`{"error":{"message":"m","type":"invalid_request_error","code":` + strconv.Itoa(e.Status) + `}}`)
	}
	p.totals = add(p.totals, e.Counters)
	if p.spoil != nil && c.Name == p.name {
		p.spoil(&r, &p.totals)
	}
	return r, nil
}

func (p *replay) Counters(*Case) (Counters, error) { return p.totals, nil }

func add(a, b Counters) Counters { return a.Sub(Counters{}.Sub(b)) }

func TestRunReplay(t *testing.T) {
	p := &replay{}
	Run(t, p)
	if p.sent < minCases {
		t.Errorf("sent %d cases", p.sent)
	}
}

func TestRunSkip(t *testing.T) {
	p := &replay{}
	var seen []string
	Run(t, p, Skip("no content-encoding input", func(c *Case) bool { return c.Request.Headers["content-encoding"] != "" }),
		Each(func(c *Case, _ string, r Result) { seen = append(seen, c.Name) }))
	for _, n := range seen {
		if strings.HasPrefix(n, "http/gzip") {
			t.Errorf("%s sent despite Skip", n)
		}
	}
	if len(seen) != p.sent || p.sent < minCases-10 {
		t.Errorf("sent %d, Each saw %d", p.sent, len(seen))
	}
}

// TestCheck shows that every kind of wrong answer is found, and that only
// what the runner observes is compared.
func TestCheck(t *testing.T) {
	cases, err := Load(".")
	if err != nil {
		t.Fatal(err)
	}
	find := func(pred func(*Case) bool) *Case {
		for i := range cases {
			if pred(&cases[i]) {
				return &cases[i]
			}
		}
		t.Fatal("no such case")
		return nil
	}
	admitted := find(func(c *Case) bool { return c.Expect.Outcome == "admitted" })
	unchanged := find(func(c *Case) bool { return c.Expect.Action == "forward" && c.Expect.Unchanged })
	rejected := find(func(c *Case) bool { return c.Expect.Status == 413 })
	refused := find(func(c *Case) bool { return c.Expect.Outcome == "refused" })
	uninspected := find(func(c *Case) bool { return c.Expect.Outcome == "uninspected" })
	// A changed body whose exact bytes the case does not give.
	changed := *find(func(c *Case) bool { return c.Expect.Action == "forward" && !c.Expect.Unchanged })
	changed.Expect.ForwardedBody = nil
	all := (&replay{}).Observes()
	for _, tc := range []struct {
		name  string
		c     *Case
		obs   Observes
		spoil func(*Result, *Counters)
		want  string // a part of the one problem; "" for none
	}{
		{"admitted as expected", admitted, all, nil, ""},
		{"rejected as expected", rejected, all, nil, ""},
		{"not forwarded", admitted, all, func(r *Result, _ *Counters) { r.Forwarded, r.Status = false, 503 }, "not forwarded: status 503"},
		{"other bytes", admitted, all, func(r *Result, _ *Counters) { r.Body = append(bytes.Clone(r.Body), ' ') }, "forwarded body differs at byte"},
		{"changed, want unchanged", unchanged, all, func(r *Result, _ *Counters) { r.Body = []byte("{}") }, "forwarded body differs"},
		{"changed as expected", &changed, 0, func(r *Result, _ *Counters) { r.Body = []byte("{}") }, ""},
		{"unchanged, want changed", &changed, 0, func(r *Result, _ *Counters) { r.Body = changed.Request.Body }, "want it changed"},
		{"upstream status", admitted, all, func(r *Result, _ *Counters) { r.Status = 502 }, "client got status 502"},
		{"upstream status not observed", admitted, 0, func(r *Result, _ *Counters) { r.Status = 0 }, ""},
		{"counter", admitted, all, func(_ *Result, d *Counters) { d.Admitted++ }, "counter deltas differ: admitted +2, want +1 (got {"},
		{"outcome", admitted, all, func(r *Result, _ *Counters) { r.Outcome = "stripped" }, "outcome stripped"},
		{"outcome not observed", admitted, 0, func(r *Result, _ *Counters) { r.Outcome = "stripped" }, ""},
		{"hint", admitted, all, func(r *Result, _ *Counters) { r.CanonicalHint = "{}" }, "canonical hint differs"},
		{"forwarded, want reject", rejected, all, func(r *Result, _ *Counters) { r.Forwarded = true }, "want rejected with 413"},
		{"other status", rejected, all, func(r *Result, _ *Counters) { r.Status = 400 }, "status 400, want 413"},
		{"reply type", rejected, all, func(r *Result, _ *Counters) { r.ContentType = "text/plain" }, "content-type"},
		{"reply code", rejected, all, func(r *Result, _ *Counters) { r.Body = bytes.Replace(r.Body, []byte("413"), []byte("400"), 1) }, "not the error body"},
		{"reply not observed", rejected, 0, func(r *Result, _ *Counters) { r.Body = nil }, ""},
		{"refused as expected", refused, all, nil, ""},
		{"uninspected as expected", uninspected, all, nil, ""},
		{"uninspected, not counted", uninspected, all, func(_ *Result, d *Counters) { d.GRPCUninspected-- }, "grpc_uninspected +0, want +1"},
		{"refused, not counted", refused, all, func(_ *Result, d *Counters) { d.GRPCRefused-- }, "grpc_refused +0, want +1"},
		{"refused with a JSON reply", refused, all, func(r *Result, _ *Counters) { r.ContentType = "application/json" }, "want application/grpc"},
		{"refused with a body", refused, all, func(r *Result, _ *Counters) { r.Body = []byte("x") }, "want none"},
		{"other grpc-status", refused, all, func(r *Result, _ *Counters) { r.GRPCStatus = "3" }, `grpc-status "3", want 7`},
		{"grpc-status not observed", refused, all &^ ObservesGRPCStatus, func(r *Result, _ *Counters) { r.GRPCStatus = "" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &replay{spoil: tc.spoil, name: tc.c.Name}
			r, _ := p.Send(tc.c)
			delta := p.totals
			got := Check(tc.c, tc.obs, r, &delta)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}

func TestPrometheusCounters(t *testing.T) {
	page := `# HELP trtllm_kv_hints_ignored_total x
# TYPE trtllm_kv_hints_ignored_total counter
trtllm_kv_hints_ignored_total{reason="untrusted"} 3
trtllm_kv_hints_ignored_total{reason="unknown_version"} 0
trtllm_kv_hints_ignored_total{reason="oversized"} 1 1700000000000
trtllm_kv_hints_ignored_total{reason="malformed"} 2
kvgate_kv_hints_admitted_total{} 5
kvgate_bodies_rejected_total{status="400"} 1
kvgate_bodies_rejected_total{status="413"} 2e+00
kvgate_bodies_rejected_total{status="415"} 4
kvgate_bodies_rejected_total{status="415",x="y"} 100
kvgate_requests_uninspected_total{protocol="grpc"} 8
kvgate_requests_refused_total{reason="grpc"} 9
kvgate_requests_refused_total{reason="router_only"} 0
kvgate_kv_hints_detected_total{reason="untrusted"} 10
kvgate_kv_hints_detected_total{reason="unknown_version"} 0
kvgate_kv_hints_detected_total{reason="oversized"} 11
kvgate_kv_hints_detected_total{reason="malformed"} 12
kvgate_other 7
`
	got, err := PrometheusCounters(&Case{}, page)
	want := Counters{Untrusted: 3, Oversized: 1, Malformed: 2, Admitted: 5, RejectedBodies: 7, GRPCUninspected: 8, GRPCRefused: 9,
		DetectedUntrusted: 10, DetectedOversized: 11, DetectedMalformed: 12}
	if err != nil || got != want {
		t.Errorf("got %v %v, want %v", got, err, want)
	}
	// The sidecar's page writes a series without labels bare.
	if got, err := PrometheusCounters(&Case{}, strings.Replace(page, "total{} 5", "total 5", 1)); err != nil || got != want {
		t.Errorf("bare name: got %v %v", got, err)
	}
	if _, err := PrometheusCounters(&Case{}, strings.Replace(page, `"malformed"`, `"other"`, 1)); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("missing series: %v", err)
	}
}

func TestByConfig(t *testing.T) {
	cases := []Case{{Name: "a"}, {Name: "b", Trusted: true}, {Name: "c"}, {Name: "d", MaxDepth: 4}, {Name: "e", Trusted: true}}
	var names []string
	for _, c := range byConfig(cases) {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); got != "a c b e d" {
		t.Errorf("order %s", got)
	}
}

// TestOnlyTestsImportTheKit: the kit imports testing, so no package that
// ships may depend on it (go list without -test lists only non-test
// imports).
func TestOnlyTestsImportTheKit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const self = "github.com/kvgate/kvgate/tests/vectors"
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		if pkg != self && strings.Contains(" "+deps+" ", " "+self+" ") {
			t.Errorf("%s depends on the conformance kit, which imports testing", pkg)
		}
	}
}

func TestRunVariants(t *testing.T) {
	p := &replay{}
	var mode string
	seen := map[string]int{}
	Run(t, p, Variants(func(v string) { mode = v }, "length", "chunked"),
		Each(func(c *Case, v string, _ Result) {
			if v != mode {
				t.Errorf("%s: Each got variant %q, the runner was set to %q", c.Name, v, mode)
			}
			seen[v]++
		}))
	if seen["length"] != p.sent/2 || seen["chunked"] != p.sent/2 || p.sent < 2*minCases {
		t.Errorf("sent %d, per variant %v", p.sent, seen)
	}
}
