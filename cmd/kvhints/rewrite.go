package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/bits"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
)

const rewriteUsage = `Usage: kvhints rewrite [--trusted] [--max-depth N] [--max-body-bytes N] [--router-only JSON] FILE|-

Filters one request body the way kvgate would (docs/spec.md: "Admission
rules", "Untrusted mode and counting", "Reading a body the way the worker
does").
The body that would be forwarded to the worker is written to stdout, byte
for byte (nothing when the body is rejected), and one JSON line describing
the outcome to stderr:

  {"outcome":"stripped","reason":"untrusted","status":200}

  outcome  no_hint, null_hint, stripped, admitted, discarded or rejected.
  reason   untrusted for stripped; unknown_version, oversized or malformed
           for discarded; null otherwise.
  status   200 when the body is forwarded; 400 (not acceptable JSON, or not
           UTF-8, or a router-only field under "untrusted": "refuse") or 413
           (over --max-body-bytes) when it is rejected.
  router_only  with --router-only, the router-only member paths the body
           held (removed, or the reason for the refusal); names only.

Flags:
  --trusted           the sender may send hints: admit them instead of
                      removing them (default: untrusted)
  --max-depth N       nesting limit for admitted envelopes, N >= 1
                      (default 128; the envelope is depth 1)
  --max-body-bytes N  reject bodies longer than N bytes with 413
                      (default 0: no limit)
  --router-only JSON  the plugin configuration's router_only member, e.g.
                      '{"engines":["vllm","dynamo"],"untrusted":"strip"}':
                      an untrusted body's router-only members go too
                      (docs/router-only.md); headers are not a body's

Exit status: 0 forwarded, 1 rejected, 2 usage or I/O error.
`

// rewriteResult is the outcome line rewrite prints on stderr. It never
// carries hint contents or the rejection message.
type rewriteResult struct {
	Outcome string  `json:"outcome"`
	Reason  *string `json:"reason"`
	Status  int     `json:"status"`
	// RouterOnly names the router-only member paths found; omitted
	// without --router-only.
	RouterOnly []string `json:"router_only,omitempty"`
}

// runRewrite is "kvhints rewrite": filter one request body.
func runRewrite(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rewrite", flag.ContinueOnError)
	var p kvhints.Policy
	p.Limits.MaxDepth = kvhints.DefaultMaxDepth
	fs.BoolVar(&p.Trusted, "trusted", false, "admit hints")
	fs.Var(intFlag{&p.Limits.MaxDepth, 1}, "max-depth", "nesting limit")
	fs.Var(intFlag{&p.MaxBodyBytes, 0}, "max-body-bytes", "body size limit")
	var routerOnly string
	fs.StringVar(&routerOnly, "router-only", "", "router_only configuration (JSON)")
	file, code, ok := parseArgs(fs, rewriteUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	var ro *filterspec.RouterOnly
	if routerOnly != "" {
		cfg, err := filterspec.ParseConfig([]byte(`{"router_only":` + routerOnly + `}`))
		if err != nil {
			fmt.Fprintf(stderr, "kvhints rewrite: --router-only: %v\n", err)
			return exitUsage
		}
		ro = cfg.RouterOnly
		p.RouterOnly = ro.Body(false)
	}
	body, err := readInput(file, stdin, p.MaxBodyBytes)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints rewrite: %v\n", err)
		return exitUsage
	}

	out, r := kvhints.Rewrite(body, p)
	res := rewriteResult{Outcome: r.Outcome.String(), Status: 200}
	if r.Reason != kvhints.ReasonNone {
		s := r.Reason.String()
		res.Reason = &s
	}
	for m := r.RouterOnly; m != 0; m &= m - 1 {
		res.RouterOnly = append(res.RouterOnly, ro.Fields()[bits.TrailingZeros64(m)])
	}
	code = exitOK
	if r.Outcome == kvhints.OutcomeRejected {
		res.Status, code = r.Status, exitRejected
	} else if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "kvhints rewrite: writing body: %v\n", err)
		return exitUsage
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(stderr, "kvhints rewrite: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s\n", line)
	return code
}
