package consumer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// MaxEndpointBytes bounds the length of a source_control_endpoint.
const MaxEndpointBytes = 2048

// FetchPayload is the payload of a kv.fetch action at version 1.0.
type FetchPayload struct {
	// SourceControlEndpoint is where the producer says the KV can be
	// fetched from. It is a claim, not a permission: it must be found in a
	// server-controlled registry before anything connects to it.
	SourceControlEndpoint string
	// BlockHashes are the producer's root-aligned block hashes. They guide
	// range selection; they are not content names or storage keys.
	BlockHashes []uint64
}

// PayloadError says why a payload is not a valid kv.fetch 1.0 payload. Its
// message never quotes the payload.
type PayloadError struct {
	Field   string // the member at fault, or "" for the object itself
	Problem string
}

// Error names the field and the problem.
func (e *PayloadError) Error() string {
	if e.Field == "" {
		return "kv.fetch payload: " + e.Problem
	}
	return "kv.fetch payload: " + e.Field + ": " + e.Problem
}

func payloadErr(field, problem string) error { return &PayloadError{Field: field, Problem: problem} }

// ParseFetchPayload reads a kv.fetch 1.0 payload: a JSON object whose
// member source_control_endpoint is a non-empty string (at most
// MaxEndpointBytes, no control characters) and whose member block_hashes
// is a non-empty array of integers in 0 … 2^64−1 written without fraction,
// exponent or sign. Member names are matched exactly after decoding; a
// repeated member, a missing one, invalid UTF-8 or data after the object
// is an error. Other members are allowed and ignored.
func ParseFetchPayload(b []byte) (FetchPayload, error) {
	var p FetchPayload
	if !utf8.Valid(b) {
		return p, payloadErr("", "not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return p, payloadErr("", "not a JSON object")
	}
	var haveEndpoint, haveHashes bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return p, payloadErr("", "invalid JSON")
		}
		name, _ := t.(string)
		switch name {
		case "source_control_endpoint":
			if haveEndpoint {
				return p, payloadErr(name, "repeated")
			}
			haveEndpoint = true
			if p.SourceControlEndpoint, err = readEndpoint(dec); err != nil {
				return p, err
			}
		case "block_hashes":
			if haveHashes {
				return p, payloadErr(name, "repeated")
			}
			haveHashes = true
			if p.BlockHashes, err = readHashes(dec); err != nil {
				return p, err
			}
		default:
			// Object keys cannot repeat in an admitted envelope; here
			// only the members we read must be unique.
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return p, payloadErr("", "invalid JSON")
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return p, payloadErr("", "invalid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return p, payloadErr("", "data after the object")
	}
	if !haveEndpoint {
		return p, payloadErr("source_control_endpoint", "missing")
	}
	if !haveHashes {
		return p, payloadErr("block_hashes", "missing")
	}
	return p, nil
}

func readEndpoint(dec *json.Decoder) (string, error) {
	const field = "source_control_endpoint"
	t, err := dec.Token()
	if err != nil {
		return "", payloadErr(field, "invalid JSON")
	}
	s, ok := t.(string)
	switch {
	case !ok:
		return "", payloadErr(field, "not a string")
	case s == "":
		return "", payloadErr(field, "empty")
	case len(s) > MaxEndpointBytes:
		return "", payloadErr(field, "too long")
	}
	for _, r := range s {
		// U+FFFD is what a lone surrogate escape decodes to.
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return "", payloadErr(field, "contains a control or replacement character")
		}
	}
	return s, nil
}

func readHashes(dec *json.Decoder) ([]uint64, error) {
	const field = "block_hashes"
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, payloadErr(field, "not an array")
	}
	var out []uint64
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, payloadErr(field, "invalid JSON")
		}
		n, ok := t.(json.Number)
		if !ok {
			return nil, payloadErr(field, "element is not a number")
		}
		h, ok := parseHash(string(n))
		if !ok {
			return nil, payloadErr(field, "element is not an integer in 0..2^64-1")
		}
		out = append(out, h)
	}
	if _, err := dec.Token(); err != nil {
		return nil, payloadErr(field, "invalid JSON")
	}
	if len(out) == 0 {
		return nil, payloadErr(field, "empty")
	}
	return out, nil
}

// parseHash accepts exactly the JSON integer literals 0 … 2^64−1.
func parseHash(s string) (uint64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	h, err := strconv.ParseUint(s, 10, 64)
	return h, err == nil
}

// errNotFetch1 is returned for a payload of an action other than kv.fetch 1.0.
var errNotFetch1 = errors.New("kv.fetch payload: only version " + fetchVersion + " can be read")

// fetchPayloadOf reads the payload of an action, which must be kv.fetch 1.0.
func fetchPayloadOf(v interface {
	Type() string
	Version() string
	Payload() []byte
}) (FetchPayload, error) {
	if v.Type() != fetchType || v.Version() != fetchVersion {
		return FetchPayload{}, errNotFetch1
	}
	return ParseFetchPayload(v.Payload())
}
