#!/usr/bin/env bash
# Benchmark (not a test): the wall time and exit code of the full conformance run against a
# `bankconf serve` sandbox under each condition of real deployments (src/sandbox/conditions.rs):
# local, a weak server (accept queue of 5, `Connection: close`), deliveries 3 s and 8 s late,
# deliveries one at a time at 0.3 s, 100 ms API latency, and a rate limit of 10 requests per
# second per key (the table of issue 20). Each line: wall time, exit code, the summary, and the
# requests sent and deliveries received (the report's traffic line).
# Usage: scripts/bench-conditions.sh [extra `bankconf run` arguments...]
# Environment: BIN, the `bankconf` that runs the catalogue (default: a release build of this
# tree); SERVE_BIN, the one that serves the sandbox (default: BIN; it must know the condition
# flags, so a build of an older tree can be measured as BIN against this tree's SERVE_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=./target/release/bankconf
fi
SERVE_BIN=${SERVE_BIN:-$BIN}
key1=bankconf_test_benchkeyone000000000000000
key2=bankconf_test_benchkeytwo000000000000000
conditions=(
  "local|"
  "backlog 5 + Connection: close|--backlog 5 --connection-close"
  "deliveries 3 s late|--delivery-delay-ms 3000"
  "deliveries 8 s late|--delivery-delay-ms 8000"
  "serialized 0.3 s deliveries|--delivery-serial-ms 300"
  "100 ms API latency|--latency-ms 100"
  "10 req/s per key (429, Retry-After: 1)|--rate-limit 10"
)
for entry in "${conditions[@]}"; do
  name=${entry%%|*}
  flags=${entry#*|}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # shellcheck disable=SC2086
  "$SERVE_BIN" serve --listen "127.0.0.1:$port" --api-key "$key1" --api-key "$key2" $flags >/dev/null &
  server=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  start=$(date +%s.%N)
  set +e
  out=$(BANKCONF_API_KEY=$key1 BANKCONF_SECOND_API_KEY=$key2 "$BIN" run --base-url "http://127.0.0.1:$port" \
    --service bankconf --driver ./examples/sandbox-driver.sh "$@" 2>&1)
  code=$?
  set -e
  end=$(date +%s.%N)
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  summary=$(printf '%s\n' "$out" | grep -E 'passed,|traffic:' | tr '\n' ' ')
  panics=$(printf '%s\n' "$out" | grep -c -i 'panicked' || true)
  printf '%-40s %7.1f s  exit %d  panics %d  %s\n' "$name" "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" \
    "$code" "$panics" "$summary"
done
