package envoybench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// checkHeader marks a request whose arrival the worker keeps, under the
// header's value, so that a test can compare what was forwarded with what
// was sent. Unmarked requests are only read and answered.
const checkHeader = "X-Kvgate-Check"

// arrival is a marked request as the worker received it.
type arrival struct {
	Body []byte
	// ContentLength is the request's Content-Length, or -1 when chunked.
	ContentLength int64
}

// worker is the fast stand-in for an LLM worker that every row forwards
// to: it reads the whole body and answers a fixed chat completion, doing
// the same small work whatever the body holds, so that the rows differ
// only in what happens in front of it.
type worker struct {
	Addr string
	srv  *http.Server
	mu   sync.Mutex
	seen map[string]arrival
}

// streamHeader asks the worker for a streamed answer instead: streamEvents
// server-sent events of one token each, every one written and flushed on
// its own about streamGap after the last, as an LLM worker streams tokens,
// so that Envoy passes each through its filters as a chunk of its own.
const (
	streamHeader = "X-Kvgate-Stream"
	streamEvents = 50
	streamGap    = time.Millisecond
)

// streamEvent is one event of the streamed answer; the answer ends with
// streamDone.
var (
	streamEvent = []byte(`data: {"id":"kvgate-bench","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}` + "\n\n")
	streamDone  = []byte("data: [DONE]\n\n")
	streamed    = append(bytes.Repeat(streamEvent, streamEvents), streamDone...)
)

var answer = []byte(`{"id":"kvgate-bench","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)

func startWorker(tb testing.TB) *worker {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	w := &worker{Addr: ln.Addr().String(), seen: map[string]arrival{}}
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	tb.Cleanup(func() { _ = w.srv.Close() })
	return w
}

func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(checkHeader)
	var body []byte
	var err error
	if key != "" {
		body, err = io.ReadAll(r.Body)
	} else {
		_, err = io.Copy(io.Discard, r.Body)
	}
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if key != "" {
		w.mu.Lock()
		w.seen[key] = arrival{Body: body, ContentLength: r.ContentLength}
		w.mu.Unlock()
	}
	h := rw.Header()
	if r.Header.Get(streamHeader) != "" {
		h.Set("Content-Type", "text/event-stream")
		fl := rw.(http.Flusher)
		for range streamEvents {
			if _, err := rw.Write(streamEvent); err != nil {
				return
			}
			fl.Flush()
			time.Sleep(streamGap)
		}
		_, _ = rw.Write(streamDone)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(answer)))
	_, _ = rw.Write(answer)
}

// arrived returns the marked request kept under key.
func (w *worker) arrived(key string) (arrival, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.seen[key]
	return a, ok
}
