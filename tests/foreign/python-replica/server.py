#!/usr/bin/env python3
"""Bank Connection Aggregation Service: a test server written from the interface specification.

Python 3.11, standard library only.

    FOREIGN_API_KEYS="acme_live_...,acme_live_..." python3 server.py --port 0 --service acme \
        [--variant NAME] [--exit-on-stdin-eof]

Prints ``PORT n`` on stdout once it listens on 127.0.0.1. Every API key of FOREIGN_API_KEYS is one
client. The test hook the driver uses is ``POST /__admin/action`` (see driver.py). ``--variant``
switches on one of the deliberate deviations listed in VARIANTS.md (default ``none``).
"""

import argparse
import datetime
import heapq
import http.client
import json
import os
import random
import re
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------

VIOLATIONS = [
    "cursor-offset-drift",
    "has-more-on-exact-page",
    "cursor-leaks-sibling-account",
    "accounts-after-disconnect",
    "update-applied-late",
    "connected-before-accounts",
    "replica-flap",
    "connected-stamped-early",
    "created-at-future",
    "new-txn-prefix",
    "previous-status-upper",
    "event-id-mismatch",
    "no-verifying-event",
    "deleted-still-paged",
    "second-client-id-swap",
    "cross-client-transactions",
    "refused-create-leaks",
    "key-in-widget-session",
    "widget-no-cors",
]
LEGAL = [
    "ordering-oldest-first",
    "page-size-small",
    "limit-over-max-400",
    "ids-uuid-hex",
    "alt-error-codes",
    "deliveries-shuffled",
    "deliveries-duplicated",
    "deliveries-late",
    "coalesce-accounts-updated",
    "reconnect-after-disconnect",
    "cursor-on-last-page",
    "account-reads-need-connected",
    "extra-fields",
]
VARIANT = "none"


def V(name):
    return VARIANT == name


# --------------------------------------------------------------------------------------------
# Identifiers and time
# --------------------------------------------------------------------------------------------

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def opaque():
    if V("ids-uuid-hex"):
        return secrets.token_hex(16)
    return "".join(secrets.choice(CROCKFORD) for _ in range(26))


def new_id(prefix):
    return prefix + "_" + opaque()


def now_ms():
    return time.time_ns() // 1_000_000


def iso_ms(ms):
    dt = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ms % 1000)


def date_of(ms):
    return datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc).date()


FUTURE_SKEW_MS = 2 * 3600 * 1000  # variant created-at-future: local time (UTC+2) written as UTC


def record_ts(ms):
    """A record timestamp (account createdAt, lastSyncedAt, transaction createdAt) as written."""
    if V("created-at-future"):
        ms += FUTURE_SKEW_MS
    return iso_ms(ms)


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------

LOCK = threading.RLock()
CLIENTS = []            # list of Client, in FOREIGN_API_KEYS order
CLIENT_BY_KEY = {}
CONNECTIONS = {}        # id -> Connection
TOKENS = {}             # widget token -> Connection
ACCOUNTS = {}           # id -> Account
TXNS = {}               # id -> Txn (deleted ones kept as tombstones)
SERVICE = "acme"
WIDGET_TOKEN_TTL_MS = 60 * 60 * 1000
SEQ = [0]


def next_seq():
    SEQ[0] += 1
    return SEQ[0]


class Client:
    def __init__(self, key):
        self.key = key
        self.id = new_id("cli")
        self.webhook_url = None
        self.gen = 0
        self.deliverer = Deliverer(self)


class Connection:
    def __init__(self, client):
        self.id = new_id("conn")
        self.client = client
        self.status = "created"          # internal, lower case
        self.widget_token = new_id("sess")
        self.created_ms = now_ms()
        self.updated_ms = self.created_ms
        self.token_expires_ms = self.created_ms + WIDGET_TOKEN_TTL_MS
        self.accounts = []               # account ids, in creation order
        self.error = None
        self.last_event_ms = 0
        self.ever_connected = False
        self.read_connected_from_ms = 0  # variant connected-before-accounts
        self.lock = threading.Lock()     # one state change at a time

    def api_status(self, at_ms=None):
        if V("connected-before-accounts") and self.status == "connected":
            if (at_ms or now_ms()) < self.read_connected_from_ms:
                return "VERIFYING"
        return self.status.upper()


class Account:
    def __init__(self, conn, kind, name, currency, created_ms):
        self.id = new_id("acc")
        self.conn = conn
        self.type = kind
        self.name = name
        self.currency = currency
        self.created_ms = created_ms
        self.number = "%04d" % random.randint(0, 9999)
        self.versions = []   # (from_ms, dict) sorted by from_ms
        self.txns = []       # Txn, all, deleted included
        self.static = {}     # creditLimit, currencyBalances, positions

    def state(self, as_of):
        chosen = self.versions[0][1]
        for frm, st in self.versions:
            if frm <= as_of:
                chosen = st
        return chosen

    def latest(self):
        return self.versions[-1][1]


class Txn:
    def __init__(self, account, amount, description, category, tdate, created_ms, added_ms, prefix="txn"):
        self.id = new_id(prefix)
        self.account = account
        self.amount = round(amount, 2)
        self.currency = account.currency
        self.description = description
        self.category = category
        self.date = tdate                # datetime.date
        self.created_ms = created_ms
        self.added_ms = added_ms         # visible from (0: initial sync)
        self.deleted_ms = None
        self.seq = next_seq()

    def key(self):
        return (self.date.isoformat(), self.created_ms, self.seq)

    def visible(self, as_of, ignore_deleted=False):
        if self.added_ms > as_of:
            return False
        if ignore_deleted:
            return True
        return self.deleted_ms is None or self.deleted_ms > as_of


# --------------------------------------------------------------------------------------------
# Webhook delivery
# --------------------------------------------------------------------------------------------

