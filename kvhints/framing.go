package kvhints

import (
	"strconv"
	"strings"
)

// What the worker could not be handed, from the request's framing rather
// than its JSON (docs/spec.md, "Content-Encoding" and "Body limit"): these
// two functions are the only places that decide a 413 or a 415, for every
// host and for Rewriter itself.

// BodyTooLarge decides a request body's length n against the body limit
// (limit bytes): 413 and a message when n is over it, 0 and "" otherwise.
// n is the length a Content-Length header announces, or the bytes counted
// so far; a negative n (unknown length) is never too large. Hosts call it
// on the announced length, so that an oversize body is refused from its
// headers before any of it is read.
func BodyTooLarge(n int64, limit int) (status int, message string) {
	if n > int64(limit) {
		return 413, TooLargeMessage(limit)
	}
	return 0, ""
}

// TooLargeMessage is the message of the 413 answer for a body limit of
// limit bytes. Envoy's own 413 (local_reply_config, rendered by the test
// bootstrap renderer) carries it word for word.
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
