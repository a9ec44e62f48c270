#!/bin/sh
# Builds wasm/kvgate.wasm, the kvgate proxy-wasm module, reproducibly:
# the same Go toolchain and sources give the same bytes on any machine.
#
#   wasm/build.sh            # writes wasm/kvgate.wasm
#   wasm/build.sh OUT.wasm   # writes OUT.wasm (used to check the committed bytes)
#
# -trimpath drops local paths, -buildvcs=false drops VCS stamps, -ldflags
# "-s -w -buildid=" drops the symbol table, DWARF and the build ID; CGO is
# irrelevant for wasip1 but pinned off for clarity.
set -eu
cd "$(dirname "$0")/.."
out=${1:-wasm/kvgate.wasm}
CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm GOFLAGS= go build -buildmode=c-shared -trimpath -buildvcs=false \
	-ldflags='-s -w -buildid=' -o "$out" ./wasm/guest
