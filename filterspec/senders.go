package filterspec

import (
	"net/netip"
	"strconv"
	"strings"
	"unsafe"
)

// MaxSenderRules caps the number of trusted_senders rules.
const MaxSenderRules = 1024

// SenderRule is one trusted_senders rule (docs/spec.md, Trusted senders).
// A rule matches a request when every member it sets matches; the zero
// value of a member means it is not set.
type SenderRule struct {
	// Principal is the peer certificate's URI SAN (a SPIFFE ID, say):
	// matched exactly, or, when it ends in "/*", every URI that starts with
	// the text before the "*" and goes on past it.
	Principal string
	// DNSName is the peer certificate's DNS SAN, matched exactly.
	DNSName string
	// SourceCIDR holds the connection's source address (IPv4 or IPv6).
	SourceCIDR netip.Prefix
}

// NeedsCertificate reports whether the rule can only match a connection
// with a verified client certificate.
func (r *SenderRule) NeedsCertificate() bool { return r.Principal != "" || r.DNSName != "" }

// PrincipalPrefix reports whether Principal is a prefix ("…/*") entry.
func (r *SenderRule) PrincipalPrefix() bool { return strings.HasSuffix(r.Principal, "/*") }

// SenderProperty names one of the four host properties the rules read.
type SenderProperty uint8

// The properties, under Envoy's attribute names.
const (
	// PropMTLS is connection.mtls: a bool, one byte, 1 when the peer
	// presented a client certificate that the host verified.
	PropMTLS SenderProperty = 1 << iota
	// PropURISAN is connection.uri_san_peer_certificate: the first URI SAN
	// of the peer certificate, a string.
	PropURISAN
	// PropDNSSAN is connection.dns_san_peer_certificate: the first DNS SAN
	// of the peer certificate, a string.
	PropDNSSAN
	// PropSourceAddress is source.address: the connection's peer, "ip:port"
	// ("[ip]:port" for IPv6), a string.
	PropSourceAddress
)

// SenderProps are the four properties of one request in the host's
// encoding, exactly as proxy_get_property returns them; nil (or empty) when
// the host does not have the property.
type SenderProps struct {
	MTLS          []byte
	URISAN        []byte
	DNSSAN        []byte
	SourceAddress []byte
}

// Senders is a compiled trusted_senders list. Match is read-only and safe
// for concurrent use. The zero value (and nil) has no rules and trusts
// nobody.
type Senders struct {
	rules []SenderRule
	needs SenderProperty
	// Each rule is filed under one index, by its most selective member:
	// exact principal, prefix principal (under the text before the "*",
	// which ends in '/'), DNS name, or source CIDR alone (under the masked
	// prefix, with the distinct prefix lengths in bits). Index lists are in
	// rule order.
	exact  map[string][]int32
	prefix map[string][]int32
	// prefixLens are the distinct lengths of the prefix keys, ascending.
	prefixLens []int
	dns        map[string][]int32
	cidr       map[cidrKey][]int32
	// bits4 and bits6 are the distinct prefix lengths in the CIDR index,
	// by family; empty when the index holds none of that family.
	bits4, bits6 []uint8
}

// Len returns the number of rules.
func (s *Senders) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Rules returns a copy of the rules, in configuration order.
func (s *Senders) Rules() []SenderRule {
	if s == nil {
		return nil
	}
	return append([]SenderRule(nil), s.rules...)
}

// Needs returns the properties Match reads: PropMTLS and the SAN for the
// rules with a principal or a DNS name, PropSourceAddress for those with a
// source CIDR. A host reads only these, and the SANs only when
// MTLSVerified says a certificate was verified.
func (s *Senders) Needs() SenderProperty {
	if s == nil {
		return 0
	}
	return s.needs
}

// MTLSVerified decodes connection.mtls: true only for the one byte 1.
// Anything else (absent, 0, another length) means no verified client
// certificate.
func MTLSVerified(b []byte) bool { return len(b) == 1 && b[0] == 1 }

