package envoybench

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/kvhints"
)

// Body sizes of the three loads.
const (
	smallBody = 4 << 10
	largeBody = 1 << 20
)

// envelope returns an admissible kv.fetch envelope of about n bytes (the
// reference envelope of docs/spec.md for n = 0).
func envelope(n int) []byte {
	encode := func(k int) []byte {
		hashes := []uint64{11, 22}
		if n > 0 {
			hashes = make([]uint64, k)
			h := uint64(0x9e3779b97f4a7c15)
			for i := range hashes {
				h = h*6364136223846793005 + 1442695040888963407
				hashes[i] = h | 1<<63
			}
		}
		a, err := kvhints.NewFetchAction("a1", "tcp://127.0.0.1:23280", hashes)
		if err != nil {
			panic(err)
		}
		e, err := kvhints.NewEnvelope("msg-123", []kvhints.Action{a})
		if err != nil {
			panic(err)
		}
		b, err := e.Encode()
		if err != nil {
			panic(err)
		}
		return b
	}
	if n == 0 {
		return encode(0)
	}
	k := (n - len(encode(0))) / 21
	for len(encode(k)) > n {
		k--
	}
	return encode(k)
}

// prose is the user message's text: English with a quotation and a line
// break, a few escapes per paragraph like a real prompt.
const prose = `Serving stacks route each request to a worker that may already hold part of its KV cache; ` +
	`the router can say \"fetch these blocks from there\" and the worker decides. \n`

