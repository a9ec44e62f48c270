package wasm

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

const refHint = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

// hintBody returns a body of exactly n bytes (n >= 300) with a kv_hints
// member and a long prompt; stripped, it becomes strippedBody(n).
func hintBody(n int) []byte {
	head := `{"model":"m","kv_hints":` + refHint + `,"prompt":"`
	return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
}

// manyHints returns a body of at most n bytes made of nothing but
// top-level kv_hints members ({"kv_hints":1,"kv_hints":1,...}), 322,638 of
// them in 4 MiB; stripped, it is {}.
func manyHints(n int) []byte {
	const member = `"kv_hints":1,`
	b := make([]byte, 0, n)
	b = append(b, '{')
	for len(b)+len(member) < n {
		b = append(b, member...)
	}
	b[len(b)-1] = '}'
	return b
}

// TestMemoryBounded runs 10,000 mixed requests of up to 4 MiB through the
// module under wazero with real clocks and checks that linear memory stays
// where start-up put it: the guest sets aside its body and output buffers
// for the configured limit then, so the requests add less than 1 MiB, and
// its size after the first half equals its size at the end.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	h := newWzHost(t, context.Background(), `{}`)
	defer h.close()
	sizes := []int{300, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 3 << 20, 4 << 20}
	bodies := map[int][]byte{}
	for _, n := range sizes {
		bodies[n] = hintBody(n)
	}
	over := hintBody(4<<20 + 1)
	bad := append(hintBody(1<<20), '}')
	many := manyHints(4 << 20)
	plain := []byte(`{"model":"m","prompt":"` + strings.Repeat("y", 100<<10) + `"}`)
	rng := rand.New(rand.NewPCG(1, 2))
	const total = 10000
	var marks []uint32
	var bytesIn int64
	start := h.memSize()
	for i := 1; i <= total; i++ {
		var r result
		switch k := rng.IntN(20); {
		case k == 0:
			r = h.request("/v1/chat/completions", over)
			bytesIn += int64(len(over))
			if r.status != 413 {
				t.Fatalf("request %d: oversized body got %+v", i, r.status)
			}
		case k == 1:
			r = h.request("/v1/chat/completions", bad)
			bytesIn += int64(len(bad))
			if r.status != 400 {
				t.Fatalf("request %d: bad body got %d", i, r.status)
			}
		case k == 2:
			r = h.request("/v1/completions", plain)
			bytesIn += int64(len(plain))
			if !r.forwarded || !bytes.Equal(r.body, plain) {
				t.Fatalf("request %d: plain body", i)
			}
		case k == 3 && i%10 == 0:
			r = h.request("/v1/completions", many)
			bytesIn += int64(len(many))
			if !r.forwarded || string(r.body) != "{}" {
				t.Fatalf("request %d: many kv_hints members got %d", i, r.status)
			}
		default:
			n := sizes[rng.IntN(len(sizes))]
			r = h.request("/v1/chat/completions", bodies[n])
			bytesIn += int64(n)
			if !r.forwarded || len(r.body) != n-len(`"kv_hints":`+refHint+`,`) {
				t.Fatalf("request %d (%d bytes): %+v", i, n, r.status)
			}
		}
		if i%1000 == 0 {
			marks = append(marks, h.memSize())
		}
	}
	mib := func(b uint32) float64 { return float64(b) / (1 << 20) }
	t.Logf("linear memory: %.1f MiB after configure; after each 1,000 requests (MiB): %.1f", mib(start), func() []float64 {
		var f []float64
		for _, m := range marks {
			f = append(f, mib(m))
		}
		return f
	}())
	t.Logf("%d requests, %.1f GiB of bodies", total, float64(bytesIn)/(1<<30))
	if grown := marks[len(marks)-1] - start; grown > 1<<20 {
		t.Errorf("linear memory grew by %.1f MiB after configure", mib(grown))
	}
	if half := marks[len(marks)/2-1]; marks[len(marks)-1] != half {
		t.Errorf("linear memory still growing: %d bytes after 5,000 requests, %d after 10,000", half, marks[len(marks)-1])
	}
	if h.values["trtllm_kv_hints_ignored_total.reason.untrusted"] == 0 {
		t.Error("no hints counted")
	}
}

// TestMemoryFollowsBodyLimit sends bodies of growing size, up to the
// configured limit, which is how a guest that grew its buffers step by
// step reached five times the limit: linear memory must stay where start-up
// put it, two buffers of the limit and the runtime. Bodies made of nothing
// but kv_hints members, up to the limit, follow in both trust modes: their
// removal needs no memory per member (it once took 50 MiB for 4 MiB of
// them, and trapped out of memory at a 32 MiB limit).
func TestMemoryFollowsBodyLimit(t *testing.T) {
	for _, limit := range []int{4 << 20, 32 << 20} {
		for _, trust := range []string{"", `,"trust_kv_hints":true`} {
			h := newWzHost(t, context.Background(), `{"max_body_bytes":`+strconv.Itoa(limit)+trust+`}`)
			start := h.memSize()
			for k := 1; k <= 8; k++ {
				n := limit * k / 8
				want := n - len(`"kv_hints":`+refHint+`,`)
				if trust != "" {
					want = n // admitted, already canonical
				}
				if r := h.request("/v1/completions", hintBody(n)); !r.forwarded || len(r.body) != want {
					t.Fatalf("limit %d, body %d: %+v", limit, n, r.status)
				}
			}
			for _, n := range []int{limit / 2, limit} {
				if r := h.request("/v1/completions", manyHints(n)); !r.forwarded || string(r.body) != "{}" {
					t.Fatalf("limit %d, %d bytes of kv_hints members: %d", limit, n, r.status)
				}
			}
			end := h.memSize()
			t.Logf("limit %d MiB%s: linear memory %.1f MiB after configure, %.1f MiB after bodies of 1/8 to 8/8 of it",
				limit>>20, trust, float64(start)/(1<<20), float64(end)/(1<<20))
			// What the guest says it needs (the sidecar sizes instances by it).
			if m := filterspec.MemoryAt(limit); uint64(start) > m.WorkingSet() || uint64(start) < m.Reserved {
				t.Errorf("limit %d: %d bytes after configure, outside filterspec.MemoryAt's reserved %d to working set %d", limit, start, m.Reserved, m.WorkingSet())
			}
			if end-start > 1<<20 {
				t.Errorf("limit %d%s: linear memory grew by %d bytes", limit, trust, end-start)
			}
			h.close()
		}
	}
}

// TestNoPollOneoff checks that the guest never calls WASI poll_oneoff (a
// stub in Envoy) while it configures and serves mixed requests.
func TestNoPollOneoff(t *testing.T) {
	calls := map[string]int{}
	ctx := experimental.WithFunctionListenerFactory(context.Background(),
		experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
			if def.ModuleName() != "wasi_snapshot_preview1" {
				return nil
			}
			name := def.Name()
			return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
				calls[name]++
			})
		}))
	h := newWzHost(t, ctx, `{"trust_kv_hints":true}`)
	defer h.close()
	for i := 0; i < 300; i++ {
		h.request("/", hintBody([]int{400, 64 << 10, 1 << 20, 4 << 20}[i%4]))
		h.request("/", []byte(`{"a":`))
	}
	t.Logf("WASI calls: %v", calls)
	if calls["poll_oneoff"] != 0 {
		t.Errorf("poll_oneoff called %d times", calls["poll_oneoff"])
	}
}
