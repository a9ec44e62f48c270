// Command guest is the kvgate proxy-wasm module. Build it with wasm/build.sh:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o wasm/kvgate.wasm ./wasm/guest
//
// The callbacks are exported by filter/abi; main is never called in a
// c-shared (reactor) module, whose hosts call _initialize instead.
package main

import _ "github.com/kvgate/kvgate/filter/abi"

func main() {}
