package vectors

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// DefaultMaxBodyBytes is the body limit the vectors assume when a case sets
// none (MaxBodyBytes == 0): the hosts' default, 4 MiB. A runner whose host
// has no default of its own (the rulebook, the CLI) applies this one.
const DefaultMaxBodyBytes = 4 << 20

// minCases guards against loading the wrong directory: the files hold more
// than 500 cases and only ever gain some.
const minCases = 500

// Runner sends conformance cases through one host and reports what the host
// did. A Runner only drives its host; Run does every comparison with the
// expectations.
type Runner interface {
	// Observes says which parts of a Result this runner fills in. Run
	// checks those, names the others in the test log, and checks the rest
	// (forwarded or not, the status of a rejection, the forwarded bytes)
	// for every runner.
	Observes() Observes
	// Send sends the request of c through the host, configured with
	// c.FilterConfig(), and returns what the host did. The whole case is
	// given so that a runner takes from it whatever inputs it supports
	// (method, path, headers, body, and any inputs cases gain later).
	//
	// An error means the runner could not carry the request out or saw its
	// host break the protocol (a socket failed, the upstream got the
	// request twice, a chunk went upstream before the body was filtered);
	// Run fails the case with it.
	Send(c *Case) (Result, error)
}

// A Meter is a Runner that can read its host's counters. Run reads them
// before and after each Send and compares the difference with the case's
// Expect.Counters. A Runner that is not a Meter does not have its counters
// checked, and Run says so in the log.
type Meter interface {
	// Counters returns the current totals of the counters that a request
	// of c moves (in the host instance serving c's configuration).
	Counters(c *Case) (Counters, error)
}

// A Configurer is a Runner that starts a host (or a plugin) per plugin
// configuration. Run sends the cases grouped by FilterConfig and calls
// Configure on the test's own goroutine before the first case of each
// group, so Configure may call t.Fatal and register t.Cleanup; the host it
// starts serves every Send until the next Configure.
type Configurer interface {
	Configure(t testing.TB, filterConfig string)
}

// Observes is the set of Result fields, beyond Forwarded, Status of a
// rejection and the forwarded Body, that a runner fills in.
type Observes uint

const (
	// ObservesOutcome: Outcome and Reason are the rulebook's names for what
	// it did ("admitted", "oversized", ...).
	ObservesOutcome Observes = 1 << iota
	// ObservesHint: CanonicalHint is the admitted envelope's canonical form.
	ObservesHint
	// ObservesReply: for a rejected request, Body and ContentType are the
	// local reply the client received, which must be the OpenAI-style JSON
	// error (docs/spec.md, Failure policy), or for a request labelled gRPC
	// an application/grpc answer without a body.
	ObservesReply
	// ObservesForwardStatus: for a forwarded request, Status is the status
	// the client received, which must be 200 (the test upstreams answer
	// 200). Runners without an upstream leave it out.
	ObservesForwardStatus
	// ObservesGRPCStatus: for a rejected request, GRPCStatus is the
	// reply's grpc-status header.
	ObservesGRPCStatus
	// ObservesHeaders: for a forwarded request, Headers are the request
	// headers the upstream received.
	ObservesHeaders
)

var observesNames = []struct {
	o    Observes
	name string
}{
	{ObservesOutcome, "outcome and reason"},
	{ObservesHint, "canonical hint"},
	{ObservesReply, "error reply body"},
	{ObservesForwardStatus, "status of forwarded requests"},
	{ObservesGRPCStatus, "grpc-status of gRPC replies"},
	{ObservesHeaders, "forwarded headers"},
}

// Result is what a host did with one request. Slices must stay valid after
// the next Send: a runner whose host reuses a buffer copies it.
type Result struct {
	// Forwarded is true when the request went on to the upstream (or, for
	// a runner without one, when the filter let it through).
	Forwarded bool
	// Status is the local reply's status when not forwarded; 0 means no
	// reply was sent. For a forwarded request see ObservesForwardStatus.
	Status int
	// Body is the forwarded body (the bytes the upstream received) when
	// Forwarded, otherwise the local reply's body (see ObservesReply).
	Body []byte
	// ContentType is the local reply's content-type (see ObservesReply).
	ContentType string
	// GRPCStatus is the local reply's grpc-status header, "" when it has
	// none (see ObservesGRPCStatus).
	GRPCStatus string
	// Outcome and Reason are the rulebook's names (see ObservesOutcome);
	// Reason is "" when there is none.
	Outcome, Reason string
	// CanonicalHint is the admitted envelope in canonical form, "" when
	// none was admitted (see ObservesHint).
	CanonicalHint string
	// Headers are the forwarded request's headers, names in lower case
	// (see ObservesHeaders).
	Headers map[string][]string
}

