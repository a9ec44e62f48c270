package filter

// MetricHelp returns the help text of a metric family the filter defines
// (plugin.go), or "" for any other name. proxy-wasm gives a metric a name
// only, so a host that exports help texts (the sidecar's /metrics) asks
// here; Envoy prints none. A switch, not a map: the module does not call
// it, and an unused function costs the module nothing.
func MetricHelp(family string) string {
	switch family {
	case MetricIgnored:
		return "Requests whose kv_hints member was removed instead of forwarded, by reason: " +
			"untrusted (the sender may not send hints), unknown_version, oversized or malformed " +
			"(a trusted sender's envelope that admission discarded). Counted once per request, " +
			"under the name and labels the worker itself uses."
	case MetricAdmitted:
		return "Requests whose kv_hints envelope was admitted and forwarded to the worker in canonical form."
	case MetricRejected:
		return "Request bodies the filter refused without forwarding them, by HTTP status: " +
			"400 (not one UTF-8 JSON value), 413 (over max_body_bytes), 415 (Content-Encoding other than identity)."
	case MetricUninspected:
		return "Requests passed to the worker without inspection, by protocol: grpc (a gRPC-labelled " +
			"body whose first bytes cannot be JSON the worker would read; docs/spec.md)."
	case MetricDetected:
		return "In detect mode, requests whose kv_hints member enforcing would have removed, by the same reasons " +
			"as trtllm_kv_hints_ignored_total; the hint was forwarded as received."
	case MetricRefused:
		return "Requests refused for their protocol, by protocol: grpc (under \"grpc\": \"refuse\", " +
			"answered with grpc-status 7)."
	}
	return ""
}
