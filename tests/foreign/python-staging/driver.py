#!/usr/bin/env python3
"""bankconf driver for server.py: one call per action, BANKCONF_ACTION saying which.

It posts the action to the server's admin endpoint (--admin URL) and maps the answer onto the
driver protocol's exit codes: 0 accepted, 3 cannot do that action, 4 refused from the current
state, 1 anything else (with a message on stderr).  It never prints a key or a widget token.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

ENV = {
    "apiKey": "BANKCONF_API_KEY",
    "secondApiKey": "BANKCONF_SECOND_API_KEY",
    "connectionId": "BANKCONF_CONNECTION_ID",
    "widgetToken": "BANKCONF_WIDGET_TOKEN",
    "accountId": "BANKCONF_ACCOUNT_ID",
    "transactionId": "BANKCONF_TRANSACTION_ID",
    "webhookUrl": "BANKCONF_WEBHOOK_URL",
    "secondWebhookUrl": "BANKCONF_SECOND_WEBHOOK_URL",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True, help="the server's admin endpoint")
    ap.add_argument("--timeout", type=float, default=25.0)
    a = ap.parse_args()

    action = os.environ.get("BANKCONF_ACTION", "")
    if not action:
        print("driver: BANKCONF_ACTION is not set", file=sys.stderr)
        return 1
    body = {"action": action}
    for field, var in ENV.items():
        v = os.environ.get(var)
        if v:
            body[field] = v

    req = urllib.request.Request(a.admin, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=a.timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except Exception as e:  # connection refused, timeout
        print("driver: %s: admin endpoint unreachable: %s" % (action, e), file=sys.stderr)
        return 1

    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        answer = {}
    err = answer.get("error") if isinstance(answer, dict) else None
    reason = (err or {}).get("message") if isinstance(err, dict) else None

    if 200 <= status < 300:
        if action == "register_webhook":
            print("webhooks=%s" % answer.get("webhooks", "per-client"))
        return 0
    if status == 409:
        print("driver: %s refused: %s" % (action, reason or "invalid transition"), file=sys.stderr)
        return 4
    if status == 501:
        print("driver: %s is not supported by this server" % action, file=sys.stderr)
        return 3
    print("driver: %s failed with HTTP %d: %s" % (action, status, reason or raw[:200]), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
