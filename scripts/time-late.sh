#!/usr/bin/env bash
# Measures (not a test) what late webhooks cost a full conformance run against the embedded
# sandbox (issue 42, point 5: one late wait per run): the wall time and exit code of a plain
# run, then with every delivery 3 s and 8 s late, N times each (default 2). With webhooks L
# late, a run should take about the plain run plus one L.
# Usage: scripts/time-late.sh [N] [extra `bankconf run` arguments...]
# Environment: BIN, the bankconf to run (default: a release build of this tree); DELAYS, the
# lateness in milliseconds to try (default "0 3000 8000").
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2}
shift || true
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=./target/release/bankconf
fi
for delay in ${DELAYS:-0 3000 8000}; do
  for i in $(seq "$n"); do
    start=$(date +%s.%N)
    set +e
    env -u BANKCONF_API_KEY -u BANKCONF_SECOND_API_KEY -u BANKCONF_BASE_URL \
      "$BIN" run --sandbox-delivery-delay-ms "$delay" "$@" >/dev/null 2>&1
    code=$?
    set -e
    end=$(date +%s.%N)
    printf 'deliveries %5d ms late, run %d: %6.1f s  exit %d\n' "$delay" "$i" \
      "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" "$code"
  done
done
