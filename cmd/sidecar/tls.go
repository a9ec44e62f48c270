package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TLS on the API listener (-tls-cert, -tls-key, -client-ca).
//
// The listener presents -tls-cert and, with -client-ca, asks every client
// for a certificate and verifies the one it presents against that CA
// (tls.VerifyClientCertIfGiven): a client without a certificate is served,
// as an untrusted sender; one whose certificate does not verify fails the
// handshake. Only a verified chain reaches the filter as an identity
// (host.Request.TLS: connection.mtls, the first URI and DNS SANs).
//
// The three files are re-read when they change, so that certificates
// rotate without a restart: the first handshake at least a second after
// the last look reads them again and, when their contents differ, builds
// the new configuration from them; new handshakes get it, established
// connections keep what they verified. A set of files that does not load
// (a key that does not match the certificate, say, while a rotation is
// half written) keeps the previous configuration, with one warning per
// such set. Session resumption is off, so that every connection is
// verified against the CA of the moment, never vouched for by a ticket
// from before a rotation.

// tlsReloadEvery is the shortest time between two looks at the files.
const tlsReloadEvery = time.Second

// tlsFiles is the API listener's TLS configuration and where it comes from.
type tlsFiles struct {
	cert, key, ca string // paths; ca is "" without -client-ca

	cur     atomic.Pointer[tlsState]
	checked atomic.Int64 // when the files were last read, UnixNano
	mu      sync.Mutex   // held by the one reload under way
	bad     string       // the last set of files warned about
	log     *slog.Logger
	now     func() time.Time
}

// tlsState is one loaded set of files.
type tlsState struct {
	sum  [sha256.Size]byte // of the files' contents
	cfg  *tls.Config       // what a handshake gets
	leaf *x509.Certificate
	cas  int // certificates in -client-ca
}

// loadTLS checks the TLS flags and loads their files: a file that cannot
// be used is an error naming its flag. It returns nil without -tls-cert
// and -tls-key.
func loadTLS(cert, key, ca string) (*tlsFiles, error) {
	switch {
	case cert == "" && key == "" && ca != "":
		return nil, errors.New("-client-ca: needs -tls-cert and -tls-key (client certificates are verified on a TLS listener)")
	case cert == "" && key == "":
		return nil, nil
	case cert == "":
		return nil, errors.New("-tls-key: needs -tls-cert")
	case key == "":
		return nil, errors.New("-tls-cert: needs -tls-key")
	}
	f := &tlsFiles{cert: cert, key: key, ca: ca, now: time.Now, log: slog.New(slog.DiscardHandler)}
	st, _, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cur.Store(st)
	f.checked.Store(f.now().UnixNano())
	return f, nil
}

// read reads the three files and builds a state from them; the current
// one when their contents are the same. sum is that of the contents (zero
// when a file cannot be read).
func (f *tlsFiles) read() (st *tlsState, sum [sha256.Size]byte, err error) {
	certPEM, err := os.ReadFile(f.cert)
	if err != nil {
		return nil, sum, fmt.Errorf("-tls-cert: %w", err)
	}
	keyPEM, err := os.ReadFile(f.key)
	if err != nil {
		return nil, sum, fmt.Errorf("-tls-key: %w", err)
	}
	var caPEM []byte
	if f.ca != "" {
		if caPEM, err = os.ReadFile(f.ca); err != nil {
			return nil, sum, fmt.Errorf("-client-ca: %w", err)
		}
	}
	h := sha256.New()
	for _, b := range [][]byte{certPEM, keyPEM, caPEM} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	h.Sum(sum[:0])
	if cur := f.cur.Load(); cur != nil && cur.sum == sum {
		return cur, sum, nil
	}

	certs, err := pemCertificates(certPEM)
	if err != nil {
		return nil, sum, fmt.Errorf("-tls-cert %s: %v", f.cert, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, sum, fmt.Errorf("-tls-key %s: %v (the key of -tls-cert %s)", f.key, err, f.cert)
	}
	st = &tlsState{sum: sum}
	st.leaf = certs[0]
	st.cfg = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
		Certificates: []tls.Certificate{pair},
		// Every connection is verified against the CA files of the
		// moment (see above).
		SessionTicketsDisabled: true,
	}
	if f.ca != "" {
		cas, err := pemCertificates(caPEM)
		if err != nil {
			return nil, sum, fmt.Errorf("-client-ca %s: %v", f.ca, err)
		}
		pool := x509.NewCertPool()
		for _, c := range cas {
			pool.AddCert(c)
		}
		st.cfg.ClientCAs, st.cfg.ClientAuth, st.cas = pool, tls.VerifyClientCertIfGiven, len(cas)
	}
	return st, sum, nil
}

// pemCertificates parses a PEM file that holds certificates and nothing
// else: at least one, each one parsed.
func pemCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", n, err)
		}
		out = append(out, c)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return nil, errors.New("data after the last PEM block, or no PEM at all")
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return out, nil
}

// current returns the configuration for a new handshake, reading the
// files again when they were last read at least tlsReloadEvery ago. A
// handshake never waits for another's reload.
func (f *tlsFiles) current() *tlsState {
	cur := f.cur.Load()
	now := f.now()
	if now.UnixNano()-f.checked.Load() < int64(tlsReloadEvery) || !f.mu.TryLock() {
		return cur
	}
	defer f.mu.Unlock()
	if now.UnixNano()-f.checked.Load() < int64(tlsReloadEvery) {
		return f.cur.Load()
	}
	f.checked.Store(now.UnixNano())
	st, sum, err := f.read()
	switch {
	case err != nil:
		if bad := fmt.Sprintf("%x %v", sum, err); bad != f.bad {
			f.bad = bad
			f.log.Warn("TLS files changed but do not load; still serving the previous certificate", "err", err.Error(),
				"serving_not_after", cur.leaf.NotAfter)
		}
		return cur
	case st == cur:
		f.bad = ""
		return cur
	}
	f.bad = ""
	f.cur.Store(st)
	f.log.Info("TLS files reloaded", st.attrs()...)
	return st
}

func (st *tlsState) attrs() []any {
	a := []any{"cert_subject", st.leaf.Subject.String(), "cert_serial", st.leaf.SerialNumber.Text(16),
		"cert_not_after", st.leaf.NotAfter}
	if st.cas > 0 {
		a = append(a, "client_ca_certificates", st.cas)
	}
	return a
}

// listener serves TLS on ln with the current files, logging to log.
func (f *tlsFiles) listener(ln net.Listener, log *slog.Logger) net.Listener {
	f.log = log
	st := f.cur.Load()
	mode := "not requested (every client is an untrusted sender unless a source_cidr rule matches)"
	if f.ca != "" {
		mode = "verified when presented; a client without one is served as an untrusted sender"
	}
	log.Info("serving TLS on -listen", append(st.attrs(), "client_certificates", mode)...)
	if now := f.now(); now.After(st.leaf.NotAfter) || now.Before(st.leaf.NotBefore) {
		log.Warn("the -tls-cert certificate is not valid now", "not_before", st.leaf.NotBefore, "not_after", st.leaf.NotAfter)
	}
	return tls.NewListener(ln, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.current().cfg, nil
		},
	})
}
