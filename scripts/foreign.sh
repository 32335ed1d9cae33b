#!/usr/bin/env bash
# Targets the team did not write (issue 49, issue 75): servers written from the spec alone, by
# people who had not read the harness, each with violations and legal choices of its author's own.
# tests/foreign/index.tsv lists them; tests/foreign/NAME/ holds each one's VARIANTS.md (what each
# variant does and why, with the section), scores.tsv (the recorded outcome per variant) and
# target.conf (how tests/foreign/run-variant.sh, the one runner, starts and drives it).
#
#   scripts/foreign.sh score   run every variant of one target once; a violation must fail the run
#                              (exit 1), a legal choice must pass it (exit 0). Each outcome is
#                              compared with the target's scores.tsv: a caught violation that is
#                              no longer caught, or a passing legal variant that fails, is a
#                              regression (exit 1); a better outcome asks for `--bless`.
#   scripts/foreign.sh all     the same for every target of tests/foreign/index.tsv, PARALLEL
#                              runs at a time over all of them (no target waits for another's
#                              last run); each target's table, then one line with the totals.
#   scripts/foreign.sh same    every violation variant of one target RUNS times (default 5:
#                              seeds 1 and 2 on a quiet machine, seed 1 again, and seeds 1 and 2
#                              under two busy loops); each must write byte-identical expectations
#                              files (issue 51); where they differ, the lines that differ from
#                              the first run's.
#   scripts/foreign.sh index   checks that tests/foreign/index.tsv's counted columns (violations,
#                              legal, now) agree with each target's VARIANTS.md and scores.tsv.
#   --bless (with score or all) rewrite the scores.tsv from this run. An outcome that differs
#                              between runs is recorded by hand as `flaky` (never a regression,
#                              and a finding of issue 51 to fix).
#
# Environment: BIN, the bankconf to run (default target/debug/bankconf, built if missing);
# PARALLEL, runs at a time (default 2); VARIANTS, a space-separated subset; SKIP_BROWSER=1;
# SHARE=K/N (with score or all), only the variants whose place in VARIANTS.md is K modulo N;
# TARGET, the target's name in tests/foreign/index.tsv (default python-outsider), or FOREIGN_DIR,
# its folder; TARGETS (with all), a space-separated subset of the index's names.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-score}
bless=${2:-}
BIN=${BIN:-target/debug/bankconf}
[ -x "$BIN" ] || cargo build --quiet
export BANKCONF_BIN=$PWD/$BIN
[ "${BIN#/}" != "$BIN" ] && export BANKCONF_BIN=$BIN
PARALLEL=${PARALLEL:-2}
index=tests/foreign/index.tsv
FOREIGN_DIR=${FOREIGN_DIR:-tests/foreign/${TARGET:-python-outsider}}
FOREIGN_DIR=${FOREIGN_DIR%/}
# The real interpreter, found once (a pyenv shim is slow to start under load).
FOREIGN_PYTHON=$(python3 -c 'import sys; print(sys.executable)')
export FOREIGN_PYTHON
out=$(mktemp -d)
busy=()
cleanup() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
started=$(date +%s)

# `name kind` for every row of a target's variant table (default $FOREIGN_DIR's).
rows() {
  awk -F'|' '/^\| [a-z0-9-]+ \| (violation|legal) \|/ {gsub(/ /, "", $2); gsub(/ /, "", $3); print $2, $3}' \
    "${1:-$FOREIGN_DIR}/VARIANTS.md"
}
selected() {
  if [ -n "${VARIANTS:-}" ]; then
    rows "$@" | awk -v want=" $VARIANTS " 'index(want, " " $1 " ")'
  elif [ -n "${SHARE:-}" ]; then
    # SHARE=K/N: the rows whose place in the table is K modulo N (every row once in N runs).
    rows "$@" | awk -v k="${SHARE%/*}" -v n="${SHARE#*/}" '(NR - 1) % n == k % n'
  else
    rows "$@"
  fi
}

