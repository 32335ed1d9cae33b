#!/usr/bin/env python3
"""bankconf driver for server.py (docs/driver.md): one action per call, from BANKCONF_* variables.

    python3 driver.py --admin http://127.0.0.1:PORT/__admin/action

Exit 0 once the server accepted the action, 3 if it cannot do it, 4 if it refuses it from the
connection's current state, 1 on any other failure (the reason on stderr).  Secrets (keys,
widget tokens) are never printed.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", default=os.environ.get("FOREIGN_ADMIN_URL"))
    args = ap.parse_args()
    env = os.environ
    action = env.get("BANKCONF_ACTION", "")
    admin = args.admin
    if not admin:
        base = env.get("BANKCONF_BASE_URL", "").rstrip("/")
        if not base:
            print("driver: no admin URL and no BANKCONF_BASE_URL", file=sys.stderr)
            return 1
        admin = base + "/__admin/action"
    key = env.get("BANKCONF_API_KEY", "")
    body = {
        "action": action,
        "connectionId": env.get("BANKCONF_CONNECTION_ID") or None,
        "accountId": env.get("BANKCONF_ACCOUNT_ID") or None,
        "transactionId": env.get("BANKCONF_TRANSACTION_ID") or None,
        "webhookUrl": env.get("BANKCONF_WEBHOOK_URL") or None,
        "secondApiKey": env.get("BANKCONF_SECOND_API_KEY") or None,
        "secondWebhookUrl": env.get("BANKCONF_SECOND_WEBHOOK_URL") or None,
    }
    req = urllib.request.Request(admin, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + key})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=20) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except Exception as e:  # the server is not reachable
        print("driver: %s failed: %s" % (action, type(e).__name__), file=sys.stderr)
        return 1
    try:
        msg = json.loads(raw).get("message", "")
    except Exception:
        msg = ""
    if status == 200:
        if action == "register_webhook":
            print("webhooks=per-client")
        return 0
    if status == 409:
        print("driver: %s refused from the current state: %s" % (action, msg), file=sys.stderr)
        return 4
    if status == 501:
        print("driver: %s not supported: %s" % (action, msg), file=sys.stderr)
        return 3
    print("driver: %s failed with HTTP %d: %s" % (action, status, msg), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
