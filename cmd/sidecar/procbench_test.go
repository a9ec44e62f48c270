package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// The benchmarks in this file run every party in a process of its own, as
// they are deployed: the echo worker and the plain reverse proxy are this
// test binary started again in a helper role (TestHelperProcess), the
// sidecar is the real binary, and the clients are this process. In one
// process (bench_test.go) the client, both proxies and the worker share one
// Go scheduler, which hands work between them without waking threads of
// other processes; across processes every hop is a wake-up, which is the
// latency users see.

// helperEnv selects TestHelperProcess's role: "echo" (the built-in echo
// worker) or "proxy" (a plain httputil.ReverseProxy with the sidecar's
// transport settings, to the URL in helperUpstreamEnv).
const (
	helperEnv         = "KVGATE_HELPER_ROLE"
	helperUpstreamEnv = "KVGATE_HELPER_UPSTREAM"
)

// TestHelperProcess is not a test: started by the process benchmarks with
// helperEnv set, it serves in its role on a loopback port, prints the
// address on stdout and serves until killed.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("a helper role for the process benchmarks, not a test")
	}
	var h http.Handler
	switch role {
	case "echo":
		h = echoHandler()
	case "proxy":
		u, err := url.Parse(os.Getenv(helperUpstreamEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.Transport = upstreamTransport(workerOptions{})
		// Its log lines (the net/http race in RATIONALE.md) would land in the
		// middle of benchmark result lines: go test merges the streams.
		rp.ErrorLog = log.New(io.Discard, "", 0)
		h = rp
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(ln.Addr().String())
	_ = (&http.Server{Handler: h}).Serve(ln)
	os.Exit(0)
}

// benchProc is a process started for a benchmark.
type benchProc struct {
	url   string // http://host:port
	pid   int
	admin string // host:port of the sidecar's admin listener; "" for a helper
}

// startHelper starts this test binary in a helper role and returns the
// address it serves on.
func startHelper(b *testing.B, role, upstream string) benchProc {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, helperUpstreamEnv+"="+upstream)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	// The plain proxy logs a line for each response it cuts short: when
	// it answers while its transport still reads the request body, net/http
	// races the two readers of that body (a few in a thousand requests;
	// the sidecar, which reads the body before forwarding it, never does).
	// Those lines are kept out of the benchmark's output.
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("helper %s: %v\n%s", role, err, logs.String())
	}
	return benchProc{url: "http://" + strings.TrimSpace(line), pid: cmd.Process.Pid}
}

