#!/usr/bin/env python3
"""bankconf driver for server.py: one action per run, taken from BANKCONF_ACTION, performed by a
POST to the server's admin endpoint (--admin URL).

Exit codes (docs/driver.md): 0 accepted, 3 the target cannot do it, 4 refused from the current
state, 1 anything else (the message goes to stderr; secrets are never printed).
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True)
    args = ap.parse_args()
    env = os.environ
    action = env.get("BANKCONF_ACTION", "")
    known = {"register_webhook", "unregister_webhook", "connect", "fail_auth", "require_mfa",
             "error", "disconnect", "update_accounts", "delete_transaction"}
    if action not in known:
        print("driver: unknown action %r" % action, file=sys.stderr)
        return 3
    body = {
        "action": action,
        "api_key": env.get("BANKCONF_API_KEY"),
        "second_api_key": env.get("BANKCONF_SECOND_API_KEY"),
        "connection_id": env.get("BANKCONF_CONNECTION_ID"),
        "widget_token": env.get("BANKCONF_WIDGET_TOKEN"),
        "account_id": env.get("BANKCONF_ACCOUNT_ID"),
        "transaction_id": env.get("BANKCONF_TRANSACTION_ID"),
        "webhook_url": env.get("BANKCONF_WEBHOOK_URL"),
        "second_webhook_url": env.get("BANKCONF_SECOND_WEBHOOK_URL"),
    }
    body = {k: val for k, val in body.items() if val}
    req = urllib.request.Request(args.admin, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=25) as r:
            r.read()
    except urllib.error.HTTPError as e:
        try:
            msg = json.loads(e.read() or b"{}").get("error", {}).get("message", "")
        except Exception:
            msg = ""
        if e.code == 409:
            print("driver: %s refused from the current state: %s" % (action, msg), file=sys.stderr)
            return 4
        if e.code == 501:
            print("driver: %s not supported" % action, file=sys.stderr)
            return 3
        print("driver: %s failed with HTTP %d: %s" % (action, e.code, msg), file=sys.stderr)
        return 1
    except Exception as e:
        print("driver: %s failed: %s" % (action, type(e).__name__), file=sys.stderr)
        return 1
    if action == "register_webhook":
        print("webhooks=per-client")
    return 0


if __name__ == "__main__":
    sys.exit(main())