// NewSenders compiles rules, checking each as ParseSenders does.
func NewSenders(rules []SenderRule) (*Senders, error) {
	if len(rules) > MaxSenderRules {
		return nil, &SendersError{Path: rulePath(MaxSenderRules, ""), Msg: "more than " + strconv.Itoa(MaxSenderRules) + " rules"}
	}
	s := &Senders{rules: append([]SenderRule(nil), rules...)}
	for i := range s.rules {
		r := &s.rules[i]
		if r.Principal == "" && r.DNSName == "" && !r.SourceCIDR.IsValid() {
			return nil, &SendersError{Path: rulePath(i, ""), Msg: "empty rule: set principal, dns_name or source_cidr"}
		}
		if r.Principal != "" {
			if msg := checkPrincipal(r.Principal); msg != "" {
				return nil, &SendersError{Path: rulePath(i, "principal"), Msg: msg}
			}
		}
		if r.DNSName != "" {
			if msg := checkName(r.DNSName); msg != "" {
				return nil, &SendersError{Path: rulePath(i, "dns_name"), Msg: msg}
			}
		}
		if r.SourceCIDR.IsValid() {
			if msg := checkPrefix(r.SourceCIDR); msg != "" {
				return nil, &SendersError{Path: rulePath(i, "source_cidr"), Msg: msg}
			}
		}
		s.file(int32(i))
	}
	return s, nil
}

// file adds rule i to its index.
func (s *Senders) file(i int32) {
	r := &s.rules[i]
	add := func(m *map[string][]int32, k string) {
		if *m == nil {
			*m = map[string][]int32{}
		}
		(*m)[k] = append((*m)[k], i)
	}
	if r.NeedsCertificate() {
		s.needs |= PropMTLS
	}
	if r.Principal != "" {
		s.needs |= PropURISAN
	}
	if r.DNSName != "" {
		s.needs |= PropDNSSAN
	}
	if r.SourceCIDR.IsValid() {
		s.needs |= PropSourceAddress
	}
	switch {
	case r.Principal != "" && !r.PrincipalPrefix():
		add(&s.exact, r.Principal)
	case r.Principal != "":
		k := r.Principal[:len(r.Principal)-1]
		add(&s.prefix, k)
		s.prefixLens = insertLen(s.prefixLens, len(k))
	case r.DNSName != "":
		add(&s.dns, r.DNSName)
	default:
		if s.cidr == nil {
			s.cidr = map[cidrKey][]int32{}
		}
		p := r.SourceCIDR
		k := keyOf(p.Addr(), p.Bits())
		s.cidr[k] = append(s.cidr[k], i)
		if p.Addr().Is4() {
			s.bits4 = appendBits(s.bits4, uint8(p.Bits()))
		} else {
			s.bits6 = appendBits(s.bits6, uint8(p.Bits()))
		}
	}
}

// insertLen adds n to the ascending list lens, once.
func insertLen(lens []int, n int) []int {
	i := 0
	for i < len(lens) && lens[i] < n {
		i++
	}
	if i < len(lens) && lens[i] == n {
		return lens
	}
	return append(lens[:i], append([]int{n}, lens[i:]...)...)
}

// appendBits adds n to bits, once.
func appendBits(bits []uint8, n uint8) []uint8 {
	for _, b := range bits {
		if b == n {
			return bits
		}
	}
	return append(bits, n)
}

// cidrKey is a masked prefix as a map key: the address's 128 bits (an
// IPv4 address in the low 32) and the length, plus 129 for IPv6.
type cidrKey [3]uint64

// keyOf returns the key of a's first bits bits.
func keyOf(a netip.Addr, bits int) cidrKey {
	if a.Is4() {
		b := a.As4()
		v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
		return cidrKey{0, v &^ (1<<(32-bits) - 1), uint64(bits)}
	}
	b := a.As16()
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	if bits <= 64 {
		hi &^= 1<<(64-bits) - 1
		lo = 0
	} else {
		lo &^= 1<<(128-bits) - 1
	}
	return cidrKey{hi, lo, uint64(bits) + 129}
}

// linearRules is the rule count up to which Match tries the rules one by
// one: for a few rules that is cheaper than the index lookups.
const linearRules = 8

