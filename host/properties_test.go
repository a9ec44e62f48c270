package host_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"

	"github.com/kvgate/kvgate/host"
	"github.com/kvgate/kvgate/tests/vectors"
	"github.com/kvgate/kvgate/wasm"
)

// Decision.Properties carries what the guest set with proxy_set_property:
// for the kvgate module, its report of every conformance case's hint, with
// forwarded and refused requests alike.
func TestDecisionProperties(t *testing.T) {
	cases, err := vectors.Load("../tests/vectors")
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]*host.Host{}
	cache := t.TempDir()
	for i := range cases {
		c := &cases[i]
		if c.Sender != nil {
			continue // the host is not handed a sender's properties here
		}
		h := hosts[c.FilterConfig()]
		if h == nil {
			h, err = host.New(context.Background(), wasm.Module, host.Options{PoolSize: 1, PluginConfig: []byte(c.FilterConfig()),
				CacheDir: cache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			hosts[c.FilterConfig()] = h
		}
		hdr := http.Header{}
		for k, v := range c.Request.Headers {
			hdr.Set(k, v)
		}
		hdr.Set("Content-Length", strconv.Itoa(len(c.Request.Body)))
		d, err := h.Filter(context.Background(), &host.Request{Method: c.Request.Method, Path: c.Request.Path,
			Header: hdr, Body: c.Request.Body, RemoteAddr: "127.0.0.1:40000"})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		hint, reason := c.Hint()
		if got := string(d.Properties["kvgate.hint"]); got != hint {
			t.Errorf("%s: kvgate.hint %q, want %q", c.Name, got, hint)
		}
		if got := string(d.Properties["kvgate.hint_reason"]); got != reason {
			t.Errorf("%s: kvgate.hint_reason %q, want %q", c.Name, got, reason)
		}
		if hint == "" && d.Properties != nil {
			t.Errorf("%s: properties %q for a request the guest did not inspect", c.Name, d.Properties)
		}
	}
}
