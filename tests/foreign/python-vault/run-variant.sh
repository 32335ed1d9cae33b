#!/usr/bin/env bash
# Run bankconf against the vault server started with one variant.
#   run-variant.sh VARIANT [extra bankconf args]
# Env: BANKCONF or BANKCONF_BIN (scripts/foreign.sh sets it; default the repository's release
# build), OUT_DIR (default <this dir>/out).
# Starts the server on a free port with two fresh keys, runs bankconf with --seed 1 and a JSON
# report, stops the server (and bankconf, if interrupted), prints the exit code and the failed
# case ids, and exits with bankconf's exit code (2 if the server does not start).
set -u
VARIANT=${1:?usage: run-variant.sh VARIANT [bankconf args]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
BANKCONF=${BANKCONF:-${BANKCONF_BIN:-$HERE/../../target/release/bankconf}}
OUT_DIR=${OUT_DIR:-$HERE/out}
mkdir -p "$OUT_DIR"
REPORT="$OUT_DIR/$VARIANT.json"
SERVER_LOG="$OUT_DIR/$VARIANT.server.log"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

KEY1="vault_$("$PY" -c 'import secrets; print(secrets.token_urlsafe(24))')"
KEY2="vault_$("$PY" -c 'import secrets; print(secrets.token_urlsafe(24))')"

PORT_FILE=$(mktemp "${TMPDIR:-/tmp}/vault-port.XXXXXX")
SPID=""
BPID=""
cleanup() {
    [ -n "$BPID" ] && kill "$BPID" 2>/dev/null && wait "$BPID" 2>/dev/null
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    rm -f "$PORT_FILE"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

VAULT_API_KEYS="$KEY1,$KEY2" "$PY" "$HERE/server.py" --port 0 --variant "$VARIANT" \
    >"$PORT_FILE" 2>"$SERVER_LOG" </dev/null &
SPID=$!

PORT=""
for _ in $(seq 1 100); do
    PORT=$(head -n 1 "$PORT_FILE" 2>/dev/null)
    [ -n "$PORT" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    echo "run-variant: the server did not start:" >&2
    cat "$SERVER_LOG" >&2
    exit 2
fi

# --seed 1 unless the caller gives one (scripts/foreign.sh does).
SEED_ARGS=(--seed 1)
for a in "$@"; do [ "$a" = --seed ] && SEED_ARGS=(); done
BROWSER_ARGS=()
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-headless-shell >/dev/null 2>&1; then
    BROWSER_ARGS=(--skip-browser)
fi

BANKCONF_API_KEY="$KEY1" BANKCONF_SECOND_API_KEY="$KEY2" "$BANKCONF" run \
    --base-url "http://127.0.0.1:$PORT" --service vault \
    --driver "$PY $HERE/driver.py" "${SEED_ARGS[@]}" --report-json "$REPORT" \
    ${BROWSER_ARGS[@]+"${BROWSER_ARGS[@]}"} "$@" &
BPID=$!
wait "$BPID"
RC=$?
BPID=""

FAILED=$("$PY" - "$REPORT" <<'EOF'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception:
    print(""); sys.exit(0)
found = []
def walk(v):
    if isinstance(v, dict):
        if "id" in v and v.get("outcome") in ("failed", "error"):
            found.append(v["id"] if v.get("outcome") == "failed" else v["id"] + "(error)")
        for x in v.values():
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(report)
print(",".join(dict.fromkeys(found)))
EOF
)
echo "variant=$VARIANT exit=$RC failed=${FAILED:-none}"
exit "$RC"
