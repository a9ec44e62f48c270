package main

// outcome is what became of a request: the label of
// kvgate_sidecar_requests_total and the access line's "outcome". Every
// request gets exactly one, whatever path it leaves by (docs/spec.md,
// "The sidecar's own series").
type outcome string

const (
	// outcomeForwarded: the worker's whole answer reached the client.
	outcomeForwarded outcome = "forwarded"
	// outcomeLocalReply: the guest answered (400, 413, 415, its own 503).
	outcomeLocalReply outcome = "local_reply"
	// outcomeFilterFailure: the filter failed; 503, nothing forwarded.
	outcomeFilterFailure outcome = "filter_failure"
	// outcomeTooLarge: the sidecar's own 413.
	outcomeTooLarge outcome = "too_large"
	// outcomeBadRequest: the request could not be read as HTTP.
	outcomeBadRequest outcome = "bad_request"
	// outcomeBodyTimeout: the body stalled (408).
	outcomeBodyTimeout outcome = "body_timeout"
	// outcomeClientGone: the client left before the answer was complete:
	// while its body was read or filtered, while the worker had not yet
	// answered, or in the middle of the answer (a stream cut short).
	outcomeClientGone outcome = "client_gone"
	// outcomeUnsupportedProtocol: an upgrade, CONNECT or HTTP/2 preface.
	outcomeUnsupportedProtocol outcome = "unsupported_protocol"
	// outcomeUpstreamUnavailable: no connection to the worker could be
	// opened (refused, unreachable); 502.
	outcomeUpstreamUnavailable outcome = "upstream_unavailable"
	// outcomeUpstreamTimeout: the connection to the worker was not
	// established within -upstream-connect-timeout; 502.
	outcomeUpstreamTimeout outcome = "upstream_timeout"
	// outcomeUpstreamReset: the worker closed or reset the connection
	// before its answer began (502) or in the middle of it (the client's
	// connection is closed after what arrived).
	outcomeUpstreamReset outcome = "upstream_reset"
	// outcomeUpstreamInvalid: the worker's answer is not valid HTTP (a
	// malformed status line or header, a 101 nobody asked for); 502.
	outcomeUpstreamInvalid outcome = "upstream_invalid"
	// outcomeAborted: the handler stopped by a panic that none of the
	// above explains (a bug): the connection was closed.
	outcomeAborted outcome = "aborted"
)

// outcomes lists every outcome, so that each series exists from the start.
var outcomes = []outcome{
	outcomeForwarded, outcomeLocalReply, outcomeFilterFailure, outcomeTooLarge, outcomeBadRequest,
	outcomeBodyTimeout, outcomeClientGone, outcomeUnsupportedProtocol, outcomeUpstreamUnavailable,
	outcomeUpstreamTimeout, outcomeUpstreamReset, outcomeUpstreamInvalid, outcomeAborted,
}
