#!/usr/bin/env python3
"""Evidence for one variant (not a conformance test): starts server.py with the variant, a webhook
receiver, plays a short scenario with raw HTTP and prints what the variant is about.

Usage: python3 verify/scenario.py VARIANT
"""
import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANT = sys.argv[1] if len(sys.argv) > 1 else "none"
K1, K2 = "wire_verifyAAAAAAAAAAAAAAAAAAAAAAAAAAA", "wire_verifyBBBBBBBBBBBBBBBBBBBBBBBBBBB"
DELIVERIES = []


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        DELIVERIES.append(self.rfile.read(n))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a):
        pass


def main():
    recv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=recv.serve_forever, daemon=True).start()
    env = dict(os.environ, WIRE_API_KEYS=K1 + "," + K2)
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--variant", VARIANT],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    base = srv.stdout.readline().decode().strip()
    u = urllib.parse.urlsplit(base)

    def req(method, path, key=K1, body=None, headers=None):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        h = {"Authorization": "Bearer " + key} if key else {}
        h.update(headers or {})
        c.request(method, urllib.parse.quote(path, safe="/?=&"), body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def admin(**body):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        c.request("POST", "/__admin/action", json.dumps(body),
                  {"X-Admin-Token": "adm_wire_foreign", "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status

    hook = "http://127.0.0.1:%d/hook" % recv.server_address[1]
    admin(action="register_webhook", webhookUrl=hook, keyHash=hashlib.sha256(K1.encode()).hexdigest())
    st, hd, body = req("POST", "/v1/connections", headers={"Content-Type": "application/json"})
    print("POST /v1/connections ->", st, body[:200])
    conn = json.loads(body)
    st2, _, body2 = req("POST", "/v1/connections", headers={"Content-Type": "application/json"})
    print("second POST /v1/connections ->", st2, "same id" if json.loads(body2)["connectionId"] == conn["connectionId"] else "new id")
    admin(action="connect", connectionId=conn["connectionId"])
    path = "/v1/connections/%s/accounts" % conn["connectionId"]
    for i in range(2):
        st, hd, body = req("GET", path)
        print("GET accounts #%d -> %d %s, %d bytes, first bytes %r" % (i + 1, st, hd.get("Content-Type"), len(body), body[:60]))
    st, hd, body = req("GET", path, headers={"If-None-Match": "*"} if VARIANT == "phantom-304" else None)
    try:
        accounts = json.loads(body) if st == 200 else None
    except UnicodeDecodeError:
        accounts = json.loads(body.decode("latin-1"))
        print("  (accounts read as Latin-1: %r)" % [a["name"] for a in accounts])
    if accounts:
        a0 = accounts[0]
        print("account[0]:", {k: a0[k] for k in ("currency", "createdAt", "lastSyncedAt", "accountNumber", "institution")})
        card = [a for a in accounts if a["type"] == "credit_card"][0]
        print("credit card currency:", card["currency"])
        acc = a0["id"]
        st, hd, body = req("GET", "/v1/accounts/%s/transactions?limit=10" % acc)
        print("GET transactions?limit=10 ->", st, "Content-Range:", hd.get("Content-Range"))
        try:
            body.decode("utf-8")
            print("  body is UTF-8")
        except UnicodeDecodeError as e:
            print("  body is not UTF-8:", e)
        if VARIANT == "read-echo-updated":
            for _ in range(3):
                req("GET", "/v1/accounts/%s" % acc)
                time.sleep(2.1)
        lone = [s for s in body.decode("latin-1").split('"') if "\\ud8" in s and "\\udc" not in s]
        if lone:
            print("  a description ending in a lone surrogate escape:", lone[0])
        admin(action="update_accounts", connectionId=conn["connectionId"], accountId=acc)
        st, hd, body = req("GET", "/v1/accounts/%s" % acc)
        if st == 200:
            print("after update: lastSyncedAt", json.loads(body)["lastSyncedAt"], "createdAt", json.loads(body)["createdAt"])
        else:
            print("after update: GET account ->", st)
        time.sleep(2.5)
        req("GET", "/v1/accounts/%s" % acc)
    time.sleep(1.5)
    print("deliveries:", len(DELIVERIES))
    for d in DELIVERIES:
        head = d[:3]
        try:
            env = json.loads(d)
        except ValueError as e:
            print("  not JSON (%s), first bytes %r" % (e, head))
            continue
        data = env["data"]
        print("  %-34s keys=%s" % (env["type"], ",".join(sorted(data))))
    srv.stdin.close()
    srv.wait(timeout=5)


if __name__ == "__main__":
    main()
