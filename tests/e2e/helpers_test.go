package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

var (
	repoRoot = mustAbs("../..")
	// modulePath is the module both hosts run: wasm/kvgate.wasm, or
	// $KVGATE_WASM to try another build.
	modulePath = moduleFile()
	buildDir   string
)

func moduleFile() string {
	if p := os.Getenv("KVGATE_WASM"); p != "" {
		return mustAbs(p)
	}
	return filepath.Join(repoRoot, "wasm", "kvgate.wasm")
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "kvgate-e2e-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// builds are the packages built so far by built, by package.
var builds struct {
	sync.Mutex
	m map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// built builds the package pkg (a path from the repository root, "./cmd/
// sidecar") once per test binary into buildDir and returns the file: a
// native binary, or with wasm a proxy-wasm module (wasip1, c-shared).
func built(t testing.TB, pkg string, wasm bool) string {
	t.Helper()
	builds.Lock()
	if builds.m == nil {
		builds.m = map[string]*build{}
	}
	b := builds.m[pkg]
	if b == nil {
		b = &build{}
		builds.m[pkg] = b
	}
	builds.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, filepath.Base(pkg))
		args := []string{"build", "-trimpath"}
		if wasm {
			b.path += ".wasm"
			args = append(args, "-buildmode=c-shared")
		}
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, "-o", b.path, pkg)...)
		cmd.Dir = repoRoot
		if wasm {
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// sidecarBinary is cmd/sidecar, built once per test binary.
func sidecarBinary(t testing.TB) string { return built(t, "./cmd/sidecar", false) }

func startWorker(t testing.TB) *Worker {
	t.Helper()
	w, err := StartWorker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// sidecar is a running cmd/sidecar.
type sidecar struct {
	API, Admin string // host:port
	cmd        *exec.Cmd
	log        *syncbuf.Buffer // its stdout and stderr, readable while it runs
}

// startSidecar runs the sidecar binary with a plugin configuration in
// front of upstream and waits for /readyz.
func startSidecar(t testing.TB, bin, upstream, pluginConfig, cacheDir string, extra ...string) *sidecar {
	t.Helper()
	s := &sidecar{
		API:   fmt.Sprintf("127.0.0.1:%d", envoytest.FreePort(t)),
		Admin: fmt.Sprintf("127.0.0.1:%d", envoytest.FreePort(t)),
		log:   &syncbuf.Buffer{},
	}
	args := append([]string{"-listen", s.API, "-admin", s.Admin, "-upstream", "http://" + upstream,
		"-filter", modulePath, "-filter-config", pluginConfig, "-cache-dir", cacheDir}, extra...)
	s.cmd = exec.Command(bin, args...)
	startProcess(t, s.cmd, s.log, "sidecar", httpOK("http://"+s.Admin+"/readyz"))
	return s
}

// startProcess starts cmd with its output in log, stops it when the test
// ends (SIGINT, then a kill after 5 s), and waits up to 60 s until ready
// says it serves; it fails the test, with what it logged, when the
// process exits first or never gets ready.
func startProcess(t testing.TB, cmd *exec.Cmd, log *syncbuf.Buffer, what string, ready func() bool) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case <-done:
			t.Fatalf("%s exited during start-up: %v\n%s", what, cmd.ProcessState, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s\n%s", what, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpOK reports whether a GET of url answers 200.
func httpOK(url string) func() bool {
	return func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

func (s *sidecar) metrics() (string, error) {
	resp, err := http.Get("http://" + s.Admin + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// startEnvoy renders the committed bootstrap with the given listeners in
// front of upstream and starts Envoy on it.
func startEnvoy(t testing.TB, upstream string, listeners []envoyconfig.Listener) *envoytest.Process {
	t.Helper()
	bin := envoytest.Binary(t)
	admin := envoytest.FreePort(t)
	cfg, err := envoyconfig.Render(envoyconfig.Options{AdminPort: admin, Upstream: upstream, ModulePath: modulePath, Listeners: listeners})
	if err != nil {
		t.Fatal(err)
	}
	return envoytest.Start(t, bin, cfg, admin, 2)
}

// response is what a client received.
type response struct {
	Status      int
	ContentType string
	GRPCStatus  string // the grpc-status header, "" without one
	Body        []byte
}

// send writes one HTTP/1.1 request exactly as given (request target,
// headers, Content-Length or chunked framing) on a new connection and reads
// the answer.
func send(addr, method, target string, headers map[string]string, body []byte, chunked bool) (response, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: worker\r\nConnection: close\r\n", method, target)
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\r\n", k, headers[k])
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		// Three chunks, so hosts see the body arrive in parts.
		n := len(body)
		for _, part := range [][]byte{body[:n/3], body[n/3 : 2*n/3], body[2*n/3:]} {
			if len(part) > 0 {
				fmt.Fprintf(&b, "%x\r\n%s\r\n", len(part), part)
			}
		}
		b.WriteString("0\r\n\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
	}
	// Write concurrently with reading: a host may answer (413) before it
	// has read the whole body.
	werr := make(chan error, 1)
	go func() { _, err := conn.Write(b.Bytes()); werr <- err }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		if we := <-werr; we != nil {
			return response{}, fmt.Errorf("write: %v; read: %v", we, err)
		}
		return response{}, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
		GRPCStatus: resp.Header.Get("Grpc-Status"), Body: rb}, nil
}

// series are the values of the filter's metric families in one scrape,
// keyed by `family{label="value",...}` with labels sorted.
type series map[string]float64

var sampleRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)`)
var labelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseSeries reads the filter's families from a Prometheus text page.
func parseSeries(page string) series {
	fams := map[string]bool{filterspec.MetricIgnored: true, filterspec.MetricAdmitted: true, filterspec.MetricRejected: true,
		filterspec.MetricUninspected: true, filterspec.MetricRefused: true, filterspec.MetricDetected: true,
		filterspec.MetricRouterOnlyRemoved: true, filterspec.MetricRouterOnlyDetected: true}
	return parseFamilies(page, func(f string) bool { return fams[f] })
}

// parseAny reads every family of a Prometheus text page.
func parseAny(page string) series {
	return parseFamilies(page, func(string) bool { return true })
}

func parseFamilies(page string, want func(family string) bool) series {
	out := series{}
	for _, line := range strings.Split(page, "\n") {
		m := sampleRe.FindStringSubmatch(line)
		if m == nil || !want(m[1]) {
			continue
		}
		var labels []string
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			labels = append(labels, l[1]+`="`+l[2]+`"`)
		}
		sort.Strings(labels)
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+"{"+strings.Join(labels, ",")+"}"] += v
	}
	return out
}

// delta returns after - before, per series.
func (after series) delta(before series) series {
	d := series{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

func (s series) add(o series) {
	for k, v := range o {
		s[k] += v
	}
}

// keys returns the series names in order.
func (s series) keys() []string {
	var k []string
	for n := range s {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func (s series) String() string {
	var b strings.Builder
	for _, k := range s.keys() {
		fmt.Fprintf(&b, "%s %g\n", k, s[k])
	}
	return b.String()
}

// preflight sends one hinted request to a filtering listener and fails the
// test at once when it does not come back forwarded without the hint, so
// that a host that hangs costs one timeout, not one per vector.
func preflight(t testing.TB, w *Worker, name, addr string) {
	t.Helper()
	key := "preflight/" + name
	r, err := send(addr, "POST", "/v1/chat/completions", map[string]string{CaseHeader: key},
		[]byte(`{"kv_hints":null,"model":"m"}`), false)
	if err != nil || r.Status != 200 || len(w.Records(key)) != 1 {
		t.Fatalf("%s does not forward a simple request (err %v, status %d, %d at the worker): %.200s", name, err, r.Status, len(w.Records(key)), r.Body)
	}
}
