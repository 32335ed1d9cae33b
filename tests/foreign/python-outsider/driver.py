#!/usr/bin/env python3
"""bankconf driver (docs/driver.md) for tests/foreign/server.py's admin API.

Admin routes (same host and port as the API):
    POST|DELETE {base}/admin/webhooks  {"url": ...}   Authorization: Bearer <client key>
    POST {base}/admin/connections/{id}/{action}       {"accountId"?, "transactionId"?}
Exit: 0 done, 3 cannot, 4 refused from the current state (409), 1 other failure.
"""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

ACTIONS = {"connect", "fail_auth", "require_mfa", "error", "disconnect", "update_accounts",
           "delete_transaction"}


def fail(code, msg):
    print(f"foreign-driver: {msg}", file=sys.stderr)
    sys.exit(code)


def call(method, url, body, key=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read(2048).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(2048).decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        fail(1, f"{method} {url}: {e}")


def main():
    action = os.environ.get("BANKCONF_ACTION", "")
    base = os.environ.get("BANKCONF_BASE_URL", "").rstrip("/")
    if not base:
        fail(1, "BANKCONF_BASE_URL is not set")
    admin = base + "/admin"
    if action in ("register_webhook", "unregister_webhook"):
        method = "POST" if action == "register_webhook" else "DELETE"
        pairs = [("BANKCONF_WEBHOOK_URL", "BANKCONF_API_KEY"),
                 ("BANKCONF_SECOND_WEBHOOK_URL", "BANKCONF_SECOND_API_KEY")]
        done = 0
        for url_var, key_var in pairs:
            url, key = os.environ.get(url_var), os.environ.get(key_var)
            if not url or not key:
                continue
            status, text = call(method, f"{admin}/webhooks", {"url": url}, key)
            if not 200 <= status < 300:
                fail(1, f"{action} for {key_var}: HTTP {status}: {text}")
            done += 1
        if done == 0:
            fail(1, "BANKCONF_WEBHOOK_URL / BANKCONF_API_KEY not set")
        if action == "register_webhook":
            print("webhooks=per-client")
        sys.exit(0)
    if action not in ACTIONS:
        fail(3, f"unknown action {action!r}")
    conn = os.environ.get("BANKCONF_CONNECTION_ID") or fail(1, "BANKCONF_CONNECTION_ID is not set")
    body = {}
    for var, field in (("BANKCONF_ACCOUNT_ID", "accountId"), ("BANKCONF_TRANSACTION_ID", "transactionId")):
        if os.environ.get(var):
            body[field] = os.environ[var]
    status, text = call("POST", f"{admin}/connections/{urllib.parse.quote(conn, safe='')}/{action}", body)
    if 200 <= status < 300:
        sys.exit(0)
    if status == 409:
        fail(4, f"{action} refused from the current state: {text}")
    fail(1, f"{action}: HTTP {status}: {text}")


if __name__ == "__main__":
    main()