// An Option changes how Run selects and reports cases.
type Option func(*config)

type config struct {
	dir       string
	bothModes bool
	skips     []*skip
	each      []func(*Case, string, Result)
	onSkip    []func(*Case, string)
	variants  []string
	set       func(string)
}

type skip struct {
	reason string
	match  func(*Case) bool
	n      int
}

// BothModes runs every case twice: as written (mode enforce), and as
// DetectCase makes it (mode detect, named "detect/..."), so that a host
// shows it decides and counts the same in both and forwards every body as
// received in detect.
func BothModes() Option { return func(c *config) { c.bothModes = true } }

// Dir loads the cases from dir instead of the repository's tests/vectors.
func Dir(dir string) Option { return func(c *config) { c.dir = dir } }

// SkipNotFromTLS are the Skips of a host that takes the sender from a real
// TLS connection, as Envoy and the sidecar do: such a host never leaves
// connection.mtls absent (it answers 0 or 1), and gives a certificate's
// SANs only from a verified chain, which makes connection.mtls 1.
func SkipNotFromTLS() []Option {
	return []Option{
		Skip("a host that takes the sender from TLS always answers connection.mtls (0 or 1, as Envoy does)",
			func(c *Case) bool { return c.Sender != nil && c.Sender.MTLS == nil }),
		Skip("a host that takes the sender from TLS gives SANs only from a verified certificate (connection.mtls 1)",
			func(c *Case) bool {
				s := c.Sender
				return s != nil && s.MTLS != nil && !*s.MTLS && (s.URISAN != nil || s.DNSSAN != nil)
			}),
	}
}

// Skip leaves out the cases match selects because the host cannot run them,
// for the given reason: each shows up as a skipped subtest with the reason,
// and the count per reason is logged. A Skip that selects no case fails the
// run, so a skip cannot outlive its reason unnoticed. Prefer a runner that
// can run every case.
func Skip(reason string, match func(*Case) bool) Option {
	return func(c *config) { c.skips = append(c.skips, &skip{reason: reason, match: match}) }
}

// Variants sends every case once per variant, for a runner that can send a
// request in several ways (how the body is framed, how it arrives in
// chunks): Run calls set(v) before sending a case as variant v, in a
// subtest named "case/v". The host stays configured across the variants of
// a case, and every variant is checked against the same expectations.
func Variants(set func(variant string), variants ...string) Option {
	return func(c *config) { c.set, c.variants = set, variants }
}

// Each calls f with every case Run sent, the variant ("" without Variants)
// and the Result, after the checks (also when they failed), for a test that
// compares hosts with each other.
func Each(f func(c *Case, variant string, r Result)) Option {
	return func(c *config) { c.each = append(c.each, f) }
}

// Oracle writes one line per case Run sent to w, in the format that
// tests/oracle/oracle.py --forwarded reads (see README.md): the status and
// the forwarded bytes, or the local reply of a rejected request. A case
// left out by Skip gets a line that names the reason, so that the oracle's
// --require-all counts it as skipped, not as missing. Use it with a runner
// that has an upstream (ObservesForwardStatus and ObservesReply).
func Oracle(w io.Writer) Option {
	enc := json.NewEncoder(w)
	onSkip := func(c *Case, reason string) {
		if c.Detect {
			return
		}
		_ = enc.Encode(struct {
			Name    string `json:"name"`
			Skipped string `json:"skipped"`
		}{c.Name, reason})
	}
	each := Each(func(c *Case, _ string, r Result) {
		if c.Detect {
			return // forwarded as received: Check compares the bytes
		}
		mode := "untrusted"
		if c.Trusted {
			mode = "trusted"
		}
		// Encoding four plain fields cannot fail; a write error shows up
		// as a missing line in the oracle's --require-all count.
		_ = enc.Encode(struct {
			Name       string `json:"name"`
			Mode       string `json:"mode"`
			Status     int    `json:"status"`
			BodyBase64 string `json:"body_base64"`
		}{c.Name, mode, r.Status, base64.StdEncoding.EncodeToString(r.Body)})
	})
	return func(cfg *config) {
		each(cfg)
		cfg.onSkip = append(cfg.onSkip, onSkip)
	}
}

