#!/usr/bin/env python3
"""bankconf driver (docs/driver.md) for tests/foreign-18/server.py.

bankconf runs it once per action with BANKCONF_ACTION and friends in the environment; it posts
the action to the server's test hook and exits 0 (accepted), 3 (cannot), 4 (refused from the
current state) or 1 (failed).  Secrets (keys, widget tokens) are never printed.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

FIELDS = {
    "api_key": "BANKCONF_API_KEY",
    "second_api_key": "BANKCONF_SECOND_API_KEY",
    "connection_id": "BANKCONF_CONNECTION_ID",
    "widget_token": "BANKCONF_WIDGET_TOKEN",
    "account_id": "BANKCONF_ACCOUNT_ID",
    "transaction_id": "BANKCONF_TRANSACTION_ID",
    "webhook_url": "BANKCONF_WEBHOOK_URL",
    "second_webhook_url": "BANKCONF_SECOND_WEBHOOK_URL",
}

ACTIONS = {"register_webhook", "unregister_webhook", "connect", "fail_auth", "require_mfa",
           "error", "disconnect", "update_accounts", "delete_transaction"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True, help="URL of the server's POST /__admin/action")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    action = os.environ.get("BANKCONF_ACTION", "")
    if action not in ACTIONS:
        print("driver: unknown action %r" % action, file=sys.stderr)
        return 3
    body = {"action": action}
    for field, env in FIELDS.items():
        v = os.environ.get(env)
        if v:
            body[field] = v
    req = urllib.request.Request(args.admin, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=args.timeout) as r:
            answer = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            detail = json.loads(e.read() or b"{}")
        except ValueError:
            detail = {}
        detail.pop("widget_token", None)
        if e.code == 409:
            print("driver: %s refused: %s" % (action, detail.get("refused", "")), file=sys.stderr)
            return 4
        if e.code == 501:
            print("driver: %s not possible: %s" % (action, detail.get("cannot", "")),
                  file=sys.stderr)
            return 3
        print("driver: %s failed with HTTP %d: %s" % (action, e.code, detail), file=sys.stderr)
        return 1
    except Exception as e:  # connection refused, timeout
        print("driver: %s failed: %s" % (action, e.__class__.__name__), file=sys.stderr)
        return 1
    if action == "register_webhook":
        print("webhooks=%s" % answer.get("webhooks", "per-client"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
