package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/filterspec"
)

// configDoc is the configuration reference this test keeps honest.
const configDoc = "../../docs/configuration.md"

// docRow is one row of a reference table: | Name | Type | Required |
// Default | Description |, the name in backticks.
type docRow struct{ name, typ, required, def, desc string }

// docTable returns the rows of the first table after the heading, by name.
func docTable(t *testing.T, doc, heading string) map[string]docRow {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no heading %q", configDoc, heading)
	}
	rows := map[string]docRow{}
	inTable := false
	for _, line := range strings.Split(doc[i+len(heading)+2:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			if strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Fatalf("%s, %s: row with %d cells: %s", configDoc, heading, len(cells), line)
		}
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] == "Name" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		name := strings.Trim(cells[0], "`")
		if _, dup := rows[name]; dup {
			t.Errorf("%s, %s: %s twice", configDoc, heading, name)
		}
		rows[name] = docRow{name, cells[1], cells[2], cells[3], cells[4]}
	}
	if len(rows) == 0 {
		t.Fatalf("%s, %s: no table", configDoc, heading)
	}
	return rows
}

// firstCode is the first `code` span of s, and whether there is one.
func firstCode(s string) (string, bool) {
	m := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// knownList reads the "known: a, b, c" list of an unknown-member error.
func knownList(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("an unknown member was accepted")
	}
	_, list, ok := strings.Cut(err.Error(), "known: ")
	if !ok {
		t.Fatalf("unknown-member error without the known members: %v", err)
	}
	list, _, _ = strings.Cut(list, " (at byte")
	return strings.Split(list, ", ")
}

// pendingMembers are documented members that a branch being merged adds
// to filterspec.ParseConfig (issue 13, trusted senders); a pending member that
// the parser does not know yet is not an extra row. Remove an entry once
// the parser knows it; from then on it is checked like any other.
var pendingMembers = map[string]bool{}

// Every member filterspec.ParseConfig accepts has a row in the reference, and
// every row is a member it accepts; each default is the one an empty
// configuration gets, and each integer range is the one the parser
// enforces. The same for the members of a trusted_senders rule, once the
// parser has them.
func TestConfigDocPluginMembers(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := docTable(t, doc, "## Plugin configuration")
	_, err = filterspec.ParseConfig([]byte(`{"zz_no_such_member":1}`))
	known := knownList(t, err)
	for _, m := range known {
		if _, ok := rows[m]; !ok {
			t.Errorf("%s lacks a row for the plugin member %s", configDoc, m)
		}
	}
	var defaults map[string]any
	def := filterspec.DefaultConfig()
	if err := json.Unmarshal(def.JSON(), &defaults); err != nil {
		t.Fatal(err)
	}
	for name, r := range rows {
		if !slices.Contains(known, name) {
			if !pendingMembers[name] {
				t.Errorf("%s documents %s, which filterspec.ParseConfig does not accept", configDoc, name)
			}
			continue
		}
		if r.required != "no" {
			t.Errorf("%s: required %q; every member is optional", name, r.required)
		}
		code, hasCode := firstCode(r.def)
		switch v, ok := defaults[name]; {
		case ok:
			want, _ := json.Marshal(v)
			if !hasCode || code != string(want) {
				t.Errorf("%s: documented default %q, the parser's is %s", name, r.def, want)
			}
		case !strings.HasPrefix(r.def, "none"):
			t.Errorf("%s: documented default %q; an empty configuration leaves it unset (write \"none\")", name, r.def)
		}
		// The documented type: a boolean is accepted as such, an integer
		// range is exactly the parser's.
		switch {
		case r.typ == "boolean":
			if _, err := filterspec.ParseConfig([]byte(`{"` + name + `":true}`)); err != nil {
				t.Errorf("%s: documented boolean, but true is refused: %v", name, err)
			}
		case strings.HasPrefix(r.typ, "integer"):
			m := regexp.MustCompile(`^integer, (\d+) to (\d+)$`).FindStringSubmatch(r.typ)
			if m == nil {
				t.Errorf("%s: type %q, want \"integer, MIN to MAX\"", name, r.typ)
				continue
			}
			lo, _ := strconv.Atoi(m[1])
			hi, _ := strconv.Atoi(m[2])
			for v, ok := range map[int]bool{lo: true, hi: true, lo - 1: false, hi + 1: false} {
				_, err := filterspec.ParseConfig([]byte(`{"` + name + `":` + strconv.Itoa(v) + `}`))
				if (err == nil) != ok {
					t.Errorf("%s: documented range %d to %d, but %d gives %v", name, lo, hi, v, err)
				}
			}
		}
	}

	// The rule members, checked once the parser has trusted_senders.
	ruleRows := docTable(t, doc, "### `trusted_senders` rules")
	if !slices.Contains(known, "trusted_senders") {
		t.Logf("filterspec.ParseConfig has no trusted_senders yet: rule members %v not checked", slices.Sorted(maps.Keys(ruleRows)))
		return
	}
	_, err = filterspec.ParseConfig([]byte(`{"trusted_senders":[{"zz_no_such_member":"x"}]}`))
	ruleKnown := knownList(t, err)
	for _, m := range ruleKnown {
		if _, ok := ruleRows[m]; !ok {
			t.Errorf("%s lacks a row for the trusted_senders rule member %s", configDoc, m)
		}
	}
	for name := range ruleRows {
		if !slices.Contains(ruleKnown, name) {
			t.Errorf("%s documents the rule member %s, which the parser does not accept", configDoc, name)
		}
	}
}

