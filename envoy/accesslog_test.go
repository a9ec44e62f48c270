package envoy_test

import (
	"regexp"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// The committed bootstrap's access log prints what the filter reports
// (its properties, kept by Envoy as filter state "wasm.<name>") and, of
// the request, no header but the request id and no query string
// (docs/spec.md, Logs). tests/e2e runs it and reads the lines.
func TestAccessLogFormat(t *testing.T) {
	f, err := envoyconfig.Dig(committed(t), "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0,
		"typed_config", "access_log", 0, "typed_config", "log_format", "json_format")
	if err != nil {
		t.Fatal(err)
	}
	format := f.(envoyconfig.Doc)
	for key, prop := range map[string]string{"hint": filterspec.PropertyHint, "hint_reason": filterspec.PropertyHintReason,
		"sender_trusted": filterspec.PropertySenderTrusted, "sender_rule": filterspec.PropertySenderRule, "router_only": filterspec.PropertyRouterOnly} {
		if want := "%FILTER_STATE(wasm." + prop + ":PLAIN)%"; format[key] != want {
			t.Errorf("%s: %v, want %s", key, format[key], want)
		}
	}
	header := regexp.MustCompile(`%(REQ|REQUEST_HEADER|RESP|RESPONSE_HEADER|TRAILER)\(([^)]*)\)%`)
	for key, v := range format {
		s, _ := v.(string)
		for _, m := range header.FindAllStringSubmatch(s, -1) {
			if m[2] != ":METHOD" && m[2] != "X-REQUEST-ID" {
				t.Errorf("%s prints the header %s", key, m[2])
			}
		}
		if regexp.MustCompile(`%PATH(\((WQ)?[^)]*\))?%`).MatchString(s) && s != "%PATH(NQ)%" {
			t.Errorf("%s prints the path with its query: %s", key, s)
		}
	}
}
