#!/usr/bin/env python3
"""bankconf driver for python-artisan (docs/driver.md): one action per call, through the server's
loopback test hook `POST /__admin/action`. The keys never leave this process: the hook is told the
SHA-256 of each key, which is how the server knows its clients there.

Exit codes: 0 done, 3 the server cannot do the action, 4 refused from the current state,
1 anything else (the reason on stderr, never a secret).
"""
import hashlib
import json
import os
import sys
import urllib.error
import urllib.request

ADMIN_TOKEN = os.environ.get("ARTISAN_ADMIN_TOKEN", "adm_artisan_foreign")


def key_hash(name):
    key = os.environ.get(name)
    return hashlib.sha256(key.encode()).hexdigest() if key else None


def main():
    env = os.environ
    action = env.get("BANKCONF_ACTION", "")
    base = env.get("BANKCONF_BASE_URL", "").rstrip("/")
    body = {"action": action}
    for field, var in (("connectionId", "BANKCONF_CONNECTION_ID"),
                       ("accountId", "BANKCONF_ACCOUNT_ID"),
                       ("transactionId", "BANKCONF_TRANSACTION_ID"),
                       ("webhookUrl", "BANKCONF_WEBHOOK_URL"),
                       ("secondWebhookUrl", "BANKCONF_SECOND_WEBHOOK_URL")):
        if env.get(var):
            body[field] = env[var]
    if action.endswith("register_webhook"):
        body["keyHash"] = key_hash("BANKCONF_API_KEY")
        body["secondKeyHash"] = key_hash("BANKCONF_SECOND_API_KEY")
    req = urllib.request.Request(base + "/__admin/action", json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "X-Admin-Token": ADMIN_TOKEN},
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=25) as resp:
            status, text = resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8", "replace")
    except Exception as e:
        sys.stderr.write("driver: %s failed: %s\n" % (action, type(e).__name__))
        return 1
    if 200 <= status < 300:
        if action == "register_webhook":
            print("webhooks=per-client")
        return 0
    if status == 409:
        sys.stderr.write("driver: %s refused: %s\n" % (action, text[:200]))
        return 4
    if status == 501:
        return 3
    sys.stderr.write("driver: %s answered %d: %s\n" % (action, status, text[:200]))
    return 1


if __name__ == "__main__":
    sys.exit(main())
