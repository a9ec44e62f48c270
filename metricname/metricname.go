// Package metricname is the one rule for carrying Prometheus labels in the
// flat metric names of the proxy-wasm ABI.
//
// proxy_define_metric takes a name and no labels, so the guest appends each
// label to the family name as ".label.value". Envoy splits the labels back
// out with the stats_tags regexes in envoy/ (see Regex), and the sidecar with
// Decode, so a scrape of either host shows the same series.
//
// Family names use [a-zA-Z0-9_:] (no dots); label names [a-zA-Z_][a-zA-Z0-9_]*
// and values [a-zA-Z0-9_] (no dots), so a name splits one way only. The one
// exception is PathLabel, whose value is a configured field name (a member
// path such as "nvext.dp_rank" or a header such as "x-dp-rank"): it may hold
// '.' and '-', and it is always a name's last label, so that it takes the
// rest of the name.
package metricname

import "strings"

// Label is one Prometheus label of a series.
type Label struct{ Name, Value string }

// Encode returns the proxy-wasm metric name of a series.
func Encode(family string, labels ...Label) string {
	n := len(family)
	for _, l := range labels {
		n += 2 + len(l.Name) + len(l.Value)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(family)
	for _, l := range labels {
		b.WriteByte('.')
		b.WriteString(l.Name)
		b.WriteByte('.')
		b.WriteString(l.Value)
	}
	return b.String()
}

// PathLabel is the label whose value may hold '.' and '-' (see the
// package comment); it must be a series' last label.
const PathLabel = "field"

// Decode splits a proxy-wasm metric name into its family and labels.
// ok is false when the name does not follow the rule.
func Decode(name string) (family string, labels []Label, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) == 0 || !validFamily(parts[0]) {
		return "", nil, false
	}
	for i := 1; i < len(parts); i += 2 {
		if parts[i] == PathLabel && i+1 < len(parts) {
			for _, seg := range parts[i+1:] {
				if !validPathSegment(seg) {
					return "", nil, false
				}
			}
			return parts[0], append(labels, Label{Name: PathLabel, Value: strings.Join(parts[i+1:], ".")}), true
		}
		if i+1 == len(parts) {
			return "", nil, false
		}
		if !validLabel(parts[i]) || !validValue(parts[i+1]) {
			return "", nil, false
		}
		labels = append(labels, Label{Name: parts[i], Value: parts[i+1]})
	}
	return parts[0], labels, true
}

// Regex returns the Envoy stats_tags regex that extracts label from the
// metric names of family, as Envoy sees them: under the "wasmcustom."
// namespace that it gives every stat a wasm module defines. The first group
// is the part removed from the name, the second the label's value.
func Regex(family, label string) string {
	if label == PathLabel {
		return `^wasmcustom\.` + family + `(?:\.[a-zA-Z_][a-zA-Z0-9_]*\.[a-zA-Z0-9_]+)*?(\.` + label + `\.([a-zA-Z0-9_.-]+))$`
	}
	return `^wasmcustom\.` + family + `(?:\.[a-zA-Z_][a-zA-Z0-9_]*\.[a-zA-Z0-9_]+)*?(\.` + label + `\.([a-zA-Z0-9_]+))`
}

func validFamily(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 && !(s[0] >= '0' && s[0] <= '9')
}

func validLabel(s string) bool {
	return s != "" && validValue(s) && !(s[0] >= '0' && s[0] <= '9')
}

// validPathSegment: one dot-separated part of a PathLabel value.
func validPathSegment(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

func validValue(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}
