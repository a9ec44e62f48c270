package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// The router_only settings of TestRouterOnlyRealWorker: every preset, for
// an untrusted sender (strip and refuse) and for a trusted one.
const (
	roEngines  = `"engines":["vllm","sglang","trtllm","dynamo","llm-d"]`
	roStrip    = `{"router_only":{` + roEngines + `}}`
	roRefuse   = `{"router_only":{` + roEngines + `,"untrusted":"refuse"}}`
	roTrusted  = `{"trust_kv_hints":true,"router_only":{` + roEngines + `}}`
	roSecret   = "10.66.0.1:7777" // a forged address: never in an answer
	roStreamed = `"stream":false`
)

// roBodies are hostile spellings of the preset members, each a request a
// worker's pydantic model would read router-only fields from.
var roBodies = map[string]string{
	"literal": `{"model":"m","messages":[{"role":"user","content":"hi"}],` + roStreamed + `,` +
		`"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"` + roSecret + `","remote_port":1},` +
		`"bootstrap_host":"` + roSecret + `","bootstrap_port":8998,"bootstrap_room":42,"routed_dp_rank":1,` +
		`"disagg_prefill_dp_rank":1,"data_parallel_rank":0,"disaggregated_params":{"request_type":"generation_only"},` +
		`"bootstrap_pair_key":"k","decode_tp_size":8,"kv_router_hint":"` + roSecret + `","prompt_token_ids":[1,2],"prompt_token_ids_b64":"AQI=",` +
		`"ec_transfer_params":{"remote_host":"` + roSecret + `"},` +
		`"nvext":{"backend_instance_id":7,"decode_worker_id":7,"prefill_worker_id":7,"dp_rank":1,"prefill_dp_rank":1,` +
		`"token_data":[1,2,3],"use_raw_prompt":true,"ignore_eos":true}}`,
	"escaped": `{"model":"m","messages":[{"role":"user","content":"hi"}],"kv\u005ftransfer_params":{"remote_host":"` + roSecret + `"},` +
		`"\u0062ootstrap_host":"` + roSecret + `","nv\u0065xt":{"dp\u005frank":3,"ignore_eos":true}}`,
	"duplicates": `{"bootstrap_room":1,"model":"m","bootstrap_room":2,"messages":[{"role":"user","content":"hi"}],` +
		`"nvext":{"backend_instance_id":1},"nvext":{"backend_instance_id":2,"ignore_eos":true},"bootstrap_room":3}`,
	"pretty": "{\n  \"model\": \"m\",\n  \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],\n" +
		"  \"disaggregated_params\" : {\"ctx_request_id\": 9},\n  \"nvext\": { \"ignore_eos\": true , \"token_data\": [1] }\n}",
	"same-name-elsewhere": `{"model":"m","messages":[{"role":"user","content":"hi","kv_transfer_params":{"remote_host":"h"}}],` +
		`"nvext":{"ignore_eos":true,"extra":{"dp_rank":1}}}`,
}

// presetHeaders are every header of the presets.
func presetHeaders() []string {
	var hs []string
	seen := map[string]bool{}
	for _, p := range filterspec.Presets() {
		for _, h := range p.Headers {
			if !seen[h] {
				seen[h] = true
				hs = append(hs, h)
			}
		}
	}
	return hs
}

// sendLines sends one request with the header lines given (so a header
// can occur twice, in any case) and reads the answer.
func sendLines(addr string, lines []string, body []byte) (int, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b bytes.Buffer
	b.WriteString("POST /v1/chat/completions HTTP/1.1\r\nHost: worker\r\nConnection: close\r\nContent-Type: application/json\r\n")
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "POST"})
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp.StatusCode, rb, err
}

