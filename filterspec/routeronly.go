package filterspec

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/kvhints"
)

// Preset is the router-only fields of one engine (docs/router-only.md
// cites each at the engine's source): body member paths and request
// header names that only a router sets, and that the engine acts on.
type Preset struct {
	Engine  string
	Members []string
	Headers []string
}

// presets are the engines router_only.engines can name, in the order the
// documentation lists them.
var presets = []Preset{
	{Engine: "vllm",
		Members: []string{"kv_transfer_params", "ec_transfer_params"},
		Headers: []string{"x-data-parallel-rank"}},
	{Engine: "sglang",
		Members: []string{"bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key", "decode_tp_size",
			"routed_dp_rank", "disagg_prefill_dp_rank", "data_parallel_rank", "kv_router_hint"},
		Headers: []string{"x-data-parallel-rank"}},
	{Engine: "trtllm",
		Members: []string{"disaggregated_params", "prompt_token_ids", "prompt_token_ids_b64"},
		Headers: []string{"x-trtllm-disagg-auth", "x-trtllm-subagent-affinity-id"}},
	{Engine: "dynamo",
		Members: []string{"nvext.backend_instance_id", "nvext.decode_worker_id", "nvext.prefill_worker_id", "nvext.dp_rank",
			"nvext.prefill_dp_rank", "nvext.token_data", "nvext.use_raw_prompt"},
		Headers: []string{"x-dynamo-worker-instance-id", "x-dynamo-prefill-instance-id", "x-dynamo-dp-rank", "x-dynamo-prefill-dp-rank",
			"x-worker-instance-id", "x-prefill-instance-id", "x-dp-rank", "x-data-parallel-rank", "x-prefill-dp-rank"}},
	{Engine: "llm-d",
		Headers: []string{"x-prefiller-host-port", "x-prefiller-url", "x-kv-cache-source-host-port", "x-encoder-hosts-ports",
			"x-data-parallel-host-port"}},
}

// Presets returns the engines' presets, in documentation order.
func Presets() []Preset { return presets }

// PresetOf returns the preset of engine, or false.
func PresetOf(engine string) (Preset, bool) {
	for _, p := range presets {
		if p.Engine == engine {
			return p, true
		}
	}
	return Preset{}, false
}

// engineNames is the list an unknown engine's error names.
func engineNames() string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Engine
	}
	return strings.Join(names, ", ")
}

// RouterOnly is the "router_only" member of the configuration
// (docs/spec.md, Router-only fields): the fields of the engines named and
// the operator's own, removed from an untrusted sender's request, or the
// reason it is refused.
type RouterOnly struct {
	// Engines, Members and Headers are as configured (headers in lower
	// case); Refuse is "untrusted": "refuse".
	Engines []string
	Members []string
	Headers []string
	Refuse  bool

	// fields are every member path, then every header name, presets'
	// first, each once: field i is bit i of kvhints.Result.RouterOnly for
	// a member, and of the filter's header mask.
	fields  []string
	members int
	strip   *kvhints.RouterOnly
	refuse  *kvhints.RouterOnly
	// hlens has bit n set when a header name has n bytes (at most 128):
	// most request headers are turned away on their length alone.
	hlens [3]uint64
}

// Fields returns every field, member paths first (NumMembers of them),
// then header names: the values of the field label, in series order.
func (ro *RouterOnly) Fields() []string {
	if ro == nil {
		return nil
	}
	return ro.fields
}

// NumMembers is the number of member paths among Fields.
func (ro *RouterOnly) NumMembers() int {
	if ro == nil {
		return 0
	}
	return ro.members
}

// NumHeaders is the number of header names among Fields.
func (ro *RouterOnly) NumHeaders() int {
	if ro == nil {
		return 0
	}
	return len(ro.fields) - ro.members
}

// Header returns field index of header name (as received, any case), or
// -1 when it is not router-only.
func (ro *RouterOnly) Header(name []byte) int {
	if l := len(name); l > 128 || ro.hlens[l>>6]&(1<<(l&63)) == 0 {
		return -1
	}
	for i, h := range ro.fields[ro.members:] {
		if kvhints.EqualFold(name, h) {
			return ro.members + i
		}
	}
	return -1
}

// Body returns the compiled member paths; refuse as configured, or with
// strip whatever is configured (detect mode, which only reports).
func (ro *RouterOnly) Body(detect bool) *kvhints.RouterOnly {
	if ro == nil || ro.members == 0 {
		return nil
	}
	if ro.Refuse && !detect {
		return ro.refuse
	}
	return ro.strip
}

// Names returns the comma-separated names of the fields in mask, for the
// access log: never values.
func (ro *RouterOnly) Names(mask uint64) string {
	var b strings.Builder
	for i, f := range ro.fields {
		if mask&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f)
		}
	}
	return b.String()
}

// framingHeaders are the headers the filter, the HTTP framing or the
// worker's reading of the body depend on: never router-only.
var framingHeaders = []string{"host", "content-length", "content-type", "content-encoding", "transfer-encoding",
	"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"}

