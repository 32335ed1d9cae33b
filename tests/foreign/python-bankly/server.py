#!/usr/bin/env python3
"""Bank Connection Aggregation Service: a server written from the interface specification alone.

Standard library only.  Usage:

    FOREIGN_API_KEYS="k1,k2" python3 server.py --port 0 --variant plain --service bankly

Prints the API base URL on stdout line 1 and the admin URL on line 2, then serves until its
standard input closes.  The choices made where the specification is silent, and what every
variant changes, are written down in VARIANTS.md.
"""

import argparse
import base64
import collections
import copy
import datetime
import hashlib
import hmac
import json
import os
import random
import re
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

VIOLATIONS = [
    "status-lowercase",
    "token-prefix",
    "prev-status-upper",
    "chain-skips-verifying",
    "event-id-mismatch",
    "no-millis",
    "future-timestamps",
    "cross-client-read",
    "webhook-broadcast",
    "shared-client-id",
    "unauth-create-effect",
    "accounts-after-disconnect",
    "accounts-all-connections",
    "connected-before-ready",
    "silent-disconnect",
    "deleted-still-listed",
    "stale-account-get",
    "update-wrong-account",
    "balance-drift",
    "unmasked-account-number",
    "page-overlap",
    "has-more-ignores-cursor",
    "widget-frame-key",
    "widget-corp",
]
LEGAL = [
    "create-200",
    "uuid-ids",
    "asc-order",
    "error-shapes",
    "duplicate-deliveries",
    "reverse-batches",
    "slow-delivery",
    "limit-clamp",
    "opaque-cursor",
    "extra-fields",
    "clock-behind",
    "async-connect",
    "short-connected-form",
    "account-reads-need-connected",
]
VARIANTS = ["plain"] + VIOLATIONS + LEGAL

V = "plain"          # the variant, set in main()
SERVICE = "bankly"   # <service> of /widget/<service>-connect.js

LOCK = threading.RLock()
ALNUM = string.ascii_uppercase + string.digits

# --------------------------------------------------------------------------------------------
# Clock and identifiers
# --------------------------------------------------------------------------------------------

_ms_lock = threading.Lock()
_last_ms = 0


def clock_offset():
    if V == "clock-behind":
        return -3.0           # the server's clock runs 3 s behind
    if V == "future-timestamps":
        return 10 * 3600.0    # local time (UTC+10) written with a Z designator
    return 0.0


def now():
    return time.time() + clock_offset()


def stamp_ms():
    """A strictly increasing millisecond timestamp (so that events order by their times)."""
    global _last_ms
    with _ms_lock:
        ms = max(int(now() * 1000), _last_ms + 1)
        _last_ms = ms
        return ms


def iso_ms(ms):
    dt = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ms % 1000)


def iso_s(ms):
    dt = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def date_of(ms, days_back=0):
    dt = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc) - datetime.timedelta(days=days_back)
    return dt.strftime("%Y-%m-%d")


def new_id(prefix):
    if V == "uuid-ids":
        return prefix + str(uuid.uuid4())
    return prefix + "".join(secrets.choice(ALNUM) for _ in range(26))


def new_widget_token():
    prefix = "wgt_" if V == "token-prefix" else "sess_"
    if V == "uuid-ids":
        return prefix + secrets.token_urlsafe(48)
    return prefix + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.cid = new_id("cli_")
        self.webhook_secret = "whsec_" + secrets.token_hex(24)
        self.urls = []           # registered webhook addresses, in registration order
        self.deliverer = Deliverer(self)


class Connection:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "created"          # current state, lower case
        self.projected = "created"       # state once every accepted action has been carried out
        self.widget_token = new_widget_token()
        self.token_expires = time.time() + 30 * 60
        self.created_ms = stamp_ms()
        self.accounts = []               # account ids, in display order
        self.ready_at = 0.0              # connected-before-ready: when the accounts become readable
        self.queue = collections.deque()  # async-connect: steps still to carry out
        self.worker = None


class Account:
    def __init__(self, conn, pub):
        self.conn = conn
        self.pub = pub                   # the public object (without drift etc.)
        self.txns = []                   # dicts {"obj", "deleted", "seq", "reserved"}, newest first
        self.snapshot = None             # stale-account-get
        self.created_real = time.time()

    @property
    def id(self):
        return self.pub["id"]


CLIENTS = []            # Client, in FOREIGN_API_KEYS order
CONNECTIONS = {}        # id -> Connection
ACCOUNTS = {}           # id -> Account
TXN_INDEX = {}          # txn id -> Account
TOKENS = {}             # widget token -> Connection
_seq = [0]


def next_seq():
    _seq[0] += 1
    return _seq[0]


def client_for_key(key):
    found = None
    for c in CLIENTS:
        if hmac.compare_digest(c.key.encode(), key.encode()):
            found = c
    return found


SHARED_CLIENT_ID = None


def event_client_id(client):
    if V == "shared-client-id":
        return SHARED_CLIENT_ID
    return client.cid


