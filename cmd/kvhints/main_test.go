package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/kvhints"
)

// refEnvelope is the reference envelope (docs/spec.md, Admission rules), in
// canonical compact form (213 bytes).
const refEnvelope = `{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1","action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}`

// refPretty is refEnvelope pretty-printed; its compact form is refEnvelope.
const refPretty = `{
  "protocol_version": "0.1",
  "message_id": "msg-123",
  "actions": [
    {
      "action_id": "a1",
      "action_type": "kv.fetch",
      "action_version": "1.0",
      "payload": {
        "source_control_endpoint": "tcp://127.0.0.1:23280",
        "block_hashes": [11, 22]
      }
    }
  ]
}
`

// hintEndpoint appears in refEnvelope only; finding it on stderr would mean
// hint contents leaked into a log.
const hintEndpoint = "tcp://127.0.0.1:23280"

// paddedEnvelope returns a valid envelope whose compact form is exactly n
// bytes, padded by an extra string member.
func paddedEnvelope(n int) string {
	const head = `{"protocol_version":"0.1","message_id":"m","actions":[],"pad":"`
	const tail = `"}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// unknownVersion is an envelope of a version this rulebook does not know.
const unknownVersion = `{"protocol_version":"0.2","message_id":"m","actions":[]}`

// noFetch is an admitted envelope without a kv.fetch action.
const noFetch = `{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"kv.drop","action_version":"1.0","payload":{}}]}`

// bodyWith returns a chat request body carrying hint as its kv_hints member.
func bodyWith(hint string) string {
	return `{"model":"m", "kv_hints": ` + hint + `, "messages":[{"role":"user","content":"hi"}], "t":NaN}`
}

const bodyStripped = `{"model":"m", "messages":[{"role":"user","content":"hi"}], "t":NaN}`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkLine builds the line check prints; headroom < 0 leaves it out.
func checkLine(admitted bool, reason string, compact, headroom int) string {
	r, c := "null", "null"
	if reason != "" {
		r = `"` + reason + `"`
	}
	if compact >= 0 {
		c = strconv.Itoa(compact)
	}
	s := `{"admitted":` + map[bool]string{true: "true", false: "false"}[admitted] + `,"reason":` + r + `,"compact_bytes":` + c
	if headroom >= 0 {
		s += `,"block_hashes_headroom":` + strconv.Itoa(headroom)
	}
	return s + "}\n"
}

// ignoredLine is the line check prints for an ignored envelope: its
// reason, where the fault is and what it is.
func ignoredLine(reason, path, detail string) string {
	b, _ := json.Marshal(detail)
	return `{"admitted":false,"reason":"` + reason + `","compact_bytes":null,"path":"` + path + `","detail":` + string(b) + "}\n"
}

func outcomeLine(outcome, reason string, status int) string {
	r := "null"
	if reason != "" {
		r = `"` + reason + `"`
	}
	return `{"outcome":"` + outcome + `","reason":` + r + `,"status":` + strconv.Itoa(status) + "}\n"
}

// cliCase is one invocation and what it must produce. Each stream is
// compared exactly with want*, so an empty want* means the stream must be
// empty, unless the matching *Contains is set: then only that substring is
// required.
type cliCase struct {
	name           string
	args           []string
	stdin          string
	wantCode       int
	wantStdout     string
	stdoutContains string
	wantStderr     string
	stderrContains string
}

func cliCases(t *testing.T) []cliCase {
	dir := t.TempDir()
	ref := writeFile(t, dir, "ref.json", refEnvelope)
	pretty := writeFile(t, dir, "pretty.json", refPretty)
	fits := writeFile(t, dir, "fits.json", paddedEnvelope(kvhints.MaxCompactBytes))
	over := writeFile(t, dir, "over.json", paddedEnvelope(kvhints.MaxCompactBytes+1))
	unknown := writeFile(t, dir, "unknown.json", unknownVersion)
	hinted := writeFile(t, dir, "body.json", bodyWith(refEnvelope))
	missing := filepath.Join(dir, "missing.json")
	refHeadroom := (kvhints.MaxCompactBytes - 213) / 21 // 3110

	return []cliCase{
		// check
		{name: "check reference file", args: []string{"check", ref}, wantStdout: checkLine(true, "", 213, refHeadroom)},
		{name: "check reference stdin", args: []string{"check", "-"}, stdin: refEnvelope, wantStdout: checkLine(true, "", 213, 3110)},
		{name: "check pretty compacts to 213", args: []string{"check", pretty}, wantStdout: checkLine(true, "", 213, 3110)},
		{name: "check flag after file", args: []string{"check", ref, "--max-depth", "5"}, wantStdout: checkLine(true, "", 213, 3110)},
		{name: "check depth at limit", args: []string{"check", "--max-depth", "5", ref}, wantStdout: checkLine(true, "", 213, 3110)},
		{name: "check depth past limit", args: []string{"check", "--max-depth=4", ref}, wantCode: 1, wantStdout: ignoredLine("malformed", "", "kv_hints is nested deeper than max_depth (4)")},
		{name: "check exactly 65536", args: []string{"check", fits}, wantStdout: checkLine(true, "", 65536, -1)},
		{name: "check oversized", args: []string{"check", over}, wantCode: 1, wantStdout: ignoredLine("oversized", "", "the envelope's compact form is over 65536 bytes")},
		{name: "check unknown version", args: []string{"check", unknown}, wantCode: 1, wantStdout: ignoredLine("unknown_version", "protocol_version", `protocol_version is not "0.1"`)},
		{name: "check no kv.fetch no headroom", args: []string{"check", "-"}, stdin: noFetch, wantStdout: checkLine(true, "", len(noFetch), -1)},
		{name: "check full envelope zero headroom", args: []string{"check", "-"}, stdin: fullFetch(t), wantStdout: checkLine(true, "", kvhints.MaxCompactBytes, 0)},
		{name: "check malformed", args: []string{"check", "-"}, stdin: `{"protocol_version":"0.1"}`, wantCode: 1, wantStdout: ignoredLine("malformed", "message_id", "message_id is missing")},
		{name: "check not json", args: []string{"check", "-"}, stdin: `{`, wantCode: 1, wantStdout: ignoredLine("malformed", "", "kv_hints is not one JSON value")},
		{name: "check malformed payload", args: []string{"check", "-"}, stdin: `{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"t","action_version":"1","payload":["secret"]}]}`,
			wantCode: 1, wantStdout: ignoredLine("malformed", "actions[0].payload", "actions[0].payload is not an object but an array")},
		{name: "check null is no hint", args: []string{"check", "-"}, stdin: "null\n", wantCode: 1, wantStdout: checkLine(false, "", -1, -1)},
		{name: "check missing file", args: []string{"check", missing}, wantCode: 2, stderrContains: "no such file"},
		{name: "check no file", args: []string{"check"}, wantCode: 2, stderrContains: "expected exactly one FILE"},
		{name: "check two files", args: []string{"check", ref, ref}, wantCode: 2, stderrContains: "expected exactly one FILE"},
		{name: "check bad flag", args: []string{"check", "--nope", ref}, wantCode: 2, stderrContains: "flag provided but not defined"},
		{name: "check depth zero", args: []string{"check", "--max-depth", "0", ref}, wantCode: 2, stderrContains: "must be at least 1"},
		{name: "check depth not a number", args: []string{"check", "--max-depth", "x", ref}, wantCode: 2, stderrContains: "not an integer"},
		{name: "check help", args: []string{"check", "-h"}, stdoutContains: "block_hashes_headroom"},

		// rewrite
		{name: "rewrite untrusted strips", args: []string{"rewrite", hinted}, wantStdout: bodyStripped, wantStderr: outcomeLine("stripped", "untrusted", 200)},
		{name: "rewrite trusted admits", args: []string{"rewrite", "--trusted", hinted}, wantStdout: bodyWith(refEnvelope), wantStderr: outcomeLine("admitted", "", 200)},
		{name: "rewrite trusted compacts", args: []string{"rewrite", "--trusted", "-"}, stdin: bodyWith(strings.TrimSpace(refPretty)), wantStdout: bodyWith(refEnvelope), wantStderr: outcomeLine("admitted", "", 200)},
		{name: "rewrite trusted depth", args: []string{"rewrite", hinted, "--trusted", "--max-depth", "4"}, wantStdout: bodyStripped, wantStderr: outcomeLine("discarded", "malformed", 200)},
		{name: "rewrite trusted unknown version", args: []string{"rewrite", "--trusted", "-"}, stdin: bodyWith(unknownVersion), wantStdout: bodyStripped, wantStderr: outcomeLine("discarded", "unknown_version", 200)},
		{name: "rewrite no hint unchanged", args: []string{"rewrite", "-"}, stdin: bodyStripped, wantStdout: bodyStripped, wantStderr: outcomeLine("no_hint", "", 200)},
		{name: "rewrite null hint", args: []string{"rewrite", "--trusted", "-"}, stdin: bodyWith("null"), wantStdout: bodyWith("null"), wantStderr: outcomeLine("null_hint", "", 200)},
		{name: "rewrite invalid json", args: []string{"rewrite", "-"}, stdin: `{"kv_hints":` + refEnvelope, wantCode: 1, wantStderr: outcomeLine("rejected", "", 400)},
		{name: "rewrite trailing data", args: []string{"rewrite", "-"}, stdin: `{} {}`, wantCode: 1, wantStderr: outcomeLine("rejected", "", 400)},
		{name: "rewrite over body limit", args: []string{"rewrite", "--max-body-bytes", "10", hinted}, wantCode: 1, wantStderr: outcomeLine("rejected", "", 413)},
		{name: "rewrite at body limit", args: []string{"rewrite", "--max-body-bytes", strconv.Itoa(len(bodyStripped)), "-"}, stdin: bodyStripped, wantStdout: bodyStripped, wantStderr: outcomeLine("no_hint", "", 200)},
		{name: "rewrite bad flag", args: []string{"rewrite", "--trusted=maybe", hinted}, wantCode: 2, stderrContains: "invalid boolean value"},
		{name: "rewrite negative limit", args: []string{"rewrite", "--max-body-bytes", "-1", hinted}, wantCode: 2, stderrContains: "must be at least 0"},
		{name: "rewrite missing file", args: []string{"rewrite", missing}, wantCode: 2, stderrContains: "no such file"},
		{name: "rewrite help", args: []string{"rewrite", "--help"}, stdoutContains: "--max-body-bytes"},

		// dispatcher
		{name: "no args", args: nil, wantCode: 2, stderrContains: "Usage:"},
		{name: "help", args: []string{"help"}, stdoutContains: "kvhints check"},
		{name: "-h", args: []string{"-h"}, stdoutContains: "kvhints rewrite"},
		{name: "--help", args: []string{"--help"}, stdoutContains: "Usage:"},
		{name: "unknown subcommand", args: []string{"frobnicate"}, wantCode: 2, stderrContains: `unknown subcommand "frobnicate"`},
	}
}

// fullFetch returns an admitted envelope with a kv.fetch action whose
// compact form is exactly MaxCompactBytes, so not one more hash fits.
func fullFetch(t *testing.T) string {
	t.Helper()
	a, err := kvhints.NewFetchAction("a1", "tcp://h:1", []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := kvhints.NewEnvelope("m", []kvhints.Action{a})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Pad through an extra member: ,"p":"" adds 7 bytes plus the padding.
	s := string(b[:len(b)-1]) + `,"p":"` + strings.Repeat("x", kvhints.MaxCompactBytes-len(b)-7) + `"}`
	if len(s) != kvhints.MaxCompactBytes {
		t.Fatalf("fullFetch is %d bytes", len(s))
	}
	return s
}

// verify compares one invocation's outputs with c.
func (c cliCase) verify(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != c.wantCode {
		t.Errorf("exit code %d, want %d (stderr %q)", code, c.wantCode, stderr)
	}
	if c.stdoutContains != "" {
		if !strings.Contains(stdout, c.stdoutContains) {
			t.Errorf("stdout %q does not contain %q", stdout, c.stdoutContains)
		}
	} else if stdout != c.wantStdout {
		t.Errorf("stdout\n got %q\nwant %q", shorten(stdout), shorten(c.wantStdout))
	}
	if c.stderrContains != "" {
		if !strings.Contains(stderr, c.stderrContains) {
			t.Errorf("stderr %q does not contain %q", stderr, c.stderrContains)
		}
	} else if stderr != c.wantStderr {
		t.Errorf("stderr\n got %q\nwant %q", stderr, c.wantStderr)
	}
	if strings.Contains(stderr, hintEndpoint) {
		t.Errorf("stderr leaks hint contents: %q", stderr)
	}
	// A check result (stdout) or a rewrite outcome (stderr) is exactly one
	// JSON line.
	line := ""
	switch {
	case len(c.args) > 0 && c.args[0] == "check" && c.stdoutContains == "" && stdout != "":
		line = stdout
	case len(c.args) > 0 && c.args[0] == "rewrite" && c.stderrContains == "":
		line = stderr
	}
	if line != "" && (strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !json.Valid([]byte(line))) {
		t.Errorf("not one JSON line: %q", line)
	}
}

func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func TestRun(t *testing.T) {
	for _, c := range cliCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, strings.NewReader(c.stdin), &stdout, &stderr)
			c.verify(t, code, stdout.String(), stderr.String())
		})
	}
}

// TestRewriteUnchangedBytes checks that a body without a hint is forwarded
// byte for byte, including a BOM and odd whitespace.
func TestRewriteUnchangedBytes(t *testing.T) {
	body := "\xef\xbb\xbf { \"a\" :\t[1, NaN,\n-Infinity] }  \n"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"rewrite", "--trusted", "-"}, strings.NewReader(body), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if stdout.String() != body {
		t.Errorf("body changed: %q", stdout.String())
	}
}
