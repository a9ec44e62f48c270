// Package envoy holds kvgate's Envoy configurations as operators deploy
// them: the bootstraps (envoy.yaml; envoy-mtls.yaml for trusted senders;
// envoy-native.yaml for the native module; envoy-ecds.yaml with
// kvgate-filter.yaml for ECDS), embedded here, the names and numbers that
// describe them, and the Istio manifests (istio/). The native module
// itself is envoy/native.
//
// The tests render these bootstraps with their own ports, certificates,
// module path and upstream through internal/envoytest/envoyconfig, which
// keeps everything else, so what the tests run is what operators deploy.
package envoy

import _ "embed"

// Bootstrap is envoy.yaml, the committed bootstrap.
//
//go:embed envoy.yaml
var Bootstrap []byte

// MTLSBootstrap is envoy-mtls.yaml: envoy.yaml's listener behind TLS that
// verifies client certificates, with trusted_senders.
//
//go:embed envoy-mtls.yaml
var MTLSBootstrap []byte

// NativeBootstrap is envoy-native.yaml: envoy.yaml's listener with the
// native dynamic module (bin/libkvgate.so, envoy/native) in place of the
// wasm filter.
//
//go:embed envoy-native.yaml
var NativeBootstrap []byte

// WasmFilterName is the HTTP filter that runs the module.
const WasmFilterName = "envoy.filters.http.wasm"

// StatusCheckFilterName is the HTTP filter that answers 502 for a
// worker's status line outside 100 to 599 (docs/spec.md, The worker
// connection).
const StatusCheckFilterName = "envoy.filters.http.lua"

// NativeFilterName is the HTTP filter that runs the native module.
const NativeFilterName = "envoy.filters.http.dynamic_modules"

// BufferHeadroom is how much larger than the filter's max_body_bytes
// Envoy's per-connection buffer limit is, so that the filter sees every
// over-limit body (and answers and counts its 413) before Envoy's buffer
// overflows.
const BufferHeadroom = 1 << 20
