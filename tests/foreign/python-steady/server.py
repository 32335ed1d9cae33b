#!/usr/bin/env python3
"""A Bank Connection Aggregation Service written from /work/shared/spec/service-spec.md alone.

Standard library only. Public API under /v1 (spec section 4), widget script under /widget,
and an admin API under /admin that driver.py uses to move connections through their states,
update accounts, delete transactions and register webhook addresses.

    python3 server.py --port 0 --variant none --service acme
    (API keys in FOREIGN_API_KEYS="key1,key2": one client per key)

Prints `PORT <n>` once listening; exits when its standard input closes.
See VARIANTS.md for the variants.
"""

import argparse
import heapq
import json
import os
import random
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VIOLATIONS = {
    "cursor-skips-one",
    "limit-plus-one",
    "delete-not-applied",
    "silent-dedup-on-update",
    "occurred-at-no-millis",
    "event-time-shifted",
    "account-created-at-moves",
    "accounts-duplicate-multicurrency",
}
LEGAL = {
    "alt-status-codes",
    "oldest-first",
    "microsecond-timestamps",
    "next-cursor-always",
    "late-duplicate-webhooks",
    "background-sync-announced",
}
VARIANTS = {"none"} | VIOLATIONS | LEGAL

VARIANT = "none"
SERVICE = "acme"

DEFAULT_LIMIT = 25
MAX_LIMIT = 100
STEP_DELAY = 0.12  # seconds between the steps of one connection's queue

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(prefix):
    return prefix + "".join(secrets.choice(CROCKFORD) for _ in range(26))


def utcnow():
    return datetime.now(timezone.utc)


def iso_ms(dt):
    """ISO 8601 UTC with milliseconds: 2025-01-31T12:34:56.789Z."""
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def iso_s(dt):
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def resource_ts(dt):
    """Timestamps of accounts and transactions (sections 2.2, 2.3: ISO 8601 UTC)."""
    if VARIANT == "microsecond-timestamps":
        dt = dt.astimezone(timezone.utc)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return iso_ms(dt)


def event_now():
    """The clock the event module reads."""
    now = utcnow()
    if VARIANT == "event-time-shifted":
        # Bug: local wall-clock time (UTC+2) written with a Z suffix.
        now = now + timedelta(hours=2)
    return now


# --------------------------------------------------------------------------------------------
# State


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.id = new_id("cli_")
        self.webhooks = []  # registered URLs, in registration order


class Connection:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "created"  # actual state, lower case
        self.projected = "created"  # state after every accepted action has been carried out
        self.widget_token = "sess_" + secrets.token_urlsafe(24)
        self.created_at = utcnow()
        self.account_ids = []
        self.queue = deque()
        self.worker_running = False
        self.pending_deletes = set()
        self.background_started = False


class Account:
    def __init__(self, connection, kind, name, currency, number):
        self.id = new_id("acc_")
        self.connection_id = connection.id
        self.client = connection.client
        self.type = kind
        self.name = name
        self.currency = currency
        self.number = number
        self.balance = 0.0
        self.available = 0.0
        self.created_at = utcnow()
        self.last_synced = self.created_at
        self.credit_limit = None
        self.currency_balances = None
        self.positions = None
        self.txns = {}  # id -> Transaction (live)
        self.keys = {}  # id -> sort key, live and deleted (a deleted id stays a valid cursor)


class Transaction:
    def __init__(self, account, amount, description, category, tdate, seq):
        self.id = new_id("txn_")
        self.account_id = account.id
        self.amount = round(amount, 2)
        self.currency = account.currency
        self.description = description
        self.category = category
        self.date = tdate  # datetime.date
        self.created_at = utcnow()
        self.seq = seq

    def key(self):
        return (self.date.isoformat(), self.seq)


LOCK = threading.RLock()
CLIENTS_BY_KEY = {}
CLIENTS = []
CONNECTIONS = {}
ACCOUNTS = {}
TXN_INDEX = {}  # txn id -> account id (live and deleted)
SEQ = [0]


def next_seq():
    SEQ[0] += 1
    return SEQ[0]


