package wasm

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/kvgate/kvgate/tests/vectors"
)

// proxytestRunner runs conformance cases through the compiled module under
// the proxy-wasm-go-sdk v0.24.0 proxytest wasm runner, a host written by
// others. The runner never calls _initialize, so it gets a copy of the
// module with a start section (withStartSection). Its clocks are fake, so
// this is for correctness only. proxytest emulates one host at a time: each
// configuration gets a VM that replaces the previous one.
type proxytestRunner struct {
	mod    []byte
	mode   string // "length", "chunked" or "trailers"
	conf   string
	sender string // the sender whose properties the emulator holds, as JSON
	vm     proxytest.WasmVMContext
	host   proxytest.HostEmulator
	reset  func()
}

func (*proxytestRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesGRPCStatus
}

func (r *proxytestRunner) Configure(t testing.TB, conf string) {
	if r.vm == nil {
		t.Cleanup(r.close)
	}
	r.conf = conf
	if err := r.start(nil); err != nil {
		t.Fatal(err)
	}
}

// start replaces the emulator with one for r.conf that holds s's
// properties: proxytest takes properties only when it is created.
func (r *proxytestRunner) start(s *vectors.Sender) error {
	r.close()
	vm, err := proxytest.NewWasmVMContext(r.mod)
	if err != nil {
		return err
	}
	r.vm = vm
	opt := proxytest.NewEmulatorOption().WithVMContext(vm).WithPluginConfiguration([]byte(r.conf))
	if s != nil {
		for _, name := range vectors.SenderProperties {
			if v, ok := s.Property(name); ok {
				opt = opt.WithProperty(strings.Split(name, "."), v)
			}
		}
	}
	r.host, r.reset = proxytest.NewHostEmulator(opt)
	if r.host.StartVM() != types.OnVMStartStatusOK {
		return errors.New("vm start")
	}
	if r.host.StartPlugin() != types.OnPluginStartStatusOK {
		return fmt.Errorf("%s: configuration rejected: %q", r.conf, r.host.GetCriticalLogs())
	}
	r.sender = senderKey(s)
	return nil
}

// holding makes the emulator hold c's sender, before its counters are read
// and before it is sent.
func (r *proxytestRunner) holding(c *vectors.Case) error {
	if senderKey(c.Sender) == r.sender {
		return nil
	}
	return r.start(c.Sender)
}

func senderKey(s *vectors.Sender) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func (r *proxytestRunner) close() {
	if r.reset != nil {
		r.reset()
		r.reset = nil
	}
	if r.vm != nil {
		r.vm.Close()
	}
}

func (r *proxytestRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	if err := r.holding(c); err != nil {
		return vectors.Counters{}, err
	}
	return vectors.ReadCounters(c, func(s vectors.Series) (float64, error) {
		v, err := r.host.GetCounterMetric(s.ProxyWasmName())
		return float64(v), err
	})
}

// Send runs one request through the whole lifecycle, the body in one piece
// with a content-length ("length") or in three parts without one, ended by
// the last part ("chunked") or by trailers ("trailers").
func (r *proxytestRunner) Send(c *vectors.Case) (vectors.Result, error) {
	if err := r.holding(c); err != nil {
		return vectors.Result{}, err
	}
	host := r.host
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
	if r.mode == "length" {
		hdrs = append(hdrs, [2]string{"content-length", strconv.Itoa(len(body))})
		n = 1
	}
	local := func() (vectors.Result, bool) {
		lr := host.GetSentLocalResponse(id)
		if lr == nil {
			return vectors.Result{}, false
		}
		res := vectors.Result{Status: int(lr.StatusCode), Body: lr.Data}
		for _, h := range lr.Headers {
			switch h[0] {
			case "content-type":
				res.ContentType = h[1]
			case "grpc-status":
				res.GRPCStatus = h[1]
			}
		}
		return res, true
	}
	a := host.CallOnRequestHeaders(id, hdrs, false)
	if res, ok := local(); ok {
		return res, nil
	}
	// What went upstream: proxytest forwards (and forgets) the body it
	// holds whenever a callback answers Continue, so a body that streams
	// (gRPC, once decided) goes up in parts.
	var sent []byte
	held := false
	parts := chunks(body, n)
	for i, part := range parts {
		eos := i == len(parts)-1 && r.mode != "trailers"
		a = host.CallOnRequestBody(id, part, eos)
		if res, ok := local(); ok {
			return res, nil
		}
		if held = a != types.ActionContinue; !held {
			sent = append(sent, host.GetCurrentRequestBody(id)...)
		}
	}
	if r.mode == "trailers" {
		a = host.CallOnRequestTrailers(id, [][2]string{{"x-trailer", "1"}})
		if res, ok := local(); ok {
			return res, nil
		}
		if held && a == types.ActionContinue {
			sent = append(sent, host.GetCurrentRequestBody(id)...)
		}
	}
	if a != types.ActionContinue {
		return vectors.Result{}, fmt.Errorf("the filter answered %v to the last callback and sent no reply", a)
	}
	for _, h := range host.GetCurrentRequestHeaders(id) {
		if h[0] == "content-length" {
			return vectors.Result{}, errors.New("content-length kept")
		}
	}
	return vectors.Result{Forwarded: true, Body: sent}, nil
}

// TestProxytestVectors runs every conformance case through the compiled
// module under proxytest, in the three ways a body can arrive.
func TestProxytestVectors(t *testing.T) {
	mod, err := withStartSection(Module)
	if err != nil {
		t.Fatal(err)
	}
	r := &proxytestRunner{mod: mod}
	vectors.Run(t, r, vectors.Variants(func(v string) { r.mode = v }, "length", "chunked", "trailers"))
}

// chunks splits a body into n parts.
func chunks(body []byte, n int) [][]byte {
	if n <= 1 {
		return [][]byte{body}
	}
	var out [][]byte
	for i := 0; i < n; i++ {
		out = append(out, body[i*len(body)/n:(i+1)*len(body)/n])
	}
	return out
}