// Match returns the index of the first rule (in configuration order) that
// the request's properties satisfy, or -1 when none does. A rule with a
// principal or a DNS name never matches unless MTLSVerified(p.MTLS).
// Match does not allocate.
func (s *Senders) Match(p *SenderProps) int {
	if s.Len() == 0 {
		return -1
	}
	c := candidate{src: p.SourceAddress}
	if c.mtls = MTLSVerified(p.MTLS); c.mtls {
		c.uri, c.dns = p.URISAN, p.DNSSAN
	}
	if len(s.rules) <= linearRules {
		for i := range s.rules {
			if s.rules[i].matches(&c) {
				return i
			}
		}
		return -1
	}
	best := int32(-1)
	if c.mtls && len(c.uri) > 0 {
		if s.exact != nil {
			best = s.first(s.exact[string(c.uri)], &c, best)
		}
		for _, n := range s.prefixLens {
			if best == 0 || n >= len(c.uri) {
				break
			}
			if c.uri[n-1] == '/' {
				best = s.first(s.prefix[string(c.uri[:n])], &c, best)
			}
		}
	}
	if best != 0 && c.mtls && len(c.dns) > 0 && s.dns != nil {
		best = s.first(s.dns[string(c.dns)], &c, best)
	}
	if best != 0 && s.cidr != nil && s.mayHoldFamily(c.src) {
		if addr, ok := c.addr(); ok {
			bits := s.bits4
			if addr.Is6() {
				bits = s.bits6
			}
			for _, n := range bits {
				best = s.first(s.cidr[keyOf(addr, int(n))], &c, best)
			}
		}
	}
	return int(best)
}

// mayHoldFamily reports whether the CIDR index may hold the address src
// names, from its text alone: without brackets it is IPv4; in brackets and
// without a dot it is IPv6 (a dot may be an IPv4-mapped address, which
// counts as IPv4). It spares parsing an address no CIDR rule can hold.
func (s *Senders) mayHoldFamily(src []byte) bool {
	if len(src) == 0 {
		return false
	}
	if src[0] != '[' {
		return len(s.bits4) > 0
	}
	return len(s.bits6) > 0 || hasByte(src, '.')
}

// candidate is one request's properties, each decoded at most once.
type candidate struct {
	mtls     bool
	uri, dns []byte
	src      []byte
	// parsed is 0 before the source address is parsed, then 1 (an
	// address) or 2 (not one).
	parsed uint8
	ip     netip.Addr
}

func (c *candidate) addr() (netip.Addr, bool) {
	if c.parsed == 0 {
		ip, ok := ParseSourceAddress(c.src)
		c.ip, c.parsed = ip, 2
		if ok {
			c.parsed = 1
		}
	}
	return c.ip, c.parsed == 1
}

// first returns the lowest of best and the index of the first rule in ids
// that c satisfies (ids are ascending).
func (s *Senders) first(ids []int32, c *candidate, best int32) int32 {
	for _, i := range ids {
		if best >= 0 && i >= best {
			return best
		}
		if s.rules[i].matches(c) {
			return i
		}
	}
	return best
}

func (r *SenderRule) matches(c *candidate) bool {
	if r.Principal != "" {
		if !c.mtls {
			return false
		}
		if r.PrincipalPrefix() {
			pre := r.Principal[:len(r.Principal)-1]
			if len(c.uri) <= len(pre) || string(c.uri[:len(pre)]) != pre {
				return false
			}
		} else if string(c.uri) != r.Principal {
			return false
		}
	}
	if r.DNSName != "" && (!c.mtls || string(c.dns) != r.DNSName) {
		return false
	}
	if r.SourceCIDR.IsValid() {
		ip, ok := c.addr()
		if !ok || !r.SourceCIDR.Contains(ip) {
			return false
		}
	}
	return true
}

