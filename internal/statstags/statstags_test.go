package statstags

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/kvgate/kvgate/filterspec"
	"github.com/kvgate/kvgate/internal/repo"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFilesUpToDate: every file's generated block is what the metric
// table gives now.
func TestFilesUpToDate(t *testing.T) {
	r := root(t)
	tags := filterspec.EnvoyStatsTags()
	for _, f := range Files {
		src, err := os.ReadFile(filepath.Join(r, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := Rewrite(src, f.Format, tags)
		if err != nil {
			t.Errorf("%s: %v (its stats_tags belong between a %q and an %q line)", f.Path, err, Begin, End)
			continue
		}
		if !bytes.Equal(src, want) {
			t.Errorf("%s: the stats_tags between its %q and %q lines are stale: they are not filterspec.EnvoyStatsTags "+
				"(edit the metric table in filterspec/metrics.go, never the copy), %s\n"+
				"fix: run `%s` (or `go generate ./...`) at the repository root and commit the result",
				f.Path, Begin, End, firstDiff(src, want), Command)
		}
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; ; i++ {
		switch {
		case i >= len(g) || i >= len(w):
			return "the files differ in length"
		case g[i] != w[i]:
			return "line " + strconv.Itoa(i+1) + " is\n\t" + g[i] + "\nwant\n\t" + w[i]
		}
	}
}

// TestEveryCopyListed: no configuration outside Files carries stats_tags,
// so none goes stale unchecked.
func TestEveryCopyListed(t *testing.T) {
	r := root(t)
	listed := map[string]bool{}
	for _, f := range Files {
		listed[f.Path] = true
	}
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "pyvenv.cfg")); err == nil {
				return filepath.SkipDir // a Python virtual environment (.venv)
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".tpl", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r, p)
		if rel = filepath.ToSlash(rel); bytes.Contains(b, []byte("tag_name")) && !listed[rel] {
			t.Errorf("%s has stats_tags but is not in statstags.Files: mark its list with %q and %q lines, add it to Files and run `%s`",
				rel, Begin, End, Command)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// odd are tags that need quoting in every format.
var odd = []filterspec.StatsTag{
	{TagName: "yes", Regex: `^a'b"c\.d`},
	{TagName: "x-y", Regex: "^a`b\\.c"},
	{TagName: "reason", Regex: `^plain$`},
}

// TestGeneratedParses: each format's block, rewritten into each file,
// reads back as the tags (through YAML, JSON or the template engine), for
// the table's tags and for ones that need quoting.
func TestGeneratedParses(t *testing.T) {
	r := root(t)
	for _, tags := range [][]filterspec.StatsTag{filterspec.EnvoyStatsTags(), odd} {
		for _, f := range Files {
			src, err := os.ReadFile(filepath.Join(r, filepath.FromSlash(f.Path)))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Rewrite(src, f.Format, tags)
			if err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			got, err := readBack(f.Format, out)
			if err != nil {
				t.Errorf("%s: %v", f.Path, err)
			} else if !reflect.DeepEqual(got, tags) {
				t.Errorf("%s: read back %q, want %q", f.Path, got, tags)
			}
		}
	}
}

type bootstrap struct {
	StatsConfig struct {
		StatsTags []map[string]any `json:"stats_tags"`
	} `json:"stats_config"`
}

// tags returns the bootstrap's stats_tags. Each must be a tag_name and a
// regex and nothing else, as the generator writes them: a member beside
// them (a fixed_value, say) is not the metric table's.
func (b bootstrap) tags() ([]filterspec.StatsTag, error) {
	var tags []filterspec.StatsTag
	for i, t := range b.StatsConfig.StatsTags {
		name, okName := t["tag_name"].(string)
		re, okRe := t["regex"].(string)
		if !okName || !okRe || len(t) != 2 {
			return nil, fmt.Errorf("stats_tags[%d] is %v: want a tag_name and a regex, nothing else", i, t)
		}
		tags = append(tags, filterspec.StatsTag{TagName: name, Regex: re})
	}
	return tags, nil
}

func readBack(f Format, file []byte) ([]filterspec.StatsTag, error) {
	var boot bootstrap
	switch f {
	case YAML:
		if err := yaml.Unmarshal(file, &boot); err != nil {
			return nil, err
		}
		return boot.tags()
	case ConfigMapJSON:
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(file, &cm); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(cm.Data["custom_bootstrap.json"]), &boot); err != nil {
			return nil, err
		}
		return boot.tags()
	default: // Helm: run the block with the few Sprig functions it calls.
		s := string(file)
		block := s[strings.Index(s, Begin):strings.Index(s, End)]
		block = block[strings.Index(block, "\n"):strings.LastIndex(block, "\n")]
		var tags []filterspec.StatsTag
		tmpl, err := template.New("").Funcs(template.FuncMap{
			"list":   func(v ...any) []any { return v },
			"append": func(l []any, v any) []any { return append(l[:len(l):len(l)], v) },
			"dict": func(kv ...any) map[string]any {
				m := map[string]any{}
				for i := 0; i+1 < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			},
			"out": func(l []any) string {
				for _, d := range l {
					m := d.(map[string]any)
					tags = append(tags, filterspec.StatsTag{TagName: m["tag_name"].(string), Regex: m["regex"].(string)})
				}
				return ""
			},
		}).Parse(block + "{{ out $tags }}")
		if err != nil {
			return nil, err
		}
		var out strings.Builder
		if err := tmpl.Execute(&out, nil); err != nil {
			return nil, err
		}
		if strings.TrimSpace(out.String()) != "" {
			return nil, errors.New("the block renders text: " + strconv.Quote(out.String()))
		}
		return tags, nil
	}
}

// TestRewriteMarkers: a file without both markers, in order and once
// each, is an error, not a guess.
func TestRewriteMarkers(t *testing.T) {
	tags := filterspec.EnvoyStatsTags()
	for _, src := range []string{
		"a: 1\n",
		"# " + Begin + "\n",
		"# " + End + "\n# " + Begin + "\n",
		"# " + Begin + "\n# " + Begin + "\n# " + End + "\n",
		"# " + Begin + "\n# " + End + "\n# " + End + "\n",
	} {
		if _, err := Rewrite([]byte(src), YAML, tags); err == nil {
			t.Errorf("Rewrite(%q): no error", src)
		}
	}
	got, err := Rewrite([]byte("x:\n  y:\n    # "+Begin+"\n    - stale\n    # "+End+"\nz: 1\n"), YAML, tags[:1])
	want := "x:\n  y:\n    # " + Begin + "\n    - tag_name: " + tags[0].TagName + "\n      regex: '" + tags[0].Regex + "'\n    # " + End + "\nz: 1\n"
	if err != nil || string(got) != want {
		t.Errorf("Rewrite = %q, %v\nwant %q", got, err, want)
	}
}
