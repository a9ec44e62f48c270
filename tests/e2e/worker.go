// Package e2e holds kvgate's end-to-end tests: the conformance vectors and
// the official OpenAI Python client through a real Envoy running
// wasm/kvgate.wasm and through the sidecar, each in front of the recording
// worker of this package, plus the side-by-side benchmark.
//
// Tests find Envoy at $KVGATE_ENVOY and Python (with the openai package) at
// $KVGATE_PYTHON; the Makefile sets both. Without them the tests skip,
// except under CI=true, where they fail.
package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CaseHeader names the request a worker record belongs to. Clients set it;
// the filter leaves it alone, so it reaches the worker.
const CaseHeader = "X-Kvgate-Case"

// Record is one request as the worker received it.
type Record struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Chunked is true when the request came with chunked framing.
	Chunked bool
}

// Worker is a recording stand-in for an OpenAI-compatible LLM worker. It
// keeps every request it receives (by CaseHeader) and answers in the shapes
// of the OpenAI API: chat completions, completions and Responses, as JSON
// or, for "stream": true, as server-sent events, so that a real client can
// parse the answer. Requests with CaseHeader get a short JSON answer.
type Worker struct {
	// Addr is the worker's host:port on loopback.
	Addr string

	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	recs map[string][]Record
	n    int
}

// StartWorker starts a worker on a free loopback port.
func StartWorker() (*Worker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &Worker{Addr: ln.Addr().String(), ln: ln, recs: map[string][]Record{}}
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

// Close stops the worker.
func (w *Worker) Close() { _ = w.srv.Close() }

// Records returns what arrived under a CaseHeader value.
func (w *Worker) Records(key string) []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Record(nil), w.recs[key]...)
}

// Count returns how many requests arrived.
func (w *Worker) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// ServeHTTP records the request and answers it.
func (w *Worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get(CaseHeader)
	if key != "" {
		rec := Record{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body,
			Chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"}
		w.mu.Lock()
		w.recs[key] = append(w.recs[key], rec)
		w.n++
		w.mu.Unlock()
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req) // vector bodies need not be Go-readable JSON
	if req.Model == "" {
		req.Model = "kvgate-test"
	}
	path := r.URL.Path
	switch {
	case strings.HasSuffix(path, "/chat/completions") && strings.HasPrefix(path, "/v1/"):
		if req.Stream {
			sse(rw, "",
				chunk("chat.completion.chunk", req.Model, `{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}`),
				chunk("chat.completion.chunk", req.Model, `{"index":0,"delta":{},"finish_reason":"stop"}`),
				"[DONE]")
			return
		}
		writeJSON(rw, chunk("chat.completion", req.Model, `{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}`))
	case path == "/v1/completions":
		c := chunk("text_completion", req.Model, `{"index":0,"text":"ok","finish_reason":"stop","logprobs":null}`)
		if req.Stream {
			sse(rw, "", c, "[DONE]")
			return
		}
		writeJSON(rw, c)
	case path == "/v1/responses":
		if req.Stream {
			sse(rw, "event",
				`{"type":"response.created","sequence_number":0,"response":`+responseObject(req.Model, "in_progress", "")+`}`,
				`{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_kvgate","output_index":0,"content_index":0,"delta":"ok","logprobs":[]}`,
				`{"type":"response.completed","sequence_number":2,"response":`+responseObject(req.Model, "completed", "ok")+`}`)
			return
		}
		writeJSON(rw, responseObject(req.Model, "completed", "ok"))
	default:
		writeJSON(rw, `{"ok":true}`)
	}
}

func chunk(object, model, choice string) string {
	usage := ""
	if !strings.HasSuffix(object, ".chunk") {
		usage = `,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
	}
	return fmt.Sprintf(`{"id":"kvgate-1","object":%q,"created":0,"model":%q,"choices":[%s]%s}`, object, model, choice, usage)
}

func responseObject(model, status, text string) string {
	output := "[]"
	if text != "" {
		output = fmt.Sprintf(`[{"type":"message","id":"msg_kvgate","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}]`, text)
	}
	return fmt.Sprintf(`{"id":"resp_kvgate","object":"response","created_at":0,"model":%q,"status":%q,"output":%s,"parallel_tool_calls":false,"tool_choice":"auto","tools":[]}`, model, status, output)
}

func writeJSON(rw http.ResponseWriter, body string) {
	rw.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(rw, body)
}

// sse writes server-sent events; with names set to "event", each event is
// named after its "type" member, as the Responses API does.
func sse(rw http.ResponseWriter, names string, events ...string) {
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.Header().Set("Cache-Control", "no-cache")
	f, _ := rw.(http.Flusher)
	for _, e := range events {
		if names == "event" {
			var t struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal([]byte(e), &t)
			fmt.Fprintf(rw, "event: %s\n", t.Type)
		}
		fmt.Fprintf(rw, "data: %s\n\n", e)
		if f != nil {
			f.Flush()
		}
	}
}
