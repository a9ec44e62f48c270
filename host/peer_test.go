package host

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"

	"github.com/kvgate/kvgate/tests/pki"
)

// verified is the TLS state of a handshake that verified cert's chain.
func verified(cert *x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{cert},
		VerifiedChains: [][]*x509.Certificate{{cert}}}
}

// certWithSANs makes a self-signed certificate whose subjectAltName
// extension holds exactly names, written as given (tag 2 DNS, 6 URI).
func certWithSANs(t *testing.T, names ...asn1.RawValue) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if len(names) > 0 {
		v, err := asn1.Marshal(names)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = []pkix.Extension{{Id: oidSubjectAltName, Value: v}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func san(tag int, v string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: tag, Bytes: []byte(v)}
}

// The four sender properties, as Envoy names and encodes them, from the
// TLS state and the remote address the caller gives.
func TestSenderProperties(t *testing.T) {
	ca, err := pki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(uris, dns []string) *x509.Certificate {
		l, err := ca.Client(uris, dns)
		if err != nil {
			t.Fatal(err)
		}
		return l.TLS.Leaf
	}
	router := leaf([]string{"spiffe://cluster.local/ns/llm/sa/router", "spiffe://cluster.local/ns/llm/sa/other"},
		[]string{"router.llm.svc", "other.llm.svc"})
	// Raw bytes, not crypto/x509's re-encoding: its URL lower-cases the
	// scheme, so a certificate naming SPIFFE://... would otherwise match
	// a rule for spiffe://... here and not in Envoy.
	upper := certWithSANs(t, san(sanDNS, "router.llm.svc"), san(sanURI, "SPIFFE://cluster.local/ns/llm/sa/router"))
	if got := upper.URIs[0].String(); got != "spiffe://cluster.local/ns/llm/sa/router" {
		t.Logf("crypto/x509 now gives the URI as written (%s): the raw read is still right", got)
	}
	const absent = "<absent>"
	for _, c := range []struct {
		name          string
		tls           *tls.ConnectionState
		remote        string
		mtls          string
		uri, dns, src string
	}{
		{"plain text", nil, "10.0.0.1:5000", "\x00", absent, absent, "10.0.0.1:5000"},
		{"TLS, no client certificate", &tls.ConnectionState{HandshakeComplete: true}, "[2001:db8::1]:443", "\x00", absent, absent, "[2001:db8::1]:443"},
		{"verified, first of each kind", verified(router), "127.0.0.1:1", "\x01", "spiffe://cluster.local/ns/llm/sa/router", "router.llm.svc", "127.0.0.1:1"},
		// A certificate that was presented but whose chain nobody
		// verified (tls.RequestClientCert) is no identity.
		{"presented, not verified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{router}}, "127.0.0.1:1", "\x00", absent, absent, "127.0.0.1:1"},
		{"verified, no SANs", verified(certWithSANs(t)), "127.0.0.1:1", "\x01", absent, absent, "127.0.0.1:1"},
		{"verified, DNS SAN only", verified(leaf(nil, []string{"router.llm.svc"})), "127.0.0.1:1", "\x01", absent, "router.llm.svc", "127.0.0.1:1"},
		{"verified, URI SAN only", verified(leaf([]string{"spiffe://a/b"}, nil)), "127.0.0.1:1", "\x01", "spiffe://a/b", absent, "127.0.0.1:1"},
		{"raw URI bytes", verified(upper), "127.0.0.1:1", "\x01", "SPIFFE://cluster.local/ns/llm/sa/router", "router.llm.svc", "127.0.0.1:1"},
		{"other names first", verified(certWithSANs(t, san(1, "a@b.c"), san(7, "\x7f\x00\x00\x01"), san(sanURI, "spiffe://x/y"), san(sanDNS, "x.y"))),
			"127.0.0.1:1", "\x01", "spiffe://x/y", "x.y", "127.0.0.1:1"},
		{"no remote address", nil, "", "\x00", absent, absent, absent},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Request{TLS: c.tls, RemoteAddr: c.remote}
			for key, want := range map[string]string{"connection.mtls": c.mtls, "connection.uri_san_peer_certificate": c.uri,
				"connection.dns_san_peer_certificate": c.dns, "source.address": c.src} {
				got, ok := (*requestProps)(r).Property(key)
				if !ok {
					got = []byte(absent)
				}
				if string(got) != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
		})
	}
}

// firstSAN reads the subjectAltName extension of a certificate that
// crypto/x509 parsed, but walks it itself: whatever the bytes, it must
// not panic, and what it returns lies inside the extension.
func FuzzFirstSAN(f *testing.F) {
	for _, names := range [][]asn1.RawValue{
		{san(sanURI, "spiffe://a/b"), san(sanDNS, "a.b")},
		{san(1, "x"), {Class: asn1.ClassContextSpecific, Tag: 4, IsCompound: true, Bytes: []byte{0x30, 0}}, san(sanDNS, "d")},
		nil,
	} {
		v, _ := asn1.Marshal(names)
		f.Add(v)
	}
	f.Add([]byte{0x30, 0x80})
	f.Add([]byte{0x30, 0x03, 0x86, 0x05, 'a'})
	f.Fuzz(func(t *testing.T, ext []byte) {
		c := &x509.Certificate{Extensions: []pkix.Extension{{Id: oidSubjectAltName, Value: ext}}}
		for _, tag := range []int{sanURI, sanDNS} {
			if v, ok := firstSAN(c, tag); ok && !bytes.Contains(ext, v) {
				t.Fatalf("tag %d: %q is not in the extension", tag, v)
			}
		}
	})
}