# --------------------------------------------------------------------------------------------
# Events and webhook deliveries
# --------------------------------------------------------------------------------------------

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Deliverer(threading.Thread):
    """One delivery queue per client: events are posted in the order they were emitted."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client = client
        self.cv = threading.Condition()
        self.items = collections.deque()

    def put(self, env):
        delay = 3.0 if V == "slow-delivery" else 0.0
        with self.cv:
            self.items.append((time.time() + delay, env))
            self.cv.notify()

    def run(self):
        while True:
            with self.cv:
                while not self.items:
                    self.cv.wait()
                if V != "reverse-batches":
                    batch = [self.items.popleft()]
            if V == "reverse-batches":
                time.sleep(1.5)          # collect a batch, then send it newest first
                with self.cv:
                    batch = list(self.items)
                    self.items.clear()
                batch.reverse()
            for due, env in batch:
                wait = due - time.time()
                if wait > 0:
                    time.sleep(wait)
                copies = 2 if V == "duplicate-deliveries" else 1
                for _ in range(copies):
                    self.deliver(env)

    def targets(self):
        with LOCK:
            if V == "webhook-broadcast":
                out = []
                for c in CLIENTS:
                    out.extend(u for u in c.urls if u not in out)
                return out
            return list(self.client.urls)

    def still_registered(self, url):
        with LOCK:
            if V == "webhook-broadcast":
                return any(url in c.urls for c in CLIENTS)
            return url in self.client.urls

    def deliver(self, env):
        body = json.dumps(env, separators=(",", ":")).encode()
        for url in self.targets():
            for attempt, backoff in enumerate((0, 0.5, 1, 2, 4)):
                if attempt and not self.still_registered(url):
                    break
                time.sleep(backoff)
                if self.post(url, body, env):
                    break

    def post(self, url, body, env):
        ts = str(int(time.time()))
        sig = hmac.new(self.client.webhook_secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Bankly-Webhooks/1.0",
            "X-Bankly-Signature": "t=%s,v1=%s" % (ts, sig),
        }
        eid = env.get("id") if isinstance(env, dict) else None
        if eid:
            headers["X-Bankly-Event-Id"] = eid
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with OPENER.open(req, timeout=5) as r:
                r.read(1024)
                return 200 <= r.status < 300
        except urllib.error.HTTPError as e:
            return False if e.code >= 500 or e.code in (408, 429) else True  # 4xx: do not retry
        except Exception:
            return False


def emit(conn, etype, extra, at_ms=None):
    """Build an event about conn and queue it for conn's client (call with LOCK held)."""
    ms = at_ms if at_ms is not None else stamp_ms()
    client = conn.client
    if V == "short-connected-form" and etype == "connection.connected":
        env = {"event": etype, "connectionId": conn.id, "timestamp": iso_s(ms)}
        client.deliverer.put(env)
        return
    eid = new_id("evt_")
    data = {
        "eventId": new_id("evt_") if V == "event-id-mismatch" else eid,
        "type": etype,
        "occurredAt": iso_ms(ms),
        "clientId": event_client_id(client),
        "connectionId": conn.id,
    }
    data.update(extra)
    env = {
        "id": eid,
        "type": etype,
        "created_at": iso_s(ms) if V == "no-millis" else iso_ms(ms),
        "data": data,
    }
    if V == "extra-fields":
        env["object"] = "event"
        env["api_version"] = "2024-06-01"
        env["livemode"] = False
        data["attempt"] = 1
    client.deliverer.put(env)


def emit_status(conn, new_status, prev, ms=None):
    if V == "silent-disconnect" and new_status == "disconnected":
        return
    previous = prev
    if V == "chain-skips-verifying" and new_status == "connected" and prev == "verifying":
        previous = "credentials_submitted"
    if V == "prev-status-upper":
        previous = previous.upper()
    error = None
    if new_status == "failed_auth":
        error = {"code": "invalid_credentials", "message": "The bank rejected the credentials."}
    elif new_status == "error":
        error = {"code": "internal_error", "message": "Unexpected error while talking to the bank."}
    emit(conn, "connection." + new_status, {"previousStatus": previous, "error": error}, ms)


# --------------------------------------------------------------------------------------------
# Generated bank data
# --------------------------------------------------------------------------------------------

INSTITUTION = {"id": "ins_demo_bank", "name": "Demo Bank", "logo": None}

CHECKING_SPEND = [
    ("REWE Markt", "groceries", 8, 95),
    ("Lidl", "groceries", 5, 60),
    ("Deutsche Bahn", "transport", 12, 140),
    ("Stadtwerke Strom", "utilities", 45, 90),
    ("Netflix", "entertainment", 13, 18),
    ("Restaurant Da Mario", "dining", 18, 75),
    ("Apotheke am Markt", "health", 4, 40),
    ("Amazon Marketplace", "shopping", 9, 120),
]
CARD_SPEND = [
    ("Lufthansa", "travel", 90, 480),
    ("Hotel Adlon", "travel", 120, 390),
    ("Starbucks", "dining", 3, 12),
    ("Zalando", "shopping", 25, 160),
    ("Shell Tankstelle", "transport", 30, 85),
    ("Spotify", "entertainment", 10, 11),
]


def money(x):
    return round(x + 0.0, 2)