// Run loads the conformance cases and sends each through r as a subtest
// named after the case, checking everything the case expects that r
// observes. Cases are grouped by FilterConfig (groups in order of first
// appearance, file order inside a group) and sent one at a time, never
// concurrently, once per variant when Variants is given.
func Run(t *testing.T, r Runner, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.dir == "" {
		cfg.dir = defaultDir()
	}
	cases, err := Load(cfg.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < minCases {
		t.Fatalf("%d cases in %s, want at least %d: wrong directory?", len(cases), cfg.dir, minCases)
	}
	if cfg.bothModes {
		// The Python oracle (Oracle) judges the enforce cases; a detect
		// case's forwarded bytes are its request's, which Check compares.
		for _, c := range cases[:len(cases):len(cases)] {
			cases = append(cases, DetectCase(c))
		}
	}

	meter, _ := r.(Meter)
	configurer, _ := r.(Configurer)
	if missing := notObserved(r.Observes(), meter != nil); missing != "" {
		t.Logf("not observed by this runner, so not checked: %s", missing)
	}
	variants := cfg.variants
	if len(variants) == 0 {
		variants = []string{""}
	}
	order := byConfig(cases)
	current, configs, sent := "", 0, 0
	for _, c := range order {
		if s := cfg.skipped(c); s != nil {
			s.n++
			t.Run(c.Name, func(t *testing.T) { t.Skip(s.reason) })
			for _, f := range cfg.onSkip {
				f(c, s.reason)
			}
			continue
		}
		if k := c.FilterConfig(); configs == 0 || k != current {
			current = k
			configs++
			if configurer != nil {
				configurer.Configure(t, k)
			}
		}
		for _, v := range variants {
			name := c.Name
			if v != "" {
				cfg.set(v)
				name += "/" + v
			}
			sent++
			t.Run(name, func(t *testing.T) { send(t, r, c, v, &cfg) })
		}
	}
	var skipped []string
	for _, s := range cfg.skips {
		if s.n == 0 {
			t.Errorf("Skip(%q) selected no case", s.reason)
		}
		skipped = append(skipped, fmt.Sprintf("%d: %s", s.n, s.reason))
	}
	msg := fmt.Sprintf("%d cases: %d requests sent in %d configurations", len(cases), sent, configs)
	if len(cfg.variants) > 0 {
		msg += fmt.Sprintf(" (variants %s)", strings.Join(cfg.variants, ", "))
	}
	if len(skipped) > 0 {
		msg += ", skipped " + strings.Join(skipped, "; ")
	}
	t.Log(msg)
}

// send sends one case (as variant v) and checks what came back.
func send(t *testing.T, r Runner, c *Case, v string, cfg *config) {
	meter, _ := r.(Meter)
	var before Counters
	if meter != nil {
		var err error
		if before, err = meter.Counters(c); err != nil {
			t.Fatalf("counters before: %v", err)
		}
	}
	res, err := r.Send(c)
	if err != nil {
		t.Fatal(err)
	}
	var delta *Counters
	if meter != nil {
		after, err := meter.Counters(c)
		if err != nil {
			t.Fatalf("counters after: %v", err)
		}
		d := after.Sub(before)
		delta = &d
	}
	for _, f := range cfg.each {
		f(c, v, res)
	}
	for _, p := range Check(c, r.Observes(), res, delta) {
		t.Error(p)
	}
}

func (cfg *config) skipped(c *Case) *skip {
	for _, s := range cfg.skips {
		if s.match(c) {
			return s
		}
	}
	return nil
}

// byConfig orders cases by FilterConfig, groups in order of first
// appearance and file order inside each group.
func byConfig(cases []Case) []*Case {
	var keys []string
	groups := map[string][]*Case{}
	for i := range cases {
		k := cases[i].FilterConfig()
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], &cases[i])
	}
	out := make([]*Case, 0, len(cases))
	for _, k := range keys {
		out = append(out, groups[k]...)
	}
	return out
}

func notObserved(obs Observes, metered bool) string {
	var names []string
	if !metered {
		names = append(names, "counters")
	}
	for _, o := range observesNames {
		if obs&o.o == 0 {
			names = append(names, o.name)
		}
	}
	return strings.Join(names, ", ")
}

