// Package envoybench measures what kvgate costs inside Envoy, decomposed,
// side by side in one run, and what the alternative users would pick (an
// ext_proc server) costs in the same run. It is a module of its own so that
// the ext_proc protos and gRPC it needs stay out of the project's module
// graph; everything in it is test code.
//
// One Envoy serves every configuration, each on its own listener, in front
// of the same fast worker, and one in-process Go client with keep-alive
// connections measures them in rounds whose order alternates, so that the
// drift of a shared machine falls on every row alike:
//
//	a  router only
//	b  envoy.filters.http.buffer (max_request_bytes = the body limit)
//	c0 a do-nothing wasm module with no language runtime (bareModule)
//	c  a do-nothing Go wasm module built as kvgate is (testdata/noop)
//	c2 the same module making every host call kvgate makes
//	d  kvgate, untrusted
//	e  kvgate, trusted, admitting a 2 KiB envelope
//	f  the same rule in an ext_proc server (Go, gRPC, kvhints natively)
//	n0 a do-nothing dynamic module in C, no Go runtime (testdata/cmodule)
//	nb the C module holding headers and buffering the body, as b does
//	nk the C module of nb also making kvgate's calls into Envoy and reading
//	   every body byte once: the floor of kvgate's work without Go
//	nr the C module of nk also writing the body back (drain, append) as a
//	   rewriting filter must
//	np the C module of nr also touching, per request, as many distinct
//	   memory pages (code and data) as the native module does beyond nr
//	nw wasm/kvgate.wasm compiled ahead of time to C (wasm2c) behind C
//	   dynamic-module hooks, no runtime (tests/wasm2c; opt-in, needs
//	   KVGATE_W2C_MODULE)
//	n  kvgate's native dynamic module (bin/libkvgate.so), untrusted
//	n2 the native module, trusted, admitting a 2 KiB envelope
//
// Loads: a 4 KiB chat request from 64 clients (requests per second), from
// one client (p50), and a 1 MiB one from one client (p50). Beside each, the
// CPU time Envoy used per request, read from /proc (the ext_proc server's
// too, which runs as a process of its own): on two shared cores req/s
// understates a cost that CPU time shows. A fourth load asks for a
// streamed answer, 50 token events flushed a millisecond apart as a
// worker streams a chat completion, and reports only Envoy's CPU time per
// request: what a filter costs for every chunk of a response it passes
// through.
//
// Envoy runs with --concurrency 1. On a 2-core machine that also runs the
// client and the worker, one Envoy worker thread saturates one core at 64
// clients, so req/s follows Envoy's own cost per request; with two workers
// Envoy would compete with the client for both cores and req/s would
// measure the machine more than the filter. Set KVGATE_ENVOY_CONCURRENCY
// to try others.
//
// Run it with
//
//	KVGATE_ENVOY=$PWD/../../.venv/bin/envoy go test -run '^$' -bench Envoy -benchtime 1x -timeout 20m
//
// and see BENCHMARKS.md (section 4) for the table it prints and what
// the columns mean. TestRows, part of `make test`, runs one short round of
// every row and checks that each answered and forwarded what it should.
package envoybench
