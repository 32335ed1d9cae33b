#!/usr/bin/env python3
"""bankconf driver for server.py: `python3 driver.py ADMIN_URL`, run once per action.

Reads BANKCONF_ACTION and the other BANKCONF_* variables (docs/driver.md) and turns the action
into one request (two for the webhook actions with a second client) to the server's admin API:

    POST   {admin}/webhooks                        {"url"}   with Authorization: Bearer <client key>
    DELETE {admin}/webhooks                        {"url"}   idem
    POST   {admin}/connections/{id}/{action}       {"accountId"?, "transactionId"?}

Exit: 0 accepted; 3 cannot do this action; 4 refused from the current state (409); 1 otherwise.
Never prints a key or a widget token.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

ACTIONS = {"connect", "fail_auth", "require_mfa", "error", "disconnect", "update_accounts", "delete_transaction"}
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fail(code, message):
    print("driver: " + message, file=sys.stderr)
    sys.exit(code)


def request(method, url, body, key=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with OPENER.open(req, timeout=20) as r:
            return r.status, r.read(2048).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(2048).decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        fail(1, "%s %s: %s" % (method, url, e))


def main():
    if len(sys.argv) < 2:
        fail(1, "usage: driver.py ADMIN_URL")
    admin = sys.argv[1].rstrip("/")
    action = os.environ.get("BANKCONF_ACTION", "")
    if action in ("register_webhook", "unregister_webhook"):
        method = "POST" if action == "register_webhook" else "DELETE"
        pairs = [("BANKCONF_WEBHOOK_URL", "BANKCONF_API_KEY")]
        if os.environ.get("BANKCONF_SECOND_WEBHOOK_URL"):
            pairs.append(("BANKCONF_SECOND_WEBHOOK_URL", "BANKCONF_SECOND_API_KEY"))
        for url_var, key_var in pairs:
            url = os.environ.get(url_var) or fail(1, url_var + " is not set")
            key = os.environ.get(key_var) or fail(1, key_var + " is not set")
            status, text = request(method, admin + "/webhooks", {"url": url}, key)
            if not 200 <= status < 300:
                fail(1, "%s: HTTP %d: %s" % (action, status, text))
        if action == "register_webhook" and len(pairs) == 2:
            print("webhooks=per-client")
        sys.exit(0)
    if action not in ACTIONS:
        fail(3, "unknown action %r" % action)
    conn = os.environ.get("BANKCONF_CONNECTION_ID") or fail(1, "BANKCONF_CONNECTION_ID is not set")
    body = {}
    for var, field in (("BANKCONF_ACCOUNT_ID", "accountId"), ("BANKCONF_TRANSACTION_ID", "transactionId")):
        if os.environ.get(var):
            body[field] = os.environ[var]
    url = "%s/connections/%s/%s" % (admin, urllib.parse.quote(conn, safe=""), action)
    status, text = request("POST", url, body)
    if 200 <= status < 300:
        sys.exit(0)
    if status == 409:
        fail(4, "%s refused from the current state: %s" % (action, text))
    fail(1, "%s: HTTP %d: %s" % (action, status, text))


if __name__ == "__main__":
    main()
