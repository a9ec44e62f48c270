package filter

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/proxywasm"
)

const sendersConfig = `{"trusted_senders":[
 {"principal":"spiffe://cluster.local/ns/llm/sa/router"},
 {"principal":"spiffe://cluster.local/ns/batch/sa/*","source_cidr":"10.8.0.0/16"},
 {"dns_name":"router.llm.svc"},
 {"source_cidr":"2001:db8:7::/48"}]}`

// A request is trusted when its sender matches a rule; every other request
// is handled exactly as in untrusted mode.
func TestTrustedSenders(t *testing.T) {
	body := []byte(`{"model":"m","kv_hints":` + pretty(refHint) + `,"prompt":"hi"}`)
	admitted := []byte(`{"model":"m","kv_hints":` + refHint + `,"prompt":"hi"}`)
	stripped := []byte(`{"model":"m","prompt":"hi"}`)
	for _, c := range []struct {
		name          string
		mtls          bool
		uri, dns, src string
		trusted       bool
	}{
		{"router", true, "spiffe://cluster.local/ns/llm/sa/router", "", "10.1.1.1:4000", true},
		{"router without a verified certificate", false, "spiffe://cluster.local/ns/llm/sa/router", "", "10.1.1.1:4000", false},
		{"other workload", true, "spiffe://cluster.local/ns/llm/sa/client", "", "10.1.1.1:4000", false},
		{"batch job inside its CIDR", true, "spiffe://cluster.local/ns/batch/sa/job7", "", "10.8.9.9:4000", true},
		{"batch job outside its CIDR", true, "spiffe://cluster.local/ns/batch/sa/job7", "", "10.9.9.9:4000", false},
		{"batch job, no source address", true, "spiffe://cluster.local/ns/batch/sa/job7", "", "", false},
		{"dns name", true, "", "router.llm.svc", "192.0.2.1:1", true},
		{"dns name without certificate", false, "", "router.llm.svc", "192.0.2.1:1", false},
		{"ipv6 source", false, "", "", "[2001:db8:7::1]:443", true},
		{"ipv6 source outside", false, "", "", "[2001:db8:8::1]:443", false},
		{"nothing", false, "", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(sendersConfig)
			p, ok := newPlugin(h)
			if !ok {
				t.Fatal(h.logs)
			}
			h.setSender(c.mtls, c.uri, c.dns, c.src)
			for _, m := range []mode{modeLength, modeChunked, modeTrailers} {
				before := snapshot(h)
				out := send(p, h, 2, "POST", "/v1/chat/completions", jsonCT, body, m)
				want, metric := stripped, metricUntrusted
				if c.trusted {
					want, metric = admitted, filterspec.MetricAdmitted
				}
				if !out.forwarded || !bytes.Equal(out.body, want) {
					t.Fatalf("%v: forwarded %v %q, want %q", m, out.forwarded, out.body, want)
				}
				if d := diff(before, snapshot(h)); len(d) != 1 || d[metric] != 1 {
					t.Fatalf("%v: counter deltas %v, want %s +1", m, d, metric)
				}
			}
			for _, l := range h.logs {
				for _, v := range []string{c.uri, c.dns, c.src} {
					if v != "" && strings.Contains(l, v) {
						t.Errorf("a property value was logged: %q", l)
					}
				}
			}
		})
	}
}

var metricUntrusted = metric(filterspec.MetricIgnored, "reason", "untrusted")

func snapshot(h *fakeHost) map[string]int64 {
	m := map[string]int64{}
	for k, v := range h.counters {
		m[k] = v
	}
	return m
}

func diff(a, b map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range b {
		if v != a[k] {
			d[k] = v - a[k]
		}
	}
	return d
}

// pretty spreads a compact JSON object over lines, so that admission has
// something to canonicalize.
func pretty(s string) string { return strings.ReplaceAll(s, ",", ",\n ") }

