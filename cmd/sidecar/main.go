// Command sidecar is kvgate without Envoy: a reverse proxy that runs the
// kvgate proxy-wasm filter (wasm/kvgate.wasm, or -filter) on wazero for
// every request in front of an OpenAI-compatible worker (trtllm-serve,
// vLLM, SGLang).
//
//	sidecar -listen 127.0.0.1:8080 -upstream http://127.0.0.1:8000
//
// -upstream is required; "-upstream echo" starts a built-in echo worker on
// loopback that answers with what it received. /metrics, /healthz and
// /readyz are served on -admin. SIGTERM turns /readyz to 503 at once, keeps
// serving for -shutdown-delay (so that load balancers stop sending), then
// drains requests in flight for up to -drain-timeout and exits.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/version"
	"github.com/kvgate/kvgate/wasm"
)

// config is the sidecar's configuration after flag parsing: the
// command-line values as given, checked. The filter configuration in force
// is not here but in the server's policy (reload.go), made from filterDoc
// and policyFlags at start-up and from the file's new content at every
// reload.
type config struct {
	Listen, Upstream, Admin string
	FilterPath              string
	Module                  []byte
	PoolSize                int
	CacheDir                string
	DrainTimeout            time.Duration
	IdleTimeout             time.Duration
	Worker                  workerOptions // the connections to the worker (transport.go)
	MaxConnections          int
	LogFlush                time.Duration

	// NoDefaultCache says why there is no default cache directory, when
	// -cache-dir was not given and the default could not be found.
	NoDefaultCache error
	ShutdownDelay  time.Duration
	LogLevel       slog.Level
	CheckConfig    bool      // -check-config: validate, print OK, exit
	TLS            *tlsFiles // nil: plain text on -listen (tls.go)
	// FilterFile is the file of -filter-config @FILE, watched and read
	// again on SIGHUP (reload.go); "" for a configuration on the command
	// line. filterDoc is the document start-up applies: -filter-config
	// itself, or the file's content as read by parseFlags. policyFlags are
	// the flags laid over it and over every reloaded one.
	FilterFile  string
	filterDoc   []byte
	policyFlags policyFlags
}

// policyOf makes the policy of the configuration document doc, with the
// flags laid over it: filterDoc's at start-up, the file's new content at a
// reload.
func (c *config) policyOf(doc []byte) (*policy, error) {
	name := "-filter-config"
	if c.FilterFile != "" {
		name += " @" + c.FilterFile
	}
	return policyFrom(doc, name, c.policyFlags)
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, errShowVersion) {
		fmt.Println(version.Get().Line("sidecar"))
		os.Exit(0)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecar:", err)
		os.Exit(2)
	}
	if cfg.CheckConfig {
		fmt.Println("sidecar: configuration OK")
		os.Exit(0)
	}
	sink := newLogSink(os.Stderr, cfg.LogFlush)
	log := slog.New(flushOnWarn{slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: cfg.LogLevel}), sink})
	routeStdLog(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err = run(ctx, cfg, log, nil)
	stop()
	if err != nil {
		log.Error("sidecar stopped", "err", err)
		sink.Close()
		os.Exit(1)
	}
	sink.Close()
}

