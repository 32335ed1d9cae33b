#!/usr/bin/env python3
"""Bank Connection Aggregation Service, written from the interface specification alone.

Usage: FOREIGN_API_KEYS="k1,k2" python3 -u server.py --port 0 --variant NAME --service acme

One client per key. Prints "PORT <n>" once listening; exits when stdin is closed.
`POST /__admin/action` is the test hook the driver (driver.py) forwards actions to.
Variants (--variant) are described in VARIANTS.md.
"""
import argparse
import base64
import collections
import datetime
import json
import os
import random
import secrets
import string
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VARIANTS = {
    "none",
    # violations
    "account-read-cache", "connected-before-status", "prev-status-skips-verifying",
    "cursor-offset-drift", "has-more-exact-fill",
    "deleted-txn-still-listed", "retry-eventid-mismatch", "second-client-events-misrouted",
    "resync-reemits-connected", "account-id-collision", "accounts-after-disconnect",
    "widget-session-leaks-key", "refused-create-still-created", "createdat-rewritten-on-sync",
    # legal
    "alt-error-codes", "webhook-delay", "duplicate-deliveries", "shuffled-delivery",
    "rate-limit-429", "close-idle-connections", "clock-skew", "uuid-ids", "extra-fields",
    "background-sync", "ascending-order", "small-max-limit", "opaque-next-cursor",
    "short-form-connected", "widget-positional-open", "minimal-accounts",
}

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--variant", default="none")
parser.add_argument("--service", default="acme")
parser.add_argument("--host", default="127.0.0.1")
ARGS = parser.parse_args()
VARIANT = ARGS.variant
if VARIANT not in VARIANTS:
    sys.stderr.write("unknown variant %s\n" % VARIANT)
    sys.exit(2)
SERVICE = ARGS.service


def v(name):
    return VARIANT == name


L = threading.RLock()  # one lock for the whole store
rng = random.Random()

SKEW = -8.0 if v("clock-skew") else 0.0
STEP_DELAY = 0.015
DELIVERY_DELAY = 2.5 if v("webhook-delay") else 0.0
DEFAULT_LIMIT, MAX_LIMIT = (5, 10) if v("small-max-limit") else (25, 100)


def now():
    return time.time() + SKEW


