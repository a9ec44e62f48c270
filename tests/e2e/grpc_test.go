package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/wiretest"
)

// grpcUpstream records what reaches it, reading each request body as it
// streams: the first message as soon as it has arrived (then it signals
// first), the rest when the client ends the stream.
type grpcUpstream struct {
	addr  string
	first chan string // the path of a request whose first message arrived
	mu    sync.Mutex
	got   map[string][]byte // by path
}

func startGRPCUpstream(t *testing.T) *grpcUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &grpcUpstream{addr: ln.Addr().String(), first: make(chan string, 16), got: map[string][]byte{}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		prefix := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, prefix); err == nil {
			msg := make([]byte, binary.BigEndian.Uint32(prefix[1:]))
			if _, err := io.ReadFull(r.Body, msg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			u.first <- r.URL.Path
			body = append(prefix, msg...)
		}
		rest, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.got[r.URL.Path] = append(body, rest...)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/grpc")
		_, _ = w.Write(wiretest.GRPCFrame(0, []byte("\x0a\x02ok")))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

func (u *grpcUpstream) received(path string) ([]byte, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.got[path]
	return b, ok
}

// h2cClient speaks HTTP/2 without TLS from the first byte (prior
// knowledge), as gRPC clients do on cleartext.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 30 * time.Second}
}

// gRPC through Envoy, over HTTP/2 cleartext as gRPC clients send it, on
// the committed bootstrap (codec AUTO): a unary call passes uninspected
// and counted; a client-streaming call streams (its first message reaches
// the worker while the client still holds the stream open, so the filter
// does not wait for the whole body); UTF-32-BE JSON labelled gRPC is read
// as JSON and refused the gRPC way (grpc-status 3); with "grpc": "refuse"
// a call gets grpc-status 7. The counters come out labelled in Envoy's
// /stats/prometheus.
func TestEnvoyGRPC(t *testing.T) { testGRPC(t, startEnvoy) }

// testGRPC is TestEnvoyGRPC on the Envoy startHost runs (the wasm
// filter's, or the native module's: TestNativeGRPC).
func testGRPC(t *testing.T, startHost func(testing.TB, string, []envoyconfig.Listener) *envoytest.Process) {
	up := startGRPCUpstream(t)
	pass, refuse := envoytest.FreePort(t), envoytest.FreePort(t)
	e := startHost(t, up.addr, []envoyconfig.Listener{
		{Name: "grpc_pass", Port: pass, PluginConfig: `{}`},
		{Name: "grpc_refuse", Port: refuse, PluginConfig: `{"grpc":"refuse"}`},
	})
	page, err := e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	start := parseSeries(page)
	client := h2cClient()
	call := func(port int, path string, body io.Reader) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), "POST", fmt.Sprintf("http://127.0.0.1:%d%s", port, path), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s: answered over %s, want HTTP/2", path, resp.Proto)
		}
		return resp
	}
	drain := func(resp *http.Response) []byte {
		t.Helper()
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Unary.
	unary := wiretest.GRPCFrame(0, []byte("\x0a\x05llama\x10\x10"))
	resp := call(pass, "/llm.Generate/Unary", bytes.NewReader(unary))
	if reply := drain(resp); resp.StatusCode != 200 || !bytes.Equal(reply, wiretest.GRPCFrame(0, []byte("\x0a\x02ok"))) {
		t.Errorf("unary: %d %q", resp.StatusCode, reply)
	}
	if got, ok := up.received("/llm.Generate/Unary"); !ok || !bytes.Equal(got, unary) {
		t.Errorf("unary: the worker received %q, want %q", got, unary)
	}
	<-up.first

	// Client streaming: the second message is written only once the first
	// has reached the worker.
	pr, pw := io.Pipe()
	done := make(chan *http.Response, 1)
	go func() { done <- call(pass, "/llm.Generate/Stream", pr) }()
	m1, m2 := wiretest.GRPCFrame(0, []byte("\x08\x01")), wiretest.GRPCFrame(0, []byte("\x08\x02"))
	if _, err := pw.Write(m1); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-up.first:
		if p != "/llm.Generate/Stream" {
			t.Fatalf("first message of %s", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first message of an open stream did not reach the worker: gRPC streams are held back")
	}
	if _, err := pw.Write(m2); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	resp = <-done
	if reply := drain(resp); resp.StatusCode != 200 || len(reply) == 0 {
		t.Errorf("stream: %d %q", resp.StatusCode, reply)
	}
	if got, _ := up.received("/llm.Generate/Stream"); !bytes.Equal(got, append(m1, m2...)) {
		t.Errorf("stream: the worker received %q", got)
	}

	// UTF-32-BE JSON labelled gRPC: json.loads reads it, so it is inspected.
	u32 := wiretest.UTF32BE(`{"model":"m","kv_hints":{"protocol_version":"0.1"}}`)
	resp = call(pass, "/llm.Generate/Utf32", bytes.NewReader(u32))
	drain(resp)
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "3" || !strings.Contains(resp.Header.Get("Grpc-Message"), "UTF-32") {
		t.Errorf("UTF-32-BE JSON labelled gRPC: %d grpc-status %q grpc-message %q", resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"))
	}
	if _, ok := up.received("/llm.Generate/Utf32"); ok {
		t.Error("UTF-32-BE JSON labelled gRPC reached the worker")
	}

	// "grpc": "refuse".
	resp = call(refuse, "/llm.Generate/Refused", bytes.NewReader(unary))
	drain(resp)
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "7" || resp.Header.Get("Grpc-Message") != filterspec.GRPCRefusedMessage {
		t.Errorf("refused: %d grpc-status %q grpc-message %q", resp.StatusCode, resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message"))
	}
	if _, ok := up.received("/llm.Generate/Refused"); ok {
		t.Error("a refused call reached the worker")
	}

	page, err = e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(page).delta(start)
	for k, want := range map[string]float64{
		`kvgate_requests_uninspected_total{protocol="grpc"}`: 2,
		`kvgate_requests_refused_total{reason="grpc"}`:       1,
		`kvgate_bodies_rejected_total{status="400"}`:         1,
	} {
		if d[k] != want {
			t.Errorf("%s rose by %g, want %g\n%s", k, d[k], want, grep(page, "kvgate_requests"))
		}
	}
}