// parseFlags reads the command line (and TRTLLM_TRUST_KV_HINTS) into a
// config, loading the filter module and building its configuration.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address to serve the proxied API on")
	fs.StringVar(&cfg.Upstream, "upstream", "", "required: the worker's base URL (e.g. http://127.0.0.1:8000), or \"echo\" for a built-in worker on loopback that answers with what it received")
	fs.StringVar(&cfg.Admin, "admin", "127.0.0.1:9090", "address for /metrics, /healthz and /readyz")
	fs.StringVar(&cfg.FilterPath, "filter", "", "path to a proxy-wasm filter module; empty: the embedded kvgate.wasm")
	filterConfig := fs.String("filter-config", "", "filter configuration: JSON, or @file (e.g. {\"max_depth\":128,\"exclude_paths\":[\"/healthz\"]})")
	fs.BoolVar(&cfg.policyFlags.trust, "trust-kv-hints", false, "admit kv_hints from every client (also TRTLLM_TRUST_KV_HINTS=1; -trust-kv-hints=false wins over it); default: remove them, except from trusted_senders in -filter-config")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) to serve TLS on -listen with; re-read when it changes. Needs -tls-key")
	tlsKey := fs.String("tls-key", "", "PEM private key of -tls-cert")
	clientCA := fs.String("client-ca", "", "PEM CA certificates that verify client certificates on the TLS listener, when presented (a client without one is served as an untrusted sender); the identity trusted_senders rules match")
	fs.Int64Var(&cfg.policyFlags.maxBody, "max-body-bytes", filterspec.DefaultMaxBodyBytes, "largest request body accepted, 1 to "+strconv.Itoa(filterspec.MaxMaxBodyBytes)+"; overrides max_body_bytes in -filter-config. A body announced larger gets 413 from its headers, before any of it is read")
	fs.IntVar(&cfg.PoolSize, "pool-size", 0, "wasm filter instances (0: GOMAXPROCS)")
	defCache, noDefCache := defaultCacheDir()
	fs.StringVar(&cfg.CacheDir, "cache-dir", defCache, "on-disk cache of the compiled filter, kept across restarts; empty: in memory only. A directory that cannot be created or written is a warning, and the cache is kept in memory")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 0, "after SIGTERM, how long to keep serving new requests with /readyz answering 503, so that load balancers take the sidecar out first (in Kubernetes, e.g. 5s); then the drain")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "after SIGTERM (and -shutdown-delay), how long to wait for requests in flight")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "longest wait for more of a request body (then 408) or for the next request on a kept-alive connection (then it is closed); 0: no limit")
	fs.DurationVar(&cfg.Worker.IdleTimeout, "upstream-idle-timeout", defaultWorkerIdleTimeout, "close a connection to the worker after it has been idle this long; keep it below the worker's own keep-alive timeout (uvicorn's default, which vLLM, SGLang and trtllm-serve run with, is 5s), so that a request is never written on a connection the worker is closing")
	fs.DurationVar(&cfg.Worker.ConnectTimeout, "upstream-connect-timeout", defaultWorkerConnectTimeout, "longest wait to open a connection to the worker; one that cannot be opened is tried once more, then answered 502")
	fs.IntVar(&cfg.MaxConnections, "max-connections", defaultMaxConnections(), "most client connections open at once; more wait to be accepted; the default is half the open-file limit less a reserve")
	fs.TextVar(&cfg.LogLevel, "log-level", slog.LevelInfo, "lowest `level` logged: debug, info, warn or error. At debug the access log line of a discarded hint says where and why it is at fault (hint_detail), and the filter's debug lines are logged")
	showVersion := fs.Bool("version", false, "print the version, the source revision and the Go version, and exit")
	fs.BoolVar(&cfg.CheckConfig, "check-config", false, "check every flag and the filter configuration as a start would, print OK or the error, and exit (0, or 2 for an error) without binding or compiling anything")
	fs.DurationVar(&cfg.LogFlush, "log-flush", time.Second, "longest time an info line (such as an access log line) waits in the log buffer; warnings and errors are written at once; 0: write every line at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sidecar [flags]\n\nRuns the kvgate proxy-wasm filter on every request in front of an OpenAI-compatible worker.\n\n"+
			"Only the content of a -filter-config @FILE changes at run time: the file is watched (a change applies within 2s)\n"+
			"and read again on SIGHUP. Every flag, addresses and pool size included, is fixed at start-up.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *showVersion {
		return nil, errShowVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if !set["cache-dir"] && noDefCache != nil {
		cfg.NoDefaultCache = noDefCache
	}

	// Every flag is checked here, before the module is compiled, and every
	// error names the flag as the operator wrote it.
	switch cfg.Upstream {
	case "":
		return nil, errors.New(`-upstream: missing: give the worker's base URL (e.g. -upstream http://127.0.0.1:8000), or -upstream echo for the built-in echo worker`)
	case upstreamEcho:
	default:
		u, err := url.Parse(cfg.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-upstream %q: want an http:// or https:// base URL", cfg.Upstream)
		}
	}
	for _, a := range []struct{ flag, addr string }{{"-listen", cfg.Listen}, {"-admin", cfg.Admin}} {
		if err := checkAddr(a.addr); err != nil {
			return nil, fmt.Errorf("%s %q: %v", a.flag, a.addr, err)
		}
	}
	if err := checkDistinctPorts(cfg.Listen, cfg.Admin); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-idle-timeout", cfg.IdleTimeout}, {"-drain-timeout", cfg.DrainTimeout}, {"-shutdown-delay", cfg.ShutdownDelay}, {"-log-flush", cfg.LogFlush}} {
		if d.v < 0 {
			return nil, fmt.Errorf("%s %v: must be 0 or more", d.flag, d.v)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-upstream-idle-timeout", cfg.Worker.IdleTimeout}, {"-upstream-connect-timeout", cfg.Worker.ConnectTimeout}} {
		if d.v <= 0 {
			return nil, fmt.Errorf("%s %v: must be more than 0", d.flag, d.v)
		}
	}
	if cfg.PoolSize < 0 {
		return nil, fmt.Errorf("-pool-size %d: must be 0 or more", cfg.PoolSize)
	}
	if mb := cfg.policyFlags.maxBody; set["max-body-bytes"] && (mb < 1 || mb > filterspec.MaxMaxBodyBytes) {
		return nil, fmt.Errorf("-max-body-bytes %d: must be from 1 to %d (256 MiB)", mb, filterspec.MaxMaxBodyBytes)
	}
	if cfg.MaxConnections <= 0 {
		return nil, fmt.Errorf("-max-connections %d: must be positive", cfg.MaxConnections)
	}
	var err error
	if cfg.TLS, err = loadTLS(*tlsCert, *tlsKey, *clientCA); err != nil {
		return nil, err
	}
	if cfg.FilterPath != "" {
		b, err := os.ReadFile(cfg.FilterPath)
		if err != nil {
			return nil, fmt.Errorf("-filter: %v", err)
		}
		if !bytes.HasPrefix(b, []byte("\x00asm")) {
			return nil, fmt.Errorf("-filter %s: not a WebAssembly binary module", cfg.FilterPath)
		}
		cfg.Module = b
	} else {
		cfg.Module = wasm.Module
	}

	// The plugin configuration: -filter-config, read as the guest reads
	// it, with trust decided and -max-body-bytes laid over it, is checked
	// here as start-up will apply it (config.policyOf). A file is read
	// again when it changes (reload.go); the flags stay.
	cfg.policyFlags.trustSet, cfg.policyFlags.maxBodySet = set["trust-kv-hints"], set["max-body-bytes"]
	cfg.policyFlags.env = getenv("TRTLLM_TRUST_KV_HINTS")
	cfg.filterDoc = []byte(*filterConfig)
	if file, ok := strings.CutPrefix(*filterConfig, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-filter-config: %v", err)
		}
		cfg.FilterFile, cfg.filterDoc = file, b
	}
	if _, err := cfg.policyOf(cfg.filterDoc); err != nil {
		return nil, err
	}
	return cfg, nil
}

