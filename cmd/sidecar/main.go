// Command sidecar is kvgate without Envoy: a reverse proxy that runs the
// kvgate proxy-wasm filter (wasm/kvgate.wasm, or -filter) on wazero for
// every request in front of an OpenAI-compatible worker (trtllm-serve,
// vLLM, SGLang).
//
//	sidecar -listen 127.0.0.1:8080 -upstream http://127.0.0.1:8000
//
// With no -upstream it starts a built-in echo worker on loopback that
// answers with what it received. /metrics, /healthz and /readyz are served
// on -admin. SIGTERM drains requests in flight, then exits.
package main

import (
	"context"
	"encoding/json"
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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kvgate/kvgate/wasm"
)

// config is the sidecar's configuration after flag parsing.
type config struct {
	Listen, Upstream, Admin string
	FilterPath              string
	Module                  []byte
	PluginConfig            []byte // JSON handed to the guest
	MaxBodyBytes            int64
	PoolSize                int
	CacheDir                string
	DrainTimeout            time.Duration
	IdleTimeout             time.Duration
	MaxConnections          int
	LogFlush                time.Duration
}

const defaultMaxBodyBytes = 4 << 20

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecar:", err)
		os.Exit(2)
	}
	sink := newLogSink(os.Stderr, cfg.LogFlush)
	log := slog.New(flushOnWarn{slog.NewJSONHandler(sink, nil), sink})
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
	fs.StringVar(&cfg.Upstream, "upstream", "", "worker base URL (e.g. http://127.0.0.1:8000); empty: a built-in echo worker on loopback")
	fs.StringVar(&cfg.Admin, "admin", "127.0.0.1:9090", "address for /metrics, /healthz and /readyz")
	fs.StringVar(&cfg.FilterPath, "filter", "", "path to a proxy-wasm filter module; empty: the embedded kvgate.wasm")
	filterConfig := fs.String("filter-config", "", "filter configuration: JSON, or @file (e.g. {\"max_depth\":128,\"exclude_paths\":[\"/healthz\"]})")
	trust := fs.Bool("trust-kv-hints", false, "admit kv_hints from clients (also TRTLLM_TRUST_KV_HINTS=1); default: remove them")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", defaultMaxBodyBytes, "largest request body accepted; larger ones get 413 before being buffered")
	fs.IntVar(&cfg.PoolSize, "pool-size", 0, "wasm filter instances (0: GOMAXPROCS)")
	defCache := ""
	if d, err := os.UserCacheDir(); err == nil {
		defCache = filepath.Join(d, "kvgate", "wazero")
	}
	fs.StringVar(&cfg.CacheDir, "cache-dir", defCache, "on-disk wazero compilation cache; empty: none")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "longest wait for more of a request body (then 408) or for the next request on a kept-alive connection (then it is closed); 0: no limit")
	fs.IntVar(&cfg.MaxConnections, "max-connections", defaultMaxConnections(), "most client connections open at once; more wait to be accepted; the default is half the open-file limit less a reserve")
	fs.DurationVar(&cfg.LogFlush, "log-flush", time.Second, "longest time an info line (such as an access log line) waits in the log buffer; warnings and errors are written at once; 0: write every line at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sidecar [flags]\n\nRuns the kvgate proxy-wasm filter on every request in front of an OpenAI-compatible worker.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if cfg.Upstream != "" {
		u, err := url.Parse(cfg.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-upstream %q: want an http:// or https:// base URL", cfg.Upstream)
		}
	}
	for name, addr := range map[string]string{"-listen": cfg.Listen, "-admin": cfg.Admin} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%s %q: %v", name, addr, err)
		}
	}
	if cfg.PoolSize < 0 {
		return nil, fmt.Errorf("-pool-size %d: must be 0 or more", cfg.PoolSize)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("-idle-timeout %v: must be 0 or more", cfg.IdleTimeout)
	}
	if cfg.MaxConnections <= 0 {
		return nil, fmt.Errorf("-max-connections %d: must be positive", cfg.MaxConnections)
	}
	if cfg.MaxBodyBytes <= 0 {
		return nil, fmt.Errorf("-max-body-bytes %d: must be positive", cfg.MaxBodyBytes)
	}
	if cfg.FilterPath != "" {
		b, err := os.ReadFile(cfg.FilterPath)
		if err != nil {
			return nil, fmt.Errorf("-filter: %v", err)
		}
		cfg.Module = b
	} else {
		cfg.Module = wasm.Module
	}

	// The filter configuration: -filter-config, with -trust-kv-hints
	// (or TRTLLM_TRUST_KV_HINTS=1) and -max-body-bytes laid over it.
	raw := []byte(*filterConfig)
	if strings.HasPrefix(*filterConfig, "@") {
		b, err := os.ReadFile(strings.TrimPrefix(*filterConfig, "@"))
		if err != nil {
			return nil, fmt.Errorf("-filter-config: %v", err)
		}
		raw = b
	}
	doc := map[string]json.RawMessage{}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("-filter-config: not a JSON object: %v", err)
		}
	}
	envTrust := getenv("TRTLLM_TRUST_KV_HINTS")
	switch {
	case *trust || envTrust == "1" || strings.EqualFold(envTrust, "true"):
		doc["trust_kv_hints"] = json.RawMessage("true")
	case set["trust-kv-hints"]:
		doc["trust_kv_hints"] = json.RawMessage("false")
	}
	if set["max-body-bytes"] {
		doc["max_body_bytes"] = json.RawMessage(fmt.Sprint(cfg.MaxBodyBytes))
	} else if v, ok := doc["max_body_bytes"]; ok {
		var n int64
		if err := json.Unmarshal(v, &n); err == nil && n > 0 {
			cfg.MaxBodyBytes = n
		}
	}
	if len(doc) > 0 {
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		cfg.PluginConfig = b
	} else {
		cfg.PluginConfig = []byte("{}")
	}
	return cfg, nil
}

// listeners are the addresses a running sidecar serves on (for tests).
type listeners struct{ API, Admin, Upstream string }

// run serves until ctx is done, then drains and shuts down.
func run(ctx context.Context, cfg *config, log *slog.Logger, started chan<- listeners) error {
	upstream := cfg.Upstream
	if upstream == "" {
		echo, err := startEcho(log)
		if err != nil {
			return err
		}
		defer echo.Close()
		upstream = "http://" + echo.Addr
		log.Info("no -upstream: using the built-in echo worker, which answers with what it received", "upstream", upstream)
	}
	s, err := newServer(ctx, cfg, upstream, log)
	if err != nil {
		return err
	}
	defer s.close()

	apiLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	adminLn, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		apiLn.Close()
		return err
	}
	apiLn = s.limitConnections(apiLn, cfg.MaxConnections)
	api := s.apiServer(cfg)
	admin := &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- api.Serve(apiLn) }()
	go func() { errc <- admin.Serve(adminLn) }()
	log.Info("sidecar serving", "listen", apiLn.Addr().String(), "admin", adminLn.Addr().String(),
		"upstream", upstream, "max_connections", cfg.MaxConnections, "pool_size", s.host.Size(), "max_body_bytes", cfg.MaxBodyBytes,
		"instance_memory_limit_bytes", uint64(s.memPages)<<16, "instance_retire_bytes", s.retireBytes, "filter", filterName(cfg))
	if started != nil {
		started <- listeners{API: apiLn.Addr().String(), Admin: adminLn.Addr().String(), Upstream: upstream}
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down: draining requests in flight", "timeout", cfg.DrainTimeout)
	s.ready.Store(false)
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
