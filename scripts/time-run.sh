#!/usr/bin/env bash
# Measures the wall time of the full default conformance run against the embedded sandbox
# (release build), N times (default 10), and prints each time and the median.
# Usage: scripts/time-run.sh [N] [extra `bankconf run` arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
shift || true
cargo build --release --quiet
times=()
for _ in $(seq "$n"); do
  start=$(date +%s.%N)
  ./target/release/bankconf run "$@" >/dev/null
  end=$(date +%s.%N)
  times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1; printf "run %d: %.3f s\n", NR, $1} END {printf "median of %d runs: %.3f s\n", NR, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
