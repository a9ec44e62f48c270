package envoybench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// cpuTime returns the CPU time a process has used so far: the sum over its
// threads of /proc/<pid>/task/<tid>/schedstat's first field (nanoseconds
// on a CPU), and the part of it Envoy's worker threads (named
// wrk:worker_<n>) used. /proc/<pid>/stat's utime+stime says the same in
// clock ticks (10 ms), too coarse for a round of a few hundred large
// requests; it is the fallback where schedstat is missing, with no
// worker part. Envoy's threads live as long as the process, so no
// thread's time is lost between two readings.
func cpuTime(pid int) (total, worker time.Duration, err error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err == nil && len(tasks) > 0 {
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // a thread that just ended
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				return 0, 0, fmt.Errorf("%s: empty", t)
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %v", t, err)
			}
			total += time.Duration(ns)
			if c, err := os.ReadFile(filepath.Join(filepath.Dir(t), "comm")); err == nil && strings.HasPrefix(string(c), "wrk:worker_") {
				worker += time.Duration(ns)
			}
		}
		return total, worker, nil
	}
	total, err = statTime(pid)
	return total, 0, err
}

// statTime is utime+stime from /proc/<pid>/stat, assuming the usual 100
// ticks a second.
func statTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// sample is one load on one row in one round.
type sample struct {
	N       int           // requests answered 200
	Errors  int           // requests that failed or got another status
	Err     error         // the first failure
	Elapsed time.Duration // from the first request sent to the last answer
	P50     time.Duration // median latency
	CPU     time.Duration // Envoy's CPU time per request
	// OffWorker is the part of CPU spent outside Envoy's worker threads:
	// a Go module's runtime threads (sysmon, hand-offs of its P) show here.
	OffWorker time.Duration
	ExtCPU    time.Duration // the ext_proc server's CPU time per request
}

// ReqPerSec is the throughput.
func (s sample) ReqPerSec() float64 { return float64(s.N) / s.Elapsed.Seconds() }

// client is one row's HTTP client: keep-alive connections, enough for
// every concurrent sender, kept across rounds.
func client(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
		Timeout: 30 * time.Second,
	}
}

// post sends one request and reads the whole answer, streamed when
// stream is set.
func post(cl *http.Client, url string, body []byte, check string, stream bool) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if check != "" {
		req.Header.Set(checkHeader, check)
	}
	want := answer
	if stream {
		req.Header.Set(streamHeader, "1")
		want = streamed
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, want) {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// drive sends body to url from clients senders for about d (each sender
// finishes the request it is in), asking for streamed answers when stream
// is set, and measures the answers and the CPU time the processes pids[0]
// (Envoy) and pids[1] (ext_proc, if non-zero) used.
func drive(cl *http.Client, url string, body []byte, clients int, stream bool, d time.Duration, pids [2]int) sample {
	var cpu0, work0 [2]time.Duration
	for i, p := range pids {
		if p != 0 {
			cpu0[i], work0[i], _ = cpuTime(p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     atomic.Int64
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				if err := post(cl, url, body, "", stream); err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	s := sample{N: len(lat), Errors: int(errs.Load()), Err: firstErr, Elapsed: time.Since(start)}
	var cpu1, work1 [2]time.Duration
	for i, p := range pids {
		if p != 0 {
			cpu1[i], work1[i], _ = cpuTime(p)
		}
	}
	if s.N > 0 {
		slices.Sort(lat)
		s.P50 = lat[len(lat)/2]
		s.CPU = (cpu1[0] - cpu0[0]) / time.Duration(s.N)
		s.ExtCPU = (cpu1[1] - cpu0[1]) / time.Duration(s.N)
		s.OffWorker = s.CPU - (work1[0]-work0[0])/time.Duration(s.N)
	}
	return s
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is reordered.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
