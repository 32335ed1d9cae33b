#!/usr/bin/env python3
"""A quick self-check of server.py without the harness: python3 smoke.py [VARIANT]."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
variant = sys.argv[1] if len(sys.argv) > 1 else "none"
K1 = "acme_live_" + "A" * 32
K2 = "acme_live_" + "B" * 32
got = []


class Rx(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        got.append((self.path, time.time(), body))
        self.send_response(204)
        self.end_headers()


rx = ThreadingHTTPServer(("127.0.0.1", 0), Rx)
threading.Thread(target=rx.serve_forever, daemon=True).start()
hook = f"http://127.0.0.1:{rx.server_address[1]}"

env = dict(os.environ, FOREIGN_API_KEYS=f"{K1},{K2}")
proc = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--port", "0", "--variant", variant],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
port = int(proc.stdout.readline().split()[1])
base = f"http://127.0.0.1:{port}"


def call(method, path, key=K1, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def driver(action, **env_extra):
    e = dict(os.environ, BANKCONF_ACTION=action, BANKCONF_BASE_URL=base, BANKCONF_API_KEY=K1, BANKCONF_SECOND_API_KEY=K2, **env_extra)
    return subprocess.run([os.path.join(HERE, "driver.py")], env=e, capture_output=True, text=True)


r = driver("register_webhook", BANKCONF_WEBHOOK_URL=hook + "/one", BANKCONF_SECOND_WEBHOOK_URL=hook + "/two")
print("register", r.returncode, r.stdout.strip(), r.stderr.strip())
print("no key", call("POST", "/v1/connections", key=None))
s, c = call("POST", "/v1/connections")
print("create", s, c)
cid = c["connectionId"]
print("accounts before", call("GET", f"/v1/connections/{cid}/accounts"))
print("connect", driver("connect", BANKCONF_CONNECTION_ID=cid).returncode)
print("connect again", driver("connect", BANKCONF_CONNECTION_ID=cid).returncode)
time.sleep(1.2)
s, accs = call("GET", f"/v1/connections/{cid}/accounts")
print("accounts", s, [(a["id"], a["type"], a["balance"]) for a in accs])
print(json.dumps(accs[2], indent=1))
print("other client", call("GET", f"/v1/connections/{cid}/accounts", key=K2)[0], call("GET", f"/v1/accounts/{accs[0]['id']}", key=K2)[0])
aid = accs[0]["id"]
s, full = call("GET", f"/v1/accounts/{aid}/transactions?limit=100")
ids = [t["id"] for t in full["data"]]
print("full", len(ids), full["has_more"], full.get("next_cursor"))
print(json.dumps(full["data"][0]))
walk, cursor = [], None
while True:
    q = f"?limit=7" + (f"&starting_after={cursor}" if cursor else "")
    s, p = call("GET", f"/v1/accounts/{aid}/transactions{q}")
    walk += [t["id"] for t in p["data"]]
    if not p["has_more"]:
        print("last page", len(p["data"]), p.get("next_cursor"))
        break
    cursor = p["next_cursor"]
print("walk equals full:", walk == ids, len(walk))
print("bad limit", call("GET", f"/v1/accounts/{aid}/transactions?limit=0")[0], "bad cursor", call("GET", f"/v1/accounts/{aid}/transactions?starting_after=txn_X")[0])
print("update", driver("update_accounts", BANKCONF_CONNECTION_ID=cid, BANKCONF_ACCOUNT_ID=aid).returncode)
print("delete", driver("delete_transaction", BANKCONF_CONNECTION_ID=cid, BANKCONF_ACCOUNT_ID=aid, BANKCONF_TRANSACTION_ID=ids[5]).returncode)
print("delete again", driver("delete_transaction", BANKCONF_CONNECTION_ID=cid, BANKCONF_ACCOUNT_ID=aid, BANKCONF_TRANSACTION_ID=ids[5]).returncode)
time.sleep(1.0)
s, after = call("GET", f"/v1/accounts/{aid}/transactions?limit=100")
aft = [t["id"] for t in after["data"]]
print("after: added", [i for i in aft if i not in ids], "removed", [i for i in ids if i not in aft])
print("cursor on deleted", call("GET", f"/v1/accounts/{aid}/transactions?limit=2&starting_after={ids[5]}")[1]["data"][0]["id"] == ids[6])
print("balance", call("GET", f"/v1/accounts/{aid}")[1]["balance"])
s, c2 = call("POST", "/v1/connections", key=K2)
print("second connect", driver("connect", BANKCONF_CONNECTION_ID=c2["connectionId"]).returncode)
for a in ("require_mfa", "fail_auth", "error", "disconnect", "connect"):
    print(a, driver(a, BANKCONF_CONNECTION_ID=cid).returncode)
time.sleep(2.5 if variant != "late-duplicate-webhooks" else 9)
print("unregister", driver("unregister_webhook", BANKCONF_WEBHOOK_URL=hook + "/one", BANKCONF_SECOND_WEBHOOK_URL=hook + "/two").returncode)
for path, t, b in sorted(got, key=lambda g: g[1]):
    d = b["data"]
    print(path, b["type"], b["created_at"], d["occurredAt"], d["clientId"], d["connectionId"][-4:], d.get("previousStatus"), d.get("accountId", "")[-4:], d.get("transactionId", "")[-4:])
print(json.dumps(got[0][2]))
proc.stdin.close()
proc.wait(timeout=5)
print("server exit", proc.returncode)
