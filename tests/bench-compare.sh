#!/bin/sh
# Compares two builds of kvgate side by side, in every host: OLD (a git
# revision) against the working tree, or against NEW (another revision).
# On the project's shared machines two runs minutes apart drift by more
# than most changes are worth, so each host measures both builds in one
# run, interleaved (BENCHMARKS.md, "Comparing two builds"):
#
#   native   the rulebook (./kvhints): both test binaries, alternating
#   wasm     the module under wazero (./wasm): both test binaries, alternating
#   sidecar  both sidecar binaries and a plain reverse proxy, each a
#            process of its own, every request sent to all three
#            (BenchmarkProcsCompare)
#   envoy    both modules in one Envoy: rows d and e for OLD, d' and e'
#            for NEW, against the buffer filter (tests/envoybench)
#
# Usage:   make bench-compare OLD=main~1 [NEW=rev]
#          OLD=rev [NEW=rev] tests/bench-compare.sh
# Environment: KVGATE_COMPARE, the sections to run (default all four);
# KVGATE_COMPARE_BENCH, the native and wasm benchmarks (a -bench regexp,
# default Rewrite and Admit natively, Lifecycle on wasm); KVGATE_COMPARE_COUNT,
# runs of each (default 6); KVGATE_ENVOY names Envoy (the Makefile sets
# it); BENCH_OUT (default bench-results/compare) keeps the raw outputs.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
: "${OLD:?set OLD to the git revision to compare with}"
NEW=${NEW:-}
sections=${KVGATE_COMPARE:-native wasm sidecar envoy}
count=${KVGATE_COMPARE_COUNT:-6}
out=${BENCH_OUT:-bench-results/compare}
mkdir -p "$out"
out=$(cd "$out" && pwd)
benchstat="go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
t0=$(date +%s)

tmp=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/old" 2>/dev/null || true
	git -C "$root" worktree remove --force "$tmp/new" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

section() {
	printf '\n######## %s (%d s so far)\n\n' "$1" $(($(date +%s) - t0))
}

# The two trees: OLD always from git, NEW from git or the working tree.
git worktree add --quiet --detach "$tmp/old" "$OLD"
old=$tmp/old
if [ -n "$NEW" ]; then
	git worktree add --quiet --detach "$tmp/new" "$NEW"
	new=$tmp/new
else
	new=$root
fi
echo "OLD: $OLD ($(git -C "$old" rev-parse --short HEAD))"
if [ -n "$NEW" ]; then
	echo "NEW: $NEW ($(git -C "$new" rev-parse --short HEAD))"
else
	echo "NEW: the working tree"
fi

section "building both"
for side in old new; do
	eval dir=\$$side
	(cd "$dir" &&
		go test -c -o "$tmp/$side-kvhints.test" ./kvhints &&
		go test -c -o "$tmp/$side-wasm.test" ./wasm &&
		sh wasm/build.sh "$tmp/$side.wasm" &&
		go build -trimpath -o "$tmp/$side-sidecar" ./cmd/sidecar)
done
if cmp -s "$tmp/old.wasm" "$tmp/new.wasm"; then
	echo "the two modules are the same bytes"
fi

# alternate NAME PACKAGE REGEXP BENCHTIME: both test binaries of a package,
# one run each in turn, COUNT times, then benchstat OLD against NEW.
alternate() {
	: >"$out/$1-old.txt"
	: >"$out/$1-new.txt"
	echo "== $1: -bench '$3' -benchtime $4, $count runs each, alternating"
	for i in $(seq "$count"); do
		for side in old new; do
			eval dir=\$$side
			(cd "$dir/$2" && "$tmp/$side-$1.test" -test.run '^$' -test.bench "$3" -test.benchtime "$4" -test.benchmem) \
				>>"$out/$1-$side.txt" 2>"$out/$1.err" || { cat "$out/$1-$side.txt" "$out/$1.err"; exit 1; }
		done
	done
	(cd "$out" && $benchstat "$1-old.txt" "$1-new.txt")
}

for s in $sections; do
	case $s in
	native)
		section "the rulebook, natively"
		alternate kvhints kvhints "${KVGATE_COMPARE_BENCH:-Rewrite|Admit}" 100ms
		;;
	wasm)
		section "the module under wazero"
		alternate wasm wasm "${KVGATE_COMPARE_BENCH:-Lifecycle}" 200ms
		;;
	sidecar)
		section "the sidecar: A = OLD, B = NEW, against the plain proxy"
		echo "== KVGATE_A_BIN=old KVGATE_B_BIN=new go test -run '^\$' -bench ProcsCompare -benchtime 2000x -count $count ./cmd/sidecar"
		(cd "$new" && KVGATE_A_BIN="$tmp/old-sidecar" KVGATE_B_BIN="$tmp/new-sidecar" \
			go test -run '^$' -bench ProcsCompare -benchtime 2000x -count "$count" ./cmd/sidecar) \
			>"$out/sidecar.txt" 2>"$out/sidecar.err" || { cat "$out/sidecar.txt" "$out/sidecar.err"; exit 1; }
		(cd "$out" && $benchstat sidecar.txt)
		;;
	envoy)
		section "Envoy: d, e = OLD; d', e' = NEW; against the buffer filter (b)"
		(cd "$new/tests/envoybench" && KVGATE_WASM="$tmp/old.wasm" KVGATE_WASM_B="$tmp/new.wasm" \
			KVGATE_ENVOY_ROWS="b,d,d',e,e'" KVGATE_ENVOYBENCH_OUT="$out" \
			go test -run '^$' -bench Envoy -benchtime 1x -timeout 30m .) >"$out/envoy.log" 2>&1 ||
			{ cat "$out/envoy.log"; exit 1; }
		cat "$out/envoy.md"
		;;
	*)
		echo "unknown section $s (native, wasm, sidecar, envoy)" >&2
		exit 2
		;;
	esac
done
section "done: raw outputs in $out"