// chatBody returns a chat completion request of exactly n bytes carrying
// hint as its kv_hints member.
func chatBody(n int, hint []byte) []byte {
	head := `{"model":"meta-llama/Llama-3.1-8B-Instruct","kv_hints":` + string(hint) +
		`,"max_tokens":16,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	text := strings.Repeat(prose, (n-len(head)-len(tail))/len(prose)+1)[:n-len(head)-len(tail)]
	text = strings.TrimRight(text, `\`) // never end on half an escape
	for len(head)+len(text)+len(tail) < n {
		text += "."
	}
	return []byte(head + text + tail)
}

// bodies are the request bodies a row is sent: a 4 KiB and a 1 MiB chat
// request, with the reference hint for untrusted rows, with a 2 KiB
// kv.fetch envelope for the trusted row.
type bodies struct{ small, large []byte }

var (
	referenceBodies = bodies{chatBody(smallBody, envelope(0)), chatBody(largeBody, envelope(0))}
	envelopeBodies  = bodies{chatBody(smallBody, envelope(2048)), chatBody(largeBody, envelope(2048))}
)

// A row is one Envoy configuration under test, on a listener of its own.
type row struct {
	ID, Name string
	// Filters are the HTTP filters before the router (see filters).
	Filters string
	// PluginConfig is the wasm module's configuration, for wasm rows.
	PluginConfig string
	// Trusted rows are sent envelopeBodies, the others referenceBodies.
	Trusted bool
	// Rewrites rows forward what kvhints makes of the body; the others
	// forward it unchanged.
	Rewrites bool
	// OptIn rows run only when KVGATE_ENVOY_ROWS names them.
	OptIn bool
	// Ext says the row's work is done by the ext_proc server.
	Ext bool

	port int
}

func (r *row) bodies() bodies {
	if r.Trusted {
		return envelopeBodies
	}
	return referenceBodies
}

// want returns the body the worker must receive when the row is sent body.
func (r *row) want(body []byte) []byte {
	if !r.Rewrites {
		return body
	}
	cfg := filterspec.DefaultConfig()
	cfg.TrustKVHints = r.Trusted
	out, res := kvhints.Rewrite(body, cfg.Policy())
	if res.Outcome == kvhints.OutcomeRejected {
		panic("benchmark body rejected: " + res.Message)
	}
	return out
}

// rows are the configurations, in table order; baseline is the row the
// others are compared with. With $KVGATE_WASM_B set, rows d' and e' run
// that build of the module beside d and e, to compare two builds in one
// run; $KVGATE_ENVOY_ROWS (IDs separated by commas, the baseline always
// among them) keeps only some rows.
func rows() []*row {
	rs := allRows()
	if os.Getenv("KVGATE_WASM_B") != "" {
		var with []*row
		for _, r := range rs {
			with = append(with, r)
			if r.Filters == "kvgate" {
				b := *r
				b.ID, b.Name, b.Filters = r.ID+"'", r.Name+" (build B)", "kvgate-b"
				with = append(with, &b)
			}
		}
		rs = with
	}
	keep := os.Getenv("KVGATE_ENVOY_ROWS")
	ids := strings.Split(keep+","+baseline, ",")
	rs = slices.DeleteFunc(rs, func(r *row) bool { return (keep != "" || r.OptIn) && !slices.Contains(ids, r.ID) })
	return rs
}

func allRows() []*row {
	return []*row{
		{ID: "a", Name: "router only", Filters: ""},
		{ID: "b", Name: "buffer filter", Filters: "buffer"},
		{ID: "c0", Name: "bare wasm, no-op (no Go runtime)", Filters: "bare"},
		{ID: "c", Name: "Go wasm, no-op", Filters: "noop", PluginConfig: ""},
		{ID: "c2", Name: "Go wasm, no-op + kvgate's host calls", Filters: "noop", PluginConfig: "calls"},
		{ID: "d", Name: "kvgate, untrusted", Filters: "kvgate", PluginConfig: `{"trust_kv_hints": false}`, Rewrites: true},
		{ID: "e", Name: "kvgate, trusted, 2 KiB envelope", Filters: "kvgate", PluginConfig: `{"trust_kv_hints": true}`, Trusted: true, Rewrites: true},
		{ID: "f", Name: "ext_proc (Go gRPC), untrusted", Filters: "ext_proc", Rewrites: true, Ext: true},
		{ID: "n0", Name: "bare dynamic module, no-op (C, no Go runtime)", Filters: "native-c"},
		{ID: "nb", Name: "bare dynamic module, buffers the body (C, no Go runtime)", Filters: "native-c", PluginConfig: "buffer"},
		{ID: "nk", Name: "the C module of nb, also making kvgate's Envoy calls (no Go runtime)", Filters: "native-c", PluginConfig: "calls"},
		{ID: "nr", Name: "the C module of nk, also writing the body back through Envoy's calls (no Go runtime)", Filters: "native-c", PluginConfig: "rewrite"},
		{ID: "np", Name: "the C module of nr, also touching as many memory pages as n (no Go runtime)", Filters: "native-c", PluginConfig: "pages"},
		// nc runs only alone among the native rows, with
		// KVGATE_NATIVE_MODULE set to a kvgate_noop build (a process runs
		// one Go module; envoy/native/libkvgate/noop.go): KVGATE_ENVOY_ROWS=b,n0,nc.
		{ID: "nc", Name: "Go dynamic module, no-op (kvgate_noop build)", Filters: "native", OptIn: true},
		{ID: "n", Name: "kvgate native module, untrusted", Filters: "native", PluginConfig: `{"trust_kv_hints": false}`, Rewrites: true},
		// nw needs KVGATE_W2C_MODULE (tests/wasm2c): KVGATE_ENVOY_ROWS=b,nk,nw,n.
		{ID: "nw", Name: "kvgate.wasm compiled to C (wasm2c) behind C hooks, untrusted (no runtime)", Filters: "native-w2c", PluginConfig: `{"trust_kv_hints": false}`, Rewrites: true, OptIn: true},
		{ID: "n2", Name: "kvgate native module, trusted, 2 KiB envelope", Filters: "native", PluginConfig: `{"trust_kv_hints": true}`, Trusted: true, Rewrites: true},
	}
}

const baseline = "b"

// setup is what a bootstrap is rendered for.
type setup struct {
	AdminPort   int
	Worker      string // host:port
	ExtProc     string // host:port
	KvgatePath  string // wasm/kvgate.wasm
	KvgateBPath string // $KVGATE_WASM_B, for rows d' and e'
	NoopPath    string // the built testdata/noop
	NativePath  string // the built native module (bin/libkvgate.so)
	CModulePath string // the built testdata/cmodule
	W2CPath     string // $KVGATE_W2C_MODULE, row nw's module
	BarePath    string // bareModule
	BodyLimit   int
	Concurrency int
}

// bootstrap renders one Envoy bootstrap with a listener per row. Every
// listener is a copy of the committed envoy/envoy.yaml listener (its
// buffer limits, route and local replies), with the row's HTTP filters in
// place of the committed ones; a wasm row's filter is a copy of the
// committed wasm filter (runtime, failure policy) with its own module,
// configuration and VM, so no two rows share a VM; a native row's is a
// copy of envoy/envoy-native.yaml's dynamic-module filter with its own
// configuration (the module is loaded once, as Envoy loads any).
func bootstrap(s setup, rs []*row) ([]byte, error) {
	d, err := envoyconfig.Parse(envoy.Bootstrap)
	if err != nil {
		return nil, err
	}
	tl, err := envoyconfig.Dig(d, "static_resources", "listeners", 0)
	if err != nil {
		return nil, err
	}
	hf, err := envoyconfig.Dig(tl, "filter_chains", 0, "filters", 0, "typed_config", "http_filters")
	if err != nil {
		return nil, err
	}
	var wasm, router any
	for _, f := range hf.([]any) {
		switch f.(envoyconfig.Doc)["name"] {
		case envoy.WasmFilterName:
			wasm = f
		case "envoy.filters.http.router":
			router = f
		}
	}
	if wasm == nil || router == nil {
		return nil, fmt.Errorf("the committed listener lacks the wasm filter or the router")
	}
	nb, err := envoyconfig.Parse(envoy.NativeBootstrap)
	if err != nil {
		return nil, err
	}
	native, err := envoyconfig.NativeConfig(nb)
	if err != nil {
		return nil, err
	}
	var listeners []any
	for _, r := range rs {
		l := clone(tl).(envoyconfig.Doc)
		l["name"] = "row-" + r.ID
		l["address"] = envoyconfig.Doc{"socket_address": envoyconfig.Doc{"address": "127.0.0.1", "port_value": r.port}}
		fc := l["filter_chains"].([]any)[0].(envoyconfig.Doc)
		delete(fc, "transport_socket") // the benchmark is plain HTTP on loopback
		var filters []any
		switch r.Filters {
		case "":
		case "buffer":
			filters = append(filters, envoyconfig.Doc{"name": "envoy.filters.http.buffer", "typed_config": envoyconfig.Doc{
				"@type":             "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
				"max_request_bytes": s.BodyLimit,
			}})
		case "bare", "noop", "kvgate", "kvgate-b":
			f := clone(wasm).(envoyconfig.Doc)
			cfg := f["typed_config"].(envoyconfig.Doc)["config"].(envoyconfig.Doc)
			path := map[string]string{"bare": s.BarePath, "noop": s.NoopPath, "kvgate": s.KvgatePath, "kvgate-b": s.KvgateBPath}[r.Filters]
			cfg["name"] = "row-" + r.ID
			vm := cfg["vm_config"].(envoyconfig.Doc)
			vm["vm_id"] = "row-" + r.ID
			vm["code"] = envoyconfig.Doc{"local": envoyconfig.Doc{"filename": path}}
			cfg["configuration"] = envoyconfig.Doc{"@type": "type.googleapis.com/google.protobuf.StringValue", "value": r.PluginConfig}
			filters = append(filters, f)
		case "native", "native-c", "native-w2c":
			// One Go module for every native row: a process runs one Go
			// dynamic module (envoy/README.md). The C module has no Go
			// runtime and loads beside it.
			path := s.NativePath
			switch r.Filters {
			case "native-c":
				path = s.CModulePath
			case "native-w2c":
				path = s.W2CPath
			}
			tc := clone(native).(envoyconfig.Doc)
			tc["filter_name"] = "row-" + r.ID
			tc["dynamic_module_config"].(envoyconfig.Doc)["module"] = envoyconfig.Doc{"local": envoyconfig.Doc{"filename": path}}
			tc["filter_config"] = envoyconfig.Doc{"@type": "type.googleapis.com/google.protobuf.StringValue", "value": r.PluginConfig}
			filters = append(filters, envoyconfig.Doc{"name": envoy.NativeFilterName, "typed_config": tc})
		case "ext_proc":
			filters = append(filters, envoyconfig.Doc{"name": "envoy.filters.http.ext_proc", "typed_config": envoyconfig.Doc{
				"@type":              "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
				"grpc_service":       envoyconfig.Doc{"envoy_grpc": envoyconfig.Doc{"cluster_name": "extproc"}, "timeout": "10s"},
				"failure_mode_allow": false,
				"message_timeout":    "10s",
				"processing_mode": envoyconfig.Doc{
					"request_header_mode":   "SEND",
					"response_header_mode":  "SKIP",
					"request_body_mode":     "BUFFERED",
					"response_body_mode":    "NONE",
					"request_trailer_mode":  "SKIP",
					"response_trailer_mode": "SKIP",
				},
			}})
		default:
			return nil, fmt.Errorf("row %s: unknown filters %q", r.ID, r.Filters)
		}
		filters = append(filters, router)
		tc, err := envoyconfig.Dig(fc, "filters", 0, "typed_config")
		if err != nil {
			return nil, err
		}
		tc.(envoyconfig.Doc)["http_filters"] = filters
		listeners = append(listeners, l)
	}
	sr := d["static_resources"].(envoyconfig.Doc)
	sr["listeners"] = listeners

	cl, err := envoyconfig.Dig(sr, "clusters", 0)
	if err != nil {
		return nil, err
	}
	workerCluster := clone(cl).(envoyconfig.Doc)
	workerCluster["load_assignment"] = endpoints("worker", s.Worker)
	clusters := []any{workerCluster}
	if s.ExtProc != "" {
		clusters = append(clusters, envoyconfig.Doc{
			"name":            "extproc",
			"type":            "STATIC",
			"connect_timeout": "5s",
			"typed_extension_protocol_options": envoyconfig.Doc{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": envoyconfig.Doc{
				"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
				"explicit_http_config": envoyconfig.Doc{"http2_protocol_options": envoyconfig.Doc{}},
			}},
			"load_assignment": endpoints("extproc", s.ExtProc),
		})
	}
	sr["clusters"] = clusters
	d["admin"] = envoyconfig.Doc{"address": envoyconfig.Doc{"socket_address": envoyconfig.Doc{"address": "127.0.0.1", "port_value": s.AdminPort}}}
	return json.MarshalIndent(d, "", "  ")
}

func endpoints(name, hostPort string) envoyconfig.Doc {
	i := strings.LastIndexByte(hostPort, ':')
	var port int
	fmt.Sscan(hostPort[i+1:], &port)
	return envoyconfig.Doc{"cluster_name": name, "endpoints": []any{envoyconfig.Doc{"lb_endpoints": []any{envoyconfig.Doc{
		"endpoint": envoyconfig.Doc{"address": envoyconfig.Doc{"socket_address": envoyconfig.Doc{"address": hostPort[:i], "port_value": port}}},
	}}}}}
}

// clone deep-copies generic JSON values.
func clone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}

// TestBodies checks the generated bodies: exact sizes, read by kvhints as
// the rows expect (untrusted strips the hint, trusted admits the
// envelope).
func TestBodies(t *testing.T) {
	if n := len(envelope(2048)); n > 2048 || n < 2000 {
		t.Errorf("2 KiB envelope is %d bytes", n)
	}
	for _, b := range []bodies{referenceBodies, envelopeBodies} {
		if len(b.small) != smallBody || len(b.large) != largeBody {
			t.Errorf("body sizes %d and %d, want %d and %d", len(b.small), len(b.large), smallBody, largeBody)
		}
	}
	for _, c := range []struct {
		trusted bool
		body    []byte
		want    kvhints.Outcome
	}{
		{false, referenceBodies.small, kvhints.OutcomeStripped},
		{false, referenceBodies.large, kvhints.OutcomeStripped},
		{true, envelopeBodies.small, kvhints.OutcomeAdmitted},
		{true, envelopeBodies.large, kvhints.OutcomeAdmitted},
	} {
		_, res := kvhints.Rewrite(c.body, kvhints.Policy{Trusted: c.trusted, Limits: kvhints.Limits{MaxDepth: kvhints.DefaultMaxDepth}})
		if res.Outcome != c.want {
			t.Errorf("trusted=%v, %d bytes: outcome %v (%s), want %v", c.trusted, len(c.body), res.Outcome, res.Message, c.want)
		}
	}
}
