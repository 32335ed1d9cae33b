#!/bin/sh
# Driver for the bankconf harness's driver protocol, targeting the embedded sandbox's control
# routes (see src/sandbox/control.rs). Run once per action, e.g. `sh -c examples/sandbox-driver.sh`.
#
# Environment: BANKCONF_ACTION (register_webhook, unregister_webhook, connect, fail_auth,
# require_mfa, error, disconnect, update_accounts, delete_transaction), BANKCONF_BASE_URL,
# BANKCONF_API_KEY and BANKCONF_SECOND_API_KEY (unused: the control routes need none),
# BANKCONF_CONNECTION_ID,
# BANKCONF_WIDGET_TOKEN (unused: the sandbox needs no widget session), BANKCONF_ACCOUNT_ID,
# BANKCONF_TRANSACTION_ID, BANKCONF_WEBHOOK_URL.
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

method=POST
if [ "$action" = register_webhook ] || [ "$action" = unregister_webhook ]; then
    [ -n "${BANKCONF_WEBHOOK_URL:-}" ] || fail "BANKCONF_WEBHOOK_URL is not set"
    url="$base/sandbox/webhooks"
    body="{\"url\":$(json_string "$BANKCONF_WEBHOOK_URL")}"
    [ "$action" = unregister_webhook ] && method=DELETE
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
fi

out=$(mktemp "${TMPDIR:-/tmp}/sandbox-driver.XXXXXX") || fail "cannot create a temporary file"
trap 'rm -f "$out"' EXIT
status=$(curl -sS --max-time 10 -o "$out" -w '%{http_code}' -X "$method" \
    -H 'Content-Type: application/json' --data "$body" "$url") || fail "request to $url failed"

case "$status" in
    2??) exit 0 ;;
    409)
        echo "sandbox-driver: $action refused from the current state: $(cat "$out")" >&2
        exit 4
        ;;
    *) fail "$action: HTTP $status from $url: $(cat "$out")" ;;
esac
