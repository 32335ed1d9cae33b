#!/usr/bin/env bash
# Measures (not a test) two bankconf binaries side by side against the embedded sandbox (issue
# 72): per binary, the median wall and processor time (user + system, the browser's included)
# of N runs (default 5) with the browser and N with --skip-browser, the runs of the two binaries
# interleaved so that both meet the same load, then the API requests and webhook deliveries of
# one run (from its JSON report and HAR) and the ratio critical path / wall of
# scripts/critical-path.py.
# Usage: scripts/time-side-by-side.sh BEFORE AFTER [N] [extra `bankconf run` arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2
n=${3:-5}
shift 3 || shift $#
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 - "$n" "$out" "$before" "$after" "$@" <<'PY'
import json, resource, statistics, subprocess, sys, time
n, out, bins, extra = int(sys.argv[1]), sys.argv[2], sys.argv[3:5], sys.argv[5:]
flavours = {"browser": [], "skip-browser": ["--skip-browser"]}
results = {(b, f): ([], []) for b in bins for f in flavours}
for i in range(n):
    for f, flags in flavours.items():
        for b in bins:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            subprocess.run([b, "run", "--seed", "1", *flags, *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            results[(b, f)][0].append(wall)
            results[(b, f)][1].append(cpu)
for b in bins:
    for f in flavours:
        wall, cpu = results[(b, f)]
        print(f"{b}  {f:13} median of {n}: {statistics.median(wall):.2f} s wall, {statistics.median(cpu):.2f} s CPU")
    har, report = f"{out}/run.har", f"{out}/run.json"
    subprocess.run([b, "run", "--seed", "1", "--report-har", har, "--report-json", report, *extra],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    entries = json.load(open(har))["log"]["entries"]
    api = sum(1 for e in entries if e.get("_kind") == "api")
    hooks = sum(1 for e in entries if e.get("_kind") == "webhook")
    verdict = json.load(open(report)).get("verdict")
    path = subprocess.run(["python3", "scripts/critical-path.py", har, report], capture_output=True, text=True).stdout
    ratio = [l for l in path.splitlines() if l.startswith("yardstick")]
    print(f"{b}  {api} API requests, {hooks} deliveries, verdict {verdict}; {ratio[0] if ratio else path[-200:]}")
PY
