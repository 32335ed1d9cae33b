#!/usr/bin/env bash
# run-variant.sh VARIANT [extra bankconf args...]
#
# Starts server.py with VARIANT on a free port with two fresh API keys, runs bankconf against it
# with driver.py, stops the server and exits with bankconf's exit code (2 if the server could
# not start).  Env: SERVICE (default acme), BANKCONF_BIN (default ../../target/debug/bankconf),
# SKIP_BROWSER=1 to pass --skip-browser.
set -u

here=$(cd "$(dirname "$0")" && pwd)
variant=${1:?usage: run-variant.sh VARIANT [extra bankconf args...]}
shift
service=${SERVICE:-acme}
bin=${BANKCONF_BIN:-$here/../../target/debug/bankconf}

key() {
    python3 -c 'import secrets, string, sys
a = string.ascii_letters + string.digits
print(sys.argv[1] + "_live_" + "".join(secrets.choice(a) for _ in range(32)))' "$service"
}
key1=$(key)
key2=$(key)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/foreign-20.XXXXXX")
fifo=$tmp/stdin
mkfifo "$fifo"
server_pid=
bankconf_pid=
fifo_open=0

stop_server() {
    if [ "$fifo_open" = 1 ]; then
        exec 9>&-
        fifo_open=0
    fi
    if [ -n "$server_pid" ]; then
        for _ in $(seq 1 50); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$server_pid" 2>/dev/null; then
            kill "$server_pid" 2>/dev/null
            sleep 0.3
            kill -9 "$server_pid" 2>/dev/null
        fi
        wait "$server_pid" 2>/dev/null
        server_pid=
    fi
}

cleanup() {
    stop_server
    rm -rf "$tmp"
}

on_signal() {
    local code=$1
    trap - INT TERM
    if [ -n "$bankconf_pid" ]; then
        kill -TERM "$bankconf_pid" 2>/dev/null
        wait "$bankconf_pid" 2>/dev/null
    fi
    cleanup
    exit "$code"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap cleanup EXIT

FOREIGN_API_KEYS="$key1,$key2" python3 "$here/server.py" --port 0 --variant "$variant" \
    --service "$service" --exit-on-stdin-eof <"$fifo" >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
exec 9>"$fifo"
fifo_open=1

port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$tmp/server.out" 2>/dev/null | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "run-variant.sh: server.py (variant $variant) did not start:" >&2
    cat "$tmp/server.err" >&2
    exit 2
fi

args=(run --base-url "http://127.0.0.1:$port" --service "$service"
      --driver "python3 '$here/driver.py' --admin 'http://127.0.0.1:$port/__admin/action'")
if [ "${SKIP_BROWSER:-0}" = 1 ]; then
    args+=(--skip-browser)
fi

BANKCONF_API_KEY=$key1 BANKCONF_SECOND_API_KEY=$key2 "$bin" "${args[@]}" "$@" 9>&- &
bankconf_pid=$!
wait "$bankconf_pid"
rc=$?
bankconf_pid=

stop_server
if [ -s "$tmp/server.err" ]; then
    echo "--- server.py stderr (variant $variant) ---" >&2
    tail -n 40 "$tmp/server.err" >&2
fi
exit "$rc"
