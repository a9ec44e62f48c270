// Package httperr holds the shapes of kvgate's answers: the OpenAI-style
// JSON error body that every refusal and failure is answered with, the
// gRPC status and message that stand for one to a gRPC client, and the
// messages of the sidecar's answers for a worker that failed. What is
// refused is decided elsewhere (kvhints: the body, its length, its
// encoding).
//
// The guest (filter, built for wasip1) and the sidecar both use it, so that
// both hosts refuse the same requests with the same status and bytes. It
// depends on nothing but strconv, strings and unicode/utf8.
package httperr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error types of the OpenAI-style error body.
const (
	// TypeInvalidRequest: the client's request is refused (4xx).
	TypeInvalidRequest = "invalid_request_error"
	// TypeServer: kvgate could not handle the request (5xx).
	TypeServer = "server_error"
)

// Body is the OpenAI-style JSON error
//
//	{"error":{"message":"...","type":"...","code":413}}
//
// with message and typ as JSON strings (invalid UTF-8 replaced by U+FFFD).
func Body(status int, typ, message string) []byte {
	b := make([]byte, 0, 48+len(message)+len(typ))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, message)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	return append(b, "}}"...)
}

// Invalid is Body for a refused request: type invalid_request_error.
func Invalid(status int, message string) []byte {
	return Body(status, TypeInvalidRequest, message)
}

// appendString appends s as a JSON string: quotation mark, backslash and
// control characters escaped (the short forms where JSON has one), every
// other character as UTF-8.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch r {
		case '"', '\\':
			dst = append(dst, '\\', byte(r))
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if r < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
			} else {
				dst = utf8.AppendRune(dst, r)
			}
		}
	}
	return append(dst, '"')
}

// Messages of the 502 answers to a worker that failed, the same in every
// host (docs/spec.md, "The worker connection"), with type server_error.
const (
	// MsgWorkerUnavailable: no connection to the worker could be opened.
	MsgWorkerUnavailable = "the worker could not be reached"
	// MsgWorkerTimeout: opening the connection to the worker timed out.
	MsgWorkerTimeout = "the worker could not be reached in time"
	// MsgWorkerReset: the worker closed or reset the connection before
	// its answer began.
	MsgWorkerReset = "the worker closed the connection before answering"
	// MsgWorkerInvalid: the worker's answer is not valid HTTP.
	MsgWorkerInvalid = "the worker sent an answer that is not valid HTTP"
)

// gRPC answers. A request labelled gRPC gets every answer of the filter
// the gRPC way, so that a gRPC client can read it: a "trailers-only"
// response, HTTP 200 with content-type application/grpc, grpc-status and
// grpc-message (GRPCMessage), and no body. (Envoy turns any local reply to
// a gRPC request into that form itself; the filter does it so that every
// host answers alike.) The HTTP status the answer stands for names its
// counter.

// GRPCStatusPermissionDenied is the grpc-status of a refused gRPC request.
// PERMISSION_DENIED, not INVALID_ARGUMENT: the request is not malformed, the
// operator's configuration does not allow the protocol here, as Envoy's own
// authorization filters answer a denied gRPC request; clients do not retry
// it.
const GRPCStatusPermissionDenied = 7

// GRPCStatusOf returns the grpc-status of the filter's answer that stands
// for an HTTP status: 400 (the body is neither gRPC nor UTF-8 JSON)
// INVALID_ARGUMENT; 413 (over the body limit) RESOURCE_EXHAUSTED, as gRPC
// servers answer an oversized message; 415 (an encoded body)
// UNIMPLEMENTED, as gRPC servers answer an unsupported compression; 503
// (the filter failed) UNAVAILABLE; anything else UNKNOWN.
func GRPCStatusOf(httpStatus int) int {
	switch httpStatus {
	case 400:
		return 3
	case 413:
		return 8
	case 415:
		return 12
	case 503:
		return 14
	}
	return 2
}

// GRPCMessage encodes msg as a grpc-message value, as the gRPC protocol
// says: every byte outside printable ASCII, and '%', as %XX.
func GRPCMessage(msg string) string {
	n := 0
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			n++
		}
	}
	if n == 0 {
		return msg
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(msg)+2*n)
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}
