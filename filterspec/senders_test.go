package filterspec

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// parseSenders reads a trusted_senders list as ParseConfig reads one.
func parseSenders(doc []byte) (*Senders, error) {
	cfg, err := ParseConfig(append(append([]byte(`{"trusted_senders":`), doc...), '}'))
	if err != nil {
		return nil, err
	}
	if cfg.TrustedSenders == nil {
		return nil, errors.New("no trusted_senders")
	}
	return cfg.TrustedSenders, nil
}

func mustSenders(t testing.TB, doc string) *Senders {
	t.Helper()
	s, err := parseSenders([]byte(doc))
	if err != nil {
		t.Fatalf("trusted_senders %s: %v", doc, err)
	}
	return s
}

// props builds the four properties as Envoy encodes them; "" is absent.
func props(mtls bool, uri, dns, src string) *SenderProps {
	p := &SenderProps{}
	if mtls {
		p.MTLS = []byte{1}
	} else {
		p.MTLS = []byte{0}
	}
	if uri != "" {
		p.URISAN = []byte(uri)
	}
	if dns != "" {
		p.DNSSAN = []byte(dns)
	}
	if src != "" {
		p.SourceAddress = []byte(src)
	}
	return p
}

const router = "spiffe://cluster.local/ns/llm/sa/router"