// upstreamEcho is the -upstream value that starts the built-in echo worker.
const upstreamEcho = "echo"

// errShowVersion is parseFlags' answer to -version: print the version
// (main does) and exit 0, whatever the other flags say.
var errShowVersion = errors.New("-version")

// checkAddr checks a listen address: host:port with a port from 0 to
// 65535 (or a service name). Whether it can be bound is found out by
// binding it, also before the module is compiled (run).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

// checkDistinctPorts refuses -admin on -listen's port when the two could
// be the same socket (the same host, or either on every address): the
// second bind would fail at start-up. Port 0 picks a free port each time.
func checkDistinctPorts(listen, admin string) error {
	lh, lp, _ := net.SplitHostPort(listen)
	ah, ap, _ := net.SplitHostPort(admin)
	l, _ := net.LookupPort("tcp", lp)
	a, _ := net.LookupPort("tcp", ap)
	if l == 0 || l != a {
		return nil
	}
	wildcard := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || (ip != nil && ip.IsUnspecified())
	}
	if lh == ah || wildcard(lh) || wildcard(ah) {
		return fmt.Errorf("-admin %q: the same port as -listen %q; give the admin endpoints a port of their own", admin, listen)
	}
	return nil
}

// listeners are the addresses a running sidecar serves on (for tests).
type listeners struct{ API, Admin, Upstream string }

