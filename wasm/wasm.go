// Package wasm embeds the kvgate proxy-wasm module, wasm/kvgate.wasm, built
// from wasm/guest by wasm/build.sh (`make wasm`). The file is committed; CI
// rebuilds it and fails when the bytes differ.
package wasm

import _ "embed"

// Module is the compiled kvgate proxy-wasm module (GOOS=wasip1, c-shared).
//
//go:embed kvgate.wasm
var Module []byte