MAX_ATTEMPTS = 14


def backoff(attempt):
    return min(0.5 * (2 ** (attempt - 1)), 15.0)


class Deliverer:
    """Per-client delivery: four shards, each a heap of (due, seq, item) worked by its own thread
    over a kept-alive HTTP connection. The clean server routes every event of one connection to
    the same shard, so that a connection's events leave in the order they happened; a failed
    attempt goes back on its shard's heap with a back-off and does not hold the others back."""

    SHARDS = 4

    def __init__(self, client):
        self.client = client
        self.shards = [Shard(self) for _ in range(self.SHARDS)]
        self.started = False
        self.lock = threading.Lock()

    def start(self):
        with self.lock:
            if self.started:
                return
            self.started = True
            for sh in self.shards:
                threading.Thread(target=sh.work, daemon=True).start()

    def push(self, item, delay=0.0):
        self.shards[item["shard"]].push(item, delay)

    def enqueue(self, event):
        url, gen = self.client.webhook_url, self.client.gen
        if not url:
            return
        body = json.dumps(event, separators=(",", ":")).encode()
        delay = 0.0
        if V("deliveries-shuffled"):
            shard = random.randrange(self.SHARDS)
            delay = random.uniform(0.0, 0.4)
        else:
            shard = hash(event["data"]["connectionId"]) % self.SHARDS
            if V("deliveries-late"):
                delay = 2.0
        item = {"url": url, "gen": gen, "body": body, "attempt": 1, "id": event["id"], "shard": shard}
        self.push(item, delay)
        if V("deliveries-duplicated"):
            self.push(dict(item, shard=(shard + 1) % self.SHARDS), delay + random.uniform(0.2, 0.8))


