package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/prometheus/client_golang/prometheus"
)

// policy is the filter configuration in force: what the guest is
// configured with, and what the sidecar itself reads of it (the body
// limit). A request reads it once, at its start.
type policy struct {
	filter  filterspec.Config
	trust   trustDecision
	maxBody int64
	json    []byte // filter as the guest's plugin configuration
}

// policyFlags are the command-line settings laid over the configuration
// document, at start-up and at every reload.
type policyFlags struct {
	trustSet, trust bool
	env             string // TRTLLM_TRUST_KV_HINTS
	maxBodySet      bool
	maxBody         int64
}

// policyFrom reads a configuration document as the guest reads it
// (duplicate or unknown members are errors), decides trust (decideTrust:
// -trust-kv-hints, the document, TRTLLM_TRUST_KV_HINTS=1) and lays
// -max-body-bytes over it. name says where the document came from, for
// errors.
func policyFrom(doc []byte, name string, f policyFlags) (*policy, error) {
	fc, given, err := filterspec.ParseConfigMembers(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	td, err := decideTrust(&fc, given, f.trustSet, f.trust, f.env)
	if err != nil {
		return nil, err
	}
	if f.maxBodySet {
		fc.MaxBodyBytes = int(f.maxBody)
	}
	return &policy{filter: fc, trust: td, maxBody: int64(fc.MaxBodyBytes), json: fc.JSON()}, nil
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

// reload reads the -filter-config file again and, when it parses,
// validates and the guest accepts it, makes it the policy for new
// requests; requests in flight finish under the one they started with.
// Otherwise the running policy stays and the error says why. trigger
// names what asked for it, for the log.
func (s *server) reload(ctx context.Context, doc []byte, trigger string) error {
	err := s.apply(ctx, doc)
	if err != nil {
		s.reloads.failure.Inc()
		s.reloads.lastOK.Set(0)
		s.log.Error("filter configuration not reloaded; the running one stays", "trigger", trigger, "file", s.cfg.FilterFile, "err", err.Error())
		return err
	}
	s.reloads.success.Inc()
	s.reloads.lastOK.Set(1)
	p := s.policy.Load()
	s.log.Info("filter configuration reloaded", "trigger", trigger, "file", s.cfg.FilterFile, "max_body_bytes", p.maxBody,
		"trust_kv_hints", p.filter.TrustKVHints, "trust_source", p.trust.source, "trusted_senders", p.filter.TrustedSenders.Len(),
		"mode", p.filter.Mode.String())
	warnDetect(s.log, p.filter)
	return nil
}

func (s *server) apply(ctx context.Context, doc []byte) error {
	p, err := policyFrom(doc, "-filter-config @"+s.cfg.FilterFile, s.cfg.policyFlags)
	if err != nil {
		return err
	}
	// Instance memory is sized for the body limit at start-up (the
	// runtime's limit cannot change): a limit that needs more is for a
	// restart.
	if pages, _ := instanceMemory(p.maxBody); pages > s.memPages {
		return fmt.Errorf("max_body_bytes %d needs more filter memory than the sidecar was started for (max_body_bytes %d): restart the sidecar to raise the limit this far", p.maxBody, s.startMaxBody)
	}
	if err := s.host.Reconfigure(ctx, p.json); err != nil {
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
