package filterspec

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvgate/kvgate/kvhints"
)

// Bounds of the configurable values.
const (
	// DefaultMaxBodyBytes is the body size limit when none is configured.
	DefaultMaxBodyBytes = 4 << 20
	// MaxMaxBodyBytes caps max_body_bytes: the guest holds a body twice
	// (the host's copy and the rewrite) in a 4 GiB address space.
	MaxMaxBodyBytes = 256 << 20
	// MaxMaxDepth caps max_depth.
	MaxMaxDepth = 100000
	// maxExcludePaths caps the number of exclude_paths entries.
	maxExcludePaths = 1024
)

// Config is the plugin configuration (docs/spec.md, Plugin configuration):
//
//	{"trust_kv_hints": false, "max_depth": 128, "max_body_bytes": 4194304,
//	 "exclude_paths": ["/healthz", "/static/*"], "grpc": "pass", "mode": "enforce",
//	 "trusted_senders": [{"principal": "spiffe://cluster.local/ns/llm/sa/router"}]}
//
// Every member is optional; an empty configuration means the defaults.
// trust_kv_hints: true and trusted_senders together are an error.
type Config struct {
	// TrustKVHints admits hints from every sender; otherwise they are
	// removed, except from the TrustedSenders.
	TrustKVHints bool
	// TrustedSenders are the rules that make one request's sender trusted
	// (docs/spec.md, Trusted senders), from its verified client
	// certificate and its connection's source address; nil when the
	// member is absent. A request no rule matches is handled as untrusted.
	TrustedSenders *Senders
	// MaxDepth is the admitted envelope's nesting limit (kvhints.Limits).
	MaxDepth int
	// MaxBodyBytes rejects longer request bodies with 413.
	MaxBodyBytes int
	// ExcludePaths lists request paths whose bodies are not inspected.
	// An entry is an exact path, or a directory ending in "/*" that
	// matches every path below it. Only canonical request paths match
	// (see Excluded), so an exclusion can never be reached by an
	// encoding trick that the worker would undo.
	ExcludePaths []string
	// GRPC is what happens to gRPC requests (grpc.go): GRPCPass (the
	// default) lets them through uninspected when their bytes cannot be
	// JSON, GRPCRefuse answers them with grpc-status PERMISSION_DENIED.
	GRPC GRPCMode
	// Mode is ModeEnforce (the default), or ModeDetect: every hint is
	// decided and reported, but forwarded as received, and what enforcing
	// would have done is counted in kvgate_kv_hints_detected_total
	// (docs/spec.md, Detection-only mode).
	Mode Mode
	// RouterOnly names the router-only fields removed from an untrusted
	// sender's request besides kv_hints (docs/router-only.md); nil when
	// the member is absent.
	RouterOnly *RouterOnly
}

// member is one of the configuration's members: its index in members,
// which is also its bit in Members.
type member uint8

// The configuration's members, in the order of members.
const (
	memberTrustKVHints member = iota
	memberMaxDepth
	memberMaxBodyBytes
	memberExcludePaths
	memberGRPC
	memberTrustedSenders
	memberMode
	memberRouterOnly
	numMembers
)

// members is the one table of the configuration's members: their names,
// indexed by member. The parser looks names up here (lookupMember), Members
// keeps member m in bit m, and the unknown-member error lists them in this
// order (knownMembers).
var members = [numMembers]string{
	memberTrustKVHints:   "trust_kv_hints",
	memberMaxDepth:       "max_depth",
	memberMaxBodyBytes:   "max_body_bytes",
	memberExcludePaths:   "exclude_paths",
	memberGRPC:           "grpc",
	memberTrustedSenders: "trusted_senders",
	memberMode:           "mode",
	memberRouterOnly:     "router_only",
}

// knownMembers is the list the unknown-member error gives.
var knownMembers = strings.Join(members[:], ", ")

// lookupMember returns the member named name; ok is false for a name that
// is not one.
func lookupMember(name string) (m member, ok bool) {
	for i, n := range members {
		if n == name {
			return member(i), true
		}
	}
	return 0, false
}

// Members says which members a configuration document wrote out, default
// values included (ParseConfigMembers).
type Members uint8

// Has reports whether the document wrote out the member called name.
func (m Members) Has(name string) bool {
	i, ok := lookupMember(name)
	return ok && m.has(i)
}

func (m Members) has(i member) bool { return m&(1<<i) != 0 }

// Mode is the "mode" member of the configuration.
type Mode uint8

// The values of "mode".
const (
	ModeEnforce Mode = iota // "enforce"
	ModeDetect              // "detect"
)

