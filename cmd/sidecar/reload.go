package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/host"
	"github.com/prometheus/client_golang/prometheus"
)

// policy is the filter configuration in force: the document, with the
// command-line flags laid over it (policyFrom), that the guest is
// configured with and whose body limit the sidecar enforces itself. It is
// never changed once made; a reload makes a new one and swaps it in
// (server.apply). A request reads it once, at its start.
type policy struct {
	// filter is the whole configuration; its MaxBodyBytes is the body
	// limit, for the guest and for the sidecar alike (maxBody).
	filter filterspec.Config
	trust  trustDecision // how filter.TrustKVHints was decided
	json   []byte        // filter, as the guest's plugin configuration
}

// maxBody is the largest request body accepted, in bytes.
func (p *policy) maxBody() int64 { return int64(p.filter.MaxBodyBytes) }

// policyFlags are the command-line settings laid over the configuration
// document, at start-up and at every reload. They are the flags' own
// variables: nothing writes them after parsing.
type policyFlags struct {
	trustSet, trust bool   // -trust-kv-hints
	env             string // TRTLLM_TRUST_KV_HINTS
	maxBodySet      bool
	maxBody         int64 // -max-body-bytes
}

// policyFrom reads a configuration document as the guest reads it
// (duplicate or unknown members are errors), decides trust (decideTrust:
// -trust-kv-hints, the document, TRTLLM_TRUST_KV_HINTS=1) and lays
// -max-body-bytes over it. name says where the document came from, for
// errors. It is the one place the flags meet the document.
func policyFrom(doc []byte, name string, f policyFlags) (*policy, error) {
	fc, given, err := filterspec.ParseConfigMembers(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	trust, td, err := decideTrust(fc, given, f)
	if err != nil {
		return nil, err
	}
	fc.TrustKVHints = trust
	if f.maxBodySet {
		fc.MaxBodyBytes = int(f.maxBody)
	}
	return &policy{filter: fc, trust: td, json: fc.JSON()}, nil
}

// configPoll is how often a -filter-config file is read for a change.
// Kubernetes updates a mounted ConfigMap by swapping a symlink in its
// directory, which no watch of the file itself sees; reading the path
// (through the symlinks) does.
const configPoll = time.Second

// reloadMetrics are the series of configuration reloads, named as
// Prometheus names its own.
type reloadMetrics struct {
	lastOK  prometheus.Gauge
	success prometheus.Counter
	failure prometheus.Counter
}

func newReloadMetrics(reg prometheus.Registerer) reloadMetrics {
	last := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kvgate_config_last_reload_successful",
		Help: "1 when the last attempt to reload the filter configuration succeeded (or none was made), 0 when it failed and an older configuration is in force.",
	})
	last.Set(1)
	n := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvgate_config_reloads_total",
		Help: "Attempts to reload the filter configuration (-filter-config @FILE changed, or SIGHUP), by result.",
	}, []string{"result"})
	reg.MustRegister(last, n)
	return reloadMetrics{lastOK: last, success: n.WithLabelValues("success"), failure: n.WithLabelValues("failure")}
}

// reload makes the -filter-config file's new content doc the policy for
// new requests, when it parses, validates and the guest accepts it
// (apply); requests in flight finish under the one they started with.
// Otherwise the running policy stays and the error says why. trigger
// names what asked for it, for the log.
func (s *server) reload(ctx context.Context, doc []byte, trigger string) error {
	p, err := s.cfg.policyOf(doc)
	if err == nil {
		err = s.apply(ctx, p)
	}
	if err != nil {
		s.reloads.failure.Inc()
		s.reloads.lastOK.Set(0)
		s.log.Error("filter configuration not reloaded; the running one stays", "trigger", trigger, "file", s.cfg.FilterFile, "err", err.Error())
		return err
	}
	s.reloads.success.Inc()
	s.reloads.lastOK.Set(1)
	s.log.Info("filter configuration reloaded", "trigger", trigger, "file", s.cfg.FilterFile, "max_body_bytes", p.maxBody(),
		"trust_kv_hints", p.filter.TrustKVHints, "trust_source", p.trust.source, "trusted_senders", p.filter.TrustedSenders.Len(),
		"mode", p.filter.Mode.String())
	warnDetect(s.log, p.filter)
	return nil
}

// apply makes p the policy in force, at start-up (newServer: the first
// policy, with which the filter module is started) and at every reload
// (with which the running instances are reconfigured): the one way a
// policy comes into force. p's body limit must fit the instance memory,
// which is sized once, at start-up, for the first policy's (the runtime's
// limit cannot change): a limit that needs more is for a restart.
func (s *server) apply(ctx context.Context, p *policy) error {
	if pages, _ := instanceMemory(p.maxBody()); pages > s.memPages {
		return fmt.Errorf("max_body_bytes %d needs more filter memory than the sidecar was started for (max_body_bytes %d): restart the sidecar to raise the limit this far", p.maxBody(), s.memSizedFor)
	}
	var err error
	if s.host == nil {
		s.host, err = host.New(ctx, s.cfg.Module, s.hostOptions(p.json))
	} else {
		err = s.host.Reconfigure(ctx, p.json)
	}
	if err != nil {
		return err
	}
	s.policy.Store(p)
	return nil
}

// watchConfig applies the -filter-config file whenever its content
// changes, and at once on each value from hup (SIGHUP), until ctx is done.
// last is the content in force.
func (s *server) watchConfig(ctx context.Context, last []byte, hup <-chan os.Signal) {
	t := time.NewTicker(configPoll)
	defer t.Stop()
	var lastErr string
	for {
		trigger := "file changed"
		select {
		case <-ctx.Done():
			return
		case <-hup:
			trigger = "SIGHUP"
		case <-t.C:
		}
		doc, err := os.ReadFile(s.cfg.FilterFile)
		if err != nil {
			// A file that cannot be read is reported once, and counted as
			// a failed reload once, until it can be read again.
			if msg := err.Error(); msg != lastErr || trigger == "SIGHUP" {
				lastErr = msg
				s.reloads.failure.Inc()
				s.reloads.lastOK.Set(0)
				s.log.Error("filter configuration not reloaded; the running one stays", "trigger", trigger, "file", s.cfg.FilterFile, "err", msg)
			}
			continue
		}
		lastErr = ""
		if trigger != "SIGHUP" && bytes.Equal(doc, last) {
			continue
		}
		last = doc
		_ = s.reload(ctx, doc, trigger)
	}
}