func TestSendersMatch(t *testing.T) {
	rules := `[
	 {"principal": "spiffe://cluster.local/ns/llm/sa/router"},
	 {"principal": "spiffe://td/ns/llm/sa/*"},
	 {"dns_name": "router.llm.svc"},
	 {"source_cidr": "10.8.0.0/16"},
	 {"source_cidr": "2001:db8:1::/48"},
	 {"principal": "spiffe://td/ns/batch/sa/*", "source_cidr": "192.168.0.0/24"},
	 {"principal": "spiffe://td/ns/edge/sa/gw", "dns_name": "gw.edge.svc"},
	 {"dns_name": "ops.llm.svc", "source_cidr": "fd00::/8"},
	 {"source_cidr": "127.0.0.1/32"}
	]`
	s := mustSenders(t, rules)
	for _, c := range []struct {
		name string
		p    *SenderProps
		want int
	}{
		// principal, exact
		{"exact principal", props(true, router, "", "1.2.3.4:5"), 0},
		{"exact principal without mtls", props(false, router, "", "1.2.3.4:5"), -1},
		{"exact principal, mtls absent", &SenderProps{URISAN: []byte(router)}, -1},
		{"exact principal, mtls 2", &SenderProps{MTLS: []byte{2}, URISAN: []byte(router)}, -1},
		{"exact principal, mtls two bytes", &SenderProps{MTLS: []byte{1, 0}, URISAN: []byte(router)}, -1},
		{"principal longer", props(true, router+"x", "", ""), -1},
		{"principal shorter", props(true, router[:len(router)-1], "", ""), -1},
		{"principal other case", props(true, strings.ToUpper(router), "", ""), -1},
		// principal, prefix
		{"prefix principal", props(true, "spiffe://td/ns/llm/sa/router", "", ""), 1},
		{"prefix principal deeper", props(true, "spiffe://td/ns/llm/sa/router/x", "", ""), 1},
		{"prefix principal: the prefix itself", props(true, "spiffe://td/ns/llm/sa/", "", ""), -1},
		{"prefix principal: without the slash", props(true, "spiffe://td/ns/llm/sa", "", ""), -1},
		{"prefix principal: sibling namespace", props(true, "spiffe://td/ns/llmx/sa/router", "", ""), -1},
		{"prefix principal: other trust domain", props(true, "spiffe://td2/ns/llm/sa/router", "", ""), -1},
		{"prefix principal without mtls", props(false, "spiffe://td/ns/llm/sa/router", "", ""), -1},
		// dns_name
		{"dns name", props(true, "", "router.llm.svc", ""), 2},
		{"dns name without mtls", props(false, "", "router.llm.svc", ""), -1},
		{"dns name other", props(true, "", "router.llm.svc.evil", ""), -1},
		{"dns name in the URI SAN", props(true, "router.llm.svc", "", ""), -1},
		{"uri in the DNS SAN", props(true, "", router, ""), -1},
		// source_cidr
		{"ipv4 cidr", props(false, "", "", "10.8.3.4:51000"), 3},
		{"ipv4 cidr edge", props(false, "", "", "10.8.255.255:1"), 3},
		{"ipv4 outside", props(false, "", "", "10.9.0.1:1"), -1},
		{"ipv4-mapped ipv6 peer", props(false, "", "", "[::ffff:10.8.0.1]:1"), 3},
		{"ipv6 cidr", props(false, "", "", "[2001:db8:1:2::5]:443"), 4},
		{"ipv6 outside", props(false, "", "", "[2001:db8:2::5]:443"), -1},
		{"ipv6 with zone", props(false, "", "", "[2001:db8:1::5%eth0]:443"), -1},
		{"ipv6 without brackets", props(false, "", "", "2001:db8:1::5:443"), -1},
		{"ipv4 in brackets", props(false, "", "", "[10.8.0.1]:1"), -1},
		{"no port", props(false, "", "", "10.8.0.1"), -1},
		{"bad port", props(false, "", "", "10.8.0.1:65536"), -1},
		{"leading zero octet", props(false, "", "", "010.8.0.1:1"), -1},
		{"loopback", props(false, "", "", "127.0.0.1:40000"), 8},
		{"source absent", props(false, "", "", ""), -1},
		{"cidr with mtls too", props(true, "spiffe://x/y", "x.svc", "10.8.0.1:1"), 3},
		// combinations: every member must match
		{"principal and cidr", props(true, "spiffe://td/ns/batch/sa/job", "", "192.168.0.9:1"), 5},
		{"principal, cidr outside", props(true, "spiffe://td/ns/batch/sa/job", "", "192.168.1.9:1"), -1},
		{"principal, source absent", props(true, "spiffe://td/ns/batch/sa/job", "", ""), -1},
		{"cidr, no certificate", props(false, "spiffe://td/ns/batch/sa/job", "", "192.168.0.9:1"), -1},
		{"principal and dns", props(true, "spiffe://td/ns/edge/sa/gw", "gw.edge.svc", ""), 6},
		{"principal, dns other", props(true, "spiffe://td/ns/edge/sa/gw", "gw2.edge.svc", ""), -1},
		{"principal, dns absent", props(true, "spiffe://td/ns/edge/sa/gw", "", ""), -1},
		{"dns and ipv6 cidr", props(true, "", "ops.llm.svc", "[fd12::1]:9"), 7},
		{"dns and ipv6 cidr, v4 peer", props(true, "", "ops.llm.svc", "10.0.0.1:9"), -1},
		{"dns and ipv6 cidr, no mtls", props(false, "", "ops.llm.svc", "[fd12::1]:9"), -1},
		// the first matching rule in configuration order wins
		{"two rules match", props(true, router, "router.llm.svc", "10.8.0.1:1"), 0},
		{"dns before cidr", props(true, "", "router.llm.svc", "10.8.0.1:1"), 2},
		{"nothing at all", &SenderProps{}, -1},
	} {
		if got := s.Match(c.p); got != c.want {
			t.Errorf("%s: Match = %d, want %d", c.name, got, c.want)
		}
		if got := slowMatch(s.Rules(), c.p); got != c.want {
			t.Errorf("%s: reference match = %d, want %d", c.name, got, c.want)
		}
	}
}

// slowMatch is the rule as the specification states it, rule by rule, to
// check the indexed Match against.
func slowMatch(rules []SenderRule, p *SenderProps) int {
	mtls := len(p.MTLS) == 1 && p.MTLS[0] == 1
	addr, addrOK := ParseSourceAddress(p.SourceAddress)
	for i, r := range rules {
		ok := true
		if r.Principal != "" {
			uri := string(p.URISAN)
			if strings.HasSuffix(r.Principal, "/*") {
				pre := strings.TrimSuffix(r.Principal, "*")
				ok = ok && mtls && strings.HasPrefix(uri, pre) && len(uri) > len(pre)
			} else {
				ok = ok && mtls && uri == r.Principal
			}
		}
		if r.DNSName != "" {
			ok = ok && mtls && string(p.DNSSAN) == r.DNSName
		}
		if r.SourceCIDR.IsValid() {
			ok = ok && addrOK && r.SourceCIDR.Contains(addr)
		}
		if ok {
			return i
		}
	}
	return -1
}

