#!/bin/sh
# Driver for the bankconf harness's driver protocol, targeting the embedded sandbox's control
# routes (see src/sandbox/control.rs). Run once per action, e.g. `sh -c examples/sandbox-driver.sh`.
#
# Environment: BANKCONF_ACTION (register_webhook, unregister_webhook, connect, fail_auth,
# require_mfa, error, disconnect, update_accounts, delete_transaction), BANKCONF_BASE_URL,
# BANKCONF_API_KEY and BANKCONF_SECOND_API_KEY (each webhook address is registered for its
# client's key), BANKCONF_CONNECTION_ID,
# BANKCONF_WIDGET_TOKEN (unused: the sandbox needs no widget session), BANKCONF_ACCOUNT_ID,
# BANKCONF_TRANSACTION_ID, BANKCONF_WEBHOOK_URL, BANKCONF_SECOND_WEBHOOK_URL (the second
# client's address, when a second key is given).
#
# Exit status: 0 done; 3 unknown action; 4 refused from the current state (sandbox answered
# 409); 1 any other failure, with a message on stderr.

fail() {
    echo "sandbox-driver: $*" >&2
    exit 1
}

# JSON string literal of $1 (escapes backslashes and double quotes; ids and URLs need no more).
json_string() {
    printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"
}

action=${BANKCONF_ACTION:-}
case "$action" in
    register_webhook | unregister_webhook | connect | fail_auth | require_mfa | error | disconnect | update_accounts | delete_transaction) ;;
    *)
        echo "sandbox-driver: unknown action '$action'" >&2
        exit 3
        ;;
esac

[ -n "${BANKCONF_BASE_URL:-}" ] || fail "BANKCONF_BASE_URL is not set"
command -v curl >/dev/null 2>&1 || fail "curl is not installed"
base=${BANKCONF_BASE_URL%/}

out=$(mktemp "${TMPDIR:-/tmp}/sandbox-driver.XXXXXX") || fail "cannot create a temporary file"
trap 'rm -f "$out"' EXIT

# One request: method, URL, body, and a key to send as `Authorization: Bearer` (may be empty).
# Exits with the protocol's status unless the sandbox answered 2xx.
# The key goes to curl on its standard input, never on a command line that `ps` shows.
request() {
    status=$(printf '%s\n' "${4:+Authorization: Bearer $4}" | curl -sS --max-time 10 -o "$out" \
        -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' -H @- --data "$3" "$2") ||
        fail "request to $2 failed"
    case "$status" in
        2??) ;;
        409)
            echo "sandbox-driver: $action refused from the current state: $(cat "$out")" >&2
            exit 4
            ;;
        *) fail "$action: HTTP $status from $2: $(cat "$out")" ;;
    esac
}

if [ "$action" = register_webhook ] || [ "$action" = unregister_webhook ]; then
    [ -n "${BANKCONF_WEBHOOK_URL:-}" ] || fail "BANKCONF_WEBHOOK_URL is not set"
    method=POST
    [ "$action" = unregister_webhook ] && method=DELETE
    if [ -z "${BANKCONF_SECOND_WEBHOOK_URL:-}" ]; then
        # One address: every client's events go there.
        request "$method" "$base/sandbox/webhooks" "{\"url\":$(json_string "$BANKCONF_WEBHOOK_URL")}" ""
    else
        # An address per client, each registered with its client's key: its events only.
        request "$method" "$base/sandbox/webhooks" "{\"url\":$(json_string "$BANKCONF_WEBHOOK_URL")}" \
            "${BANKCONF_API_KEY:-}"
        request "$method" "$base/sandbox/webhooks" "{\"url\":$(json_string "$BANKCONF_SECOND_WEBHOOK_URL")}" \
            "${BANKCONF_SECOND_API_KEY:-}"
        # Say so (docs/driver.md): an event at the other client's address is then a leak.
        [ "$action" = register_webhook ] && echo "webhooks=per-client"
    fi
    exit 0
else
    [ -n "${BANKCONF_CONNECTION_ID:-}" ] || fail "BANKCONF_CONNECTION_ID is not set"
    url="$base/sandbox/connections/$BANKCONF_CONNECTION_ID/$action"
    body=""
    if [ -n "${BANKCONF_ACCOUNT_ID:-}" ]; then
        body="\"accountId\":$(json_string "$BANKCONF_ACCOUNT_ID")"
    fi
    if [ -n "${BANKCONF_TRANSACTION_ID:-}" ]; then
        [ -n "$body" ] && body="$body,"
        body="$body\"transactionId\":$(json_string "$BANKCONF_TRANSACTION_ID")"
    fi
    body="{$body}"
    request POST "$url" "$body" ""
fi
