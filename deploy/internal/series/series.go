// Package series lists the Prometheus series that kvgate's hosts export,
// taken from the code and the running programs rather than written down:
// the guest's counters from filterspec.MetricNames, the sidecar's from a scrape
// of the sidecar built from cmd/sidecar, and Envoy's from a scrape of a
// real Envoy running the committed bootstrap (envoy/envoy.yaml). The
// dashboard and rule tests check every series they query against these.
package series

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/repo"
	"github.com/kvgate/kvgate/metricname"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Names maps each series name to the labels its series carry, with every
// value seen. A histogram or summary family appears with the names a query
// uses: the family and its _bucket, _sum and _count series.
type Names map[string]Labels

// Labels maps a label name to the values seen.
type Labels map[string]map[string]bool

// Sorted returns the names in order.
func (n Names) Sorted() []string {
	s := make([]string, 0, len(n))
	for k := range n {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Add puts every series of o into n.
func (n Names) Add(o Names) {
	for name, ls := range o {
		for l, vs := range ls {
			for v := range vs {
				n.add(name, l, v)
			}
		}
		if n[name] == nil {
			n[name] = Labels{}
		}
	}
}

func (n Names) add(name, label, value string) {
	if n[name] == nil {
		n[name] = Labels{}
	}
	if label == "" {
		return
	}
	if n[name][label] == nil {
		n[name][label] = map[string]bool{}
	}
	n[name][label][value] = true
}

// Guest returns the families the wasm guest defines (filterspec.MetricNames,
// decoded with metricname.Decode), with their labels: the same in Envoy
// and in the sidecar. The router-only families, whose series the
// configuration makes, are those of AllPresetsConfig.
func Guest() (Names, error) {
	out := Names{}
	cfg, err := filterspec.ParseConfig([]byte(AllPresetsConfig))
	if err != nil {
		return nil, err
	}
	for _, enc := range cfg.MetricNames() {
		fam, labels, ok := metricname.Decode(enc)
		if !ok {
			return nil, fmt.Errorf("series: filterspec.MetricNames has %q, which metricname.Decode rejects", enc)
		}
		out.add(fam, "", "")
		for _, l := range labels {
			out.add(fam, l.Name, l.Value)
		}
	}
	return out, nil
}

// Parse reads a Prometheus text exposition and returns its series.
func Parse(text string) (Names, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := Names{}
	for name, f := range fams {
		var names []string
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = []string{name + "_sum", name + "_count", name + "_bucket"}
			for _, m := range f.GetMetric() {
				for _, b := range m.GetHistogram().GetBucket() {
					out.add(name+"_bucket", "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				out.add(name+"_bucket", "le", "+Inf")
			}
		case dto.MetricType_SUMMARY:
			names = []string{name + "_sum", name + "_count"}
			out.add(name, "quantile", "0.5")
		}
		names = append(names, name)
		for _, m := range f.GetMetric() {
			for _, n := range names {
				out.add(n, "", "")
				for _, l := range m.GetLabel() {
					out.add(n, l.GetName(), l.GetValue())
				}
			}
		}
	}
	return out, nil
}

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// BuildSidecar builds cmd/sidecar from the main module (with its own
// go.mod, as `make sidecar` does) once per test binary and returns the
// binary's path.
func BuildSidecar(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		root, err := repo.Root()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "kvgate-series-"); err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(buildDir, "sidecar")
		cmd := exec.Command("go", "build", "-trimpath", "-o", buildBin, "./cmd/sidecar")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/sidecar: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return buildBin
}

// Cleanup removes the binary BuildSidecar made; call it from TestMain.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Sidecar is a running sidecar process.
type Sidecar struct {
	// API and Admin are the base URLs of the proxied API and the admin
	// endpoints.
	API, Admin string
	log        *lockedBuffer
}

// Log returns what the process wrote so far.
func (s *Sidecar) Log() string { return s.log.String() }

// StartSidecar runs bin with args (the image's entrypoint arguments, for
// example) followed by loopback listeners on free ports and -upstream;
// later flags win, so the process listens where the test can reach it.
// It waits for /readyz and stops the process when the test ends.
func StartSidecar(tb testing.TB, bin, upstream string, args ...string) *Sidecar {
	tb.Helper()
	s := &Sidecar{log: &lockedBuffer{}}
	api, admin := envoytest.FreePort(tb), envoytest.FreePort(tb)
	args = append(append([]string(nil), args...),
		"-listen", fmt.Sprintf("127.0.0.1:%d", api), "-admin", fmt.Sprintf("127.0.0.1:%d", admin),
		"-upstream", upstream, "-cache-dir", "", "-log-flush", "0")
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Env = append(os.Environ(), "HOME="+tb.TempDir())
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if tb.Failed() {
			tb.Logf("sidecar log:\n%s", s.Log())
		}
	})
	s.API, s.Admin = fmt.Sprintf("http://127.0.0.1:%d", api), fmt.Sprintf("http://127.0.0.1:%d", admin)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-done:
			tb.Fatalf("sidecar exited during start-up: %v\n%s", cmd.ProcessState, s.Log())
		default:
		}
		if code, _, err := Get(s.Admin + "/readyz"); err == nil && code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sidecar not ready after 2m\n%s", s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AllPresetsConfig is the filter configuration FromSidecar and FromEnvoy
