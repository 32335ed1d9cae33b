#!/usr/bin/env bash
# Usage: verify/widget.sh VARIANT  -- starts the server, creates a connection, opens the widget in
# headless Chromium and connects the connection through driver.py 2 s later.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
v=${1:-none}
tmp=$(mktemp -d)
mkfifo "$tmp/in"
K1=wire_$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 32)
WIRE_API_KEYS=$K1,wire_second python3 "$here/server.py" --variant "$v" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
exec 7>"$tmp/in"
for _ in $(seq 50); do [ -s "$tmp/out" ] && break; sleep 0.1; done
B=$(head -1 "$tmp/out")
C=$(curl -s -X POST -H "Authorization: Bearer $K1" "$B/v1/connections")
CID=$(echo "$C" | python3 -c 'import json,sys;print(json.load(sys.stdin)["connectionId"])')
TOK=$(echo "$C" | python3 -c 'import json,sys;print(json.load(sys.stdin)["widgetToken"])')
(sleep 2; BANKCONF_BASE_URL=$B BANKCONF_ACTION=connect BANKCONF_CONNECTION_ID=$CID python3 "$here/driver.py") &
node --experimental-websocket "$here/verify/widget-check.mjs" "$B" "$TOK" "$CID" 2>/dev/null
exec 7>&-
wait
rm -rf "$tmp"
