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

	MetricRouterOnlyRemoved  = "kvgate_router_only_removed_total"
	MetricRouterOnlyDetected = "kvgate_router_only_detected_total"
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
	// Refused counts requests refused without a look at their body,
	// label reason (RefusedReasons).
	Refused
	// Detected counts, in detect mode, the hints enforcing would have
	// ignored, label reason (kvhints.Reasons); they were forwarded.
	Detected
	numFamilies
)

// The reason label values of Refused, in their order.
const (
	RefusedGRPC       = 0 // "grpc": under "grpc": "refuse"
	RefusedRouterOnly = 1 // "router_only": under router_only.untrusted: "refuse"
)

// RejectStatuses are the status label values of Rejected.
var RejectStatuses = [...]int{400, 413, 415}

// families is the table every host reads: adding a metric means a row here,
// the place in filter/ that counts it, and go generate (internal/statstags).
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
		"Requests refused, by reason: grpc (a gRPC request under \"grpc\": \"refuse\", " +
			"answered with grpc-status 7), router_only (an untrusted request carrying a router-only field under " +
			"router_only.untrusted: \"refuse\", answered with 400).",
		"reason", []string{"grpc", "router_only"}},
	Detected: {MetricDetected,
		"In detect mode, requests whose kv_hints member enforcing would have removed, by the same reasons " +
			"as trtllm_kv_hints_ignored_total; the hint was forwarded as received.",
		"reason", reasonValues()},
}

// routerOnlyFamilies are the families whose series the configuration
// makes: one per router-only field (RouterOnly.Fields), label field
// (metricname.PathLabel). They follow the fixed series, removed then
// detected (Config.MetricNames).
var routerOnlyFamilies = [2]Family{
	{MetricRouterOnlyRemoved,
		"Router-only fields removed from untrusted requests, by field: the configured member path or header " +
			"name (router_only). Counted once per request and field, however often the field occurred.",
		metricname.PathLabel, nil},
	{MetricRouterOnlyDetected,
		"In detect mode, router-only fields that enforcing would have removed from untrusted requests (or " +
			"refused them for), by field; they were forwarded.",
		metricname.PathLabel, nil},
}

// MetricNames returns every series name the configuration makes the filter
// define: the fixed ones (MetricNames), then one per router-only field
// removed and one per field detected, in Fields' order.
func (c *Config) MetricNames() []string {
	names := MetricNames()
	for _, fam := range routerOnlyFamilies {
		for _, f := range c.RouterOnly.Fields() {
			names = append(names, metricname.Encode(fam.Name, metricname.Label{Name: fam.Label, Value: f}))
		}
	}
	return names
}

// RouterOnlySeries returns the index, in c.MetricNames' order, of field's
// series: detected or removed.
func (c *Config) RouterOnlySeries(detected bool, field int) int {
	i := NumSeries() + field
	if detected {
		i += len(c.RouterOnly.Fields())
	}
	return i
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

// RouterOnlyFamilies returns the families of the router-only fields,
// whose label values the configuration gives (Config.MetricNames).
func RouterOnlyFamilies() []Family { return routerOnlyFamilies[:] }

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
	for _, fam := range append(families[:], routerOnlyFamilies[:]...) {
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
	for _, fam := range append(families[:], routerOnlyFamilies[:]...) {
		if fam.Label != "" {
			tags = append(tags, StatsTag{fam.Label, metricname.Regex(fam.Name, fam.Label)})
		}
	}
	return tags
}