// run with: every router-only preset, so that their field series exist.
const AllPresetsConfig = `{"router_only":{"engines":["vllm","sglang","trtllm","dynamo","llm-d"]}}`

// FromSidecar scrapes /metrics of a sidecar built from cmd/sidecar.
func FromSidecar(tb testing.TB) Names {
	tb.Helper()
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	defer worker.Close()
	s := StartSidecar(tb, BuildSidecar(tb), worker.URL, "-filter-config", AllPresetsConfig)
	return scrape(tb, s.API+"/v1/chat/completions", s.Admin+"/metrics")
}

// FromEnvoy scrapes /stats/prometheus of a real Envoy running the committed
// bootstrap with the committed module, after one request through it (so
// that request histograms exist). The Envoy binary is $KVGATE_ENVOY, or the
// repository's .venv/bin/envoy when that is unset; envoytest.Binary skips the
// test without one, and fails it under CI=true.
func FromEnvoy(tb testing.TB) Names {
	tb.Helper()
	root, err := repo.Root()
	if err != nil {
		tb.Fatal(err)
	}
	if os.Getenv("KVGATE_ENVOY") == "" {
		if p := filepath.Join(root, ".venv", "bin", "envoy"); fileExists(p) {
			tb.Setenv("KVGATE_ENVOY", p)
		}
	}
	bin := envoytest.Binary(tb)
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion"}`)
	}))
	defer worker.Close()
	admin, listen := envoytest.FreePort(tb), envoytest.FreePort(tb)
	cfg, err := envoyconfig.Render(envoyconfig.Options{
		AdminPort:  admin,
		Upstream:   strings.TrimPrefix(worker.URL, "http://"),
		ModulePath: filepath.Join(root, "wasm", "kvgate.wasm"),
		Listeners:  []envoyconfig.Listener{{Name: "kvgate", Port: listen, PluginConfig: AllPresetsConfig}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	p := envoytest.Start(tb, bin, cfg, admin, 1)
	return scrape(tb, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", listen), p.Admin+"/stats/prometheus")
}

// scrape sends one chat request with a hint to api, then reads metrics.
func scrape(tb testing.TB, api, metrics string) Names {
	tb.Helper()
	resp, err := http.Post(api, "application/json",
		strings.NewReader(`{"model":"m","messages":[],"kv_hints":{"protocol_version":"0.1"}}`))
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("POST %s: %s", api, resp.Status)
	}
	code, body, err := Get(metrics)
	if err != nil || code != http.StatusOK {
		tb.Fatalf("GET %s: %d %v", metrics, code, err)
	}
	n, err := Parse(body)
	if err != nil {
		tb.Fatalf("%s: %v", metrics, err)
	}
	return n
}

// Get fetches url with a short timeout.
func Get(url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