# One run of a target's variant: its exit code, expectations file and log under $out, named by
# the target's folder name, the variant and `tag`.
one() {
  local dir=$1 variant=$2 seed=$3 tag=$4
  local base=$out/${dir##*/}.$variant.$tag
  env -u BANKCONF_API_KEY -u BANKCONF_SECOND_API_KEY -u BANKCONF_BASE_URL -u BANKCONF_SEED \
    tests/foreign/run-variant.sh "$dir" "$variant" --seed "$seed" --write-expectations "$base.toml" \
    >"$base.log" 2>&1
  echo "$?" >"$base.code"
}
export -f one
export out

# Failed cases of a run, from its expectations file: `a,b,c` (or `-`).
failed() { grep -A1 '^case = ' "$1" 2>/dev/null | paste - - - 2>/dev/null | awk -F'"' '/outcome = "failed"/ {print $2}' | paste -sd, - | sed 's/^$/-/'; }

# Runs every selected variant of the targets given (folders), once each with seed 1,
# PARALLEL at a time over all of them.
launch() {
  for dir in "$@"; do
    selected "$dir" | while read -r v _; do echo "$dir $v 1 score"; done
  done | xargs -P "$PARALLEL" -L 1 bash -c 'one "$0" "$1" "$2" "$3"'
}

# Judges one target's runs against its scores.tsv: its table, its regressions (with each run's
# tail) and one summary line; with --bless, rewrites its scores.tsv. Exit 1 on a regression.
judge() {
  local dir=$1 name=${1##*/}
  local scores=$dir/scores.tsv
  local regress=0 better=0 caught=0 violations=0 passed=0 legal=0
  local new=$out/$name.scores.tsv
  printf 'variant\tkind\toutcome\texit\tfailed cases\n' >"$new"
  while read -r v kind; do
    local code outcome run=$out/$name.$v.score
    code=$(cat "$run.code" 2>/dev/null || echo 2)
    case "$kind:$code" in
      violation:1) outcome=caught ;;
      violation:*) outcome=missed ;;
      legal:0) outcome=passed ;;
      legal:*) outcome=false-verdict ;;
    esac
    [ "$kind" = violation ] && violations=$((violations + 1))
    [ "$outcome" = caught ] && caught=$((caught + 1))
    [ "$kind" = legal ] && legal=$((legal + 1))
    [ "$outcome" = passed ] && passed=$((passed + 1))
    printf '%s\t%s\t%s\t%s\t%s\n' "$v" "$kind" "$outcome" "$code" "$(failed "$run.toml")" >>"$new"
    local was
    was=$(awk -F'\t' -v v="$v" '$1 == v {print $3}' "$scores" 2>/dev/null)
    if { [ "$was" = caught ] || [ "$was" = passed ]; } && [ "$outcome" != "$was" ]; then
      regress=$((regress + 1))
      echo "REGRESSION $name $v ($kind): was $was, now $outcome (exit $code); the run's tail:"
      tail -n 25 "$run.log" | sed 's/^/    /'
    elif [ "$was" != "$outcome" ]; then
      better=$((better + 1))
      echo "CHANGED $name $v ($kind): was ${was:-unrecorded}, now $outcome (exit $code)"
    fi
  done < <(selected "$dir")
  # With all, a target's table only where an outcome changed (700 rows otherwise).
  if [ "${TABLES:-all}" = all ] || [ "$regress" -gt 0 ] || [ "$better" -gt 0 ]; then
    column -t -s $'\t' "$new" | sed 's/^/  /'
  fi
  echo "foreign $name: $caught of $violations violations caught, $passed of $legal legal variants passed;" \
    "$regress regressions"
  if [ "$bless" = --bless ]; then
    cp "$new" "$scores"
    echo "foreign $name: wrote $scores"
  elif [ "$better" -gt 0 ] && [ "$regress" = 0 ]; then
    echo "foreign $name: $better outcomes changed without regressing: scripts/foreign.sh score --bless records them"
  fi
  # For all's totals: violations caught legal passed regressions.
  echo "$violations $caught $legal $passed $regress" >"$out/$name.totals"
  [ "$regress" = 0 ]
}

score() {
  launch "$FOREIGN_DIR"
  judge "$FOREIGN_DIR"
  local ok=$?
  echo "foreign: $(($(date +%s) - started)) s"
  return "$ok"
}

# The targets of the index (its first column), or TARGETS.
targets() {
  if [ -n "${TARGETS:-}" ]; then printf '%s\n' $TARGETS; else awk -F'\t' 'NR > 1 && $1 !~ /^#/ {print $1}' "$index"; fi
}