// startSidecarProc starts a sidecar binary (bin, or the one artifacts
// builds when empty) in front of upstream and waits until it is ready.
func startSidecarProc(b *testing.B, bin, upstream string, args ...string) benchProc {
	b.Helper()
	if bin == "" {
		bin, _ = artifacts(b)
	}
	api, admin := freeAddrPair(b)
	cmd := exec.Command(bin, append([]string{"-listen", api, "-admin", admin, "-cache-dir", testCache(b), "-upstream", upstream}, args...)...)
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := http.Get("http://" + admin + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return benchProc{url: "http://" + api, pid: cmd.Process.Pid, admin: admin}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("sidecar not ready: %s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cpuTime is the CPU time all threads of process pid have used, from
// /proc/<pid>/task/*/schedstat (nanoseconds; 0 where there is no /proc).
func cpuTime(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
			sum += v
		}
	}
	return time.Duration(sum)
}

// BenchmarkProcsPaired is BenchmarkChat4KiBPaired (and Body4MiBPaired) with
// every party in its own process: the clients send each request through
// the plain proxy and the sidecar back to back, in alternating order, and
// the benchmark reports the p50 of the per-pair differences, and each
// proxy's CPU time per request (all its threads, from /proc). b.N is the
// number of pairs in all.
//
//	go test -run '^$' -bench ProcsPaired -benchtime 4000x -count 4 ./cmd/sidecar
//
// KVGATE_BENCH_ARGS adds sidecar flags.
func BenchmarkProcsPaired(b *testing.B) {
	for _, c := range []struct {
		name    string
		size    int
		clients int
	}{{"4KiB/clients=1", 4096, 1}, {"4KiB/clients=4", 4096, 4}, {"4MiB/clients=1", 4<<20 - 1, 1}} {
		b.Run(c.name, func(b *testing.B) {
			echo := startHelper(b, "echo", "")
			plain := startHelper(b, "proxy", echo.url)
			side := startSidecarProc(b, "", echo.url, strings.Fields(os.Getenv("KVGATE_BENCH_ARGS"))...)
			procPairs(b, chatBody(c.size), c.clients, plain, side)
		})
	}
}

// BenchmarkProcsCompare is BenchmarkCompare across processes: two sidecars
// (KVGATE_A_BIN and KVGATE_B_BIN, each the binary this package builds when
// unset, with the extra flags in KVGATE_A and KVGATE_B) and the plain proxy,
// each request sent to all three in an order that rotates every round. It
// is how a change is judged on the latency users see.
//
//	KVGATE_A_BIN=$PWD/sidecar-old go test -run '^$' -bench ProcsCompare -benchtime 4000x -count 4 ./cmd/sidecar
//
// With none of the four variables set it is skipped (make bench runs every
// benchmark; BenchmarkCompare already shows the harness's noise).
func BenchmarkProcsCompare(b *testing.B) {
	if os.Getenv("KVGATE_A_BIN")+os.Getenv("KVGATE_B_BIN")+os.Getenv("KVGATE_A")+os.Getenv("KVGATE_B") == "" {
		b.Skip("nothing to compare: set KVGATE_A_BIN, KVGATE_B_BIN, KVGATE_A or KVGATE_B")
	}
	for _, c := range []struct {
		name          string
		size, clients int
	}{{"4KiB/clients=1", 4096, 1}, {"4KiB/clients=4", 4096, 4}, {"4MiB/clients=1", 4<<20 - 1, 1}} {
		clients := c.clients
		b.Run(c.name, func(b *testing.B) {
			echo := startHelper(b, "echo", "")
			ps := []benchProc{startHelper(b, "proxy", echo.url)}
			for _, k := range []string{"KVGATE_A", "KVGATE_B"} {
				ps = append(ps, startSidecarProc(b, os.Getenv(k+"_BIN"), echo.url, strings.Fields(os.Getenv(k))...))
			}
			body := chatBody(c.size)
			do := make([]func(string) time.Duration, clients)
			for k := range do {
				do[k] = serialClient(b, body, ps[0].url, ps[1].url, ps[2].url)
			}
			orders := [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}
			a := make([]time.Duration, b.N)
			bb := make([]time.Duration, b.N)
			ba := make([]time.Duration, b.N)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			concurrentlyBy(clients, b.N, func(c, i int) {
				var t [3]time.Duration
				for _, k := range orders[i%len(orders)] {
					t[k] = do[c](ps[k].url)
				}
				a[i], bb[i], ba[i] = t[1]-t[0], t[2]-t[0], t[2]-t[1]
			})
			b.StopTimer()
			b.ReportMetric(median(a), "A-added-p50-µs")
			b.ReportMetric(median(bb), "B-added-p50-µs")
			b.ReportMetric(median(ba), "B-minus-A-p50-µs")
		})
	}
}

// procPairs sends b.N pairs of body from clients clients and reports the
// paired latencies (timePairs) and each proxy's CPU per request.
func procPairs(b *testing.B, body []byte, clients int, plain, side benchProc) {
	var cpu0 [2]time.Duration
	timePairs(b, body, clients, plain.url, side.url, func() {
		cpu0 = [2]time.Duration{cpuTime(plain.pid), cpuTime(side.pid)}
	})
	cpu := [2]time.Duration{cpuTime(plain.pid) - cpu0[0], cpuTime(side.pid) - cpu0[1]}
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "proxy-cpu-µs/req")
	b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "sidecar-cpu-µs/req")
}

// BenchmarkProcsRounds is BenchmarkChat4KiBRounds with every party in its
// own process: 64 clients in rounds of 1,024 requests that alternate
// between the plain proxy and the sidecar; it reports each side's
// requests per second and the median per-pair ratio, in percent.
//
//	go test -run '^$' -bench ProcsRounds -benchtime 30x -count 3 ./cmd/sidecar
func BenchmarkProcsRounds(b *testing.B) {
	echo := startHelper(b, "echo", "")
	plain := startHelper(b, "proxy", echo.url)
	side := startSidecarProc(b, "", echo.url, strings.Fields(os.Getenv("KVGATE_BENCH_ARGS"))...)
	alternateRounds(b, plain.url, side.url)
}