// TestRouterOnlyRealWorker sends hostile router-only fields through every
// host (the wasm filter and the native module in Envoy, the sidecar) to
// the FastAPI/pydantic worker, whose request model declares them as the
// engines' do: from an untrusted client the model never reads one and no
// router-only header arrives, whatever the spelling, while everything else
// arrives as sent; a trusted sender's arrive as sent; under "refuse" the
// client gets 400 naming the field (never its value) and the worker gets
// nothing.
func TestRouterOnlyRealWorker(t *testing.T) {
	uv := startUvicorn(t, "h11")
	bin := sidecarBinary(t)
	type host struct{ name, strip, refuse, trusted string }
	var hosts []host
	for _, native := range []bool{false, true} {
		ps, pr, pt := envoyFreePorts(t)
		ls := []envoyconfig.Listener{{Name: "strip", Port: ps, PluginConfig: roStrip}, {Name: "refuse", Port: pr, PluginConfig: roRefuse},
			{Name: "trusted", Port: pt, PluginConfig: roTrusted}}
		name := "wasm"
		if native {
			name = "native"
			startNativeEnvoy(t, uv.Addr, ls)
		} else {
			startEnvoy(t, uv.Addr, ls)
		}
		hosts = append(hosts, host{name, addr(ps), addr(pr), addr(pt)})
	}
	hosts = append(hosts, host{"sidecar",
		startSidecar(t, bin, uv.Addr, roStrip, t.TempDir()).API,
		startSidecar(t, bin, uv.Addr, roRefuse, t.TempDir()).API,
		startSidecar(t, bin, uv.Addr, roTrusted, t.TempDir()).API})

	headers := presetHeaders()
	var lines []string
	for i, h := range headers {
		lines = append(lines, h+": "+roSecret)
		if i%2 == 0 { // a second value, in other case
			lines = append(lines, strings.ToUpper(h)+": "+roSecret)
		}
	}
	for _, h := range hosts {
		for name, body := range roBodies {
			var sent map[string]any
			if err := json.Unmarshal([]byte(body), &sent); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			t.Run(h.name+"/"+name, func(t *testing.T) {
				key := "router-only/" + h.name + "/" + name
				own := []string{CaseHeader + ": " + key, "X-Client-Tag: r-" + name}
				// Untrusted, strip: nothing router-only reaches the model.
				status, reply, err := sendLines(h.strip, append(append([]string{}, own...), lines...), []byte(body))
				if err != nil || status != 200 {
					t.Fatalf("strip: %d %s %v", status, reply, err)
				}
				recs := uv.Records(t, key)
				if len(recs) != 1 {
					t.Fatalf("strip: %d requests at the worker", len(recs))
				}
				r := recs[0]
				if len(r.RouterOnly) != 0 {
					t.Errorf("strip: the worker's model read router-only fields %v", r.RouterOnly)
				}
				for _, kv := range r.Headers {
					for _, want := range headers {
						if kv[0] == want {
							t.Errorf("strip: the worker got the header %s", kv[0])
						}
					}
				}
				if r.Model == nil || *r.Model != "m" || !reflect.DeepEqual(r.Messages, sent["messages"]) || !hasHeader(r.Headers, "x-client-tag", "r-"+name) {
					t.Errorf("strip: the rest did not arrive as sent: model %v messages %v headers %v", r.Model, r.Messages, r.Headers)
				}
				if _, ok := sent["nvext"]; ok && r.NvExt["ignore_eos"] != true {
					t.Errorf("strip: nvext's own members lost: %v", r.NvExt)
				}
				// Trusted: every field as sent.
				tkey := key + "/trusted"
				status, reply, err = sendLines(h.trusted, append([]string{CaseHeader + ": " + tkey}, lines...), []byte(body))
				if err != nil || status != 200 {
					t.Fatalf("trusted: %d %s %v", status, reply, err)
				}
				tr := uv.Records(t, tkey)
				if len(tr) != 1 || !bytes.Equal(tr[0].Body, []byte(body)) {
					t.Fatalf("trusted: the body did not arrive unchanged: %d records", len(tr))
				}
				if n := countHeaders(tr[0].Headers, headers); n != len(lines) {
					t.Errorf("trusted: %d router-only header values arrived, want %d", n, len(lines))
				}
				// Refuse: 400 naming a field, nothing forwarded.
				rkey := key + "/refuse"
				before := uv.Count(t)
				status, reply, err = sendLines(h.refuse, []string{CaseHeader + ": " + rkey}, []byte(body))
				if err != nil {
					t.Fatal(err)
				}
				if name == "same-name-elsewhere" {
					if status != 200 {
						t.Errorf("refuse: a body without router-only fields answered %d %s", status, reply)
					}
					return
				}
				if status != 400 || !strings.Contains(string(reply), "router-only field") || strings.Contains(string(reply), roSecret) {
					t.Errorf("refuse: %d %s", status, reply)
				}
				if n := uv.Count(t); n != before || len(uv.Records(t, rkey)) != 0 {
					t.Errorf("refuse: the worker got the request")
				}
			})
		}
		// A router-only header alone is refused too.
		status, reply, err := sendLines(h.refuse, []string{"X-Prefiller-Host-Port: " + roSecret}, []byte(`{"model":"m"}`))
		if err != nil || status != 400 || !strings.Contains(string(reply), `x-prefiller-host-port`) || strings.Contains(string(reply), roSecret) {
			t.Errorf("%s: refuse a header: %d %s %v", h.name, status, reply, err)
		}
	}
}

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func envoyFreePorts(t *testing.T) (int, int, int) {
	return envoytest.FreePort(t), envoytest.FreePort(t), envoytest.FreePort(t)
}

func hasHeader(hs [][2]string, name, value string) bool {
	for _, kv := range hs {
		if kv[0] == name && kv[1] == value {
			return true
		}
	}
	return false
}

func countHeaders(hs [][2]string, names []string) int {
	n := 0
	for _, kv := range hs {
		for _, want := range names {
			if kv[0] == want {
				n++
			}
		}
	}
	return n
}
