package filterspec

import (
	"strconv"

	"github.com/kvgate/kvgate/kvhints"
	"github.com/kvgate/kvgate/metricname"
)

// Metric family names (docs/spec.md, Metrics).
const (
	MetricIgnored     = "trtllm_kv_hints_ignored_total"
	MetricAdmitted    = "kvgate_kv_hints_admitted_total"
	MetricRejected    = "kvgate_bodies_rejected_total"
	MetricUninspected = "kvgate_requests_uninspected_total"
	MetricDetected    = "kvgate_kv_hints_detected_total"
	MetricRefused     = "kvgate_requests_refused_total"
)

// Family is one counter family the filter defines: its name, its help
// text, and its one label (if any) with every value the filter counts
// under. Each (family, value) is one series, which the guest defines
// through proxy_define_metric under its metricname.Encode name.
type Family struct {
	Name string
	// Help is the text a host that exports help texts prints (the
	// sidecar's /metrics); proxy-wasm carries none, and Envoy prints none.
	Help string
	// Label is the label's name; "" for a family without labels, which
	// has one series.
	Label string
	// Values are the label's values, in definition order.
	Values []string
}

// FamilyID names a family: its index in Families.
type FamilyID uint8

// The families, in definition order.
const (
	// Ignored counts hints removed instead of forwarded, label reason
	// (kvhints.Reasons, in their order).
	Ignored FamilyID = iota
	// Admitted counts admitted envelopes.
	Admitted
	// Rejected counts bodies answered locally, label status
	// (RejectStatuses, in their order).
	Rejected
	// Uninspected counts requests passed without inspection, label
	// protocol.
	Uninspected
	// Refused counts requests refused for their protocol, label protocol.
	Refused
	// Detected counts, in detect mode, the hints enforcing would have
	// ignored, label reason (kvhints.Reasons); they were forwarded.
	Detected
	numFamilies
)

// RejectStatuses are the status label values of Rejected.
var RejectStatuses = [...]int{400, 413, 415}

// families is the table every host reads: adding a metric means a row
// here and the place in filter/ that counts it.
var families = [numFamilies]Family{
	Ignored: {MetricIgnored,
		"Requests whose kv_hints member was removed instead of forwarded, by reason: " +
			"untrusted (the sender may not send hints), unknown_version, oversized or malformed " +
			"(a trusted sender's envelope that admission discarded). Counted once per request, " +
			"under the name and labels the worker itself uses.",
		"reason", reasonValues()},
	Admitted: {MetricAdmitted,
		"Requests whose kv_hints envelope was admitted and forwarded to the worker in canonical form.",
		"", nil},
	Rejected: {MetricRejected,
		"Request bodies the filter refused without forwarding them, by HTTP status: " +
			"400 (not one UTF-8 JSON value), 413 (over max_body_bytes), 415 (Content-Encoding other than identity).",
		"status", statusValues()},
	Uninspected: {MetricUninspected,
		"Requests passed to the worker without inspection, by protocol: grpc (a gRPC-labelled " +
			"body whose first bytes cannot be JSON the worker would read; docs/spec.md).",
		"protocol", []string{"grpc"}},
	Refused: {MetricRefused,
		"Requests refused for their protocol, by protocol: grpc (under \"grpc\": \"refuse\", " +
			"answered with grpc-status 7).",
		"protocol", []string{"grpc"}},
	Detected: {MetricDetected,
		"In detect mode, requests whose kv_hints member enforcing would have removed, by the same reasons " +
			"as trtllm_kv_hints_ignored_total; the hint was forwarded as received.",
		"reason", reasonValues()},
}

func reasonValues() []string {
	v := make([]string, len(kvhints.Reasons))
	for i, r := range kvhints.Reasons {
		v[i] = r.String()
	}
	return v
}

func statusValues() []string {
	v := make([]string, len(RejectStatuses))
	for i, s := range RejectStatuses {
		v[i] = strconv.Itoa(s)
	}
	return v
}

// seriesBase[f] is the index of f's first series in MetricNames' order.
var seriesBase = func() (b [numFamilies + 1]int) {
	for f, fam := range families {
		b[f+1] = b[f] + max(len(fam.Values), 1)
	}
	return b
}()

// Families returns the table of families, in definition order.
func Families() []Family { return families[:] }

// Family returns the row of f.
func (f FamilyID) Family() Family { return families[f] }

// Series returns the index, in MetricNames' order, of f's series with the
// label value Values[v]; v is 0 for a family without labels.
func (f FamilyID) Series(v int) int { return seriesBase[f] + v }

// NumSeries is the number of series the filter defines.
func NumSeries() int { return seriesBase[numFamilies] }

// MetricNames returns every series name the filter defines, in definition
// order: each family's series in turn, in the order of its values.
func MetricNames() []string {
	names := make([]string, 0, NumSeries())
	for _, fam := range families {
		if fam.Label == "" {
			names = append(names, metricname.Encode(fam.Name))
			continue
		}
		for _, v := range fam.Values {
			names = append(names, metricname.Encode(fam.Name, metricname.Label{Name: fam.Label, Value: v}))
		}
	}
	return names
}

// MetricHelp returns the help text of a family the filter defines, or ""
// for any other name.
func MetricHelp(family string) string {
	for _, fam := range families {
		if fam.Name == family {
			return fam.Help
		}
	}
	return ""
}

// StatsTag is one entry of Envoy's stats_config.stats_tags.
type StatsTag struct{ TagName, Regex string }

// EnvoyStatsTags returns the stats_tags an Envoy bootstrap needs to show
// every labelled family as the sidecar does: one per family with a label,
// in definition order (metricname.Regex).
func EnvoyStatsTags() []StatsTag {
	var tags []StatsTag
	for _, fam := range families {
		if fam.Label != "" {
			tags = append(tags, StatsTag{fam.Label, metricname.Regex(fam.Name, fam.Label)})
		}
	}
	return tags
}
