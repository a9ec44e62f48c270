package filterspec

// Properties the filter sets on a request it decided, so that the host's
// access log can say what became of the hint without the filter logging
// per request (docs/spec.md, Logs). They go through proxy_set_property,
// which every proxy-wasm host offers: Envoy keeps each as the filter state
// object "wasm.<name>", which an access-log format prints with
// %FILTER_STATE(wasm.kvgate.hint:PLAIN)%; the sidecar reads them from the
// host's Decision. Values never carry anything of the hint itself.
const (
	// PropertyHint is what became of the request's hint: HintNone,
	// HintStripped, HintAdmitted, "discarded:<reason>" or HintRejected. It
	// is set for every non-empty body the filter inspected and for every
	// request it refused; not for requests it let through uninspected
	// (no body, an excluded path).
	PropertyHint = "kvgate.hint"
	// PropertyHintReason is the reason the hint was counted under in
	// trtllm_kv_hints_ignored_total (untrusted, unknown_version, oversized,
	// malformed); set only when one was.
	PropertyHintReason = "kvgate.hint_reason"
	// PropertyHintDetail says where and why a discarded envelope is at
	// fault (kvhints.Explain: "actions[0].payload is not an object but an
	// array"); set only for a discarded hint.
	PropertyHintDetail = "kvgate.hint_detail"
	// PropertySenderTrusted is "true" or "false": whether the request was
	// handled as from a trusted sender (trust_kv_hints, or a matching
	// trusted_senders rule). Set with PropertyHint, but not with HintRejected.
	PropertySenderTrusted = "kvgate.sender_trusted"
	// PropertySenderRule is the index of the trusted_senders rule that
	// matched the sender ("0" for the first); set only when one did. It is
	// all the access log says of the sender's identity.
	PropertySenderRule = "kvgate.sender_rule"
	// PropertyRouterOnly names the router-only fields (router_only) the
	// request carried from an untrusted sender, comma-separated in
	// configuration order: removed, the reason for its refusal, or in
	// detect mode forwarded. Names only, never values; set only when there
	// was one.
	PropertyRouterOnly = "kvgate.router_only"
)

// The values of PropertyHint.
const (
	// HintNone: the body carries no hint, or only null (no hint either).
	HintNone = "none"
	// HintStripped: an untrusted sender's hint was removed.
	HintStripped = "stripped"
	// HintAdmitted: a trusted sender's envelope was admitted and forwarded.
	HintAdmitted = "admitted"
	// HintRejected: the filter refused the request (400, 413, 415, or a
	// gRPC request under "grpc": "refuse"), so nothing of it was forwarded.
	HintRejected = "rejected"
	// HintDiscarded is the prefix of a trusted sender's discarded hint,
	// followed by the reason: "discarded:malformed".
	HintDiscarded = "discarded:"
	// HintDetected: in detect mode, a hint that enforcing would have
	// stripped or discarded (PropertyHintReason says why), forwarded as
	// received.
	HintDetected = "detected"
)

// The host properties the filter reads to identify the sender
// (SenderProps), as proxy-wasm property paths (segments separated by NUL)
// of Envoy's attribute names.
const (
	PropertyMTLS          = "connection\x00mtls"
	PropertyURISAN        = "connection\x00uri_san_peer_certificate"
	PropertyDNSSAN        = "connection\x00dns_san_peer_certificate"
	PropertySourceAddress = "source\x00address"
)