// modeNames are the values of "mode" as the configuration spells them,
// in the order of the constants.
var modeNames = []string{"enforce", "detect"}

// String is the mode as the configuration spells it (the default's name
// for a value outside the constants, which acts as the default).
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return modeNames[ModeEnforce]
}

// GRPCMode is the "grpc" member of the configuration.
type GRPCMode uint8

// The values of "grpc".
const (
	GRPCPass   GRPCMode = iota // "pass"
	GRPCRefuse                 // "refuse"
)

// grpcNames are the values of "grpc" as the configuration spells them,
// in the order of the constants.
var grpcNames = []string{"pass", "refuse"}

// String is the mode as the configuration spells it (the default's name
// for a value outside the constants, which acts as the default).
func (m GRPCMode) String() string {
	if int(m) < len(grpcNames) {
		return grpcNames[m]
	}
	return grpcNames[GRPCPass]
}

// DefaultConfig returns the configuration of an empty document.
func DefaultConfig() Config {
	return Config{MaxDepth: kvhints.DefaultMaxDepth, MaxBodyBytes: DefaultMaxBodyBytes}
}

// Policy returns the kvhints policy of the configuration.
func (c *Config) Policy() kvhints.Policy {
	return kvhints.Policy{
		Trusted:      c.TrustKVHints,
		Limits:       kvhints.Limits{MaxDepth: c.MaxDepth},
		MaxBodyBytes: c.MaxBodyBytes,
		RouterOnly:   c.RouterOnly.Body(c.Mode == ModeDetect),
	}
}

