#!/usr/bin/env bash
# Usage: run-variant.sh VARIANT [extra bankconf args]
# Starts server.py with VARIANT on a free port with two fresh random API keys, runs bankconf
# against it, stops the server and exits with bankconf's exit code (2 if the server did not start).
set -u
here=$(cd "$(dirname "$0")" && pwd)
variant=${1:?usage: run-variant.sh VARIANT [bankconf args]}
shift
service=bankly
: "${BANKCONF_BIN:=bankconf}"

newkey() { python3 -c 'import secrets,string; a=string.ascii_letters+string.digits; print("bkl_"+"".join(secrets.choice(a) for _ in range(32)))'; }
k1=$(newkey)
k2=$(newkey)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/foreign5.XXXXXX")
mkfifo "$tmp/stdin"
pid=
cleanup() {
    exec 3>&- 2>/dev/null   # closing the server's stdin makes it exit
    if [ -n "$pid" ]; then
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

FOREIGN_API_KEYS="$k1,$k2" python3 "$here/server.py" --port 0 --variant "$variant" --service "$service" \
    <"$tmp/stdin" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/stdin"

base= admin=
for _ in $(seq 1 100); do
    if [ "$(wc -l <"$tmp/out")" -ge 2 ]; then
        base=$(sed -n 1p "$tmp/out")
        admin=$(sed -n 2p "$tmp/out")
        break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$base" ] || [ -z "$admin" ]; then
    echo "run-variant: the server did not start:" >&2
    cat "$tmp/err" >&2
    exit 2
fi

skip=
[ "${SKIP_BROWSER:-0}" = 1 ] && skip=--skip-browser
"$BANKCONF_BIN" run --base-url "$base" --service "$service" --api-key "$k1" --second-api-key "$k2" \
    --driver "python3 $here/driver.py $admin" $skip "$@"
code=$?
if [ -s "$tmp/err" ]; then
    echo "run-variant: server stderr:" >&2
    tail -n 20 "$tmp/err" >&2
fi
exit $code
