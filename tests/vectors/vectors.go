package vectors

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Case is one conformance case.
type Case struct {
	// Group is the file's group; Name is unique over all files.
	Group       string
	Name        string
	Description string
	Trusted     bool
	// TrustedSenders is the plugin configuration's trusted_senders list,
	// nil for a case without one. With it, Trusted is the decision the
	// rules reach for Sender, and the filter runs without trust_kv_hints.
	TrustedSenders json.RawMessage
	// Sender are the sender's connection properties; nil unless
	// TrustedSenders is set. A runner that cannot supply them must skip
	// the case.
	Sender *Sender
	// MaxDepth and MaxBodyBytes are 0 when the case uses the defaults.
	MaxDepth     int
	MaxBodyBytes int
	// GRPC is the configuration's "grpc" member, "" for the default
	// ("pass").
	GRPC string
	// Detect: the case runs in detect mode ("mode": "detect"); see
	// DetectCase and the BothModes option.
	Detect bool
	// RouterOnly is the configuration's router_only member, nil for a case
	// without one; RouterOnlyFields are every field it makes, member paths
	// then header names in the order a host defines their series (the
	// generator derives them from the specification's presets).
	RouterOnly       json.RawMessage
	RouterOnlyFields []string
	Request          Request
	Expect           Expect
}

// Sender is what the host knows about a request's sender, as the four
// properties the filter reads; nil fields are absent properties.
type Sender struct {
	// MTLS is connection.mtls (one byte, 1 or 0, in Envoy's encoding).
	MTLS *bool `json:"mtls"`
	// URISAN is connection.uri_san_peer_certificate.
	URISAN *string `json:"uri_san"`
	// DNSSAN is connection.dns_san_peer_certificate.
	DNSSAN *string `json:"dns_san"`
	// SourceAddress is source.address ("ip:port", "[ip]:port").
	SourceAddress *string `json:"source_address"`
}

// SenderProperties are the names of the four properties, as Envoy calls
// them (proxy-wasm paths put a NUL byte where the dot is).
var SenderProperties = [...]string{"connection.mtls", "connection.uri_san_peer_certificate",
	"connection.dns_san_peer_certificate", "source.address"}

// Property returns one of SenderProperties in Envoy's encoding (a bool as
// one byte, a string as its bytes), and false when it is absent.
func (s *Sender) Property(name string) ([]byte, bool) {
	str := func(v *string) ([]byte, bool) {
		if v == nil {
			return nil, false
		}
		return []byte(*v), true
	}
	switch name {
	case "connection.mtls":
		if s.MTLS == nil {
			return nil, false
		}
		if *s.MTLS {
			return []byte{1}, true
		}
		return []byte{0}, true
	case "connection.uri_san_peer_certificate":
		return str(s.URISAN)
	case "connection.dns_san_peer_certificate":
		return str(s.DNSSAN)
	case "source.address":
		return str(s.SourceAddress)
	}
	return nil, false
}

// Request is the HTTP request of a case.
type Request struct {
	Method  string
	Path    string
	Headers map[string]string
	Body    []byte
}

// Expect is what a host must do with the request.
type Expect struct {
	// Action is "forward" or "reject".
	Action string
	// Status is the local reply's status for "reject".
	Status int
	// GRPCStatus is the grpc-status of a gRPC answer ("reject" of a request
	// labelled gRPC, with Status 200: refused under "grpc": "refuse", or
	// the code that stands for 400, 413 or 415), 0 otherwise.
	GRPCStatus int
	// ForwardedBody is the body the worker receives for "forward"; nil when
	// the case does not say.
	ForwardedBody []byte
	// Unchanged is true when the forwarded body is the request body.
	Unchanged bool
	// Outcome and Reason are kvhints' Outcome and Reason names ("" for
	// none), or the filter's for gRPC: "uninspected" (passed without
	// inspection) and "refused".
	Outcome string
	Reason  string
	// CanonicalHint is the admitted envelope's canonical bytes, if any.
	CanonicalHint string
	// RouterOnlyFound, for a request refused for router-only fields, are
	// the fields it carried, in Counters.RouterOnlyRemoved's form: what
	// detect mode counts as detected.
	RouterOnlyFound string
	// Headers are request headers (lower-case names) the worker must
	// receive with the value given, or, for nil, must not receive at all;
	// nil when the case says nothing of headers (see ObservesHeaders).
	Headers map[string]*string
	// Counters are the metric deltas the request causes.
	Counters Counters
}

