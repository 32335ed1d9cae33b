#!/usr/bin/env python3
"""Bank Connection Aggregation Service: a test server written from the interface spec.

Usage: server.py --port 0 --variant NAME --service acme
API keys come from the environment variable FOREIGN_API_KEYS (comma separated, one client per key).
Prints "PORT <n>" once listening; exits when stdin closes.
Standard library only.
"""
import argparse
import datetime
import json
import os
import queue
import random
import secrets
import socket
import string
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

VIOLATIONS = [
    "last-item-dropped",
    "cursor-offset-cache",
    "cursor-date-only",
    "clamp-cursor-skip",
    "connected-event-early",
    "update-lag",
    "deleted-txn-lingers",
    "update-wrong-account-3rd",
    "previous-status-hardcoded",
    "txn-isolation-leak",
    "refused-create-emits",
    "tz-bug-new-txns",
    "createdat-overwritten-on-sync",
    "mfa-path-missing-connected",
    "accounts-cache-after-disconnect",
    "connected-fanout-leak",
]
LEGAL = [
    "alt-errors",
    "oldest-first",
    "ids-uuid",
    "small-pages",
    "limit-reject",
    "shuffle-delivery",
    "dup-delivery",
    "background-sync",
    "clock-skew",
    "slow",
    "rate-limit",
    "extra-fields",
    "big-data",
]

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--variant", default="none")
ap.add_argument("--service", default="acme")
ap.add_argument("--host", default="127.0.0.1")
ARGS = ap.parse_args()
V = ARGS.variant
if V != "none" and V not in VIOLATIONS and V not in LEGAL:
    sys.stderr.write("unknown variant: %s\n" % V)
    sys.exit(2)
SERVICE = ARGS.service

RNG = random.SystemRandom()
L = threading.RLock()

# ---------------------------------------------------------------- clock and ids
CLOCK_OFFSET = 0.0
if V == "clock-skew":
    CLOCK_OFFSET = RNG.choice([-1, 1]) * RNG.uniform(60, 110)


def now_dt():
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=CLOCK_OFFSET)


