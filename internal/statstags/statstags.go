// Package statstags writes Envoy's stats_tags, the regexes that give the
// filter's counters their Prometheus labels, into every configuration that
// carries them. The tags come from the metric table
// (filterspec.EnvoyStatsTags); each file in Files holds them between a line
// with Begin and a line with End, and everything between those lines is
// generated, in the file's Format and at the Begin line's indentation.
//
// go generate ./internal/statstags (or go generate ./... at the repository
// root) rewrites the files; TestFilesUpToDate fails when one is stale.
package statstags

//go:generate go run ./gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/filterspec"
)

// The marker texts; a marker line holds one of them inside whatever comment
// its file's syntax has, and nothing the generator keeps apart from it.
const (
	Begin = "BEGIN generated stats_tags"
	End   = "END generated stats_tags"
)

// Command is what rewrites the files, for messages.
const Command = "go generate ./internal/statstags"

// Format is the shape of a file's generated block.
type Format uint8

const (
	// YAML is the items of an Envoy bootstrap's stats_config.stats_tags
	// sequence: the Begin line follows "stats_tags:".
	YAML Format = iota
	// ConfigMapJSON is a ConfigMap data entry custom_bootstrap.json holding
	// the JSON bootstrap fragment Istio merges into the sidecar's bootstrap
	// (sidecar.istio.io/bootstrapOverride).
	ConfigMapJSON
	// Helm is Helm template actions that set $tags to the list of tags, as
	// dicts of tag_name and regex; the template renders them afterwards.
	Helm
)

// File is one file carrying the tags, its Path relative to the repository
// root.
type File struct {
	Path   string
	Format Format
}

// Files are the files carrying the tags. envoy/envoy-native.yaml has none:
// the native module defines its metrics with Envoy's own tags.
var Files = []File{
	{"envoy/envoy.yaml", YAML},
	{"envoy/envoy-ecds.yaml", YAML},
	{"envoy/envoy-mtls.yaml", YAML},
	{"envoy/istio/stats.yaml", ConfigMapJSON},
	{"deploy/compose/envoy.yaml", YAML},
	{"deploy/helm/kvgate/templates/istio.yaml", Helm},
}

// Rewrite returns src with the lines between its Begin and End lines
// replaced by tags in format f, indented as the Begin line is.
func Rewrite(src []byte, f Format, tags []filterspec.StatsTag) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, Begin):
			if begin >= 0 {
				return nil, errors.New("more than one " + strconv.Quote(Begin) + " line")
			}
			begin = i
		case strings.Contains(l, End):
			if end >= 0 {
				return nil, errors.New("more than one " + strconv.Quote(End) + " line")
			}
			end = i
		}
	}
	if begin < 0 || end < 0 || end < begin {
		return nil, errors.New("no " + strconv.Quote(Begin) + " line followed by an " + strconv.Quote(End) + " line")
	}
	indent := lines[begin][:len(lines[begin])-len(strings.TrimLeft(lines[begin], " \t"))]
	block, err := Block(f, tags)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, l := range lines[:begin+1] {
		out.WriteString(l)
	}
	for l := range strings.Lines(block) {
		out.WriteString(indent)
		out.WriteString(l)
	}
	for _, l := range lines[end:] {
		out.WriteString(l)
	}
	return out.Bytes(), nil
}

// Block returns the generated lines for tags in format f, unindented.
func Block(f Format, tags []filterspec.StatsTag) (string, error) {
	var b strings.Builder
	switch f {
	case YAML:
		for _, t := range tags {
			b.WriteString("- tag_name: " + yamlName(t.TagName) + "\n")
			b.WriteString("  regex: " + yamlQuote(t.Regex) + "\n")
		}
	case ConfigMapJSON:
		type tag struct {
			TagName string `json:"tag_name"`
			Regex   string `json:"regex"`
		}
		var doc struct {
			StatsConfig struct {
				StatsTags []tag `json:"stats_tags"`
			} `json:"stats_config"`
		}
		for _, t := range tags {
			doc.StatsConfig.StatsTags = append(doc.StatsConfig.StatsTags, tag{t.TagName, t.Regex})
		}
		var js bytes.Buffer
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false)
		enc.SetIndent("  ", "  ")
		if err := enc.Encode(doc); err != nil {
			return "", err
		}
		b.WriteString("custom_bootstrap.json: |\n  ")
		b.Write(js.Bytes())
	case Helm:
		b.WriteString("{{- $tags := list }}\n")
		for _, t := range tags {
			b.WriteString(`{{- $tags = append $tags (dict "tag_name" ` + templateQuote(t.TagName) +
				` "regex" ` + templateQuote(t.Regex) + ") }}\n")
		}
	default:
		return "", errors.New("statstags: unknown format " + strconv.Itoa(int(f)))
	}
	return b.String(), nil
}

// yamlQuote returns s as a YAML single-quoted scalar, which has no escapes
// but the doubled quote, so a regex reads as written.
func yamlQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// yamlName returns a label name as a YAML scalar: plain, as a label name
// reads the same plain, unless YAML 1.1 would read it as other than a
// string.
func yamlName(s string) string {
	switch strings.ToLower(s) {
	case "", "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return yamlQuote(s)
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return yamlQuote(s)
		}
	}
	return s
}

// templateQuote returns s as a Go template string constant: raw when it
// holds a backslash, so a regex reads as written, else interpreted.
func templateQuote(s string) string {
	if strings.Contains(s, `\`) && !strings.ContainsAny(s, "`\r") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// Generate rewrites every file of Files under root, writing only the files
// whose block changed, and returns their paths.
func Generate(root string) (changed []string, err error) {
	tags := filterspec.EnvoyStatsTags()
	for _, f := range Files {
		name := filepath.Join(root, filepath.FromSlash(f.Path))
		src, err := os.ReadFile(name)
		if err != nil {
			return changed, err
		}
		out, err := Rewrite(src, f.Format, tags)
		if err != nil {
			return changed, errors.New(f.Path + ": " + err.Error())
		}
		if bytes.Equal(out, src) {
			continue
		}
		if err := os.WriteFile(name, out, 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, f.Path)
	}
	return changed, nil
}
