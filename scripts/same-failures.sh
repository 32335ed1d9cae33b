#!/usr/bin/env bash
# The same failures every time (issues 42, 51): a release gate is written from a failing server,
# so a failing server must get the same failed set in every run. Every mutant of the embedded
# sandbox (`bankconf serve --list-mutants`) is run with different `--seed`s, each run writing
# `--write-expectations`; the files must be byte-identical.
#
# Prints one line per subject whose files differ (with the cases that differ and the rerun
# commands), then the count and the total time; exits 1 when any differ. A noisy mutant (which
# other cases fail depends on timing, `Mutant::noisy`) is held to its catching cases only. A
# mutant that no widget case catches runs with --skip-browser.
# Usage: scripts/same-failures.sh [SEED_A SEED_B] (default 1 2).
# Environment: BIN, the bankconf to run (default: target/debug/bankconf, built here if missing);
# PARALLEL, runs at a time (default 2); MUTANTS, a space-separated subset (default: every one);
# RUNS=5 runs each subject five times, as issue 51 measures a flap: seeds A and B, seed A
# again, then seeds A and B with two busy loops (`yes >/dev/null`) on the machine (default 2:
# seeds A and B).
# FOREIGN, a command that runs a foreign target's variant (`$FOREIGN VARIANT SEED FILE`: it
# writes the run's expectations to FILE), and VARIANTS, the variants to give it (space
# separated): each is run like a mutant and compared the same way (never as noisy).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/bankconf}
[ -x "$BIN" ] || cargo build --quiet
PARALLEL=${PARALLEL:-2}
RUNS=${RUNS:-2}
FOREIGN=${FOREIGN:-}
VARIANTS=${VARIANTS:-}
SEED_A=${1:-1}
SEED_B=${2:-2}
out=$(mktemp -d)
busy=()
trap 'for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
started=$(date +%s)

# One run: a subject (`mutant:NAME` or `foreign:NAME`), a seed and the run's label; its
# expectations file and log land in $out.
one() {
  local subject=$1 seed=$2 label=$3 kind=${1%%:*} name=${1#*:}
  local file="$out/$name.$label.toml"
  if [ "$kind" = foreign ]; then
    $FOREIGN "$name" "$seed" "$file" >"$out/$name.$label.log" 2>&1
  else
    # A mutant no widget case catches runs without the browser (a third of a run's CPU): its
    # browser cases are then ignored alike in every file.
    local skip=--skip-browser
    [[ " $WIDGET_MUTANTS " == *" $name "* ]] && skip=""
    env -u BANKCONF_API_KEY -u BANKCONF_SECOND_API_KEY -u BANKCONF_BASE_URL -u BANKCONF_SEED \
      "$BIN" run --sandbox-mutant "$name" --seed "$seed" $skip \
      --write-expectations "$file" >"$out/$name.$label.log" 2>&1
  fi
  echo "$?" >"$out/$name.$label.code"
}
export -f one
# The mutants a widget case catches (they need the browser).
WIDGET_MUTANTS=$("$BIN" serve --list-mutants | awk '/^[a-z]/ {m = $1} /caught by:/ && /widget\./ {print m}' | tr '\n' ' ')
export BIN out FOREIGN WIDGET_MUTANTS

mutants=${MUTANTS:-$("$BIN" serve --list-mutants | awk '/^[a-z]/ {print $1}')}
subjects=""
for m in $mutants; do subjects="$subjects mutant:$m"; done
if [ -n "$FOREIGN" ]; then
  for v in $VARIANTS; do subjects="$subjects foreign:$v"; done
fi

# Each run's seed and label: the quiet runs first, then (RUNS=5) those under load.
quiet="$SEED_A:a $SEED_B:b"
loaded=""
if [ "$RUNS" = 5 ]; then
  quiet="$quiet $SEED_A:a2"
  loaded="$SEED_A:busy-a $SEED_B:busy-b"
fi
phase() {
  for s in $subjects; do
    for run in $1; do printf '%s %s %s\n' "$s" "${run%%:*}" "${run#*:}"; done
  done | xargs -P "$PARALLEL" -L 1 bash -c 'one "$0" "$1" "$2"'
}
phase "$quiet"
if [ -n "$loaded" ]; then
  yes >/dev/null &
  busy+=("$!")
  yes >/dev/null &
  busy+=("$!")
  phase "$loaded"
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
  busy=()
fi
labels=$(for run in $quiet $loaded; do printf '%s ' "${run#*:}"; done)

# A mutant that breaks so much shared state that which other cases fail depends on timing
# (`Mutant::noisy` in src/sandbox/faults/): only its catching cases are reproducible, so every
# file must name those, and nothing more is compared.
# The list is the binary's: the mutants `--list-mutants` shows with the flag `noisy`.
NOISY=$("$BIN" serve --list-mutants | awk '/^[a-z]/ {m = $1} /^ +flags: .*noisy/ {print m}' | tr '\n' ' ')
total=0
differ=0
for s in $subjects; do
  name=${s#*:}
  total=$((total + 1))
  first="$out/$name.a.toml"
  if [ "${s%%:*}" = mutant ] && [[ " $NOISY " == *" $name "* ]]; then
    cases=$("$BIN" serve --list-mutants | awk -v m="$name" '$1 == m {getline; sub(/.*caught by: /, ""); gsub(/,/, ""); print}')
    missing=""
    for c in $cases; do
      for l in $labels; do
        grep -q "^case = \"$c\"" "$out/$name.$l.toml" || missing="$missing $c@$l"
      done
    done
    if [ -n "$missing" ]; then
      differ=$((differ + 1))
      echo "DIFFER $name (noisy: only its catching cases compared): missing from a file:$missing"
    fi
    continue
  fi
  distinct=$(for l in $labels; do cksum <"$out/$name.$l.toml"; done | sort -u | wc -l)
  if [ "$distinct" != 1 ]; then
    differ=$((differ + 1))
    echo "DIFFER $name: $distinct distinct expectations files in $(echo "$labels" | wc -w) runs (exits: $(for l in $labels; do cat "$out/$name.$l.code"; done | tr '\n' ' '))"
    for l in $labels; do
      diff "$first" "$out/$name.$l.toml" | grep '^[<>] case' | sed "s/^/    a vs $l: /"
    done
    echo "    rerun: bankconf run --sandbox-mutant $name --seed $SEED_A --write-expectations a.toml"
    echo "    rerun: bankconf run --sandbox-mutant $name --seed $SEED_B --write-expectations b.toml"
  fi
done
echo "same-failures: $((total - differ)) of $total subjects wrote identical expectations (a noisy one: its catching cases) in" \
  "$(echo "$labels" | wc -w) runs each (seeds $SEED_A and $SEED_B${loaded:+, two under two busy loops});" \
  "$differ differ; $(($(date +%s) - started)) s"
[ "$differ" = 0 ]
