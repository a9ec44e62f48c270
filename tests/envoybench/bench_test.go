package envoybench

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		serveChild()
	}
	os.Exit(m.Run())
}

// Settings of a measurement, from the environment:
//
//	KVGATE_ENVOY_ROUNDS       rounds (default 8)
//	KVGATE_ENVOY_TIME         one row's 64-client window per round (default 1.5s);
//	                          each 1-client window is half of it
//	KVGATE_ENVOY_CONCURRENCY  Envoy's --concurrency (default 1)
//	KVGATE_WASM               another build of the module, for rows d and e
//	KVGATE_WASM_B             a second build, measured in rows d' and e'
//	KVGATE_W2C_MODULE         row nw's module (make wasm2c-module's
//	                          bin/libkvgate_w2c.so); row nw needs it
//	KVGATE_ENVOY_ROWS         only these rows (IDs separated by commas)
//	KVGATE_ENVOY_LOADS        only these loads (names separated by commas, as
//	                          in load.Name), to profile one of them alone
//	KVGATE_ENVOYBENCH_OUT     a directory to write envoy.md (the table) and
//	                          envoy.txt (every sample, in Go benchmark format
//	                          for benchstat) into
type settings struct {
	Rounds      int
	Window      time.Duration
	Concurrency int
	Out         string
	Loads       []string // nil: every load
}

// runs reports whether the run measures load l.
func (s settings) runs(l load) bool {
	return s.Loads == nil || slices.Contains(s.Loads, l.Name)
}

func settingsFromEnv() settings {
	s := settings{Rounds: 8, Window: 1500 * time.Millisecond, Concurrency: 1, Out: os.Getenv("KVGATE_ENVOYBENCH_OUT")}
	if n, err := strconv.Atoi(os.Getenv("KVGATE_ENVOY_ROUNDS")); err == nil && n > 0 {
		s.Rounds = n
	}
	if d, err := time.ParseDuration(os.Getenv("KVGATE_ENVOY_TIME")); err == nil && d > 0 {
		s.Window = d
	}
	if n, err := strconv.Atoi(os.Getenv("KVGATE_ENVOY_CONCURRENCY")); err == nil && n > 0 {
		s.Concurrency = n
	}
	if v := os.Getenv("KVGATE_ENVOY_LOADS"); v != "" {
		s.Loads = strings.Split(v, ",")
	}
	return s
}

// check refuses a load name that no load has, which would measure nothing.
func (s settings) check() error {
	for _, name := range s.Loads {
		if !slices.ContainsFunc(loads, func(l load) bool { return l.Name == name }) {
			var names []string
			for _, l := range loads {
				names = append(names, l.Name)
			}
			return fmt.Errorf("KVGATE_ENVOY_LOADS: no load %q (the loads: %s)", name, strings.Join(names, ", "))
		}
	}
	return nil
}

// A load is one of the three measurements of every row in a round.
type load struct {
	Name     string
	Clients  int
	Large    bool // the 1 MiB body, else 4 KiB
	Share    int  // the window is settings.Window / Share
	Streamed bool // the answer is streamed (streamEvents chunks)
}

var loads = []load{
	{"4KiB-64clients", 64, false, 1, false},
	{"4KiB-1client", 1, false, 2, false},
	{"1MiB-1client", 1, true, 2, false},
	{"4KiB-streamed-32clients", 32, false, 2, true},
}

// harness is one Envoy with a listener per row, the worker, the ext_proc
// server and a client per row and load.
type harness struct {
	Rows    []*row
	Worker  *worker
	Envoy   *envoytest.Process
	ExtProc *extProc
	many    map[string]*http.Client // per row: 64 connections
	one     map[string]*http.Client // per row: 1 connection
}

