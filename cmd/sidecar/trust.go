package main

import (
	"errors"
	"log/slog"

	"github.com/kvgate/kvgate/filterspec"
)

// Trust sources, as the start-up log names them (trust_source).
const (
	trustFromFlag         = "flag"
	trustFromFilterConfig = "filter-config"
	trustFromEnv          = "env TRTLLM_TRUST_KV_HINTS"
	trustFromDefault      = "default"
)

// trustDecision is how trust_kv_hints was settled (decideTrust).
type trustDecision struct {
	source string
	env    string // TRTLLM_TRUST_KV_HINTS as found
	// ignored says why TRTLLM_TRUST_KV_HINTS, set, did not decide; "" when
	// it decided or is unset.
	ignored string
}

// decideTrust returns trust_kv_hints, the prototype's process-wide switch,
// for the document fc (given: the members written in it), from the first
// of these that says anything:
//
//  1. -trust-kv-hints given on the command line (f.trustSet), true or
//     false;
//  2. trust_kv_hints written in the -filter-config document, or
//     trusted_senders there: explicit configuration, which decides trust
//     per sender and leaves the switch off;
//  3. TRTLLM_TRUST_KV_HINTS=1 in the environment (f.env), the upstream
//     switch: only the value 1 turns it on, as in the worker;
//  4. off.
//
// So an explicit false (flag or document) always wins over the
// environment, and the environment never turns on what trusted_senders
// limits to some senders. -trust-kv-hints (true) with trusted_senders is
// an error, as the two are in one document.
func decideTrust(fc filterspec.Config, given filterspec.Members, f policyFlags) (bool, trustDecision, error) {
	senders := fc.TrustedSenders != nil
	on := fc.TrustKVHints
	d := trustDecision{env: f.env}
	switch {
	case f.trustSet:
		if f.trust && senders {
			return false, d, errors.New("-trust-kv-hints: cannot be combined with trusted_senders in -filter-config: one trusts every sender, the other only those its rules match")
		}
		on, d.source = f.trust, trustFromFlag
	case given.Has("trust_kv_hints") || senders:
		d.source = trustFromFilterConfig
	case f.env == "1":
		on, d.source = true, trustFromEnv
	default:
		d.source = trustFromDefault
	}
	switch {
	case f.env == "" || f.env == "0" || d.source == trustFromEnv:
	case f.env != "1":
		d.ignored = "only the value 1 turns trust on"
	case d.source == trustFromFlag && !on:
		d.ignored = "-trust-kv-hints=false wins over the environment"
	case d.source == trustFromFilterConfig && senders:
		d.ignored = "trusted_senders in -filter-config decides trust per sender"
	case d.source == trustFromFilterConfig && !on:
		d.ignored = "trust_kv_hints: false in -filter-config wins over the environment"
	}
	return on, d, nil
}

// logTrust writes the start-up line that says how trust was decided in
// the first policy, and a warning when TRTLLM_TRUST_KV_HINTS was set but
// did not decide.
func logTrust(log *slog.Logger, p *policy) {
	log.Info("hint trust", "trust_kv_hints", p.filter.TrustKVHints, "trust_source", p.trust.source,
		"trusted_senders", p.filter.TrustedSenders.Len())
	warnDetect(log, p.filter)
	if p.trust.ignored != "" {
		log.Warn("TRTLLM_TRUST_KV_HINTS ignored: "+p.trust.ignored, "value", p.trust.env)
	}
}

// warnDetect says, at start-up and at each reload, that the filter
// enforces nothing: mode detect forwards every hint as received.
func warnDetect(log *slog.Logger, fc filterspec.Config) {
	if fc.Mode == filterspec.ModeDetect {
		log.Warn("mode detect: hints are decided, counted (kvgate_kv_hints_detected_total) and logged (hint=detected) but forwarded as received; nothing is enforced. Use it only in front of workers that still strip hints themselves")
	}
}
