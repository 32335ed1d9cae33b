#!/usr/bin/env bash
# Usage: run-variant.sh VARIANT [extra bankconf args...]
# Starts server.py with VARIANT on a free port with two fresh API keys, runs bankconf against
# it with driver.py, stops the server and exits with bankconf's exit code (2 if the server
# cannot start).
set -u

here="$(cd "$(dirname "$0")" && pwd)"
variant="${1:-none}"
[ $# -gt 0 ] && shift
service="${SERVICE:-acme}"
bin="${BANKCONF_BIN:-$here/../../target/debug/bankconf}"

gen_key() {
  python3 -c 'import secrets,string,sys
a = string.ascii_letters + string.digits
print(sys.argv[1] + "_live_" + "".join(secrets.choice(a) for _ in range(32)))' "$service"
}
key1="$(gen_key)"
key2="$(gen_key)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/foreign12.XXXXXX")"
server_pid=""

cleanup() {
  exec 8>&- 2>/dev/null || true          # closing the fifo closes the server's stdin
  if [ -n "$server_pid" ]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.2
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
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

mkfifo "$tmp/stdin"
FOREIGN_API_KEYS="$key1,$key2" python3 -u "$here/server.py" --port 0 --variant "$variant" \
  --service "$service" <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err" &
server_pid=$!
exec 8>"$tmp/stdin"   # hold the write end open: the server runs until it is closed

port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$tmp/out" 2>/dev/null | head -n 1)"
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "run-variant.sh: the server did not start (variant $variant):" >&2
  cat "$tmp/err" >&2
  cleanup
  exit 2
fi

extra=()
[ "${SKIP_BROWSER:-}" = "1" ] && extra+=(--skip-browser)

BANKCONF_API_KEY="$key1" BANKCONF_SECOND_API_KEY="$key2" \
  "$bin" run --base-url "http://127.0.0.1:$port" --service "$service" \
  --driver "python3 '$here/driver.py' --admin 'http://127.0.0.1:$port/__admin/action'" \
  ${extra[@]+"${extra[@]}"} "$@"
rc=$?

cleanup
exit "$rc"