// Counters are counter deltas, by series.
type Counters struct {
	Untrusted      int `json:"untrusted"`
	UnknownVersion int `json:"unknown_version"`
	Oversized      int `json:"oversized"`
	Malformed      int `json:"malformed"`
	Admitted       int `json:"admitted"`
	RejectedBodies int `json:"rejected_bodies"`
	// The gRPC counters, present in the files for the grpc group only
	// (absent means 0).
	GRPCUninspected int `json:"grpc_uninspected"`
	GRPCRefused     int `json:"grpc_refused"`
	// The detect-mode counters (kvgate_kv_hints_detected_total), never in
	// the files: the kit derives a detect case's from its enforce case's
	// (DetectCase).
	DetectedUntrusted      int `json:"detected_untrusted,omitempty"`
	DetectedUnknownVersion int `json:"detected_unknown_version,omitempty"`
	DetectedOversized      int `json:"detected_oversized,omitempty"`
	DetectedMalformed      int `json:"detected_malformed,omitempty"`
	// The router-only counters: refusals, and the fields removed and (in
	// detect mode, derived by DetectCase) detected, as "field=n,..." in
	// name order for n != 0 (kvgate_router_only_removed_total and
	// kvgate_router_only_detected_total).
	RouterOnlyRefused  int    `json:"router_only_refused,omitempty"`
	RouterOnlyRemoved  string `json:"router_only_removed,omitempty"`
	RouterOnlyDetected string `json:"router_only_detected,omitempty"`
}

type fileJSON struct {
	Group string     `json:"group"`
	Cases []caseJSON `json:"cases"`
}

type caseJSON struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Trusted        bool            `json:"trusted"`
	TrustedSenders json.RawMessage `json:"trusted_senders"`
	Sender         *Sender         `json:"sender"`
	MaxDepth       int             `json:"max_depth"`
	MaxBodyBytes   int             `json:"max_body_bytes"`
	GRPC           string          `json:"grpc"`
	RouterOnly     json.RawMessage `json:"router_only"`
	ROFields       []string        `json:"router_only_fields"`
	Request        struct {
		Method     string            `json:"method"`
		Path       string            `json:"path"`
		Headers    map[string]string `json:"headers"`
		Body       *string           `json:"body"`
		BodyBase64 *string           `json:"body_base64"`
	} `json:"request"`
	Expect struct {
		Action              string             `json:"action"`
		Status              int                `json:"status"`
		GRPCStatus          int                `json:"grpc_status"`
		ForwardedBody       *string            `json:"forwarded_body"`
		ForwardedBodyBase64 *string            `json:"forwarded_body_base64"`
		Unchanged           bool               `json:"unchanged"`
		Outcome             string             `json:"outcome"`
		Reason              *string            `json:"reason"`
		CanonicalHint       *string            `json:"canonical_hint"`
		Headers             map[string]*string `json:"headers"`
		RouterOnlyFound     string             `json:"router_only_found"`
		Counters            Counters           `json:"counters"`
	} `json:"expect"`
}

