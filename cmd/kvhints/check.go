package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/kvgate/kvgate/kvhints"
)

// hashCost is the worst-case cost in compact bytes of one more kv.fetch
// block hash: a decimal uint64 has at most 20 digits (18446744073709551615)
// and each hash after the first needs a comma.
const hashCost = 20 + 1

const checkUsage = `Usage: kvhints check [--max-depth N] FILE|-

Admits one KV hint envelope (the value of a kv_hints member, e.g.
{"protocol_version":"0.1",...}) by the rules of docs/spec.md ("Admission rules") and
prints one JSON line on stdout:

  {"admitted":true,"reason":null,"compact_bytes":213,"block_hashes_headroom":3110}
  {"admitted":false,"reason":"malformed","compact_bytes":null,
   "path":"actions[0].payload","detail":"actions[0].payload is not an object but an array"}

  admitted       whether a trusted sender's envelope would be forwarded.
  reason         why it was ignored: unknown_version, oversized or malformed;
                 null when admitted, and null for a JSON null (no hint at all,
                 reported as not admitted).
  compact_bytes  size of the canonical compact encoding that would be
                 forwarded; at most 65536. null when not admitted: the
                 rulebook stops at the first rule that fires, so no exact
                 figure exists for an ignored envelope.
  path, detail   only when ignored: where the fault is (path, "" for the
                 envelope as a whole) and what it is, in words that never
                 quote the envelope: members that version 0.1 does not
                 define are named by position, {i}. An envelope with several
                 faults gets one of them.
  block_hashes_headroom
                 only when admitted and some action has action_type
                 "kv.fetch": how many more block_hashes could be added and
                 still fit in 65536 compact bytes, assuming the worst case
                 for each hash, a 20-digit decimal uint64 plus a comma
                 (21 bytes): floor((65536 - compact_bytes) / 21). It is a
                 lower bound for the envelope as a whole, whichever kv.fetch
                 action the hashes go to.

Flags:
  --max-depth N  nesting limit, N >= 1 (default 128; the envelope is depth 1)

Exit status: 0 admitted, 1 ignored (or null), 2 usage or I/O error.
`

// checkResult is the line check prints. Nil pointers print as null;
// Headroom is left out unless the envelope is admitted with a kv.fetch
// action, Path and Detail unless it is ignored.
type checkResult struct {
	Admitted     bool    `json:"admitted"`
	Reason       *string `json:"reason"`
	CompactBytes *int    `json:"compact_bytes"`
	Path         *string `json:"path,omitempty"`
	Detail       string  `json:"detail,omitempty"`
	Headroom     *int    `json:"block_hashes_headroom,omitempty"`
}

// runCheck is "kvhints check": admit one envelope and report the decision.
func runCheck(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	maxDepth := kvhints.DefaultMaxDepth
	fs.Var(intFlag{&maxDepth, 1}, "max-depth", "nesting limit")
	file, code, ok := parseArgs(fs, checkUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	raw, err := readInput(file, stdin, 0)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints check: %v\n", err)
		return exitUsage
	}

	snap, reason := kvhints.Admit(raw, kvhints.Limits{MaxDepth: maxDepth})
	res, code := checkResult{}, exitRejected
	switch {
	case snap != nil:
		res.Admitted, code = true, exitOK
		n := snap.Len()
		res.CompactBytes = &n
		if hasFetch(snap) {
			h := (kvhints.MaxCompactBytes - n) / hashCost
			res.Headroom = &h
		}
	case reason != kvhints.ReasonNone:
		s := reason.String()
		res.Reason = &s
		if e := kvhints.Explain(raw, kvhints.Limits{MaxDepth: maxDepth}); e != nil {
			res.Path, res.Detail = &e.Path, e.Detail
		}
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints check: %v\n", err)
		return exitUsage
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		fmt.Fprintf(stderr, "kvhints check: writing result: %v\n", err)
		return exitUsage
	}
	return code
}

// hasFetch reports whether any action of snap is a kv.fetch action, of any
// action_version.
func hasFetch(snap *kvhints.Snapshot) bool {
	for i := range snap.NumActions() {
		if snap.Action(i).Type() == kvhints.FetchActionType {
			return true
		}
	}
	return false
}
