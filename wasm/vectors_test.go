package wasm

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/kvgate/kvgate/filter"
	"github.com/kvgate/kvgate/metricname"
	"github.com/kvgate/kvgate/tests/vectors"
)

// readCounters reads the vector counters through get (by metric name).
func readCounters(get func(name string) int64) vectors.Counters {
	ig := func(r string) int {
		return int(get(metricname.Encode(filter.MetricIgnored, metricname.Label{Name: "reason", Value: r})))
	}
	rej := 0
	for _, s := range filter.RejectStatuses {
		rej += int(get(metricname.Encode(filter.MetricRejected, metricname.Label{Name: "status", Value: strconv.Itoa(s)})))
	}
	return vectors.Counters{
		Untrusted:      ig("untrusted"),
		UnknownVersion: ig("unknown_version"),
		Oversized:      ig("oversized"),
		Malformed:      ig("malformed"),
		Admitted:       int(get(metricname.Encode(filter.MetricAdmitted))),
		RejectedBodies: rej,
	}
}

func sub(a, b vectors.Counters) vectors.Counters {
	return vectors.Counters{
		Untrusted:      a.Untrusted - b.Untrusted,
		UnknownVersion: a.UnknownVersion - b.UnknownVersion,
		Oversized:      a.Oversized - b.Oversized,
		Malformed:      a.Malformed - b.Malformed,
		Admitted:       a.Admitted - b.Admitted,
		RejectedBodies: a.RejectedBodies - b.RejectedBodies,
	}
}

// result is what a host did with one request.
type result struct {
	forwarded bool
	body      []byte
	status    int // local reply status, 0 if none
	reply     []byte
	ctype     string // local reply content-type
}

// checkVector compares a result with the case's expectation.
func checkVector(c *vectors.Case, r result, got vectors.Counters) string {
	e := &c.Expect
	switch e.Action {
	case "forward":
		if !r.forwarded {
			return "not forwarded (status " + strconv.Itoa(r.status) + " " + string(r.reply) + ")"
		}
		if e.ForwardedBody != nil && !bytes.Equal(r.body, e.ForwardedBody) {
			return "forwarded body differs: got " + trunc(r.body) + " want " + trunc(e.ForwardedBody)
		}
	case "reject":
		if r.forwarded || r.status != e.Status {
			return "got status " + strconv.Itoa(r.status) + " forwarded=" + strconv.FormatBool(r.forwarded) + ", want " + strconv.Itoa(e.Status)
		}
		var eb struct{ Error struct{ Code int } }
		if err := json.Unmarshal(r.reply, &eb); err != nil || eb.Error.Code != e.Status || r.ctype != "application/json" {
			return "bad error reply " + r.ctype + " " + string(r.reply)
		}
	}
	if got != e.Counters {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(e.Counters)
		return "counters " + string(gb) + " want " + string(wb)
	}
	return ""
}

func trunc(b []byte) string {
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + "...(" + strconv.Itoa(len(b)) + " bytes)"
	}
	return strconv.Quote(string(b))
}

// groupByConfig orders cases by configuration and sender (the properties
// a host supplies), keeping file order inside.
func groupByConfig(cases []vectors.Case) (order []string, groups map[string][]*vectors.Case) {
	groups = map[string][]*vectors.Case{}
	for i := range cases {
		k := cases[i].FilterConfig()
		if s := cases[i].Sender; s != nil {
			b, _ := json.Marshal(s)
			k += "\n" + string(b)
		}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], &cases[i])
	}
	return order, groups
}

// chunks splits a body the way a mode delivers it.
func chunks(body []byte, n int) [][]byte {
	if n <= 1 {
		return [][]byte{body}
	}
	var out [][]byte
	for i := 0; i < n; i++ {
		out = append(out, body[i*len(body)/n:(i+1)*len(body)/n])
	}
	return out
}
