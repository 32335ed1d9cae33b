#!/usr/bin/env python3
"""bankconf driver for tests/foreign-17/server.py (docs/driver.md).

    python3 driver.py --admin http://127.0.0.1:PORT/__admin/action

Reads the action and its arguments from the BANKCONF_* environment variables, POSTs them as one
JSON object to the server's test hook and exits with the protocol's code:
0 done, 3 the server cannot do that action, 4 refused from the connection's current state,
1 anything else (with the reason on stderr). Secrets (keys, widget token) are never printed.
Each call is its own process and the server takes calls concurrently, so no lock is needed.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

FIELDS = {
    "BANKCONF_CONNECTION_ID": "connectionId",
    "BANKCONF_WIDGET_TOKEN": "widgetToken",
    "BANKCONF_ACCOUNT_ID": "accountId",
    "BANKCONF_TRANSACTION_ID": "transactionId",
    "BANKCONF_API_KEY": "apiKey",
    "BANKCONF_SECOND_API_KEY": "secondApiKey",
    "BANKCONF_WEBHOOK_URL": "webhookUrl",
    "BANKCONF_SECOND_WEBHOOK_URL": "secondWebhookUrl",
    "BANKCONF_BASE_URL": "baseUrl",
}
ACTIONS = {"register_webhook", "unregister_webhook", "connect", "fail_auth", "require_mfa", "error",
           "disconnect", "update_accounts", "delete_transaction"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", required=True, help="URL of the server's POST /__admin/action")
    ap.add_argument("--timeout", type=float, default=25.0)
    args = ap.parse_args()

    action = os.environ.get("BANKCONF_ACTION", "")
    if action not in ACTIONS:
        sys.stderr.write("driver: unknown BANKCONF_ACTION %r\n" % action)
        return 3
    payload = {"action": action}
    for env, field in FIELDS.items():
        value = os.environ.get(env)
        if value:
            payload[field] = value

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    req = urllib.request.Request(args.admin, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with opener.open(req, timeout=args.timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except Exception as exc:
        sys.stderr.write("driver: %s: the test hook could not be reached: %s\n" % (action, exc))
        return 1
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        body = {}
    reason = body.get("error") if isinstance(body, dict) else None
    if status == 200:
        line = body.get("stdout") if isinstance(body, dict) else None
        if line:
            print(line, flush=True)
        return 0
    if status == 409:
        sys.stderr.write("driver: %s refused: %s\n" % (action, reason))
        return 4
    if status == 501:
        sys.stderr.write("driver: %s not supported: %s\n" % (action, reason))
        return 3
    sys.stderr.write("driver: %s failed with HTTP %d: %s\n" % (action, status, reason))
    return 1


if __name__ == "__main__":
    sys.exit(main())
