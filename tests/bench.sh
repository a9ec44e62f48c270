#!/bin/sh
# Runs the project's benchmarks (every one but the sidecar's in-process
# variants that BENCHMARKS.md does not quote) and prints one table per
# host, each taken side by side in one run (BENCHMARKS.md says how to read
# them):
#
#   1. the rulebook natively (kvhints, filter, filterspec)
#   2. the module under wazero (wasm, host)
#   3. the sidecar against a plain reverse proxy (cmd/sidecar)
#   4. Envoy: kvgate's cost decomposed, and the same rule as ext_proc
#      (tests/envoybench), against Envoy with the buffer filter
#   5. Envoy and the sidecar in front of the same worker (tests/e2e)
#
# Go benchmarks are summarised with benchstat; tables 4 and 5 are printed
# by their benchmarks. Under 10 minutes on the project's 2-core machine
# (each section prints the time so far); short benchtimes keep it there,
# and 6 runs give benchstat its intervals.
#
# Usage: tests/bench.sh [COUNT]   runs of each Go benchmark (default 6)
# Environment: BENCH_OUT (default bench-results) keeps every raw output;
# KVGATE_ENVOY names Envoy (the Makefile sets it); KVGATE_ENVOY_ROUNDS
# (default 6 here) and KVGATE_ENVOY_TIME size table 4
# (tests/envoybench/bench_test.go).
set -eu
cd "$(dirname "$0")/.."
count=${1:-6}
: "${KVGATE_ENVOY_ROUNDS:=6}"
export KVGATE_ENVOY_ROUNDS
out=${BENCH_OUT:-bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
benchstat="go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
t0=$(date +%s)

section() {
	printf '\n######## %s (%d s so far)\n\n' "$1" $(($(date +%s) - t0))
}

# gobench NAME PACKAGE BENCHTIME: every benchmark of a package, COUNT times.
gobench() {
	echo "== go test -run '^\$' -bench . -benchtime $3 -benchmem -count $count $2"
	go test -run '^$' -bench . -benchtime "$3" -benchmem -count "$count" "$2" >"$out/$1.txt" ||
		{ cat "$out/$1.txt"; exit 1; }
	$benchstat "$out/$1.txt"
}

# logged LOG COMMAND...: runs a command into LOG, and shows LOG if it fails.
logged() {
	log=$1
	shift
	"$@" >"$log" 2>&1 || { cat "$log"; exit 1; }
}

section "1. The rulebook, natively"
gobench kvhints ./kvhints 200ms
gobench filter ./filter 200ms
gobench filterspec ./filterspec 200ms

section "2. The module under wazero"
gobench wasm ./wasm 200ms
gobench host ./host 200ms

section "3. The sidecar against a plain reverse proxy"
# The benchmarks BENCHMARKS.md quotes, at fixed iteration counts: each
# starts processes or servers, which go test would redo at every step of
# sizing b.N. Six runs each; the others in the package (Chat4KiB,
# Chat4KiBSerial, Body4MiB, Compare) are for their own commands.
: >"$out/sidecar.txt"
sidebench() {
	echo "== go test -run '^\$' -bench '$1' -benchtime $2 -count 6 ./cmd/sidecar"
	# go test merges the test binary's own streams (the benchmarks' plain
	# proxies therefore log nowhere); its stderr holds build errors only.
	go test -run '^$' -bench "$1" -benchtime "$2" -count 6 ./cmd/sidecar >"$out/sidecar.part" 2>"$out/sidecar.err" ||
		{ cat "$out/sidecar.part" "$out/sidecar.err"; exit 1; }
	cat "$out/sidecar.part" >>"$out/sidecar.txt"
}
sidebench 'ProcsPaired/4KiB' 2000x
sidebench 'ProcsPaired/4MiB' 30x
sidebench 'ProcsRounds' 4x
sidebench 'Chat4KiBPaired' 2000x
sidebench 'Body4MiBPaired' 30x
sidebench 'Chat4KiBRounds' 20x
sidebench 'Ready' 10x
rm -f "$out/sidecar.part" "$out/sidecar.err"
$benchstat "$out/sidecar.txt"

section "4. Envoy: kvgate's cost, decomposed, against the buffer filter"
echo "== (cd tests/envoybench && go test -run '^\$' -bench Envoy -benchtime 1x)"
(cd tests/envoybench && export KVGATE_ENVOYBENCH_OUT="$out" &&
	logged "$out/envoy.log" go test -run '^$' -bench Envoy -benchtime 1x -timeout 30m .)
cat "$out/envoy.md"
# The per-round comparisons with row b, with their spread.
grep -v '^BenchmarkEnvoy/' "$out/envoy.txt" >"$out/envoy-vs-buffer.txt"
$benchstat "$out/envoy-vs-buffer.txt"

section "5. Envoy and the sidecar in front of the same worker"
echo "== KVGATE_BENCH_TIME=3s go test ./tests/e2e -run '^\$' -bench Hosts -benchtime 1x"
(export KVGATE_BENCH_TIME=3s KVGATE_BENCH_OUT="$out/hosts.md" &&
	logged "$out/hosts.log" go test ./tests/e2e -run '^$' -bench Hosts -benchtime 1x -timeout 10m)
cat "$out/hosts.md"

section "done: raw outputs in $out"
