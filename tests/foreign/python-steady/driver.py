#!/usr/bin/env python3
"""bankconf command driver for server.py (docs/driver.md), standard library only.

Admin API of server.py, authenticated with the client's API key:

    POST   /admin/webhooks                            {"url": ...}  register an address for the key's client
    DELETE /admin/webhooks                            {"url": ...}  remove it
    POST   /admin/connections/{connectionId}/{action} {"accountId", "transactionId"} (optional)

Exit: 0 accepted; 3 cannot do this action; 4 refused from the current state (409); 1 other failure.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

ACTIONS = {"connect", "fail_auth", "require_mfa", "error", "disconnect", "update_accounts", "delete_transaction"}


def fail(code, message):
    print(f"foreign-7 driver: {message}", file=sys.stderr)
    sys.exit(code)


def request(method, url, body, key):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(2048).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(2048).decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        fail(1, f"{method} {url}: {e}")


def main():
    action = os.environ.get("BANKCONF_ACTION", "")
    base = os.environ.get("BANKCONF_BASE_URL", "").rstrip("/") or fail(1, "BANKCONF_BASE_URL is not set")
    admin = base + "/admin"
    key = os.environ.get("BANKCONF_API_KEY", "")
    if action in ("register_webhook", "unregister_webhook"):
        method = "POST" if action == "register_webhook" else "DELETE"
        pairs = [(os.environ.get("BANKCONF_WEBHOOK_URL"), key)]
        second_url = os.environ.get("BANKCONF_SECOND_WEBHOOK_URL")
        second_key = os.environ.get("BANKCONF_SECOND_API_KEY")
        if second_url:
            # The second client's address is registered with the second client's key; without
            # that key there is nothing to register it for.
            pairs.append((second_url, second_key or key))
        if not pairs[0][0]:
            fail(1, "BANKCONF_WEBHOOK_URL is not set")
        for url, k in pairs:
            status, text = request(method, f"{admin}/webhooks", {"url": url}, k)
            if not 200 <= status < 300:
                fail(1, f"{action}: HTTP {status}: {text}")
        if action == "register_webhook" and second_url and second_key:
            print("webhooks=per-client")
        sys.exit(0)
    if action not in ACTIONS:
        fail(3, f"unknown action {action!r}")
    connection = os.environ.get("BANKCONF_CONNECTION_ID") or fail(1, "BANKCONF_CONNECTION_ID is not set")
    body = {}
    for name, field in (("BANKCONF_ACCOUNT_ID", "accountId"), ("BANKCONF_TRANSACTION_ID", "transactionId")):
        if os.environ.get(name):
            body[field] = os.environ[name]
    quoted = urllib.parse.quote(connection, safe="")
    status, text = request("POST", f"{admin}/connections/{quoted}/{action}", body, key)
    if 200 <= status < 300:
        sys.exit(0)
    if status == 409:
        fail(4, f"{action} refused from the current state: {text}")
    fail(1, f"{action}: HTTP {status}: {text}")


if __name__ == "__main__":
    main()
