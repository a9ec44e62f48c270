// Package httperr holds kvgate's HTTP refusals: the checks that refuse a
// request on its headers before its body is filtered (an encoded body, a
// body longer than the limit) and the OpenAI-style JSON error body that
// every refusal and failure is answered with.
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

// BodyTooLarge decides a request body's length n against the body limit
// (limit bytes): 413 and a message when n is over it, 0 and "" otherwise.
// n is the length a Content-Length header announces, or the bytes counted
// so far; a negative n (unknown length) is never too large. Both hosts
// call it on the announced length, so that an oversize body is refused
// from its headers before any of it is read.
func BodyTooLarge(n int64, limit int) (status int, message string) {
	if n > int64(limit) {
		return 413, TooLargeMessage(limit)
	}
	return 0, ""
}

// TooLargeMessage is the message of the 413 answer for a body limit of
// limit bytes. Envoy's own 413 (local_reply_config, rendered by
// envoy.Render) carries it word for word.
func TooLargeMessage(limit int) string {
	return "request body is larger than the limit of " + strconv.Itoa(limit) + " bytes"
}

// CheckContentEncoding decides a request's Content-Encoding header value
// (several values joined by commas). A body we cannot read cannot be
// filtered, so anything but identity is refused: it returns 415 and a
// message, or 0 and "" when the body is plain.
func CheckContentEncoding(v string) (status int, message string) {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part != "" && !strings.EqualFold(part, "identity") {
			return 415, "Content-Encoding " + strings.ToValidUTF8(part, "?") + " is not supported; send the body uncompressed"
		}
	}
	return 0, ""
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
