package metricname

import (
	"reflect"
	"regexp"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		family string
		labels []Label
		name   string
	}{
		{"kvgate_kv_hints_admitted_total", nil, "kvgate_kv_hints_admitted_total"},
		{"trtllm_kv_hints_ignored_total", []Label{{"reason", "untrusted"}}, "trtllm_kv_hints_ignored_total.reason.untrusted"},
		{"kvgate_bodies_rejected_total", []Label{{"status", "413"}, {"cause", "too_large"}}, "kvgate_bodies_rejected_total.status.413.cause.too_large"},
	}
	for _, c := range cases {
		if got := Encode(c.family, c.labels...); got != c.name {
			t.Errorf("Encode = %q, want %q", got, c.name)
		}
		f, l, ok := Decode(c.name)
		if !ok || f != c.family || !reflect.DeepEqual(l, c.labels) {
			t.Errorf("Decode(%q) = %q %v %v", c.name, f, l, ok)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, name := range []string{"", "a.b", "a..b", "a.b.c.d", "1a", "a.1b.c", "a.b.c-d", "a b"} {
		if _, _, ok := Decode(name); ok {
			t.Errorf("Decode(%q) accepted a name outside the rule", name)
		}
	}
}

// The Envoy regex must remove exactly the label's part and capture its value.
func TestRegexMatchesEnvoyNames(t *testing.T) {
	re := regexp.MustCompile(Regex("kvgate_bodies_rejected_total", "cause"))
	m := re.FindStringSubmatch("wasmcustom.kvgate_bodies_rejected_total.status.413.cause.too_large")
	if m == nil || m[1] != ".cause.too_large" || m[2] != "too_large" {
		t.Fatalf("match = %q", m)
	}
	re = regexp.MustCompile(Regex("trtllm_kv_hints_ignored_total", "reason"))
	m = re.FindStringSubmatch("wasmcustom.trtllm_kv_hints_ignored_total.reason.unknown_version")
	if m == nil || m[1] != ".reason.unknown_version" || m[2] != "unknown_version" {
		t.Fatalf("match = %q", m)
	}
	if re.MatchString("wasmcustom.trtllm_kv_hints_ignored_total_x.reason.a") {
		t.Fatal("regex matched another family")
	}
}

// TestPathLabel: a field label takes the rest of the name, dots and dashes
// included, and Envoy's regex extracts the same value.
func TestPathLabel(t *testing.T) {
	for _, v := range []string{"kv_transfer_params", "nvext.backend_instance_id", "x-llm-d-prefiller-host-port"} {
		name := Encode("kvgate_router_only_removed_total", Label{PathLabel, v})
		f, l, ok := Decode(name)
		if !ok || f != "kvgate_router_only_removed_total" || len(l) != 1 || l[0].Value != v {
			t.Fatalf("Decode(%q) = %q %v %v", name, f, l, ok)
		}
		m := regexp.MustCompile(Regex(f, PathLabel)).FindStringSubmatch("wasmcustom." + name)
		if m == nil || m[2] != v {
			t.Fatalf("regex on %q: %q", name, m)
		}
	}
	for _, name := range []string{"a.field", "a.field.x..y", "a.field.x!", "a.field.b.c-d.e f"} {
		if _, _, ok := Decode(name); ok {
			t.Errorf("Decode(%q) accepted", name)
		}
	}
}