def build_accounts(conn, created_ms):
    rnd = random.Random(conn.id)
    specs = [
        ("checking", "Everyday Checking", 37),
        ("savings", "Rainy Day Savings", 6),
        ("credit_card", "Travel Rewards Card", 23),
        ("brokerage", "Investment Portfolio", 3),
        ("pension", "Retirement Plan", 0),
    ]
    for kind, name, count in specs:
        digits = "".join(rnd.choice(string.digits) for _ in range(12))
        acc_id = new_id("acc_")
        pub = {
            "id": acc_id,
            "connectionId": conn.id,
            "name": name,
            "type": kind,
            "currency": "EUR",
            "balance": 0.0,
            "availableBalance": 0.0,
            "accountNumber": digits if V == "unmasked-account-number" else "****" + digits[-4:],
            "createdAt": iso_ms(created_ms),
            "lastSyncedAt": iso_ms(created_ms),
            "institution": dict(INSTITUTION),
        }
        if kind == "checking":
            pub["balance"] = money(rnd.uniform(900, 4200))
            pub["availableBalance"] = pub["balance"]
        elif kind == "savings":
            pub["balance"] = money(rnd.uniform(5000, 25000))
            pub["availableBalance"] = pub["balance"]
        elif kind == "credit_card":
            limit = 5000.0
            pub["balance"] = -money(rnd.uniform(150, 1400))
            pub["availableBalance"] = money(limit + pub["balance"])
            pub["creditLimit"] = {"amount": limit, "currency": "EUR"}
            usd = -money(rnd.uniform(20, 300))
            pub["currencyBalances"] = [{"currency": "USD", "balance": usd, "availableBalance": usd}]
        else:
            positions = []
            holdings = [("VWCE", "Vanguard FTSE All-World UCITS ETF"), ("EUNL", "iShares Core MSCI World UCITS ETF")]
            if kind == "pension":
                holdings = [("XDWD", "Xtrackers MSCI World UCITS ETF")]
            total = 0.0
            for sym, pname in holdings:
                qty = float(rnd.randint(5, 120))
                price = money(rnd.uniform(60, 130))
                value = money(qty * price)
                total += value
                positions.append({"symbol": sym, "name": pname, "quantity": qty, "price": price,
                                  "marketValue": value, "currency": "EUR"})
            pub["balance"] = money(total)
            pub["availableBalance"] = money(total)
            pub["positions"] = positions
        if V == "extra-fields":
            pub["object"] = "account"
            pub["status"] = "active"
            pub["metadata"] = {}
        acc = Account(conn, pub)
        # transactions, newest first
        day = 1
        for i in range(count):
            if kind == "checking":
                if i % 9 == 4:
                    desc, cat, amt = "Salary ACME GmbH", "income", 2450.00
                elif i % 9 == 7:
                    desc, cat, amt = "Rent Hausverwaltung Nord", "housing", -1150.00
                else:
                    d, cat, lo, hi = rnd.choice(CHECKING_SPEND)
                    desc, amt = d, -money(rnd.uniform(lo, hi))
            elif kind == "credit_card":
                if i % 10 == 6:
                    desc, cat, amt = "Card payment - thank you", "payment", money(rnd.uniform(300, 900))
                else:
                    d, cat, lo, hi = rnd.choice(CARD_SPEND)
                    desc, amt = d, -money(rnd.uniform(lo, hi))
            elif kind == "savings":
                if i % 3 == 2:
                    desc, cat, amt = "Interest payment", "interest", money(rnd.uniform(2, 30))
                elif i == 4:
                    desc, cat, amt = "Transfer to checking", "transfer", -500.00
                else:
                    desc, cat, amt = "Transfer from checking", "transfer", 250.00
            else:
                if i == 1:
                    desc, cat, amt = "Dividend VWCE", "income", money(rnd.uniform(10, 80))
                else:
                    desc, cat, amt = "Buy VWCE", "investment", -money(rnd.uniform(100, 600))
            t = {
                "id": new_id("txn_"),
                "accountId": acc_id,
                "amount": amt,
                "currency": "EUR",
                "description": desc,
                "transactionDate": date_of(created_ms, day),
                "category": cat,
                "status": "posted",
                "createdAt": iso_ms(created_ms),
            }
            if V == "extra-fields":
                t["object"] = "transaction"
                t["merchant"] = {"name": desc}
            day += rnd.randint(0, 2) + (1 if i % 2 else 0)
            acc.txns.append({"obj": t, "deleted": False, "seq": 0, "reserved": False})
        # the list is kept newest first (transactionDate, then creation order)
        for j, e in enumerate(acc.txns):
            e["seq"] = -j
            TXN_INDEX[e["obj"]["id"]] = acc
        acc.snapshot = copy.deepcopy(pub)
        ACCOUNTS[acc_id] = acc
        conn.accounts.append(acc_id)


def render_account(acc):
    pub = copy.deepcopy(acc.pub)
    if V == "balance-drift":
        # "interest accrual": one cent per second since the account was synced, never announced
        cents = int(time.time() - acc.created_real)
        pub["balance"] = money(pub["balance"] + cents / 100.0)
        pub["availableBalance"] = money(pub["availableBalance"] + cents / 100.0)
    return pub


# --------------------------------------------------------------------------------------------
# Lifecycle: driver actions
# --------------------------------------------------------------------------------------------


class Refused(Exception):
    pass


class NotFound(Exception):
    pass


def auth_steps(final, current):
    if current == "connected":
        return [("status", final)]
    return [("status", "credentials_submitted"), ("status", "verifying"), ("status", final)]


