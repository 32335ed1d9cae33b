#!/usr/bin/env python3
"""bankconf driver (docs/driver.md): performs BANKCONF_ACTION through server.py's admin endpoint.

Exit 0 once the server accepted the action, 4 when it refuses it from the current state (409),
3 when it cannot do it (404/501), 1 otherwise. Secrets (keys, widget token) are never printed.
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

FIELDS = {
    "connectionId": "BANKCONF_CONNECTION_ID",
    "accountId": "BANKCONF_ACCOUNT_ID",
    "transactionId": "BANKCONF_TRANSACTION_ID",
    "webhookUrl": "BANKCONF_WEBHOOK_URL",
    "secondWebhookUrl": "BANKCONF_SECOND_WEBHOOK_URL",
    "apiKey": "BANKCONF_API_KEY",            # the admin endpoint is the key issuer itself, on loopback
    "secondApiKey": "BANKCONF_SECOND_API_KEY",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True, help="URL of the server's admin endpoint")
    args = ap.parse_args()
    action = os.environ.get("BANKCONF_ACTION", "")
    if not action:
        print("driver: BANKCONF_ACTION is not set", file=sys.stderr)
        return 1
    body = {"action": action}
    for field, var in FIELDS.items():
        if os.environ.get(var):
            body[field] = os.environ[var]
    req = urllib.request.Request(args.admin, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            answer = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        status, answer = e.code, e.read()
    except Exception as e:  # no answer at all
        print("driver: %s failed: %s" % (action, type(e).__name__), file=sys.stderr)
        return 1
    if 200 <= status < 300:
        if action == "register_webhook":
            try:
                said = json.loads(answer or b"{}").get("webhooks")
            except ValueError:
                said = None
            if said and "BANKCONF_SECOND_WEBHOOK_URL" in os.environ:
                print("webhooks=%s" % said)
        return 0
    text = answer[:300].decode("utf-8", "replace")
    print("driver: %s answered %d: %s" % (action, status, text), file=sys.stderr)
    # alt-error-codes answers 400 where the plain server answers 409: the body says which.
    if status == 409 or b"invalid_state" in answer:
        return 4
    if status in (404, 501):
        return 3
    return 1


if __name__ == "__main__":
    sys.exit(main())
