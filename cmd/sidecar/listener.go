package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The API server's bounds on what a client can hold before its request is
// read.
const (
	// headerTimeout bounds the wait for a request's headers (lowered to
	// -idle-timeout when that is shorter). A real client sends its
	// headers in one write; a client that trickles them holds a
	// connection, one of -max-connections, for this long at most.
	headerTimeout = 10 * time.Second
	// maxHeaderBytes bounds the request line and headers: Envoy's default
	// (max_request_headers_kb 60), so that both hosts take the same
	// requests. Over it, net/http answers 431 and closes the connection.
	maxHeaderBytes = 60 << 10
	// maxIdleUpstream is the number of idle connections to the worker the
	// transport keeps.
	maxIdleUpstream = 1024
	// fdReserve is what -max-connections' default leaves of the
	// descriptor limit for everything but client connections and their
	// requests to the worker: listeners, admin clients, the module cache,
	// the idle connections to the worker.
	fdReserve = maxIdleUpstream + 128
)

// defaultMaxConnections sizes -max-connections for the machine: each
// client connection holds one descriptor and, while its request is
// forwarded, one more to the worker, so the default is half the process's
// descriptor limit (RLIMIT_NOFILE, which the Go runtime raises to the hard
// limit at start-up) less fdReserve. At that many connections the sidecar
// runs out of connection slots, which it handles by waiting, before it runs
// out of descriptors, which would fail accepts and requests to the worker
// alike. Where the limit cannot be read the default is 4096.
func defaultMaxConnections() int {
	limit, ok := fileLimit()
	if !ok {
		return 4096
	}
	if limit > 1<<30 {
		limit = 1 << 30
	}
	return max(64, (int(limit)-fdReserve)/2)
}

// apiServer is the http.Server for the proxied API.
func (s *server) apiServer(cfg *config) *http.Server {
	ht := headerTimeout
	if cfg.IdleTimeout > 0 && cfg.IdleTimeout < ht {
		ht = cfg.IdleTimeout
	}
	// HTTP/1 only, whatever net/http's defaults become: an HTTP/2
	// preface is refused by the handler (refuseHTTP2).
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Protocols: &protocols,
		Handler:   s,
		// Bodies are bounded by -idle-timeout in read (a server-wide
		// ReadTimeout would also cut off responses streamed for longer).
		ReadHeaderTimeout: ht,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          newNetLogger(s.log, "server"),
	}
	return srv
}

// limitListener accepts at most cap(sem) connections at a time. At the
// cap, Accept waits for one of them to close, and new clients wait in the
// kernel's accept queue: a client is served late rather than refused, and
// connections that stall (a body or headers that never come) are closed by
// -idle-timeout and headerTimeout, which frees their slots.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	open      atomic.Int64
}

// limitConnections caps ln at n open connections and reports the number
// open as kvgate_sidecar_connections.
func (s *server) limitConnections(ln net.Listener, n int) net.Listener {
	l := &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvgate_sidecar_connections",
		Help: "Client connections open on the API listener (at most -max-connections).",
	}, func() float64 { return float64(l.open.Load()) }))
	return l
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.open.Add(1)
	la := c.LocalAddr()
	return &limitConn{Conn: c, l: l, local: &localAddr{Addr: la, s: la.String()}}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed (once, however often it is
// closed, by the server or by a handler that took it over).
type limitConn struct {
	net.Conn
	l     *limitListener
	once  sync.Once
	local *localAddr
}

// localAddr is a connection's local address, its text made once, when the
// connection is accepted. net/http gives it to every request on the
// connection (http.LocalAddrContextKey, through the TLS connection's
// LocalAddr too), and each request's exchange takes its text (newExchange)
// without formatting it again.
type localAddr struct {
	net.Addr
	s string
}

func (a *localAddr) String() string { return a.s }

// LocalAddr is the connection's local address, formatted once.
func (c *limitConn) LocalAddr() net.Addr { return c.local }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.sem
	})
	return err
}

// CloseWrite half-closes a TCP connection: net/http does so before closing
// a connection whose client may still be sending, so that the client reads
// the answer before the connection is reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