// run serves until ctx is done, then drains and shuts down. The
// listeners are bound and the cache directory made before the module is
// compiled, so that an address in use or a directory that cannot be
// written fails at once, naming its flag; connections that arrive while
// the module compiles wait in the listen queue.
func run(ctx context.Context, cfg *config, log *slog.Logger, started chan<- listeners) error {
	apiLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", cfg.Listen, err)
	}
	defer apiLn.Close()
	adminLn, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		return fmt.Errorf("-admin %s: %w", cfg.Admin, err)
	}
	defer adminLn.Close()
	upstream := cfg.Upstream
	if upstream == upstreamEcho {
		echo, err := startEcho(log)
		if err != nil {
			return err
		}
		defer echo.Close()
		upstream = "http://" + echo.Addr
		log.Info("-upstream echo: using the built-in echo worker, which answers with what it received", "upstream", upstream)
	}
	// Start-up is the first reload: the document parseFlags checked is
	// made the policy the filter module is started with.
	first, err := cfg.policyOf(cfg.filterDoc)
	if err != nil {
		return err
	}
	logTrust(log, first)
	s, err := newServer(ctx, cfg, first, upstream, log)
	if err != nil {
		if cfg.FilterPath != "" {
			return fmt.Errorf("-filter %s: %w", cfg.FilterPath, err)
		}
		return err
	}
	defer s.close()

	apiLn = s.limitConnections(apiLn, cfg.MaxConnections)
	if cfg.TLS != nil {
		apiLn = cfg.TLS.listener(apiLn, log)
	}
	api := s.apiServer(cfg)
	admin := &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	// SIGHUP reads -filter-config again instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if cfg.FilterFile != "" {
		go s.watchConfig(wctx, cfg.filterDoc, hup)
	} else {
		go func() {
			for {
				select {
				case <-wctx.Done():
					return
				case <-hup:
					log.Warn("SIGHUP: -filter-config is not a file (@FILE); nothing to reload")
				}
			}
		}()
	}
	errc := make(chan error, 2)
	go func() { errc <- api.Serve(apiLn) }()
	go func() { errc <- admin.Serve(adminLn) }()
	log.Info("sidecar serving", "listen", apiLn.Addr().String(), "admin", adminLn.Addr().String(),
		"upstream", upstream, "max_connections", cfg.MaxConnections, "pool_size", s.host.Size(), "max_body_bytes", s.policy.Load().maxBody(),
		"instance_memory_limit_bytes", uint64(s.memPages)<<16, "instance_retire_bytes", s.retireBytes, "filter", filterName(cfg))
	if started != nil {
		started <- listeners{API: apiLn.Addr().String(), Admin: adminLn.Addr().String(), Upstream: upstream}
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	// Not ready at once, so that load balancers (Kubernetes endpoints)
	// stop sending; new requests are still served meanwhile.
	s.ready.Store(false)
	if cfg.ShutdownDelay > 0 {
		// Responses now close their connections, so that clients with a
		// kept-alive connection come back through the load balancer.
		api.SetKeepAlivesEnabled(false)
		log.Info("shutting down: /readyz answers 503; serving new requests until the shutdown delay ends", "shutdown_delay", cfg.ShutdownDelay.String())
		t := time.NewTimer(cfg.ShutdownDelay)
		select {
		case <-t.C:
		case err := <-errc:
			t.Stop()
			return err
		}
	}
	log.Info("shutting down: draining requests in flight", "timeout", cfg.DrainTimeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	err = api.Shutdown(dctx)
	_ = admin.Shutdown(dctx)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	log.Info("drained")
	return nil
}

func filterName(cfg *config) string {
	if cfg.FilterPath == "" {
		return "embedded kvgate.wasm"
	}
	return cfg.FilterPath
}