def accept_action(conn, action, body):
    """Validate an action against the connection's projected state and carry it out (or queue it)."""
    with LOCK:
        st = conn.projected
        if action == "connect":
            if st == "connected":
                raise Refused("the connection is already connected")
            steps = [("status", "credentials_submitted"), ("status", "verifying"), ("accounts",), ("status", "connected")]
            final = "connected"
        elif action in ("fail_auth", "require_mfa"):
            final = "failed_auth" if action == "fail_auth" else "mfa_required"
            steps = auth_steps(final, st)
        elif action == "error":
            if st in ("error", "disconnected"):
                raise Refused("cannot move to error from " + st)
            steps, final = [("status", "error")], "error"
        elif action == "disconnect":
            if st == "disconnected":
                raise Refused("already disconnected")
            steps, final = [("status", "disconnected")], "disconnected"
        elif action == "update_accounts":
            if st != "connected":
                raise Refused("accounts can only change while connected (now %s)" % st)
            acc_id = body.get("accountId")
            if acc_id:
                acc = ACCOUNTS.get(acc_id)
                if acc is None or acc.conn is not conn:
                    raise NotFound("no account %s in this connection" % acc_id)
            steps, final = [("update", acc_id)], st
        elif action == "delete_transaction":
            if st != "connected":
                raise Refused("transactions can only be deleted while connected (now %s)" % st)
            txn_id = body.get("transactionId")
            acc_id = body.get("accountId")
            target = None
            if txn_id:
                acc = TXN_INDEX.get(txn_id)
                if acc is None or acc.conn is not conn:
                    raise NotFound("no transaction %s in this connection" % txn_id)
                entry = next(e for e in acc.txns if e["obj"]["id"] == txn_id)
                if entry["deleted"] or entry["reserved"]:
                    raise Refused("transaction already deleted")
                target = entry
            elif conn.accounts:
                cands = []
                if acc_id:
                    acc = ACCOUNTS.get(acc_id)
                    if acc is None or acc.conn is not conn:
                        raise NotFound("no account %s in this connection" % acc_id)
                    cands = [acc]
                else:
                    cands = [ACCOUNTS[a] for a in conn.accounts]
                for acc in cands:
                    live = [e for e in acc.txns if not e["deleted"] and not e["reserved"]]
                    if live:
                        target = live[0]
                        break
                if target is None:
                    raise Refused("no transaction left to delete")
            if target is not None:
                target["reserved"] = True
            steps, final = [("delete", target, acc_id)], st
        else:
            raise NotFound("unknown action " + action)
        conn.projected = final
        if V == "async-connect":
            conn.queue.extend(steps)
            if conn.worker is None or not conn.worker.is_alive():
                conn.worker = threading.Thread(target=run_queue, args=(conn,), daemon=True)
                conn.worker.start()
        else:
            for s in steps:
                apply_step(conn, s)
        return final


def run_queue(conn):
    while True:
        time.sleep(0.5)
        with LOCK:
            if not conn.queue:
                conn.worker = None
                return
            step = conn.queue.popleft()
            apply_step(conn, step)


def apply_step(conn, step):
    """Carry out one step (LOCK held): change the data first, then announce it."""
    kind = step[0]
    if kind == "status":
        new = step[1]
        prev = conn.status
        conn.status = new
        if new == "connected" and V == "connected-before-ready":
            conn.ready_at = time.time() + 30.0
        emit_status(conn, new, prev)
    elif kind == "accounts":
        if not conn.accounts:
            build_accounts(conn, stamp_ms())
    elif kind == "update":
        acc_id = step[1] or (conn.accounts[0] if conn.accounts else None)
        if acc_id is None:
            return
        acc = ACCOUNTS[acc_id]
        ms = stamp_ms()
        rnd = random.Random(acc_id + str(ms))
        d, cat, lo, hi = rnd.choice(CHECKING_SPEND if acc.pub["type"] != "credit_card" else CARD_SPEND)
        amt = -money(rnd.uniform(lo, hi))
        t = {
            "id": new_id("txn_"),
            "accountId": acc_id,
            "amount": amt,
            "currency": acc.pub["currency"],
            "description": d,
            "transactionDate": date_of(ms),
            "category": cat,
            "status": "posted",
            "createdAt": iso_ms(ms),
        }
        if V == "extra-fields":
            t["object"] = "transaction"
            t["merchant"] = {"name": d}
        acc.txns.insert(0, {"obj": t, "deleted": False, "seq": next_seq(), "reserved": False})
        TXN_INDEX[t["id"]] = acc
        acc.pub["balance"] = money(acc.pub["balance"] + amt)
        acc.pub["availableBalance"] = money(acc.pub["availableBalance"] + amt)
        acc.pub["lastSyncedAt"] = iso_ms(ms)
        announced = acc_id
        if V == "update-wrong-account" and len(conn.accounts) > 1:
            i = conn.accounts.index(acc_id)
            announced = conn.accounts[(i + 1) % len(conn.accounts)]
        emit(conn, "accounts.updated", {"accountId": announced})
    elif kind == "delete":
        entry, acc_id = step[1], step[2]
        if entry is None:   # async-connect, accounts were not there when accepted: pick now
            cands = [ACCOUNTS[acc_id]] if acc_id in ACCOUNTS else [ACCOUNTS[a] for a in conn.accounts]
            for acc in cands:
                live = [e for e in acc.txns if not e["deleted"] and not e["reserved"]]
                if live:
                    entry = live[0]
                    break
            if entry is None:
                return
        entry["deleted"] = True
        t = entry["obj"]
        emit(conn, "transaction.deleted", {"accountId": t["accountId"], "transactionId": t["id"]})


def create_connection(client):
    with LOCK:
        conn = Connection(client)
        CONNECTIONS[conn.id] = conn
        TOKENS[conn.widget_token] = conn
        emit_status(conn, "created", "created", conn.created_ms)
        return conn


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------

