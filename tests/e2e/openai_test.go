package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// canonicalEnvelope is docs/spec.md's reference envelope in canonical compact
// form: what a trusted filter must forward for the client's envelope.
const canonicalEnvelope = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

// TestOpenAIClient runs tests/e2e/openai_client.py, the official openai
// Python client sending chat completions, completions and Responses requests
// (streaming and not) with extra_body={"kv_hints": ...}, through Envoy and
// through the sidecar, untrusted and trusted. The client must parse every
// answer, and the worker must have received the hint removed (untrusted) or
// as the canonical envelope (trusted), and every other member as sent.
func TestOpenAIClient(t *testing.T) {
	python := envoytest.Python(t)
	bin := sidecarBinary(t)
	w := startWorker(t)
	untrusted, trusted := `{"trust_kv_hints":false}`, `{"trust_kv_hints":true}`
	pu, pt := envoytest.FreePort(t), envoytest.FreePort(t)
	startEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "untrusted", Port: pu, PluginConfig: untrusted}, {Name: "trusted", Port: pt, PluginConfig: trusted}})
	cache := t.TempDir()
	su := startSidecar(t, bin, w.Addr, untrusted, cache)
	st := startSidecar(t, bin, w.Addr, trusted, cache)
	preflight(t, w, "envoy", fmt.Sprintf("127.0.0.1:%d", pu))
	targets := map[string]bool{ // name -> trusted
		"envoy-untrusted": false, "envoy-trusted": true, "sidecar-untrusted": false, "sidecar-trusted": true,
	}
	args := []string{filepath.Join(repoRoot, "tests", "e2e", "openai_client.py"),
		"--target", fmt.Sprintf("envoy-untrusted=http://127.0.0.1:%d/v1", pu),
		"--target", fmt.Sprintf("envoy-trusted=http://127.0.0.1:%d/v1", pt),
		"--target", "sidecar-untrusted=http://" + su.API + "/v1",
		"--target", "sidecar-trusted=http://" + st.API + "/v1",
	}
	cmd := exec.Command(python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai_client.py: %v\n%s\n%s", err, out, stderr.String())
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var call struct {
			Key  string         `json:"key"`
			Sent map[string]any `json:"sent"`
		}
		if err := json.Unmarshal(sc.Bytes(), &call); err != nil {
			t.Fatalf("client output %q: %v", sc.Bytes(), err)
		}
		n++
		target, _, _ := strings.Cut(call.Key, "/")
		if _, ok := targets[target]; !ok {
			t.Fatalf("unknown target in %q", call.Key)
		}
		recs := w.Records(call.Key)
		if len(recs) != 1 {
			t.Errorf("%s: the worker received %d requests, want 1", call.Key, len(recs))
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(recs[0].Body, &raw); err != nil {
			t.Errorf("%s: forwarded body is not JSON: %v", call.Key, err)
			continue
		}
		hint, has := raw["kv_hints"]
		switch {
		case targets[target] && (!has || string(hint) != canonicalEnvelope):
			t.Errorf("%s: trusted, forwarded kv_hints %s, want the canonical envelope", call.Key, hint)
		case !targets[target] && has:
			t.Errorf("%s: untrusted, but kv_hints reached the worker: %s", call.Key, hint)
		}
		delete(raw, "kv_hints")
		b, _ := json.Marshal(raw)
		var rest map[string]any
		_ = json.Unmarshal(b, &rest)
		if !reflect.DeepEqual(rest, call.Sent) {
			t.Errorf("%s: the rest of the request changed:\n got %v\nwant %v", call.Key, rest, call.Sent)
		}
	}
	if n != 4*6 {
		t.Errorf("client reported %d calls, want 24\n%s", n, stderr.String())
	}
}