// ParseSourceAddress decodes source.address, "ip:port" or "[ip]:port",
// into the peer's IP address. An IPv4-mapped IPv6 address is returned as
// the IPv4 address it maps (a dual-stack listener sees IPv4 peers that
// way), so IPv4 rules hold IPv4 peers whichever socket they came through.
// Addresses with a zone, and anything that is not an address and a port,
// give ok == false: such a sender matches no source_cidr.
func ParseSourceAddress(b []byte) (addr netip.Addr, ok bool) {
	if len(b) == 0 || len(b) > 64 {
		return netip.Addr{}, false
	}
	colon := -1
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ':' {
			colon = i
			break
		}
	}
	if colon < 0 || !validPort(b[colon+1:]) {
		return netip.Addr{}, false
	}
	host := b[:colon]
	if len(host) < 2 || host[0] != '[' || host[len(host)-1] != ']' {
		return parseIPv4(host)
	}
	host = host[1 : len(host)-1]
	if !hasByte(host, ':') || hasByte(host, '%') {
		return netip.Addr{}, false // "[1.2.3.4]:80", or a zone
	}
	// The bytes are only read during the call: netip keeps no reference
	// to its input when the address has no zone.
	a, err := netip.ParseAddr(unsafe.String(unsafe.SliceData(host), len(host)))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseIPv4 reads a dotted-quad IPv4 address the way netip.ParseAddr does
// (four decimal fields of 0 to 255, no leading zeros), without its cost
// on wasm; anything else is left to netip.
func parseIPv4(b []byte) (netip.Addr, bool) {
	var ip [4]byte
	field, digits, v := 0, 0, 0
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if digits == 1 && v == 0 {
				return netip.Addr{}, false // leading zero
			}
			v = v*10 + int(c-'0')
			digits++
			if v > 255 {
				return netip.Addr{}, false
			}
		case c == '.' && digits > 0 && field < 3 && i+1 < len(b):
			ip[field] = byte(v)
			field, digits, v = field+1, 0, 0
		default:
			return netip.Addr{}, false
		}
	}
	if field != 3 || digits == 0 {
		return netip.Addr{}, false
	}
	ip[3] = byte(v)
	return netip.AddrFrom4(ip), true
}

func validPort(p []byte) bool {
	if len(p) == 0 || len(p) > 5 || (p[0] == '0' && len(p) > 1) {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 65535
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// checkPrincipal says what is wrong with a principal entry, or "".
func checkPrincipal(p string) string {
	if msg := checkName(p); msg != "" {
		return msg
	}
	star := strings.IndexByte(p, '*')
	if star >= 0 && (star != len(p)-1 || !strings.HasSuffix(p, "/*")) {
		return "'*' is allowed only as a final \"/*\" (every URI below the prefix)"
	}
	if p == "/*" {
		return "a prefix entry needs text before \"/*\""
	}
	return ""
}

// checkName rejects what no certificate SAN holds: control characters,
// spaces and non-ASCII bytes (SANs are IA5 strings).
func checkName(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return "contains a space, control or non-ASCII character"
		}
	}
	return ""
}

// checkPrefix says what is wrong with a source CIDR, or "".
func checkPrefix(p netip.Prefix) string {
	if p.Addr().Zone() != "" {
		return "an address with a zone"
	}
	if p.Addr().Is4In6() {
		return "an IPv4-mapped IPv6 prefix never matches (source addresses are compared in IPv4 form); write the IPv4 prefix"
	}
	if p != p.Masked() {
		return "host bits are set; did you mean " + p.Masked().String() + "?"
	}
	return ""
}

func rulePath(i int, member string) string {
	s := "trusted_senders[" + strconv.Itoa(i) + "]"
	if member != "" {
		s += "." + member
	}
	return s
}

// SendersError says what is wrong with a trusted_senders list, naming the
// rule and member ("trusted_senders[3].source_cidr"). NewSenders returns
// it; ParseConfig reports it as a ConfigError at the offending byte.
type SendersError struct {
	// Path names the rule and member, or "trusted_senders" for the list.
	Path string
	Msg  string
}

func (e *SendersError) Error() string { return e.Path + ": " + e.Msg }

// parseCIDR reads a source_cidr value: an IPv4 or IPv6 prefix with its
// length, host bits clear.
func parseCIDR(v string) (netip.Prefix, string) {
	if !strings.Contains(v, "/") {
		return netip.Prefix{}, "expected a CIDR with a prefix length, e.g. 10.0.0.0/8 or 2001:db8::/32 (/32 or /128 for one address)"
	}
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, "not an IPv4 or IPv6 CIDR: " + err.Error()
	}
	if msg := checkPrefix(p); msg != "" {
		return netip.Prefix{}, msg
	}
	return p, ""
}
