package host_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/host"
	"github.com/kvgate/kvgate/tests/pki"
	"github.com/kvgate/kvgate/tests/vectors"
	"github.com/kvgate/kvgate/wasm"
)

// hostRunner runs conformance cases through the compiled module on this
// package's wazero host, in process: one Host per plugin configuration,
// the body in one piece with a Content-Length, as the sidecar hands it
// over, and a case's sender as the TLS state and remote address of its
// connection. The counters are read from the Prometheus collector the Host
// registers.
type hostRunner struct {
	cache string
	h     *host.Host
	// last is the decision of the last request sent.
	last *host.Decision
	reg  *prometheus.Registry
	// ca issues the client certificates that carry a case's SANs.
	ca *pki.CA
	// replaced: every instance is retired after its request, so each
	// request after a configuration's first runs in a replacement.
	replaced bool
	// configs, sent and retired count configurations, requests and
	// instances retired, over the configurations closed so far.
	configs, sent int
	retired       float64
}

func (*hostRunner) Observes() vectors.Observes {
	return vectors.ObservesReply | vectors.ObservesHeaders
}

func (r *hostRunner) Configure(t testing.TB, conf string) {
	if r.cache == "" {
		r.cache = t.TempDir()
		t.Cleanup(r.close)
	}
	r.close()
	r.reg = prometheus.NewRegistry()
	opts := host.Options{
		PoolSize: 1, PluginConfig: []byte(conf), CacheDir: r.cache, Registerer: r.reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if r.replaced {
		opts.RetireBytes = 1
	}
	r.configs++
	h, err := host.New(context.Background(), wasm.Module, opts)
	if err != nil {
		t.Fatalf("configuration %s: %v", conf, err)
	}
	r.h = h
}

func (r *hostRunner) close() {
	if r.h != nil {
		r.retired += gathered(r.reg, "kvgate_wasm_instances_replaced_total", "grown")
		_ = r.h.Close(context.Background())
		r.h = nil
	}
}

func (r *hostRunner) Send(c *vectors.Case) (vectors.Result, error) {
	r.sent++
	hdr := http.Header{}
	for k, v := range c.Request.Headers {
		hdr.Set(k, v)
	}
	hdr.Set("Content-Length", strconv.Itoa(len(c.Request.Body)))
	req := &host.Request{
		Method: c.Request.Method, Path: c.Request.Path, Authority: "worker", Protocol: "HTTP/1.1",
		Header: hdr, Body: c.Request.Body, RemoteAddr: "127.0.0.1:40000", LocalAddr: "127.0.0.1:8080",
	}
	if c.Sender != nil {
		if err := r.sender(req, c.Sender); err != nil {
			return vectors.Result{}, err
		}
	}
	d, err := r.h.Filter(context.Background(), req)
	r.last = d
	if err != nil {
		return vectors.Result{}, err
	}
	if d.Local != nil {
		return vectors.Result{Status: d.Local.Status, Body: d.Local.Body, ContentType: d.Local.Header.Get("Content-Type")}, nil
	}
	if cl := d.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(d.Body)) {
		return vectors.Result{}, fmt.Errorf("content-length %s forwarded with a body of %d bytes", cl, len(d.Body))
	}
	hs := map[string][]string{}
	for k, v := range d.Header {
		hs[strings.ToLower(k)] = v
	}
	return vectors.Result{Forwarded: true, Body: d.Body, Headers: hs}, nil
}

// sender gives req the connection a case's sender has: its source
// address, and a TLS state with a verified client certificate carrying the
// case's SANs (mtls true) or without one (mtls false). It then checks that
// the host answers each of the four properties exactly as the case says.
func (r *hostRunner) sender(req *host.Request, s *vectors.Sender) error {
	req.RemoteAddr = ""
	if s.SourceAddress != nil {
		req.RemoteAddr = *s.SourceAddress
	}
	req.TLS = &tls.ConnectionState{HandshakeComplete: true}
	if s.MTLS != nil && *s.MTLS {
		if r.ca == nil {
			ca, err := pki.NewCA("vectors CA")
			if err != nil {
				return err
			}
			r.ca = ca
		}
		l, err := r.ca.ClientFor(s.URISAN, s.DNSSAN)
		if err != nil {
			return err
		}
		leaf := l.TLS.Leaf
		req.TLS.PeerCertificates = []*x509.Certificate{leaf}
		req.TLS.VerifiedChains = [][]*x509.Certificate{{leaf}}
	}
	for _, name := range vectors.SenderProperties {
		got, gotOK := host.RequestProperty(req, name)
		want, wantOK := s.Property(name)
		if gotOK != wantOK || !bytes.Equal(got, want) {
			return fmt.Errorf("the host would answer %s = %q (present %v), the case says %q (present %v)", name, got, gotOK, want, wantOK)
		}
	}
	return nil
}

func (r *hostRunner) Counters(c *vectors.Case) (vectors.Counters, error) {
	families, err := r.reg.Gather()
	if err != nil {
		return vectors.Counters{}, err
	}
	values := map[vectors.Series]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			s := vectors.Series{Family: f.GetName()}
			if ls := m.GetLabel(); len(ls) == 1 {
				s.Label, s.Value = ls[0].GetName(), ls[0].GetValue()
			}
			values[s] += m.GetCounter().GetValue()
		}
	}
	return vectors.ReadCounters(c, func(s vectors.Series) (float64, error) {
		v, ok := values[s]
		if !ok {
			return 0, fmt.Errorf("not gathered")
		}
		return v, nil
	})
}

// TestVectors runs every conformance case through the compiled module on
// the wazero host.
func TestVectors(t *testing.T) {
	// A sender's properties come from a TLS state and a remote address, as
	// the sidecar hands them over.
	vectors.Run(t, &hostRunner{}, append(vectors.SkipNotFromTLS(), vectors.BothModes())...)
}

// TestVectorsReplaced runs every conformance case but each configuration's
// first in an instance that replaced a retired one: a replacement must
// answer and count exactly as the pool's first instance.
func TestVectorsReplaced(t *testing.T) {
	r := &hostRunner{replaced: true}
	vectors.Run(t, r, vectors.SkipNotFromTLS()...)
	r.close()
	if int(r.retired) != r.sent {
		t.Fatalf("%d requests in %d configurations, %v instances retired", r.sent, r.configs, r.retired)
	}
}

// gathered is the value of the series of family whose one label has value.
func gathered(reg *prometheus.Registry, family, value string) float64 {
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == family && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