ERRORS = {
    # kind: (plain status, error-shapes status, code)
    "missing_key": (401, 401, "unauthorized"),
    "invalid_key": (401, 403, "invalid_api_key"),
    "not_found": (404, 404, "not_found"),
    "foreign": (404, 403, "not_found"),
    "not_connected": (409, 423, "connection_not_connected"),
    "bad_limit": (400, 422, "invalid_limit"),
    "bad_cursor": (400, 422, "invalid_cursor"),
    "method": (405, 405, "method_not_allowed"),
    "bad_request": (400, 400, "bad_request"),
    "bad_token": (401, 401, "invalid_widget_token"),
}


class BaseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Bankly/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def version_string(self):
        return self.server_version

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                line = self.rfile.readline(100)
                try:
                    n = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    self.close_connection = True
                    return out
                if n == 0:
                    while self.rfile.readline(1000).strip():
                        pass
                    return out
                out += self.rfile.read(n)
                self.rfile.readline(10)
                if len(out) > 1 << 20:
                    self.close_connection = True
                    return out
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            return b""
        if n > 1 << 20:
            self.close_connection = True
            return b""
        return self.rfile.read(n) if n > 0 else b""

    def send(self, status, body, ctype="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":")).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def fail(self, kind, message, headers=()):
        plain_status, shaped_status, code = ERRORS[kind]
        if V == "error-shapes":
            self.send(shaped_status, "error: %s: %s\n" % (code, message), "text/plain; charset=utf-8", headers)
        else:
            self.send(plain_status, {"error": {"code": code, "message": message}}, headers=headers)

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_HEAD(self):
        self.dispatch()

    def do_OPTIONS(self):
        self.dispatch()

    def dispatch(self):
        try:
            self.body = self.read_body()
            parsed = urllib.parse.urlsplit(self.path)
            raw = parsed.path
            self.segments = [urllib.parse.unquote(s) for s in raw.split("/")[1:]]
            self.query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
            self.route(raw)
        except BrokenPipeError:
            self.close_connection = True
        except Exception as e:  # never leave a request without an answer
            try:
                self.send(500, {"error": {"code": "internal_error", "message": type(e).__name__}})
            except Exception:
                self.close_connection = True


# --------------------------------------------------------------------------------------------
# The API
# --------------------------------------------------------------------------------------------

BEARER = re.compile(r"^\s*Bearer\s+(\S+)\s*$", re.IGNORECASE)


class ApiHandler(BaseHandler):
    def route(self, raw):
        seg = self.segments
        if seg and seg[0] == "widget":
            return self.widget()
        if not seg or seg[0] != "v1":
            return self.fail("not_found", "no such resource")
        header = self.headers.get("Authorization")
        client = None
        kind = "missing_key"
        if header is not None:
            m = BEARER.match(header)
            kind = "invalid_key"
            if m:
                client = client_for_key(m.group(1))
        if client is None:
            if V == "unauth-create-effect" and self.command == "POST" and seg == ["v1", "connections"] and CLIENTS:
                create_connection(CLIENTS[0])   # the refusal comes after the work is done
            return self.fail(kind, "a valid API key is required (Authorization: Bearer <API_KEY>)",
                             [("WWW-Authenticate", 'Bearer realm="bankly"')])
        self.client = client
        n = len(seg)
        if seg == ["v1", "connections"]:
            if self.command != "POST":
                return self.fail("method", "use POST", [("Allow", "POST")])
            return self.create()
        if n == 4 and seg[1] == "connections" and seg[3] == "accounts":
            if self.command not in ("GET", "HEAD"):
                return self.fail("method", "use GET", [("Allow", "GET")])
            return self.connection_accounts(seg[2])
        if n == 3 and seg[1] == "accounts":
            if self.command not in ("GET", "HEAD"):
                return self.fail("method", "use GET", [("Allow", "GET")])
            return self.account(seg[2])
        if n == 4 and seg[1] == "accounts" and seg[3] == "transactions":
            if self.command not in ("GET", "HEAD"):
                return self.fail("method", "use GET", [("Allow", "GET")])
            return self.transactions(seg[2])
        return self.fail("not_found", "no such resource")

    # POST /v1/connections
    def create(self):
        conn = create_connection(self.client)
        body = {
            "connectionId": conn.id,
            "status": "created" if V == "status-lowercase" else "CREATED",
            "widgetToken": conn.widget_token,
        }
        if V == "extra-fields":
            body["object"] = "connection"
            body["createdAt"] = iso_ms(conn.created_ms)
            body["widgetTokenExpiresAt"] = iso_ms(int(conn.token_expires * 1000 + clock_offset() * 1000))
        self.send(200 if V == "create-200" else 201, body)

    def own_connection(self, conn_id):
        conn = CONNECTIONS.get(conn_id)
        if conn is None:
            self.fail("not_found", "no such connection")
            return None
        if conn.client is not self.client:
            self.fail("foreign", "no such connection")
            return None
        return conn

    # GET /v1/connections/{id}/accounts
    def connection_accounts(self, conn_id):
        with LOCK:
            conn = self.own_connection(conn_id)
            if conn is None:
                return
            readable = conn.status == "connected"
            if V == "accounts-after-disconnect":
                readable = bool(conn.accounts)   # "the accounts exist": the status is not looked at
            if V == "connected-before-ready" and time.time() < conn.ready_at:
                readable = False
            if not readable:
                if conn.status == "connected":
                    return self.fail("not_connected", "the accounts of this connection are still being synced")
                return self.fail("not_connected", "the connection is %s, not CONNECTED" % conn.status.upper())
            ids = list(conn.accounts)
            if V == "accounts-all-connections":
                ids = []
                for c in CONNECTIONS.values():
                    if c.client is self.client and c.status == "connected":
                        ids.extend(c.accounts)
            out = [render_account(ACCOUNTS[a]) for a in ids]
        self.send(200, out)

    def find_account(self, acc_id):
        acc = ACCOUNTS.get(acc_id)
        if acc is None:
            self.fail("not_found", "no such account")
            return None
        if acc.conn.client is not self.client and V != "cross-client-read":
            self.fail("foreign", "no such account")
            return None
        if V == "account-reads-need-connected" and acc.conn.status != "connected":
            self.fail("not_connected", "the account's connection is %s, not CONNECTED" % acc.conn.status.upper())
            return None
        return acc

    # GET /v1/accounts/{id}
    def account(self, acc_id):
        with LOCK:
            acc = self.find_account(acc_id)
            if acc is None:
                return
            out = copy.deepcopy(acc.snapshot) if V == "stale-account-get" else render_account(acc)
        self.send(200, out)

    # GET /v1/accounts/{id}/transactions
    def transactions(self, acc_id):
        limits = (5, 20) if V == "limit-clamp" else (25, 100)
        default, maximum = limits
        raw_limit = self.query.get("limit", [None])[0]
        limit = default
        if raw_limit is not None and raw_limit != "":
            try:
                f = float(raw_limit)
                ok = f == f and f not in (float("inf"), float("-inf")) and f == int(f)
            except (ValueError, OverflowError):
                ok = False
            if V == "limit-clamp":
                limit = min(max(int(f), 1), maximum) if ok else default
            else:
                if not ok or not (1 <= int(f) <= maximum):
                    return self.fail("bad_limit", "limit must be an integer from 1 to %d" % maximum)
                limit = int(f)
        cursor = self.query.get("starting_after", [None])[0]
        with LOCK:
            acc = self.find_account(acc_id)
            if acc is None:
                return
            items = list(acc.txns)
            if V == "asc-order":
                items.reverse()
            start = 0
            if cursor:
                cid = cursor
                if V == "opaque-cursor" and not cursor.startswith("txn_"):
                    try:
                        pad = "=" * (-len(cursor) % 4)
                        dec = base64.urlsafe_b64decode(cursor + pad).decode()
                        cid = dec[3:] if dec.startswith("v1:") else None
                    except Exception:
                        cid = None
                pos = next((i for i, e in enumerate(items) if e["obj"]["id"] == cid), None) if cid else None
                if pos is None:
                    return self.fail("bad_cursor", "starting_after names no transaction of this account")
                start = pos if V == "page-overlap" else pos + 1
            rest = items[start:]
            if V != "deleted-still-listed":
                rest = [e for e in rest if not e["deleted"]]
            page = [copy.deepcopy(e["obj"]) for e in rest[:limit]]
            has_more = len(rest) > limit
            if V == "has-more-ignores-cursor":
                has_more = len([e for e in items if not e["deleted"]]) > limit
            out = {"data": page, "has_more": has_more}
            if has_more and page:
                last = page[-1]["id"]
                if V == "opaque-cursor":
                    last = base64.urlsafe_b64encode(("v1:" + last).encode()).decode().rstrip("=")
                out["next_cursor"] = last
            if V == "extra-fields":
                out["object"] = "list"
                out["url"] = "/v1/accounts/%s/transactions" % acc_id
        self.send(200, out)

    # ----------------------------------------------------------------------------------------
    # The widget (§1): the script, its frame and the frame's calls, authorised by the widget token
    # ----------------------------------------------------------------------------------------

    def base_url(self):
        host = self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_address[1]
        return "http://" + host

    def widget(self):
        seg = self.segments
        extra = [("X-Content-Type-Options", "nosniff")]
        if len(seg) == 2 and seg[1] == SERVICE + "-connect.js":
            if self.command not in ("GET", "HEAD"):
                return self.fail("method", "use GET", [("Allow", "GET")])
            headers = extra + [("Access-Control-Allow-Origin", "*")]
            if V == "widget-corp":
                headers.append(("Cross-Origin-Resource-Policy", "same-origin"))
            return self.send(200, widget_script(self.base_url()), "application/javascript; charset=utf-8", headers)
        if seg == ["widget", "frame"] and self.command in ("GET", "HEAD"):
            conn_id = self.query.get("connectionId", [""])[0]
            key = None
            if V == "widget-frame-key":
                with LOCK:
                    conn = CONNECTIONS.get(conn_id)
                    key = conn.client.key if conn else None
            return self.send(200, frame_html(conn_id, key), "text/html; charset=utf-8", extra)
        if len(seg) == 3 and seg[1] == "api" and seg[2] in ("status", "login"):
            if self.command != "POST":
                return self.fail("method", "use POST", [("Allow", "POST")])
            try:
                req = json.loads(self.body or b"{}")
                if not isinstance(req, dict):
                    raise ValueError
            except ValueError:
                return self.fail("bad_request", "JSON object expected")
            token = req.get("token")
            with LOCK:
                conn = TOKENS.get(token) if isinstance(token, str) else None
                if conn is None or conn.id != req.get("connectionId") or time.time() > conn.token_expires:
                    return self.fail("bad_token", "the widget session is invalid or has expired")
            if seg[2] == "login":
                password = str(req.get("password") or "")
                action = {"wrong": "fail_auth", "mfa": "require_mfa"}.get(password, "connect")
                try:
                    accept_action(conn, action, {})
                except (Refused, NotFound) as e:
                    return self.send(409, {"error": {"code": "invalid_state", "message": str(e)}})
            return self.send(200, widget_status(conn))
        return self.fail("not_found", "no such widget resource")


def widget_status(conn):
    with LOCK:
        out = {"connectionId": conn.id, "status": conn.status}
        if conn.status == "connected":
            out["metadata"] = {
                "connectionId": conn.id,
                "institution": {"id": INSTITUTION["id"], "name": INSTITUTION["name"]},
                "accounts": [
                    {"id": a, "name": ACCOUNTS[a].pub["name"], "type": ACCOUNTS[a].pub["type"],
                     "mask": ACCOUNTS[a].pub["accountNumber"][-4:]}
                    for a in conn.accounts
                ],
            }
        return out


def global_name():
    words = re.split(r"[^A-Za-z0-9]+", SERVICE)
    name = "".join(w[:1].upper() + w[1:] for w in words if w) or "Bank"
    if name[0].isdigit():
        name = "_" + name
    return name + "Connect"


WIDGET_JS = r"""/* %(service)s connect widget: opens the hosted bank-login frame for one connection. */
(function (global) {
  'use strict';
  var BASE = %(base)s;
  var ORIGIN = BASE.replace(/^(https?:\/\/[^\/]+).*$/, '$1');
  var current = null;

  function close() {
    if (!current) return;
    window.removeEventListener('message', current.listener);
    if (current.overlay.parentNode) current.overlay.parentNode.removeChild(current.overlay);
    current = null;
  }

  function open(options, connectionId, onSuccess) {
    var opts = options;
    if (typeof options === 'string') {
      opts = { token: options, connectionId: connectionId, onSuccess: onSuccess };
    }
    if (!opts || typeof opts !== 'object') throw new TypeError('open: an options object is required');
    var token = opts.token, connId = opts.connectionId, cb = opts.onSuccess, onExit = opts.onExit;
    if (typeof token !== 'string' || !token) throw new TypeError('open: token (the widget token) is required');
    if (typeof connId !== 'string' || !connId) throw new TypeError('open: connectionId is required');
    if (cb != null && typeof cb !== 'function') throw new TypeError('open: onSuccess must be a function');
    close();
    var overlay = document.createElement('div');
    overlay.setAttribute('data-%(service)s-connect', '');
    overlay.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;' +
      'align-items:center;justify-content:center;z-index:2147483647';
    var frame = document.createElement('iframe');
    frame.title = 'Connect your bank';
    frame.style.cssText = 'width:400px;max-width:95vw;height:560px;border:0;border-radius:12px;background:#fff';
    frame.src = BASE + '/widget/frame?connectionId=' + encodeURIComponent(connId);
    overlay.appendChild(frame);
    var listener = function (ev) {
      if (ev.origin !== ORIGIN || ev.source !== frame.contentWindow) return;
      var msg = ev.data;
      if (!msg || typeof msg !== 'object' || msg.source !== '%(service)s-widget') return;
      if (msg.type === 'ready') {
        frame.contentWindow.postMessage({ source: '%(service)s-connect', type: 'init', token: token, connectionId: connId }, ORIGIN);
      } else if (msg.type === 'success') {
        close();
        if (cb) cb(msg.metadata);
      } else if (msg.type === 'exit') {
        close();
        if (typeof onExit === 'function') onExit(msg.reason || null);
      }
    };
    window.addEventListener('message', listener);
    (document.body || document.documentElement).appendChild(overlay);
    current = { overlay: overlay, listener: listener };
    return { close: close };
  }

  global[%(global)s] = { open: open, close: close, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
"""


def widget_script(base):
    return WIDGET_JS % {"base": json.dumps(base), "service": SERVICE, "global": json.dumps(global_name())}


FRAME_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect your bank</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>
body{font:15px/1.4 system-ui,sans-serif;margin:0;padding:24px;color:#1b1f24}
h1{font-size:20px;margin:0 0 8px}label{display:block;margin:12px 0 4px}
input{width:100%%;box-sizing:border-box;padding:8px;border:1px solid #bbb;border-radius:6px}
button{margin-top:16px;padding:10px 16px;border:0;border-radius:6px;background:#1a56db;color:#fff}
#msg{color:#555}
</style></head>
<body><main>
<h1>Demo Bank</h1>
<p id="msg">Sign in to your bank to link your accounts.</p>
<form id="login" autocomplete="off">
<label for="u">Username</label><input id="u" name="username">
<label for="p">Password</label><input id="p" name="password" type="password">
<button type="submit">Connect</button>
<button type="button" id="cancel" style="background:#777">Cancel</button>
</form>
</main>
%(config)s<script>
(function () {
  'use strict';
  var token = null, connId = null, parentOrigin = '*', timer = null, done = false;
  var msg = document.getElementById('msg');
  function tell(m) {
    m.source = '%(service)s-widget';
    try { window.parent.postMessage(m, parentOrigin); } catch (e) { /* the parent went away */ }
  }
  function call(path, body) {
    return fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), credentials: 'same-origin' })
      .then(function (r) { return r.json().catch(function () { return {}; }); });
  }
  function handle(s) {
    if (done || !s) return;
    if (s.status === 'connected' && s.metadata) {
      done = true;
      if (timer) clearInterval(timer);
      msg.textContent = 'Connected.';
      finish(s.metadata);
    } else if (s.status === 'failed_auth') {
      msg.textContent = 'The bank did not accept these credentials. Try again.';
    } else if (s.status === 'mfa_required') {
      msg.textContent = 'Your bank asks for a one-time code: enter it as the password.';
    } else if (s.status === 'error') {
      msg.textContent = 'Something went wrong. Try again.';
    } else if (s.status === 'disconnected') {
      msg.textContent = 'This connection was disconnected.';
    } else if (s.error) {
      msg.textContent = 'This session is no longer valid.';
    }
  }
  function finish(metadata) {
    %(finish)s
  }
  function poll() {
    if (done || !token) return;
    call('/widget/api/status', { token: token, connectionId: connId }).then(handle, function () {});
  }
  window.addEventListener('message', function (ev) {
    if (ev.source !== window.parent || token) return;
    var m = ev.data;
    if (!m || typeof m !== 'object' || m.source !== '%(service)s-connect' || m.type !== 'init') return;
    if (typeof m.token !== 'string' || typeof m.connectionId !== 'string') return;
    token = m.token; connId = m.connectionId;
    parentOrigin = (ev.origin && ev.origin !== 'null') ? ev.origin : '*';
    poll();
    timer = setInterval(poll, 1500);
  });
  document.getElementById('login').addEventListener('submit', function (ev) {
    ev.preventDefault();
    if (!token) return;
    msg.textContent = 'Checking your credentials...';
    call('/widget/api/login', { token: token, connectionId: connId,
      username: document.getElementById('u').value, password: document.getElementById('p').value })
      .then(handle, function () { msg.textContent = 'The bank could not be reached.'; });
  });
  document.getElementById('cancel').addEventListener('click', function () { tell({ type: 'exit', reason: 'cancelled' }); });
  tell({ type: 'ready' });
})();
</script></body></html>
"""


def frame_html(conn_id, key):
    if key is None:
        config = ""
        finish = "tell({ type: 'success', metadata: metadata });"
    else:
        # widget-frame-key: the frame reads the accounts itself, with the client's API key
        config = "<script>window.__BANKLY_CONFIG = %s;</script>\n" % json.dumps(
            {"apiKey": key, "connectionId": conn_id, "apiBase": "/v1"})
        finish = ("var c = window.__BANKLY_CONFIG;\n"
                  "    fetch(c.apiBase + '/connections/' + encodeURIComponent(c.connectionId) + '/accounts',"
                  " { headers: { Authorization: 'Bearer ' + c.apiKey } })\n"
                  "      .then(function (r) { return r.json(); })\n"
                  "      .then(function (accounts) { metadata.accountCount = accounts.length; }, function () {})\n"
                  "      .then(function () { tell({ type: 'success', metadata: metadata }); });")
    return FRAME_HTML % {"service": SERVICE, "config": config, "finish": finish}


# --------------------------------------------------------------------------------------------
# The admin API (what the driver calls)
# --------------------------------------------------------------------------------------------


class AdminHandler(BaseHandler):
    def route(self, raw):
        seg = self.segments
        if not seg or seg[0] != "admin":
            return self.send(404, {"error": "not found"})
        try:
            req = json.loads(self.body) if self.body.strip() else {}
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            return self.send(400, {"error": "JSON object expected"})
        if seg == ["admin", "health"]:
            return self.send(200, {"ok": True, "variant": V, "clients": [c.cid for c in CLIENTS]})
        if seg == ["admin", "webhooks"]:
            client = self.key_client()
            if client is None:
                return self.send(401, {"error": "the client's API key is required"})
            url = req.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                return self.send(400, {"error": "url (http or https) expected"})
            with LOCK:
                if self.command == "POST":
                    if url not in client.urls:
                        client.urls.append(url)
                    return self.send(200, {"registered": url, "clientId": client.cid})
                if self.command == "DELETE":
                    if url in client.urls:
                        client.urls.remove(url)
                    return self.send(200, {"unregistered": url})
            return self.send(405, {"error": "POST or DELETE"})
        if len(seg) == 4 and seg[1] == "connections" and self.command == "POST":
            with LOCK:
                conn = CONNECTIONS.get(seg[2])
            if conn is None:
                return self.send(404, {"error": "no such connection"})
            try:
                final = accept_action(conn, seg[3], req)
            except Refused as e:
                return self.send(409, {"error": str(e)})
            except NotFound as e:
                return self.send(404, {"error": str(e)})
            return self.send(202 if V == "async-connect" else 200, {"accepted": seg[3], "status": final})
        return self.send(404, {"error": "not found"})

    def key_client(self):
        m = BEARER.match(self.headers.get("Authorization") or "")
        return client_for_key(m.group(1)) if m else None


# --------------------------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


def main():
    global V, SERVICE, SHARED_CLIENT_ID
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--admin-port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--variant", default="plain")
    ap.add_argument("--service", default="bankly")
    args = ap.parse_args()
    if args.variant not in VARIANTS:
        print("unknown variant %r; known: %s" % (args.variant, " ".join(VARIANTS)), file=sys.stderr)
        sys.exit(2)
    V = args.variant
    SERVICE = args.service
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        print("FOREIGN_API_KEYS is empty", file=sys.stderr)
        sys.exit(2)
    for i, k in enumerate(keys):
        CLIENTS.append(Client(k, i))
    SHARED_CLIENT_ID = CLIENTS[0].cid
    for c in CLIENTS:
        c.deliverer.start()
    api = Server((args.host, args.port), ApiHandler)
    admin = Server((args.host, args.admin_port), AdminHandler)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    threading.Thread(target=admin.serve_forever, daemon=True).start()
    print("http://%s:%d" % (args.host, api.server_address[1]), flush=True)
    print("http://%s:%d/admin" % (args.host, admin.server_address[1]), flush=True)
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
