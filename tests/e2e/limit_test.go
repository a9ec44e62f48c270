package e2e

import (
	"github.com/kvgate/kvgate/internal/httperr"
	"github.com/kvgate/kvgate/kvhints"

	"bytes"
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/internal/envoytest"
	"github.com/kvgate/kvgate/internal/envoytest/envoyconfig"
)

// The body limit is one value in Envoy: a listener rendered with a plugin
// configuration of max_body_bytes 32 MiB buffers bodies of that size (its
// buffer limit follows), so a 30 MiB body is forwarded whole without its
// hint, and a 33 MiB body gets the filter's 413 naming 32 MiB, with
// Content-Length and chunked. Before, the buffer limit stayed at 5 MiB and
// Envoy answered 413 "limit of 4194304 bytes" to the 30 MiB body.
func TestEnvoyLargeBodyLimit(t *testing.T) { testLargeBodyLimit(t, startEnvoy) }

// testLargeBodyLimit is TestEnvoyLargeBodyLimit on the Envoy startHost
// runs (the wasm filter's, or the native module's: TestNativeLargeBodyLimit).
func testLargeBodyLimit(t *testing.T, startHost func(testing.TB, string, []envoyconfig.Listener) *envoytest.Process) {
	if testing.Short() {
		t.Skip("sends 30 and 33 MiB bodies")
	}
	const limit = 32 << 20
	w := startWorker(t)
	port := envoytest.FreePort(t)
	e := startHost(t, w.Addr, []envoyconfig.Listener{{Name: "big", Port: port, PluginConfig: fmt.Sprintf(`{"max_body_bytes":%d}`, limit)}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	page, err := e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	start := parseSeries(page)
	tooLarge := httperr.Invalid(413, kvhints.TooLargeMessage(limit))

	for _, c := range []struct {
		key     string
		size    int
		chunked bool
		status  int
	}{
		{"30MiB-length", 30 << 20, false, 200},
		{"30MiB-chunked", 30 << 20, true, 200},
		{"33MiB-length", 33 << 20, false, 413},
		{"33MiB-chunked", 33 << 20, true, 413},
	} {
		body := bodyOfSize(c.size)
		r, err := send(addr, "POST", "/v1/chat/completions", map[string]string{"content-type": "application/json", CaseHeader: c.key}, body, c.chunked)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		recs := w.Records(c.key)
		if c.status == 413 {
			if r.Status != 413 || !bytes.Equal(r.Body, tooLarge) || r.ContentType != "application/json" {
				t.Errorf("%s: %d %q %.300s, want 413 %s", c.key, r.Status, r.ContentType, r.Body, tooLarge)
			}
			if len(recs) != 0 {
				t.Errorf("%s: the worker received %d bytes of a rejected body", c.key, len(recs[0].Body))
			}
			continue
		}
		want := bytes.Replace(body, []byte(`"kv_hints":{"protocol_version":"0.1"},`), nil, 1)
		if r.Status != 200 || len(recs) != 1 || !bytes.Equal(recs[0].Body, want) {
			n := -1
			if len(recs) == 1 {
				n = len(recs[0].Body)
			}
			t.Errorf("%s: status %d (%.300s), worker received %d records (%d bytes), want the %d bytes without the hint",
				c.key, r.Status, r.Body, len(recs), n, len(want))
		}
	}
	page, err = e.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	d := parseSeries(page).delta(start)
	if d[`trtllm_kv_hints_ignored_total{reason="untrusted"}`] != 2 || d[`kvgate_bodies_rejected_total{status="413"}`] != 2 {
		t.Errorf("counter deltas:\n%s\nwant untrusted 2 and rejected 413 2", d)
	}
}