// checkHeader says what is wrong with a router-only header name (lower
// case), or "".
func checkHeader(h string) string {
	if h == "" || len(h) > 128 {
		return "must be 1 to 128 bytes"
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return "names may hold only ASCII letters, digits, '-' and '_'"
		}
	}
	for _, f := range framingHeaders {
		if h == f {
			return "the HTTP framing and the filter depend on it"
		}
	}
	return ""
}

// compile checks the configured lists and builds the fields and the
// compiled member paths. Errors name the list and the entry.
func (ro *RouterOnly) compile() string {
	var members, headers []string
	add := func(list *[]string, v string) {
		for _, have := range *list {
			if have == v {
				return
			}
		}
		*list = append(*list, v)
	}
	for _, e := range ro.Engines {
		p, ok := PresetOf(e)
		if !ok {
			return "router_only.engines: unknown engine " + strconv.Quote(e) + "; known: " + engineNames()
		}
		for _, m := range p.Members {
			add(&members, m)
		}
		for _, h := range p.Headers {
			add(&headers, h)
		}
	}
	for _, m := range ro.Members {
		add(&members, m)
	}
	for i, h := range ro.Headers {
		if msg := checkHeader(h); msg != "" {
			return "router_only.headers[" + strconv.Itoa(i) + "] " + strconv.Quote(h) + ": " + msg
		}
		add(&headers, h)
	}
	if n := len(members) + len(headers); n > kvhints.MaxRouterOnlyPaths {
		return "router_only: " + strconv.Itoa(n) + " fields, more than " + strconv.Itoa(kvhints.MaxRouterOnlyPaths)
	}
	var err error
	if len(members) > 0 {
		if ro.strip, err = kvhints.NewRouterOnly(members, false); err != nil {
			return "router_only.members: " + err.Error()
		}
		ro.refuse, _ = kvhints.NewRouterOnly(members, true)
	}
	ro.fields = append(members, headers...)
	ro.members = len(members)
	for _, h := range headers {
		ro.hlens[len(h)>>6] |= 1 << (len(h) & 63)
	}
	return ""
}

// NewRouterOnly checks and compiles a router_only setting made in code
// (the sidecar's flags), as the configuration reader does.
func NewRouterOnly(engines, members, headers []string, refuse bool) (*RouterOnly, error) {
	ro := &RouterOnly{Engines: engines, Members: members, Refuse: refuse}
	for _, h := range headers {
		ro.Headers = append(ro.Headers, strings.ToLower(h))
	}
	if msg := ro.compile(); msg != "" {
		return nil, &ConfigError{0, msg}
	}
	return ro, nil
}

// appendJSON appends the member's value as the reader reads it back.
func (ro *RouterOnly) appendJSON(b []byte) []byte {
	list := func(name string, v []string) {
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":[`...)
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, "],"...)
	}
	b = append(b, '{')
	list("engines", ro.Engines)
	list("members", ro.Members)
	list("headers", ro.Headers)
	untrusted := "strip"
	if ro.Refuse {
		untrusted = "refuse"
	}
	b = append(b, `"untrusted":`...)
	b = appendJSONString(b, untrusted)
	return append(b, '}')
}

// routerOnlyMembers are the router_only object's members, in the order of
// routerOnly's cases.
var routerOnlyMembers = []string{"engines", "members", "headers", "untrusted"}

// routerOnly reads the router_only object.
func (r *cfgReader) routerOnly() (*RouterOnly, error) {
	ro := &RouterOnly{Engines: []string{}, Members: []string{}, Headers: []string{}}
	var seen [4]bool
	err := r.object("router_only", "an object", func(name string, at int) error {
		field := slices.Index(routerOnlyMembers, name)
		var err error
		switch field {
		case 0:
			ro.Engines, err = r.strings(kvhints.MaxRouterOnlyPaths, distinct(false))
		case 1:
			ro.Members, err = r.strings(kvhints.MaxRouterOnlyPaths, distinct(false))
		case 2:
			ro.Headers, err = r.strings(kvhints.MaxRouterOnlyPaths, distinct(true))
		case 3:
			var i int
			if i, err = r.choice("strip", "refuse"); err == nil {
				ro.Refuse = i == 1
			}
		default:
			return &ConfigError{at, "router_only: unknown member " + strconv.QuoteToASCII(name) + "; known: " + strings.Join(routerOnlyMembers, ", ")}
		}
		if err != nil {
			return withPath("router_only."+name, err)
		}
		if seen[field] {
			return &ConfigError{at, "router_only: duplicate member " + strconv.Quote(name)}
		}
		seen[field] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if msg := ro.compile(); msg != "" {
		return nil, &ConfigError{r.i, msg}
	}
	return ro, nil
}

// distinct keeps an entry that is not among those kept, lower-cased when
// lower is set.
func distinct(lower bool) func(string, []string) (string, string) {
	return func(s string, kept []string) (string, string) {
		if lower {
			s = strings.ToLower(s)
		}
		if slices.Contains(kept, s) {
			return s, "listed twice"
		}
		return s, ""
	}
}