INSTITUTIONS = [
    {"id": "ins_DEMOBANK", "name": "Demo Bank", "logo": None},
    {"id": "ins_NORTHSAVINGS", "name": "North Savings", "logo": None},
]

DEBITS = [
    ("REWE Markt", "groceries", 8, 95),
    ("Lidl", "groceries", 5, 60),
    ("Deutsche Bahn", "transport", 12, 140),
    ("Shell Tankstelle", "transport", 30, 90),
    ("Netflix", "entertainment", 9.99, 17.99),
    ("Amazon Marketplace", "shopping", 10, 220),
    ("Stadtwerke Strom", "utilities", 40, 120),
    ("Cafe Central", "restaurants", 3.5, 35),
    ("Apotheke am Markt", "health", 4, 45),
]
CREDITS = [
    ("Salary ACME GmbH", "income", 2400, 3600),
    ("Refund Amazon", "refund", 10, 80),
    ("Transfer from J. Doe", "transfer", 20, 300),
]


def random_txn(account, rng, tdate, credit_share=0.15):
    if rng.random() < credit_share:
        desc, cat, lo, hi = rng.choice(CREDITS)
        amount = rng.uniform(lo, hi)
    else:
        desc, cat, lo, hi = rng.choice(DEBITS)
        amount = -rng.uniform(lo, hi)
    return Transaction(account, amount, desc, cat, tdate, next_seq())


def add_txn(account, txn):
    account.txns[txn.id] = txn
    account.keys[txn.id] = txn.key()
    TXN_INDEX[txn.id] = account.id


def remove_txn(account, txn_id):
    account.txns.pop(txn_id, None)  # the sort key stays in account.keys


def build_accounts(conn):
    """The accounts of a connection, made when it is first CONNECTED."""
    rng = random.Random()
    today = utcnow().date()
    institution = rng.choice(INSTITUTIONS)
    specs = [
        ("checking", "Girokonto", 40),
        ("savings", "Tagesgeld", 7),
        ("credit_card", "Visa Gold", 15),
        ("brokerage", "Depot", 3),
    ]
    for kind, name, count in specs:
        number = "****" + "".join(rng.choice("0123456789") for _ in range(4))
        acc = Account(conn, kind, name, "EUR", number)
        acc.institution = dict(institution)
        for _ in range(count):
            tdate = today - timedelta(days=rng.randint(1, 90))
            if kind == "savings":
                txn = Transaction(acc, rng.uniform(5, 400) * rng.choice([1, 1, -1]), "Interest and transfers", "savings", tdate, next_seq())
            elif kind == "brokerage":
                txn = Transaction(acc, -rng.uniform(100, 900), "Buy ETF VWCE", "investment", tdate, next_seq())
            else:
                txn = random_txn(acc, rng, tdate, 0.2 if kind == "checking" else 0.05)
            add_txn(acc, txn)
        if kind == "checking":
            acc.balance = round(rng.uniform(800, 5200), 2)
            acc.available = acc.balance
        elif kind == "savings":
            acc.balance = round(rng.uniform(2000, 25000), 2)
            acc.available = acc.balance
        elif kind == "credit_card":
            acc.balance = round(-rng.uniform(50, 1500), 2)
            acc.credit_limit = {"amount": 5000.0, "currency": "EUR"}
            acc.available = round(5000.0 + acc.balance, 2)
            usd = round(-rng.uniform(10, 300), 2)
            acc.currency_balances = [{"currency": "USD", "balance": usd, "availableBalance": round(1000.0 + usd, 2)}]
        else:
            qty = rng.randint(5, 60)
            price = round(rng.uniform(90, 130), 2)
            acc.positions = [{"symbol": "VWCE", "name": "Vanguard FTSE All-World", "quantity": qty, "price": price, "value": round(qty * price, 2), "currency": "EUR"}]
            acc.balance = round(qty * price, 2)
            acc.available = acc.balance
        ACCOUNTS[acc.id] = acc
        conn.account_ids.append(acc.id)


