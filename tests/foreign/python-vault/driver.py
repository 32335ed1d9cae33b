#!/usr/bin/env python3
"""bankconf driver for the vault staging server (docs/driver.md), standard library only.

bankconf runs it once per action with BANKCONF_ACTION and the other BANKCONF_* variables.
It reaches the server's control endpoint (a test hook, not part of the service):

    POST   {base}/__control/webhooks                       {"url"}     register the key's client's address
    DELETE {base}/__control/webhooks                                   unregister it
    POST   {base}/__control/connections/{id}/actions       {"action", "accountId"?, "transactionId"?}

each with `Authorization: Bearer <key>` (the key never reaches a command line or stdout).
Exit: 0 accepted; 3 the server cannot do it (501); 4 refused from the current state (409);
1 anything else, with a message on stderr.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

ACTIONS = {"connect", "fail_auth", "require_mfa", "error", "disconnect", "update_accounts", "delete_transaction"}


def fail(code, message):
    print("vault-driver: %s" % message, file=sys.stderr)
    sys.exit(code)


def call(method, url, body, key):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(4096).decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        fail(1, "%s %s: %s" % (method, url.split("?")[0], e))


def judge(action, status, text):
    if 200 <= status < 300:
        return
    if status == 409:
        fail(4, "%s refused from the current state: %s" % (action, text))
    if status == 501:
        fail(3, "%s: not supported (%s)" % (action, text))
    fail(1, "%s: HTTP %d: %s" % (action, status, text))


def main():
    action = os.environ.get("BANKCONF_ACTION", "")
    base = os.environ.get("BANKCONF_BASE_URL", "").rstrip("/") or fail(1, "BANKCONF_BASE_URL is not set")
    key = os.environ.get("BANKCONF_API_KEY") or fail(1, "BANKCONF_API_KEY is not set")
    if action in ("register_webhook", "unregister_webhook"):
        method = "POST" if action == "register_webhook" else "DELETE"
        hook = os.environ.get("BANKCONF_WEBHOOK_URL") or fail(1, "BANKCONF_WEBHOOK_URL is not set")
        status, text = call(method, base + "/__control/webhooks", {"url": hook}, key)
        judge(action, status, text)
        second_key = os.environ.get("BANKCONF_SECOND_API_KEY")
        second_hook = os.environ.get("BANKCONF_SECOND_WEBHOOK_URL")
        if second_key and second_hook:
            status, text = call(method, base + "/__control/webhooks", {"url": second_hook}, second_key)
            judge(action, status, text)
            if action == "register_webhook":
                print("webhooks=per-client")
        sys.exit(0)
    if action not in ACTIONS:
        fail(3, "unknown action %r" % action)
    connection = os.environ.get("BANKCONF_CONNECTION_ID") or fail(1, "BANKCONF_CONNECTION_ID is not set")
    body = {"action": action}
    if os.environ.get("BANKCONF_ACCOUNT_ID"):
        body["accountId"] = os.environ["BANKCONF_ACCOUNT_ID"]
    if os.environ.get("BANKCONF_TRANSACTION_ID"):
        body["transactionId"] = os.environ["BANKCONF_TRANSACTION_ID"]
    url = "%s/__control/connections/%s/actions" % (base, urllib.parse.quote(connection, safe=""))
    status, text = call("POST", url, body, key)
    judge(action, status, text)
    sys.exit(0)


if __name__ == "__main__":
    main()
