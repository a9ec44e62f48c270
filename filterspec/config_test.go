package filterspec

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

func TestParseConfig(t *testing.T) {
	def := DefaultConfig()
	with := func(f func(*Config)) Config { c := def; f(&c); return c }
	ok := []struct {
		doc  string
		want Config
	}{
		{``, def},
		{" \n\t", def},
		{`{}`, def},
		{` { } `, def},
		{`{"trust_kv_hints":true}`, with(func(c *Config) { c.TrustKVHints = true })},
		{`{"trust_kv_hints":false,"max_depth":7}`, with(func(c *Config) { c.MaxDepth = 7 })},
		{`{"max_body_bytes":1}`, with(func(c *Config) { c.MaxBodyBytes = 1 })},
		{`{"max_body_bytes":268435456}`, with(func(c *Config) { c.MaxBodyBytes = 268435456 })},
		{`{"exclude_paths":[]}`, with(func(c *Config) { c.ExcludePaths = []string{} })},
		{`{"exclude_paths":["/healthz", "/static/*","/"]}`, with(func(c *Config) { c.ExcludePaths = []string{"/healthz", "/static/*", "/"} })},
		{`{"exclude_paths":["\/a\u0062c"]}`, with(func(c *Config) { c.ExcludePaths = []string{"/abc"} })},
		{`{"grpc":"pass"}`, def},
		{`{"grpc":"refuse"}`, with(func(c *Config) { c.GRPC = GRPCRefuse })},
		{"{\n  \"trust_kv_hints\" : true ,\n  \"max_depth\" : 100000,\n  \"max_body_bytes\": 4194304\n}\n",
			with(func(c *Config) { c.TrustKVHints, c.MaxDepth = true, 100000 })},
	}
	for _, tc := range ok {
		got, err := ParseConfig([]byte(tc.doc))
		if err != nil {
			t.Errorf("%q: %v", tc.doc, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v want %+v", tc.doc, got, tc.want)
		}
	}
	bad := []struct{ doc, msg string }{
		{`null`, "expected a JSON object"},
		{`[]`, "expected a JSON object"},
		{`{"trust_kv_hints":true`, "expected ','"},
		{`{"trust_kv_hints":true,}`, "expected a string"},
		{`{"trust_kv_hints":1}`, "expected true or false"},
		{`{"trust_kv_hints":"true"}`, "expected true or false"},
		{`{"trust_kv_hints":null}`, "expected true or false"},
		{`{"trust_kv_hints":true,"trust_kv_hints":false}`, "duplicate member"},
		{`{"trust":true}`, `unknown member "trust"`},
		{`{"grpc":"deny"}`, `grpc: expected "pass" or "refuse"`},
		{`{"grpc":true}`, "expected a string"},
		{`{"grpc":"pass","grpc":"refuse"}`, "duplicate member"},
		{`{"mode":"observe"}`, `mode: expected "enforce" or "detect"`},
		{`{"mode":true}`, `expected`},
		{`{"mode":"detect","mode":"detect"}`, "duplicate member"},
		{`{"Trust_KV_Hints":true}`, `unknown member`},
		{`{"max_depth":0}`, "out of range"},
		{`{"max_depth":-1}`, "out of range"},
		{`{"max_depth":100001}`, "out of range"},
		{`{"max_depth":1.5}`, "without fraction"},
		{`{"max_depth":1e2}`, "without fraction"},
		{`{"max_depth":012}`, "leading zeros"},
		{`{"max_depth":"12"}`, "expected an integer"},
		{`{"max_body_bytes":99999999999999999999999999}`, "out of range"},
		{`{"max_body_bytes":268435457}`, "out of range"},
		{`{"exclude_paths":"/a"}`, "expected an array"},
		{`{"exclude_paths":["a"]}`, "must start with '/'"},
		{`{"exclude_paths":["/a?b"]}`, "without query"},
		{`{"exclude_paths":["/a*"]}`, "without query"},
		{`{"exclude_paths":["/%61"]}`, "canonical"},
		{`{"exclude_paths":["/a/../b"]}`, "canonical"},
		{`{"exclude_paths":["//a"]}`, "canonical"},
		{`{"exclude_paths":["/a\\b"]}`, "canonical"},
		{`{"exclude_paths":["/\u00e9"]}`, "canonical"},
		{`{"exclude_paths":[1]}`, "expected a string"},
		{`{"exclude_paths":["/a",]}`, "expected a string"},
		{`{"exclude_paths":["/\ud800"]}`, "lone surrogate"},
		{`{"exclude_paths":["/\x"]}`, "unknown escape"},
		{"{\"exclude_paths\":[\"/\x01\"]}", "control character"},
		{"{\"exclude_paths\":[\"/\xff\"]}", "not valid UTF-8"},
		{`{} {}`, "data after"},
		{"\ufeff{}", "expected a JSON object"},
		{`{"max_depth":NaN}`, "expected an integer"},
		{`{"a":1`, "unknown member"},
		{`{"exclude_paths":["/a"`, "expected ',' or ']'"},
		{`{"exclude_paths":["/a`, "unterminated string"},
		{`{"trusted_senders":{}}`, "trusted_senders: expected an array of rules"},
		{`{"trusted_senders":[{"dns_name":"a"},{"dns_name":"b"},{"dns_name":"c"},{"source_cidr":"10.0.0.0/40"}]}`, "trusted_senders[3].source_cidr: not an IPv4 or IPv6 CIDR"},
		{`{"trusted_senders":[{"principal":""}]}`, "trusted_senders[0].principal: empty string"},
		{`{"trusted_senders":[{"spiffe_id":"x"}]}`, `trusted_senders[0]: unknown member "spiffe_id"`},
		{`{"trusted_senders":[{}]}`, "trusted_senders[0]: empty rule"},
		{`{"trusted_senders":[{"dns_name":"a","dns_name":"a"}]}`, "trusted_senders[0].dns_name: duplicate member"},
		{`{"trusted_senders":[],"trusted_senders":[]}`, `duplicate member "trusted_senders"`},
		{`{"trust_kv_hints":true,"trusted_senders":[{"dns_name":"a"}]}`, "trust_kv_hints: true trusts every sender"},
		{`{"trusted_senders":[{"dns_name":"a"}],"trust_kv_hints":true}`, "trust_kv_hints: true trusts every sender"},
		{`{"trusted_senders":[],"trust_kv_hints":true}`, "trust_kv_hints: true trusts every sender"},
		{`{"trusted_senders":[{"dns_name":"a"}] x}`, "expected ',' or '}'"},
	}
	for _, tc := range bad {
		_, err := ParseConfig([]byte(tc.doc))
		if err == nil {
			t.Errorf("%q: accepted", tc.doc)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %q does not mention %q", tc.doc, err, tc.msg)
		}
	}
}

func TestExcluded(t *testing.T) {
	c := Config{ExcludePaths: []string{"/healthz", "/static/*"}}
	for path, want := range map[string]bool{
		"/healthz":           true,
		"/healthz?x=1":       true,
		"/healthz/":          false,
		"/HEALTHZ":           false,
		"/static/a.js":       true,
		"/static/":           false,
		"/static":            false,
		"/static/../v1/chat": false,
		"/static/%2e%2e/v1":  false,
		"//healthz":          false,
		"/static//x":         false,
		"/v1/chat":           false,
		"":                   false,
	} {
		if got := c.Excluded([]byte(path)); got != want {
			t.Errorf("%q: got %v", path, got)
		}
	}
}

// FuzzParseConfig checks that the reader never panics and agrees with
// encoding/json about what is JSON: every document it accepts is valid JSON
// whose members decode to the same values.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"trust_kv_hints":true,"max_depth":5,"max_body_bytes":100,"exclude_paths":["/a","/b/*"]}`,
		`{"exclude_paths":["\u002fa\ud83d\ude00"]}`, `{"max_depth":1e3}`, `{"x":1}`, `[`, `{"trust_kv_hints":tru}`,
		`{"trusted_senders":[{"principal":"spiffe://td/ns/llm/sa/*","source_cidr":"10.8.0.0/16"},{"dns_name":"r.svc"}]}`,
		`{"router_only":{"engines":["vllm","llm-d"],"members":["a.b","c"],"headers":["X-A"],"untrusted":"refuse"}}`,
		`{"router_only":{}}`, `{"router_only":{"members":["a","a.b"],"headers":["x-\u0041"]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, err := ParseConfig(doc)
		if err != nil {
			return
		}
		checkJSONRoundTrip(t, cfg)
		if strings.TrimSpace(string(doc)) == "" {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("accepted invalid JSON %q: %v", doc, err)
		}
		if v, ok := m["exclude_paths"]; ok {
			var ps []string
			if err := json.Unmarshal(v, &ps); err != nil || !reflect.DeepEqual(ps, cfg.ExcludePaths) {
				t.Fatalf("%q: exclude_paths %q, encoding/json %q (%v)", doc, cfg.ExcludePaths, ps, err)
			}
		}
		if v, ok := m["max_body_bytes"]; ok {
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n != cfg.MaxBodyBytes {
				t.Fatalf("%q: max_body_bytes %d, encoding/json %d (%v)", doc, cfg.MaxBodyBytes, n, err)
			}
		}
		if v, ok := m["max_depth"]; ok {
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n != cfg.MaxDepth {
				t.Fatalf("%q: max_depth %d, encoding/json %d (%v)", doc, cfg.MaxDepth, n, err)
			}
		}
		if v, ok := m["trusted_senders"]; ok {
			var rules []map[string]string
			if err := json.Unmarshal(v, &rules); err != nil || len(rules) != cfg.TrustedSenders.Len() {
				t.Fatalf("%q: %d trusted_senders, encoding/json %d (%v)", doc, cfg.TrustedSenders.Len(), len(rules), err)
			}
			for i, r := range cfg.TrustedSenders.Rules() {
				var cidr netip.Prefix
				if c, ok := rules[i]["source_cidr"]; ok {
					cidr, _ = netip.ParsePrefix(c)
				}
				if rules[i]["principal"] != r.Principal || rules[i]["dns_name"] != r.DNSName || cidr != r.SourceCIDR {
					t.Fatalf("%q: rule %d %+v, encoding/json %q", doc, i, r, rules[i])
				}
			}
		}
		if v, ok := m["router_only"]; ok {
			var ro struct{ Engines, Members, Headers []string }
			if err := json.Unmarshal(v, &ro); err != nil {
				t.Fatalf("%q: router_only: %v", doc, err)
			}
			for i := range ro.Headers {
				ro.Headers[i] = strings.ToLower(ro.Headers[i])
			}
			got := cfg.RouterOnly
			if !slices.Equal(ro.Engines, got.Engines) || !slices.Equal(ro.Members, got.Members) || !slices.Equal(ro.Headers, got.Headers) {
				t.Fatalf("%q: router_only %+v, encoding/json %+v", doc, got, ro)
			}
			if len(got.Fields()) > kvhints.MaxRouterOnlyPaths {
				t.Fatalf("%q: %d fields", doc, len(got.Fields()))
			}
		}
		if v, ok := m["trust_kv_hints"]; ok {
			var b bool
			if err := json.Unmarshal(v, &b); err != nil || b != cfg.TrustKVHints {
				t.Fatalf("%q: trust_kv_hints %v, encoding/json %v (%v)", doc, cfg.TrustKVHints, b, err)
			}
		}
	})
}

// checkJSONRoundTrip checks that cfg.JSON is a document that ParseConfig
// reads back to cfg.
func checkJSONRoundTrip(t *testing.T, cfg Config) {
	t.Helper()
	doc := cfg.JSON()
	back, err := ParseConfig(doc)
	if len(cfg.ExcludePaths) == 0 {
		cfg.ExcludePaths = nil // written out only when there are entries
	}
	if err != nil || !reflect.DeepEqual(back, cfg) || !json.Valid(doc) {
		t.Fatalf("%+v: JSON %s reads back as %+v (%v)", cfg, doc, back, err)
	}
}

func TestConfigJSON(t *testing.T) {
	cfg := DefaultConfig()
	if got := string(cfg.JSON()); got != `{"trust_kv_hints":false,"max_depth":128,"max_body_bytes":4194304,"grpc":"pass","mode":"enforce"}` {
		t.Errorf("defaults: %s", got)
	}
	for _, doc := range []string{``, `{}`, `{"exclude_paths":[]}`,
		`{"trust_kv_hints":true,"max_depth":1,"max_body_bytes":268435456,"exclude_paths":["/a\"b","/c/*","/~!$&'()+,;=:@"]}`,
		`{"grpc":"refuse","trusted_senders":[{"principal":"spiffe://td/ns/llm/sa/*","source_cidr":"10.8.0.0/16"},{"dns_name":"r.svc"}]}`,
		`{"mode":"detect"}`, `{"mode":"enforce","trust_kv_hints":true}`} {
		cfg, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		checkJSONRoundTrip(t, cfg)
	}
}

// Every member of the table is one the parser reads, and the
// unknown-member error lists the table, in its order.
func TestMemberTable(t *testing.T) {
	values := map[string]string{
		"trust_kv_hints": "false", "max_depth": "1", "max_body_bytes": "1", "exclude_paths": "[]",
		"grpc": `"pass"`, "trusted_senders": "[]", "mode": `"enforce"`, "router_only": "{}",
	}
	if len(values) != len(members) {
		t.Fatalf("the test has values for %d members, the table has %d", len(values), len(members))
	}
	var doc []string
	for _, m := range members {
		v, ok := values[m]
		if !ok {
			t.Fatalf("no test value for member %q", m)
		}
		doc = append(doc, strconv.Quote(m)+":"+v)
	}
	_, given, err := ParseConfigMembers([]byte("{" + strings.Join(doc, ",") + "}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !given.Has(m) {
			t.Errorf("Has(%q) = false for a document with every member", m)
		}
	}
	_, err = ParseConfig([]byte(`{"trust":true}`))
	const want = `unknown member "trust"; known: trust_kv_hints, max_depth, max_body_bytes, exclude_paths, grpc, trusted_senders, mode, router_only`
	if ce, ok := err.(*ConfigError); !ok || ce.Msg != want {
		t.Errorf("ParseConfig(trust) = %v, want %s", err, want)
	}
}

// Has says which members the document wrote out, defaults included.
func TestHas(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{``, nil},
		{`{}`, nil},
		{`{"trust_kv_hints":false}`, []string{"trust_kv_hints"}},
		{`{"max_depth":128,"mode":"enforce","trusted_senders":[]}`, []string{"max_depth", "mode", "trusted_senders"}},
		{`{"exclude_paths":[],"grpc":"pass","max_body_bytes":1}`, []string{"exclude_paths", "grpc", "max_body_bytes"}},
	} {
		_, given, err := ParseConfigMembers([]byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.doc, err)
		}
		for _, m := range members {
			if got, want := given.Has(m), slices.Contains(c.want, m); got != want {
				t.Errorf("%s: Has(%q) = %v, want %v", c.doc, m, got, want)
			}
		}
		if given.Has("no_such_member") {
			t.Errorf("%s: Has an unknown member", c.doc)
		}
	}
}

// The enumerations' names come from the tables the reader takes them from,
// and a value outside the constants reads as the default it acts as.
func TestEnumNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ModeEnforce.String(), "enforce"}, {ModeDetect.String(), "detect"}, {Mode(9).String(), "enforce"},
		{GRPCPass.String(), "pass"}, {GRPCRefuse.String(), "refuse"}, {GRPCMode(9).String(), "pass"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, c := range []struct {
		doc  string
		want Config
	}{
		{`{"mode":"detect","grpc":"refuse"}`, Config{Mode: ModeDetect, GRPC: GRPCRefuse}},
		{`{"mode":"enforce","grpc":"pass"}`, Config{Mode: ModeEnforce, GRPC: GRPCPass}},
	} {
		cfg, err := ParseConfig([]byte(c.doc))
		if err != nil || cfg.Mode != c.want.Mode || cfg.GRPC != c.want.GRPC {
			t.Errorf("%s: mode %v grpc %v (%v), want %v %v", c.doc, cfg.Mode, cfg.GRPC, err, c.want.Mode, c.want.GRPC)
		}
	}
}
