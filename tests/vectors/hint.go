package vectors

// Hint is what the filter reports about c's hint in its kvgate.hint and
// kvgate.hint_reason properties (filterspec.PropertyHint, docs/spec.md, Logs),
// derived from the case's expectations: "none" for no hint or a null one,
// "stripped", "admitted", "discarded:<reason>", or "rejected" for a
// request the filter refuses; reason is the counted reason, "" for none.
// A request without a body is not inspected and gets no report: "", "".
func (c *Case) Hint() (hint, reason string) {
	if len(c.Request.Body) == 0 && c.Expect.Action != "reject" {
		return "", ""
	}
	switch c.Expect.Outcome {
	case "uninspected": // a gRPC body passed as it came: nothing to report
		return "", ""
	case "rejected", "refused": // refused: a gRPC request under "grpc": "refuse"
		return "rejected", ""
	case "stripped", "admitted":
		return c.Expect.Outcome, c.Expect.Reason
	case "discarded":
		return "discarded:" + c.Expect.Reason, c.Expect.Reason
	}
	return "none", ""
}