// JSON returns the configuration as a document that ParseConfig reads
// back to the same Config: every member written out, exclude_paths only
// when it has entries, trusted_senders whenever it was given (even empty). A host that builds the configuration itself (the
// sidecar, from its flags) hands the guest this, so that the guest runs
// with exactly what the host checked.
func (c *Config) JSON() []byte {
	b := append([]byte(nil), `{"trust_kv_hints":`...)
	b = strconv.AppendBool(b, c.TrustKVHints)
	b = append(b, `,"max_depth":`...)
	b = strconv.AppendInt(b, int64(c.MaxDepth), 10)
	b = append(b, `,"max_body_bytes":`...)
	b = strconv.AppendInt(b, int64(c.MaxBodyBytes), 10)
	b = append(b, `,"grpc":`...)
	b = appendJSONString(b, c.GRPC.String())
	b = append(b, `,"mode":`...)
	b = appendJSONString(b, c.Mode.String())
	if len(c.ExcludePaths) > 0 {
		b = append(b, `,"exclude_paths":[`...)
		for i, p := range c.ExcludePaths {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p)
		}
		b = append(b, ']')
	}
	if c.TrustedSenders != nil {
		b = append(b, `,"trusted_senders":[`...)
		for i, r := range c.TrustedSenders.Rules() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			n := 0
			member := func(name, v string) {
				if v == "" {
					return
				}
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = append(b, '"')
				b = append(b, name...)
				b = append(b, `":`...)
				b = appendJSONString(b, v)
			}
			member("principal", r.Principal)
			member("dns_name", r.DNSName)
			if r.SourceCIDR.IsValid() {
				member("source_cidr", r.SourceCIDR.String())
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if c.RouterOnly != nil {
		b = append(b, `,"router_only":`...)
		b = c.RouterOnly.appendJSON(b)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Exclude paths are printable
// ASCII (checkExcludePath) and sender names valid UTF-8 (the parser decoded
// them), so escaping '"', '\\' and control bytes is all it takes; other
// bytes are copied.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ConfigError says what is wrong with a plugin configuration.
type ConfigError struct {
	// Offset is the byte offset in the document where the problem was found.
	Offset int
	Msg    string
}

func (e *ConfigError) Error() string {
	return "plugin configuration: " + e.Msg + " (at byte " + strconv.Itoa(e.Offset) + ")"
}

// ParseConfig reads a plugin configuration. It follows the JSON grammar
// strictly (RFC 8259: no comments, no trailing commas, no NaN), accepts only
// the known members with values of the right type and range, and rejects
// duplicate members. A document of only whitespace means the defaults.
func ParseConfig(doc []byte) (Config, error) {
	cfg, _, err := ParseConfigMembers(doc)
	return cfg, err
}

// ParseConfigMembers is ParseConfig that also says which members the
// document wrote out: a host that lets other sources fill in what the
// document leaves unsaid (the sidecar's TRTLLM_TRUST_KV_HINTS) asks the
// reader rather than reading the document again.
func ParseConfigMembers(doc []byte) (cfg Config, given Members, err error) {
	cfg = DefaultConfig()
	r := cfgReader{b: doc}
	r.ws()
	if r.i == len(doc) {
		return cfg, given, nil
	}
	err = r.object("", "a JSON object", func(name string, at int) error {
		field, ok := lookupMember(name)
		if !ok {
			return &ConfigError{at, "unknown member " + strconv.Quote(name) + "; known: " + knownMembers}
		}
		var err error
		switch field {
		case memberTrustKVHints:
			cfg.TrustKVHints, err = r.boolean()
		case memberMaxDepth:
			cfg.MaxDepth, err = r.integer(1, MaxMaxDepth)
		case memberMaxBodyBytes:
			cfg.MaxBodyBytes, err = r.integer(1, MaxMaxBodyBytes)
		case memberExcludePaths:
			cfg.ExcludePaths, err = r.strings(maxExcludePaths, keepExcludePath)
		case memberTrustedSenders:
			cfg.TrustedSenders, err = r.senders() // names its rules itself
		case memberGRPC:
			var i int
			i, err = r.choice(grpcNames...)
			cfg.GRPC = GRPCMode(i)
		case memberMode:
			var i int
			i, err = r.choice(modeNames...)
			cfg.Mode = Mode(i)
		case memberRouterOnly:
			cfg.RouterOnly, err = r.routerOnly() // names its members itself
		}
		if err != nil {
			if field == memberTrustedSenders || field == memberRouterOnly {
				return err
			}
			return withPath(name, err)
		}
		if given.has(field) {
			return &ConfigError{at, "duplicate member " + strconv.Quote(name)}
		}
		given |= 1 << field
		return nil
	})
	if err != nil {
		return cfg, given, err
	}
	r.ws()
	if r.i != len(doc) {
		return cfg, given, r.err("data after the configuration object")
	}
	if cfg.TrustKVHints && given.has(memberTrustedSenders) {
		return cfg, given, &ConfigError{0, "trust_kv_hints: true trusts every sender, so trusted_senders would have no effect: set one or the other"}
	}
	return cfg, given, nil
}

// senders reads the trusted_senders list: a JSON array of rule objects,
// each with one or more of the string members "principal", "dns_name" and
// "source_cidr". Unknown, duplicate, empty or ill-typed members, a CIDR
// that is not a masked IPv4 or IPv6 prefix, an empty rule and more than
// MaxSenderRules rules are errors naming the rule and member.
func (r *cfgReader) senders() (*Senders, error) {
	if !r.eat('[') {
		return nil, r.pathErr("trusted_senders", "expected an array of rules")
	}
	rules := []SenderRule{}
	r.ws()
	if r.eat(']') {
		return compile(rules)
	}
	for {
		if len(rules) == MaxSenderRules {
			return nil, r.pathErr(rulePath(len(rules), ""), "more than "+strconv.Itoa(MaxSenderRules)+" rules")
		}
		rule, err := r.rule(len(rules))
		if err != nil {
			return nil, err
		}
		rules = append(rules, rule)
		r.ws()
		if r.eat(']') {
			return compile(rules)
		}
		if !r.eat(',') {
			return nil, r.pathErr("trusted_senders", "expected ',' or ']' after a rule")
		}
		r.ws()
	}
}

// compile compiles the rules the reader has checked, as NewSenders
// checks them again.
func compile(rules []SenderRule) (*Senders, error) {
	s, err := NewSenders(rules)
	if e, ok := err.(*SendersError); ok {
		return nil, &ConfigError{0, e.Error()}
	}
	return s, err
}

// ruleMembers are a sender rule's members, in the order of rule's fields.
var ruleMembers = []string{"principal", "dns_name", "source_cidr"}

// rule reads trusted_senders rule n.
func (r *cfgReader) rule(n int) (SenderRule, error) {
	var rule SenderRule
	path := rulePath(n, "")
	if save := r.i; r.eat('{') {
		if r.ws(); r.i < len(r.b) && r.b[r.i] == '}' {
			return rule, r.pathErr(path, "empty rule: set principal, dns_name or source_cidr")
		}
		r.i = save
	}
	var seen [3]bool
	err := r.object(path, "a rule object", func(name string, at int) error {
		field := slices.Index(ruleMembers, name)
		if field < 0 {
			return &ConfigError{at, path + ": unknown member " + strconv.QuoteToASCII(name) + "; known: " + strings.Join(ruleMembers, ", ")}
		}
		mpath := rulePath(n, name)
		if seen[field] {
			return &ConfigError{at, mpath + ": duplicate member"}
		}
		seen[field] = true
		vat := r.i
		v, err := r.str()
		if err != nil {
			return withPath(mpath, err)
		}
		msg := ""
		switch {
		case v == "":
			msg = "empty string"
		case field == 0:
			rule.Principal, msg = v, checkPrincipal(v)
		case field == 1:
			rule.DNSName, msg = v, checkName(v)
		default:
			rule.SourceCIDR, msg = parseCIDR(v)
		}
		if msg != "" {
			return &ConfigError{vat, mpath + ": " + msg}
		}
		return nil
	})
	return rule, err
}

// object reads a JSON object, what it is called in a message, calling
// member for each member with its name and the offset of the name, the
// cursor at the member's value. Errors in the object's own syntax name
// path (the top level's is ""); member names those in its values.
func (r *cfgReader) object(path, what string, member func(name string, at int) error) error {
	if !r.eat('{') {
		return r.pathErr(path, "expected "+what)
	}
	r.ws()
	if r.eat('}') {
		return nil
	}
	for {
		r.ws()
		at := r.i
		name, err := r.str()
		if err != nil {
			return withPath(path, err)
		}
		r.ws()
		if !r.eat(':') {
			return r.pathErr(path, "expected ':' after a member name")
		}
		r.ws()
		if err := member(name, at); err != nil {
			return err
		}
		r.ws()
		if r.eat('}') {
			return nil
		}
		if !r.eat(',') {
			return r.pathErr(path, "expected ',' or '}' after a member")
		}
	}
}

// choice reads a string that must be one of options, and returns its
// index (0 on an error, which lists them).
func (r *cfgReader) choice(options ...string) (int, error) {
	at := r.i
	v, err := r.str()
	if err != nil {
		return 0, err
	}
	if i := slices.Index(options, v); i >= 0 {
		return i, nil
	}
	return 0, &ConfigError{at, "expected " + quoteAll(options)}
}

// quoteAll lists options quoted, the last two joined by "or".
func quoteAll(options []string) string {
	q := ""
	for i, o := range options {
		switch {
		case i == 0:
		case i == len(options)-1:
			q += " or "
		default:
			q += ", "
		}
		q += strconv.Quote(o)
	}
	return q
}

// pathErr is an error at the cursor about the rule or member at path.
func (r *cfgReader) pathErr(path, msg string) error { return withPath(path, r.err(msg)) }

// withPath names the member or rule a reading error is about, so that the
// message says which setting is wrong as well as where.
func withPath(path string, err error) error {
	if ce, ok := err.(*ConfigError); ok && path != "" {
		return &ConfigError{ce.Offset, path + ": " + ce.Msg}
	}
	return err
}

// cfgReader is a cursor over a configuration document.
type cfgReader struct {
	b []byte
	i int
}

func (r *cfgReader) err(msg string) error { return &ConfigError{r.i, msg} }

func (r *cfgReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *cfgReader) eat(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *cfgReader) literal(lit string) bool {
	if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
		r.i += len(lit)
		return true
	}
	return false
}

func (r *cfgReader) boolean() (bool, error) {
	switch {
	case r.literal("true"):
		return true, nil
	case r.literal("false"):
		return false, nil
	}
	return false, r.err("expected true or false")
}

// integer reads a JSON number that must be an integer in [lo, hi].
func (r *cfgReader) integer(lo, hi int) (int, error) {
	start := r.i
	neg := r.eat('-')
	if r.i >= len(r.b) || r.b[r.i] < '0' || r.b[r.i] > '9' {
		r.i = start
		return 0, r.err("expected an integer")
	}
	v := 0
	big := false
	if r.b[r.i] == '0' {
		r.i++
	} else {
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			if v > hi {
				big = true
			} else {
				v = v*10 + int(r.b[r.i]-'0')
			}
			r.i++
		}
	}
	if r.i < len(r.b) {
		switch r.b[r.i] {
		case '.', 'e', 'E':
			return 0, &ConfigError{start, "expected an integer without fraction or exponent"}
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return 0, &ConfigError{start, "leading zeros are not allowed in JSON numbers"}
		}
	}
	if neg || big || v < lo || v > hi {
		return 0, &ConfigError{start, "value out of range " + strconv.Itoa(lo) + ".." + strconv.Itoa(hi)}
	}
	return v, nil
}

// str reads a JSON string and returns it decoded.
func (r *cfgReader) str() (string, error) {
	if !r.eat('"') {
		return "", r.err("expected a string")
	}
	var sb []byte
	from := r.i
	for {
		if r.i >= len(r.b) {
			return "", r.err("unterminated string")
		}
		c := r.b[r.i]
		switch {
		case c == '"':
			sb = append(sb, r.b[from:r.i]...)
			r.i++
			if !utf8.Valid(sb) {
				return "", &ConfigError{from - 1, "string is not valid UTF-8"}
			}
			return string(sb), nil
		case c < 0x20:
			return "", r.err("control character in string")
		case c == '\\':
			sb = append(sb, r.b[from:r.i]...)
			esc, err := r.escape()
			if err != nil {
				return "", err
			}
			sb = utf8.AppendRune(sb, esc)
			from = r.i
		default:
			r.i++
		}
	}
}

// escape reads one escape sequence starting at the backslash.
func (r *cfgReader) escape() (rune, error) {
	at := r.i
	r.i++
	if r.i >= len(r.b) {
		return 0, r.err("unterminated escape")
	}
	c := r.b[r.i]
	r.i++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		u, ok := r.hex4()
		if !ok {
			return 0, &ConfigError{at, "bad \\u escape"}
		}
		if u >= 0xdc00 && u <= 0xdfff {
			return 0, &ConfigError{at, "lone surrogate escape"}
		}
		if u >= 0xd800 && u <= 0xdbff {
			if !r.literal(`\u`) {
				return 0, &ConfigError{at, "lone surrogate escape"}
			}
			lo, ok := r.hex4()
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return 0, &ConfigError{at, "lone surrogate escape"}
			}
			return 0x10000 + (u-0xd800)<<10 + (lo - 0xdc00), nil
		}
		return u, nil
	}
	return 0, &ConfigError{at, "unknown escape"}
}

