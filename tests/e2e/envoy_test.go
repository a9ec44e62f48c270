package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// bodyOfSize returns a JSON chat body of exactly n bytes carrying a hint.
func bodyOfSize(n int) []byte {
	head := `{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return []byte(head + strings.Repeat("a", n-len(head)-len(tail)) + tail)
}

// The pinned Envoy really runs the module: started (not only validated) on
// the committed bootstrap, it removes a hint, counts it under the label the
// stats tags make, and answers 413 to a body one byte over the 4 MiB limit
// however it is framed, while a body of exactly 4 MiB is forwarded whole.
func TestEnvoyRunsWasm(t *testing.T) {
	w := startWorker(t)
	port := envoytest.FreePort(t)
	e := startEnvoy(t, w.Addr, []envoyconfig.Listener{{Name: "kvgate", Port: port}})
	checkRunsFilter(t, e, fmt.Sprintf("127.0.0.1:%d", port), w, "")
}

// checkRunsFilter checks an Envoy that runs the filter (the wasm module or
// the native one) on the listener at addr in front of w: every series
// exists at 0 at start-up under the filter's names and labels (allSeries),
// a hint is removed and counted, and a body one byte over the 4 MiB limit
// gets the filter's 413 however it is framed, while one of exactly 4 MiB
// is forwarded whole. prefix keeps its CaseHeader keys apart.
func checkRunsFilter(t *testing.T, e *envoytest.Process, addr string, w *Worker, prefix string) {
	t.Helper()
	page, err := e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	start := parseSeries(page)
	want := series{}
	for _, k := range allSeries() {
		want[k] = 0
	}
	if start.String() != want.String() {
		t.Fatalf("series at start-up:\n%s\nwant:\n%s\nfull page:\n%s", start, want, grep(page, "kv"))
	}

	hdr := map[string]string{"content-type": "application/json", CaseHeader: prefix + "hint"}
	r, err := send(addr, "POST", "/v1/chat/completions", hdr, []byte(`{"model":"m","kv_hints":{"protocol_version":"0.1"},"messages":[]}`), false)
	if err != nil || r.Status != 200 {
		t.Fatalf("hinted request: %v %d %s", err, r.Status, r.Body)
	}
	if recs := w.Records(prefix + "hint"); len(recs) != 1 || string(recs[0].Body) != `{"model":"m","messages":[]}` {
		t.Fatalf("worker received %d records %v, want the body without kv_hints", len(recs), recs)
	}

	limit := filterspec.DefaultMaxBodyBytes
	for _, c := range []struct {
		key     string
		size    int
		chunked bool
		status  int
	}{
		{prefix + "exact-length", limit, false, 200},
		{prefix + "exact-chunked", limit, true, 200},
		{prefix + "over-length", limit + 1, false, 413},
		{prefix + "over-chunked", limit + 1, true, 413},
	} {
		hdr := map[string]string{"content-type": "application/json", CaseHeader: c.key}
		body := bodyOfSize(c.size)
		r, err := send(addr, "POST", "/v1/chat/completions", hdr, body, c.chunked)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %.200s", c.key, r.Status, c.status, r.Body)
		}
		recs := w.Records(c.key)
		if c.status != 200 {
			var e struct {
				Error struct {
					Type string `json:"type"`
					Code int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Code != 413 || e.Error.Type != "invalid_request_error" {
				t.Errorf("%s: reply %q is not the filter's OpenAI-style 413", c.key, r.Body)
			}
			if len(recs) != 0 {
				t.Errorf("%s: the worker received %d bytes of a rejected body", c.key, len(recs[0].Body))
			}
			continue
		}
		want := bytes.Replace(body, []byte(`"kv_hints":{"protocol_version":"0.1"},`), nil, 1)
		if len(recs) != 1 || !bytes.Equal(recs[0].Body, want) {
			got := 0
			if len(recs) == 1 {
				got = len(recs[0].Body)
			}
			t.Errorf("%s: worker did not receive the whole body without the hint (%d records, %d bytes, want %d)", c.key, len(recs), got, len(want))
		}
	}

	page, err = e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(page).delta(start)
	if d[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] != 3 || d[`kvgate_bodies_rejected_total{status="413"}`] != 2 {
		t.Errorf("counter deltas:\n%s\nwant untrusted 3 and rejected 413 2", d)
	}
}

func grep(page, sub string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
