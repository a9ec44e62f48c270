package pki

import (
	"crypto/x509"
	"testing"
)

// Issued certificates verify against their CA only, for their purpose,
// and carry the SANs asked for in order.
func TestIssue(t *testing.T) {
	ca, err := NewCA("test ca")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCA("other ca")
	srv, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Client([]string{"spiffe://td/ns/a/sa/b", "spiffe://td/ns/a/sa/c"}, []string{"b.a.svc"})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := x509.ParseCertificate(srv.TLS.Certificate[0])
	if _, err := sc.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("server: %v", err)
	}
	cc, _ := x509.ParseCertificate(cli.TLS.Certificate[0])
	opts := x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := cc.Verify(opts); err != nil {
		t.Errorf("client: %v", err)
	}
	opts.Roots = other.Pool()
	if _, err := cc.Verify(opts); err == nil {
		t.Error("client verifies against another CA")
	}
	if len(cc.URIs) != 2 || cc.URIs[0].String() != "spiffe://td/ns/a/sa/b" || len(cc.DNSNames) != 1 || cc.DNSNames[0] != "b.a.svc" {
		t.Errorf("SANs %v %v", cc.URIs, cc.DNSNames)
	}
}
