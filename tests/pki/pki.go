// Package pki makes throwaway certificates for tests of trusted senders: a
// certificate authority, a server certificate for a TLS listener, and
// client certificates with the URI (SPIFFE) and DNS SANs that the hosts
// read as connection.uri_san_peer_certificate and
// connection.dns_san_peer_certificate. Keys are ECDSA P-256; everything is
// made fresh in memory with crypto/x509 and valid for a day.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA is a certificate authority.
type CA struct {
	// PEM is the CA certificate, PEM-encoded.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	mu      sync.Mutex
	clients map[[2]string]*Leaf // ClientFor's certificates by URI and DNS SAN
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	// CertPEM and KeyPEM are the certificate and its PKCS #8 key.
	CertPEM, KeyPEM []byte
	// TLS is the pair for a crypto/tls configuration.
	TLS tls.Certificate
}

// NewCA makes a self-signed CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Server issues a server certificate for hosts (IP addresses or DNS names).
func (ca *CA) Server(hosts ...string) (*Leaf, error) {
	tmpl := template(hosts[0])
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return ca.issue(tmpl)
}

// Client issues a client certificate with the given URI SANs and DNS SANs,
// in that order (hosts read only the first of each kind).
func (ca *CA) Client(uris, dnsNames []string) (*Leaf, error) {
	tmpl := template("client")
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			return nil, err
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	tmpl.DNSNames = dnsNames
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(tmpl)
}

// ClientFor returns a client certificate with at most one URI SAN and one
// DNS SAN (nil for none), issued on the first call for that pair and the
// same one after: conformance cases name few senders, many times.
func (ca *CA) ClientFor(uri, dnsName *string) (*Leaf, error) {
	var uris, dns []string
	var key [2]string
	if uri != nil {
		uris, key[0] = []string{*uri}, *uri
	}
	if dnsName != nil {
		dns, key[1] = []string{*dnsName}, *dnsName
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if l := ca.clients[key]; l != nil {
		return l, nil
	}
	l, err := ca.Client(uris, dns)
	if err != nil {
		return nil, err
	}
	if ca.clients == nil {
		ca.clients = map[[2]string]*Leaf{}
	}
	ca.clients[key] = l
	return l, nil
}

func (ca *CA) issue(tmpl *x509.Certificate) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// Write writes the certificate and key to dir/name.crt and dir/name.key
// and returns their paths.
func (l *Leaf) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err = os.WriteFile(certFile, l.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err = os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Write writes the CA certificate to dir/name.crt and returns its path.
func (ca *CA) Write(dir, name string) (string, error) {
	p := filepath.Join(dir, name+".crt")
	return p, os.WriteFile(p, ca.PEM, 0o644)
}

// ListenerFiles are the files of a TLS listener that verifies clients.
type ListenerFiles struct {
	Cert, Key string // the server certificate and its key
	ClientCA  string // the CA client certificates must chain to
}

// WriteListener issues a server certificate for hosts and writes it, its
// key and the CA (as the listener's client CA) to dir: server.crt,
// server.key, client-ca.crt.
func (ca *CA) WriteListener(dir string, hosts ...string) (*ListenerFiles, error) {
	srv, err := ca.Server(hosts...)
	if err != nil {
		return nil, err
	}
	var f ListenerFiles
	if f.Cert, f.Key, err = srv.Write(dir, "server"); err != nil {
		return nil, err
	}
	if f.ClientCA, err = ca.Write(dir, "client-ca"); err != nil {
		return nil, err
	}
	return &f, nil
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"kvgate test"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
}
