package consumer

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

const (
	goodEndpoint = "tcp://127.0.0.1:23280"
	evilEndpoint = "tcp://203.0.113.9:23280"
)

// act is one action of a test envelope, as raw JSON.
type act struct{ id, typ, ver, payload string }

func fetchAct(id, endpoint string) act {
	return act{id, "kv.fetch", "1.0", `{"source_control_endpoint":"` + endpoint + `","block_hashes":[11,22]}`}
}

// envelope builds the raw envelope JSON with extra metadata.
func envelope(acts ...act) string {
	var b strings.Builder
	b.WriteString(`{"protocol_version":"0.1","message_id":"msg-123","trace":{"k":[1,2]},"actions":[`)
	for i, a := range acts {
		if i > 0 {
			b.WriteByte(',')
		}
		p := a.payload
		if p == "" {
			p = `{}`
		}
		b.WriteString(`{"action_id":"` + a.id + `","action_type":"` + a.typ + `","action_version":"` + a.ver + `","payload":` + p + `}`)
	}
	b.WriteString(`],"tail":"x"}`)
	return b.String()
}

func admit(t testing.TB, raw string) *kvhints.Snapshot {
	t.Helper()
	s, r := kvhints.Admit([]byte(raw), kvhints.Limits{})
	if s == nil {
		t.Fatalf("envelope not admitted (%v): %s", r, raw)
	}
	return s
}

func hintOf(t testing.TB, acts ...act) Hint { return Hint{Snapshot: admit(t, envelope(acts...))} }

var (
	famA = Family("famA")
	famB = Family("famB")
	fk   = FetchKey()
)

// recordingDialer records every dial; it never touches the network.
type recordingDialer struct {
	mu    sync.Mutex
	dials []string
	fail  error
}

func (d *recordingDialer) DialContext(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, network+" "+address)
	d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	c1, c2 := net.Pipe()
	c2.Close()
	return c1, nil
}

func (d *recordingDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials)
}

// recordingProvider records every call and forwards to inner.
type recordingProvider struct {
	inner     Provider
	validates []FetchHint
	fetches   []FetchHint
}

func (p *recordingProvider) Validate(h FetchHint) error {
	p.validates = append(p.validates, h)
	return p.inner.Validate(h)
}

func (p *recordingProvider) Fetch(ctx context.Context, h FetchHint) error {
	p.fetches = append(p.fetches, h)
	return p.inner.Fetch(ctx, h)
}

func (p *recordingProvider) calls() int { return len(p.validates) + len(p.fetches) }

// recordingRegistry records lookups; allow can be changed between calls.
type recordingRegistry struct {
	allow   map[string]bool
	lookups []string
}

func (r *recordingRegistry) Allows(e string) bool {
	r.lookups = append(r.lookups, e)
	return r.allow[e]
}

func newRegistry(es ...string) *recordingRegistry {
	r := &recordingRegistry{allow: map[string]bool{}}
	for _, e := range es {
		r.allow[e] = true
	}
	return r
}

// rig is an orchestrator wired to recording parts.
type rig struct {
	o         *Orchestrator
	dialer    *recordingDialer
	provider  *recordingProvider
	fetchProv *FetchProvider
	registry  *recordingRegistry
	collected int
}

// newRig wires bindings, a runtime registry listing runtimeAllow and a
// FetchProvider whose own allowlist lists providerAllow.
func newRig(t testing.TB, bindings []Binding, runtimeAllow, providerAllow []string) *rig {
	t.Helper()
	r := &rig{dialer: &recordingDialer{}, registry: newRegistry(runtimeAllow...)}
	r.fetchProv = NewFetchProvider(NewEndpointSet(providerAllow...), r.dialer, nil)
	r.provider = &recordingProvider{inner: r.fetchProv}
	bs, err := NewBindings(bindings...)
	if err != nil {
		t.Fatal(err)
	}
	r.o = NewOrchestrator(bs, r.registry, r.provider)
	r.o.collect = func(s *kvhints.Snapshot, c Capabilities) Collection {
		r.collected++
		return Collect(s, c)
	}
	return r
}

// assertNoWork checks that nothing hint-directed started.
func (r *rig) assertNoWork(t testing.TB) {
	t.Helper()
	if n := r.dialer.count(); n != 0 {
		t.Errorf("dialer: %d connections started, want none: %v", n, r.dialer.dials)
	}
	if len(r.provider.fetches) != 0 {
		t.Errorf("provider: %d fetches submitted, want none", len(r.provider.fetches))
	}
}

func (r *rig) assertNoLookup(t testing.TB) {
	t.Helper()
	r.assertNoWork(t)
	if len(r.provider.validates) != 0 {
		t.Errorf("provider: %d validations, want none", len(r.provider.validates))
	}
	if len(r.registry.lookups) != 0 {
		t.Errorf("registry: %d lookups, want none", len(r.registry.lookups))
	}
}

var pd = Handoff{Required: true, ContextRequestID: 4242, Source: "ctx-worker-7:8000", OpaqueState: "b3BhcXVl"}

func pdReq() Request { return Request{GenerationOnly: true, Handoff: pd} }

func checkPD(t testing.TB, d Decision) {
	t.Helper()
	if d.Handoff != pd {
		t.Errorf("P/D handoff changed: got %+v, want %+v", d.Handoff, pd)
	}
}

func authorized(name string, f Family) Binding {
	return Binding{Name: name, Family: f, Authorized: true, Capabilities: []ActionKey{fk}}
}

func capsAB() Capabilities {
	return MustCapabilities(map[Family][]ActionKey{famA: {fk}, famB: {fk}})
}

var errDial = errors.New("connection refused (test)")
