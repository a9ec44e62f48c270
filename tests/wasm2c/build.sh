#!/bin/sh
# Builds row nw's dynamic module (module.c): the committed wasm/kvgate.wasm
# compiled ahead of time to C by wasm2c (Debian's wabt, installed if it is
# missing) and linked with module.c's proxy-wasm host calls and wasm2c's
# runtime into one shared library. Not part of `make test`: gcc -O2 on the
# 32 MB of generated C takes about 3 minutes and 3 GB of memory.
#
#   tests/wasm2c/build.sh OUT.so     # or: make wasm2c-module
set -eu
out=$(realpath -m "${1:?usage: build.sh OUT.so}")
cd "$(dirname "$0")/../.."
if ! command -v wasm2c >/dev/null; then
	apt-get install -y wabt >/dev/null
fi
rt=/usr/src/wasm2c # wasm-rt.h and wasm-rt-impl.c, from the wabt package
gen=${KVGATE_WASM2C_OUT:-/tmp/kvgate-wasm2c}
mkdir -p "$gen" "$(dirname "$out")"
# Bounds checked in code, not by a SIGSEGV handler (Envoy keeps its own);
# no call-depth counter (a process-wide global in this runtime; Go's wasm
# code keeps its stack in linear memory).
flags="-O2 -fPIC -DWASM_RT_MEMCHECK_SIGNAL_HANDLER=0 -DWASM_RT_USE_STACK_DEPTH_COUNT=0 -I$rt -I$gen"
wasm2c wasm/kvgate.wasm -o "$gen/kvgate.c"
# The generated code, compiled only when the wasm changed.
sum=$(sha256sum wasm/kvgate.wasm | cut -c1-16)
if [ ! -f "$gen/kvgate-$sum.o" ]; then
	echo "gcc -O2 on $(wc -c <"$gen/kvgate.c") bytes of generated C (about 3 minutes, 3 GB of memory)"
	gcc $flags -c "$gen/kvgate.c" -o "$gen/kvgate-$sum.o"
fi
gcc $flags -c tests/wasm2c/rt.c -o "$gen/rt.o"
gcc $flags -Wall -Werror -Wno-unused-parameter -Ienvoy/native/internal/abi -c tests/wasm2c/module.c -o "$gen/module.o"
gcc -shared -o "$out" "$gen/module.o" "$gen/rt.o" "$gen/kvgate-$sum.o" -lm -lpthread
echo "built $out"
