#!/usr/bin/env bash
# Measures the processor time (user + system, the browser's included) and the wall time of a
# conformance run against the embedded sandbox, N times (default 5), and prints each and the
# medians. It runs the debug build by default, as `cargo test` and the CI scripts (the sweep,
# the same-failures script) do: processor time is what bounds those on 2 cores.
# Usage: scripts/time-cpu.sh [N] [extra `bankconf run` arguments...]
# Environment: BIN, the bankconf to run (default: target/debug/bankconf, built here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/bankconf}
[ -x "$BIN" ] || cargo build --quiet
n=${1:-5}
shift || true
python3 - "$n" "$BIN" run "$@" <<'PY'
import resource, statistics, subprocess, sys, time
n, command = int(sys.argv[1]), sys.argv[2:]
cpu, wall = [], []
for i in range(n):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall.append(time.monotonic() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"run {i + 1}: {cpu[-1]:.2f} s of processor time, {wall[-1]:.2f} s wall")
print(f"median of {n}: {statistics.median(cpu):.2f} s of processor time, {statistics.median(wall):.2f} s wall")
PY