// flagInfo is one flag as -h prints it.
type flagInfo struct {
	typ string // the type word ("" for a boolean)
	def string // the printed default, unquoted; "" when -h prints none
}

// helpFlags parses the sidecar's -h output.
func helpFlags(t *testing.T) map[string]flagInfo {
	t.Helper()
	var out bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, func(string) string { return "" }, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	flags := map[string]flagInfo{}
	head := regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	deflt := regexp.MustCompile(`\(default (.*)\)$`)
	var cur string
	for _, line := range strings.Split(out.String(), "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			cur = m[1]
			flags[cur] = flagInfo{typ: m[2]}
			continue
		}
		if m := deflt.FindStringSubmatch(line); m != nil && cur != "" {
			fi := flags[cur]
			if s, err := strconv.Unquote(m[1]); err == nil {
				fi.def = s
			} else {
				fi.def = m[1]
			}
			flags[cur] = fi
		}
	}
	if len(flags) == 0 {
		t.Fatalf("no flags in -h output:\n%s", out.String())
	}
	return flags
}

// Every sidecar flag has a row, and every row is a flag; each row's type
// and default are the flag's, and only -upstream is required.
func TestConfigDocSidecarFlags(t *testing.T) {
	// The default -cache-dir comes from $HOME (without $XDG_CACHE_HOME).
	t.Setenv("HOME", "/home/someone")
	t.Setenv("XDG_CACHE_HOME", "")
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := docTable(t, string(b), "## Sidecar flags")
	flags := helpFlags(t)
	for name := range flags {
		if _, ok := rows["-"+name]; !ok {
			t.Errorf("%s lacks a row for the flag -%s", configDoc, name)
		}
	}
	zero := map[string]string{"": "false", "int": "0", "duration": "0s"}
	for name, r := range rows {
		f, ok := flags[strings.TrimPrefix(name, "-")]
		if !ok {
			t.Errorf("%s documents %s, which the sidecar does not have", configDoc, name)
			continue
		}
		wantType := f.typ
		if wantType == "" {
			wantType = "boolean"
		}
		if r.typ != wantType && !strings.HasPrefix(r.typ, wantType+" ") && !strings.HasPrefix(r.typ, wantType+",") {
			t.Errorf("%s: documented type %q, the flag's is %q", name, r.typ, wantType)
		}
		if want := map[bool]string{true: "yes", false: "no"}[name == "-upstream"]; r.required != want {
			t.Errorf("%s: required %q, want %q", name, r.required, want)
		}
		if name == "-max-connections" {
			// Derived from the machine's open-file limit
			// (defaultMaxConnections), so the row says how.
			if !strings.Contains(r.def, "open-file limit") {
				t.Errorf("%s: documented default %q does not say it follows the open-file limit", name, r.def)
			}
			continue
		}
		code, hasCode := firstCode(r.def)
		code = strings.ReplaceAll(code, "$HOME", os.Getenv("HOME"))
		switch {
		case f.def != "":
			if !hasCode || code != f.def {
				t.Errorf("%s: documented default %q, the flag's is %q", name, r.def, f.def)
			}
		case f.typ == "string":
			if !strings.HasPrefix(r.def, "none") {
				t.Errorf("%s: documented default %q, the flag's is empty (write \"none\")", name, r.def)
			}
		default:
			if !hasCode || code != zero[f.typ] {
				t.Errorf("%s: documented default %q, the flag's is %s", name, r.def, zero[f.typ])
			}
		}
	}
}
