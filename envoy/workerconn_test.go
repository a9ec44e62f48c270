package envoy_test

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/envoy"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
	"github.com/kvgate/kvgate/internal/httperr"
)

// The committed bootstraps follow docs/spec.md's "The worker connection"
// with the sidecar's values: the cluster's connect and idle timeouts, the
// route's one retry of a request that never reached the worker, the short
// delayed close, and the 502 answers with the JSON bodies the sidecar
// writes (httperr), by Envoy's response flags.
func TestWorkerConnection(t *testing.T) {
	for name, b := range map[string][]byte{"envoy.yaml": envoy.Bootstrap, "envoy-mtls.yaml": envoy.MTLSBootstrap} {
		d, err := envoyconfig.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]struct {
			at  []any
			val any
		}{
			"connect_timeout": {[]any{"static_resources", "clusters", 0, "connect_timeout"}, "3s"},
			"idle_timeout": {[]any{"static_resources", "clusters", 0, "typed_extension_protocol_options",
				"envoy.extensions.upstreams.http.v3.HttpProtocolOptions", "common_http_protocol_options", "idle_timeout"}, "4s"},
			"retry_on":              {[]any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "route_config", "virtual_hosts", 0, "routes", 0, "route", "retry_policy", "retry_on"}, "reset-before-request"},
			"num_retries":           {[]any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "route_config", "virtual_hosts", 0, "routes", 0, "route", "retry_policy", "num_retries"}, float64(1)},
			"delayed_close_timeout": {[]any{"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "delayed_close_timeout"}, "0.1s"},
		} {
			got, err := envoyconfig.Dig(d, want.at...)
			if err != nil || got != want.val {
				t.Errorf("%s: %s = %v (%v), want %v", name, path, got, err, want.val)
			}
		}
		mappers, err := envoyconfig.Dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "local_reply_config", "mappers")
		if err != nil {
			t.Fatal(err)
		}
		bodies := map[string]bool{}
		for _, m := range mappers.([]any) {
			md := m.(envoyconfig.Doc)
			if md["status_code"] != float64(502) {
				continue
			}
			body, _ := envoyconfig.Dig(md, "body", "inline_string")
			bodies[body.(string)] = true
			if ct, _ := envoyconfig.Dig(md, "body_format_override", "content_type"); ct != "application/json" {
				t.Errorf("%s: 502 mapper %v: content type %v", name, body, ct)
			}
		}
		for _, msg := range []string{httperr.MsgWorkerUnavailable, httperr.MsgWorkerTimeout, httperr.MsgWorkerReset, httperr.MsgWorkerInvalid} {
			want := string(httperr.Body(502, httperr.TypeServer, msg))
			if msg != httperr.MsgWorkerInvalid && !bodies[want] {
				t.Errorf("%s: no 502 mapper answers %s", name, want)
			}
			if msg == httperr.MsgWorkerInvalid {
				src, _ := envoyconfig.Dig(d, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "http_filters", 1, "typed_config", "default_source_code", "inline_string")
				if s, _ := src.(string); !strings.Contains(s, want) || !bodies[want] {
					t.Errorf("%s: the status check and the UPE mapper must answer %s", name, want)
				}
			}
		}
	}
}
