package host

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
)

// The sender's connection properties (see the package documentation):
// connection.mtls and the first SANs of a verified client certificate.

// verifiedPeer returns the client's certificate when the TLS handshake
// verified its chain, else nil.
func verifiedPeer(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0]
}

func mtlsProp(cs *tls.ConnectionState) []byte {
	if verifiedPeer(cs) != nil {
		return []byte{1}
	}
	return []byte{0}
}

// SAN GeneralName tags (RFC 5280, 4.2.1.6), context-specific and primitive.
const (
	sanDNS = 2
	sanURI = 6
)

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// sanProp returns the first SAN of the given tag of the verified client
// certificate, as the bytes the certificate holds: Envoy hands over the
// raw string, while crypto/x509's URIs are parsed and re-encoded (a
// scheme is lower-cased, for one), which could let a certificate match a
// rule here that Envoy would not match.
func sanProp(cs *tls.ConnectionState, tag int) ([]byte, bool) {
	c := verifiedPeer(cs)
	if c == nil {
		return nil, false
	}
	return firstSAN(c, tag)
}

// firstSAN returns the contents of the first GeneralName with the given
// context-specific tag in c's subjectAltName extension.
func firstSAN(c *x509.Certificate, tag int) ([]byte, bool) {
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var names asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &names); err != nil || len(rest) > 0 ||
			names.Class != asn1.ClassUniversal || names.Tag != asn1.TagSequence || !names.IsCompound {
			return nil, false
		}
		for b := names.Bytes; len(b) > 0; {
			var n asn1.RawValue
			rest, err := asn1.Unmarshal(b, &n)
			if err != nil {
				return nil, false
			}
			if n.Class == asn1.ClassContextSpecific && n.Tag == tag && !n.IsCompound {
				return n.Bytes, true
			}
			b = rest
		}
		return nil, false
	}
	return nil, false
}
