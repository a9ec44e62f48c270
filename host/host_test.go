package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvgate/kvgate/proxywasm"
	"github.com/kvgate/kvgate/wasm"
)

func filter(t *testing.T, h *Host, action, body string) (*Decision, error) {
	t.Helper()
	return h.Filter(context.Background(), testRequest(action, body))
}

func mustFilter(t *testing.T, h *Host, action, body string) *Decision {
	t.Helper()
	d, err := filter(t, h, action, body)
	if err != nil {
		t.Fatalf("%s: %v", action, err)
	}
	return d
}

// waitLive waits until the pool is back to n live instances.
func waitLive(t *testing.T, h *Host, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Live() != n || len(h.idle) != n {
		if time.Now().After(deadline) {
			t.Fatalf("live=%d idle=%d, want %d", h.Live(), len(h.idle), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestForwardUnchangedKeepsOriginalBytes(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	r := testRequest("", `{"a":1}`)
	d, err := h.Filter(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if d.BodyChanged || d.HeaderChanged || d.Local != nil || &d.Body[0] != &r.Body[0] {
		t.Fatalf("decision %+v", d)
	}
	if d.Method != "POST" || d.Path != r.Path || d.Authority != r.Authority {
		t.Fatalf("pseudo headers %+v", d)
	}
}

func TestBodyRewrite(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	d := mustFilter(t, h, "upper", `{"kv_hints":null}`)
	if !d.BodyChanged || string(d.Body) != `{"KV_HINTS":NULL}` {
		t.Fatalf("body %q changed=%v", d.Body, d.BodyChanged)
	}
	d = mustFilter(t, h, "bigbody", "ab")
	if string(d.Body) != "abab" {
		t.Fatalf("body %q", d.Body)
	}
	d = mustFilter(t, h, "continue", "x")
	if d.Local != nil || string(d.Body) != "x" {
		t.Fatalf("continue: %+v", d)
	}
}

func TestHeaderChanges(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	d := mustFilter(t, h, "hdr", "{}")
	if !d.HeaderChanged {
		t.Fatal("HeaderChanged false")
	}
	if d.Header.Get("X-Added") != "1" || d.Header.Get("X-Remove") != "" || d.Header.Get("X-Multi") != "two" {
		t.Fatalf("headers %v", d.Header)
	}
	if d.Header.Get("X-Pairs-Size") == "" || d.Path != "/v1/chat/completions?x=1" || d.Method != "POST" {
		t.Fatalf("headers %v, path %q", d.Header, d.Path)
	}
}

func TestPropertiesInEnvoyEncoding(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	d := mustFilter(t, h, "prop", "")
	want := map[string]string{
		"X-Prop-Path":    "/v1/chat/completions?x=1",
		"X-Prop-Method":  "POST",
		"X-Prop-Source":  "127.0.0.1:5555",
		"X-Prop-Missing": "status1", // NOT_FOUND
	}
	for k, v := range want {
		if got := d.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

func TestPluginConfiguration(t *testing.T) {
	h, _ := newTestHost(t, Options{PluginConfig: []byte(`{"trust_kv_hints":true}`)})
	d := mustFilter(t, h, "config", "")
	if got := d.Header.Get("X-Config"); got != `{"trust_kv_hints":true}` {
		t.Fatalf("config seen by guest: %q", got)
	}
}

func TestConfigurationRejectedStopsStartup(t *testing.T) {
	_, err := New(context.Background(), testGuest(t), Options{PluginConfig: []byte("bad"), PoolSize: 2,
		Logger: newTestLogger()})
	if err == nil || !strings.Contains(err.Error(), "guest: invalid configuration: bad") {
		t.Fatalf("err = %v", err)
	}
}

func TestLocalReply(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	d := mustFilter(t, h, "local", "{}")
	if d.Local == nil || d.Local.Status != 418 || string(d.Local.Body) != "local reply" ||
		d.Local.Header.Get("X-Local") != "yes" || d.Local.Details != "test_local" {
		t.Fatalf("local %+v", d.Local)
	}
	d = mustFilter(t, h, "localbody", "{}")
	if d.Local == nil || d.Local.Status != 400 || string(d.Local.Body) != `{"error":"nope"}` {
		t.Fatalf("local %+v", d.Local)
	}
}

func TestPausedForeverIsAnError(t *testing.T) {
	h, _ := newTestHost(t, Options{})
	if _, err := filter(t, h, "pause", ""); !errors.Is(err, ErrPaused) {
		t.Fatalf("err = %v", err)
	}
	mustFilter(t, h, "", "{}")
}

// A guest that traps: the request fails, the instance is replaced, the next
// requests succeed, and no instance leaks.
func TestTrapReplacesInstance(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 2})
	for _, a := range []string{"trap", "trapbody"} {
		_, err := filter(t, h, a, "{}")
		var te *TrapError
		if !errors.As(err, &te) {
			t.Fatalf("%s: err = %v, want a TrapError", a, err)
		}
		waitLive(t, h, 2)
		for i := 0; i < 4; i++ {
			mustFilter(t, h, "upper", "ok")
		}
	}
	if got := h.replaced[reasonTrap].Load(); got != 2 {
		t.Fatalf("replaced = %d", got)
	}
}

// A pointer or size outside the guest's memory is answered as Envoy's
// proxy-wasm host answers it: the call returns InvalidMemoryAccess (6), the
// guest goes on, and the instance is not replaced.
func TestBadPointerIsInvalidMemoryAccess(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1})
	for _, action := range []string{"oob", "oobret"} {
		d, err := filter(t, h, action, "")
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		if got := d.Header.Get("X-Status"); got != strconv.Itoa(int(proxywasm.StatusInvalidMemoryAccess)) {
			t.Errorf("%s: status %q, want %d (InvalidMemoryAccess)", action, got, proxywasm.StatusInvalidMemoryAccess)
		}
	}
	if n := h.replaced[reasonTrap].Load(); n != 0 {
		t.Errorf("%d instances replaced: a bad pointer is not a trap", n)
	}
	mustFilter(t, h, "", "{}")
}

// WASI as Envoy gives it: poll_oneoff is not supported, so a sleeping Go
// guest dies; a forced GC does not need it and works.
func TestEnvoyLikeWASI(t *testing.T) {
	h, lb := newTestHost(t, Options{PoolSize: 1})
	_, err := filter(t, h, "sleep", "")
	var te *TrapError
	if !errors.As(err, &te) {
		t.Fatalf("sleep: err = %v, want a trap", err)
	}
	if !strings.Contains(lb.String(), "poll_oneoff") {
		t.Fatalf("log does not mention poll_oneoff:\n%s", lb.String())
	}
	waitLive(t, h, 1)
	mustFilter(t, h, "gc", "")
	mustFilter(t, h, "print", "")
	if !strings.Contains(lb.String(), `msg="guest says hello"`) || !strings.Contains(lb.String(), "level=ERROR") {
		t.Fatalf("stderr not logged as error:\n%s", lb.String())
	}
}

func TestCallTimeoutReplacesInstance(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1, CallTimeout: 200 * time.Millisecond})
	start := time.Now()
	if _, err := filter(t, h, "loop", ""); err == nil {
		t.Fatal("loop returned")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("timeout not enforced")
	}
	waitLive(t, h, 1)
	if h.replaced[reasonTimeout].Load() != 1 {
		t.Fatal("not counted as timeout")
	}
	mustFilter(t, h, "", "{}")
}

func TestGrownInstanceRetired(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1, RetireBytes: 16 << 20})
	mustFilter(t, h, "grow", "")
	waitLive(t, h, 1)
	if h.replaced[reasonGrown].Load() != 1 {
		t.Fatal("grown instance not retired")
	}
	mustFilter(t, h, "", "{}")
}