def account_json(acc):
    created = utcnow() if VARIANT == "account-created-at-moves" else acc.created_at
    body = {
        "id": acc.id,
        "connectionId": acc.connection_id,
        "name": acc.name,
        "type": acc.type,
        "currency": acc.currency,
        "balance": acc.balance,
        "availableBalance": acc.available,
        "accountNumber": acc.number,
        "createdAt": resource_ts(created),
        "lastSyncedAt": resource_ts(acc.last_synced),
        "institution": acc.institution,
    }
    if acc.credit_limit is not None:
        body["creditLimit"] = acc.credit_limit
    if acc.currency_balances is not None:
        body["currencyBalances"] = acc.currency_balances
    if acc.positions is not None:
        body["positions"] = acc.positions
    return body


def txn_json(t):
    return {
        "id": t.id,
        "accountId": t.account_id,
        "amount": t.amount,
        "currency": t.currency,
        "description": t.description,
        "transactionDate": t.date.isoformat(),
        "category": t.category,
        "status": "posted",
        "createdAt": resource_ts(t.created_at),
    }


def ordered_txns(acc):
    """Newest first (by transaction date, then by import order); oldest first in oldest-first."""
    items = list(acc.txns.values())
    items.sort(key=lambda t: t.key(), reverse=(VARIANT != "oldest-first"))
    return items


def after_in_order(key, cursor_key):
    if VARIANT == "oldest-first":
        return key > cursor_key
    return key < cursor_key


# --------------------------------------------------------------------------------------------
# Webhook delivery


class Deliverer:
    """Delivers events to registered URLs from background threads, after a delay."""

    def __init__(self, workers=4):
        self.heap = []
        self.cond = threading.Condition()
        self.counter = 0
        for _ in range(workers):
            threading.Thread(target=self.run, daemon=True).start()

    def schedule(self, delay, client, url, body, attempt=0):
        with self.cond:
            self.counter += 1
            heapq.heappush(self.heap, (time.monotonic() + delay, self.counter, client, url, body, attempt))
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while True:
                    if self.heap:
                        due = self.heap[0][0]
                        now = time.monotonic()
                        if due <= now:
                            item = heapq.heappop(self.heap)
                            break
                        self.cond.wait(due - now)
                    else:
                        self.cond.wait()
            _, _, client, url, body, attempt = item
            with LOCK:
                if url not in client.webhooks:
                    continue  # unregistered: no delivery, no retry
            ok = False
            why = ""
            try:
                req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json", "User-Agent": f"{SERVICE}-webhooks/1.0"})
                with urllib.request.urlopen(req, timeout=10) as resp:
                    ok = 200 <= resp.status < 300
            except urllib.error.HTTPError as e:
                ok = 200 <= e.code < 300
                why = f"HTTP {e.code}"
            except Exception as e:
                ok = False
                why = repr(e)
            if not ok:
                print(f"delivery failed (attempt {attempt + 1}): {why}", file=sys.stderr, flush=True)
            if not ok and attempt < 4:
                self.schedule(1.0 * (2 ** attempt), client, url, body, attempt + 1)


DELIVERER = None


def emit(client, etype, connection_id, **extra):
    """Builds one event and schedules its delivery to each of the client's addresses."""
    eid = new_id("evt_")
    now = event_now()
    created = iso_ms(now)
    occurred = iso_s(now) if VARIANT == "occurred-at-no-millis" else iso_ms(now)
    data = {"eventId": eid, "type": etype, "occurredAt": occurred, "clientId": client.id, "connectionId": connection_id}
    data.update(extra)
    body = json.dumps({"id": eid, "type": etype, "created_at": created, "data": data}).encode()
    for url in list(client.webhooks):
        if VARIANT == "late-duplicate-webhooks":
            first = random.uniform(2.0, 4.0)
            DELIVERER.schedule(first, client, url, body)
            DELIVERER.schedule(first + random.uniform(1.0, 2.0), client, url, body)
        else:
            DELIVERER.schedule(random.uniform(0.05, 0.3), client, url, body)


def connection_error(status):
    if status == "failed_auth":
        return {"code": "invalid_credentials", "message": "The bank rejected the credentials."}
    if status == "error":
        return {"code": "unexpected_error", "message": "An unexpected error occurred while connecting."}
    if status == "mfa_required":
        return {"code": "mfa_required", "message": "The bank requires a second factor."}
    return None