func TestSendersNeeds(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want SenderProperty
	}{
		{`[]`, 0},
		{`[{"source_cidr":"10.0.0.0/8"}]`, PropSourceAddress},
		{`[{"principal":"spiffe://a/b"}]`, PropMTLS | PropURISAN},
		{`[{"dns_name":"a.b"}]`, PropMTLS | PropDNSSAN},
		{`[{"dns_name":"a.b","source_cidr":"::/0"},{"principal":"x/*"}]`, PropMTLS | PropDNSSAN | PropURISAN | PropSourceAddress},
	} {
		if got := mustSenders(t, c.doc).Needs(); got != c.want {
			t.Errorf("%s: Needs = %b, want %b", c.doc, got, c.want)
		}
	}
	var none *Senders
	if none.Len() != 0 || none.Needs() != 0 || none.Match(props(true, router, "", "")) != -1 {
		t.Error("a nil Senders must trust nobody")
	}
}

func TestParseSendersErrors(t *testing.T) {
	many := "[" + strings.Repeat(`{"dns_name":"a"},`, MaxSenderRules) + `{"dns_name":"a"}]`
	for _, c := range []struct{ doc, want string }{
		{`{}`, "trusted_senders: expected an array of rules"},
		{`"x"`, "trusted_senders: expected an array of rules"},
		{``, "trusted_senders: expected an array of rules"},
		{`[`, "trusted_senders[0]: expected a rule object"},
		{`[{}]`, "trusted_senders[0]: empty rule"},
		{`[{"principal":"a"},{}]`, "trusted_senders[1]: empty rule"},
		{`[1]`, "trusted_senders[0]: expected a rule object"},
		{`[null]`, "trusted_senders[0]: expected a rule object"},
		{`[{"principal":""}]`, "trusted_senders[0].principal: empty string"},
		{`[{"dns_name":""}]`, "trusted_senders[0].dns_name: empty string"},
		{`[{"source_cidr":""}]`, "trusted_senders[0].source_cidr: empty string"},
		{`[{"principal":1}]`, "trusted_senders[0].principal: expected a string"},
		{`[{"principal":null}]`, "trusted_senders[0].principal: expected a string"},
		{`[{"principal":["a"]}]`, "trusted_senders[0].principal: expected a string"},
		{`[{"Principal":"a"}]`, `trusted_senders[0]: unknown member "Principal"`},
		{`[{"dns_name":"a","spiffe":"b"}]`, `trusted_senders[0]: unknown member "spiffe"`},
		{`[{"principal":"a","principal":"b"}]`, "trusted_senders[0].principal: duplicate member"},
		{`[{"dns_name":"a"},{"source_cidr":"10.0.0.0/8","source_cidr":"10.0.0.0/8"}]`, "trusted_senders[1].source_cidr: duplicate member"},
		{`[{"dns_name":"a"},{"dns_name":"b"},{"dns_name":"c"},{"source_cidr":"10.0.0.0/33"}]`, "trusted_senders[3].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"source_cidr":"10.0.0.1/8"}]`, "trusted_senders[0].source_cidr: host bits are set; did you mean 10.0.0.0/8?"},
		{`[{"source_cidr":"10.0.0.1"}]`, "trusted_senders[0].source_cidr: expected a CIDR with a prefix length"},
		{`[{"source_cidr":"10.0.0/8"}]`, "trusted_senders[0].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"source_cidr":"010.0.0.0/8"}]`, "trusted_senders[0].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"source_cidr":"10.0.0.0/08"}]`, "trusted_senders[0].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"source_cidr":"fe80::/10%eth0"}]`, "trusted_senders[0].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"source_cidr":"2001:db8::1/32"}]`, "trusted_senders[0].source_cidr: host bits are set; did you mean 2001:db8::/32?"},
		{`[{"source_cidr":"::ffff:10.0.0.0/104"}]`, "trusted_senders[0].source_cidr: an IPv4-mapped IPv6 prefix never matches"},
		{`[{"source_cidr":" 10.0.0.0/8"}]`, "trusted_senders[0].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`[{"principal":"*"}]`, `trusted_senders[0].principal: '*' is allowed only as a final "/*"`},
		{`[{"principal":"spiffe://td/*/sa/x"}]`, `trusted_senders[0].principal: '*' is allowed only as a final "/*"`},
		{`[{"principal":"spiffe://td/ns*"}]`, `trusted_senders[0].principal: '*' is allowed only as a final "/*"`},
		{`[{"principal":"/*"}]`, `trusted_senders[0].principal: a prefix entry needs text before "/*"`},
		{`[{"principal":"spiffe://td/ns/a b"}]`, "trusted_senders[0].principal: contains a space"},
		{`[{"dns_name":"r\u00e9.svc"}]`, "trusted_senders[0].dns_name: contains a space, control or non-ASCII character"},
		{`[{"dns_name":"a\u0000b"}]`, "trusted_senders[0].dns_name: contains a space"},
		{`[{"dns_name":"\ud800"}]`, "trusted_senders[0].dns_name: lone surrogate escape"},
		{`[{"dns_name":"a` + "\x01" + `"}]`, "trusted_senders[0].dns_name: control character in string"},
		{`[{"dns_name":"a"]`, "trusted_senders[0]: expected ',' or '}' after a member"},
		{`[{"dns_name":"a"},]`, "trusted_senders[1]: expected a rule object"},
		{`[{"dns_name":"a"} {"dns_name":"b"}]`, "trusted_senders: expected ',' or ']' after a rule"},
		{`[{"dns_name" "a"}]`, "trusted_senders[0]: expected ':' after a member name"},
		{`[{dns_name:"a"}]`, "trusted_senders[0]: expected a string"},
		{many, "trusted_senders[1024]: more than 1024 rules"},
	} {
		_, err := parseSenders([]byte(c.doc))
		if err == nil {
			t.Errorf("%.60s: accepted, want %q", c.doc, c.want)
			continue
		}
		const prefix = len(`{"trusted_senders":`)
		if !strings.HasPrefix(err.Error(), "plugin configuration: "+c.want) {
			t.Errorf("%.60s: error %q, want %q", c.doc, err, c.want)
		}
		if e, ok := err.(*ConfigError); !ok || e.Offset < prefix || e.Offset > prefix+len(c.doc) {
			t.Errorf("%.60s: error %#v: want a *ConfigError with an offset in the list", c.doc, err)
		}
	}
}

func TestParseSendersAccepts(t *testing.T) {
	exactly := "[" + strings.Repeat(`{"dns_name":"a"},`, MaxSenderRules-1) + `{"dns_name":"a"}]`
	for _, c := range []struct {
		doc  string
		want []SenderRule
	}{
		{`[]`, []SenderRule{}},
		{" [ ] ", []SenderRule{}},
		{`[{"principal":"spiffe://td/ns/llm/sa/*","source_cidr":"10.8.0.0/16"}]`,
			[]SenderRule{{Principal: "spiffe://td/ns/llm/sa/*", SourceCIDR: netip.MustParsePrefix("10.8.0.0/16")}}},
		{`[ {"source_cidr" : "::/0"} , {"dns_name":"r\u002esvc", "principal": "spiffe:\/\/a\/b"} ]`,
			[]SenderRule{{SourceCIDR: netip.MustParsePrefix("::/0")}, {DNSName: "r.svc", Principal: "spiffe://a/b"}}},
		{`[{"source_cidr":"0.0.0.0/0"},{"source_cidr":"192.0.2.7/32"},{"source_cidr":"2001:db8::7/128"}]`,
			[]SenderRule{{SourceCIDR: netip.MustParsePrefix("0.0.0.0/0")}, {SourceCIDR: netip.MustParsePrefix("192.0.2.7/32")},
				{SourceCIDR: netip.MustParsePrefix("2001:db8::7/128")}}},
	} {
		s := mustSenders(t, c.doc)
		got := s.Rules()
		if len(got) != len(c.want) {
			t.Errorf("%s: %d rules, want %d", c.doc, len(got), len(c.want))
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: rule %d = %+v, want %+v", c.doc, i, got[i], c.want[i])
			}
		}
	}
	if s := mustSenders(t, exactly); s.Len() != MaxSenderRules {
		t.Errorf("%d rules, want %d", s.Len(), MaxSenderRules)
	}
}

func TestNewSenders(t *testing.T) {
	if _, err := NewSenders([]SenderRule{{DNSName: "a"}, {}}); err == nil || err.Error() != "trusted_senders[1]: empty rule: set principal, dns_name or source_cidr" {
		t.Errorf("empty rule: %v", err)
	}
	if _, err := NewSenders([]SenderRule{{SourceCIDR: netip.MustParsePrefix("10.1.0.0/8")}}); err == nil || !strings.HasPrefix(err.Error(), "trusted_senders[0].source_cidr: host bits") {
		t.Errorf("unmasked prefix: %v", err)
	}
	if _, err := NewSenders(make([]SenderRule, MaxSenderRules+1)); err == nil || !strings.Contains(err.Error(), "more than 1024") {
		t.Errorf("too many: %v", err)
	}
	s, err := NewSenders([]SenderRule{{Principal: router}})
	if err != nil || s.Match(props(true, router, "", "")) != 0 {
		t.Errorf("NewSenders: %v", err)
	}
}

func TestParseSourceAddress(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" means not an address
	}{
		{"127.0.0.1:80", "127.0.0.1"},
		{"0.0.0.0:0", "0.0.0.0"},
		{"[::1]:8080", "::1"},
		{"[::ffff:192.0.2.1]:1", "192.0.2.1"},
		{"[2001:db8::1]:65535", "2001:db8::1"},
		{"[fe80::1%eth0]:1", ""},
		{"[2001:db8::1]", ""},
		{"2001:db8::1", ""},
		{"127.0.0.1", ""},
		{"127.0.0.1:", ""},
		{"127.0.0.1:0x10", ""},
		{"127.0.0.1:01", ""},
		{"127.0.0.1:99999", ""},
		{"localhost:80", ""},
		{"[127.0.0.1]:80", ""},
		{":80", ""},
		{"", ""},
		{"1.2.3.4:5 ", ""},
		{"1.2.3.4.5:6", ""},
		{"1.2.3:6", ""},
		{"1..3.4:6", ""},
		{"1.2.3.:6", ""},
		{".1.2.3:6", ""},
		{"256.1.1.1:6", ""},
		{"1.2.3.04:6", ""},
		{"0.0.0.0:65535", "0.0.0.0"},
		{"255.255.255.255:1", "255.255.255.255"},
		{"[::ffff:1.2.3.4%x]:1", ""},
		{"[]:1", ""},
	} {
		a, ok := ParseSourceAddress([]byte(c.in))
		if ra, rok := refSourceAddress(c.in); ra != a || rok != ok {
			t.Errorf("ParseSourceAddress(%q) = %v, %v; netip says %v, %v", c.in, a, ok, ra, rok)
		}
		got := ""
		if ok {
			got = a.String()
		}
		if got != c.want {
			t.Errorf("ParseSourceAddress(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// refSourceAddress is ParseSourceAddress written with netip.ParseAddrPort:
// no zone, no leading zero in the port, IPv4-mapped addresses unmapped.
func refSourceAddress(s string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(s)
	port := s[strings.LastIndexByte(s, ':')+1:]
	if err != nil || len(s) > 64 || ap.Addr().Zone() != "" || (len(port) > 1 && port[0] == '0') {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// Deciding costs no allocation, whatever the rules and properties.
func TestSendersMatchAllocs(t *testing.T) {
	s := benchSenders(1024)
	for _, p := range benchProps() {
		if n := testing.AllocsPerRun(100, func() { s.Match(p) }); n != 0 {
			t.Errorf("Match(%s) allocates %.0f times", p.SourceAddress, n)
		}
	}
}

// benchSenders returns n rules of every kind, in the proportions of a real
// deployment: mostly exact principals, some prefixes, DNS names and CIDRs.
func benchSenders(n int) *Senders {
	var rules []SenderRule
	for i := 0; len(rules) < n; i++ {
		is := strconv.Itoa(i)
		switch i % 8 {
		case 0, 1, 2, 3:
			rules = append(rules, SenderRule{Principal: "spiffe://cluster.local/ns/team" + is + "/sa/router"})
		case 4:
			rules = append(rules, SenderRule{Principal: "spiffe://cluster.local/ns/batch" + is + "/sa/*"})
		case 5:
			rules = append(rules, SenderRule{DNSName: "router" + is + ".llm.svc"})
		case 6:
			rules = append(rules, SenderRule{SourceCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)})
		case 7:
			rules = append(rules, SenderRule{Principal: "spiffe://cluster.local/ns/edge" + is + "/sa/gw",
				SourceCIDR: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, byte(i >> 8), byte(i)}), 32)})
		}
	}
	s, err := NewSenders(rules[:n])
	if err != nil {
		panic(err)
	}
	return s
}

// benchProps are a matching router, an unknown certificate and a client
// without one.
func benchProps() []*SenderProps {
	return []*SenderProps{
		props(true, "spiffe://cluster.local/ns/team0/sa/router", "router.team0.svc", "10.0.0.7:41000"),
		props(true, "spiffe://cluster.local/ns/other/sa/app", "app.other.svc", "[fd00:1::9]:41000"),
		props(false, "", "", "192.0.2.44:52000"),
	}
}

func BenchmarkSendersMatch(b *testing.B) {
	for _, n := range []int{1, 16, 1024} {
		s := benchSenders(n)
		for i, name := range []string{"router", "unknown-cert", "no-cert"} {
			p := benchProps()[i]
			b.Run(strconv.Itoa(n)+"-rules/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s.Match(p)
				}
			})
		}
	}
}

// FuzzParseSenders: the parser never panics, an accepted list compiles to
// rules that NewSenders accepts again, and Match agrees with the rule as
// written (slowMatch) on a few senders.
func FuzzParseSenders(f *testing.F) {
	for _, s := range []string{
		`[]`, `[{"principal":"spiffe://td/ns/llm/sa/*","source_cidr":"10.8.0.0/16"}]`,
		`[{"dns_name":"router.llm.svc"},{"source_cidr":"2001:db8::/32"}]`,
		`[{"principal":"a","principal":"b"}]`, `[{"source_cidr":"10.0.0.1/8"}]`, `[{"x":1}]`, `[{}]`,
	} {
		f.Add([]byte(s))
	}
	senders := []*SenderProps{
		props(true, "spiffe://td/ns/llm/sa/router", "router.llm.svc", "10.8.1.2:3"),
		props(false, "", "", "[2001:db8::1]:3"),
		props(true, "a", "a", "[::ffff:10.8.0.1]:1"),
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := parseSenders(doc)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if _, err := NewSenders(s.Rules()); err != nil {
			t.Fatalf("parsed rules do not compile: %v", err)
		}
		for _, p := range senders {
			if got, want := s.Match(p), slowMatch(s.Rules(), p); got != want {
				t.Fatalf("Match = %d, rule as written = %d", got, want)
			}
		}
	})
}

// FuzzSenderProps: whatever bytes a host returns for the four properties,
// Match agrees with the rule as written and never panics.
func FuzzSenderProps(f *testing.F) {
	f.Add([]byte{1}, []byte("spiffe://td/ns/llm/sa/router"), []byte("router.llm.svc"), []byte("10.8.1.2:3"))
	f.Add([]byte{0}, []byte(""), []byte(""), []byte("[2001:db8::1]:443"))
	f.Add([]byte{}, []byte("spiffe://td/ns/llm/sa/"), []byte("x"), []byte("[::ffff:10.8.0.1]:1"))
	f.Add([]byte{1, 1}, []byte("spiffe://td/ns/llm/sa/r/x"), []byte("ops.llm.svc"), []byte("[fd00::1%lo]:1"))
	s := mustSenders(f, `[
	 {"principal":"spiffe://td/ns/llm/sa/router"},{"principal":"spiffe://td/ns/llm/sa/*"},
	 {"dns_name":"router.llm.svc"},{"source_cidr":"10.8.0.0/16"},{"source_cidr":"2001:db8::/32"},
	 {"dns_name":"ops.llm.svc","source_cidr":"fd00::/8"},{"principal":"spiffe://td/*","source_cidr":"0.0.0.0/0"}]`)
	f.Fuzz(func(t *testing.T, mtls, uri, dns, src []byte) {
		p := &SenderProps{MTLS: mtls, URISAN: uri, DNSSAN: dns, SourceAddress: src}
		if got, want := s.Match(p), slowMatch(s.Rules(), p); got != want {
			t.Fatalf("Match = %d, rule as written = %d", got, want)
		}
		a, ok := ParseSourceAddress(src)
		if want, wantOK := refSourceAddress(string(src)); ok != wantOK || a != want {
			t.Fatalf("ParseSourceAddress(%q) = %v, %v; netip says %v, %v", src, a, ok, want, wantOK)
		}
	})
}
