package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kvgate/kvgate/internal/httperr"
)

// workerOptions are the settings of the sidecar's connections to the
// worker (docs/spec.md, "The worker connection").
type workerOptions struct {
	// IdleTimeout closes a pooled connection that has been idle this
	// long. It must be shorter than the worker's own keep-alive timeout
	// (uvicorn's default is 5 s), so that the sidecar, not the worker,
	// closes an idle connection: otherwise a request written just as the
	// worker closes fails although the worker never saw it.
	IdleTimeout time.Duration
	// ConnectTimeout bounds opening a connection to the worker.
	ConnectTimeout time.Duration
}

// Defaults of the worker connection, the same in Envoy's bootstraps.
const (
	defaultWorkerIdleTimeout    = 4 * time.Second
	defaultWorkerConnectTimeout = 3 * time.Second
)

// upstreamTransport is the transport to the worker. The benchmarks' plain
// reverse proxy uses it too, so that a comparison measures the filter and
// the sidecar's request path, not different connection settings.
//
// A request that provably never reached the worker is retried once on a
// new connection: net/http's transport does so for a request on a reused
// connection of which nothing was written (the worker had closed it), when
// the request can be replayed, which exchange.forward's GetBody allows.
// Nothing else is retried: a generation is not idempotent.
func upstreamTransport(o workerOptions) *http.Transport {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = defaultWorkerIdleTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = defaultWorkerConnectTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.IdleConnTimeout = o.IdleTimeout
	tr.MaxIdleConns = maxIdleUpstream
	tr.MaxIdleConnsPerHost = maxIdleUpstream
	tr.DisableCompression = true
	// The sidecar never forwards Expect (hopByHopForwarded): nothing to
	// wait for.
	tr.ExpectContinueTimeout = 0
	// Headers and a small body leave in one write.
	tr.WriteBufferSize = 64 << 10
	return tr
}

// classifyUpstream says what a transport error means: the outcome, and
// the status and message of the answer (none for a client that is gone).
func classifyUpstream(ctx context.Context, err error) (outcome, int, string) {
	if ctx.Err() != nil {
		return outcomeClientGone, 0, ""
	}
	var op *net.OpError
	switch {
	case errors.Is(err, errUnrequestedSwitch):
		return outcomeUpstreamInvalid, http.StatusBadGateway, httperr.MsgWorkerInvalid
	case errors.As(err, &op) && op.Op == "dial":
		if op.Timeout() {
			return outcomeUpstreamTimeout, http.StatusBadGateway, httperr.MsgWorkerTimeout
		}
		return outcomeUpstreamUnavailable, http.StatusBadGateway, httperr.MsgWorkerUnavailable
	case strings.Contains(err.Error(), "malformed HTTP"), strings.Contains(err.Error(), "response headers exceeded"):
		// net/http's transport reports a response it cannot parse only in
		// its error text.
		return outcomeUpstreamInvalid, http.StatusBadGateway, httperr.MsgWorkerInvalid
	}
	return outcomeUpstreamReset, http.StatusBadGateway, httperr.MsgWorkerReset
}

// answerBody is the worker's answer body on its way to the client. When
// reading it fails before its end, it records why: the client left (its
// context is cancelled) or the worker cut the answer. ReverseProxy then
// ends the handler with http.ErrAbortHandler and net/http closes the
// client's connection; exchange.finish first flushes what arrived, so that
// a cut answer ends as in Envoy: the status, the headers and the bytes the
// worker sent, then the connection closes (short of a Content-Length, or a
// chunked body without its last chunk).
type answerBody struct {
	io.ReadCloser
	x   *exchange
	ctx context.Context
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.x.outcome == "" {
		if b.ctx.Err() != nil {
			b.x.outcome = outcomeClientGone
		} else {
			b.x.outcome = outcomeUpstreamReset
		}
	}
	return n, err
}