# --------------------------------------------------------------------------------------------
# Connection queue: accepted actions are carried out in order, one step at a time


def enqueue(conn, steps):
    with LOCK:
        conn.queue.extend(steps)
        if not conn.worker_running:
            conn.worker_running = True
            threading.Thread(target=drain, args=(conn,), daemon=True).start()


def drain(conn):
    while True:
        time.sleep(STEP_DELAY)
        with LOCK:
            if not conn.queue:
                conn.worker_running = False
                return
            step = conn.queue.popleft()
            try:
                run_step(conn, step)
            except Exception as e:  # keep the queue alive
                print(f"step {step!r} failed: {e!r}", file=sys.stderr, flush=True)


def run_step(conn, step):
    kind = step[0]
    if kind == "status":
        new = step[1]
        previous = conn.status
        if new == "connected" and not conn.account_ids:
            build_accounts(conn)
        conn.status = new
        emit(conn.client, "connection." + new, conn.id, previousStatus=previous, error=connection_error(new))
        if new == "connected" and VARIANT == "background-sync-announced" and not conn.background_started:
            conn.background_started = True
            for delay in (1.5, 3.5):
                t = threading.Timer(delay, background_sync, args=(conn,))
                t.daemon = True
                t.start()
    elif kind == "update":
        acc = ACCOUNTS.get(step[1]) if step[1] else None
        if acc is None:
            acc = ACCOUNTS[conn.account_ids[0]]
        apply_update(conn, acc)
    elif kind == "delete":
        _, account_id, txn_id = step
        acc = ACCOUNTS.get(account_id) if account_id else None
        if txn_id is None:
            candidates = [acc] if acc else [ACCOUNTS[a] for a in conn.account_ids]
            for a in candidates:
                items = ordered_txns(a)
                if items:
                    acc, txn_id = a, items[0].id
                    break
            if txn_id is None:
                return
        else:
            acc = ACCOUNTS[TXN_INDEX[txn_id]]
        conn.pending_deletes.discard(txn_id)
        if VARIANT != "delete-not-applied":
            remove_txn(acc, txn_id)
        emit(conn.client, "transaction.deleted", conn.id, accountId=acc.id, transactionId=txn_id)


def apply_update(conn, acc):
    """A sync of one account: a new transaction, a new balance, a new lastSyncedAt."""
    rng = random.Random()
    today = utcnow().date()
    txn = random_txn(acc, rng, today, 0.3)
    if VARIANT == "silent-dedup-on-update":
        # Bug: the re-import replaces the newest existing transaction by a copy under a new id;
        # the old id disappears and no transaction.deleted announces it.
        items = sorted(acc.txns.values(), key=lambda t: t.key(), reverse=True)
        if items:
            old = items[0]
            remove_txn(acc, old.id)
            copy = Transaction(acc, old.amount, old.description, old.category, old.date, next_seq())
            add_txn(acc, copy)
    add_txn(acc, txn)
    acc.balance = round(acc.balance + txn.amount, 2)
    acc.available = round(acc.available + txn.amount, 2)
    acc.last_synced = utcnow()
    emit(conn.client, "accounts.updated", conn.id, accountId=acc.id)


def background_sync(conn):
    with LOCK:
        if conn.status != "connected" or not conn.account_ids:
            return
        acc = ACCOUNTS[random.choice(conn.account_ids)]
        apply_update(conn, acc)


# Transitions the driver may ask for: projected state -> steps
def plan(action, state):
    via = ["credentials_submitted", "verifying"]
    if action == "connect":
        if state in ("created", "failed_auth", "error", "disconnected"):
            return via + ["connected"]
        if state == "mfa_required":
            return ["verifying", "connected"]
    elif action == "fail_auth":
        if state in ("created", "failed_auth", "error", "disconnected"):
            return via + ["failed_auth"]
        if state == "mfa_required":
            return ["verifying", "failed_auth"]
        if state == "connected":
            return ["failed_auth"]  # the bank no longer accepts the stored credentials
    elif action == "require_mfa":
        if state in ("created", "failed_auth", "error", "disconnected"):
            return via + ["mfa_required"]
        if state == "connected":
            return ["mfa_required"]  # the bank asks for a second factor on a later sync
    elif action == "error":
        if state in ("created", "failed_auth", "disconnected"):
            return via + ["error"]
        if state == "mfa_required":
            return ["verifying", "error"]
        if state == "connected":
            return ["error"]
    elif action == "disconnect":
        if state != "disconnected":
            return ["disconnected"]
    return None