// Load reads every *.json file of dir, in name order, and returns its cases
// in file order.
func Load(dir string) ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Case
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var fj fileJSON
		if err := json.Unmarshal(raw, &fj); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		for _, cj := range fj.Cases {
			c, err := convert(fj.Group, cj)
			if err != nil {
				return nil, fmt.Errorf("%s: case %q: %v", f, cj.Name, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func convert(group string, cj caseJSON) (Case, error) {
	c := Case{
		Group:            group,
		Name:             cj.Name,
		Description:      cj.Description,
		Trusted:          cj.Trusted,
		TrustedSenders:   cj.TrustedSenders,
		Sender:           cj.Sender,
		MaxDepth:         cj.MaxDepth,
		MaxBodyBytes:     cj.MaxBodyBytes,
		GRPC:             cj.GRPC,
		RouterOnly:       cj.RouterOnly,
		RouterOnlyFields: cj.ROFields,
		Request: Request{
			Method:  cj.Request.Method,
			Path:    cj.Request.Path,
			Headers: cj.Request.Headers,
		},
	}
	body, err := pick(cj.Request.Body, cj.Request.BodyBase64)
	if err != nil {
		return c, fmt.Errorf("request body: %v", err)
	}
	if body == nil {
		body = []byte{}
	}
	c.Request.Body = body
	e := cj.Expect
	c.Expect = Expect{
		Action:          e.Action,
		Status:          e.Status,
		GRPCStatus:      e.GRPCStatus,
		Unchanged:       e.Unchanged,
		Outcome:         e.Outcome,
		Headers:         e.Headers,
		RouterOnlyFound: e.RouterOnlyFound,
		Counters:        e.Counters,
	}
	if e.Reason != nil {
		c.Expect.Reason = *e.Reason
	}
	if e.CanonicalHint != nil {
		c.Expect.CanonicalHint = *e.CanonicalHint
	}
	if c.Expect.ForwardedBody, err = pick(e.ForwardedBody, e.ForwardedBodyBase64); err != nil {
		return c, fmt.Errorf("forwarded body: %v", err)
	}
	if c.Expect.ForwardedBody == nil && c.Expect.Unchanged {
		c.Expect.ForwardedBody = c.Request.Body
	}
	switch c.Expect.Action {
	case "forward", "reject":
	default:
		return c, fmt.Errorf("unknown action %q", c.Expect.Action)
	}
	if (c.Sender == nil) != (c.TrustedSenders == nil) {
		return c, fmt.Errorf("sender and trusted_senders go together")
	}
	if (c.RouterOnly == nil) != (c.RouterOnlyFields == nil) {
		return c, fmt.Errorf("router_only and router_only_fields go together")
	}
	return c, nil
}

func pick(text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("both text and base64 given")
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		return base64.StdEncoding.DecodeString(*b64)
	}
	return nil, nil
}

// FilterConfig is the filter's plugin configuration (filterspec/config.go) that
// a case runs under: its trust mode, or its trusted_senders, and any limits
// it sets.
func (c *Case) FilterConfig() string {
	doc := `{"trust_kv_hints":` + strconv.FormatBool(c.Trusted)
	if c.TrustedSenders != nil {
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.TrustedSenders); err != nil {
			panic(err) // the loader read it as JSON
		}
		doc = `{"trusted_senders":` + compact.String()
	}
	if c.MaxDepth != 0 {
		doc += `,"max_depth":` + strconv.Itoa(c.MaxDepth)
	}
	if c.MaxBodyBytes != 0 {
		doc += `,"max_body_bytes":` + strconv.Itoa(c.MaxBodyBytes)
	}
	if c.GRPC != "" {
		doc += `,"grpc":` + strconv.Quote(c.GRPC)
	}
	if c.Detect {
		doc += `,"mode":"detect"`
	}
	if c.RouterOnly != nil {
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.RouterOnly); err != nil {
			panic(err) // the loader read it as JSON
		}
		doc += `,"router_only":` + compact.String()
	}
	return doc + "}"
}

// DetectCase returns c as it must go in detect mode (docs/spec.md,
// Detection-only mode): the configuration says "mode": "detect", a
// forwarded body is forwarded exactly as received, and what enforcing
// counts as ignored is counted as detected instead; refusals (400, 413,
// 415) and everything else stay, except a refusal for router-only fields,
// which is forwarded as received with the fields counted as detected.
// Router-only headers are forwarded too. Its name starts with "detect/".
func DetectCase(c Case) Case {
	d := c
	d.Name, d.Detect = "detect/"+c.Name, true
	e := &d.Expect
	if e.Counters.RouterOnlyRefused > 0 {
		// The generator gives refusals only bodies without a hint that
		// are otherwise acceptable.
		e.Action, e.Status, e.GRPCStatus, e.Outcome, e.Reason = "forward", 0, 0, "no_hint", ""
		e.Counters.RouterOnlyRefused = 0
		e.Counters.RouterOnlyRemoved = e.RouterOnlyFound
	}
	if e.Headers != nil {
		h := map[string]*string{}
		for k, want := range e.Headers {
			h[k] = want
			for rk, v := range c.Request.Headers {
				if strings.EqualFold(rk, k) {
					h[k] = &v
				}
			}
		}
		e.Headers = h
	}
	e.Counters.RouterOnlyDetected, e.Counters.RouterOnlyRemoved = e.Counters.RouterOnlyRemoved, ""
	if e.Action == "forward" {
		e.ForwardedBody, e.Unchanged = bytes.Clone(c.Request.Body), true
	}
	if e.Outcome == "stripped" || e.Outcome == "discarded" {
		e.Outcome = "detected"
	}
	e.CanonicalHint = ""
	k := &e.Counters
	k.DetectedUntrusted, k.Untrusted = k.Untrusted, 0
	k.DetectedUnknownVersion, k.UnknownVersion = k.UnknownVersion, 0
	k.DetectedOversized, k.Oversized = k.Oversized, 0
	k.DetectedMalformed, k.Malformed = k.Malformed, 0
	return d
}

// RouterOnlyHeader reports whether the request carries a header that is
// one of the case's router-only fields: a case only a host with headers
// (the filter's) can run.
func (c *Case) RouterOnlyHeader() bool {
	for k := range c.Request.Headers {
		for _, f := range c.RouterOnlyFields {
			if strings.EqualFold(k, f) {
				return true
			}
		}
	}
	return false
}
