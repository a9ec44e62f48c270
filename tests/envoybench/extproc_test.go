package envoybench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"
)

// childEnv, set in the environment of a re-executed test binary, makes it
// an ext_proc server on the listener passed as file descriptor 3 (see
// TestMain). The server runs in a process of its own so that its CPU time
// can be read from /proc like Envoy's.
const childEnv = "KVGATE_ENVOYBENCH_EXTPROC"

// processor is kvgate's rule as an Envoy external processor: what a user
// who runs Envoy AI Gateway, or writes an ext_proc server, would deploy
// instead of the wasm filter. It makes the decisions the filter makes with
// the default plugin configuration (415 for an encoded body, 413 over the
// body limit, then kvhints on the whole body) and forwards what kvhints
// returns. Envoy sends it the request headers and then, in BUFFERED mode,
// the whole body.
type processor struct {
	extprocv3.UnimplementedExternalProcessorServer
	policy kvhints.Policy
	pool   sync.Pool // *kvhints.Rewriter, reused as the guest reuses its one
}

func newProcessor(cfg filterspec.Config) *processor {
	p := &processor{policy: cfg.Policy()}
	p.pool.New = func() any { return &kvhints.Rewriter{NoSnapshot: true} }
	return p
}

// Process serves one HTTP request's stream.
func (p *processor) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var resp *extprocv3.ProcessingResponse
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = p.headers(r.RequestHeaders)
		case *extprocv3.ProcessingRequest_RequestBody:
			rw := p.pool.Get().(*kvhints.Rewriter)
			resp = p.body(rw, r.RequestBody.Body)
			err = s.Send(resp) // marshals resp, which may point into rw's buffer
			p.pool.Put(rw)
			if err != nil {
				return err
			}
			continue
		case *extprocv3.ProcessingRequest_RequestTrailers:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
		default:
			return fmt.Errorf("ext_proc: unexpected %T (the processing mode sends request headers and body only)", r)
		}
		if err := s.Send(resp); err != nil {
			return err
		}
	}
}

// headers answers 415 for an encoded body and 413 for a declared length
// over the limit, as the filter's OnRequestHeaders does.
func (p *processor) headers(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	for _, hv := range h.GetHeaders().GetHeaders() {
		v := hv.Value
		if len(hv.RawValue) > 0 {
			v = string(hv.RawValue)
		}
		switch strings.ToLower(hv.Key) {
		case "content-encoding":
			if st, msg := kvhints.CheckContentEncoding(v); st != 0 {
				return immediate(st, msg)
			}
		case "content-length":
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				if st, msg := kvhints.BodyTooLarge(n, p.policy.MaxBodyBytes); st != 0 {
					return immediate(st, msg)
				}
			}
		}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
}

// body rewrites the whole body; a changed body replaces the original and
// its Content-Length.
func (p *processor) body(rw *kvhints.Rewriter, body []byte) *extprocv3.ProcessingResponse {
	out, res := rw.Rewrite(body, p.policy)
	if res.Outcome == kvhints.OutcomeRejected {
		return immediate(res.Status, res.Message)
	}
	common := &extprocv3.CommonResponse{}
	if string(out) != string(body) {
		common.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: out}}
		common.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "content-length", RawValue: []byte(strconv.Itoa(len(out)))},
		}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}}}
}

func immediate(status int, msg string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status: &typev3.HttpStatus{Code: typev3.StatusCode(status)},
		Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "content-type", RawValue: []byte("application/json")},
		}}},
		Body:    httperr.Invalid(status, msg),
		Details: "kvgate_body_rejected",
	}}}
}

// serveChild is the ext_proc server process: it serves on the listener
// its parent passed as file descriptor 3 until it is killed.
func serveChild() {
	ln, err := net.FileListener(os.NewFile(3, "extproc-listener"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ext_proc server:", err)
		os.Exit(2)
	}
	srv := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(srv, newProcessor(filterspec.DefaultConfig()))
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "ext_proc server:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// extProc is a running ext_proc server process.
type extProc struct {
	Addr string // host:port
	Pid  int
}

// startExtProc re-executes the test binary as an ext_proc server on a
// loopback port and stops it when the test ends.
func startExtProc(tb testing.TB) *extProc {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return &extProc{Addr: ln.Addr().String(), Pid: cmd.Process.Pid}
}