# --------------------------------------------------------------------------------------------
# HTTP


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def alt(status_none, status_alt):
    return status_alt if VARIANT == "alt-status-codes" else status_none


WIDGET_JS = """(function (global) {
  "use strict";
  var NAME = %(global)s;
  function open(options, connectionId, onSuccess) {
    var opts = (options && typeof options === "object") ? options
      : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    if (!opts.token || String(opts.token).indexOf("sess_") !== 0) {
      throw new Error(NAME + ".open: a widget token (sess_...) is required");
    }
    var doc = global.document;
    var box = null;
    if (doc && doc.body) {
      box = doc.createElement("div");
      box.setAttribute("role", "dialog");
      box.setAttribute("data-connection-id", String(opts.connectionId || ""));
      box.style.cssText = "position:fixed;inset:10%%;background:#fff;border:1px solid #888;padding:1em;z-index:2147483647";
      var title = doc.createElement("p");
      title.textContent = "Connect your bank account";
      box.appendChild(title);
      doc.body.appendChild(box);
    }
    return {
      close: function () { if (box && box.parentNode) { box.parentNode.removeChild(box); } },
      complete: function () {
        if (typeof opts.onSuccess === "function") {
          opts.onSuccess({ connectionId: opts.connectionId, institution: null });
        }
      }
    };
  }
  global[NAME] = { open: open, version: "1.0.0" };
})(typeof window !== "undefined" ? window : this);
"""