# The index's counted columns against each target's own files: violations and legal variants
# (VARIANTS.md) and the score now (scores.tsv), so that the catalogue never drifts from them.
check_index() {
  local bad=0 name v l now rv rl rnow
  while IFS=$'\t' read -r name _ _ _ v l _ _ now _; do
    rv=$(rows "tests/foreign/$name" | awk '$2 == "violation"' | wc -l)
    rl=$(rows "tests/foreign/$name" | awk '$2 == "legal"' | wc -l)
    rnow=$(awk -F'\t' 'NR > 1 {if ($2 == "violation") {v++; c += $3 == "caught"} else {l++; p += $3 == "passed"}}
      END {printf "%d/%d caught, %d/%d passed", c, v, p, l}' "tests/foreign/$name/scores.tsv")
    if [ "$v $l $now" != "$rv $rl $rnow" ]; then
      echo "foreign: $index row $name says $v violations, $l legal, now $now; its files say $rv, $rl, $rnow"
      bad=1
    fi
  done < <(tail -n +2 "$index")
  return "$bad"
}

all() {
  local dirs=() failed_targets=()
  check_index || return 1
  while read -r t; do
    [ -r "tests/foreign/$t/target.conf" ] || { echo "foreign: no target $t (tests/foreign/$t/target.conf)" >&2; return 2; }
    dirs+=("tests/foreign/$t")
  done < <(targets)
  local runs=0
  for dir in "${dirs[@]}"; do runs=$((runs + $(selected "$dir" | wc -l))); done
  echo "foreign: ${#dirs[@]} targets, $runs variants, $PARALLEL runs at a time"
  launch "${dirs[@]}"
  for dir in "${dirs[@]}"; do
    TABLES=changed judge "$dir" || failed_targets+=("${dir##*/}")
  done
  cat "$out"/*.totals | awk -v targets="${#dirs[@]}" -v s="$(($(date +%s) - started))" \
    '{v += $1; c += $2; l += $3; p += $4; r += $5}
     END {printf "foreign, all %d targets: %d of %d violations caught, %d of %d legal variants passed; %d regressions; %d s\n", targets, c, v, p, l, r, s}'
  [ "${#failed_targets[@]}" = 0 ] || { echo "foreign: regressions in ${failed_targets[*]}"; return 1; }
}

# A run's own lines for its ignored cases (its expectations file keeps only their titles).
skips() { grep -A1 '^SKIP ' "$1" 2>/dev/null | grep -v '^--' | head -n 8 | cut -c1-240 | sed 's/^/        | /'; }

same() {
  local runs=${RUNS:-5}
  local plan=("1 a" "2 b" "1 c" "1 d-busy" "2 e-busy")
  local quiet=() loaded=()
  for p in "${plan[@]:0:$runs}"; do
    if [[ $p == *busy ]]; then loaded+=("$p"); else quiet+=("$p"); fi
  done
  local violations
  violations=$(selected | awk '$2 == "violation" {print $1}')
  local name=${FOREIGN_DIR##*/}
  echo "foreign same-failures: $name, $(echo $violations | wc -w) violation variants, $runs runs each"
  for p in "${quiet[@]}"; do
    for v in $violations; do echo "$FOREIGN_DIR $v $p"; done
  done | xargs -P "$PARALLEL" -L 1 bash -c 'one "$0" "$1" "$2" "$3"'
  if [ "${#loaded[@]}" -gt 0 ]; then
    # Two busy loops on the two cores while these runs go.
    for _ in 1 2; do (while :; do :; done) & busy+=("$!"); done
    for p in "${loaded[@]}"; do
      for v in $violations; do echo "$FOREIGN_DIR $v $p"; done
    done | xargs -P "$PARALLEL" -L 1 bash -c 'one "$0" "$1" "$2" "$3"'
    for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
    busy=()
  fi
  local total=0 differ=0
  for v in $violations; do
    total=$((total + 1))
    local first="" distinct
    distinct=$(for p in "${plan[@]:0:$runs}"; do md5sum <"$out/$name.$v.${p#* }.toml" 2>/dev/null || echo missing; done | sort -u | wc -l)
    if [ "$distinct" = 1 ]; then
      # One file: what it holds, so that a violation missed alike in every run shows too.
      echo "same $v: exit $(cat "$out/$name.$v.a.code" 2>/dev/null); failed: $(failed "$out/$name.$v.a.toml")"
    else
      differ=$((differ + 1))
      echo "DIFFER $v: $distinct different expectations files in $runs runs"
      for p in "${plan[@]:0:$runs}"; do
        local file=$out/$name.$v.${p#* }.toml
        first=${first:-$file}
        echo "    seed ${p% *} (${p#* }): exit $(cat "$out/$name.$v.${p#* }.code"); failed: $(failed "$file")"
        # What differs from the first run's file (a case ignored in one run only shows here, its
        # reason with it): the runs' files are gone when the script ends.
        if [ "$file" = "$first" ]; then
          # The first run's own reasons too: it may be the odd one out.
          skips "$out/$name.$v.${p#* }.log"
        elif ! cmp -s "$first" "$file"; then
          diff "$first" "$file" 2>/dev/null | grep -E '^[<>] (case|outcome|reason) = ' | head -n 12 | cut -c1-240 |
            sed 's/^/        /'
          skips "$out/$name.$v.${p#* }.log"
        fi
      done
    fi
  done
  echo "foreign same-failures: $((total - differ)) of $total violation variants wrote identical expectations in $runs runs;" \
    "$differ differ; $(($(date +%s) - started)) s"
  [ "$differ" = 0 ]
}

case $mode in
  score) score ;;
  all) all ;;
  index) check_index && echo "foreign: $index agrees with every target's VARIANTS.md and scores.tsv" ;;
  same) same ;;
  *) echo "usage: scripts/foreign.sh score [--bless] | all [--bless] | same" >&2; exit 2 ;;
esac
