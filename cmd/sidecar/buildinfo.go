package main

import (
	"github.com/kvgate/kvgate/internal/version"
	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is kvgate_build_info: always 1, its labels say which sidecar
// is running, so that a dashboard can show versions and a query can join
// on them (the usual Prometheus *_build_info pattern).
func buildInfo() prometheus.Collector {
	i := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kvgate_build_info",
		Help:        "Which kvgate sidecar is running: its release version, source revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
