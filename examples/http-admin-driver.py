#!/usr/bin/env python3
"""A bankconf driver for a server driven through an HTTP admin API (standard library only).

bankconf runs the driver once per action (docs/driver.md), with the action and its
arguments in BANKCONF_* environment variables. This driver turns each action into one request
to the server's admin API, which it assumes to be:

    POST   {admin}/webhooks                            {"url": ...}   register a webhook address
                                                                      for the key's client
    DELETE {admin}/webhooks                            {"url": ...}   remove it
    POST   {admin}/connections/{connectionId}/{action} {"accountId", "transactionId"} (optional)

where {admin} is BANKCONF_ADMIN_URL, by default BANKCONF_BASE_URL + "/sandbox" (the control
routes of `bankconf serve`, so this driver can be tried against it). Each request carries
`Authorization: Bearer $BANKCONF_API_KEY`, the client the action is for; the second client's
webhook address (BANKCONF_SECOND_WEBHOOK_URL, given with a second key) is registered with
BANKCONF_SECOND_API_KEY, so that each client's events go to its own address. Adapt
`admin_request` to your own admin API's paths and authentication.

Exit status: 0 done (the action was accepted; its events may follow later); 3 the server cannot
do this action (an unknown action, or 404/501 to unregister_webhook); 4 refused from the
connection's current state (409); 1 any other failure, with a message on stderr. Stdout is
ignored by bankconf, except the line `webhooks=per-client` that register_webhook prints.
"""

import json
import os
import sys
import urllib.error
import urllib.request

ACTIONS = {"connect", "fail_auth", "require_mfa", "error", "disconnect", "update_accounts", "delete_transaction"}
TIMEOUT_SECONDS = 10


def fail(code, message):
    print(f"http-admin-driver: {message}", file=sys.stderr)
    sys.exit(code)


def admin_request(method, url, body, key_variable="BANKCONF_API_KEY"):
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    key = os.environ.get(key_variable)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return response.status, response.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(4096).decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        fail(1, f"{method} {url}: {e}")


def main():
    action = os.environ.get("BANKCONF_ACTION", "")
    base = os.environ.get("BANKCONF_BASE_URL", "").rstrip("/")
    admin = os.environ.get("BANKCONF_ADMIN_URL", f"{base}/sandbox").rstrip("/")
    if not base and "BANKCONF_ADMIN_URL" not in os.environ:
        fail(1, "BANKCONF_BASE_URL is not set")
    if action in ("register_webhook", "unregister_webhook"):
        hook = os.environ.get("BANKCONF_WEBHOOK_URL") or fail(1, "BANKCONF_WEBHOOK_URL is not set")
        method = "POST" if action == "register_webhook" else "DELETE"
        status, text = admin_request(method, f"{admin}/webhooks", {"url": hook})
        second = os.environ.get("BANKCONF_SECOND_WEBHOOK_URL")
        if second and 200 <= status < 300:
            status, text = admin_request(method, f"{admin}/webhooks", {"url": second}, "BANKCONF_SECOND_API_KEY")
            if action == "register_webhook" and 200 <= status < 300:
                # Say so (docs/driver.md): an event at the other client's address is then a leak.
                print("webhooks=per-client")
    elif action in ACTIONS:
        connection = os.environ.get("BANKCONF_CONNECTION_ID") or fail(1, "BANKCONF_CONNECTION_ID is not set")
        body = {}
        for name, field in (("BANKCONF_ACCOUNT_ID", "accountId"), ("BANKCONF_TRANSACTION_ID", "transactionId")):
            if os.environ.get(name):
                body[field] = os.environ[name]
        quoted = urllib.request.quote(connection, safe="")
        status, text = admin_request("POST", f"{admin}/connections/{quoted}/{action}", body)
    else:
        fail(3, f"unknown action {action!r}")
    if 200 <= status < 300:
        sys.exit(0)
    if status == 409:
        fail(4, f"{action} refused from the current state: {text}")
    if status in (404, 501) and action == "unregister_webhook":
        fail(3, f"{action}: not supported by this admin API ({status})")
    fail(1, f"{action}: HTTP {status}: {text}")


if __name__ == "__main__":
    main()
