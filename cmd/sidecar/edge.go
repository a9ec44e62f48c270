package main

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Requests the sidecar refuses from their request line and headers alone,
// before reading a body: those that would let bytes reach the worker
// without passing the filter.

// screen answers a request that cannot be filtered and returns its outcome,
// or returns "" for a request to filter and forward.
//
//   - "PRI * HTTP/2.0" opens HTTP/2 with prior knowledge (h2c): the sidecar
//     serves HTTP/1.1 only, and answers in HTTP/2 (refuseHTTP2), so that
//     the client can read the refusal.
//
//   - CONNECT asks for a tunnel: every byte after it would go to the
//     worker unread (PRI over HTTP/1 is the method reserved for the HTTP/2
//     preface, never a request). 405 Method Not Allowed: the method is
//     well formed and known, the sidecar (an API endpoint, not a forward
//     proxy) supports it on no resource; 405 must carry Allow, which names
//     the methods an OpenAI-style API uses.
//
//   - A protocol upgrade (an Upgrade header or a Connection header naming
//     "upgrade": WebSocket, h2c) would, once the worker answered 101, turn
//     the connection into a tunnel past the filter. 400: the request asks
//     for something this server never does. Not 426 Upgrade Required, which
//     means the opposite (switch to the protocol named in its Upgrade
//     header). A server may also ignore Upgrade and answer in HTTP/1.1, but
//     a client that sent one expects a switch; a clear refusal is better
//     than a reply it does not expect.
//
//   - A '#' in the request target: a conforming client never sends a
//     fragment, and net/http reads it as part of the path (forwarded as
//     %23) while the filter's exclude_paths would stop at it. 400.
//
// The connection is closed after the answer: a client that asked for a
// tunnel may already be sending bytes meant for it, and an unread body is
// not waited for.
func (s *server) screen(w *statusWriter, r *http.Request) outcome {
	switch {
	case r.Method == "PRI" && r.ProtoMajor == 2:
		w.status = http.StatusHTTPVersionNotSupported // for the access log
		refuseHTTP2(w)
		return outcomeUnsupportedProtocol
	case r.Method == http.MethodConnect || r.Method == "PRI":
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		closeAfterReply(w)
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not supported: the sidecar forwards API requests, not tunnels")
		return outcomeUnsupportedProtocol
	case strings.IndexByte(r.RequestURI, '#') >= 0:
		closeAfterReply(w)
		writeError(w, http.StatusBadRequest, "the request target contains '#': a fragment is never sent in a request")
		return outcomeBadRequest
	case wantsUpgrade(r.Header):
		closeAfterReply(w)
		writeError(w, http.StatusBadRequest, "protocol upgrades (WebSocket, h2c) are not supported: every request body must pass the filter")
		return outcomeUnsupportedProtocol
	}
	return ""
}

// wantsUpgrade reports whether h asks to switch protocols: an Upgrade
// field, or a Connection field that names "upgrade".
func wantsUpgrade(h http.Header) bool {
	if len(h["Upgrade"]) > 0 {
		return true
	}
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// closeAfterReply makes the answer about to be written the connection's
// last, without waiting for the rest of a request body: "Connection: close"
// stops net/http from draining the unread body before it writes the
// response, and a read deadline in the past makes the drain it still
// attempts when the handler returns (to find the body's end) fail at once
// instead of waiting, without limit, for bytes the client may never send.
func closeAfterReply(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// hopByHopForwarded are request fields net/http's ReverseProxy does not
// remove by itself and that must never reach the worker: the sidecar never
// asks the worker to switch protocols. (Upgrade and Connection are removed
// by ReverseProxy, and put back for an upgrade request; screen refuses
// those, and rewrite removes them again after a filter that adds them.)
//
// Expect is answered by the sidecar itself: net/http sends the client its
// 100 Continue when the body is first read, and the body is whole before
// anything is forwarded, so there is nothing for the worker to invite
// (forwarded, it made Go's transport wait a second for a 100 from a worker
// that sends none, and the worker's 100 reached the client as a second
// one).
var hopByHopForwarded = []string{"Upgrade", "Connection", "Http2-Settings", "Expect"}

var errUnrequestedSwitch = errors.New("the worker answered 101 Switching Protocols to a request that asked for no upgrade")

// forbiddenTrailers are the fields a request's trailer must not carry
// (RFC 9110, section 6.5.1): those that frame the message
// (Content-Length, Transfer-Encoding, Trailer), route it (Host) or say how
// to read its body (Content-Type, Content-Encoding, which the filter
// decides on from the header section). Such a trailer is the client's
// error, answered 400; forwarded, the first three would fail the request
// to the worker (Go's transport refuses to write them) and the others
// could make a worker that merges trailers into headers read the request
// differently from the filter.
var forbiddenTrailers = []string{"Content-Length", "Transfer-Encoding", "Trailer", "Host", "Content-Type", "Content-Encoding"}

// forbiddenTrailer returns the first field of trailer that
// forbiddenTrailers names, or "".
func forbiddenTrailer(trailer http.Header) string {
	for _, k := range forbiddenTrailers {
		if _, ok := trailer[k]; ok {
			return k
		}
	}
	return ""
}

// forwardTarget is the request target the worker gets for u, less the
// upstream's base path: the escaped path as net/http's transport writes it
// (URL.RequestURI) and the query as received. The filter sees this, not
// the target as received, so that exclude_paths is decided on exactly the
// bytes forwarded. They differ where the client sent bytes that must be
// escaped ("/v1/{x}" goes as "/v1/%7Bx%7D") and for an absolute-form target
// ("http://host/v1/x" goes as "/v1/x"); dot segments, "//" and escapes
// such as %2F are forwarded as they came, and exclude_paths never matches
// them (filterspec.Config.Excluded: only canonical paths are excluded).
func forwardTarget(u *url.URL) string {
	return u.RequestURI()
}

// refuseHTTP2 answers the HTTP/2 client preface with the server's preface
// (an empty SETTINGS frame) and a GOAWAY frame with error code
// HTTP_1_1_REQUIRED (RFC 9113, sections 3.4 and 7): the HTTP/2 way of
// saying "use HTTP/1.1", which clients report as such (and some act on).
// Nothing of the connection is forwarded; it is closed after the frames.
//
// Serving h2c instead (net/http can) would put every stream through the
// filter too, but would also bring a second protocol's flow control, limits
// and failure modes to the edge for clients (OpenAI SDKs, routers) that all
// speak HTTP/1.1 to a worker.
func refuseHTTP2(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return // the server closes the connection
	}
	const debug = "kvgate sidecar: HTTP/2 is not served, use HTTP/1.1"
	frames := []byte{
		0, 0, 0, 0x4, 0, 0, 0, 0, 0, // SETTINGS, empty, stream 0
		0, 0, byte(8 + len(debug)), 0x7, 0, 0, 0, 0, 0, // GOAWAY, stream 0
		0, 0, 0, 0, // last stream: none processed
		0, 0, 0, 0xd, // HTTP_1_1_REQUIRED
	}
	frames = append(frames, debug...)
	// After the GOAWAY, the client closes the connection. Until it does
	// (for a second at most), what it sends is read and dropped: closing
	// first, with its frames unread, would reset the connection and could
	// lose the GOAWAY on the client's side.
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(frames); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
	_ = c.Close()
}
