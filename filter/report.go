package filter

import (
	"strconv"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/proxywasm"
)

// hintValue is filterspec.PropertyHint's value for a rewrite's result; constants
// only, so that reporting allocates nothing.
func hintValue(res kvhints.Result) string {
	switch res.Outcome {
	case kvhints.OutcomeStripped:
		return filterspec.HintStripped
	case kvhints.OutcomeAdmitted:
		return filterspec.HintAdmitted
	case kvhints.OutcomeRejected:
		return filterspec.HintRejected
	case kvhints.OutcomeDiscarded:
		switch res.Reason {
		case kvhints.ReasonUnknownVersion:
			return filterspec.HintDiscarded + "unknown_version"
		case kvhints.ReasonOversized:
			return filterspec.HintDiscarded + "oversized"
		}
		return filterspec.HintDiscarded + "malformed"
	}
	return filterspec.HintNone
}

// report sets the properties of a body the filter decided, rule being the
// index of the trusted_senders rule that matched (-1 for none). A discarded
// envelope is explained (kvhints.Explain, a slow path that rewrites body
// again with the plugin's Rewriter, so it comes after the rewritten body
// has been handed to the host) in a property and in a debug log line.
func (p *Plugin) report(res kvhints.Result, body []byte, policy kvhints.Policy, rule int, detect bool) {
	hint := hintValue(res)
	if detect && (res.Outcome == kvhints.OutcomeStripped || res.Outcome == kvhints.OutcomeDiscarded) {
		hint = filterspec.HintDetected
	}
	p.setProperty(filterspec.PropertyHint, hint)
	p.setProperty(filterspec.PropertySenderTrusted, strconv.FormatBool(policy.Trusted))
	if rule >= 0 {
		p.setProperty(filterspec.PropertySenderRule, strconv.Itoa(rule))
	}
	if res.Reason != kvhints.ReasonNone {
		p.setProperty(filterspec.PropertyHintReason, res.Reason.String())
	}
	if res.Outcome != kvhints.OutcomeDiscarded {
		return
	}
	if e := p.rw.Explain(body, policy); e != nil {
		p.setProperty(filterspec.PropertyHintDetail, e.Detail)
		p.host.Log(proxywasm.LogDebug, "kvgate: kv_hints discarded ("+res.Reason.String()+"): "+e.Detail)
	}
}

// setProperty sets a property; a host that refuses it costs the log line
// its detail, never the request.
func (p *Plugin) setProperty(name, value string) {
	if err := p.host.SetProperty(name, value); err != nil {
		p.host.Log(proxywasm.LogWarn, "kvgate: cannot set property "+name+": "+err.Error())
	}
}
