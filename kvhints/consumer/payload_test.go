package consumer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseFetchPayload(t *testing.T) {
	ok := []struct {
		in     string
		ep     string
		hashes []uint64
	}{
		{`{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}`, "tcp://127.0.0.1:23280", []uint64{11, 22}},
		{`{"block_hashes":[0,18446744073709551615],"source_control_endpoint":"x","extra":{"a":[1,{"b":null}]}}`, "x", []uint64{0, 18446744073709551615}},
		{` { "source\u005fcontrol_endpoint" : "tcp://h:1" , "block_hashes" : [ 1 ] } `, "tcp://h:1", []uint64{1}},
	}
	for _, tt := range ok {
		p, err := ParseFetchPayload([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if p.SourceControlEndpoint != tt.ep || !slices.Equal(p.BlockHashes, tt.hashes) {
			t.Errorf("%s: got %+v", tt.in, p)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"x"`, `{`, `{}`,
		`{"source_control_endpoint":"x"}`,
		`{"block_hashes":[1]}`,
		`{"source_control_endpoint":"","block_hashes":[1]}`,
		`{"source_control_endpoint":1,"block_hashes":[1]}`,
		`{"source_control_endpoint":null,"block_hashes":[1]}`,
		`{"source_control_endpoint":"x","block_hashes":[]}`,
		`{"source_control_endpoint":"x","block_hashes":null}`,
		`{"source_control_endpoint":"x","block_hashes":"1"}`,
		`{"source_control_endpoint":"x","block_hashes":[-1]}`,
		`{"source_control_endpoint":"x","block_hashes":[1.0]}`,
		`{"source_control_endpoint":"x","block_hashes":[1e3]}`,
		`{"source_control_endpoint":"x","block_hashes":[18446744073709551616]}`,
		`{"source_control_endpoint":"x","block_hashes":[01]}`,
		`{"source_control_endpoint":"x","block_hashes":["1"]}`,
		`{"source_control_endpoint":"x","block_hashes":[[1]]}`,
		`{"source_control_endpoint":"x","block_hashes":[NaN]}`,
		`{"source_control_endpoint":"x","source_control_endpoint":"y","block_hashes":[1]}`,
		`{"source_control_endpoint":"x","block_hashes":[1],"block_hashes":[2]}`,
		`{"Source_Control_Endpoint":"x","block_hashes":[1]}`,
		`{"source_control_endpoint":"a\nb","block_hashes":[1]}`,
		`{"source_control_endpoint":"a\ud800b","block_hashes":[1]}`,
		"{\"source_control_endpoint\":\"a\xffb\",\"block_hashes\":[1]}",
		`{"source_control_endpoint":"x","block_hashes":[1]} {}`,
		`{"source_control_endpoint":"x","block_hashes":[1]}x`,
		`{"source_control_endpoint":"` + strings.Repeat("a", MaxEndpointBytes+1) + `","block_hashes":[1]}`,
	}
	for _, in := range bad {
		_, err := ParseFetchPayload([]byte(in))
		var pe *PayloadError
		if !errors.As(err, &pe) {
			t.Errorf("%q: err = %v, want a *PayloadError", in, err)
		}
	}
}

func TestPayloadErrorDoesNotQuote(t *testing.T) {
	_, err := ParseFetchPayload([]byte(`{"source_control_endpoint":"secret-host\n","block_hashes":[1]}`))
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err = %v", err)
	}
}

func TestTCPAddress(t *testing.T) {
	for in, want := range map[string]string{
		"tcp://127.0.0.1:23280": "127.0.0.1:23280",
		"tcp://[::1]:1":         "[::1]:1",
		"tcp://host.example:80": "host.example:80",
	} {
		if got, err := tcpAddress(in); err != nil || got != want {
			t.Errorf("%s: %q %v", in, got, err)
		}
	}
	for _, in := range []string{
		"", "127.0.0.1:1", "http://h:1", "tcp://h", "tcp://:1", "tcp://h:0", "tcp://h:65536",
		"tcp://h:01", "tcp://u@h:1", "tcp://h:1/p", "tcp://h:1?q", "tcp://h:1#f", "tcp://h: 1", "TCP://h:1",
	} {
		if _, err := tcpAddress(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
