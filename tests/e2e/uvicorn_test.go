package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvgate/kvgate/internal/syncbuf"

	"github.com/kvgate/kvgate/internal/envoytest"
)

// uvicornWorker is tests/e2e/uvicorn_worker.py: FastAPI on uvicorn, with
// uvicorn's default 5 s keep-alive, in the project's .venv.
type uvicornWorker struct {
	// Addr is its host:port on loopback.
	Addr string
	log  *syncbuf.Buffer
}

// uvicornKeepAlive is uvicorn's default --timeout-keep-alive, which the
// worker runs with: an idle connection is closed after it.
const uvicornKeepAlive = 5 * time.Second

// startUvicorn starts the worker with one of uvicorn's HTTP/1.1
// implementations ("h11" or "httptools") and waits until it answers.
func startUvicorn(t testing.TB, impl string) *uvicornWorker {
	t.Helper()
	python := envoytest.Python(t)
	port := envoytest.FreePort(t)
	w := &uvicornWorker{Addr: fmt.Sprintf("127.0.0.1:%d", port), log: &syncbuf.Buffer{}}
	cmd := exec.Command(python, filepath.Join(repoRoot, "tests", "e2e", "uvicorn_worker.py"), "--port", fmt.Sprint(port), "--http", impl)
	startProcess(t, cmd, w.log, "uvicorn worker", httpOK("http://"+w.Addr+"/health"))
	return w
}

// uvicornRecord is one request as the worker's model read it.
type uvicornRecord struct {
	Body    []byte
	KVHints any
	Expect  *string
	// RouterOnly are the router-only fields the model read, by path;
	// Model, Messages and NvExt what it read of the rest.
	RouterOnly map[string]any
	Model      *string
	Messages   any
	NvExt      map[string]any
	// Headers are the request's headers as the worker got them, every
	// value, names in lower case.
	Headers [][2]string
}

// Records returns what reached the worker under a CaseHeader value.
func (w *uvicornWorker) Records(t testing.TB, key string) []uvicornRecord {
	t.Helper()
	resp, err := http.Get("http://" + w.Addr + "/_kvgate/records?case=" + url.QueryEscape(key))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw []struct {
		Body       string         `json:"body"`
		KVHints    any            `json:"kv_hints"`
		Expect     *string        `json:"expect"`
		RouterOnly map[string]any `json:"router_only"`
		Model      *string        `json:"model"`
		Messages   any            `json:"messages"`
		NvExt      map[string]any `json:"nvext"`
		Headers    [][2]string    `json:"header_list"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	out := make([]uvicornRecord, len(raw))
	for i, r := range raw {
		b, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = uvicornRecord{Body: b, KVHints: r.KVHints, Expect: r.Expect, RouterOnly: r.RouterOnly,
			Model: r.Model, Messages: r.Messages, NvExt: r.NvExt, Headers: r.Headers}
	}
	return out
}

// Count returns how many chat requests reached the worker.
func (w *uvicornWorker) Count(t testing.TB) int {
	t.Helper()
	resp, err := http.Get("http://" + w.Addr + "/_kvgate/count")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c struct{ Total int }
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("count: %v: %s", err, b)
	}
	return c.Total
}