def iso_ms(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def iso_s(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


_ALNUM = string.ascii_uppercase + string.digits


def new_id(prefix):
    if V == "ids-uuid":
        return prefix + uuid.uuid4().hex
    return prefix + "".join(RNG.choice(_ALNUM) for _ in range(26))


# ---------------------------------------------------------------- state
class Client:
    def __init__(self, key):
        self.key = key
        self.id = new_id("cli_")
        self.url = None
        self.gen = 0
        self.q = queue.Queue()
        self.bucket = [30.0, time.monotonic()]
        threading.Thread(target=self._worker, daemon=True).start()

    def _worker(self):
        while True:
            url, gen, body, attempt = self.q.get()
            send_with_retry(self, url, gen, body, attempt)


CLIENTS = []          # in key order
CLIENT_BY_KEY = {}
for k in [x.strip() for x in os.environ.get("FOREIGN_API_KEYS", "").split(",") if x.strip()]:
    if k not in CLIENT_BY_KEY:
        c = Client(k)
        CLIENTS.append(c)
        CLIENT_BY_KEY[k] = c

CONNS = {}            # id -> Conn
CONN_BY_TOKEN = {}    # widget token -> Conn
ACCOUNTS = {}         # id -> Account
SEQ = [0]
COUNTERS = {"updated": 0}
CURSOR_CACHE = {}     # (account id, txn id) -> absolute offset (variant cursor-offset-cache)


def next_seq():
    SEQ[0] += 1
    return SEQ[0]


class Conn:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "created"
        self.projected = "created"
        self.token = "sess_" + secrets.token_urlsafe(24)
        self.created_at = now_dt()
        self.accounts = []        # account ids
        self.steps = []
        self.running = False
        self.pending_deletes = set()
        self.left_connected_at = None
        self.cached_accounts = None
        self.ever_connected = False


class Account:
    def __init__(self, conn):
        self.conn = conn
        self.client = conn.client
        self.id = new_id("acc_")
        self.txns = []            # visible transactions (dicts with _key)
        self.keys = {}            # every transaction id ever -> sort key


# ---------------------------------------------------------------- data generation
INSTITUTIONS = [
    ("First Meridian Bank", "ins_"), ("Harbor Savings", "ins_"), ("Northwind Credit Union", "ins_"),
    ("Cobalt National", "ins_"),
]
CATEGORIES_OUT = [
    ("groceries", ["Green Basket Market", "FreshCo Grocery", "Corner Deli"]),
    ("dining", ["Luigi's Trattoria", "Bean There Cafe", "Noodle House"]),
    ("transport", ["Metro Transit", "City Rideshare", "Shell Station"]),
    ("utilities", ["Power & Light Co", "Aqua Water Services", "FiberNet Internet"]),
    ("shopping", ["Online Marketplace", "Bookworm Store", "Hardware Depot"]),
    ("entertainment", ["StreamFlix", "Cineplex", "Concert Hall"]),
    ("transfer", ["Transfer to savings", "Rent payment"]),
]
CATEGORIES_IN = [("income", ["Payroll ACME Corp", "Salary deposit", "Interest payment", "Refund"])]
TYPES = ["checking", "savings", "credit_card", "brokerage", "pension"]
NAMES = {
    "checking": ["Everyday Checking", "Premier Checking"],
    "savings": ["High Yield Savings", "Rainy Day Savings"],
    "credit_card": ["Platinum Rewards Card", "Travel Card"],
    "brokerage": ["Self-Directed Brokerage", "Investment Account"],
    "pension": ["Retirement Pension", "401(k) Plan"],
}


def money(x):
    return round(x, 2)


def txn_count():
    if V == "big-data":
        r = RNG.random()
        if r < 0.15:
            return 0
        if r < 0.5:
            return RNG.randint(100, 260)
        return RNG.randint(1, 99)
    r = RNG.random()
    if r < 0.2:
        return RNG.randint(70, 130)
    return RNG.randint(3, 60)


def make_txn(acc, date, created, seq=None, income=None):
    if income is None:
        income = RNG.random() < 0.2
    if income:
        cat, descs = CATEGORIES_IN[0]
        amount = money(RNG.uniform(20, 3000))
    else:
        cat, descs = RNG.choice(CATEGORIES_OUT)
        amount = -money(RNG.uniform(1, 400))
    if amount == 0:
        amount = -1.0
    tid = new_id("txn_")
    key = (date.isoformat(), seq if seq is not None else next_seq())
    t = {
        "id": tid,
        "accountId": acc.id,
        "amount": amount,
        "currency": acc.fields["currency"],
        "description": RNG.choice(descs),
        "transactionDate": date.isoformat(),
        "category": cat,
        "status": "posted",
        "createdAt": iso_ms(created),
        "_key": key,
    }
    if V == "extra-fields":
        t["object"] = "transaction"
        t["merchant"] = {"name": t["description"]}
    acc.keys[tid] = key
    return t


def sort_txns(acc):
    acc.txns.sort(key=lambda t: t["_key"], reverse=(V != "oldest-first"))


def generate_accounts(conn):
    n = RNG.randint(1, 8) if V == "big-data" else RNG.randint(2, 5)
    inst_name, _ = RNG.choice(INSTITUTIONS)
    inst = {"id": new_id("ins_"), "name": inst_name, "logo": None}
    created = now_dt()
    today = created.date()
    types = [RNG.choice(TYPES) for _ in range(n)]
    if n >= 2 and "checking" not in types:
        types[0] = "checking"
    for typ in types:
        acc = Account(conn)
        cur = "USD" if RNG.random() < 0.7 else RNG.choice(["EUR", "GBP", "CAD"])
        if typ == "credit_card":
            limit = float(RNG.choice([2000, 5000, 10000, 15000]))
            bal = -money(RNG.uniform(0, limit * 0.6))
            avail = money(limit + bal)
        else:
            bal = money(RNG.uniform(50, 25000))
            avail = bal if typ in ("checking", "savings") else money(bal * RNG.uniform(0.9, 1.0))
        f = {
            "id": acc.id,
            "connectionId": conn.id,
            "name": RNG.choice(NAMES[typ]),
            "type": typ,
            "currency": cur,
            "balance": bal,
            "availableBalance": avail,
            "accountNumber": "****" + "".join(RNG.choice(string.digits) for _ in range(4)),
            "createdAt": iso_ms(created),
            "lastSyncedAt": iso_ms(created),
            "institution": dict(inst),
        }
        if typ == "credit_card":
            f["creditLimit"] = {"amount": limit, "currency": cur}
            if RNG.random() < 0.4:
                other = "EUR" if cur != "EUR" else "USD"
                f["currencyBalances"] = [{"currency": other, "balance": -money(RNG.uniform(0, 500)),
                                          "availableBalance": money(RNG.uniform(0, 500))}]
        if typ in ("brokerage", "pension"):
            pos = []
            for sym in RNG.sample(["VTI", "VXUS", "BND", "AAPL", "MSFT", "SPY"], RNG.randint(1, 4)):
                q = money(RNG.uniform(1, 200))
                px = money(RNG.uniform(20, 400))
                pos.append({"symbol": sym, "quantity": q, "price": px, "marketValue": money(q * px),
                            "currency": cur})
            f["positions"] = pos
        if V == "extra-fields":
            f["object"] = "account"
            f["metadata"] = {}
        acc.fields = f
        count = txn_count()
        dates = sorted(today - datetime.timedelta(days=RNG.randint(0, 75)) for _ in range(count))
        for d in dates:
            acc.txns.append(make_txn(acc, d, created))
        sort_txns(acc)
        ACCOUNTS[acc.id] = acc
        conn.accounts.append(acc.id)


def public_account(acc):
    return {k: v for k, v in acc.fields.items()}


def public_txn(t):
    return {k: v for k, v in t.items() if not k.startswith("_")}


# ---------------------------------------------------------------- webhooks
def post_json(url, body):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "%s-webhooks/1.0" % SERVICE})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None


