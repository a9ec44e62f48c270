package filterspec

// Version is the kvgate release these sources of the module belong to; the
// module logs it in its "configured" line, in every host. It is a constant
// in the source, not a linker flag, because the committed wasm/kvgate.wasm
// must be exactly what its sources build (`make wasm-check`), whoever builds
// it. It changes in the commit that makes a release, which also rebuilds
// the module.
const Version = "v0.1.0"
