package kvhints_test

import (
	"bytes"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/tests/vectors"
)

// defaultMaxBody is the hosts' default body limit, which the vectors assume.
const defaultMaxBody = 4 << 20

// TestVectors runs every shared conformance case against the rulebook
// itself; the hosts run the same files. A case with a sender is decided by
// its trusted_senders rules first.
func TestVectors(t *testing.T) {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 150 {
		t.Fatalf("only %d vectors", len(cases))
	}
	var r kvhints.Rewriter
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			trusted := c.Trusted
			if c.Sender != nil {
				// The rules decide from the sender's properties.
				s, _, err := kvhints.ParseSenders(c.TrustedSenders)
				if err != nil {
					t.Fatal(err)
				}
				var sp kvhints.SenderProps
				sp.MTLS, _ = c.Sender.Property("connection.mtls")
				sp.URISAN, _ = c.Sender.Property("connection.uri_san_peer_certificate")
				sp.DNSSAN, _ = c.Sender.Property("connection.dns_san_peer_certificate")
				sp.SourceAddress, _ = c.Sender.Property("source.address")
				if trusted = s.Match(&sp) >= 0; trusted != c.Trusted {
					t.Fatalf("sender trusted = %v, want %v", trusted, c.Trusted)
				}
			}
			p := kvhints.Policy{Trusted: trusted, Limits: kvhints.Limits{MaxDepth: c.MaxDepth}, MaxBodyBytes: c.MaxBodyBytes}
			if p.MaxBodyBytes == 0 {
				p.MaxBodyBytes = defaultMaxBody
			}
			var out []byte
			var res kvhints.Result
			if status, msg := kvhints.CheckContentEncoding(c.Request.Headers["content-encoding"]); status != 0 {
				res = kvhints.Result{Outcome: kvhints.OutcomeRejected, Status: status, Message: msg}
			} else {
				out, res = r.Rewrite(c.Request.Body, p)
			}
			e := c.Expect
			if res.Outcome.String() != e.Outcome || res.Reason.String() != e.Reason {
				t.Fatalf("outcome %s/%q, want %s/%q (%s)", res.Outcome, res.Reason, e.Outcome, e.Reason, res.Message)
			}
			if e.Action == "reject" {
				if res.Status != e.Status || out != nil {
					t.Fatalf("status %d, want %d", res.Status, e.Status)
				}
				return
			}
			if e.ForwardedBody != nil && !bytes.Equal(out, e.ForwardedBody) {
				t.Fatalf("forwarded\n%.400q\nwant\n%.400q", out, e.ForwardedBody)
			}
			if e.Unchanged != bytes.Equal(out, c.Request.Body) {
				t.Fatalf("unchanged = %v, want %v", !e.Unchanged, e.Unchanged)
			}
			if e.CanonicalHint != "" && (res.Snapshot == nil || string(res.Snapshot.Bytes()) != e.CanonicalHint) {
				t.Fatalf("snapshot %v, want %d canonical bytes", res.Snapshot, len(e.CanonicalHint))
			}
		})
	}
}
