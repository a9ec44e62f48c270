#!/bin/sh
# Runs the benchmarks behind BENCHMARKS.md, each package in one run so that
# the numbers in a table were taken side by side, and summarises them with
# benchstat. Usage: tests/bench.sh [COUNT] (default 6).
set -eu
cd "$(dirname "$0")/.."
count=${1:-6}
out=${BENCH_OUT:-bench-results}
mkdir -p "$out"
benchstat="go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
run() { # name package pattern
	echo "== $1: go test -run '^\$' -bench '$3' -count $count $2" >&2
	go test -run '^$' -bench "$3" -benchmem -count "$count" "$2" >"$out/$1.txt"
	$benchstat "$out/$1.txt"
}
run kvhints ./kvhints 'Rewrite|Baseline|Admit'
[ -d filter ] && go test -list '^Benchmark' ./wasm/ 2>/dev/null | grep -q '^Benchmark' && run wasm ./wasm '.'
[ -d cmd/sidecar ] && go test -list '^Benchmark' ./cmd/sidecar/ 2>/dev/null | grep -q '^Benchmark' && run sidecar ./cmd/sidecar '.'
exit 0
