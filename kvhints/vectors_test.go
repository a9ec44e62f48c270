package kvhints_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/tests/vectors"
)

// rulebook is the conformance runner of the rulebook itself: the request's
// content-encoding and body go through kvhints as a host hands them over,
// with the hosts' default body limit. It has no counters and no reply body,
// but knows the outcome and the admitted envelope.
type rulebook struct{ r kvhints.Rewriter }

func (*rulebook) Observes() vectors.Observes {
	return vectors.ObservesOutcome | vectors.ObservesHint
}

func (rb *rulebook) Send(c *vectors.Case) (vectors.Result, error) {
	trusted := c.Trusted
	if c.Sender != nil {
		// The rules decide from the sender's properties.
		cfg, err := filterspec.ParseConfig(append(append([]byte(`{"trusted_senders":`), c.TrustedSenders...), '}'))
		if err != nil {
			return vectors.Result{}, err
		}
		s := cfg.TrustedSenders
		var sp filterspec.SenderProps
		sp.MTLS, _ = c.Sender.Property("connection.mtls")
		sp.URISAN, _ = c.Sender.Property("connection.uri_san_peer_certificate")
		sp.DNSSAN, _ = c.Sender.Property("connection.dns_san_peer_certificate")
		sp.SourceAddress, _ = c.Sender.Property("source.address")
		if trusted = s.Match(&sp) >= 0; trusted != c.Trusted {
			return vectors.Result{}, fmt.Errorf("sender trusted = %v, want %v", trusted, c.Trusted)
		}
	}
	p := kvhints.Policy{Trusted: trusted, Limits: kvhints.Limits{MaxDepth: c.MaxDepth}, MaxBodyBytes: c.MaxBodyBytes}
	if p.MaxBodyBytes == 0 {
		p.MaxBodyBytes = vectors.DefaultMaxBodyBytes
	}
	if c.RouterOnly != nil {
		cfg, err := filterspec.ParseConfig(append(append([]byte(`{"router_only":`), c.RouterOnly...), '}'))
		if err != nil {
			return vectors.Result{}, err
		}
		p.RouterOnly = cfg.RouterOnly.Body(c.Detect)
	}
	var out []byte
	var res kvhints.Result
	if status, msg := kvhints.CheckContentEncoding(c.Request.Headers["content-encoding"]); status != 0 {
		res = kvhints.Result{Outcome: kvhints.OutcomeRejected, Status: status, Message: msg}
	} else {
		out, res = rb.r.Rewrite(c.Request.Body, p)
	}
	r := vectors.Result{Outcome: res.Outcome.String(), Reason: res.Reason.String()}
	if res.Outcome == kvhints.OutcomeRejected {
		if out != nil {
			return r, fmt.Errorf("rejected with %d but returned %d bytes to forward", res.Status, len(out))
		}
		r.Status = res.Status
		return r, nil
	}
	r.Forwarded, r.Body = true, bytes.Clone(out) // the Rewriter reuses its buffer
	if res.Snapshot != nil {
		r.CanonicalHint = string(res.Snapshot.Bytes())
	}
	return r, nil
}

// TestVectors runs every shared conformance case against the rulebook
// itself; the hosts run the same cases through the same kit. A case with a
// sender is decided by its trusted_senders rules first.
func TestVectors(t *testing.T) {
	vectors.Run(t, &rulebook{}, vectors.Skip("gRPC requests are decided by the filter, from the content type and configuration",
		func(c *vectors.Case) bool { return c.Group == "grpc" }),
		vectors.Skip("router-only headers are the filter's: the rulebook reads a body",
			(*vectors.Case).RouterOnlyHeader))
}
