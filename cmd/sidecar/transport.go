package main

import "net/http"

// upstreamTransport is the transport to the worker. The benchmarks' plain
// reverse proxy uses it too, so that a comparison measures the filter and
// the sidecar's request path, not different connection settings.
func upstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = maxIdleUpstream
	tr.MaxIdleConnsPerHost = maxIdleUpstream
	tr.DisableCompression = true
	// Headers and a small body leave in one write.
	tr.WriteBufferSize = 64 << 10
	return tr
}