// start builds the no-op module and starts the worker, the ext_proc server
// and Envoy.
func start(tb testing.TB, concurrency int) *harness {
	tb.Helper()
	bin := envoytest.Binary(tb)
	h := &harness{Rows: rows(), many: map[string]*http.Client{}, one: map[string]*http.Client{}}
	noop := buildNoop(tb)
	bare := filepath.Join(tb.TempDir(), "bare.wasm")
	if err := os.WriteFile(bare, bareModule(), 0o644); err != nil {
		tb.Fatal(err)
	}
	h.Worker = startWorker(tb)
	h.ExtProc = startExtProc(tb)
	for _, r := range h.Rows {
		r.port = envoytest.FreePort(tb)
		h.many[r.ID] = client(64)
		h.one[r.ID] = client(1)
	}
	admin := envoytest.FreePort(tb)
	cfg, err := bootstrap(setup{
		AdminPort:   admin,
		Worker:      h.Worker.Addr,
		ExtProc:     h.ExtProc.Addr,
		KvgatePath:  kvgateModule(),
		KvgateBPath: absPath(os.Getenv("KVGATE_WASM_B")),
		NoopPath:    noop,
		NativePath:  nativeModule(tb),
		CModulePath: buildCModule(tb),
		W2CPath:     w2cModule(tb, h.Rows),
		BarePath:    bare,
		BodyLimit:   filterspec.DefaultMaxBodyBytes,
	}, h.Rows)
	if err != nil {
		tb.Fatal(err)
	}
	h.Envoy = envoytest.Start(tb, bin, cfg, admin, concurrency)
	tb.Cleanup(func() {
		for _, cl := range h.many {
			cl.CloseIdleConnections()
		}
		for _, cl := range h.one {
			cl.CloseIdleConnections()
		}
	})
	return h
}

func (h *harness) url(r *row) string {
	return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", r.port)
}

// kvgateModule is wasm/kvgate.wasm, or $KVGATE_WASM to measure another build.
func kvgateModule() string {
	p := os.Getenv("KVGATE_WASM")
	if p == "" {
		p = filepath.Join("..", "..", "wasm", "kvgate.wasm")
	}
	return absPath(p)
}

// nativeModule is $KVGATE_NATIVE_MODULE (make envoy-module's
// bin/libkvgate.so), or envoy/native/libkvgate built here.
func nativeModule(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("KVGATE_NATIVE_MODULE"); p != "" {
		return absPath(p)
	}
	out := filepath.Join(tb.TempDir(), "libkvgate.so")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-trimpath",
		"-o", out, "./envoy/native/libkvgate")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building the native module: %v\n%s", err, b)
	}
	return out
}

// w2cModule is $KVGATE_W2C_MODULE when row nw runs: its build takes
// minutes (tests/wasm2c/build.sh), so it is made beforehand, never here.
func w2cModule(tb testing.TB, rs []*row) string {
	tb.Helper()
	if !slices.ContainsFunc(rs, func(r *row) bool { return r.Filters == "native-w2c" }) {
		return ""
	}
	p := os.Getenv("KVGATE_W2C_MODULE")
	if p == "" {
		tb.Fatal("row nw needs KVGATE_W2C_MODULE: build it with make wasm2c-module (bin/libkvgate_w2c.so)")
	}
	return absPath(p)
}

// buildCModule builds testdata/cmodule, row n0's dynamic module, with the
// C compiler that cgo uses.
func buildCModule(tb testing.TB) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "libnoop.so")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter",
		"-I", filepath.Join("..", "..", "envoy", "native", "internal", "abi"),
		"-o", out, filepath.Join("testdata", "cmodule", "noop.c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building testdata/cmodule: %v\n%s", err, b)
	}
	return out
}

// absPath makes a path absolute ("" stays ""): Envoy runs elsewhere.
func absPath(p string) string {
	if p == "" {
		return ""
	}
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// buildNoop builds testdata/noop as wasm/build.sh builds kvgate.
func buildNoop(tb testing.TB) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "noop.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-trimpath",
		"-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, "./testdata/noop")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building testdata/noop: %v\n%s", err, b)
	}
	return out
}

// check sends each of the row's bodies once, marked, and compares what
// reached the worker with what the row must forward.
func (h *harness) check(r *row) error {
	bs := r.bodies()
	for _, c := range []struct {
		name string
		body []byte
	}{{"4KiB", bs.small}, {"1MiB", bs.large}} {
		key := r.ID + "/" + c.name
		if err := post(h.one[r.ID], h.url(r), c.body, key, false); err != nil {
			return fmt.Errorf("row %s (%s), %s body: %v", r.ID, r.Name, c.name, err)
		}
		a, ok := h.Worker.arrived(key)
		if !ok {
			return fmt.Errorf("row %s (%s), %s body: answered but not forwarded", r.ID, r.Name, c.name)
		}
		want := r.want(c.body)
		if !bytes.Equal(a.Body, want) {
			return fmt.Errorf("row %s (%s), %s body: worker received %d bytes, want %d (hint removed: %v)",
				r.ID, r.Name, c.name, len(a.Body), len(want), len(want) != len(c.body))
		}
		if a.ContentLength >= 0 && a.ContentLength != int64(len(a.Body)) {
			return fmt.Errorf("row %s (%s), %s body: Content-Length %d for %d bytes", r.ID, r.Name, c.name, a.ContentLength, len(a.Body))
		}
	}
	return nil
}

