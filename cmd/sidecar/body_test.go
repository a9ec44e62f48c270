package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/prometheus/client_golang/prometheus"
)

func TestReadBody(t *testing.T) {
	for _, c := range []struct {
		name    string
		cl      int64
		max     int64
		wantLen int
	}{
		{"exact", 5000, 10000, 5000},
		{"at limit", 5000, 5000, 5000},
		{"over limit, known", 5000, 1000, 1001},
		{"chunked", -1, 10000, 5000},
		{"chunked over limit", -1, 1000, 1001},
		{"chunked, limit past 32 KiB growth", -1, 1 << 20, 5000},
		{"known, past the first buffer", 100 << 10, 1 << 20, 100 << 10},
		{"known, over limit, past the first buffer", 100 << 10, 80 << 10, 80<<10 + 1},
		{"chunked, over limit, past the first buffer", -1, 80 << 10, 80<<10 + 1},
	} {
		body := strings.Repeat("x", 5000)
		if c.wantLen > len(body) {
			body = strings.Repeat("0123456789", c.wantLen/10+1)
		}
		// Parts of 1,000 bytes or less, as they come from a socket.
		r, _ := http.NewRequest("POST", "http://x/", iotest.HalfReader(strings.NewReader(body)))
		r.ContentLength = c.cl
		b, err := readBody(r, c.max, idleTimer{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := b.bytes(); len(got) != c.wantLen || string(got) != body[:c.wantLen] {
			t.Fatalf("%s: read %d bytes, want %d", c.name, len(got), c.wantLen)
		}
		b.release()
		b.release() // a second release is a no-op
	}
	big := strings.Repeat("y", 100<<10)
	r, _ := http.NewRequest("POST", "http://x/", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	b, err := readBody(r, 1<<20, idleTimer{})
	if err != nil || string(b.bytes()) != big {
		t.Fatalf("chunked 100 KiB: %d bytes, %v", len(b.bytes()), err)
	}
	// A body shorter than its Content-Length is an error.
	r, _ = http.NewRequest("POST", "http://x/", io.MultiReader(strings.NewReader("abc")))
	r.ContentLength = 10
	if _, err := readBody(r, 100, idleTimer{}); err == nil {
		t.Fatal("short body accepted")
	}
	r, _ = http.NewRequest("POST", "http://x/", http.NoBody)
	if b, err := readBody(r, 100, idleTimer{}); err != nil || b.bytes() != nil {
		t.Fatalf("no body: %v %v", b.bytes(), err)
	}
}

// offers records how much room each Read is given.
type offers struct {
	r     io.Reader
	sizes []int
}

func (o *offers) Read(p []byte) (int, error) {
	o.sizes = append(o.sizes, len(p))
	return o.r.Read(p)
}

// Memory follows the bytes received, not the bytes announced: no read of a
// body announced at 4 MiB is offered more room than firstChunk or what has
// arrived so far, so a client that stops sending holds little.
func TestReadBodyGrowsWithData(t *testing.T) {
	const n = 4 << 20
	o := &offers{r: iotest.HalfReader(strings.NewReader(strings.Repeat("x", n)))}
	r, _ := http.NewRequest("POST", "http://x/", o)
	r.ContentLength = n
	b, err := readBody(r, n, idleTimer{})
	if err != nil || len(b.bytes()) != n {
		t.Fatalf("%d bytes, %v", len(b.bytes()), err)
	}
	got := 0
	for i, size := range o.sizes {
		if size > max(firstChunk, got) {
			t.Fatalf("read %d offered %d bytes with %d received", i, size, got)
		}
		got += (size + 1) / 2 // HalfReader fills half
	}
}

// Once the exchange is done with the forwarded body, its pooled buffer may
// be reused: a late read by the transport, of the first reading or of a
// replay (GetBody), must fail, never return recycled bytes; closing a
// reading releases nothing.
func TestForwardBodyReadAfterRelease(t *testing.T) {
	r, _ := http.NewRequest("POST", "http://x/", strings.NewReader(strings.Repeat("hello world", 4000)))
	b, err := readBody(r, 1<<20, idleTimer{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.pooled() {
		t.Fatal("want a pooled body")
	}
	x := &exchange{r: r, body: b}
	out := x.upstreamRequest(b.bytes(), b)
	p := make([]byte, 5)
	if n, err := out.Body.Read(p); n != 5 || err != nil || string(p) != "hello" {
		t.Fatalf("read %q %v", p[:n], err)
	}
	_ = out.Body.Close()
	replay, err := out.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := replay.Read(p); n != 5 || err != nil || string(p) != "hello" {
		t.Fatalf("replay after the first reading was closed: %q %v", p[:n], err)
	}
	x.release()
	x.release()
	for i, body := range []io.Reader{out.Body, replay} {
		if n, err := body.Read(p); n != 0 || !errors.Is(err, errBodyClosed) {
			t.Fatalf("reading %d after release: %d %v", i, n, err)
		}
	}
}

func TestSizeClass(t *testing.T) {
	for n, want := range map[int]int{1: 0, 4096: 0, 4097: 1, 8192: 1, 4 << 20: 10, 4<<20 + 1: 11, 64 << 20: 14} {
		if got := sizeClass(n); got != want {
			t.Errorf("sizeClass(%d) = %d, want %d", n, got, want)
		}
	}
	if p, c := getBuf(65<<20 + 1); c != -1 || len(*p) != 65<<20+1 {
		t.Fatalf("beyond the largest class: class %d, len %d", c, len(*p))
	}
}

// The access log names the request and its outcome, never the body, the
// query or header values.
func TestAccessLogWithoutBody(t *testing.T) {
	var buf bytes.Buffer
	s := &server{cfg: &config{}, log: slog.New(slog.NewJSONHandler(&buf, nil)), outcomes: map[outcome]prometheus.Counter{}}
	s.outcomes[outcomeBadRequest] = prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	s.policy.Store(&policy{filter: filterspec.Config{MaxBodyBytes: 100}})
	r := httptest.NewRequest("POST", "/v1/chat/completions?secret=1", iotest.ErrReader(errors.New("boom")))
	r.Header.Set("Authorization", "Bearer sk-secret")
	s.ServeHTTP(httptest.NewRecorder(), r)
	line := buf.String()
	for _, want := range []string{`"msg":"request"`, `"path":"/v1/chat/completions"`, `"status":400`, `"outcome":"bad_request"`, `"duration_ms":`} {
		if !strings.Contains(line, want) {
			t.Errorf("access log lacks %s: %s", want, line)
		}
	}
	for _, never := range []string{"secret", "sk-", "kv_hints"} {
		if strings.Contains(line, never) {
			t.Errorf("access log contains %q: %s", never, line)
		}
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A forwarded body reaches the transport as net/http's in-memory reader when
// it is in memory of its own (so headers and body leave in one write), and
// as a forwardBody when it is in a pooled buffer, which goes back to its
// pool once the proxy is done, while later reads fail.
func TestForwardRequest(t *testing.T) {
	small := strings.Repeat("s", 1000)
	large := strings.Repeat("L", smallBody+1)
	for _, c := range []struct {
		name, body string
		pooled     bool
	}{{"empty", "", false}, {"small", small, false}, {"large", large, true}} {
		in, _ := http.NewRequest("POST", "http://x/v1/chat/completions", strings.NewReader(c.body))
		in.ContentLength = int64(len(c.body))
		buf, err := readBody(in, 1<<20, idleTimer{})
		if err != nil || buf.pooled() != c.pooled {
			t.Fatalf("%s: read: %v, pooled %v", c.name, err, buf.pooled())
		}
		x := &exchange{r: in, body: buf}
		out := x.upstreamRequest(buf.bytes(), buf)
		if out.ContentLength != int64(len(c.body)) {
			t.Fatalf("%s: content length %d", c.name, out.ContentLength)
		}
		var seen io.Reader
		tr := bodyTransport{roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = r.Body
			b, _ := io.ReadAll(r.Body)
			if string(b) != c.body {
				t.Errorf("%s: the transport read %d bytes", c.name, len(b))
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})}
		if _, err := tr.RoundTrip(out); err != nil {
			t.Fatal(err)
		}
		switch c.name {
		case "empty":
			if seen != http.NoBody {
				t.Errorf("empty: body %T", seen)
			}
		case "small":
			if reflect.TypeOf(seen) != reflect.TypeOf(io.NopCloser(bytes.NewReader(nil))) {
				t.Errorf("small: the transport got a %T, not an in-memory reader", seen)
			}
		case "large":
			if _, ok := seen.(*forwardBody); !ok {
				t.Errorf("large: the transport got a %T", seen)
			}
		}
		x.release()
		if c.pooled {
			if !buf.done.Load() {
				t.Errorf("%s: pooled buffer not released", c.name)
			}
			if _, err := out.Body.Read(make([]byte, 1)); !errors.Is(err, errBodyClosed) {
				t.Errorf("%s: read after done: %v", c.name, err)
			}
		}
	}
}

// changedBody lends the filter pooled memory for a large body and leaves a
// small one to the host, and x.rewritten always says which the filter's
// last body is in. The body it wrote before stays out of the pool until
// the next write (the host copies from it while it fills the new one), and
// release gives back every buffer, once.
func TestChangedBodyOwnership(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	if b := changedBody(r.Context(), 2*smallBody); b != nil {
		t.Fatal("memory lent to a request without an exchange")
	}
	x := &exchange{r: r}
	ctx := x.context()
	first := changedBody(ctx, 2*smallBody)
	if len(first) != 2*smallBody || x.rewritten == nil || &x.rewritten.bytes()[0] != &first[0] {
		t.Fatalf("large body: %d bytes, rewritten %v", len(first), x.rewritten)
	}
	one := x.rewritten
	second := changedBody(ctx, 3*smallBody)
	if len(second) != 3*smallBody || x.rewritten == nil || x.replaced != one || one.done.Load() {
		t.Fatalf("second write: rewritten %v, replaced %v (first released: %v)", x.rewritten, x.replaced, one.done.Load())
	}
	two := x.rewritten
	if b := changedBody(ctx, smallBody); b != nil || x.rewritten != nil || x.replaced != two || !one.done.Load() || two.done.Load() {
		t.Fatalf("small write: %d bytes lent, rewritten %v, first released %v, second released %v",
			len(b), x.rewritten, one.done.Load(), two.done.Load())
	}
	x.release()
	x.release()
	if !two.done.Load() {
		t.Fatal("the second body's buffer was not released")
	}
}
