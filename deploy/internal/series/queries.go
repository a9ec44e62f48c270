package series

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Query is one PromQL expression and where it comes from.
type Query struct {
	Where, Expr string
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel.
type Panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Datasource  json.RawMessage          `json:"datasource"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	Panels      []Panel                  `json:"panels"`
	Targets     []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
}

// ReadDashboard reads a dashboard JSON file.
func ReadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return d, nil
}

// Queries returns every query of the dashboard's panels and variables,
// with Grafana's variables replaced (Expand).
func (d *Dashboard) Queries() []Query {
	var out []Query
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{fmt.Sprintf("panel %q %s", p.Title, t.RefID), Expand(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		// label_values(SELECTOR, label) names a series too.
		if inner, ok := strings.CutPrefix(q, "label_values("); ok {
			if i := strings.LastIndex(inner, ","); i > 0 {
				out = append(out, Query{"variable " + v.Name, Expand(inner[:i])})
			}
		}
	}
	return out
}

// Expand replaces the Grafana variables the dashboard uses with values
// PromQL accepts.
func Expand(expr string) string {
	return strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$job", ".*").Replace(expr)
}

// RuleQueries returns the expressions of a rules file, parsed by
// Prometheus's rule parser, and the names its recording rules define.
func RuleQueries(path string) ([]Query, map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s: %v", path, errs)
	}
	var out []Query
	recorded := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{"rule " + r.Record + r.Alert, r.Expr})
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	return out, recorded, nil
}

// scrapeLabels are added by Prometheus to every scraped series.
var scrapeLabels = map[string]bool{"job": true, "instance": true}

// Check returns one problem per selector of the queries that names a
// series not in exported (and not recorded by a rule), or a label that
// series does not carry, or, for an equality matcher, a value never seen.
// It refuses queries that select no series by name.
func Check(queries []Query, exported Names, recorded map[string]bool) []string {
	p := parser.NewParser(parser.Options{})
	var problems []string
	for _, q := range queries {
		expr, err := p.ParseExpr(q.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.Where, err))
			continue
		}
		for _, ms := range parser.ExtractSelectors(expr) {
			name := ""
			for _, m := range ms {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				problems = append(problems, fmt.Sprintf("%s: a selector without a metric name", q.Where))
				continue
			}
			if recorded[name] {
				continue
			}
			ls, ok := exported[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: no host exports %s", q.Where, name))
				continue
			}
			for _, m := range ms {
				if m.Name == labels.MetricName || scrapeLabels[m.Name] {
					continue
				}
				vals, ok := ls[m.Name]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s (it has %s)", q.Where, name, m.Name, labelNames(ls)))
				case m.Type == labels.MatchEqual && !vals[m.Value]:
					problems = append(problems, fmt.Sprintf("%s: %s{%s=%q} is never exported", q.Where, name, m.Name, m.Value))
				}
			}
		}
	}
	return problems
}

func labelNames(ls Labels) string {
	var s []string
	for l := range ls {
		s = append(s, l)
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}