def iso_ms(t):
    dt = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def iso_s(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def day(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d")


ALNUM = string.ascii_uppercase + string.digits


def new_id(prefix):
    if v("uuid-ids"):
        return prefix + str(uuid.uuid4())
    return prefix + "".join(secrets.choice(ALNUM) for _ in range(26))


def b36(n, width):
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = ALNUM[r] + out
    return out.rjust(width, "0")[-width:]


# --------------------------------------------------------------------------- store

class Client:
    def __init__(self, idx, key):
        self.idx = idx
        self.key = key
        self.id = new_id("cli_")
        self.url = None
        self.state = "pending"  # pending (buffer events), active, stopped (drop events)
        self.outbox = collections.deque()  # (due, body)
        self.cv = threading.Condition()
        threading.Thread(target=sender_loop, args=(self,), daemon=True).start()


class Conn:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "created"
        self.projected = "created"  # state once every accepted action is carried out
        self.token = new_id("sess_")
        self.created_at = now()
        self.account_ids = []
        self.ever_connected = False
        self.before_verifying = "created"
        self.steps = collections.deque()
        self.running = False


class Account:
    def __init__(self, pub, conn):
        self.pub = pub
        self.conn = conn
        self.txns = []  # list of (key, txn), sorted by key descending (newest first)
        self.tomb = {}  # deleted txn id -> key
        self.snapshot = None  # variant deleted-txn-still-listed


CLIENTS = []
BY_KEY = {}
CONNS = {}
ACCOUNTS = {}
TXN_ACCOUNT = {}  # txn id -> account id (live and deleted)
TOKENS = {}  # widget token -> conn id
SEQ = [0]
CURSOR_OFFSETS = {}  # variant cursor-offset-drift
ACCOUNT_CACHE = {}  # variant account-read-cache
CONN_COUNTER = [0]


def next_seq():
    SEQ[0] += 1
    return SEQ[0]


# --------------------------------------------------------------------------- webhooks

def post_json(url, body, timeout=5.0):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json",
                                             "User-Agent": "%s-webhooks/1.0" % SERVICE}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return 200 <= r.status < 300
    except urllib.error.HTTPError as e:
        return 200 <= e.code < 300
    except Exception:
        return False


def deliver(client, body):
    """POST one event, retrying a few times on failure."""
    for wait in (0, 0.2, 0.5, 1.0, 2.0):
        if wait:
            time.sleep(wait)
        with client.cv:
            url = client.url if client.state == "active" else None
        if url is None:
            return
        if post_json(url, body):
            return


def later(delay, fn, *a):
    t = threading.Timer(delay, fn, a)
    t.daemon = True
    t.start()


def sender_loop(client):
    while True:
        with client.cv:
            while True:
                if client.state == "active" and client.outbox:
                    due, body = client.outbox[0]
                    wait = due - time.time()
                    if wait <= 0:
                        client.outbox.popleft()
                        break
                    client.cv.wait(wait)
                else:
                    client.cv.wait(1.0)
        if v("shuffled-delivery"):
            later(rng.uniform(0, 0.4), deliver, client, body)
            continue
        deliver(client, body)
        if v("duplicate-deliveries"):
            later(rng.uniform(0.05, 0.3), deliver, client, body)
        if v("retry-eventid-mismatch") and "id" in body:
            # the ack "timed out": the event is sent again under a fresh envelope id
            copy = dict(body)
            copy["id"] = new_id("evt_")
            later(0.3, deliver, client, copy)


def enqueue(client, body):
    with client.cv:
        if client.state == "stopped":
            return
        client.outbox.append((time.time() + DELIVERY_DELAY, body))
        client.cv.notify_all()


def emit(conn, etype, origin="worker", **fields):
    """Build an event for conn's client and queue it. Call with L held, right after the change."""
    t = now()
    eid = new_id("evt_")
    data = {"eventId": eid, "type": etype, "occurredAt": iso_ms(t), "clientId": conn.client.id,
            "connectionId": conn.id}
    data.update(fields)
    body = {"id": eid, "type": etype, "created_at": iso_ms(t), "data": data}
    if v("extra-fields"):
        body["object"] = "event"
        body["api_version"] = "v1"
        body["livemode"] = False
        data["environment"] = "sandbox"
    dest = conn.client
    if v("second-client-events-misrouted") and origin == "worker" and CLIENTS:
        # the worker uses the first registered address it knows of
        dest = CLIENTS[0]
    enqueue(dest, body)
    if v("short-form-connected") and etype == "connection.connected":
        enqueue(dest, {"event": etype, "connectionId": conn.id, "timestamp": iso_s(t)})
    return body


ERROR_OF = {
    "failed_auth": {"code": "INVALID_CREDENTIALS", "message": "The bank rejected the credentials."},
    "mfa_required": {"code": "MFA_REQUIRED", "message": "The bank asks for a second factor."},
    "error": {"code": "INTERNAL_ERROR", "message": "Unexpected error while connecting."},
}


def set_status(conn, new, origin="worker"):
    with L:
        prev = conn.status
        reported_prev = prev
        if v("prev-status-skips-verifying") and new == "connected" and prev == "verifying":
            reported_prev = conn.before_verifying  # stale variable from the step before
        if new == "verifying":
            conn.before_verifying = prev
        if v("connected-before-status") and new == "connected":
            # the event goes out at once, the status write reaches the store later
            emit(conn, "connection.connected", origin, previousStatus=reported_prev, error=None)
        else:
            conn.status = new
            if new == "connected":
                conn.ever_connected = True
            emit(conn, "connection." + new, origin, previousStatus=reported_prev,
                 error=ERROR_OF.get(new))
            return
    time.sleep(2.0)
    with L:
        conn.status = new
        conn.ever_connected = True


# --------------------------------------------------------------------------- data generation

CATEGORIES_OUT = [("groceries", ["Fresh Market", "Corner Grocer", "Green Basket"]),
                  ("dining", ["Blue Cafe", "Pizza Roma", "Noodle Bar"]),
                  ("transport", ["City Metro", "Fuel Station 24", "RideShare"]),
                  ("utilities", ["Power & Light Co", "Waterworks", "Fiber Net"]),
                  ("shopping", ["Bookshop", "Hardware Depot", "Online Store"]),
                  ("fees", ["Monthly account fee", "ATM fee"])]
CATEGORIES_IN = [("income", ["Salary ACME Corp", "Freelance payment"]),
                 ("transfer", ["Transfer from savings", "Refund"])]


def make_txn(acc, t, date, inflow=None, amount=None):
    if inflow is None:
        inflow = rng.random() < 0.2
    cat, names = rng.choice(CATEGORIES_IN if inflow else CATEGORIES_OUT)
    if amount is None:
        amount = rng.uniform(500, 3000) if cat == "income" else rng.uniform(3, 180)
        amount = round(amount if inflow else -amount, 2)
    txn = {"id": new_id("txn_"), "accountId": acc.pub["id"], "amount": amount,
           "currency": acc.pub["currency"], "description": rng.choice(names),
           "transactionDate": date, "category": cat, "status": "posted", "createdAt": iso_ms(t)}
    if v("extra-fields"):
        txn["object"] = "transaction"
        txn["pending"] = False
        txn["merchantName"] = txn["description"]
    return txn


def insert_txn(acc, txn):
    key = (txn["transactionDate"], next_seq())
    acc.txns.append((key, txn))
    acc.txns.sort(key=lambda kt: kt[0], reverse=True)
    TXN_ACCOUNT[txn["id"]] = acc.pub["id"]


def account_id_for(conn, i):
    if v("account-id-collision"):
        # "unique enough": the sync second and the position of the account
        return "acc_" + b36(int(time.time()), 12) + b36(i, 14)
    return new_id("acc_")


def make_accounts(conn):
    """Create the accounts of a connection and their transactions (with L held)."""
    if conn.account_ids:
        return
    CONN_COUNTER[0] += 1
    n = CONN_COUNTER[0]
    t = now()
    cur = ["USD", "EUR", "GBP"][n % 3]
    inst = {"id": "ins_" + b36(1000 + n % 5, 6), "name": ["First Test Bank", "Northwind Bank",
            "Contoso Credit Union", "Fabrikam Savings", "Harbor Bank"][n % 5], "logo": None}
    specs = [("checking", "Everyday Checking", cur, 45),
             ("savings", "Rainy Day Savings", cur, 6),
             ("credit_card", "Travel Rewards Card", "USD", 23),
             ("brokerage" if n % 2 else "pension", "Long Term Investments" if n % 2 else "Retirement Plan", cur, 0 if n % 2 else 3)]
    ids = []
    for i, (typ, name, currency, ntx) in enumerate(specs):
        aid = account_id_for(conn, i)
        pub = {"id": aid, "connectionId": conn.id, "name": name, "type": typ, "currency": currency,
               "balance": 0.0, "availableBalance": 0.0,
               "accountNumber": "****%04d" % rng.randint(0, 9999), "createdAt": iso_ms(t),
               "lastSyncedAt": iso_ms(t), "institution": dict(inst)}
        if typ == "credit_card":
            limit = 5000.0
            bal = -round(rng.uniform(100, 900), 2)
            pub["balance"] = bal
            pub["availableBalance"] = round(limit + bal, 2)
            pub["creditLimit"] = {"amount": limit, "currency": currency}
            pub["currencyBalances"] = [{"currency": "EUR", "balance": -round(rng.uniform(10, 200), 2)}]
        elif typ in ("brokerage", "pension"):
            pos = [{"symbol": "VTI", "name": "Total Market ETF", "quantity": 12.5, "price": 231.4,
                    "marketValue": round(12.5 * 231.4, 2), "currency": currency},
                   {"symbol": "BND", "name": "Bond ETF", "quantity": 30.0, "price": 72.1,
                    "marketValue": round(30 * 72.1, 2), "currency": currency}]
            pub["positions"] = pos
            bal = round(sum(p["marketValue"] for p in pos) + 150.0, 2)
            pub["balance"] = bal
            pub["availableBalance"] = bal
        else:
            bal = round(rng.uniform(200, 9000), 2)
            pub["balance"] = bal
            pub["availableBalance"] = bal
        if v("minimal-accounts"):
            # only the fields marked * are sent
            for k in ("lastSyncedAt", "institution", "creditLimit", "currencyBalances", "positions"):
                pub.pop(k, None)
        if v("extra-fields"):
            pub["object"] = "account"
            pub["mask"] = pub["accountNumber"][-4:]
            pub["metadata"] = {}
        acc = Account(pub, conn)
        today = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).date()
        for k in range(ntx):
            d = today - datetime.timedelta(days=(k * 2) // 3 + 1)  # some days hold two
            insert_txn(acc, make_txn(acc, t, d.isoformat(), inflow=(typ == "credit_card" and k % 7 == 3) or None))
        acc.snapshot = list(acc.txns)
        ACCOUNTS[aid] = acc
        ids.append(aid)
    conn.account_ids = ids


def apply_update(conn, account_id):
    """Change an account (new transactions, balance, sync time) and announce it."""
    with L:
        accs = [ACCOUNTS[a] for a in conn.account_ids if a in ACCOUNTS]
        if not accs:
            return
        acc = ACCOUNTS.get(account_id) if account_id in conn.account_ids else None
        acc = acc or accs[0]
        t = now()
        total = 0.0
        for _ in range(rng.randint(1, 2)):
            txn = make_txn(acc, t, day(t))
            insert_txn(acc, txn)
            total += txn["amount"]
        p = acc.pub
        p["balance"] = round(p["balance"] + total, 2)
        p["availableBalance"] = round(p["availableBalance"] + total, 2)
        if "lastSyncedAt" in p:
            p["lastSyncedAt"] = iso_ms(t)
        if v("createdat-rewritten-on-sync"):
            p["createdAt"] = iso_ms(t)  # the sync upserts the whole row
        acc.snapshot = list(acc.txns)
        emit(conn, "accounts.updated", accountId=acc.pub["id"])
        if v("resync-reemits-connected") and conn.status == "connected":
            emit(conn, "connection.connected", previousStatus=conn.status, error=None)


def apply_delete(conn, account_id, txn_id):
    with L:
        acc = None
        if txn_id:
            aid = TXN_ACCOUNT.get(txn_id)
            acc = ACCOUNTS.get(aid) if aid in conn.account_ids else None
            if acc is None or txn_id in acc.tomb:
                return
        else:
            cands = [ACCOUNTS[account_id]] if account_id in conn.account_ids else \
                [ACCOUNTS[a] for a in conn.account_ids if a in ACCOUNTS]
            cands = [a for a in cands if a.txns]
            if not cands:
                return
            acc = cands[0]
            txn_id = acc.txns[len(acc.txns) // 2][1]["id"]
        for i, (key, txn) in enumerate(acc.txns):
            if txn["id"] == txn_id:
                del acc.txns[i]
                acc.tomb[txn_id] = key
                break
        else:
            return
        if not v("deleted-txn-still-listed"):
            acc.snapshot = list(acc.txns)
        emit(conn, "transaction.deleted", accountId=acc.pub["id"], transactionId=txn_id)


# --------------------------------------------------------------------------- connection worker

def run_steps(conn):
    while True:
        with L:
            if not conn.steps:
                conn.running = False
                return
            step = conn.steps.popleft()
        time.sleep(STEP_DELAY)
        kind = step[0]
        if kind == "state":
            set_status(conn, step[1])
        elif kind == "accounts":
            with L:
                make_accounts(conn)
        elif kind == "update":
            apply_update(conn, step[1])
        elif kind == "delete":
            apply_delete(conn, step[1], step[2])


def schedule(conn, steps, projected):
    with L:
        conn.steps.extend(steps)
        conn.projected = projected
        if not conn.running:
            conn.running = True
            threading.Thread(target=run_steps, args=(conn,), daemon=True).start()


AUTH_FROM = {"created", "failed_auth", "mfa_required", "error"}


def admin_action(a):
    action = a.get("action")
    if action == "register_webhook":
        pairs = [(a.get("apiKey"), a.get("webhookUrl")), (a.get("secondApiKey"), a.get("secondWebhookUrl"))]
        for key, url in pairs:
            c = BY_KEY.get(key) if key else None
            if c is None or not url:
                continue
            with c.cv:
                c.url = url
                c.state = "active"
                c.cv.notify_all()
        return {"exit": 0, "stdout": "webhooks=per-client"}
    if action == "unregister_webhook":
        for c in CLIENTS:
            with c.cv:
                c.url = None
                c.state = "stopped"
                c.outbox.clear()
                c.cv.notify_all()
        return {"exit": 0}
    with L:
        conn = CONNS.get(a.get("connectionId") or "")
        if conn is None and a.get("widgetToken"):
            conn = CONNS.get(TOKENS.get(a["widgetToken"], ""))
        if conn is None:
            return {"exit": 3, "message": "unknown connection"}
        st = conn.projected
        if action in ("connect", "fail_auth", "require_mfa", "error"):
            if st not in AUTH_FROM:
                return {"exit": 4, "message": "cannot %s from %s" % (action, st)}
            final = {"connect": "connected", "fail_auth": "failed_auth",
                     "require_mfa": "mfa_required", "error": "error"}[action]
            steps = [("state", "credentials_submitted"), ("state", "verifying")]
            if final == "connected":
                steps.append(("accounts",))
            steps.append(("state", final))
            schedule(conn, steps, final)
            return {"exit": 0}
        if action == "disconnect":
            if st == "disconnected":
                return {"exit": 4, "message": "already disconnected"}
            schedule(conn, [("state", "disconnected")], "disconnected")
            return {"exit": 0}
        if action == "update_accounts":
            if st != "connected":
                return {"exit": 4, "message": "connection is not connected"}
            schedule(conn, [("update", a.get("accountId"))], st)
            return {"exit": 0}
        if action == "delete_transaction":
            if st != "connected":
                return {"exit": 4, "message": "connection is not connected"}
            tid = a.get("transactionId")
            aid = a.get("accountId")
            if tid:
                owner = TXN_ACCOUNT.get(tid)
                if owner is None or owner not in conn.account_ids:
                    return {"exit": 4, "message": "no such transaction on this connection"}
                if tid in ACCOUNTS[owner].tomb:
                    return {"exit": 4, "message": "transaction already deleted"}
            elif conn.account_ids:
                cands = [ACCOUNTS[aid]] if aid in conn.account_ids else \
                    [ACCOUNTS[x] for x in conn.account_ids if x in ACCOUNTS]
                cands = [c for c in cands if c.txns]
                if not cands:
                    return {"exit": 4, "message": "no transaction to delete"}
                acc = cands[0]
                tid = acc.txns[len(acc.txns) // 2][1]["id"]
            schedule(conn, [("delete", aid, tid)], st)
            return {"exit": 0}
    return {"exit": 3, "message": "unknown action %s" % action}


def background_sync():
    while True:
        time.sleep(1.0)
        with L:
            live = [c for c in CONNS.values() if c.status == "connected" and c.projected == "connected"
                    and not c.steps and c.account_ids]
            conn = rng.choice(live) if live else None
            if conn:
                schedule(conn, [("update", rng.choice(conn.account_ids))], "connected")


# --------------------------------------------------------------------------- widget

WIDGET_JS = r"""/* %(Svc)s Connect widget */
(function (global) {
  "use strict";
  var script = document.currentScript;
  var BASE = (script && script.src) ? script.src.replace(/\/widget\/[^\/?#]*([?#].*)?$/, "") : %(base)s;
  var ORIGIN = BASE.replace(/^(https?:\/\/[^\/]+).*$/, "$1");
  var current = null;
  var POSITIONAL_ONLY = %(positional)s;

  function normalise(a, b, c) {
    if (!POSITIONAL_ONLY && a && typeof a === "object") { return a; }
    return { token: a, connectionId: b, onSuccess: c };
  }

  function open(a, b, c) {
    var o = normalise(a, b, c);
    if (!o || typeof o.token !== "string" || !o.token) { throw new TypeError("%(Svc)sConnect.open: token is required"); }
    if (typeof o.connectionId !== "string" || !o.connectionId) { throw new TypeError("%(Svc)sConnect.open: connectionId is required"); }
    if (current) { current.close(); }
    var overlay = document.createElement("div");
    overlay.setAttribute("data-%(svc)s-connect", "overlay");
    overlay.style.cssText = "position:fixed;inset:0;background:rgba(0,0,0,.45);z-index:2147483646;display:flex;align-items:center;justify-content:center";
    var frame = document.createElement("iframe");
    frame.title = "%(Svc)s Connect";
    frame.style.cssText = "width:380px;height:560px;max-width:100%%;border:0;border-radius:12px;background:#fff";
    frame.src = BASE + "/widget/frame?connectionId=" + encodeURIComponent(o.connectionId) +
      "#token=" + encodeURIComponent(o.token);
    overlay.appendChild(frame);
    function onMessage(ev) {
      if (ev.origin !== ORIGIN || ev.source !== frame.contentWindow) { return; }
      var m = ev.data || {};
      if (m.type === "%(svc)s-connect:success") {
        close();
        if (typeof o.onSuccess === "function") { o.onSuccess(m.metadata); }
      } else if (m.type === "%(svc)s-connect:exit") {
        close();
        if (typeof o.onExit === "function") { o.onExit(m.metadata); }
      }
    }
    function close() {
      global.removeEventListener("message", onMessage);
      if (overlay.parentNode) { overlay.parentNode.removeChild(overlay); }
      current = null;
    }
    global.addEventListener("message", onMessage);
    (document.body || document.documentElement).appendChild(overlay);
    current = { close: close };
    return current;
  }

  global.%(Svc)sConnect = { open: open, version: "1.0.0" };
})(window);
"""

FRAME_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>%(Svc)s Connect</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>body{font-family:system-ui,sans-serif;margin:0;padding:24px;color:#222}
h1{font-size:18px}label{display:block;margin:12px 0 4px}input,select{width:100%%;padding:8px;box-sizing:border-box}
button{margin-top:16px;width:100%%;padding:10px;border:0;border-radius:6px;background:#1b5cff;color:#fff}
#msg{margin-top:12px;color:#a00}</style></head>
<body><h1>Connect your bank</h1>
<form id="f"><label for="bank">Bank</label><select id="bank"></select>
<label for="u">Username</label><input id="u" autocomplete="username">
<label for="p">Password</label><input id="p" type="password" autocomplete="current-password">
<button type="submit">Continue</button><div id="msg"></div></form>
<script>
(function () {
  "use strict";
  var token = decodeURIComponent((location.hash.match(/token=([^&]*)/) || [])[1] || "");
  var connectionId = new URLSearchParams(location.search).get("connectionId") || "";
  var msg = document.getElementById("msg");
  function post(type, metadata) { if (window.parent !== window) { window.parent.postMessage({ type: type, metadata: metadata }, "*"); } }
  fetch("/widget/api/session", { headers: { "X-Widget-Token": token } })
    .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
    .then(function (res) {
      if (!res.ok) { msg.textContent = "This session has expired. Please start again."; return; }
      var sel = document.getElementById("bank");
      (res.body.institutions || []).forEach(function (i) { var o = document.createElement("option"); o.value = i.id; o.textContent = i.name; sel.appendChild(o); });
    })
    .catch(function () { msg.textContent = "Network error."; });
  document.getElementById("f").addEventListener("submit", function (ev) {
    ev.preventDefault();
    fetch("/widget/api/submit", { method: "POST", headers: { "X-Widget-Token": token, "Content-Type": "application/json" },
      body: JSON.stringify({ institutionId: document.getElementById("bank").value, username: document.getElementById("u").value, password: document.getElementById("p").value }) })
      .then(function (r) { return r.json(); })
      .then(function (j) { if (j.metadata) { post("%(svc)s-connect:success", j.metadata); } else { msg.textContent = "Could not submit."; } })
      .catch(function () { msg.textContent = "Network error."; });
  });
})();
</script></body></html>
"""

INSTITUTIONS = [{"id": "ins_" + b36(1000 + i, 6), "name": n} for i, n in enumerate(
    ["First Test Bank", "Northwind Bank", "Contoso Credit Union", "Fabrikam Savings", "Harbor Bank"])]


# --------------------------------------------------------------------------- HTTP

class ApiError(Exception):
    def __init__(self, status, code, message, headers=None):
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


BUCKETS = {}


def rate_ok(key):
    """Variant rate-limit-429: 20 requests per second and key, burst 20."""
    with L:
        t = time.time()
        tokens, last = BUCKETS.get(key, (20.0, t))
        tokens = min(20.0, tokens + (t - last) * 20.0)
        if tokens < 1.0:
            BUCKETS[key] = (tokens, t)
            return False
        BUCKETS[key] = (tokens - 1.0, t)
        return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "%sAPI/1.0" % SERVICE.capitalize()
    sys_version = ""
    if v("close-idle-connections"):
        timeout = 0.3  # idle keep-alive connections are closed after 300 ms

    def log_message(self, fmt, *args):
        if os.environ.get("FOREIGN_LOG"):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # ---- plumbing
    def send_body(self, status, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        for k, val in (headers or {}).items():
            self.send_header(k, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def error_body(self, e):
        if v("alt-error-codes"):
            return self.send_body(e.status, {"message": e.message, "statusCode": e.status}, headers=e.headers)
        return self.send_body(e.status, {"error": {"code": e.code, "message": e.message}}, headers=e.headers)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def client(self):
        auth = self.headers.get("Authorization") or ""
        parts = auth.split(None, 1)
        key = parts[1].strip() if len(parts) == 2 and parts[0].lower() == "bearer" else None
        c = BY_KEY.get(key) if key else None
        if c is None:
            raise ApiError(403 if v("alt-error-codes") else 401, "unauthorized",
                           "Missing or invalid API key.",
                           {} if v("alt-error-codes") else {"WWW-Authenticate": 'Bearer realm="api"'})
        if v("rate-limit-429") and not rate_ok(key):
            raise ApiError(429, "rate_limited", "Too many requests.", {"Retry-After": "1"})
        return c

    def cors(self):
        return {"Access-Control-Allow-Origin": "*"}

    def base_url(self):
        return "http://" + (self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_port)

    # ---- dispatch
    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_OPTIONS(self):
        self.read_body()
        h = self.cors()
        h["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
        h["Access-Control-Allow-Headers"] = "Content-Type, X-Widget-Token"
        h["Access-Control-Max-Age"] = "600"
        self.send_body(204, b"", "text/plain", h)

    def dispatch(self, method):
        try:
            body = self.read_body()
            u = urllib.parse.urlsplit(self.path)
            path = u.path
            q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
            seg = [s for s in path.split("/") if s]
            if path == "/__admin/action" and method == "POST":
                try:
                    a = json.loads(body or b"{}")
                except ValueError:
                    return self.send_body(400, {"exit": 2, "message": "bad json"})
                return self.send_body(200, admin_action(a))
            if seg and seg[0] == "widget":
                return self.widget(method, seg, q, body)
            if seg and seg[0] == "v1":
                return self.api(method, seg[1:], q, body)
            raise ApiError(404, "not_found", "No such route.")
        except ApiError as e:
            self.error_body(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # pragma: no cover
            try:
                self.send_body(500, {"error": {"code": "internal", "message": repr(e)}})
            except Exception:
                pass

    # ---- widget
    def widget(self, method, seg, q, body):
        svc = SERVICE.lower()
        Svc = "".join(p.capitalize() for p in svc.replace("-", "_").split("_"))
        if method == "GET" and seg == ["widget", "%s-connect.js" % SERVICE]:
            js = WIDGET_JS % {"svc": svc, "Svc": Svc, "base": json.dumps(self.base_url()),
                              "positional": "true" if v("widget-positional-open") else "false"}
            h = self.cors()
            h["Cache-Control"] = "no-cache"
            return self.send_body(200, js, "application/javascript; charset=utf-8", h)
        if method == "GET" and seg == ["widget", "frame"]:
            html = FRAME_HTML % {"svc": svc, "Svc": Svc}
            return self.send_body(200, html, "text/html; charset=utf-8", {"Cache-Control": "no-store"})
        if seg[:2] == ["widget", "api"] and len(seg) == 3:
            token = self.headers.get("X-Widget-Token") or ""
            with L:
                conn = CONNS.get(TOKENS.get(token, ""))
            if conn is None or time.time() - (conn.created_at - SKEW) > 3600:
                raise ApiError(401, "invalid_widget_token", "Unknown or expired widget token.", self.cors())
            if method == "GET" and seg[2] == "session":
                out = {"connectionId": conn.id, "status": conn.status.upper(), "institutions": INSTITUTIONS,
                       "client": {"id": conn.client.id, "name": "Client %d" % (conn.client.idx + 1)}}
                if v("widget-session-leaks-key"):
                    # the session serialises the whole client record, credentials included
                    out["client"] = {"id": conn.client.id, "name": "Client %d" % (conn.client.idx + 1),
                                     "apiKey": conn.client.key, "webhookUrl": conn.client.url}
                return self.send_body(200, out, headers=dict(self.cors(), **{"Cache-Control": "no-store"}))
            if method == "POST" and seg[2] == "submit":
                try:
                    form = json.loads(body or b"{}")
                except ValueError:
                    form = {}
                action = "connect"
                if str(form.get("password", "")) == "wrong":
                    action = "fail_auth"
                elif "mfa" in str(form.get("username", "")):
                    action = "require_mfa"
                res = admin_action({"action": action, "connectionId": conn.id})
                if res["exit"] != 0:
                    raise ApiError(409, "invalid_state", res.get("message", "refused"), self.cors())
                inst = next((i for i in INSTITUTIONS if i["id"] == form.get("institutionId")), INSTITUTIONS[0])
                return self.send_body(200, {"status": "submitted", "metadata": {
                    "connectionId": conn.id, "institution": inst}}, headers=self.cors())
        raise ApiError(404, "not_found", "No such route.")

    # ---- API
    def api(self, method, seg, q, body):
        if method == "POST" and seg == ["connections"]:
            if v("refused-create-still-created"):
                return self.create_connection_leaky()
            c = self.client()
            return self.create_connection(c)
        if method == "GET" and len(seg) == 2 and seg[0] == "connections":
            c = self.client()
            conn = self.own_conn(c, seg[1])
            with L:
                out = {"connectionId": conn.id, "status": conn.status.upper(), "createdAt": iso_ms(conn.created_at)}
            return self.send_body(200, out)
        if method == "GET" and len(seg) == 3 and seg[0] == "connections" and seg[2] == "accounts":
            c = self.client()
            conn = self.own_conn(c, seg[1])
            with L:
                ok = conn.ever_connected if v("accounts-after-disconnect") else conn.status == "connected"
                if not ok:
                    raise ApiError(400 if v("alt-error-codes") else 409, "connection_not_connected",
                                   "The connection is %s; accounts are available once it is CONNECTED."
                                   % conn.status.upper())
                out = [json.loads(json.dumps(ACCOUNTS[a].pub)) for a in conn.account_ids if a in ACCOUNTS]
            return self.send_body(200, out)
        if method == "GET" and len(seg) == 2 and seg[0] == "accounts":
            c = self.client()
            acc = self.own_account(c, seg[1])
            with L:
                if v("account-read-cache"):
                    hit = ACCOUNT_CACHE.get(acc.pub["id"])
                    if hit and time.time() - hit[0] < 60:
                        return self.send_body(200, hit[1])
                out = json.loads(json.dumps(acc.pub))
                if v("account-read-cache"):
                    ACCOUNT_CACHE[acc.pub["id"]] = (time.time(), out)
            return self.send_body(200, out)
        if method == "GET" and len(seg) == 3 and seg[0] == "accounts" and seg[2] == "transactions":
            c = self.client()
            acc = self.own_account(c, seg[1])
            return self.send_body(200, self.list_transactions(acc, q))
        if seg[:1] in (["connections"], ["accounts"]):
            self.client()
            raise ApiError(405, "method_not_allowed", "Method not allowed.", {"Allow": "GET" if seg[0] == "accounts" or len(seg) > 1 else "POST"})
        self.client()
        raise ApiError(404, "not_found", "No such route.")

    def create_connection(self, c):
        with L:
            conn = Conn(c)
            CONNS[conn.id] = conn
            TOKENS[conn.token] = conn.id
            emit(conn, "connection.created", origin="request", previousStatus=None, error=None)
            out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.token}
            if v("extra-fields"):
                out["createdAt"] = iso_ms(conn.created_at)
                out["expiresAt"] = iso_ms(conn.created_at + 3600)
                out["widgetUrl"] = self.base_url() + "/widget/%s-connect.js" % SERVICE
        return self.send_body(200 if v("alt-error-codes") else 201, out)

    def create_connection_leaky(self):
        auth = self.headers.get("Authorization") or ""
        parts = auth.split(None, 1)
        key = parts[1].strip() if len(parts) == 2 else ""
        # keys are indexed by their public prefix; the full comparison runs after the handler
        c = BY_KEY.get(key)
        if c is None and key.startswith(SERVICE + "_") and CLIENTS:
            with L:
                conn = Conn(CLIENTS[0])
                CONNS[conn.id] = conn
                TOKENS[conn.token] = conn.id
                emit(conn, "connection.created", origin="request", previousStatus=None, error=None)
        return self.create_connection(self.client())

    def own_conn(self, c, cid):
        with L:
            conn = CONNS.get(cid)
        if conn is None or conn.client is not c:
            raise ApiError(403 if (v("alt-error-codes") and conn) else 404, "not_found", "No such connection.")
        return conn

    def own_account(self, c, aid):
        with L:
            acc = ACCOUNTS.get(aid)
        if acc is None or acc.conn.client is not c:
            raise ApiError(403 if (v("alt-error-codes") and acc) else 404, "not_found", "No such account.")
        return acc

    def list_transactions(self, acc, q):
        limit = DEFAULT_LIMIT
        raw = q.get("limit", [None])[-1]
        if raw is not None:
            try:
                f = float(raw)
                if f != int(f):
                    raise ValueError
                limit = int(f)
            except (ValueError, OverflowError):
                raise ApiError(400, "invalid_limit", "limit must be a positive integer.")
            if limit < 1:
                raise ApiError(400, "invalid_limit", "limit must be a positive integer.")
            limit = min(limit, MAX_LIMIT)
        after = q.get("starting_after", [None])[-1]
        if after == "":
            after = None
        with L:
            items = acc.snapshot if v("deleted-txn-still-listed") else acc.txns
            if v("ascending-order"):
                items = list(reversed(items))
            start = 0
            if after:
                if v("opaque-next-cursor") and after.startswith("cur_"):
                    try:
                        pad = "=" * (-len(after[4:]) % 4)
                        after = base64.urlsafe_b64decode(after[4:] + pad).decode()
                    except Exception:
                        raise ApiError(400, "invalid_cursor", "starting_after is not a valid cursor.")
                if v("cursor-offset-drift") and after in CURSOR_OFFSETS:
                    start = CURSOR_OFFSETS[after]
                else:
                    key = None
                    for k, t in items:
                        if t["id"] == after:
                            key = k
                            break
                    if key is None:
                        key = acc.tomb.get(after)
                    if key is None:
                        raise ApiError(400, "invalid_cursor", "starting_after names no transaction of this account.")
                    if v("ascending-order"):
                        start = next((i for i, (k, _) in enumerate(items) if k > key), len(items))
                    else:
                        start = next((i for i, (k, _) in enumerate(items) if k < key), len(items))
            page = [json.loads(json.dumps(t)) for _, t in items[start:start + limit]]
            if v("has-more-exact-fill"):
                has_more = len(page) == limit
            else:
                has_more = start + limit < len(items)
            out = {"data": page, "has_more": has_more}
            if has_more and page:
                last = page[-1]["id"]
                if v("cursor-offset-drift"):
                    CURSOR_OFFSETS[last] = start + len(page)
                if v("opaque-next-cursor"):
                    out["next_cursor"] = "cur_" + base64.urlsafe_b64encode(last.encode()).decode().rstrip("=")
                else:
                    out["next_cursor"] = last
            if v("extra-fields"):
                out["object"] = "list"
                out["url"] = "/v1/accounts/%s/transactions" % acc.pub["id"]
        return out


# --------------------------------------------------------------------------- main

def watch_stdin():
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:
        pass
    os._exit(0)


def main():
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    for i, k in enumerate(keys):
        c = Client(i, k)
        CLIENTS.append(c)
        BY_KEY[k] = c
    ThreadingHTTPServer.request_queue_size = 256  # the default backlog of 5 drops bursts of connections
    server = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    server.daemon_threads = True
    if v("background-sync"):
        threading.Thread(target=background_sync, daemon=True).start()
    threading.Thread(target=watch_stdin, daemon=True).start()
    sys.stdout.write("PORT %d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
