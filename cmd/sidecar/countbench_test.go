package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"
)

// BenchmarkProcsCounts counts, per 4 KiB request, what the plain proxy and
// the sidecar each do for it: no timing, counts. b.N requests go to each,
// from one client on one kept-alive connection per proxy, in pairs (which
// goes first alternates), in front of the same echo worker:
//
//   - in this process (benchTargets), heap allocations, bytes allocated and
//     goroutines created, from runtime/metrics, over the same b.N requests
//     sent straight to the worker subtracted;
//   - every party in its own process (BenchmarkProcsPaired's), each proxy's
//     context switches (all its threads, /proc/<pid>/task/*/status) and CPU;
//   - then again with strace -c -f attached to both proxies: system calls
//     by kind.
//
// It prints the table BENCHMARKS.md section 3 shows. It needs strace and
// KVGATE_COUNTS=1, and is skipped otherwise (make bench-smoke runs every
// benchmark):
//
//	KVGATE_COUNTS=1 go test -run '^$' -bench ProcsCounts -benchtime 2000x ./cmd/sidecar
func BenchmarkProcsCounts(b *testing.B) {
	if os.Getenv("KVGATE_COUNTS") == "" {
		b.Skip("counts, not timings: set KVGATE_COUNTS=1")
	}
	straceBin, err := exec.LookPath("strace")
	if err != nil {
		b.Skip("needs strace")
	}
	if b.N == 1 {
		return // the benchmark's first run, to size b.N: -benchtime Nx decides it
	}
	n := b.N
	body := chatBody(4096)
	var rows []countRow
	add := func(name, unit string, plain, side float64) {
		rows = append(rows, countRow{name, unit, plain, side})
	}

	// In one process: allocations and goroutines, the worker's and the
	// client's share cancelled out by the direct run.
	tg := benchTargets(b)
	var rt [3][3]float64
	for k, u := range []string{tg.direct, tg.plain, tg.sidecar} {
		do := serialClient(b, body, u)
		before := runtimeCounts()
		for range n {
			do(u)
		}
		after := runtimeCounts()
		for m := range rt[k] {
			rt[k][m] = (after[m] - before[m]) / float64(n)
		}
	}
	for m, name := range []string{"heap allocations", "bytes allocated", "goroutines created"} {
		add(name, "in one process, less direct", rt[1][m]-rt[0][m], rt[2][m]-rt[0][m])
	}

	echo := startHelper(b, "echo", "")
	plain := startHelper(b, "proxy", echo.url)
	side := startSidecarProc(b, "", echo.url, strings.Fields(os.Getenv("KVGATE_BENCH_ARGS"))...)
	pids := [2]int{plain.pid, side.pid}
	do := serialClient(b, body, plain.url, side.url)
	pairs := func() {
		for i := range n {
			if i%2 == 0 {
				do(plain.url)
				do(side.url)
			} else {
				do(side.url)
				do(plain.url)
			}
		}
	}

	// Context switches and CPU, without strace (which stops a thread at
	// every system call).
	var cs0 [2][2]float64
	var cpu0 [2]float64
	for k, p := range pids {
		cs0[k], cpu0[k] = ctxSwitches(p), float64(cpuTime(p).Microseconds())
	}
	f0 := filterSeconds(b, side.admin)
	pairs()
	f1 := filterSeconds(b, side.admin)
	var cs [2][2]float64
	var cpu [2]float64
	for k, p := range pids {
		c := ctxSwitches(p)
		for v := range c {
			cs[k][v] = (c[v] - cs0[k][v]) / float64(n)
		}
		cpu[k] = (float64(cpuTime(p).Microseconds()) - cpu0[k]) / float64(n)
	}
	add("voluntary context switches", "all threads", cs[0][0], cs[1][0])
	add("involuntary context switches", "all threads (noisy)", cs[0][1], cs[1][1])
	add("CPU µs", "all threads (noisy)", cpu[0], cpu[1])
	add("filter µs", "kvgate_filter_duration_seconds (noisy)", 0, (f1-f0)*1e6/float64(n))

	// System calls, with strace attached to both.
	dir := b.TempDir()
	var traces [2]*exec.Cmd
	for k, p := range pids {
		out := filepath.Join(dir, strconv.Itoa(k))
		cmd := exec.Command(straceBin, "-c", "-f", "-o", out, "-p", strconv.Itoa(p))
		logs := &syncbuf.Buffer{}
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(logs.String(), "attached") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				b.Skipf("strace did not attach: %s", logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		traces[k] = cmd
	}
	time.Sleep(200 * time.Millisecond) // every thread attached
	pairs()
	var calls [2]map[string]float64
	for k, cmd := range traces {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		c, err := straceCounts(filepath.Join(dir, strconv.Itoa(k)))
		if err != nil {
			b.Fatal(err)
		}
		calls[k] = c
	}
	add("system calls", "strace -c -f", calls[0]["total"]/float64(n), calls[1]["total"]/float64(n))
	kinds := map[string]bool{}
	for _, c := range calls {
		for s := range c {
			if s != "total" {
				kinds[s] = true
			}
		}
	}
	var names []string
	for s := range kinds {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool {
		a, c := calls[0][names[i]]+calls[1][names[i]], calls[0][names[j]]+calls[1][names[j]]
		return a > c || a == c && names[i] < names[j]
	})
	for _, s := range names {
		p, q := calls[0][s]/float64(n), calls[1][s]/float64(n)
		if p+q < 0.01 {
			continue
		}
		add("  "+s, "", p, q)
	}

	// Printed, not logged: a benchmark's log is cut to a few lines.
	t := &strings.Builder{}
	fmt.Fprintf(t, "\nBenchmarkProcsCounts, per request (%d 4 KiB requests to each, one client):\n\n| per request | plain proxy | sidecar | sidecar − proxy |\n|---|--:|--:|--:|\n", n)
	for _, r := range rows {
		name := r.name
		if r.note != "" {
			name += ", " + r.note
		}
		fmt.Fprintf(t, "| %s | %s | %s | %s |\n", name, fmtCount(r.plain), fmtCount(r.side), fmtCount(r.side-r.plain))
	}
	fmt.Print(t.String())
}

type countRow struct {
	name, note  string
	plain, side float64
}

func fmtCount(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// filterSeconds reads the sidecar's kvgate_filter_duration_seconds_sum
// from its admin listener at admin.
func filterSeconds(b *testing.B, admin string) float64 {
	r, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "kvgate_filter_duration_seconds_sum "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	b.Fatal("no kvgate_filter_duration_seconds_sum on /metrics")
	return 0
}

// runtimeCounts reads this process's heap allocations, bytes allocated
// and goroutines created so far.
func runtimeCounts() [3]float64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	var v [3]float64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = float64(s[i].Value.Uint64())
		}
	}
	return v
}

// ctxSwitches is the number of voluntary (a thread that waited: a wake-up)
// and involuntary (preempted) context switches of all threads of process
// pid, from /proc.
func ctxSwitches(pid int) [2]float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var sum [2]float64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			switch k {
			case "voluntary_ctxt_switches":
				sum[0] += n
			case "nonvoluntary_ctxt_switches":
				sum[1] += n
			}
		}
	}
	return sum
}

// straceCounts reads the calls column of an strace -c summary, by system
// call, and its total.
func straceCounts(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || strings.HasPrefix(fs[0], "%") || strings.HasPrefix(fs[0], "-") {
			continue
		}
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if v, err := strconv.ParseFloat(fs[3], 64); err == nil {
			c[fs[len(fs)-1]] = v
		}
	}
	if c["total"] == 0 {
		b, _ := os.ReadFile(path)
		return nil, fmt.Errorf("no strace summary in %s:\n%s", path, b)
	}
	return c, sc.Err()
}
