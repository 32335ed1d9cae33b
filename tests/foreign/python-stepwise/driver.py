#!/usr/bin/env python3
"""The bankconf driver (docs/driver.md, command protocol) for server.py.

Forwards BANKCONF_ACTION to the server's admin endpoint (argv[1]) as one JSON POST and maps the
answer to an exit code: 2xx -> 0, 409 -> 4 (refused from the current state), 404/501 -> 3
(cannot), anything else -> 1. Never prints keys or tokens.
"""
import json
import os
import sys
import urllib.error
import urllib.request

FIELDS = {
    "api_key": "BANKCONF_API_KEY",
    "second_api_key": "BANKCONF_SECOND_API_KEY",
    "connection_id": "BANKCONF_CONNECTION_ID",
    "account_id": "BANKCONF_ACCOUNT_ID",
    "transaction_id": "BANKCONF_TRANSACTION_ID",
    "webhook_url": "BANKCONF_WEBHOOK_URL",
    "second_webhook_url": "BANKCONF_SECOND_WEBHOOK_URL",
}


def main():
    admin = sys.argv[1].rstrip("/")
    action = os.environ.get("BANKCONF_ACTION", "")
    body = {k: os.environ[v] for k, v in FIELDS.items() if os.environ.get(v)}
    req = urllib.request.Request(admin + "/" + action, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=25) as r:
            code, out = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, out = e.code, e.read()
    except Exception as e:
        print("driver: admin endpoint unreachable: %s" % type(e).__name__, file=sys.stderr)
        return 1
    if 200 <= code < 300:
        if action == "register_webhook":
            print("webhooks=per-client")
        return 0
    reason = out[:200].decode("utf-8", "replace")
    print("driver: %s answered %d: %s" % (action, code, reason), file=sys.stderr)
    if code == 409:
        return 4
    if code in (404, 501):
        return 3
    return 1


if __name__ == "__main__":
    sys.exit(main())
