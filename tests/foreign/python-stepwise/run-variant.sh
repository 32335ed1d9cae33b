#!/usr/bin/env bash
# Usage: run-variant.sh VARIANT [extra bankconf run args, e.g. --report-json FILE --seed N]
# Starts server.py with VARIANT on a free loopback port, runs bankconf against it with the
# driver.py driver, stops the server, and exits with bankconf's exit code.
# Env: BANKCONF_BIN (default target/release/bankconf of this repository), SERVICE (default acme),
#      SKIP_BROWSER=1 adds --skip-browser, PYTHON (default python3 on PATH).
set -u
here=$(cd "$(dirname "$0")" && pwd)
variant=${1:?usage: run-variant.sh VARIANT [bankconf args...]}
shift
bin=${BANKCONF_BIN:-$here/../../target/release/bankconf}
service=${SERVICE:-acme}
py=${PYTHON:-$(readlink -f "$(command -v python3.11 || command -v python3)")}
gen_key() { "$py" -c "import secrets,string,sys;a=string.ascii_letters+string.digits;print(sys.argv[1]+'_live_'+''.join(secrets.choice(a) for _ in range(32)))" "$service"; }
key1=$(gen_key)
key2=$(gen_key)

work=$(mktemp -d "${TMPDIR:-/tmp}/foreign-3-run.XXXXXX")
mkfifo "$work/stdin"
# Hold the server's stdin open (read-write, so opening does not block); it closes when we exit.
exec 7<>"$work/stdin"
FOREIGN_API_KEYS="$key1,$key2" "$py" "$here/server.py" --port 0 --variant "$variant" \
    --service "$service" <"$work/stdin" >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
cleanup() {
    kill "$server_pid" 2>/dev/null
    exec 7>&-
    wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

url="" admin=""
for _ in $(seq 1 100); do
    admin=$(sed -n 2p "$work/stdout" 2>/dev/null)
    [ -n "$admin" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "run-variant: the server did not start:" >&2
        cat "$work/stderr" >&2
        exit 2
    fi
    sleep 0.1
done
[ -n "$admin" ] || { echo "run-variant: no port from the server" >&2; exit 2; }
url=$(sed -n 1p "$work/stdout")
echo "run-variant: variant $variant at $url" >&2

extra=()
[ "${SKIP_BROWSER:-0}" = 1 ] && extra+=(--skip-browser)
BANKCONF_API_KEY="$key1" BANKCONF_SECOND_API_KEY="$key2" \
    "$bin" run --base-url "$url" --service "$service" \
    --api-key "$key1" --second-api-key "$key2" \
    --driver "$py $here/driver.py $admin" "${extra[@]}" "$@"
rc=$?
if [ -s "$work/stderr" ]; then
    echo "run-variant: server stderr:" >&2
    tail -n 30 "$work/stderr" >&2
fi
exit $rc
