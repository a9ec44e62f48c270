package envoy

import _ "embed"

// ECDSBootstrap is envoy-ecds.yaml: envoy.yaml with the wasm filter's
// configuration delivered through ECDS from a file (FilterResource).
//
//go:embed envoy-ecds.yaml
var ECDSBootstrap []byte

// FilterResource is kvgate-filter.yaml: the filter as the ECDS file that
// envoy-ecds.yaml reads.
//
//go:embed kvgate-filter.yaml
var FilterResource []byte

// ECDSName is the name the ECDS bootstrap gives the filter and its
// resource.
const ECDSName = "kvgate"