def send_with_retry(client, url, gen, body, attempt=0):
    if client.gen != gen or client.url != url:
        return  # unregistered: stop delivering and retrying
    st = post_json(url, body)
    if st is not None and 200 <= st < 300:
        return
    if st in (400, 404, 410, 413) or attempt >= 5:
        return
    delay = 0.5 * (2 ** attempt)

    def again():
        client.q.put((url, gen, body, attempt + 1))
    threading.Timer(delay, again).start()


def dispatch(client, body, extra_client=None):
    targets = [client]
    if extra_client is not None and extra_client is not client:
        targets.append(extra_client)
    for c in targets:
        url, gen = c.url, c.gen
        if not url:
            continue
        if V in ("shuffle-delivery", "slow", "dup-delivery"):
            lo, hi = {"shuffle-delivery": (0.0, 0.9), "slow": (0.3, 2.0), "dup-delivery": (0.0, 0.2)}[V]

            def later(c=c, url=url, gen=gen, d=RNG.uniform(lo, hi)):
                time.sleep(d)
                send_with_retry(c, url, gen, body)
            threading.Thread(target=later, daemon=True).start()
            if V == "dup-delivery" and RNG.random() < 0.5:
                def dup(c=c, url=url, gen=gen, d=RNG.uniform(0.1, 1.5)):
                    time.sleep(d)
                    send_with_retry(c, url, gen, body)
                threading.Thread(target=dup, daemon=True).start()
        else:
            c.q.put((url, gen, body, 0))


def emit(client, conn_id, etype, extra=None, extra_client=None):
    eid = new_id("evt_")
    ts = iso_ms(now_dt())
    data = {"eventId": eid, "type": etype, "occurredAt": ts, "clientId": client.id,
            "connectionId": conn_id}
    if extra:
        data.update(extra)
    body = {"id": eid, "type": etype, "created_at": ts, "data": data}
    if V == "extra-fields":
        body["object"] = "event"
        body["api_version"] = "v1"
    dispatch(client, body, extra_client)


