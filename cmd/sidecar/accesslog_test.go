package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// headerRecorder is a worker that remembers the X-Request-Id of each
// request it gets.
type headerRecorder struct {
	mu  sync.Mutex
	ids []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	h.ids = append(h.ids, r.Header.Get("X-Request-Id"))
	h.mu.Unlock()
	_, _ = io.WriteString(w, `{"ok":true}`)
}

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// The built binary's access log says, per request, its id (the client's
// when well-formed, else a new one that the worker gets too), what the
// filter reported about the hint and the time in the filter; at debug
// level where a discarded envelope is at fault. Nothing of any body, hint,
// query or other header value is in the log.
func TestAccessLog(t *testing.T) {
	worker := &headerRecorder{}
	srv := httptest.NewServer(worker)
	defer srv.Close()
	secrets := []string{"secret-endpoint-7f3a", "secret-payload-9c1e", "secret-prompt-5d2b", "secret-query-3a8f", "secret-json-6b0c", "secret-auth-1e9d", "secret-remote-4c2e"}
	envelope := func(payload string) string {
		return `{"protocol_version":"0.1","message_id":"m1","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":` + payload + `}]}`
	}
	admitted := envelope(`{"source_control_endpoint":"tcp://secret-endpoint-7f3a:1","block_hashes":[1]}`)
	type want struct {
		status                      int
		hint, reason, detail        string // "" for an absent attribute
		routerOnly                  string
		id                          string // "" for a generated one
		filtered, upstream, sendsID bool
	}
	for _, mode := range []struct {
		config string
		reqs   []struct {
			method, path, id, body string
			want                   want
		}
	}{
		{`{"trust_kv_hints":true}`, []struct {
			method, path, id, body string
			want                   want
		}{
			{"POST", "/v1/chat/completions?token=secret-query-3a8f", "router-req-1", `{"model":"m","kv_hints":` + admitted + `}`,
				want{status: 200, hint: "admitted", id: "router-req-1", filtered: true, upstream: true}},
			{"POST", "/v1/chat/completions", "", `{"kv_hints":` + envelope(`"secret-payload-9c1e"`) + `}`,
				want{status: 200, hint: "discarded:malformed", reason: "malformed", detail: "actions[0].payload is not an object but a string", filtered: true, upstream: true}},
			{"POST", "/v1/completions", "has spaces in it", `{"model":"m","prompt":"secret-prompt-5d2b"}`,
				want{status: 200, hint: "none", filtered: true, upstream: true}},
			{"POST", "/v1/completions", strings.Repeat("x", maxRequestIDLen+1), `{"model":"m","prompt":"secret-json-6b0c"`,
				want{status: 400, hint: "rejected", filtered: true}},
			{"GET", "/v1/models", "", "", want{status: 200, hint: "-", filtered: true, upstream: true}},
		}},
		{`{"trust_kv_hints":false}`, []struct {
			method, path, id, body string
			want                   want
		}{
			{"POST", "/v1/chat/completions", "client-7", `{"model":"m","kv_hints":` + admitted + `}`,
				want{status: 200, hint: "stripped", reason: "untrusted", id: "client-7", filtered: true, upstream: true}},
		}},
		{`{"router_only":{"engines":["vllm","dynamo"]}}`, []struct {
			method, path, id, body string
			want                   want
		}{
			{"POST", "/v1/chat/completions", "client-8", `{"model":"m","kv_transfer_params":{"remote_host":"secret-remote-4c2e"},"nvext":{"dp_rank":1}}`,
				want{status: 200, hint: "none", id: "client-8", routerOnly: "kv_transfer_params,nvext.dp_rank", filtered: true, upstream: true}},
			{"POST", "/v1/chat/completions", "client-9", `{"model":"m"}`,
				want{status: 200, hint: "none", id: "client-9", filtered: true, upstream: true}},
		}},
	} {
		p := startProc(t, nil, "-upstream", srv.URL, "-cache-dir", testCache(t), "-filter-config", mode.config, "-log-level", "debug")
		for _, r := range mode.reqs {
			req, _ := http.NewRequest(r.method, "http://"+p.api+r.path, strings.NewReader(r.body))
			req.Header.Set("Authorization", "Bearer secret-auth-1e9d")
			if r.id != "" {
				req.Header.Set("X-Request-Id", r.id)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != r.want.status {
				t.Errorf("%s %s: status %d, want %d", r.method, r.path, resp.StatusCode, r.want.status)
			}
		}
		// The process exits on SIGTERM and flushes its log.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		var lines []map[string]any
		for _, l := range strings.Split(p.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
				lines = append(lines, m)
			}
		}
		if len(lines) != len(mode.reqs) {
			t.Fatalf("%d access lines for %d requests:\n%s", len(lines), len(mode.reqs), p.logs.String())
		}
		upstreamIDs := worker.snapshot()
		for i, r := range mode.reqs {
			l, w := lines[i], r.want
			id, _ := l["request_id"].(string)
			switch {
			case w.id != "" && id != w.id:
				t.Errorf("request %d: request_id %q, want the client's %q", i, id, w.id)
			case w.id == "" && !uuid4.MatchString(id):
				t.Errorf("request %d: request_id %q, want a generated UUID", i, id)
			}
			if w.upstream && !contains(upstreamIDs, id) {
				t.Errorf("request %d: the worker never got X-Request-Id %q (got %q)", i, id, upstreamIDs)
			}
			for attr, v := range map[string]string{"hint": w.hint, "hint_reason": w.reason, "hint_detail": w.detail, "router_only": w.routerOnly} {
				got, ok := l[attr]
				if v == "" && ok || v != "" && got != v {
					t.Errorf("request %d: %s = %v (present %v), want %q", i, attr, got, ok, v)
				}
			}
			if _, ok := l["filter_ms"].(float64); ok != w.filtered {
				t.Errorf("request %d: filter_ms %v", i, l["filter_ms"])
			}
		}
		for _, s := range secrets {
			if strings.Contains(p.logs.String(), s) {
				t.Errorf("the log contains %q", s)
			}
		}
	}
}

func (h *headerRecorder) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// blockingLog is a slog handler that holds every access line ("request")
// until release is closed, as a slow log destination would.
type blockingLog struct {
	slog.Handler
	held    chan struct{}
	release chan struct{}
}

func (h blockingLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request" {
		h.held <- struct{}{}
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// The access line is written after the client has the whole answer: a log
// destination that stalls delays no answer of known length, from the
// worker or the sidecar's own.
func TestAnswerBeforeAccessLine(t *testing.T) {
	h := blockingLog{slog.NewJSONHandler(io.Discard, nil), make(chan struct{}), make(chan struct{})}
	l, _, _ := startWithLog(t, h, "-max-body-bytes", "64")
	t.Cleanup(func() { close(h.release) }) // before the sidecar's own cleanup, which waits for requests
	for _, c := range []struct {
		name, body string
		status     int
	}{{"forwarded", `{"model":"m","kv_hints":{"x":1}}`, 200}, {"refused", strings.Repeat("x", 65), 413}} {
		got := make(chan error, 1)
		go func() {
			resp, err := http.Post("http://"+l.API+"/v1/chat/completions", "application/json", strings.NewReader(c.body))
			if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != c.status || len(b) == 0) {
					err = fmt.Errorf("status %d, %d bytes; want %d and a body", resp.StatusCode, len(b), c.status)
				}
			}
			got <- err
		}()
		select {
		case <-h.held:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no access line", c.name)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the answer waits for the access line", c.name)
		}
		h.release <- struct{}{}
	}
}
