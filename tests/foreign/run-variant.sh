#!/usr/bin/env bash
# Usage: tests/foreign/run-variant.sh TARGET VARIANT [extra bankconf run args, e.g. --seed N]
#
# The one runner of the foreign targets (tests/foreign/index.tsv): starts TARGET's server
# (tests/foreign/TARGET/, or a path to a target's folder) with VARIANT on a free loopback port and
# two fresh API keys, runs `bankconf run` against it with the target's driver, stops the server
# and exits with bankconf's exit code (2 if the server did not start).
#
# What differs between targets is in TARGET/target.conf, `key = value` lines (never sourced):
#   service   the service name (§5.2), given to the server and to bankconf
#   key       the keys' shape: a prefix, an alphabet (alnum, hex or urlsafe) and a length
#   keys_env  the environment variable the server reads its keys from, comma-separated
#   server    the server's command line
#   listen    what the server prints on stdout once it listens: `url` (line 1 the base URL),
#             `url admin` (line 2 the admin URL besides), `PORT` (a line `PORT <n>`) or `port`
#             (line 1 the port)
#   driver    bankconf's --driver command
# In `server` and `driver`: {dir} the target's folder, {python} the Python interpreter itself
# (not a pyenv shim, slow to start under load), {node}, {variant}, {service}, {base} the API base
# URL, {admin} the admin URL (`url admin` only), {port}.
#
# Env: BANKCONF_BIN (default target/release/bankconf of this repository); SKIP_BROWSER=1 adds
# --skip-browser; SHOW_SERVER_ERR=1 prints the server's stderr after the run (always printed when
# it did not start). The keys reach bankconf by its environment only, never its command line.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: run-variant.sh TARGET VARIANT [bankconf args...]}
variant=${2:?usage: run-variant.sh TARGET VARIANT [bankconf args...]}
shift 2
if [ -d "$target" ]; then dir=$(cd "$target" && pwd); else dir=$root/tests/foreign/$target; fi
conf=$dir/target.conf
[ -r "$conf" ] || { echo "run-variant: no $conf" >&2; exit 2; }
bin=${BANKCONF_BIN:-$root/target/release/bankconf}

declare -A cfg
while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    cfg[${line%% = *}]=${line#* = }
done <"$conf"
for k in service key keys_env server listen driver; do
    [ -n "${cfg[$k]:-}" ] || { echo "run-variant: $conf names no $k" >&2; exit 2; }
done
service=${cfg[service]}
python=${FOREIGN_PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
node=${NODE:-node}

# A fresh key of the target's shape: prefix, alphabet, length.
read -r key_prefix key_chars key_length <<<"${cfg[key]}"
gen_key() {
    "$python" -S -c 'import secrets, string, sys
chars = {"alnum": string.ascii_letters + string.digits, "hex": "0123456789abcdef",
         "urlsafe": string.ascii_letters + string.digits + "-_"}[sys.argv[2]]
print(sys.argv[1] + "".join(secrets.choice(chars) for _ in range(int(sys.argv[3]))))' \
        "$key_prefix" "$key_chars" "$key_length"
}
key1=$(gen_key) && key2=$(gen_key) || { echo "run-variant: cannot make keys" >&2; exit 2; }

# {name} placeholders of a config value.
fill() {
    local s=$1
    s=${s//\{dir\}/$dir}
    s=${s//\{python\}/$python}
    s=${s//\{node\}/$node}
    s=${s//\{variant\}/$variant}
    s=${s//\{service\}/$service}
    s=${s//\{base\}/${base:-}}
    s=${s//\{admin\}/${admin:-}}
    s=${s//\{port\}/${port:-}}
    printf '%s' "$s"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/foreign-run.XXXXXX")
mkfifo "$tmp/stdin"
server_pid=
bankconf_pid=
stop_server() {
    # Closing the server's stdin ends most servers; the others are ended by their pid.
    { exec 9>&-; } 2>/dev/null
    [ -n "$server_pid" ] || return 0
    for _ in $(seq 1 20); do
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
}
cleanup() {
    stop_server
    rm -rf "$tmp"
}
on_signal() {
    trap - INT TERM
    if [ -n "$bankconf_pid" ]; then
        kill -TERM "$bankconf_pid" 2>/dev/null
        wait "$bankconf_pid" 2>/dev/null
    fi
    cleanup
    exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap cleanup EXIT

# The server's words, each filled on its own (a folder with spaces stays one word).
read -r -a words <<<"${cfg[server]}"
argv=()
for w in "${words[@]}"; do argv+=("$(fill "$w")"); done
env "${cfg[keys_env]}=$key1,$key2" "${argv[@]}" <"$tmp/stdin" >"$tmp/stdout" 2>"$tmp/stderr" &
server_pid=$!
# Hold the server's stdin open: it lives while this descriptor is open.
exec 9>"$tmp/stdin"

base= admin= port=
for _ in $(seq 1 150); do
    case ${cfg[listen]} in
        url) [ "$(wc -l <"$tmp/stdout")" -ge 1 ] && base=$(sed -n 1p "$tmp/stdout") ;;
        'url admin') [ "$(wc -l <"$tmp/stdout")" -ge 2 ] && { base=$(sed -n 1p "$tmp/stdout"); admin=$(sed -n 2p "$tmp/stdout"); } ;;
        PORT) port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$tmp/stdout" | head -n 1) ;;
        port) [ "$(wc -l <"$tmp/stdout")" -ge 1 ] && port=$(sed -n '1s/^\([0-9][0-9]*\)$/\1/p' "$tmp/stdout") ;;
        *) echo "run-variant: unknown listen '${cfg[listen]}' in $conf" >&2; exit 2 ;;
    esac
    [ -n "$port" ] && base=http://127.0.0.1:$port
    [ -n "$base" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$base" ]; then
    echo "run-variant: the server of $(basename "$dir") (variant $variant) did not start:" >&2
    tail -n 40 "$tmp/stderr" >&2
    exit 2
fi
port=${port:-$(printf '%s' "$base" | sed -n 's/.*:\([0-9][0-9]*\).*/\1/p')}
echo "run-variant: $(basename "$dir") variant $variant at $base" >&2

extra=()
[ "${SKIP_BROWSER:-0}" = 1 ] && extra+=(--skip-browser)
BANKCONF_API_KEY=$key1 BANKCONF_SECOND_API_KEY=$key2 "$bin" run --base-url "$base" \
    --service "$service" --driver "$(fill "${cfg[driver]}")" ${extra[@]+"${extra[@]}"} "$@" 9>&- &
bankconf_pid=$!
wait "$bankconf_pid"
rc=$?
bankconf_pid=
stop_server
if [ -s "$tmp/stderr" ] && [ "${SHOW_SERVER_ERR:-0}" = 1 ]; then
    echo "--- server stderr (variant $variant) ---" >&2
    tail -n 40 "$tmp/stderr" >&2
fi
exit "$rc"