class Shard:
    def __init__(self, owner):
        self.owner = owner
        self.heap = []
        self.cv = threading.Condition()
        self.seq = 0
        self.conns = {}

    def push(self, item, delay):
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (time.monotonic() + delay, self.seq, item))
            self.cv.notify()

    def work(self):
        client = self.owner.client
        while True:
            with self.cv:
                while True:
                    if self.heap:
                        wait = self.heap[0][0] - time.monotonic()
                        if wait <= 0:
                            _, _, item = heapq.heappop(self.heap)
                            break
                        self.cv.wait(wait)
                    else:
                        self.cv.wait()
            if item["gen"] != client.gen:
                continue  # unregistered (or re-registered) since: stop delivering and retrying
            if self.post(item["url"], item["body"], item["id"]):
                continue
            if item["attempt"] >= MAX_ATTEMPTS:
                log("giving up delivery of %s after %d attempts" % (item["id"], item["attempt"]))
                continue
            delay = backoff(item["attempt"])
            self.push(dict(item, attempt=item["attempt"] + 1), delay)

    def post(self, url, body, event_id):
        u = urllib.parse.urlsplit(url)
        key = (u.scheme, u.hostname, u.port)
        path = (u.path or "/") + ("?" + u.query if u.query else "")
        headers = {"Content-Type": "application/json", "User-Agent": "bank-aggregation-webhooks/1.0",
                   "X-Event-Id": event_id}
        for fresh in (False, True):
            conn = None if fresh else self.conns.get(key)
            try:
                if conn is None:
                    if u.scheme == "https":
                        conn = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=5)
                    else:
                        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=5)
                    self.conns[key] = conn
                conn.request("POST", path, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                if resp.will_close:
                    conn.close()
                    self.conns.pop(key, None)
                return 200 <= resp.status < 300
            except Exception as exc:  # unreachable, reset, timeout
                try:
                    conn.close()
                except Exception:
                    pass
                self.conns.pop(key, None)
                if fresh:
                    log("delivery of %s failed: %s" % (event_id, exc))
                    return False
        return False


def log(msg):
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------

def stamp(conn):
    ms = max(now_ms(), conn.last_event_ms + 1)
    conn.last_event_ms = ms
    return ms


def emit(conn, etype, extra, occurred_ms=None):
    """Build an event for conn's client and queue its delivery. Called with the data committed."""
    ms = stamp(conn)
    occ = ms if occurred_ms is None else occurred_ms
    eid = new_id("evt")
    client_id = conn.client.id
    if V("second-client-id-swap") and len(CLIENTS) > 1 and conn.client is CLIENTS[1]:
        client_id = CLIENTS[0].id
    data = {
        "eventId": eid,
        "type": etype,
        "occurredAt": iso_ms(occ),
        "clientId": client_id,
        "connectionId": conn.id,
    }
    if V("event-id-mismatch") and not etype.startswith("connection."):
        data["eventId"] = new_id("evt")
    data.update(extra)
    if V("extra-fields"):
        data["status"] = conn.status
    event = {"id": eid, "type": etype, "created_at": iso_ms(ms), "data": data}
    if V("extra-fields"):
        event["api_version"] = "v1"
    conn.client.deliverer.enqueue(event)
    return event


def set_status(conn, new, error=None, occurred_ms=None):
    prev = conn.status
    conn.status = new
    conn.error = error
    conn.updated_ms = now_ms()
    if V("no-verifying-event") and new == "verifying":
        return
    prev_out = prev.upper() if V("previous-status-upper") else prev
    emit(conn, "connection." + new, {"previousStatus": prev_out, "error": error}, occurred_ms)


ERRORS = {
    "failed_auth": {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    "mfa_required": {"code": "mfa_required", "message": "The bank asks for a second factor."},
    "error": {"code": "provider_unavailable", "message": "Unexpected error while talking to the bank."},
}


# --------------------------------------------------------------------------------------------
# Bank data
# --------------------------------------------------------------------------------------------

INSTITUTION = {"id": "ins_demo_bank", "name": "Demo Bank", "logo": None}

DEBITS = [
    ("REWE Markt Berlin", "groceries"), ("Lidl", "groceries"), ("BVG Ticket", "transport"),
    ("Deutsche Bahn", "transport"), ("Stadtwerke Strom", "utilities"), ("Amazon Marketplace", "shopping"),
    ("Pizzeria Roma", "restaurants"), ("Cafe Einstein", "restaurants"), ("Telekom Mobilfunk", "utilities"),
    ("Zalando", "shopping"), ("Account fee", "fees"), ("Shell Tankstelle", "transport"),
]
CREDITS = [("Salary ACME GmbH", "income"), ("Refund Amazon", "income"), ("Interest", "interest")]

PLAN = [
    # type, name, currency, number of transactions
    ("checking", "Everyday Checking", "EUR", 130),
    ("savings", "Rainy Day Savings", "EUR", 8),
    ("credit_card", "Platinum Card", "EUR", 27),
    ("brokerage", "Investment Depot", "EUR", 4),
    ("pension", "Pension Plan", "EUR", 1),
]


def generate_accounts(conn):
    created = max(now_ms(), conn.last_event_ms)
    rnd = random.Random()
    today = date_of(created)
    for kind, name, currency, n in PLAN:
        acc = Account(conn, kind, name, currency, created)
        if kind == "credit_card":
            limit = 3000.0
            balance = -round(rnd.uniform(200, 900), 2)
            acc.static["creditLimit"] = {"amount": limit, "currency": currency}
            acc.static["currencyBalances"] = [
                {"currency": "USD", "balance": -round(rnd.uniform(10, 90), 2)},
                {"currency": "GBP", "balance": -round(rnd.uniform(5, 40), 2)},
            ]
            available = round(limit + balance, 2)
        elif kind in ("brokerage", "pension"):
            positions = []
            for sym, pname, qty, price in (("VWRL", "Vanguard FTSE All-World", 31.0, 118.42),
                                           ("EUNL", "iShares Core MSCI World", 12.5, 96.10)):
                if kind == "pension" and sym == "EUNL":
                    continue
                positions.append({"symbol": sym, "name": pname, "quantity": qty, "price": price,
                                  "marketValue": round(qty * price, 2), "currency": currency})
            acc.static["positions"] = positions
            balance = round(sum(p["marketValue"] for p in positions) + rnd.uniform(10, 300), 2)
            available = balance
        else:
            balance = round(rnd.uniform(500, 6000), 2)
            available = balance
        acc.versions.append((0, {"balance": balance, "availableBalance": available, "lastSyncedAt": created}))
        for i in range(n):
            tdate = today - datetime.timedelta(days=(i * 3) // 2 + 1)
            if kind in ("brokerage", "pension"):
                desc, cat, amount = "Savings plan %s" % ("VWRL" if i % 2 == 0 else "EUNL"), "investment", -round(rnd.uniform(50, 300), 2)
            elif kind == "savings":
                if i % 3 == 2:
                    desc, cat, amount = "Interest", "interest", round(rnd.uniform(0.5, 9), 2)
                else:
                    desc, cat, amount = "Transfer from checking", "transfer", round(rnd.uniform(50, 400), 2)
            elif i % 9 == 4 and kind == "checking":
                desc, cat = CREDITS[0]
                amount = round(rnd.uniform(2200, 3400), 2)
            elif i % 11 == 7:
                desc, cat = CREDITS[1]
                amount = round(rnd.uniform(5, 60), 2)
            else:
                desc, cat = DEBITS[rnd.randrange(len(DEBITS))]
                amount = -round(rnd.uniform(2, 180), 2)
            acc.txns.append(Txn(acc, amount, desc, cat, tdate, created, 0))
        ACCOUNTS[acc.id] = acc
        for t in acc.txns:
            TXNS[t.id] = t
        conn.accounts.append(acc.id)


def account_json(acc, as_of):
    st = acc.state(as_of)
    out = {
        "id": acc.id,
        "connectionId": acc.conn.id,
        "name": acc.name,
        "type": acc.type,
        "currency": acc.currency,
        "balance": st["balance"],
        "availableBalance": st["availableBalance"],
        "accountNumber": "****" + acc.number,
        "createdAt": record_ts(acc.created_ms),
        "lastSyncedAt": record_ts(st["lastSyncedAt"]),
        "institution": dict(INSTITUTION),
    }
    for k, v in acc.static.items():
        out[k] = json.loads(json.dumps(v))
    if V("extra-fields"):
        out["status"] = "active"
        out["holderName"] = "Demo User"
    return out


def txn_json(t):
    out = {
        "id": t.id,
        "accountId": t.account.id,
        "amount": t.amount,
        "currency": t.currency,
        "description": t.description,
        "transactionDate": t.date.isoformat(),
        "category": t.category,
        "status": "posted",
        "createdAt": record_ts(t.created_ms),
    }
    if V("extra-fields"):
        out["valueDate"] = t.date.isoformat()
        out["merchantName"] = t.description.split(" ")[0]
    return out


def read_as_of():
    """The instant a read sees. The replica of variant replica-flap lags 3 s behind."""
    now = now_ms()
    if V("replica-flap") and random.random() < 0.5:
        return now - 3000
    return now


# --------------------------------------------------------------------------------------------
# Actions (test hooks)
# --------------------------------------------------------------------------------------------

class Refused(Exception):
    pass


class NotFound(Exception):
    pass


def auth_flow(conn, target):
    """The user's part in the widget: credentials submitted, verified, and the outcome."""
    t0 = now_ms()
    s = conn.status
    if s in ("created", "failed_auth", "error"):
        steps = ["credentials_submitted", "verifying"]
    elif s == "mfa_required":
        steps = ["verifying"]          # the second factor is checked
    elif s == "disconnected" and target == "connected" and V("reconnect-after-disconnect"):
        steps = ["credentials_submitted", "verifying"]
    else:
        raise Refused("cannot move a connection from %s to %s" % (s.upper(), target.upper()))
    for st in steps:
        set_status(conn, st)
    if target == "connected":
        if not conn.accounts:
            generate_accounts(conn)
        else:
            t = max(now_ms(), conn.last_event_ms)
            for aid in conn.accounts:
                acc = ACCOUNTS[aid]
                acc.versions.append((t, dict(acc.latest(), lastSyncedAt=t)))
        conn.ever_connected = True
        set_status(conn, "connected", None, occurred_ms=t0 if V("connected-stamped-early") else None)
        if V("connected-before-accounts"):
            conn.read_connected_from_ms = now_ms() + 2000
    else:
        set_status(conn, target, dict(ERRORS[target]))


def do_error(conn):
    if conn.status in ("error", "disconnected"):
        raise Refused("connection is %s" % conn.status.upper())
    set_status(conn, "error", dict(ERRORS["error"]))


def do_disconnect(conn):
    if conn.status == "disconnected":
        raise Refused("connection is already DISCONNECTED")
    set_status(conn, "disconnected", None)


PENDING_UPDATES = {}  # variant coalesce-accounts-updated: account id -> last change ms


def do_update(conn, account_id):
    if conn.status != "connected":
        raise Refused("accounts can change only while CONNECTED (now %s)" % conn.status.upper())
    if account_id:
        acc = ACCOUNTS.get(account_id)
        if acc is None or acc.conn is not conn:
            raise NotFound("account %s is not an account of this connection" % account_id)
    else:
        acc = ACCOUNTS[conn.accounts[0]]
    t = max(now_ms(), conn.last_event_ms)
    effective = t + 2500 if V("update-applied-late") else t
    rnd = random.Random()
    today = date_of(t)
    new = []
    desc, cat = DEBITS[rnd.randrange(len(DEBITS))]
    prefix = "tx" if V("new-txn-prefix") else "txn"
    new.append(Txn(acc, -round(rnd.uniform(3, 120), 2), desc, cat, today, t, effective, prefix))
    if rnd.random() < 0.5:
        new.append(Txn(acc, round(rnd.uniform(5, 80), 2), CREDITS[1][0], CREDITS[1][1], today, t, effective, prefix))
    delta = round(sum(x.amount for x in new), 2)
    cur = acc.latest()
    bal = round(cur["balance"] + delta, 2)
    if acc.type == "credit_card":
        avail = round(acc.static["creditLimit"]["amount"] + bal, 2)
    else:
        avail = bal
    acc.versions.append((effective, {"balance": bal, "availableBalance": avail, "lastSyncedAt": t}))
    acc.versions.sort(key=lambda v: v[0])
    for x in new:
        acc.txns.append(x)
        TXNS[x.id] = x
    if V("coalesce-accounts-updated"):
        first = acc.id not in PENDING_UPDATES
        PENDING_UPDATES[acc.id] = t
        if first:
            def flush(acc=acc, conn=conn):
                with conn.lock, LOCK:
                    last = PENDING_UPDATES.pop(acc.id, None)
                    emit(conn, "accounts.updated", {"accountId": acc.id}, occurred_ms=last)
            threading.Timer(0.6, flush).start()
        return {"accountId": acc.id}
    emit(conn, "accounts.updated", {"accountId": acc.id})
    return {"accountId": acc.id}


def do_delete(conn, account_id, txn_id):
    if conn.status != "connected":
        raise Refused("transactions can change only while CONNECTED (now %s)" % conn.status.upper())
    now = now_ms()
    if txn_id:
        t = TXNS.get(txn_id)
        if t is None or t.account.conn is not conn:
            raise NotFound("transaction %s is not a transaction of this connection" % txn_id)
        if t.deleted_ms is not None:
            raise Refused("transaction already deleted")
    else:
        cands = [ACCOUNTS[account_id]] if account_id in ACCOUNTS and ACCOUNTS[account_id].conn is conn \
            else [ACCOUNTS[a] for a in conn.accounts]
        if account_id and (account_id not in ACCOUNTS or ACCOUNTS[account_id].conn is not conn):
            raise NotFound("account %s is not an account of this connection" % account_id)
        t = None
        for acc in cands:
            live = sorted([x for x in acc.txns if x.visible(now)], key=lambda x: x.key(), reverse=True)
            if live:
                t = live[len(live) // 2]
                break
        if t is None:
            raise Refused("no transaction left to delete")
    t.deleted_ms = now + 2500 if V("update-applied-late") else max(now, conn.last_event_ms)
    emit(conn, "transaction.deleted", {"accountId": t.account.id, "transactionId": t.id})
    return {"accountId": t.account.id, "transactionId": t.id}


def admin_action(body):
    action = body.get("action")
    if action == "register_webhook":
        with LOCK:
            done = []
            for kf, uf in (("apiKey", "webhookUrl"), ("secondApiKey", "secondWebhookUrl")):
                key, url = body.get(kf), body.get(uf)
                if not key or not url:
                    continue
                client = CLIENT_BY_KEY.get(key)
                if client is None:
                    return 400, {"error": "unknown API key in %s" % kf}
                client.gen += 1
                client.webhook_url = url
                client.deliverer.start()
                done.append(client.id)
            if not done:
                return 400, {"error": "no key and address to register"}
        return 200, {"ok": True, "stdout": "webhooks=per-client"}
    if action == "unregister_webhook":
        with LOCK:
            keys = [k for k in (body.get("apiKey"), body.get("secondApiKey")) if k]
            targets = [CLIENT_BY_KEY[k] for k in keys if k in CLIENT_BY_KEY] or list(CLIENTS)
            for c in targets:
                c.gen += 1
                c.webhook_url = None
        return 200, {"ok": True}
    if action not in ("connect", "fail_auth", "require_mfa", "error", "disconnect",
                      "update_accounts", "delete_transaction"):
        return 501, {"error": "unsupported action %r" % action}
    with LOCK:
        conn = CONNECTIONS.get(body.get("connectionId") or "")
        if conn is None and body.get("widgetToken"):
            conn = TOKENS.get(body["widgetToken"])
        if conn is None and body.get("accountId") in ACCOUNTS:
            conn = ACCOUNTS[body["accountId"]].conn
        if conn is None and body.get("transactionId") in TXNS:
            conn = TXNS[body["transactionId"]].account.conn
    if conn is None:
        return 404, {"error": "no such connection"}
    with conn.lock, LOCK:
        try:
            result = {}
            if action == "connect":
                auth_flow(conn, "connected")
            elif action == "fail_auth":
                auth_flow(conn, "failed_auth")
            elif action == "require_mfa":
                auth_flow(conn, "mfa_required")
            elif action == "error":
                do_error(conn)
            elif action == "disconnect":
                do_disconnect(conn)
            elif action == "update_accounts":
                result = do_update(conn, body.get("accountId"))
            elif action == "delete_transaction":
                result = do_delete(conn, body.get("accountId"), body.get("transactionId"))
            return 200, dict(result, ok=True, status=conn.status.upper())
        except Refused as exc:
            return 409, {"error": str(exc), "status": conn.status.upper()}
        except NotFound as exc:
            return 404, {"error": str(exc)}


# --------------------------------------------------------------------------------------------
# Widget
# --------------------------------------------------------------------------------------------

WIDGET_JS = r"""/* __SERVICE__ Connect widget v1.0. Opens the bank connection flow for one connection.
 * Usage: __GLOBAL__.open({ token: widgetToken, connectionId: connectionId, onSuccess: function (meta) {} })
 * The widget talks to the service with the widget token only. */
(function (root) {
  'use strict';
  if (root.__GLOBAL__ && typeof root.__GLOBAL__.open === 'function') { return; }
  var doc = root.document;
  var script = doc && doc.currentScript;
  function findBase() {
    var src = script && script.src;
    if (!src && doc) {
      var all = doc.getElementsByTagName('script');
      for (var i = all.length - 1; i >= 0; i--) {
        if (/\/widget\/[^\/?#]+-connect\.js/.test(all[i].src || '')) { src = all[i].src; break; }
      }
    }
    if (!src) { return root.location ? root.location.origin : ''; }
    var at = src.indexOf('/widget/');
    return at >= 0 ? src.slice(0, at) : src;
  }
  var BASE = findBase();
  var POLL_MS = 600;
  var MAX_MS = 30 * 60 * 1000;

  function call(path, payload) {
    return root.fetch(BASE + '/widget/api/' + path, {
      method: 'POST', mode: 'cors', credentials: 'omit', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(payload)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (body) {
        if (!res.ok) {
          var err = new Error((body && body.error && body.error.message) || ('HTTP ' + res.status));
          err.status = res.status;
          throw err;
        }
        return body;
      });
    });
  }

  function el(tag, attrs, text) {
    var e = doc.createElement(tag);
    for (var k in (attrs || {})) { e.setAttribute(k, attrs[k]); }
    if (text) { e.textContent = text; }
    return e;
  }

  function buildUi(handle, submit, submitMfa) {
    if (!doc || !doc.body) { return null; }
    var overlay = el('div', { 'data-widget': '__SERVICE__-connect', role: 'dialog', 'aria-label': 'Connect your bank' });
    overlay.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;align-items:center;justify-content:center;z-index:2147483647;font-family:sans-serif';
    var box = el('div');
    box.style.cssText = 'background:#fff;border-radius:8px;padding:24px;min-width:280px;box-shadow:0 8px 30px rgba(0,0,0,.3)';
    var title = el('h2', null, 'Connect your bank');
    title.style.cssText = 'margin:0 0 12px;font-size:18px';
    var status = el('p', { 'data-role': 'status' }, 'Loading...');
    var form = el('form');
    var user = el('input', { name: 'username', placeholder: 'Online banking user', autocomplete: 'username' });
    var pass = el('input', { name: 'password', type: 'password', placeholder: 'PIN', autocomplete: 'current-password' });
    var go = el('button', { type: 'submit' }, 'Connect');
    [user, pass, go].forEach(function (x) { x.style.cssText = 'display:block;margin:6px 0;width:100%;box-sizing:border-box'; form.appendChild(x); });
    form.addEventListener('submit', function (ev) { ev.preventDefault(); submit(user.value, pass.value); });
    var mfa = el('form');
    var code = el('input', { name: 'code', placeholder: 'Code from your bank app', inputmode: 'numeric' });
    var send = el('button', { type: 'submit' }, 'Confirm');
    mfa.appendChild(code); mfa.appendChild(send); mfa.style.display = 'none';
    mfa.addEventListener('submit', function (ev) { ev.preventDefault(); submitMfa(code.value); });
    var cancel = el('button', { type: 'button' }, 'Close');
    cancel.addEventListener('click', function () { handle.close(); });
    box.appendChild(title); box.appendChild(status); box.appendChild(form); box.appendChild(mfa); box.appendChild(cancel);
    overlay.appendChild(box);
    doc.body.appendChild(overlay);
    return {
      overlay: overlay,
      show: function (text, st) {
        status.textContent = text;
        form.style.display = (st === 'CREATED' || st === 'FAILED_AUTH' || st === 'ERROR') ? 'block' : 'none';
        mfa.style.display = st === 'MFA_REQUIRED' ? 'block' : 'none';
      }
    };
  }

  var MESSAGES = {
    CREATED: 'Sign in with your online banking credentials.',
    CREDENTIALS_SUBMITTED: 'Credentials sent...',
    VERIFYING: 'Checking your credentials with the bank...',
    CONNECTED: 'Connected.',
    MFA_REQUIRED: 'Your bank asks for a second factor.',
    FAILED_AUTH: 'The bank did not accept these credentials. Try again.',
    ERROR: 'Something went wrong. Try again.',
    DISCONNECTED: 'This connection was disconnected.'
  };

  function open(options, connectionId, onSuccess) {
    var opts = options;
    if (typeof options === 'string') { opts = { token: options, connectionId: connectionId, onSuccess: onSuccess }; }
    opts = opts || {};
    var token = opts.token || opts.widgetToken;
    if (typeof token !== 'string' || token.indexOf('sess_') !== 0) {
      throw new TypeError('__GLOBAL__.open: a widget token (sess_...) is required');
    }
    var connId = opts.connectionId;
    var done = false, closed = false, timer = null, started = Date.now(), ui = null, last = null;
    var handle = {
      close: function () {
        closed = true;
        if (timer) { clearTimeout(timer); }
        if (ui && ui.overlay && ui.overlay.parentNode) { ui.overlay.parentNode.removeChild(ui.overlay); }
        if (typeof opts.onExit === 'function') { try { opts.onExit({ connectionId: connId, status: last }); } catch (e) { } }
      }
    };
    function fail(err) {
      if (ui) { ui.show(err.message || String(err), last); }
      if (typeof opts.onError === 'function') { try { opts.onError({ message: err.message, status: err.status }); } catch (e) { } }
    }
    function finish(session) {
      if (done) { return; }
      done = true;
      if (ui && ui.overlay && ui.overlay.parentNode) { ui.overlay.parentNode.removeChild(ui.overlay); }
      var meta = { connectionId: session.connectionId, status: session.status, institution: session.institution, accountCount: session.accountCount };
      if (typeof opts.onSuccess === 'function') {
        try { opts.onSuccess(meta); } catch (e) { if (root.console) { root.console.error(e); } }
      }
    }
    function poll() {
      timer = null;
      if (closed || done) { return; }
      call('session', { token: token, connectionId: connId }).then(function (session) {
        last = session.status;
        if (!connId) { connId = session.connectionId; }
        if (ui) { ui.show(MESSAGES[session.status] || session.status, session.status); }
        if (session.status === 'CONNECTED') { finish(session); return; }
        if (session.status === 'DISCONNECTED') { return; }
        schedule();
      }, function (err) {
        fail(err);
        if (err.status === 401 || err.status === 404 || err.status === 400) { return; }
        schedule();
      });
    }
    function schedule() {
      if (closed || done || Date.now() - started > MAX_MS) { return; }
      timer = setTimeout(poll, POLL_MS);
    }
    function submit(username, password) {
      call('credentials', { token: token, connectionId: connId, username: username, password: password })
        .then(function () { if (!timer && !done) { poll(); } }, fail);
    }
    function submitMfa(code) {
      call('mfa', { token: token, connectionId: connId, code: code })
        .then(function () { if (!timer && !done) { poll(); } }, fail);
    }
    function mount() { if (!closed && !ui) { ui = buildUi(handle, submit, submitMfa); } }
    if (doc && doc.body) { mount(); } else if (doc) { doc.addEventListener('DOMContentLoaded', mount); }
    poll();
    return handle;
  }

  root.__GLOBAL__ = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
"""


def global_name(service):
    parts = re.split(r"[^A-Za-z0-9]+", service)
    name = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Bank"
    if name[0].isdigit():
        name = "W" + name
    return name + "Connect"


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

CURSOR_OFFSETS = {}  # variant cursor-offset-drift: (account id, txn id) -> offset at issue time

LIMIT_RE = re.compile(r"^[0-9]{1,12}$")


def limits():
    if V("page-size-small"):
        return 10, 50
    return 25, 100


def err_body(http_status, code, message, **extra):
    if V("alt-error-codes"):
        body = {"message": message, "code": code}
    else:
        body = {"error": dict({"code": code, "message": message}, **extra)}
    return http_status, body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAggregation/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # ---- plumbing -------------------------------------------------------------------------

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    break
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    break
                if size == 0:
                    while True:
                        trailer = self.rfile.readline(65537)
                        if trailer in (b"\r\n", b"\n", b""):
                            break
                    break
                data = self.rfile.read(size)
                self.rfile.readline(3)
                total += len(data)
                if total <= 1 << 20:
                    chunks.append(data)
            return b"".join(chunks)
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = 0
        if n <= 0:
            return b""
        data = self.rfile.read(min(n, 8 << 20))
        return data

    def send(self, status, body=None, headers=None, ctype="application/json; charset=utf-8"):
        if isinstance(body, (dict, list)):
            data = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            data = body.encode()
        elif body is None:
            data = b""
        else:
            data = body
        self.send_response(status)
        if data or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)

    def send_err(self, http_status, code, message, headers=None, **extra):
        st, body = err_body(http_status, code, message, **extra)
        self.send(st, body, headers)

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_OPTIONS(self):
        self.dispatch("OPTIONS")

    def dispatch(self, method):
        try:
            body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            u = urllib.parse.urlsplit(self.path)
            path = u.path
            query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
            if path.startswith("/widget/"):
                return self.widget(method, path, body)
            if path == "/__admin/action":
                return self.admin(method, body)
            segs = [urllib.parse.unquote(s) for s in path.split("/")[1:]]
            if segs and segs[0] == "v1":
                return self.api(method, segs, query)
            if path in ("/", "/health") and method in ("GET", "HEAD"):
                return self.send(200, {"status": "ok"})
            return self.send_err(404, "not_found", "No such route.")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # never leave a request unanswered
            log("error handling %s %s: %r" % (method, self.path, exc))
            try:
                self.send_err(500, "internal_error", "Internal error.")
            except Exception:
                self.close_connection = True

    # ---- admin (test hooks) ---------------------------------------------------------------

    def admin(self, method, body):
        if method != "POST":
            return self.send(405, {"error": "POST only"}, {"Allow": "POST"})
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("not an object")
        except ValueError:
            return self.send(400, {"error": "body must be a JSON object"})
        status, out = admin_action(payload)
        return self.send(status, out)

    # ---- widget ---------------------------------------------------------------------------

    def cors(self):
        if V("widget-no-cors"):
            return {}
        return {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": "600",
        }

    def widget(self, method, path, body):
        script_path = "/widget/%s-connect.js" % SERVICE
        cors = {"Access-Control-Allow-Origin": "*", "Cross-Origin-Resource-Policy": "cross-origin"}
        if path == script_path:
            if method == "OPTIONS":
                return self.send(204, None, dict(cors, **{"Access-Control-Allow-Methods": "GET, OPTIONS",
                                                          "Access-Control-Allow-Headers": "Content-Type"}))
            if method not in ("GET", "HEAD"):
                return self.send(405, {"error": {"code": "method_not_allowed", "message": "GET only"}},
                                 dict(cors, Allow="GET, HEAD"))
            js = WIDGET_JS.replace("__GLOBAL__", global_name(SERVICE)).replace("__SERVICE__", SERVICE)
            return self.send(200, js, cors, "application/javascript; charset=utf-8")
        if not path.startswith("/widget/api/"):
            return self.send(404, {"error": {"code": "not_found", "message": "No such widget resource."}}, cors)
        if method == "OPTIONS":
            if V("widget-no-cors"):
                return self.send(405, {"error": {"code": "method_not_allowed", "message": "POST only"}})
            return self.send(204, None, self.cors())
        if method != "POST":
            return self.send(405, {"error": {"code": "method_not_allowed", "message": "POST only"}}, self.cors())
        op = path[len("/widget/api/"):]
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError()
        except ValueError:
            return self.send(400, {"error": {"code": "invalid_body", "message": "JSON object expected."}}, self.cors())
        token = payload.get("token")
        with LOCK:
            conn = TOKENS.get(token) if isinstance(token, str) else None
            if conn is None or now_ms() > conn.token_expires_ms:
                return self.send(401, {"error": {"code": "invalid_widget_token",
                                                 "message": "The widget token is unknown or expired."}}, self.cors())
            if payload.get("connectionId") and payload["connectionId"] != conn.id:
                return self.send(400, {"error": {"code": "connection_mismatch",
                                                 "message": "The token belongs to another connection."}}, self.cors())
        if op == "session":
            pass
        elif op in ("credentials", "mfa"):
            with conn.lock, LOCK:
                try:
                    if op == "credentials":
                        pw = str(payload.get("password") or "")
                        target = {"wrong": "failed_auth", "mfa": "mfa_required"}.get(pw, "connected")
                        if conn.status not in ("created", "failed_auth", "error"):
                            raise Refused("credentials are not expected now")
                        auth_flow(conn, target)
                    else:
                        if conn.status != "mfa_required":
                            raise Refused("no second factor is expected now")
                        auth_flow(conn, "connected" if str(payload.get("code") or "") != "000000" else "failed_auth")
                except Refused as exc:
                    return self.send(409, {"error": {"code": "invalid_state", "message": str(exc)}}, self.cors())
        else:
            return self.send(404, {"error": {"code": "not_found", "message": "No such widget operation."}}, self.cors())
        with LOCK:
            out = {
                "connectionId": conn.id,
                "status": conn.api_status(),
                "institution": {"id": INSTITUTION["id"], "name": INSTITUTION["name"]},
                "accountCount": len(conn.accounts) if conn.status == "connected" else 0,
                "expiresAt": iso_ms(conn.token_expires_ms),
            }
            if V("key-in-widget-session"):
                # the whole connection record serialised, owner included
                out["client"] = {"id": conn.client.id, "apiKey": conn.client.key}
        return self.send(200, out, self.cors())

    # ---- API --------------------------------------------------------------------------------

    def authenticate(self):
        auth = self.headers.get("Authorization")
        if not auth:
            return None, "missing_api_key"
        m = re.match(r"^\s*Bearer\s+(\S+)\s*$", auth, re.IGNORECASE)
        if not m:
            return None, "invalid_authorization"
        client = CLIENT_BY_KEY.get(m.group(1))
        if client is None:
            return None, "invalid_api_key"
        return client, None

    def api(self, method, segs, query):
        client, why = self.authenticate()
        if client is None:
            if (V("refused-create-leaks") and method == "POST" and segs == ["v1", "connections"]
                    and why == "invalid_api_key"):
                # bug: the creation ran before the key check, for the default client
                with LOCK:
                    self.create_connection(CLIENTS[0])
            status = 403 if V("alt-error-codes") else 401
            msg = {"missing_api_key": "An API key is required (Authorization: Bearer <API_KEY>).",
                   "invalid_authorization": "The Authorization header must be 'Bearer <API_KEY>'.",
                   "invalid_api_key": "The API key is not valid."}[why]
            return self.send_err(status, why, msg, {"WWW-Authenticate": 'Bearer realm="api"'})
        n = len(segs)
        if n == 2 and segs[1] == "connections":
            if method != "POST":
                return self.send_err(405, "method_not_allowed", "Use POST to create a connection.", {"Allow": "POST"})
            with LOCK:
                conn = self.create_connection(client)
                out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.widget_token}
            return self.send(200 if V("alt-error-codes") else 201, out)
        if n in (3, 4) and segs[1] == "connections":
            if method not in ("GET", "HEAD"):
                return self.send_err(405, "method_not_allowed", "Use GET.", {"Allow": "GET, HEAD"})
            with LOCK:
                conn = CONNECTIONS.get(segs[2])
                if conn is None or conn.client is not client:
                    return self.send_err(404, "connection_not_found", "No such connection.")
                if n == 3:
                    return self.send(200, {"connectionId": conn.id, "status": conn.api_status(),
                                           "createdAt": iso_ms(conn.created_ms),
                                           "updatedAt": iso_ms(conn.updated_ms), "error": conn.error})
                if segs[3] != "accounts":
                    return self.send_err(404, "not_found", "No such route.")
                status = conn.api_status()
                allowed = status == "CONNECTED"
                if V("accounts-after-disconnect") and conn.ever_connected:
                    allowed = True  # bug: checks that accounts exist, not the status
                if not allowed:
                    code = 422 if V("alt-error-codes") else 409
                    return self.send_err(code, "connection_not_connected",
                                         "Accounts are available only when the connection is CONNECTED.",
                                         status=status)
                as_of = read_as_of()
                out = [account_json(ACCOUNTS[a], as_of) for a in conn.accounts]
            return self.send(200, out)
        if n in (3, 4) and segs[1] == "accounts":
            if method not in ("GET", "HEAD"):
                return self.send_err(405, "method_not_allowed", "Use GET.", {"Allow": "GET, HEAD"})
            if n == 4 and segs[3] != "transactions":
                return self.send_err(404, "not_found", "No such route.")
            with LOCK:
                acc = ACCOUNTS.get(segs[2])
                owner_ok = acc is not None and acc.conn.client is client
                if acc is not None and not owner_ok and n == 4 and V("cross-client-transactions"):
                    owner_ok = True  # bug: the transactions route forgets the owner check
                if not owner_ok:
                    return self.send_err(404, "account_not_found", "No such account.")
                if V("account-reads-need-connected") and acc.conn.status != "connected":
                    return self.send_err(409, "connection_not_connected",
                                         "Account data is available only while the connection is CONNECTED.",
                                         status=acc.conn.api_status())
                if n == 3:
                    return self.send(200, account_json(acc, read_as_of()))
                return self.transactions(acc, query)
        return self.send_err(404, "not_found", "No such route.")

    def create_connection(self, client):
        conn = Connection(client)
        CONNECTIONS[conn.id] = conn
        TOKENS[conn.widget_token] = conn
        emit(conn, "connection.created", {"previousStatus": "NONE" if V("previous-status-upper") else "none",
                                          "error": None})
        return conn

    def transactions(self, acc, query):
        default, maximum = limits()
        raw = query.get("limit", [None])[0]
        if raw is None or raw == "":
            limit = default
        else:
            if not LIMIT_RE.match(raw) or int(raw) < 1:
                return self.send_err(422 if V("alt-error-codes") else 400, "invalid_limit",
                                     "limit must be a whole number of at least 1.")
            limit = int(raw)
            if limit > maximum:
                if V("limit-over-max-400"):
                    return self.send_err(400, "invalid_limit", "limit must be at most %d." % maximum)
                limit = maximum
        cursor = query.get("starting_after", [None])[0] or None
        as_of = read_as_of()
        paged = cursor is not None
        pool = acc.txns
        if paged and V("cursor-leaks-sibling-account"):
            pool = [t for a in acc.conn.accounts for t in ACCOUNTS[a].txns]  # bug: filter by connection
        ignore_deleted = paged and V("deleted-still-paged")
        visible = [t for t in pool if t.visible(as_of, ignore_deleted)]
        desc = not V("ordering-oldest-first")
        visible.sort(key=lambda t: t.key(), reverse=desc)
        if paged:
            cur = TXNS.get(cursor)
            if cur is None or cur.account is not acc:
                return self.send_err(404 if V("alt-error-codes") else 400, "invalid_cursor",
                                     "starting_after is not a transaction of this account.")
            if V("cursor-offset-drift") and (acc.id, cursor) in CURSOR_OFFSETS:
                items = visible[CURSOR_OFFSETS[(acc.id, cursor)]:]
                start = CURSOR_OFFSETS[(acc.id, cursor)]
            else:
                ck = cur.key()
                items = [t for t in visible if (t.key() < ck if desc else t.key() > ck)]
                start = len(visible) - len(items)
        else:
            items = visible
            start = 0
        page = items[:limit]
        has_more = len(items) > limit
        if V("has-more-on-exact-page"):
            has_more = len(page) == limit
        out = {"data": [txn_json(t) for t in page], "has_more": has_more}
        if page and (has_more or V("cursor-on-last-page")):
            out["next_cursor"] = page[-1].id
            if V("cursor-offset-drift"):
                CURSOR_OFFSETS[(acc.id, page[-1].id)] = start + len(page)
        return self.send(200, out)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    global VARIANT, SERVICE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    ap.add_argument("--list-variants", action="store_true")
    args = ap.parse_args()
    if args.list_variants:
        for v in VIOLATIONS:
            print("violation", v)
        for v in LEGAL:
            print("legal", v)
        return
    if args.variant != "none" and args.variant not in VIOLATIONS + LEGAL:
        sys.stderr.write("unknown variant %r\n" % args.variant)
        sys.exit(2)
    VARIANT = args.variant
    SERVICE = args.service
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        sys.stderr.write("FOREIGN_API_KEYS is empty: give at least one API key\n")
        sys.exit(2)
    for k in keys:
        if not k.startswith(SERVICE + "_"):
            sys.stderr.write("warning: an API key does not start with %s_\n" % SERVICE)
        if k in CLIENT_BY_KEY:
            continue
        c = Client(k)
        CLIENTS.append(c)
        CLIENT_BY_KEY[k] = c
    httpd = Server(("127.0.0.1", args.port), Handler)
    print("PORT %d" % httpd.server_address[1], flush=True)
    if args.exit_on_stdin_eof:
        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