// Check compares what a host did with what c expects and returns one line
// per difference (none when the host conforms). Only what obs says the
// runner observed is compared among the optional fields; delta is the
// counters' change, nil when the runner cannot read them. Run calls it for
// every case; it is exported for tests of the kit and for hosts that must
// drive cases some other way.
func Check(c *Case, obs Observes, r Result, delta *Counters) []string {
	e := &c.Expect
	var p []string
	switch e.Action {
	case "forward":
		if !r.Forwarded {
			p = append(p, fmt.Sprintf("not forwarded: status %d, reply %s", r.Status, trunc(r.Body)))
			break
		}
		if obs&ObservesForwardStatus != 0 && r.Status != 200 {
			p = append(p, fmt.Sprintf("forwarded, but the client got status %d, want 200", r.Status))
		}
		if obs&ObservesHeaders != 0 {
			for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
				got, want := r.Headers[k], e.Headers[k]
				switch {
				case want == nil && len(got) > 0:
					p = append(p, fmt.Sprintf("header %s forwarded (%d values), want it removed", k, len(got)))
				case want != nil && (len(got) != 1 || got[0] != *want):
					p = append(p, fmt.Sprintf("header %s forwarded as %q, want %q", k, got, *want))
				}
			}
		}
		if e.ForwardedBody != nil && !bytes.Equal(r.Body, e.ForwardedBody) {
			p = append(p, "forwarded body differs"+diff(r.Body, e.ForwardedBody))
		} else if !e.Unchanged && bytes.Equal(r.Body, c.Request.Body) {
			p = append(p, "forwarded body is the request body, want it changed")
		}
	case "reject":
		if r.Forwarded {
			p = append(p, fmt.Sprintf("forwarded %s, want rejected with %d", trunc(r.Body), e.Status))
			break
		}
		if r.Status != e.Status {
			p = append(p, fmt.Sprintf("status %d, want %d (reply %s)", r.Status, e.Status, trunc(r.Body)))
		}
		if obs&ObservesReply != 0 {
			msg := ""
			if e.GRPCStatus != 0 {
				msg = checkGRPCReply(r)
			} else {
				msg = checkErrorReply(r, e.Status)
			}
			if msg != "" {
				p = append(p, msg)
			}
		}
		if obs&ObservesGRPCStatus != 0 && e.GRPCStatus != 0 && r.GRPCStatus != strconv.Itoa(e.GRPCStatus) {
			p = append(p, fmt.Sprintf("grpc-status %q, want %d", r.GRPCStatus, e.GRPCStatus))
		}
	}
	if obs&ObservesOutcome != 0 && (r.Outcome != e.Outcome || r.Reason != e.Reason) {
		p = append(p, fmt.Sprintf("outcome %s/%q, want %s/%q", r.Outcome, r.Reason, e.Outcome, e.Reason))
	}
	if obs&ObservesHint != 0 && !c.Detect && r.CanonicalHint != e.CanonicalHint {
		p = append(p, "canonical hint differs"+diff([]byte(r.CanonicalHint), []byte(e.CanonicalHint)))
	}
	if delta != nil && *delta != e.Counters {
		p = append(p, "counter deltas differ: "+delta.diff(e.Counters))
	}
	return p
}

// checkErrorReply checks a local reply against the OpenAI-style error body:
// {"error":{"message":"...","type":"invalid_request_error","code":status}}.
func checkErrorReply(r Result, status int) string {
	if ct, _, _ := strings.Cut(r.ContentType, ";"); strings.TrimSpace(ct) != "application/json" {
		return fmt.Sprintf("reply content-type %q, want application/json", r.ContentType)
	}
	var eb struct {
		Error *struct {
			Message *string `json:"message"`
			Type    string  `json:"type"`
			Code    int     `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &eb); err != nil || eb.Error == nil || eb.Error.Message == nil ||
		eb.Error.Type != "invalid_request_error" || eb.Error.Code != status {
		return fmt.Sprintf("reply %s is not the error body with code %d", trunc(r.Body), status)
	}
	return ""
}

// checkGRPCReply checks the local reply to a request labelled gRPC: a gRPC
// "trailers-only" answer, content-type application/grpc and no body.
func checkGRPCReply(r Result) string {
	if ct, _, _ := strings.Cut(r.ContentType, ";"); strings.TrimSpace(ct) != "application/grpc" {
		return fmt.Sprintf("reply content-type %q, want application/grpc", r.ContentType)
	}
	if len(r.Body) != 0 {
		return fmt.Sprintf("gRPC reply with a body %s, want none", trunc(r.Body))
	}
	return ""
}

// truncLen is how much of a body a message quotes.
const truncLen = 200

// trunc quotes b, cut to truncLen bytes.
func trunc(b []byte) string {
	if len(b) > truncLen {
		return strconv.Quote(string(b[:truncLen])) + "... (" + strconv.Itoa(len(b)) + " bytes)"
	}
	return strconv.Quote(string(b))
}

// diff describes how got differs from want: lengths, the first differing
// offset and both sides from a little before it.
func diff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-20)
	return fmt.Sprintf(" at byte %d (got %d bytes, want %d):\n got  %s\n want %s",
		i, len(got), len(want), trunc(got[from:]), trunc(want[from:]))
}

// defaultDir finds tests/vectors from a test's working directory (its
// package directory): the nearest parent holding go.mod. Paths stay
// relative, as they must under wasip1 test runners.
func defaultDir() string {
	for up := ""; len(up) <= 3*8; up += "../" {
		if _, err := os.Stat(up + "go.mod"); err == nil {
			return up + "tests/vectors"
		}
	}
	return "tests/vectors"
}
