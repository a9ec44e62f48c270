package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/tests/vectors"
)

// fakeRunner runs conformance cases through the filter with the fake host,
// in the way a body arrives that m says. A plugin is configured per plugin
// configuration and serves all its cases, so buffers are reused across
// requests.
type fakeRunner struct {
	m     mode
	edits bool // the host takes the rewrite as edits (an Editor)
	p     *Plugin
	h     *fakeHost
	id    uint32
}

func (*fakeRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesGRPCStatus | vectors.ObservesHeaders
}

func (r *fakeRunner) Configure(t testing.TB, conf string) {
	r.h = newFakeHost(conf)
	r.h.edits = r.edits
	var ok bool
	if r.p, ok = newPlugin(r.h); !ok {
		t.Fatalf("configuration %s rejected: %q", conf, r.h.logs)
	}
}

func (r *fakeRunner) Send(c *vectors.Case) (vectors.Result, error) {
	r.h.props = nil
	if c.Sender != nil {
		// The sender's properties, under their proxy-wasm paths.
		r.h.props = map[string][]byte{}
		for _, name := range vectors.SenderProperties {
			if v, ok := c.Sender.Property(name); ok {
				r.h.props[strings.ReplaceAll(name, ".", "\x00")] = v
			}
		}
	}
	r.id++
	uninspected := metric(filterspec.MetricUninspected, "protocol", "grpc")
	before := r.h.counters[uninspected]
	out := send(r.p, r.h, r.id, c.Request.Method, c.Request.Path, c.Request.Headers, c.Request.Body, r.m)
	// Only a body that passes uninspected (counted so) may stream.
	if out.streamed && r.h.counters[uninspected] == before {
		return vectors.Result{}, errors.New("a body chunk went upstream before the whole body was filtered")
	}
	if out.local != nil {
		res := vectors.Result{Status: out.local.status, Body: out.local.body}
		for _, h := range out.local.headers {
			switch h[0] {
			case "content-type":
				res.ContentType = h[1]
			case "grpc-status":
				res.GRPCStatus = h[1]
			}
		}
		return res, nil
	}
	hdrs := map[string][]string{}
	for _, h := range r.h.headers {
		k := strings.ToLower(h[0])
		hdrs[k] = append(hdrs[k], h[1])
	}
	return vectors.Result{Forwarded: out.forwarded, Body: out.body, Headers: hdrs}, nil
}

func (r *fakeRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	return vectors.ReadCounters(c, func(s vectors.Series) (float64, error) {
		return float64(r.h.counters[s.ProxyWasmName()]), nil
	})
}

// TestVectors runs every conformance case through the filter with the fake
// host, in each of the three ways a body can arrive.
func TestVectors(t *testing.T) {
	r := &fakeRunner{id: 10}
	modes := map[string]mode{}
	for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
		modes[m.String()] = m
	}
	vectors.Run(t, r, vectors.BothModes(), vectors.Variants(func(v string) { r.m = modes[v] },
		modeLength.String(), modeChunked.String(), modeTrailers.String()))
}

// TestVectorsEditingHost runs every case through a host that takes the
// rewrite as edits of its body, as the native Envoy module does.
func TestVectorsEditingHost(t *testing.T) {
	vectors.Run(t, &fakeRunner{id: 10, edits: true, m: modeChunked}, vectors.BothModes())
}

// TestVectorSeries: the kit reads its counters from exactly the series the
// filter defines.
func TestVectorSeries(t *testing.T) {
	var kit []string
	for _, s := range vectors.CounterSeries() {
		kit = append(kit, s.ProxyWasmName())
	}
	slices.Sort(kit)
	names := slices.Sorted(slices.Values(filterspec.MetricNames()))
	if !slices.Equal(kit, names) {
		t.Errorf("kit series %q, filter's %q", kit, names)
	}
	// A case with router-only fields lists them as the filter makes them
	// from its configuration: the generator's presets are the filter's.
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i := range cases {
		c := &cases[i]
		if c.RouterOnly == nil {
			continue
		}
		seen++
		cfg, err := filterspec.ParseConfig([]byte(c.FilterConfig()))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var kit []string
		for _, s := range vectors.CaseSeries(c) {
			kit = append(kit, s.ProxyWasmName())
		}
		if names := cfg.MetricNames(); !slices.Equal(kit, names) {
			t.Fatalf("%s: kit series %q, filter's %q", c.Name, kit, names)
		}
	}
	if seen == 0 {
		t.Fatal("no case has router-only fields")
	}
}
