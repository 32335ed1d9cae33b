#!/usr/bin/env python3
"""bankconf driver for server.py: one action per call, through the server's admin endpoint.

The admin URL comes from `--admin URL`, else FOREIGN_ADMIN_URL, else BANKCONF_BASE_URL +
/__admin/action. Exit 0 accepted, 3 cannot do it, 4 refused from the current state, 1 failure.
Never prints a key or a widget token.
"""
import json
import os
import sys
import urllib.error
import urllib.request

ACTIONS = {"register_webhook", "unregister_webhook", "connect", "fail_auth", "require_mfa",
           "error", "disconnect", "update_accounts", "delete_transaction"}


def admin_url():
    args = sys.argv[1:]
    if "--admin" in args:
        i = args.index("--admin")
        if i + 1 < len(args):
            return args[i + 1]
    if os.environ.get("FOREIGN_ADMIN_URL"):
        return os.environ["FOREIGN_ADMIN_URL"]
    base = os.environ.get("BANKCONF_BASE_URL", "").rstrip("/")
    if not base:
        return None
    return base + "/__admin/action"


def main():
    action = os.environ.get("BANKCONF_ACTION", "")
    if action not in ACTIONS:
        print("driver: unknown action %r" % action, file=sys.stderr)
        return 3
    url = admin_url()
    if not url:
        print("driver: no admin URL (give --admin URL or set BANKCONF_BASE_URL)", file=sys.stderr)
        return 1
    env = os.environ.get
    payload = {
        "action": action,
        "connectionId": env("BANKCONF_CONNECTION_ID"),
        "accountId": env("BANKCONF_ACCOUNT_ID"),
        "transactionId": env("BANKCONF_TRANSACTION_ID"),
        "apiKey": env("BANKCONF_API_KEY"),
        "secondApiKey": env("BANKCONF_SECOND_API_KEY"),
        "webhookUrl": env("BANKCONF_WEBHOOK_URL"),
        "secondWebhookUrl": env("BANKCONF_SECOND_WEBHOOK_URL"),
    }
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=25) as resp:
            resp.read()
            status = resp.status
            message = ""
    except urllib.error.HTTPError as e:
        status = e.code
        try:
            message = json.loads(e.read() or b"{}").get("error", "")
        except Exception:
            message = ""
    except Exception as e:
        print("driver: cannot reach the admin endpoint: %s" % type(e).__name__, file=sys.stderr)
        return 1
    if status == 200:
        if action == "register_webhook":
            print("webhooks=per-client")
        return 0
    if status == 409:
        print("driver: refused: %s" % message, file=sys.stderr)
        return 4
    if status == 501:
        print("driver: the server cannot do %s" % action, file=sys.stderr)
        return 3
    print("driver: %s failed (%d): %s" % (action, status, message), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
