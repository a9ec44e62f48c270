package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/host"
)

func TestInstanceMemory(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		maxBody          int64
		pages            uint32
		retire           uint64
		minLimit, within uint64 // the cap holds at least this; the retire size at least within
	}{
		// The default limit keeps the host's defaults.
		{4 * mib, host.DefaultMemoryLimitPages, host.DefaultRetireBytes, 0, 0},
		{1, host.DefaultMemoryLimitPages, host.DefaultRetireBytes, 0, 0},
		// Larger limits: the working set (two buffers of the limit and the
		// runtime) fits under the retire size, a maximally nested body of
		// the limit fits under the cap.
		{32 * mib, 0, 0, 2*32*mib + 4*32*mib, 2 * 32 * mib},
		{256 * mib, 0, 0, 2*256*mib + 4*256*mib, 2 * 256 * mib},
	} {
		pages, retire := instanceMemory(c.maxBody)
		limit := uint64(pages) << 16
		switch {
		case c.pages != 0 && (pages != c.pages || retire != c.retire):
			t.Errorf("%d: %d pages, retire %d; want %d, %d", c.maxBody, pages, retire, c.pages, c.retire)
		case c.pages == 0 && (limit < c.minLimit || retire < c.within+16*mib || retire >= limit):
			t.Errorf("%d: cap %d MiB, retire %d MiB", c.maxBody, limit/mib, retire/mib)
		case pages > 1<<16:
			t.Errorf("%d: %d pages is more than wasm32 addresses", c.maxBody, pages)
		}
	}
}

// A body limit well above the default works: bodies up to the limit are
// filtered without tripping the instance's memory cap and without retiring
// the instance after each request; a hostile body nested as deep as it is
// long gets its 400 and only then is the instance, grown past its working
// set, replaced.
func TestLargeBodyLimit(t *testing.T) {
	const limit = 32 << 20
	l, _, _ := startInProcess(t, "-max-body-bytes", strconv.Itoa(limit), "-pool-size", "1")
	hint := `"kv_hints":{"protocol_version":"0.1","message_id":"m","actions":[]},`
	body := func(n int) string {
		head := `{"model":"m",` + hint + `"prompt":"`
		return head + strings.Repeat("x", n-len(head)-2) + `"}`
	}
	url := "http://" + l.API + "/v1/completions"
	for i, n := range []int{limit / 2, limit, 1 << 10, limit - 1000, limit} {
		resp, got := post(t, url, body(n))
		if resp.StatusCode != 200 || len(got) != n-len(hint) {
			t.Fatalf("body %d (%d bytes): status %d, %d bytes forwarded", i, n, resp.StatusCode, len(got))
		}
	}
	replaced := func() (grown, trap float64) {
		m := scrape(t, l.Admin)
		return m[`kvgate_wasm_instances_replaced_total{reason="grown"}`], m[`kvgate_wasm_instances_replaced_total{reason="trap"}`]
	}
	if g, tr := replaced(); g != 0 || tr != 0 {
		t.Fatalf("instances replaced for bodies within the limit: grown %v, trap %v", g, tr)
	}
	resp, got := post(t, url, `{"a":`+strings.Repeat("[", limit-10))
	if resp.StatusCode != 400 {
		t.Fatalf("deeply nested body: status %d: %s", resp.StatusCode, got)
	}
	if g, tr := replaced(); g != 1 || tr != 0 {
		t.Fatalf("after the deeply nested body: grown %v, trap %v; want 1, 0", g, tr)
	}
	if resp, _ := post(t, url, body(1<<10)); resp.StatusCode != 200 {
		t.Fatalf("after the replacement: status %d", resp.StatusCode)
	}
}