ERRORS = {
    "failed_auth": {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    "error": {"code": "institution_error", "message": "The institution returned an unexpected error."},
}
HARDCODED_PREV = {"credentials_submitted": "created", "verifying": "credentials_submitted",
                  "connected": "verifying", "mfa_required": "verifying", "failed_auth": "verifying",
                  "error": "verifying", "disconnected": "connected"}


def conn_event(conn, new, prev):
    prev_out = HARDCODED_PREV.get(new, prev) if V == "previous-status-hardcoded" else prev
    extra = {"previousStatus": prev_out, "error": ERRORS.get(new)}
    leak = None
    if V == "connected-fanout-leak" and new == "connected" and CLIENTS and conn.client is not CLIENTS[0]:
        leak = CLIENTS[0]
    emit(conn.client, conn.id, "connection." + new, extra, extra_client=leak)


# ---------------------------------------------------------------- lifecycle
def path_for(action, st):
    """States a connection passes through for a driver action from state st; None = refused."""
    if action == "connect":
        return {"created": ["credentials_submitted", "verifying", "connected"],
                "credentials_submitted": ["verifying", "connected"],
                "verifying": ["connected"],
                "mfa_required": ["verifying", "connected"],
                "failed_auth": ["credentials_submitted", "verifying", "connected"],
                "error": ["credentials_submitted", "verifying", "connected"],
                "disconnected": ["credentials_submitted", "verifying", "connected"]}.get(st)
    if action == "fail_auth":
        return {"created": ["credentials_submitted", "verifying", "failed_auth"],
                "credentials_submitted": ["verifying", "failed_auth"],
                "verifying": ["failed_auth"],
                "mfa_required": ["verifying", "failed_auth"],
                "connected": ["failed_auth"],
                "error": ["credentials_submitted", "verifying", "failed_auth"],
                "disconnected": ["credentials_submitted", "verifying", "failed_auth"]}.get(st)
    if action == "require_mfa":
        return {"created": ["credentials_submitted", "verifying", "mfa_required"],
                "credentials_submitted": ["verifying", "mfa_required"],
                "verifying": ["mfa_required"],
                "connected": ["mfa_required"],
                "failed_auth": ["credentials_submitted", "verifying", "mfa_required"],
                "error": ["credentials_submitted", "verifying", "mfa_required"],
                "disconnected": ["credentials_submitted", "verifying", "mfa_required"]}.get(st)
    if action == "error":
        return None if st in ("error", "disconnected") else ["error"]
    if action == "disconnect":
        return None if st == "disconnected" else ["disconnected"]
    return None


def step_delay():
    if V == "slow":
        return RNG.uniform(0.2, 1.0)
    return RNG.uniform(0.03, 0.2)


def enqueue_steps(conn, steps):
    conn.steps.extend(steps)
    if not conn.running:
        conn.running = True
        threading.Thread(target=run_steps, args=(conn,), daemon=True).start()


def run_steps(conn):
    while True:
        with L:
            if not conn.steps:
                conn.running = False
                return
            step = conn.steps.pop(0)
        time.sleep(step_delay())
        try:
            do_step(conn, step)
        except Exception as e:  # keep the worker alive
            sys.stderr.write("step error: %r\n" % (e,))


def do_step(conn, step):
    kind = step[0]
    if kind == "state":
        new = step[1]
        mfa_path = step[2] if len(step) > 2 else False
        with L:
            prev = conn.status
            if V == "connected-event-early" and new == "connected":
                pass  # state set below, after the event
            else:
                set_status(conn, new)
        if V == "mfa-path-missing-connected" and new == "connected" and mfa_path:
            return
        conn_event(conn, new, prev)
        if V == "connected-event-early" and new == "connected":
            time.sleep(1.5)
            with L:
                set_status(conn, new)
    elif kind == "update":
        do_update(conn, step[1], announce=True)
    elif kind == "delete":
        do_delete(conn, step[1], step[2])


def set_status(conn, new):
    if conn.status == "connected" and new != "connected":
        conn.left_connected_at = time.monotonic()
        conn.cached_accounts = [public_account(ACCOUNTS[a]) for a in conn.accounts]
    conn.status = new
    if new == "connected":
        conn.ever_connected = True
        ts = iso_ms(now_dt())
        for a in conn.accounts:
            ACCOUNTS[a].fields["lastSyncedAt"] = ts


def do_update(conn, acc_id, announce=True):
    acc = ACCOUNTS[acc_id]

    def apply():
        with L:
            now = now_dt()
            created = now + datetime.timedelta(hours=2) if V == "tz-bug-new-txns" else now
            total = 0.0
            for _ in range(RNG.randint(1, 3)):
                t = make_txn(acc, now.date(), created)
                acc.txns.append(t)
                total += t["amount"]
            sort_txns(acc)
            f = acc.fields
            f["balance"] = money(f["balance"] + total)
            f["availableBalance"] = money(f["availableBalance"] + total)
            f["lastSyncedAt"] = iso_ms(now)
            if V == "createdat-overwritten-on-sync":
                f["createdAt"] = iso_ms(now)

    named = acc_id
    with L:
        COUNTERS["updated"] += 1
        n = COUNTERS["updated"]
        if V == "update-wrong-account-3rd" and n % 3 == 0:
            others = [a for a in conn.accounts if a != acc_id]
            if others:
                named = RNG.choice(others)
    if V == "update-lag":
        emit(conn.client, conn.id, "accounts.updated", {"accountId": named})
        time.sleep(2.0)
        apply()
    else:
        apply()
        emit(conn.client, conn.id, "accounts.updated", {"accountId": named})


def do_delete(conn, acc_id, txn_id):
    acc = ACCOUNTS[acc_id]

    def apply():
        with L:
            acc.txns = [t for t in acc.txns if t["id"] != txn_id]
            conn.pending_deletes.discard(txn_id)

    if V == "deleted-txn-lingers":
        emit(conn.client, conn.id, "transaction.deleted", {"accountId": acc_id, "transactionId": txn_id})
        time.sleep(2.5)
        apply()
    else:
        apply()
        emit(conn.client, conn.id, "transaction.deleted", {"accountId": acc_id, "transactionId": txn_id})


def background_sync():
    while True:
        time.sleep(RNG.uniform(2.0, 5.0))
        with L:
            conns = [c for c in CONNS.values()
                     if c.status == "connected" and c.projected == "connected" and c.accounts
                     and c.client.url]
            if not conns:
                continue
            conn = RNG.choice(conns)
            enqueue_steps(conn, [("update", RNG.choice(conn.accounts))])


# ---------------------------------------------------------------- admin actions
def admin_action(body):
    """Returns (status, json)."""
    action = body.get("action")
    if action == "register_webhook":
        with L:
            pairs = [(body.get("api_key"), body.get("webhook_url")),
                     (body.get("second_api_key"), body.get("second_webhook_url"))]
            for key, url in pairs:
                if key and url:
                    c = CLIENT_BY_KEY.get(key)
                    if c is None:
                        return 400, {"error": "unknown api key"}
                    c.url = url
                    c.gen += 1
        return 200, {"ok": True, "webhooks": "per-client"}
    if action == "unregister_webhook":
        with L:
            for key in (body.get("api_key"), body.get("second_api_key")):
                c = CLIENT_BY_KEY.get(key) if key else None
                if c is not None:
                    c.url = None
                    c.gen += 1
        return 200, {"ok": True}
    with L:
        conn = CONNS.get(body.get("connection_id") or "")
        if conn is None and body.get("widget_token"):
            conn = CONN_BY_TOKEN.get(body.get("widget_token"))
        if conn is None:
            return 404, {"error": "unknown connection"}
        if action in ("connect", "fail_auth", "require_mfa", "error", "disconnect"):
            path = path_for(action, conn.projected)
            if path is None:
                return 409, {"error": "action %s refused from state %s" % (action, conn.projected)}
            if action == "connect" and not conn.accounts:
                generate_accounts(conn)
            mfa_path = conn.projected == "mfa_required"
            conn.projected = path[-1]
            enqueue_steps(conn, [("state", s, mfa_path) for s in path])
            return 200, {"ok": True, "states": path}
        if action == "update_accounts":
            if conn.projected != "connected" or not conn.accounts:
                return 409, {"error": "connection is not connected"}
            acc_id = body.get("account_id") or RNG.choice(conn.accounts)
            if acc_id not in conn.accounts:
                return 409, {"error": "account does not belong to the connection"}
            enqueue_steps(conn, [("update", acc_id)])
            return 200, {"ok": True, "accountId": acc_id}
        if action == "delete_transaction":
            if conn.projected != "connected" or not conn.accounts:
                return 409, {"error": "connection is not connected"}
            txn_id = body.get("transaction_id")
            acc_id = body.get("account_id")
            if txn_id:
                owner = None
                for a in conn.accounts:
                    if any(t["id"] == txn_id for t in ACCOUNTS[a].txns):
                        owner = a
                        break
                if owner is None or txn_id in conn.pending_deletes:
                    return 409, {"error": "no such transaction on this connection"}
                acc_id = owner
            else:
                cands = []
                order = ([acc_id] if acc_id in conn.accounts else []) + \
                    [a for a in conn.accounts if a != acc_id]
                for a in order:
                    cands = [t["id"] for t in ACCOUNTS[a].txns if t["id"] not in conn.pending_deletes]
                    if cands:
                        acc_id = a
                        break
                if not cands:
                    return 409, {"error": "no transaction to delete"}
                txn_id = RNG.choice(cands)
            conn.pending_deletes.add(txn_id)
            enqueue_steps(conn, [("delete", acc_id, txn_id)])
            return 200, {"ok": True, "accountId": acc_id, "transactionId": txn_id}
    return 501, {"error": "unsupported action"}


# ---------------------------------------------------------------- widget
def widget_js():
    glob = SERVICE[:1].upper() + SERVICE[1:] + "Connect"
    return r"""/* %(svc)s Connect widget */
(function (root) {
  'use strict';
  var script = document.currentScript;
  var base = '';
  try { base = script && script.src ? new URL(script.src).origin : ''; } catch (e) { base = ''; }
  function open(a, b, c) {
    var opts = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (typeof opts.token !== 'string' || !opts.token) { throw new TypeError('open: token is required'); }
    if (typeof opts.connectionId !== 'string' || !opts.connectionId) { throw new TypeError('open: connectionId is required'); }
    var host = document.body || document.documentElement;
    var box = document.createElement('div');
    box.setAttribute('data-%(svc)s-connect', '');
    box.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647';
    var panel = document.createElement('div');
    panel.style.cssText = 'background:#fff;padding:24px;border-radius:8px;font-family:sans-serif;min-width:280px';
    panel.textContent = 'Connecting to your bank...';
    box.appendChild(panel);
    host.appendChild(box);
    var closed = false;
    function close() { if (!closed && box.parentNode) { box.parentNode.removeChild(box); } closed = true; }
    try {
      fetch(base + '/widget/session', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: opts.token, connectionId: opts.connectionId })
      }).then(function (r) { return r.json(); }).then(function (s) {
        if (closed) { return; }
        if (s && s.ok) {
          panel.textContent = 'Choose your bank: ' + (s.institutions || []).join(', ');
          if (typeof opts.onSuccess === 'function') {
            opts.onSuccess({ connectionId: opts.connectionId, institution: s.institution || null });
          }
        } else {
          panel.textContent = 'This session has expired.';
          if (typeof opts.onExit === 'function') { opts.onExit({ reason: 'invalid_session' }); }
        }
      }).catch(function () { if (!closed) { panel.textContent = 'Network error.'; } });
    } catch (e) { panel.textContent = 'Network error.'; }
    return { close: close };
  }
  root.%(glob)s = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
""" % {"svc": SERVICE, "glob": glob}


# ---------------------------------------------------------------- HTTP
DEFAULT_LIMIT, MAX_LIMIT = (10, 25) if V == "small-pages" else (25, 100)
if V == "clamp-cursor-skip":
    MAX_LIMIT = 50


class ApiError(Exception):
    def __init__(self, status, code, message, headers=None):
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def err(kind, message):
    # clean: 400 / 401 / 404 / 405 / 409 ; alt-errors: another choice of codes and body shape
    clean = {"bad_request": 400, "unauthorized": 401, "not_found": 404, "method": 405,
             "not_connected": 409, "rate": 429}
    alt = {"bad_request": 422, "unauthorized": 403, "not_found": 404, "method": 405,
           "not_connected": 400, "rate": 429}
    st = (alt if V == "alt-errors" else clean)[kind]
    return ApiError(st, kind, message)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AcmeBank/1.0"
    sys_version = ""

    def log_message(self, fmt, *a):
        pass

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    # -- output helpers
    def send(self, status, body, ctype="application/json", headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error_obj(self, e):
        if V == "alt-errors":
            body = {"type": "about:blank", "title": e.code, "status": e.status, "detail": e.message}
            ctype = "application/problem+json"
        else:
            body = {"error": {"code": e.code, "message": e.message}}
            ctype = "application/json"
        self.send(e.status, body, ctype, e.headers)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # -- dispatch
    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_HEAD(self):
        self.route("HEAD")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PATCH(self):
        self.route("PATCH")

    def do_OPTIONS(self):
        u = urlparse(self.path)
        self.read_body()
        self.send(204, b"", "text/plain", {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type, Authorization, Accept",
            "Access-Control-Max-Age": "600"} if u.path.startswith("/widget/") else {"Allow": "GET, POST"})

    def route(self, method):
        try:
            body = self.read_body()
            u = urlparse(self.path)
            path = u.path
            if path == "/__admin/action":
                if method != "POST":
                    raise err("method", "use POST")
                try:
                    req = json.loads(body or b"{}")
                except ValueError:
                    raise err("bad_request", "invalid JSON")
                st, out = admin_action(req if isinstance(req, dict) else {})
                return self.send(st, out)
            if path.startswith("/widget/"):
                return self.widget(method, path, body)
            if path == "/v1" or path.startswith("/v1/"):
                return self.api(method, path, u.query)
            raise err("not_found", "no such resource")
        except ApiError as e:
            self.send_error_obj(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # pragma: no cover
            sys.stderr.write("internal error: %r\n" % (e,))
            try:
                self.send(500, {"error": {"code": "internal", "message": "internal error"}})
            except Exception:
                pass

    def widget(self, method, path, body):
        cors = {"Access-Control-Allow-Origin": "*"}
        if path == "/widget/%s-connect.js" % SERVICE:
            if method not in ("GET", "HEAD"):
                raise err("method", "use GET")
            return self.send(200, widget_js().encode(), "application/javascript; charset=utf-8",
                             dict(cors, **{"Cache-Control": "no-store"}))
        if path == "/widget/session":
            if method != "POST":
                raise err("method", "use POST")
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                req = {}
            with L:
                conn = CONN_BY_TOKEN.get(req.get("token") if isinstance(req, dict) else None)
                ok = conn is not None and conn.id == req.get("connectionId")
                inst = None
                if ok and conn.accounts:
                    inst = ACCOUNTS[conn.accounts[0]].fields.get("institution")
            if not ok:
                return self.send(401, {"ok": False, "error": "invalid_session"}, headers=cors)
            return self.send(200, {"ok": True, "connectionId": conn.id,
                                   "institution": inst,
                                   "institutions": [n for n, _ in INSTITUTIONS]}, headers=cors)
        raise err("not_found", "no such resource")

    def auth(self):
        h = self.headers.get("Authorization") or ""
        parts = h.split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":
            raise err("unauthorized", "missing or malformed Authorization header")
        c = CLIENT_BY_KEY.get(parts[1].strip())
        if c is None:
            raise err("unauthorized", "invalid API key")
        return c

    def rate_limit(self, c):
        if V != "rate-limit":
            return
        with L:
            tokens, last = c.bucket
            t = time.monotonic()
            tokens = min(20.0, tokens + (t - last) * 12.0)
            if tokens < 1.0:
                c.bucket = [tokens, t]
                raise ApiError(429, "rate_limited", "too many requests", {"Retry-After": "1"})
            c.bucket = [tokens - 1.0, t]

    def api(self, method, path, query):
        if V == "slow":
            time.sleep(RNG.uniform(0.03, 0.35))
        segs = [unquote(s) for s in path.split("/")[2:]]
        # POST /v1/connections
        if segs == ["connections"]:
            if method != "POST":
                self.auth()
                raise ApiError(405, "method_not_allowed", "use POST", {"Allow": "POST"})
            try:
                c = self.auth()
            except ApiError:
                if V == "refused-create-emits" and CLIENTS:
                    # the connection row is written (and announced) before the key is checked
                    with L:
                        ghost = Conn(CLIENTS[0])
                        CONNS[ghost.id] = ghost
                    conn_event(ghost, "created", None)
                raise
            self.rate_limit(c)
            with L:
                conn = Conn(c)
                CONNS[conn.id] = conn
                CONN_BY_TOKEN[conn.token] = conn
            conn_event(conn, "created", None)
            out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.token}
            if V == "extra-fields":
                out["object"] = "connection"
                out["createdAt"] = iso_ms(conn.created_at)
            return self.send(200 if V == "alt-errors" else 201, out)
        c = self.auth()
        self.rate_limit(c)
        if method not in ("GET", "HEAD"):
            if (len(segs) == 3 and segs[0] == "connections" and segs[2] == "accounts") or \
                    (segs[:1] == ["accounts"] and len(segs) in (2, 3)):
                raise ApiError(405, "method_not_allowed", "use GET", {"Allow": "GET"})
            raise err("not_found", "no such resource")
        if len(segs) == 3 and segs[0] == "connections" and segs[2] == "accounts":
            return self.get_accounts(c, segs[1])
        if len(segs) == 2 and segs[0] == "accounts":
            return self.get_account(c, segs[1])
        if len(segs) == 3 and segs[0] == "accounts" and segs[2] == "transactions":
            return self.get_transactions(c, segs[1], query)
        raise err("not_found", "no such resource")

    def get_accounts(self, c, conn_id):
        with L:
            conn = CONNS.get(conn_id)
            if conn is None or conn.client is not c:
                raise err("not_found", "no such connection")
            if conn.status != "connected":
                if V == "accounts-cache-after-disconnect" and conn.cached_accounts is not None \
                        and conn.left_connected_at and time.monotonic() - conn.left_connected_at < 3.0:
                    return self.send(200, conn.cached_accounts)
                e = err("not_connected", "connection status is %s; accounts are available when CONNECTED"
                        % conn.status.upper())
                raise e
            out = [public_account(ACCOUNTS[a]) for a in conn.accounts]
        return self.send(200, out)

    def find_account(self, c, acc_id, check_owner=True):
        acc = ACCOUNTS.get(acc_id)
        if acc is None:
            raise err("not_found", "no such account")
        if check_owner and acc.client is not c:
            raise err("not_found", "no such account")
        if not acc.conn.ever_connected:
            raise err("not_found", "no such account")
        return acc

    def get_account(self, c, acc_id):
        with L:
            acc = self.find_account(c, acc_id)
            out = public_account(acc)
        return self.send(200, out)

    def get_transactions(self, c, acc_id, query):
        qs = parse_qs(query, keep_blank_values=True)
        with L:
            acc = self.find_account(c, acc_id, check_owner=(V != "txn-isolation-leak"))
            limit = DEFAULT_LIMIT
            if "limit" in qs:
                raw = qs["limit"][0].strip()
                try:
                    limit = int(raw)
                except ValueError:
                    raise err("bad_request", "limit must be a positive integer")
                if limit < 1:
                    raise err("bad_request", "limit must be a positive integer")
                if limit > MAX_LIMIT:
                    if V == "limit-reject":
                        raise err("bad_request", "limit must be at most %d" % MAX_LIMIT)
                    if V != "clamp-cursor-skip":
                        limit = MAX_LIMIT
            items = acc.txns
            desc = V != "oldest-first"
            start = 0
            if "starting_after" in qs:
                cur = qs["starting_after"][0]
                key = acc.keys.get(cur)
                if key is None:
                    raise err("bad_request", "starting_after is not a transaction of this account")
                if V == "cursor-offset-cache" and (acc.id, cur) in CURSOR_CACHE:
                    start = CURSOR_CACHE[(acc.id, cur)]
                    rest = items[start:]
                elif V == "cursor-date-only":
                    d = key[0]
                    rest = [t for t in items if t["_key"][0] < d]
                elif desc:
                    rest = [t for t in items if t["_key"] < key]
                else:
                    rest = [t for t in items if t["_key"] > key]
                if V != "cursor-offset-cache" or (acc.id, cur) not in CURSOR_CACHE:
                    start = len(items) - len(rest)
            else:
                rest = items
            if V == "clamp-cursor-skip":
                eff = min(limit, MAX_LIMIT)
                page = rest[:eff]
                has_more = len(rest) > limit
                nxt = rest[limit - 1]["id"] if has_more else None
            else:
                page = rest[:limit]
                has_more = len(rest) > limit
                if V == "last-item-dropped":
                    has_more = len(rest) > limit + 1
                nxt = page[-1]["id"] if has_more and page else None
            if V == "cursor-offset-cache" and nxt:
                CURSOR_CACHE[(acc.id, nxt)] = start + len(page)
            out = {"data": [public_txn(t) for t in page], "has_more": has_more}
            if nxt:
                out["next_cursor"] = nxt
        return self.send(200, out)


# ---------------------------------------------------------------- main
def main():
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    srv.daemon_threads = True
    srv.request_queue_size = 128
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    if V == "background-sync":
        threading.Thread(target=background_sync, daemon=True).start()
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    try:
        while True:
            chunk = sys.stdin.buffer.read(4096)
            if not chunk:
                break
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