// The filter reads only the properties its rules use, each at most once
// per request, the certificate's SANs only when the host says it verified
// one, and nothing at all without rules or for requests it does not
// inspect.
func TestSenderPropertyReads(t *testing.T) {
	body := []byte(`{"kv_hints":` + refHint + `}`)
	all := []string{filterspec.PropertyMTLS, filterspec.PropertyURISAN, filterspec.PropertyDNSSAN, filterspec.PropertySourceAddress}
	for _, c := range []struct {
		name, config string
		mtls         bool
		want         []string
	}{
		{"no rules", `{}`, true, nil},
		{"trust everyone", `{"trust_kv_hints":true}`, true, nil},
		{"an empty list", `{"trusted_senders":[]}`, true, nil},
		{"cidr only", `{"trusted_senders":[{"source_cidr":"10.0.0.0/8"}]}`, true, []string{filterspec.PropertySourceAddress}},
		{"principal, certificate", `{"trusted_senders":[{"principal":"spiffe://a/b"}]}`, true, []string{filterspec.PropertyMTLS, filterspec.PropertyURISAN}},
		{"principal, no certificate", `{"trusted_senders":[{"principal":"spiffe://a/b"}]}`, false, []string{filterspec.PropertyMTLS}},
		{"dns, certificate", `{"trusted_senders":[{"dns_name":"a.b"}]}`, true, []string{filterspec.PropertyMTLS, filterspec.PropertyDNSSAN}},
		{"every member, certificate", `{"trusted_senders":[{"dns_name":"a.b"},{"principal":"x/*","source_cidr":"::/0"}]}`, true, all},
		{"every member, no certificate", `{"trusted_senders":[{"dns_name":"a.b"},{"principal":"x/*","source_cidr":"::/0"}]}`, false,
			[]string{filterspec.PropertyMTLS, filterspec.PropertySourceAddress}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newFakeHost(c.config)
			p, ok := newPlugin(h)
			if !ok {
				t.Fatal(h.logs)
			}
			h.setSender(c.mtls, "spiffe://a/b", "a.b", "10.1.2.3:4")
			send(p, h, 2, "POST", "/v1/chat/completions", jsonCT, body, modeChunked)
			for _, path := range all {
				want := 0
				for _, w := range c.want {
					if w == path {
						want = 1
					}
				}
				if h.propReads[path] != want {
					t.Errorf("%q read %d times, want %d", path, h.propReads[path], want)
				}
			}
		})
	}
	// Requests that are not inspected read nothing.
	h := newFakeHost(`{"trusted_senders":[{"source_cidr":"10.0.0.0/8"}],"exclude_paths":["/health"]}`)
	p, _ := newPlugin(h)
	h.setSender(false, "", "", "10.1.2.3:4")
	send(p, h, 2, "POST", "/health", jsonCT, body, modeLength)
	send(p, h, 3, "POST", "/v1/chat/completions", map[string]string{"content-encoding": "gzip"}, body, modeLength)
	if len(h.propReads) != 0 {
		t.Errorf("reads for requests that are not inspected: %v", h.propReads)
	}
}

// A host that cannot answer a property read fails the request closed.
func TestSenderPropertyFailure(t *testing.T) {
	h := newFakeHost(sendersConfig)
	p, _ := newPlugin(h)
	h.setSender(true, "spiffe://cluster.local/ns/llm/sa/router", "", "10.1.1.1:1")
	h.fail["GetProperty"] = true
	out := send(p, h, 2, "POST", "/v1/chat/completions", jsonCT, []byte(`{"kv_hints":`+refHint+`}`), modeLength)
	if out.forwarded || out.local == nil || out.local.status != 503 {
		t.Fatalf("%+v", out)
	}
}

// Deciding the sender allocates nothing per request.
func TestSenderSteadyStateAllocations(t *testing.T) {
	h := newFakeHost(sendersConfig)
	p, _ := newPlugin(h)
	body := []byte(`{"model":"m","kv_hints":` + refHint + `,"prompt":"` + strings.Repeat("x", 1000) + `"}`)
	hdrs := proxywasm.EncodeHeaderMap([][2]string{{":path", "/v1/chat/completions"}, {"content-length", "1234"}})
	host := &propHost{allocFreeHost: allocFreeHost{fakeHost: h, hdrs: hdrs, body: body},
		props: map[string][]byte{filterspec.PropertyMTLS: {1}, filterspec.PropertyURISAN: []byte("spiffe://cluster.local/ns/batch/sa/job"),
			filterspec.PropertyDNSSAN: []byte("job.batch.svc"), filterspec.PropertySourceAddress: []byte("[2001:db8:7::9]:5000")}}
	p.host = host
	if n := requestAllocs(p, len(body)); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
	if host.reads == 0 {
		t.Error("no property was read")
	}
}

// propHost answers properties without allocating.
type propHost struct {
	allocFreeHost
	props map[string][]byte
	reads int
}

func (h *propHost) GetProperty(path string) ([]byte, error) {
	h.reads++
	return h.props[path], nil
}

// BenchmarkSenderDecision is the cost of deciding one request's sender
// with four rules and a host that answers without work.
func BenchmarkSenderDecision(b *testing.B) {
	h := newFakeHost(sendersConfig)
	p, _ := newPlugin(h)
	host := &propHost{allocFreeHost: allocFreeHost{fakeHost: h},
		props: map[string][]byte{filterspec.PropertyMTLS: {1}, filterspec.PropertyURISAN: []byte("spiffe://cluster.local/ns/llm/sa/router"),
			filterspec.PropertySourceAddress: []byte("10.1.2.3:5000")}}
	p.host = host
	rules := p.root(rootID).cfg.TrustedSenders
	b.ReportAllocs()
	for b.Loop() {
		if rule, _ := p.senderRule(rules); rule < 0 {
			b.Fatal("not trusted")
		}
	}
}
