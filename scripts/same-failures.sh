#!/usr/bin/env bash
# The same failures every time (issue 42): a release gate is written from a failing server, so
# a failing server must get the same failed set in every run. Every mutant of the embedded
# sandbox (`bankconf serve --list-mutants`) is run twice with different `--seed`s, each run
# writing `--write-expectations`; the two files must be byte-identical.
#
# Prints one line per mutant whose files differ (with the diff and both rerun commands), then
# the count and the total time; exits 1 when any pair differs. A noisy mutant (which other cases
# fail depends on timing, `Mutant::noisy`) is held to its catching cases only.
# Usage: scripts/same-failures.sh [SEED_A SEED_B] (default 1 2).
# Environment: BIN, the bankconf to run (default: target/debug/bankconf, built here if missing);
# PARALLEL, runs at a time (default 2); MUTANTS, a space-separated subset (default: every one).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/bankconf}
[ -x "$BIN" ] || cargo build --quiet
PARALLEL=${PARALLEL:-2}
SEED_A=${1:-1}
SEED_B=${2:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
started=$(date +%s)

# One run: a mutant and a seed; its expectations file and log land in $out.
one() {
  local mutant=$1 seed=$2
  env -u BANKCONF_API_KEY -u BANKCONF_SECOND_API_KEY -u BANKCONF_BASE_URL -u BANKCONF_SEED \
    "$BIN" run --sandbox-mutant "$mutant" --seed "$seed" \
    --write-expectations "$out/$mutant.$seed.toml" >"$out/$mutant.$seed.log" 2>&1
  echo "$?" >"$out/$mutant.$seed.code"
}
export -f one
export BIN out

mutants=${MUTANTS:-$("$BIN" serve --list-mutants | awk '/^[a-z]/ {print $1}')}
for m in $mutants; do printf '%s %s\n%s %s\n' "$m" "$SEED_A" "$m" "$SEED_B"; done |
  xargs -P "$PARALLEL" -L 1 bash -c 'one "$0" "$1"'

# A mutant that breaks so much shared state that which other cases fail depends on timing
# (`Mutant::noisy` in src/sandbox/faults.rs, a `noisy:` line in `--list-mutants`): only its
# catching cases are reproducible, so both files must name those, and nothing more is compared.
NOISY=$("$BIN" serve --list-mutants | awk '/^[a-z]/ {m = $1} /^ +noisy:/ {print m}' | tr '\n' ' ')
total=0
differ=0
for m in $mutants; do
  total=$((total + 1))
  a="$out/$m.$SEED_A.toml" b="$out/$m.$SEED_B.toml"
  if [[ " $NOISY " == *" $m "* ]]; then
    cases=$("$BIN" serve --list-mutants | awk -v m="$m" '$1 == m {getline; sub(/.*caught by: /, ""); gsub(/,/, ""); print}')
    missing=""
    for c in $cases; do
      grep -q "^case = \"$c\"" "$a" && grep -q "^case = \"$c\"" "$b" || missing="$missing $c"
    done
    if [ -n "$missing" ]; then
      differ=$((differ + 1))
      echo "DIFFER $m (noisy: only its catching cases compared): not in both files:$missing"
    fi
    continue
  fi
  if ! cmp -s "$a" "$b"; then
    differ=$((differ + 1))
    echo "DIFFER $m (exit $(cat "$out/$m.$SEED_A.code") and $(cat "$out/$m.$SEED_B.code"))"
    diff "$a" "$b" | grep '^[<>] case' | sed 's/^/    /'
    echo "    rerun: bankconf run --sandbox-mutant $m --seed $SEED_A --write-expectations a.toml"
    echo "    rerun: bankconf run --sandbox-mutant $m --seed $SEED_B --write-expectations b.toml"
  fi
done
echo "same-failures: $((total - differ)) of $total mutants wrote identical expectations (a noisy one: its catching cases) under seeds $SEED_A and $SEED_B;" \
  "$differ differ; $(($(date +%s) - started)) s"
[ "$differ" = 0 ]
