#!/usr/bin/env bash
# Usage: run-variant.sh VARIANT [extra bankconf args]
# Starts server.js with the variant and two fresh keys, runs bankconf against it,
# stops the server and exits with bankconf's exit code (2 if the server did not start).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
variant="${1:?usage: run-variant.sh VARIANT [bankconf args]}"
shift
service="${SERVICE:-finlink}"
rand() { head -c 64 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c 32; }
k1="${service}_$(rand)"
k2="${service}_$(rand)"
tmp="$(mktemp -d)"
mkfifo "$tmp/in"
server_pid=""
cleanup() {
  exec 8>&- 2>/dev/null || true
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill "$server_pid" 2>/dev/null || true
    sleep 0.2
    kill -9 "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

FOREIGN_API_KEYS="$k1,$k2" node "$here/server.js" --port 0 --variant "$variant" --service "$service" \
  <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
server_pid=$!
exec 8>"$tmp/in"   # the server's stdin: closing it stops the server

base=""; admin=""
for _ in $(seq 1 100); do
  if [ "$(wc -l <"$tmp/out" 2>/dev/null || echo 0)" -ge 2 ]; then
    base="$(sed -n 1p "$tmp/out")"; admin="$(sed -n 2p "$tmp/out")"; break
  fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$base" ] || [ -z "$admin" ]; then
  echo "server did not start:" >&2; cat "$tmp/err" >&2
  exit 2
fi

skip=""
[ "${SKIP_BROWSER:-0}" = "1" ] && skip="--skip-browser"
"${BANKCONF_BIN:-bankconf}" run --base-url "$base" --service "$service" --api-key "$k1" --second-api-key "$k2" \
  --driver "node $here/driver.js $admin" $skip "$@"
rc=$?
if [ -s "$tmp/err" ]; then echo "--- server stderr ---" >&2; tail -20 "$tmp/err" >&2; fi
exit $rc
