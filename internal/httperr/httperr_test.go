package httperr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBody(t *testing.T) {
	for _, c := range []struct {
		status   int
		typ, msg string
		want     string
	}{
		{400, TypeInvalidRequest, "bad \"body\"\n",
			`{"error":{"message":"bad \"body\"\n","type":"invalid_request_error","code":400}}`},
		{503, TypeServer, "the request could not be filtered",
			`{"error":{"message":"the request could not be filtered","type":"server_error","code":503}}`},
		{413, TypeInvalidRequest, "tab\there \\ \x01\x1f\b\f\r é",
			`{"error":{"message":"tab\there \\ \u0001\u001f\b\f\r é","type":"invalid_request_error","code":413}}`},
		{415, TypeInvalidRequest, "bad \xff byte", `{"error":{"message":"bad ` + "\uFFFD" + ` byte","type":"invalid_request_error","code":415}}`},
		{502, "upstream_error", "", `{"error":{"message":"","type":"upstream_error","code":502}}`},
	} {
		if got := string(Body(c.status, c.typ, c.msg)); got != c.want {
			t.Errorf("Body(%d, %q, %q)\n got %s\nwant %s", c.status, c.typ, c.msg, got, c.want)
		}
	}
	if got, want := string(Invalid(400, "x")), string(Body(400, TypeInvalidRequest, "x")); got != want {
		t.Errorf("Invalid: %s, want %s", got, want)
	}
}

// FuzzBody: whatever the message and type, the body is JSON that
// encoding/json reads back to the same strings (after invalid UTF-8 is
// replaced) and the same code.
func FuzzBody(f *testing.F) {
	f.Add(400, "invalid_request_error", "bad \"body\"\n")
	f.Add(413, "x", "\x00\x7f\u2028\xff\xfe")
	f.Fuzz(func(t *testing.T, status int, typ, msg string) {
		b := Body(status, typ, msg)
		var v struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		if v.Error.Message != valid(msg) || v.Error.Type != valid(typ) || v.Error.Code != status {
			t.Fatalf("%q read back as %+v", b, v.Error)
		}
	})
}

func TestGRPCMessage(t *testing.T) {
	for in, want := range map[string]string{"plain text": "plain text", "100%": "100%25", "caf\u00e9\n": "caf%C3%A9%0A", "": "", "\x00\x7f~ ": "%00%7F~ "} {
		if got := GRPCMessage(in); got != want {
			t.Errorf("GRPCMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
