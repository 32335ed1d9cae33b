#!/usr/bin/env bash
# Usage: run-variant.sh VARIANT [extra bankconf run args...]
#
# Starts server.py with VARIANT on a free loopback port, with two fresh API keys (two clients),
# runs bankconf against it with driver.py, stops the server and exits with bankconf's exit code.
# Environment: BANKCONF_BIN (default /work/main/target/debug/bankconf), SERVICE (default acme),
# SKIP_BROWSER=1 to add --skip-browser.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
variant="${1:-none}"
[ $# -gt 0 ] && shift
service="${SERVICE:-acme}"
bin="${BANKCONF_BIN:-$here/../../target/debug/bankconf}"

gen_key() {
    python3 -c 'import secrets, string, sys
alphabet = string.ascii_letters + string.digits
print(sys.argv[1] + "_live_" + "".join(secrets.choice(alphabet) for _ in range(32)))' "$service"
}

tmp="$(mktemp -d "${TMPDIR:-/tmp}/foreign-7.XXXXXX")" || exit 2
server_pid=""

cleanup() {
    # Closing the server's stdin makes it exit; kill it by its pid if it does not.
    exec 3>&- 2>/dev/null
    if [ -n "$server_pid" ]; then
        for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$server_pid" 2>/dev/null; then
            kill "$server_pid" 2>/dev/null
            sleep 0.3
            kill -9 "$server_pid" 2>/dev/null
        fi
        wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

KEY1="$(gen_key)" && KEY2="$(gen_key)" || { echo "run-variant.sh: cannot generate keys" >&2; exit 2; }

mkfifo "$tmp/stdin" || exit 2
FOREIGN_API_KEYS="$KEY1,$KEY2" python3 "$here/server.py" --port 0 --variant "$variant" --service "$service" \
    <"$tmp/stdin" >"$tmp/stdout" 2>"$tmp/stderr" &
server_pid=$!
exec 3>"$tmp/stdin"

port=""
for _ in $(seq 1 150); do
    port="$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$tmp/stdout" 2>/dev/null | head -n 1)"
    [ -n "$port" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "run-variant.sh: the server exited before listening:" >&2
        cat "$tmp/stderr" >&2
        exit 2
    fi
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "run-variant.sh: the server did not print its port" >&2
    exit 2
fi

args=(run --base-url "http://127.0.0.1:$port" --service "$service" --driver "$here/driver.py")
if [ "${SKIP_BROWSER:-}" = 1 ]; then
    have=0
    for a in "$@"; do [ "$a" = --skip-browser ] && have=1; done
    [ "$have" = 0 ] && args+=(--skip-browser)
fi

BANKCONF_API_KEY="$KEY1" BANKCONF_SECOND_API_KEY="$KEY2" "$bin" "${args[@]}" "$@" 3>&-
rc=$?
if grep -q 'internal error\|failed' "$tmp/stderr" 2>/dev/null; then
    echo "run-variant.sh: server stderr ($(grep -c 'delivery failed' "$tmp/stderr") failed webhook delivery attempts):" >&2
    grep 'internal error\|failed' "$tmp/stderr" | head -n 20 >&2
fi
exit "$rc"
