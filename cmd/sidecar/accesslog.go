package main

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/host"
)

// accessInfo is what a request's access log line says beyond its status,
// size and outcome: the request id, what the filter reported about the
// hint (docs/spec.md, Logs) and the time spent in the filter. None of it
// is a header value or part of the body, except a request id the client
// sent, which requestID has checked.
type accessInfo struct {
	requestID string
	// hint, hintReason, hintDetail, senderTrusted, senderRule and
	// routerOnly are the filter's report, the properties it set
	// (filterspec.PropertyHint...); nil when it set none.
	hint, hintReason, hintDetail []byte
	senderTrusted, senderRule    []byte
	routerOnly                   []byte
	filterTime                   time.Duration
	filtered                     bool // the filter ran (filterTime is set)
}

// requestIDHeader carries the request id, as Envoy names it.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a request id taken from a client.
const maxRequestIDLen = 128

// requestID returns the request's id and makes sure the request carries
// it, so that the filter, the worker and the access log see the same one:
// the client's X-Request-Id when there is exactly one and it is 1 to 128
// bytes of printable ASCII without spaces; otherwise a new random one
// (UUID version 4, as Envoy makes them), which replaces what was there.
func requestID(h http.Header) string {
	if vs := h[requestIDHeader]; len(vs) == 1 && validRequestID(vs[0]) {
		return vs[0]
	}
	id := newRequestID()
	h[requestIDHeader] = []string{id}
	return id
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID is a random UUID, version 4.
func newRequestID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// noteFilter records the filter's report and how long it took.
func (a *accessInfo) noteFilter(d *host.Decision, took time.Duration) {
	a.filtered, a.filterTime = true, took
	if d == nil {
		return
	}
	a.hint = d.Properties[filterspec.PropertyHint]
	a.hintReason = d.Properties[filterspec.PropertyHintReason]
	a.hintDetail = d.Properties[filterspec.PropertyHintDetail]
	a.senderTrusted = d.Properties[filterspec.PropertySenderTrusted]
	a.senderRule = d.Properties[filterspec.PropertySenderRule]
	a.routerOnly = d.Properties[filterspec.PropertyRouterOnly]
}

// addAttrs adds the access log attributes: request_id; hint, "-" when the
// filter reported none (as Envoy prints a missing filter state);
// hint_reason when one was counted; sender_trusted (true or false) with
// the hint, and sender_rule, the index of the trusted_senders rule that
// matched, when one did; router_only, the names of the router-only fields
// an untrusted request carried, when it carried any; filter_ms when the
// filter ran; and,
// at debug level only, hint_detail, where and why a discarded envelope is
// at fault.
func (a *accessInfo) addAttrs(rec *slog.Record, debug bool) {
	hint := "-"
	if a.hint != nil {
		hint = string(a.hint)
	}
	rec.AddAttrs(slog.String("request_id", a.requestID), slog.String("hint", hint))
	if a.hintReason != nil {
		rec.AddAttrs(slog.String("hint_reason", string(a.hintReason)))
	}
	if a.senderTrusted != nil {
		rec.AddAttrs(slog.String("sender_trusted", string(a.senderTrusted)))
	}
	if a.senderRule != nil {
		rec.AddAttrs(slog.String("sender_rule", string(a.senderRule)))
	}
	if a.routerOnly != nil {
		rec.AddAttrs(slog.String("router_only", string(a.routerOnly)))
	}
	if a.filtered {
		rec.AddAttrs(slog.Float64("filter_ms", float64(a.filterTime.Microseconds())/1000))
	}
	if debug && a.hintDetail != nil {
		rec.AddAttrs(slog.String("hint_detail", string(a.hintDetail)))
	}
}
