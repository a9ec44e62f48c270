package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/tests/vectors"
)

// cliRunner sends conformance cases through "kvhints rewrite", in process
// (run is main without the process): the body on stdin, the trust mode and
// limits as flags, with the hosts' default body limit when the case sets
// none. It reads the forwarded body from stdout and the outcome line from
// stderr; it has no counters and no reply body.
type cliRunner struct{}

func (cliRunner) Observes() vectors.Observes {
	return vectors.ObservesOutcome | vectors.ObservesForwardStatus
}

func (cliRunner) Send(c *vectors.Case) (vectors.Result, error) {
	args := []string{"rewrite"}
	if c.Trusted {
		args = append(args, "--trusted")
	}
	if c.MaxDepth != 0 {
		args = append(args, "--max-depth", strconv.Itoa(c.MaxDepth))
	}
	limit := c.MaxBodyBytes
	if limit == 0 {
		limit = vectors.DefaultMaxBodyBytes
	}
	args = append(args, "--max-body-bytes", strconv.Itoa(limit))
	if c.RouterOnly != nil {
		args = append(args, "--router-only", string(c.RouterOnly))
	}
	args = append(args, "-")
	var stdout, stderr bytes.Buffer
	code := run(args, bytes.NewReader(c.Request.Body), &stdout, &stderr)
	var line rewriteResult
	if err := json.Unmarshal(stderr.Bytes(), &line); err != nil || strings.Count(stderr.String(), "\n") != 1 {
		return vectors.Result{}, fmt.Errorf("exit %d, stderr %q is not one outcome line", code, stderr.String())
	}
	r := vectors.Result{Status: line.Status, Outcome: line.Outcome}
	if line.Reason != nil {
		r.Reason = *line.Reason
	}
	switch {
	case code == exitOK && line.Status == 200:
		r.Forwarded, r.Body = true, stdout.Bytes()
	case code == exitRejected && stdout.Len() == 0:
	default:
		return r, fmt.Errorf("exit %d with status %d and %d bytes on stdout", code, line.Status, stdout.Len())
	}
	return r, nil
}

// TestVectors runs the conformance cases through the CLI. rewrite reads a
// body only, so the cases that send a content-encoding are left out.
func TestVectors(t *testing.T) {
	vectors.Run(t, cliRunner{}, vectors.Skip("rewrite has no input for a content-encoding header",
		func(c *vectors.Case) bool { return c.Request.Headers["content-encoding"] != "" && c.Group != "grpc" }),
		vectors.Skip("gRPC requests are decided by the filter, from the content type and configuration",
			func(c *vectors.Case) bool { return c.Group == "grpc" }),
		vectors.Skip("rewrite reads a body: router-only headers are the filter's",
			(*vectors.Case).RouterOnlyHeader))
}