// results are the samples of a run: results[load][row ID] has one sample
// per round.
type results [][]map[string]sample

// measure runs rounds: in each, every load on every row, the rows in table
// order in even rounds and in reverse order in odd ones.
func (h *harness) measure(s settings, log func(string, ...any)) results {
	res := make(results, len(loads))
	for i := range res {
		res[i] = make([]map[string]sample, s.Rounds)
	}
	// Warm-up: connections, V8's compiled code, the Go heaps in the VMs.
	for _, r := range h.Rows {
		drive(h.many[r.ID], h.url(r), r.bodies().small, 64, false, s.Window/3, [2]int{})
		drive(h.one[r.ID], h.url(r), r.bodies().large, 1, false, s.Window/6, [2]int{})
	}
	pids := [2]int{h.Envoy.Pid(), h.ExtProc.Pid}
	for round := range s.Rounds {
		order := slices.Clone(h.Rows)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for li, l := range loads {
			res[li][round] = map[string]sample{}
			if !s.runs(l) {
				continue
			}
			for _, r := range order {
				cl, body := h.many[r.ID], r.bodies().small
				if l.Clients == 1 {
					cl = h.one[r.ID]
				}
				if l.Large {
					body = r.bodies().large
				}
				res[li][round][r.ID] = drive(cl, h.url(r), body, l.Clients, l.Streamed, s.Window/time.Duration(l.Share), pids)
			}
		}
		if log != nil {
			log("round %d of %d done", round+1, s.Rounds)
		}
	}
	return res
}

// errors returns the failures of a run, one line per row and load.
func (res results) errors(rs []*row) []string {
	var out []string
	for li, l := range loads {
		if !res.measured(li) {
			continue
		}
		for _, r := range rs {
			n, errs, first := 0, 0, error(nil)
			for _, round := range res[li] {
				s := round[r.ID]
				n += s.N
				errs += s.Errors
				if first == nil {
					first = s.Err
				}
			}
			if errs > 0 || n == 0 {
				out = append(out, fmt.Sprintf("row %s, %s: %d answered, %d failed (first: %v)", r.ID, l.Name, n, errs, first))
			}
		}
	}
	return out
}

// measured reports whether the run measured load li (settings.runs).
func (res results) measured(li int) bool {
	return len(res[li]) > 0 && len(res[li][0]) > 0
}

// stat is one row's figure for one load: the median over the rounds of
// the value, and of its per-round ratio to (or difference from) the
// baseline row's value in the same round.
type stat struct{ Value, Ratio, Diff float64 }

func (res results) stat(li int, id string, f func(sample) float64) stat {
	var v, ratio, diff []float64
	for _, round := range res[li] {
		s, b := round[id], round[baseline]
		x, y := f(s), f(b)
		v = append(v, x)
		if y != 0 {
			ratio = append(ratio, x/y)
		}
		diff = append(diff, x-y)
	}
	return stat{median(v), median(ratio), median(diff)}
}

func rps(s sample) float64    { return s.ReqPerSec() }
func p50(s sample) float64    { return float64(s.P50) / 1e3 }
func cpu(s sample) float64    { return float64(s.CPU) / 1e3 }
func extCPU(s sample) float64 { return float64(s.ExtCPU) / 1e3 }

// offWorker is the part of cpu outside Envoy's worker threads.
func offWorker(s sample) float64 { return float64(s.OffWorker) / 1e3 }