def widget_global():
    parts = [p for p in SERVICE.replace("_", "-").split("-") if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Bank"
    return name + "Connect"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAgg/1.0"

    def log_message(self, fmt, *args):
        pass

    # ---- plumbing

    def read_body(self):
        length = self.headers.get("Content-Length")
        if length:
            try:
                return self.rfile.read(int(length))
            except ValueError:
                return b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def send(self, status, body, content_type="application/json", extra_headers=None):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error_json(self, err):
        if VARIANT == "alt-status-codes":
            body = {"code": err.code, "message": err.message}
        else:
            body = {"error": {"code": err.code, "message": err.message}}
        self.send(err.status, body)

    def client(self):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            raise ApiError(alt(401, 403), "unauthorized", "Missing or malformed Authorization header.")
        key = auth[len("Bearer "):].strip()
        with LOCK:
            client = CLIENTS_BY_KEY.get(key)
        if client is None:
            raise ApiError(alt(401, 403), "unauthorized", "Invalid API key.")
        return client

    def dispatch(self, method):
        try:
            self.body = self.read_body()
            parsed = urllib.parse.urlsplit(self.path)
            parts = [urllib.parse.unquote(p) for p in parsed.path.split("/") if p != ""]
            query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
            self.route(method, parts, query)
        except ApiError as e:
            self.send_error_json(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # pragma: no cover
            print(f"internal error: {e!r}", file=sys.stderr, flush=True)
            try:
                self.send_error_json(ApiError(500, "internal_error", "Internal error."))
            except Exception:
                pass

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_OPTIONS(self):
        self.read_body()
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Content-Type")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def method_not_allowed(self, allowed):
        raise ApiError(405, "method_not_allowed", f"Use {allowed}.")

    # ---- routes

    def route(self, method, parts, query):
        if len(parts) == 2 and parts[0] == "widget":
            if parts[1] == f"{SERVICE}-connect.js":
                if method != "GET":
                    self.method_not_allowed("GET")
                js = (WIDGET_JS % {"global": json.dumps(widget_global())}).encode()
                self.send(200, js, "application/javascript; charset=utf-8", {"Access-Control-Allow-Origin": "*"})
                return
            raise ApiError(404, "not_found", "No such widget script.")
        if parts[:1] == ["v1"]:
            return self.route_v1(method, parts[1:], query)
        if parts[:1] == ["admin"]:
            return self.route_admin(method, parts[1:])
        raise ApiError(404, "not_found", "No such route.")

    def route_v1(self, method, parts, query):
        client = self.client()
        if parts == ["connections"]:
            if method != "POST":
                self.method_not_allowed("POST")
            return self.create_connection(client)
        if len(parts) == 3 and parts[0] == "connections" and parts[2] == "accounts":
            if method != "GET":
                self.method_not_allowed("GET")
            return self.connection_accounts(client, parts[1])
        if len(parts) == 2 and parts[0] == "accounts":
            if method != "GET":
                self.method_not_allowed("GET")
            with LOCK:
                acc = self.own_account(client, parts[1])
                body = account_json(acc)
            return self.send(200, body)
        if len(parts) == 3 and parts[0] == "accounts" and parts[2] == "transactions":
            if method != "GET":
                self.method_not_allowed("GET")
            return self.transactions(client, parts[1], query)
        raise ApiError(404, "not_found", "No such route.")

    def own_account(self, client, account_id):
        acc = ACCOUNTS.get(account_id)
        if acc is None:
            raise ApiError(404, "account_not_found", "No such account.")
        if acc.client is not client:
            raise ApiError(alt(404, 403), "account_not_found" if VARIANT != "alt-status-codes" else "forbidden", "No such account.")
        return acc

    def create_connection(self, client):
        with LOCK:
            conn = Connection(client)
            CONNECTIONS[conn.id] = conn
            emit(client, "connection.created", conn.id, previousStatus=None, error=None)
            body = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.widget_token}
        self.send(alt(200, 201), body)

    def connection_accounts(self, client, connection_id):
        with LOCK:
            conn = CONNECTIONS.get(connection_id)
            if conn is None:
                raise ApiError(404, "connection_not_found", "No such connection.")
            if conn.client is not client:
                raise ApiError(alt(404, 403), "connection_not_found" if VARIANT != "alt-status-codes" else "forbidden", "No such connection.")
            if conn.status != "connected":
                raise ApiError(alt(409, 422), "connection_not_connected", f"The connection is {conn.status.upper()}, not CONNECTED.")
            body = []
            for aid in conn.account_ids:
                acc = ACCOUNTS[aid]
                body.append(account_json(acc))
                if VARIANT == "accounts-duplicate-multicurrency" and acc.currency_balances:
                    # Bug: a join on the currency balances yields one row per currency.
                    for cb in acc.currency_balances:
                        row = account_json(acc)
                        row["currency"] = cb["currency"]
                        row["balance"] = cb["balance"]
                        row["availableBalance"] = cb["availableBalance"]
                        body.append(row)
        self.send(200, body)

    def transactions(self, client, account_id, query):
        limit = DEFAULT_LIMIT
        if "limit" in query:
            raw = query["limit"][-1].strip()
            try:
                limit = int(raw)
            except ValueError:
                raise ApiError(alt(400, 422), "invalid_limit", "limit must be a positive integer.")
            if limit < 1:
                raise ApiError(alt(400, 422), "invalid_limit", "limit must be a positive integer.")
            limit = min(limit, MAX_LIMIT)
        after = query.get("starting_after", [None])[-1]
        with LOCK:
            acc = self.own_account(client, account_id)
            items = ordered_txns(acc)
            if after is not None and after != "":
                cursor_key = acc.keys.get(after)
                if cursor_key is None:
                    raise ApiError(alt(400, 422), "invalid_cursor", "starting_after names no transaction of this account.")
                items = [t for t in items if after_in_order(t.key(), cursor_key)]
                if VARIANT == "cursor-skips-one":
                    items = items[1:]  # Bug: the item right after the cursor is skipped
            size = limit
            if VARIANT == "limit-plus-one" and len(items) > limit:
                size = limit + 1  # Bug: an inclusive end index
            page = items[:size]
            has_more = len(items) > size
            body = {"data": [txn_json(t) for t in page], "has_more": has_more}
            if page and (has_more or VARIANT == "next-cursor-always"):
                body["next_cursor"] = page[-1].id
        self.send(200, body)

    # ---- admin (driver)

    def route_admin(self, method, parts):
        client = self.client()
        if parts == ["webhooks"]:
            try:
                url = json.loads(self.body or b"{}").get("url")
            except ValueError:
                url = None
            if not url:
                raise ApiError(400, "invalid_request", "url is required.")
            with LOCK:
                if method == "POST":
                    if url not in client.webhooks:
                        client.webhooks.append(url)
                elif method == "DELETE":
                    if url in client.webhooks:
                        client.webhooks.remove(url)
                else:
                    self.method_not_allowed("POST, DELETE")
            return self.send(200, {"clientId": client.id, "webhooks": len(client.webhooks)})
        if len(parts) == 3 and parts[0] == "connections" and method == "POST":
            try:
                args = json.loads(self.body or b"{}")
            except ValueError:
                args = {}
            return self.admin_action(parts[1], parts[2], args)
        raise ApiError(404, "not_found", "No such admin route.")

    def admin_action(self, connection_id, action, args):
        with LOCK:
            conn = CONNECTIONS.get(connection_id)  # any client's connection: the admin acts for the service
            if conn is None:
                raise ApiError(404, "connection_not_found", "No such connection.")
            state = conn.projected
            if action in ("connect", "fail_auth", "require_mfa", "error", "disconnect"):
                steps = plan(action, state)
                if steps is None:
                    raise ApiError(409, "invalid_transition", f"{action} is not possible from {state}.")
                conn.projected = steps[-1]
                enqueue(conn, [("status", s) for s in steps])
                return self.send(202, {"accepted": action, "to": steps[-1].upper()})
            if action == "update_accounts":
                if state != "connected":
                    raise ApiError(409, "not_connected", f"The connection will be {state}.")
                account_id = args.get("accountId")
                if account_id and (account_id not in ACCOUNTS or ACCOUNTS[account_id].connection_id != conn.id):
                    raise ApiError(404, "account_not_found", "No such account on this connection.")
                enqueue(conn, [("update", account_id)])
                return self.send(202, {"accepted": action})
            if action == "delete_transaction":
                if state != "connected":
                    raise ApiError(409, "not_connected", f"The connection will be {state}.")
                account_id = args.get("accountId")
                txn_id = args.get("transactionId")
                if account_id and (account_id not in ACCOUNTS or ACCOUNTS[account_id].connection_id != conn.id):
                    raise ApiError(404, "account_not_found", "No such account on this connection.")
                if txn_id:
                    owner = TXN_INDEX.get(txn_id)
                    if owner is None or ACCOUNTS[owner].connection_id != conn.id:
                        raise ApiError(404, "transaction_not_found", "No such transaction on this connection.")
                    if txn_id not in ACCOUNTS[owner].txns or txn_id in conn.pending_deletes:
                        raise ApiError(409, "already_deleted", "The transaction is already deleted.")
                    conn.pending_deletes.add(txn_id)
                enqueue(conn, [("delete", account_id, txn_id or None)])
                return self.send(202, {"accepted": action})
        raise ApiError(404, "unknown_action", f"Unknown action {action}.")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    global VARIANT, SERVICE, DELIVERER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--variant", default="none")
    parser.add_argument("--service", default="acme")
    opts = parser.parse_args()
    if opts.variant not in VARIANTS:
        print(f"unknown variant {opts.variant!r}; known: {', '.join(sorted(VARIANTS))}", file=sys.stderr)
        sys.exit(2)
    VARIANT = opts.variant
    SERVICE = opts.service
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        print("FOREIGN_API_KEYS is empty: no client could call the API", file=sys.stderr)
        sys.exit(2)
    for i, key in enumerate(keys):
        c = Client(key, i)
        CLIENTS.append(c)
        CLIENTS_BY_KEY[key] = c
    DELIVERER = Deliverer()
    server = Server((opts.host, opts.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    print(f"variant {VARIANT}, service {SERVICE}, {len(CLIENTS)} clients", file=sys.stderr, flush=True)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (KeyboardInterrupt, OSError):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
