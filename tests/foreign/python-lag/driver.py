#!/usr/bin/env python3
"""bankconf driver for server.py: performs each action by POSTing it to the server's admin endpoint.

Usage: driver.py --admin http://127.0.0.1:PORT/__admin/action
The action and its arguments come from the BANKCONF_* environment variables (docs/driver.md).
Exit 0 done, 3 cannot do the action, 4 refused from the current state, 1 driver failure.
Never prints secrets (API keys, widget tokens).
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

FIELDS = {
    "connection_id": "BANKCONF_CONNECTION_ID",
    "widget_token": "BANKCONF_WIDGET_TOKEN",
    "account_id": "BANKCONF_ACCOUNT_ID",
    "transaction_id": "BANKCONF_TRANSACTION_ID",
    "api_key": "BANKCONF_API_KEY",
    "second_api_key": "BANKCONF_SECOND_API_KEY",
    "webhook_url": "BANKCONF_WEBHOOK_URL",
    "second_webhook_url": "BANKCONF_SECOND_WEBHOOK_URL",
}
KNOWN = {"register_webhook", "unregister_webhook", "connect", "fail_auth", "require_mfa", "error",
         "disconnect", "update_accounts", "delete_transaction"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True)
    args = ap.parse_args()
    action = os.environ.get("BANKCONF_ACTION", "")
    if action not in KNOWN:
        sys.stderr.write("driver: unknown action %r\n" % action)
        return 3
    body = {"action": action}
    for field, var in FIELDS.items():
        v = os.environ.get(var)
        if v:
            body[field] = v
    req = urllib.request.Request(args.admin, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    except Exception as e:
        sys.stderr.write("driver: %s: admin endpoint unreachable: %s\n" % (action, type(e).__name__))
        return 1
    try:
        out = json.loads(text or b"{}")
    except ValueError:
        out = {}
    # the admin endpoint never echoes secrets; only its "error" text is shown
    msg = str(out.get("error", "")) if isinstance(out, dict) else ""
    if status == 200:
        if action == "register_webhook":
            sys.stdout.write("webhooks=%s\n" % out.get("webhooks", "per-client"))
        return 0
    if status == 409:
        sys.stderr.write("driver: %s refused: %s\n" % (action, msg))
        return 4
    if status == 501:
        sys.stderr.write("driver: %s not supported\n" % action)
        return 3
    sys.stderr.write("driver: %s failed with HTTP %d: %s\n" % (action, status, msg))
    return 1


if __name__ == "__main__":
    sys.exit(main())
