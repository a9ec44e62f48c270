package wasm

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
)

const routerID = "spiffe://cluster.local/ns/llm/sa/router"

// hint is a canonical envelope: admitted, it is forwarded byte for byte.
const hint = `{"protocol_version":"0.1","message_id":"m1","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

// sendersDoc is a configuration with n trusted_senders rules, the router's
// principal last.
func sendersDoc(n int) string {
	var rules []string
	for i := 0; i < n-1; i++ {
		is := strconv.Itoa(i)
		switch i % 4 {
		case 0:
			rules = append(rules, `{"principal":"spiffe://cluster.local/ns/team`+is+`/sa/router"}`)
		case 1:
			rules = append(rules, `{"principal":"spiffe://cluster.local/ns/batch`+is+`/sa/*","source_cidr":"10.`+strconv.Itoa(i%250)+`.0.0/16"}`)
		case 2:
			rules = append(rules, `{"dns_name":"router`+is+`.llm.svc"}`)
		case 3:
			rules = append(rules, `{"source_cidr":"192.168.`+strconv.Itoa(i%250)+`.0/24"}`)
		}
	}
	rules = append(rules, `{"principal":"`+routerID+`"}`)
	return `{"trusted_senders":[` + strings.Join(rules, ",") + `]}`
}

func setSender(h *wzHost, mtls bool, uri, src string) {
	h.props = map[string][]byte{filterspec.PropertyMTLS: {0}, filterspec.PropertySourceAddress: []byte(src)}
	if mtls {
		h.props[filterspec.PropertyMTLS] = []byte{1}
	}
	if uri != "" {
		h.props[filterspec.PropertyURISAN] = []byte(uri)
	}
}

// The compiled module reads the sender's properties through
// proxy_get_property with NUL-separated paths and admits only the trusted
// sender's hint.
func TestModuleTrustedSenders(t *testing.T) {
	h := newWzHost(t, context.Background(), sendersDoc(16))
	defer h.close()
	body := []byte(`{"model":"m","kv_hints":` + hint + `}`)
	admitted, stripped := string(body), `{"model":"m"}`
	for _, c := range []struct {
		name     string
		mtls     bool
		uri, src string
		want     string
	}{
		{"router", true, routerID, "10.0.0.1:1000", admitted},
		{"router, no verified certificate", false, routerID, "10.0.0.1:1000", stripped},
		{"other workload", true, "spiffe://cluster.local/ns/llm/sa/app", "10.0.0.1:1000", stripped},
		{"listed source address", false, "", "192.168.3.9:1000", admitted},
		{"no properties", false, "", "", stripped},
	} {
		setSender(h, c.mtls, c.uri, c.src)
		if c.src == "" {
			h.props = nil
		}
		reads := h.propReads
		r := h.request("/v1/chat/completions", body)
		if !r.forwarded || string(r.body) != c.want {
			t.Errorf("%s: forwarded %v %s (status %d %s), want %s; logs %q", c.name, r.forwarded, r.body, r.status, r.reply, c.want, h.logs)
		}
		if h.propReads == reads {
			t.Errorf("%s: no property read", c.name)
		}
	}
	for _, l := range h.logs {
		if strings.Contains(l, "spiffe://cluster.local/ns/llm/sa/app") || strings.Contains(l, "192.168.3.9") {
			t.Errorf("a property value was logged: %q", l)
		}
	}
	// Without rules the module reads no property.
	h2 := newWzHost(t, context.Background(), `{}`)
	defer h2.close()
	setSender(h2, true, routerID, "10.0.0.1:1")
	h2.request("/v1/chat/completions", body)
	if h2.propReads != 0 {
		t.Errorf("%d property reads without trusted_senders", h2.propReads)
	}
}

// BenchmarkSenderRules is a small hinted request through the compiled
// module under wazero with 0, 1, 16 and 1,024 trusted_senders rules; the
// difference in guest-ns/op from "none" is what deciding the sender costs
// in the guest (host time, property copies included, is left out).
func BenchmarkSenderRules(b *testing.B) {
	body := []byte(`{"model":"m","kv_hints":` + hint + `,"prompt":"hi"}`)
	for _, n := range []int{0, 1, 16, 1024} {
		for _, who := range []string{"router", "client"} {
			name := "none"
			if n > 0 {
				name = strconv.Itoa(n) + "-rules"
			}
			b.Run(name+"/"+who, func(b *testing.B) {
				conf := `{}`
				if n > 0 {
					conf = sendersDoc(n)
				}
				h := newWzHost(b, context.Background(), conf)
				defer h.close()
				if who == "router" {
					setSender(h, true, routerID, "10.0.0.1:41000")
				} else {
					setSender(h, false, "", "[2001:db8::1]:41000")
				}
				h.request("/v1/chat/completions", body)
				guestTime(b, h, body)
			})
		}
	}
}