func TestMemoryLimitTraps(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1, MemoryLimitPages: 256}) // 16 MiB < 40 MiB
	if _, err := filter(t, h, "grow", ""); err == nil {
		t.Fatal("growing past the memory limit succeeded")
	}
	waitLive(t, h, 1)
	mustFilter(t, h, "", "{}")
}

func TestPoolTimeout(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1, AcquireTimeout: 50 * time.Millisecond, CallTimeout: time.Second})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = filter(t, h, "loop", "") }()
	time.Sleep(100 * time.Millisecond)
	if _, err := filter(t, h, "", ""); !errors.Is(err, ErrPoolTimeout) {
		t.Fatalf("err = %v", err)
	}
	<-done
}

func TestMetricsAggregatedAcrossInstances(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, _ := newTestHost(t, Options{PoolSize: 2, Registerer: reg})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h.Filter(context.Background(), testRequest("", "12345")) }()
	}
	wg.Wait()
	d := mustFilter(t, h, "metric", "")
	if d.Header.Get("X-Requests") == "" {
		t.Fatal("proxy_get_metric gave nothing")
	}
	d = mustFilter(t, h, "badmetric", "")
	if d.Header.Get("X-Status") != "2" {
		t.Fatalf("a name outside the metricname rule: status %q, want BAD_ARGUMENT", d.Header.Get("X-Status"))
	}
	expected := `
# HELP kvtest_requests_total Defined by the wasm filter as kvtest_requests_total.
# TYPE kvtest_requests_total counter
kvtest_requests_total{kind="http"} 22
# HELP kvtest_inflight Defined by the wasm filter as kvtest_inflight.
# TYPE kvtest_inflight gauge
kvtest_inflight 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "kvtest_requests_total", "kvtest_inflight"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kvtest_body_bytes"); err != nil || n != 1 {
		t.Fatalf("histogram series = %d, %v", n, err)
	}
	if n, _ := testutil.GatherAndCount(reg, "kvgate_wasm_instances", "kvgate_wasm_instances_replaced_total"); n != 4 {
		t.Fatalf("pool metrics = %d series", n)
	}
}

// 64 concurrent clients on a pool of 2, some of them trapping; run with -race.
func TestConcurrentClients(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 2, AcquireTimeout: 30 * time.Second})
	const clients, each = 64, 20
	var ok, traps atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				action, body := "upper", fmt.Sprintf(`{"c":%d,"i":%d}`, c, i)
				if (c*each+i)%97 == 0 {
					action = "trap"
				}
				d, err := h.Filter(context.Background(), testRequest(action, body))
				switch {
				case action == "trap" && err != nil:
					traps.Add(1)
				case err != nil:
					t.Errorf("client %d: %v", c, err)
				case string(d.Body) != strings.ToUpper(body):
					t.Errorf("client %d: body %q for %q", c, d.Body, body)
				default:
					ok.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	if ok.Load()+traps.Load() != clients*each || traps.Load() == 0 {
		t.Fatalf("ok=%d traps=%d", ok.Load(), traps.Load())
	}
	waitLive(t, h, 2)
}

func TestCloseLeavesNoInstance(t *testing.T) {
	h, err := New(context.Background(), testGuest(t), Options{PoolSize: 3, Logger: newTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	waitLive(t, h, 3) // the pool fills in the background
	if h.memBytes.Load() <= 0 {
		t.Fatalf("wasm memory gauge = %d", h.memBytes.Load())
	}
	_, _ = h.Filter(context.Background(), testRequest("trap", ""))
	mustFilter(t, h, "", "{}")
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.Live() != 0 || h.memBytes.Load() != 0 {
		t.Fatalf("live after close = %d, memory %d", h.Live(), h.memBytes.Load())
	}
	if _, err := h.Filter(context.Background(), testRequest("", "")); !errors.Is(err, ErrClosed) {
		t.Fatalf("err after close = %v", err)
	}
}

// wasmModule hand-assembles a module importing the given functions (all of
// type () -> ()) and exporting nothing.
func wasmModule(imports ...[2]string) []byte {
	b := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	b = append(b, 1, 4, 1, 0x60, 0, 0) // type section: () -> ()
	var sec []byte
	sec = append(sec, byte(len(imports)))
	for _, im := range imports {
		sec = append(sec, byte(len(im[0])))
		sec = append(sec, im[0]...)
		sec = append(sec, byte(len(im[1])))
		sec = append(sec, im[1]...)
		sec = append(sec, 0, 0) // func, type 0
	}
	b = append(b, 2, byte(len(sec)))
	return append(b, sec...)
}

func TestUnknownImportIsAClearError(t *testing.T) {
	mod := wasmModule([2]string{"env", "proxy_does_not_exist"}, [2]string{"env", "proxy_log"})
	_, err := New(context.Background(), mod, Options{Logger: newTestLogger()})
	if err == nil || !strings.Contains(err.Error(), "env.proxy_does_not_exist") ||
		!strings.Contains(err.Error(), "env.proxy_log with parameters ()") {
		t.Fatalf("err = %v", err)
	}
	_, err = New(context.Background(), wasmModule(), Options{Logger: newTestLogger()})
	if err == nil || !strings.Contains(err.Error(), "proxy_abi_version") {
		t.Fatalf("err = %v", err)
	}
}

// Every import of the Go guest is provided (New checks it) and the list is
// what a Go 1.26 c-shared wasip1 module needs.
func TestGoGuestImportsProvided(t *testing.T) {
	h, _ := newTestHost(t, Options{PoolSize: 1})
	var names []string
	for _, f := range h.compiled.ImportedFunctions() {
		m, n, _ := f.Import()
		names = append(names, m+"."+n)
	}
	for _, want := range []string{"wasi_snapshot_preview1.poll_oneoff", "wasi_snapshot_preview1.fd_write", "env.proxy_get_property"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("guest does not import %s: %v", want, names)
		}
	}
}

var _ = http.Header{}

func TestOnlyRemoved(t *testing.T) {
	f := func(kv ...string) [][2]string {
		var fs [][2]string
		for i := 0; i < len(kv); i += 2 {
			fs = append(fs, [2]string{kv[i], kv[i+1]})
		}
		return fs
	}
	orig := f(":path", "/", "content-length", "9", "accept", "a", "x", "1", "x", "2")
	for _, c := range []struct {
		name    string
		now     [][2]string
		removed []string
		ok      bool
	}{
		{"unchanged", orig, nil, true},
		{"one name", f(":path", "/", "accept", "a", "x", "1", "x", "2"), []string{"content-length"}, true},
		{"every value of a name", f(":path", "/", "content-length", "9", "accept", "a"), []string{"x"}, true},
		{"two names", f(":path", "/", "x", "1", "x", "2"), []string{"content-length", "accept"}, true},
		{"one value of two", f(":path", "/", "content-length", "9", "accept", "a", "x", "2"), nil, false},
		{"a pseudo-header", f("content-length", "9", "accept", "a", "x", "1", "x", "2"), nil, false},
		{"a changed value", f(":path", "/", "content-length", "8", "accept", "a", "x", "1", "x", "2"), nil, false},
		{"an added field", append(f(":path", "/", "accept", "a", "x", "1", "x", "2"), [2]string{"y", "1"}), nil, false},
		{"reordered", f(":path", "/", "accept", "a", "content-length", "9", "x", "1", "x", "2"), nil, false},
	} {
		removed, ok := onlyRemoved(orig, c.now)
		if ok != c.ok || !slices.Equal(removed, c.removed) {
			t.Errorf("%s: got %q %v, want %q %v", c.name, removed, ok, c.removed, c.ok)
		}
	}
}

// With HeaderInPlace, a guest that only removes fields gets them removed
// from the request's own Header, which is the forwarded one; without it the
// request's Header is left as it was.
func TestHeaderInPlace(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		h, _ := newTestHost(t, Options{PoolSize: 1, HeaderInPlace: inPlace})
		r := testRequest("remove", "{}")
		d, err := h.Filter(context.Background(), r)
		if err != nil || d.Local != nil || !d.HeaderChanged {
			t.Fatalf("in place=%v: %v %+v", inPlace, err, d)
		}
		if d.Header.Get("X-Remove") != "" || d.Header.Get("X-Test-Action") != "remove" || d.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("in place=%v: forwarded header %v", inPlace, d.Header)
		}
		if got := r.Header.Get("X-Remove"); inPlace != (got == "") {
			t.Fatalf("in place=%v: the request's own header now has X-Remove %q", inPlace, got)
		}
		d.Header.Set("X-Probe", "1")
		if inPlace != (r.Header.Get("X-Probe") == "1") {
			t.Fatalf("in place=%v: Decision.Header is the request's header: %v", inPlace, !inPlace)
		}
	}
}

// BodyAlloc supplies the memory of the bodies the guest writes, and sees
// the context Filter was called with; a short slice makes the host allocate.
func TestBodyAlloc(t *testing.T) {
	type key struct{}
	var got [][]byte
	h, _ := newTestHost(t, Options{PoolSize: 1, BodyAlloc: func(ctx context.Context, n int) []byte {
		if ctx.Value(key{}) == "short" {
			return nil
		}
		b := make([]byte, n, n+8)
		got = append(got, b)
		return b
	}})
	ctx := context.WithValue(context.Background(), key{}, "mine")
	d, err := h.Filter(ctx, testRequest("bigbody", "ab"))
	if err != nil || string(d.Body) != "abab" || len(got) != 1 || &d.Body[0] != &got[0][0] {
		t.Fatalf("%v: body %q in the caller's memory: %v", err, d.Body, len(got) == 1 && &d.Body[0] == &got[0][0])
	}
	d, err = h.Filter(context.WithValue(ctx, key{}, "short"), testRequest("upper", "ab"))
	if err != nil || string(d.Body) != "AB" || len(got) != 1 {
		t.Fatalf("%v: body %q, %d allocations", err, d.Body, len(got))
	}
	if d, err = h.Filter(ctx, testRequest("", "ab")); err != nil || d.BodyChanged || len(got) != 1 {
		t.Fatalf("an unchanged body was allocated: %v %+v", err, d)
	}
}

func TestNameCache(t *testing.T) {
	var c nameCache
	long := strings.Repeat("X", maxCachedName+1)
	for i := 0; i < 2*maxCachedNames; i++ {
		k := fmt.Sprintf("X-Name-%d", i)
		if got := c.lower(k); got != strings.ToLower(k) {
			t.Fatalf("lower(%q) = %q", k, got)
		}
	}
	if c.lower(long) != strings.ToLower(long) || c.lower("Content-Type") != "content-type" {
		t.Fatal("lower")
	}
	if _, ok := c[long]; ok || len(c) != maxCachedNames {
		t.Fatalf("%d names cached (long one: %v), want %d", len(c), ok, maxCachedNames)
	}
}

// TestBodyWithheld: a request refused on its headers reaches the guest as
// headers with end_of_stream false and nothing after them. The kvgate
// filter then answers 413 from Content-Length; the same headers with an
// empty body and no BodyWithheld end the stream, and it lets them pass.
// A guest that pauses for the body that never comes is no failure.
func TestBodyWithheld(t *testing.T) {
	h, err := New(context.Background(), wasm.Module, Options{PoolSize: 1, CacheDir: testCacheDir(t), PluginConfig: []byte(`{"max_body_bytes":5}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	req := func(withheld bool) *Request {
		return &Request{Method: "POST", Path: "/v1/completions", Authority: "a", BodyWithheld: withheld,
			Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"10"}}}
	}
	d, err := h.Filter(context.Background(), req(true))
	if err != nil || d.Local == nil || d.Local.Status != 413 {
		t.Fatalf("withheld: %v %+v", err, d)
	}
	d, err = h.Filter(context.Background(), req(false))
	if err != nil || d.Local != nil {
		t.Fatalf("empty body: %v %+v", err, d)
	}

	reg := prometheus.NewRegistry()
	g, err := New(context.Background(), testGuest(t), Options{PoolSize: 1, CacheDir: testCacheDir(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	for _, action := range []string{"pause", ""} {
		d, err := g.Filter(context.Background(), &Request{Method: "POST", Path: "/", Authority: "a", BodyWithheld: true,
			Header: http.Header{"X-Test-Action": {action}, "Content-Length": {"10"}}, Body: []byte("ignored")})
		if err != nil || d.Local != nil || d.BodyChanged {
			t.Fatalf("test guest, action %q: %v %+v", action, err, d)
		}
	}
	bodyCalls := func() uint64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "kvtest_body_bytes" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	if n := bodyCalls(); n != 0 {
		t.Fatalf("the body callback ran %d times for withheld bodies", n)
	}
	if _, err := g.Filter(context.Background(), &Request{Method: "POST", Path: "/", Authority: "a", Body: []byte("sent")}); err != nil || bodyCalls() != 1 {
		t.Fatalf("a body that is sent: %v, %d body callbacks", err, bodyCalls())
	}
}
