#!/usr/bin/env bash
# Compares extraction cost on the corpus between the working tree and an
# earlier revision, in one run: BenchmarkCorpus of both, alternated, ROUNDS
# times per mode, N iterations each. It reports the CPU seconds (user+sys)
# of each run and the ratio new/base per round: on a shared machine CPU time
# is steadier than wall-clock pages per second, which it prints too.
#
#   scripts/bench-extract.sh [BASE_REV]      (default: main)
#   ROUNDS=6 N=60 scripts/bench-extract.sh ca0aea9
#
# The base revision is extracted to a temporary folder and given the working
# tree's corpus and corpus test, so both measure the same pages.
set -euo pipefail
base_rev=${1:-main}
rounds=${ROUNDS:-6}
n=${N:-60}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

git -C "$root" archive "$base_rev" | tar -x -C "$tmp"
mkdir -p "$tmp/internal/extract/testdata/corpus"
cp "$root"/internal/extract/testdata/corpus/* "$tmp/internal/extract/testdata/corpus/"
cp "$root/internal/extract/corpus_test.go" "$tmp/internal/extract/"
(cd "$tmp" && go test -c -o "$tmp/base.test" ./internal/extract/)
(cd "$root" && go test -c -o "$tmp/new.test" ./internal/extract/)

TIMEFORMAT='%U %S'
run() { # dir binary mode -> "cpu pages/s"
	local out cpu
	out=$( { time (cd "$1" && "$2" -test.run '^$' -test.bench "BenchmarkCorpus/$3\$" -test.benchtime "${n}x"); } 2>&1 )
	cpu=$(echo "$out" | tail -n1 | awk '{print $1 + $2}')
	echo "$cpu $(echo "$out" | awk '/pages\/s/ {print $(NF-1)}')"
}
for mode in text markdown; do
	for i in $(seq "$rounds"); do
		read -r bcpu bpps < <(run "$tmp/internal/extract" "$tmp/base.test" "$mode")
		read -r ncpu npps < <(run "$root/internal/extract" "$tmp/new.test" "$mode")
		awk -v m="$mode" -v i="$i" -v b="$bcpu" -v n="$ncpu" -v bp="$bpps" -v np="$npps" \
			'BEGIN { printf "%s round %d: CPU base %.2fs new %.2fs ratio %.3f; wall pages/s base %s new %s\n", m, i, b, n, n / b, bp, np }'
	done
done
