package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The prototype switch in the built binary, as the worker reads it: only
// TRTLLM_TRUST_KV_HINTS=1 turns trust on, and -trust-kv-hints=false wins
// over it. Each case sends a hinted request and reads what the worker got;
// the start-up log says what decided.
func TestTrustEnvironmentBinary(t *testing.T) {
	rec := &recorder{}
	worker := httptest.NewServer(rec)
	defer worker.Close()
	for _, c := range []struct {
		env     string
		args    []string
		trusted bool
		source  string
		ignored string // in the warning, when the variable did not decide
	}{
		{"TRTLLM_TRUST_KV_HINTS=1", nil, true, "env TRTLLM_TRUST_KV_HINTS", ""},
		{"TRTLLM_TRUST_KV_HINTS=1", []string{"-trust-kv-hints=false"}, false, "flag", "-trust-kv-hints=false wins"},
		{"TRTLLM_TRUST_KV_HINTS=1", []string{"-filter-config", `{"trust_kv_hints":false}`}, false, "filter-config", "trust_kv_hints: false"},
		{"TRTLLM_TRUST_KV_HINTS=true", nil, false, "default", "only the value 1"},
		{"TRTLLM_TRUST_KV_HINTS=TRUE", nil, false, "default", "only the value 1"},
	} {
		name := c.env + " " + strings.Join(c.args, " ")
		p := startBinaryEnv(t, []string{c.env}, append([]string{"-upstream", worker.URL, "-log-flush", "0"}, c.args...)...)
		resp, _ := post(t, "http://"+p.api+"/v1/chat/completions", hinted)
		want := stripped
		if c.trusted {
			want = hinted
		}
		if resp.StatusCode != 200 || string(rec.last()) != want {
			t.Errorf("%s: status %d, the worker got %s, want %s", name, resp.StatusCode, rec.last(), want)
		}
		line := `"msg":"hint trust","trust_kv_hints":` + map[bool]string{true: "true", false: "false"}[c.trusted] +
			`,"trust_source":"` + c.source + `","trusted_senders":0`
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.stderr.String(), line) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		logs := p.stderr.String()
		if !strings.Contains(logs, line) {
			t.Errorf("%s: no start-up line %s in\n%s", name, line, logs)
		}
		if warned := strings.Contains(logs, "TRTLLM_TRUST_KV_HINTS ignored: "+c.ignored); c.ignored != "" && !warned {
			t.Errorf("%s: no warning that the variable was ignored (%s):\n%s", name, c.ignored, logs)
		} else if c.ignored == "" && strings.Contains(logs, "TRTLLM_TRUST_KV_HINTS ignored") {
			t.Errorf("%s: a warning, but the variable decided:\n%s", name, logs)
		}
	}
}