// table renders the run as Markdown: per row, medians over the rounds and
// the per-round comparison with the baseline row.
func (res results) table(rs []*row, s settings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| row | Envoy with | 4 KiB, 64 clients: req/s | vs b | Envoy CPU/req | vs b | 4 KiB, 1 client: p50 | vs b | 1 MiB, 1 client: p50 | vs b | Envoy CPU/req | vs b | streamed answer: Envoy CPU/req | vs b |\n")
	fmt.Fprintf(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		thr, c64 := res.stat(0, r.ID, rps), res.stat(0, r.ID, cpu)
		small := res.stat(1, r.ID, p50)
		large, cl := res.stat(2, r.ID, p50), res.stat(2, r.ID, cpu)
		cs := res.stat(3, r.ID, cpu)
		name := r.Name
		if r.Ext {
			name += " ¹"
		}
		var cells []string
		if r.ID == baseline {
			cells = []string{
				fmt.Sprintf("%.0f | **100 %%** | %.0f µs | **0**", thr.Value, c64.Value),
				fmt.Sprintf("%.0f µs | **0**", small.Value),
				fmt.Sprintf("%.2f ms | **0** | %.0f µs | **0**", large.Value/1e3, cl.Value),
				fmt.Sprintf("%.0f µs | **0**", cs.Value),
			}
		} else {
			cells = []string{
				fmt.Sprintf("%.0f | %.1f %% | %.0f µs | %+.0f µs", thr.Value, 100*thr.Ratio, c64.Value, c64.Diff),
				fmt.Sprintf("%.0f µs | %+.0f µs", small.Value, small.Diff),
				fmt.Sprintf("%.2f ms | %+.0f µs | %.0f µs | %+.0f µs", large.Value/1e3, large.Diff, cl.Value, cl.Diff),
				fmt.Sprintf("%.0f µs | %+.0f µs", cs.Value, cs.Diff),
			}
		}
		for li := range cells {
			if !res.measured(li) { // a load left out (KVGATE_ENVOY_LOADS): a dash per column
				cells[li] = strings.Repeat(" – |", strings.Count(cells[li], "|")+1)
				cells[li] = strings.TrimSuffix(strings.TrimPrefix(cells[li], " "), " |")
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.ID, name, strings.Join(cells, " | "))
	}
	for _, r := range rs {
		if r.Ext {
			fmt.Fprintf(&b, "\n¹ Envoy's CPU only; the ext_proc server used %.0f µs per 4 KiB request at 64 clients and %.0f µs per 1 MiB request on top.\n",
				res.stat(0, r.ID, extCPU).Value, res.stat(2, r.ID, extCPU).Value)
		}
	}
	fmt.Fprintf(&b, "\nMedians of %d rounds (each row's \"vs b\" is the median of its per-round ratio to, or difference from, row b); "+
		"windows of %v at 64 clients and %v at 1 client per row and round; Envoy --concurrency %d. "+
		"Streamed answer: 4 KiB requests from 32 clients, each answered with %d server-sent events flushed about %v apart (window %v).\n",
		s.Rounds, s.Window, s.Window/2, s.Concurrency, streamEvents+1, streamGap, s.Window/2)
	return b.String()
}

// benchfmt renders every sample as a line in Go benchmark format, so that
// benchstat summarises the rounds (median and confidence interval):
// BenchmarkEnvoy/row=<id>/load=<load> with the values, and
// BenchmarkEnvoyVsBuffer/... with the per-round comparison with row b.
func (res results) benchfmt(rs []*row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: github.com/kvgate/kvgate/tests/envoybench\n", runtime.GOOS, runtime.GOARCH)
	if c := cpuModel(); c != "" {
		fmt.Fprintf(&b, "cpu: %s\n", c)
	}
	for li, l := range loads {
		if !res.measured(li) {
			continue
		}
		for _, round := range res[li] {
			base := round[baseline]
			for _, r := range rs {
				s := round[r.ID]
				name := fmt.Sprintf("row=%s/load=%s", r.ID, l.Name)
				if l.Clients > 1 {
					fmt.Fprintf(&b, "BenchmarkEnvoy/%s %d %.1f req/s %.2f cpu-µs/req", name, s.N, rps(s), cpu(s))
				} else {
					fmt.Fprintf(&b, "BenchmarkEnvoy/%s %d %.1f p50-µs %.2f cpu-µs/req", name, s.N, p50(s), cpu(s))
				}
				fmt.Fprintf(&b, " %.2f offworker-cpu-µs/req", offWorker(s))
				if r.Ext {
					fmt.Fprintf(&b, " %.2f ext-cpu-µs/req", extCPU(s))
				}
				b.WriteString("\n")
				if r.ID == baseline {
					continue
				}
				if l.Clients > 1 {
					fmt.Fprintf(&b, "BenchmarkEnvoyVsBuffer/%s %d %.2f %%-req/s %.2f +cpu-µs/req\n", name, s.N, 100*rps(s)/rps(base), cpu(s)-cpu(base))
				} else {
					fmt.Fprintf(&b, "BenchmarkEnvoyVsBuffer/%s %d %.1f +p50-µs %.2f +cpu-µs/req\n", name, s.N, p50(s)-p50(base), cpu(s)-cpu(base))
				}
			}
		}
	}
	return b.String()
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// BenchmarkEnvoy measures every row side by side (see the package doc and
// BENCHMARKS.md). It runs its rounds once whatever b.N is, prints the table
// and reports kvgate's and ext_proc's figures against row b as metrics:
//
//	KVGATE_ENVOY=$PWD/../../.venv/bin/envoy go test -run '^$' -bench Envoy -benchtime 1x -timeout 20m
func BenchmarkEnvoy(b *testing.B) {
	s := settingsFromEnv()
	if err := s.check(); err != nil {
		b.Fatal(err)
	}
	h := start(b, s.Concurrency)
	for _, r := range h.Rows {
		if err := h.check(r); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	res := h.measure(s, b.Logf)
	b.ReportMetric(time.Since(t0).Seconds(), "s-measuring")
	table := res.table(h.Rows, s)
	b.Logf("\n%s", table)
	if s.Out != "" {
		if err := os.MkdirAll(s.Out, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Out, "envoy.md"), []byte(table), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Out, "envoy.txt"), []byte(res.benchfmt(h.Rows)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range []string{"d", "e", "f", "n", "n2"} {
		if !slices.ContainsFunc(h.Rows, func(r *row) bool { return r.ID == id }) {
			continue
		}
		b.ReportMetric(100*res.stat(0, id, rps).Ratio, id+"-%-req/s-of-b")
		b.ReportMetric(res.stat(1, id, p50).Diff, id+"-+p50-µs")
		b.ReportMetric(res.stat(0, id, cpu).Diff, id+"-+cpu-µs/req")
	}
	for _, e := range res.errors(h.Rows) {
		b.Error(e)
	}
}

// TestRows is the benchmark's smoke test, in `make test`: it starts every
// row, checks that each forwards exactly what it should (kvgate and the
// ext_proc server forward the same rewrite, and answer a bad body with the
// same error), runs one short round of every load and checks that every
// row answered every request and that CPU time was read. No timing is
// asserted.
func TestRows(t *testing.T) {
	h := start(t, 1)
	for _, r := range h.Rows {
		if err := h.check(r); err != nil {
			t.Fatal(err)
		}
	}
	// The same rule: kvgate and the ext_proc server answer bad bodies alike.
	// Row nw, when it runs, is the same guest behind other hooks: it too.
	var same []*row
	for _, id := range []string{"d", "f", "n", "nw"} {
		if i := slices.IndexFunc(h.Rows, func(r *row) bool { return r.ID == id }); i >= 0 {
			same = append(same, h.Rows[i])
		}
	}
	for _, c := range []struct {
		name, body string
		header     map[string]string
		status     int
	}{
		{"truncated", `{"kv_hints":null,"model":`, nil, 400},
		{"unclosed array", `[1,2`, nil, 400},
		{"gzip", `{"model":"m"}`, map[string]string{"Content-Encoding": "gzip"}, 415},
	} {
		got := make([]string, len(same))
		for i, r := range same {
			req, _ := http.NewRequest(http.MethodPost, h.url(r), strings.NewReader(c.body))
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := h.one[r.ID].Do(req)
			if err != nil {
				t.Fatalf("%s, row %s: %v", c.name, r.ID, err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s, row %s: %d %q, want %d application/json: %s", c.name, r.ID, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, buf.Bytes())
			}
			got[i] = buf.String()
		}
		for i, r := range same[1:] {
			if got[i+1] != got[0] {
				t.Errorf("%s: row %s answered %s, row %s %s", c.name, same[0].ID, got[0], r.ID, got[i+1])
			}
		}
	}

	s := settings{Rounds: 1, Window: 200 * time.Millisecond, Concurrency: 1}
	res := h.measure(s, nil)
	for _, e := range res.errors(h.Rows) {
		t.Error(e)
	}
	for _, r := range h.Rows {
		if res[0][0][r.ID].CPU <= 0 {
			t.Errorf("row %s: no Envoy CPU time read", r.ID)
		}
		// The worker thread's own time is read by its name: a name Envoy
		// changed would put all of it off the worker.
		if s := res[0][0][r.ID]; s.OffWorker >= s.CPU {
			t.Errorf("row %s: no CPU time of Envoy's worker thread read (%v of %v off it)", r.ID, s.OffWorker, s.CPU)
		}
		if r.Ext && res[0][0][r.ID].ExtCPU <= 0 {
			t.Errorf("row %s: no ext_proc CPU time read", r.ID)
		}
	}
	// Rows nk, nr and np's C module makes kvgate's calls: its counters
	// counted every request they forwarded, so the rows measure what they
	// say.
	for id, stat := range map[string]string{"nk": "kvgate_bench_calls", "nr": "kvgate_bench_rewrites", "np": "kvgate_bench_pages"} {
		if !slices.ContainsFunc(h.Rows, func(r *row) bool { return r.ID == id }) {
			continue
		}
		// A module's counters are in Envoy's dynamicmodulescustom namespace:
		// the rows' bootstrap has no runtime flag that strips it
		// (envoy/envoy-native.yaml's).
		n, err := h.Envoy.Stat("dynamicmodulescustom." + stat)
		if err != nil || n == 0 {
			t.Errorf("row %s: %s = %d, %v; want the requests it forwarded", id, stat, n, err)
		}
	}
	table := res.table(h.Rows, s)
	for _, r := range h.Rows {
		if !strings.Contains(table, "| "+r.ID+" | "+r.Name) {
			t.Errorf("table lacks row %s:\n%s", r.ID, table)
		}
	}
	if n := strings.Count(res.benchfmt(h.Rows), "\nBenchmarkEnvoy/"); n != len(loads)*len(h.Rows) {
		t.Errorf("benchstat lines: %d, want %d", n, len(loads)*len(h.Rows))
	}
	t.Logf("\n%s", table)
}

// TestLoadsLeftOut checks a run of some loads alone (KVGATE_ENVOY_LOADS):
// an unknown name is refused, the loads left out read as dashes in the
// table and have no benchstat lines, and their empty samples are no
// failures.
func TestLoadsLeftOut(t *testing.T) {
	if err := (settings{Loads: []string{"1MiB-1client", "2MiB"}}).check(); err == nil || !strings.Contains(err.Error(), `"2MiB"`) {
		t.Errorf("an unknown load: %v, want it named in an error", err)
	}
	s := settings{Rounds: 2, Window: time.Second, Concurrency: 1, Loads: []string{"1MiB-1client"}}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	rs := []*row{{ID: baseline, Name: "buffer filter"}, {ID: "n", Name: "native"}}
	res := make(results, len(loads))
	for li, l := range loads {
		res[li] = make([]map[string]sample, s.Rounds)
		for round := range res[li] {
			res[li][round] = map[string]sample{}
			if !s.runs(l) {
				continue
			}
			res[li][round][baseline] = sample{N: 10, Elapsed: time.Second, P50: time.Millisecond, CPU: 700 * time.Microsecond}
			res[li][round]["n"] = sample{N: 10, Elapsed: time.Second, P50: 1200 * time.Microsecond, CPU: 900 * time.Microsecond}
		}
	}
	if errs := res.errors(rs); len(errs) > 0 {
		t.Errorf("errors of loads left out: %q", errs)
	}
	table := res.table(rs, s)
	for _, want := range []string{
		"| b | buffer filter | – | – | – | – | – | – | 1.00 ms | **0** | 700 µs | **0** | – | – |",
		"| n | native | – | – | – | – | – | – | 1.20 ms | +200 µs | 900 µs | +200 µs | – | – |",
	} {
		if !strings.Contains(table, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	bf := res.benchfmt(rs)
	if n := strings.Count(bf, "\nBenchmarkEnvoy/"); n != s.Rounds*len(rs) {
		t.Errorf("benchstat lines: %d, want %d:\n%s", n, s.Rounds*len(rs), bf)
	}
	if strings.Contains(bf, "4KiB") {
		t.Errorf("benchstat lines of a load left out:\n%s", bf)
	}
}
