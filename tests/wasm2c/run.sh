#!/bin/sh
# The committed wasm/kvgate.wasm compiled ahead of time to C (wasm2c, from
# Debian's wabt) and to native code (gcc -O2), run by a minimal C host
# (harness.c: stub host calls, one configuration, a 4 KiB untrusted chat
# body carrying a hint) that times N requests in a loop.
# Not in `make test`: an experiment, not a host. Usage:
#
#   tests/wasm2c/run.sh [N]      # or: make wasm2c-probe
#
# Prints the module's start-up and ns per request, and the host calls made.
set -eu
cd "$(dirname "$0")/../.."
if ! command -v wasm2c >/dev/null; then
	apt-get install -y wabt >/dev/null
fi
rt=/usr/src/wasm2c # wasm-rt.h and wasm-rt-impl.c, from the wabt package
out=${KVGATE_WASM2C_OUT:-/tmp/kvgate-wasm2c}
mkdir -p "$out"
wasm2c --version
wasm2c wasm/kvgate.wasm -o "$out/kvgate.c"
echo "gcc -O2 on $(wc -c <"$out/kvgate.c") bytes of C (about 2 minutes, 3 GB of memory)"
gcc -O2 -c "$out/kvgate.c" -I"$rt" -o "$out/kvgate.o"
gcc -O2 -c "$rt/wasm-rt-impl.c" -I"$rt" -o "$out/wasm-rt-impl.o"
gcc -O2 -I"$rt" -I"$out" tests/wasm2c/harness.c "$out/kvgate.o" "$out/wasm-rt-impl.o" -lm -o "$out/harness"
"$out/harness" "${1:-20000}"