func (r *cfgReader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	r.i += 4
	return v, true
}

// strings reads a JSON array of at most max strings. keep turns each entry
// into the string kept, given those kept before it, or says why the entry
// is refused. Errors name the entry; the caller names the member.
func (r *cfgReader) strings(max int, keep func(s string, kept []string) (string, string)) ([]string, error) {
	if !r.eat('[') {
		return nil, r.err("expected an array of strings")
	}
	out := []string{}
	r.ws()
	if r.eat(']') {
		return out, nil
	}
	for {
		r.ws()
		at := r.i
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		s, msg := keep(s, out)
		if msg != "" {
			return nil, &ConfigError{at, strconv.Quote(s) + ": " + msg}
		}
		if len(out) == max {
			return nil, &ConfigError{at, "more than " + strconv.Itoa(max) + " entries"}
		}
		out = append(out, s)
		r.ws()
		if r.eat(']') {
			return out, nil
		}
		if !r.eat(',') {
			return nil, r.err("expected ',' or ']'")
		}
	}
}

// keepExcludePath keeps a valid exclude_paths entry as written.
func keepExcludePath(p string, _ []string) (string, string) { return p, checkExcludePath(p) }

// checkExcludePath says what is wrong with an exclude_paths entry, or "".
func checkExcludePath(p string) string {
	if strings.HasSuffix(p, "/*") {
		p = p[:len(p)-1]
	}
	if !strings.HasPrefix(p, "/") {
		return "must start with '/'"
	}
	if strings.ContainsAny(p, "?#*") {
		return "must be a path without query, fragment or '*' (other than a final \"/*\")"
	}
	if !canonicalPath(p) {
		return "must be a canonical path: no percent-encoding, backslash, empty, '.' or '..' segment, control or non-ASCII byte"
	}
	return ""
}

// canonicalPath reports whether p (without query) is a path that every
// server reads the same way: ASCII without controls, spaces, percent
// escapes or backslashes, and without empty, "." or ".." segments.
func canonicalPath(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == '\\' {
			return false
		}
	}
	// Check segments; a single trailing slash is allowed ("/a/").
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(p, "//")
}

// Excluded reports whether a request's :path (with any query) is excluded
// from inspection. A path that is not canonical is never excluded: the
// worker might decode it to an excluded path or to another, so it is
// inspected.
func (c *Config) Excluded(rawPath []byte) bool {
	if len(c.ExcludePaths) == 0 {
		return false
	}
	p := rawPath
	for i, b := range p {
		if b == '?' || b == '#' {
			p = p[:i]
			break
		}
	}
	path := string(p)
	if !canonicalPath(path) {
		return false
	}
	for _, e := range c.ExcludePaths {
		if strings.HasSuffix(e, "/*") {
			if strings.HasPrefix(path, e[:len(e)-1]) && len(path) > len(e)-1 {
				return true
			}
		} else if path == e {
			return true
		}
	}
	return false
}
