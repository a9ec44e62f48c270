package wasm

import (
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/kvgate/kvgate/tests/vectors"
)

// TestProxytestVectors runs every conformance case through the compiled
// module under the proxy-wasm-go-sdk v0.24.0 proxytest wasm runner, a host
// written by others. The runner never calls _initialize, so it gets a copy
// of the module with a start section (withStartSection). Its clocks are
// fake, so this is for correctness only.
func TestProxytestVectors(t *testing.T) {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no vectors")
	}
	mod, err := withStartSection(Module)
	if err != nil {
		t.Fatal(err)
	}
	order, groups := groupByConfig(cases)
	for _, k := range order {
		runProxytestGroup(t, mod, groups[k])
	}
}

// runProxytestGroup runs cases of one configuration and one sender, whose
// properties the emulator holds (under their NUL-separated paths).
func runProxytestGroup(t *testing.T, mod []byte, cases []*vectors.Case) {
	conf := cases[0].FilterConfig()
	vm, err := proxytest.NewWasmVMContext(mod)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	opt := proxytest.NewEmulatorOption().WithVMContext(vm).WithPluginConfiguration([]byte(conf))
	if s := cases[0].Sender; s != nil {
		for _, name := range vectors.SenderProperties {
			if v, ok := s.Property(name); ok {
				opt = opt.WithProperty(strings.Split(name, "."), v)
			}
		}
	}
	host, reset := proxytest.NewHostEmulator(opt)
	defer reset()
	if host.StartVM() != types.OnVMStartStatusOK {
		t.Fatal("vm start")
	}
	if host.StartPlugin() != types.OnPluginStartStatusOK {
		t.Fatalf("%s: configuration rejected: %q", conf, host.GetCriticalLogs())
	}
	get := func(name string) int64 {
		v, err := host.GetCounterMetric(name)
		if err != nil {
			t.Fatalf("metric %s: %v", name, err)
		}
		return int64(v)
	}
	for _, c := range cases {
		for _, m := range []string{"length", "chunked", "trailers"} {
			before := readCounters(get)
			r := proxytestRequest(host, c, m)
			if msg := checkVector(c, r, sub(readCounters(get), before)); msg != "" {
				t.Errorf("%s [%s]: %s", c.Name, m, msg)
			}
		}
	}
}

func proxytestRequest(host proxytest.HostEmulator, c *vectors.Case, m string) result {
	id := host.InitializeHttpContext()
	defer host.CompleteHttpContext(id)
	hdrs := [][2]string{{":method", c.Request.Method}, {":path", c.Request.Path}, {":authority", "worker"}}
	keys := make([]string, 0, len(c.Request.Headers))
	for k := range c.Request.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hdrs = append(hdrs, [2]string{k, c.Request.Headers[k]})
	}
	body := c.Request.Body
	n := 3
	if m == "length" {
		hdrs = append(hdrs, [2]string{"content-length", itoa(len(body))})
		n = 1
	}
	local := func() (result, bool) {
		lr := host.GetSentLocalResponse(id)
		if lr == nil {
			return result{}, false
		}
		r := result{status: int(lr.StatusCode), reply: lr.Data}
		for _, h := range lr.Headers {
			if h[0] == "content-type" {
				r.ctype = h[1]
			}
		}
		return r, true
	}
	a := host.CallOnRequestHeaders(id, hdrs, false)
	if r, ok := local(); ok {
		return r
	}
	parts := chunks(body, n)
	for i, part := range parts {
		eos := i == len(parts)-1 && m != "trailers"
		a = host.CallOnRequestBody(id, part, eos)
		if r, ok := local(); ok {
			return r
		}
	}
	if m == "trailers" {
		a = host.CallOnRequestTrailers(id, [][2]string{{"x-trailer", "1"}})
		if r, ok := local(); ok {
			return r
		}
	}
	if a != types.ActionContinue {
		return result{}
	}
	for _, h := range host.GetCurrentRequestHeaders(id) {
		if h[0] == "content-length" {
			return result{reply: []byte("content-length kept")}
		}
	}
	return result{forwarded: true, body: host.GetCurrentRequestBody(id)}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
