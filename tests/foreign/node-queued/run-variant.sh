#!/usr/bin/env bash
# run-variant.sh VARIANT [extra bankconf args]: start server.js with VARIANT on a free port,
# run bankconf against it with two fresh "acme" keys, stop the server, exit with bankconf's code.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
variant="${1:?usage: run-variant.sh VARIANT [bankconf args]}"; shift
: "${BANKCONF_BIN:?set BANKCONF_BIN to the bankconf binary}"
k1="acme_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
k2="acme_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
tmp="$(mktemp -d)"
mkfifo "$tmp/in"
FOREIGN_API_KEYS="$k1,$k2" node "$here/server.js" --port 0 --variant "$variant" --service acme <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
spid=$!
exec 7>"$tmp/in"   # the server lives while this fd is open
for _ in $(seq 100); do [ "$(wc -l <"$tmp/out")" -ge 2 ] && break; sleep 0.1; done
base="$(sed -n 1p "$tmp/out")"; adminurl="$(sed -n 2p "$tmp/out")"
if [ -z "$base" ] || [ -z "$adminurl" ]; then echo "server did not start" >&2; cat "$tmp/err" >&2; exec 7>&-; kill "$spid" 2>/dev/null; rm -rf "$tmp"; exit 2; fi
skip=()
[ "${SKIP_BROWSER:-0}" = 1 ] && skip=(--skip-browser)
"$BANKCONF_BIN" run --base-url "$base" --service acme --api-key "$k1" --second-api-key "$k2" \
  --driver "node $here/driver.js $adminurl" "${skip[@]}" "$@"
rc=$?
exec 7>&-
for _ in $(seq 30); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
kill "$spid" 2>/dev/null
[ -s "$tmp/err" ] && { echo "--- server stderr ---" >&2; head -50 "$tmp/err" >&2; }
rm -rf "$tmp"
exit $rc
