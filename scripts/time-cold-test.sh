#!/usr/bin/env bash
# Measures a cold `cargo test` build, as on a fresh clone: the committed tree (git archive HEAD)
# is unpacked in a scratch folder and built with an empty target directory
# (`cargo test --no-run --timings`); prints the wall time, the processor time, and the largest
# compile costs from cargo's timing report (kept in the scratch folder). A cold build takes five
# minutes or more on two busy cores; the registry must be fetched already (`cargo fetch`),
# nothing is downloaded.
# Usage: scripts/time-cold-test.sh [SCRATCH_DIR] (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d)}
mkdir -p "$scratch/src"
git archive HEAD | tar -x -C "$scratch/src"
cd "$scratch/src"
start=$(date +%s)
CARGO_TARGET_DIR="$scratch/target" cargo test --no-run --timings --offline --quiet
end=$(date +%s)
echo "cold cargo test --no-run: $((end - start)) s (scratch: $scratch)"
# The processor time of the build (user, then system), less sensitive to a busy machine than the
# wall time: the second line of `times` (run in this shell, not a pipe's) is the compilers'.
echo "processor time (user system; this script's, then the build's):"
times
report=$(ls -t "$scratch"/target/cargo-timings/cargo-timing-2*.html | head -n 1)
python3 - "$report" <<'PY'
import json, re, sys
html = open(sys.argv[1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
units.sort(key=lambda u: -u["duration"])
print(f"{len(units)} units, {sum(u['duration'] for u in units):.0f} s of compile time in all; the largest:")
for u in units[:10]:
    print(f"{u['duration']:7.1f} s  {u['name']} {u['version']} {u.get('target', '').strip()}")
PY
