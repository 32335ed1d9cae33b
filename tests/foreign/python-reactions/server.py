#!/usr/bin/env python3
"""A Bank Connection Aggregation Service written from its interface specification alone.

Usage: server.py --port 0 --variant NAME --service NAME
API keys come from FOREIGN_API_KEYS (comma-separated, one client per key).
Prints "PORT <n>" once listening on 127.0.0.1; exits when stdin is closed.
Standard library only. See VARIANTS.md for the variants.
"""
import argparse
import base64
import copy
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
import urllib.request
import uuid
from collections import deque
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

VIOLATIONS = [
    "connected-announced-early",
    "balance-after-event",
    "stale-account-list",
    "accounts-after-disconnect",
    "previous-status-skip",
    "event-id-split",
    "delete-event-wrong-account",
    "connected-fanout",
    "shared-client-id",
    "cursor-as-offset",
]
LEGAL = [
    "late-delivery",
    "duplicate-deliveries",
    "opaque-cursor",
    "oldest-first-small-pages",
    "background-sync",
    "other-shapes",
    "plain-errors",
    "gone-after-disconnect",
]
VARIANTS = ["none"] + VIOLATIONS + LEGAL

VARIANT = "none"
SERVICE = "acme"

STEP_DELAY = 0.12          # time between two states of one driven action
DELIVERY_DELAY = 0.05      # time between a change and the first delivery try
RETRY_BACKOFF = [0.5, 1.0, 2.0]
LAG_AFTER_DELIVERY = 4.0   # violations that apply a change this long after its event went out

CREATED, CREDS, VERIFYING, CONNECTED = "CREATED", "CREDENTIALS_SUBMITTED", "VERIFYING", "CONNECTED"
MFA, FAILED_AUTH, ERROR, DISCONNECTED = "MFA_REQUIRED", "FAILED_AUTH", "ERROR", "DISCONNECTED"

_ALNUM_UP = string.ascii_uppercase + string.digits
_sysrand = random.SystemRandom()


def v(name):
    return VARIANT == name


def now_utc():
    return datetime.now(timezone.utc)


def iso_ms(dt=None):
    dt = dt or now_utc()
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def new_id(prefix):
    if v("other-shapes"):
        return prefix + str(uuid.uuid4())
    return prefix + "".join(_sysrand.choice(_ALNUM_UP) for _ in range(26))


def log(*a):
    if os.environ.get("FOREIGN_DEBUG"):
        print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- state

class Client:
    def __init__(self, key):
        self.key = key
        self.id = new_id("cli_")
        self.webhook_url = None


class Conn:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = CREATED
        self.projected = CREATED       # status once every accepted action is carried through
        self.widget_token = new_id("sess_")
        self.created_at = iso_ms()
        self.history = ["created"]     # lower-case states entered, in order
        self.accounts = []             # account ids, in creation order
        self.snapshot = None           # stale-account-list: the list as read at connect time
        self.actions = deque()
        self.worker_active = False
        self.bg_count = 0
        self.bg_started = False


class Store:
    def __init__(self, keys):
        self.lock = threading.RLock()
        self.clients = [Client(k) for k in keys]
        self.by_key = {c.key: c for c in self.clients}
        self.connections = {}
        self.accounts = {}     # id -> {"pub": dict, "conn": id, "txns": {id: [seq, deleted, pub]}}
        self.seq = 0
        self.offsets = {}      # cursor-as-offset: (account id, cursor) -> offset in the list

    def next_seq(self):
        self.seq += 1
        return self.seq


STORE = None

# --------------------------------------------------------------------------- webhooks

_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(url, body_bytes):
    req = urllib.request.Request(url, data=body_bytes, method="POST", headers={
        "Content-Type": "application/json",
        "User-Agent": "%s-webhooks/1.0" % SERVICE,
    })
    try:
        with _NO_PROXY_OPENER.open(req, timeout=5) as resp:
            resp.read()
            return 200 <= resp.status < 300
    except urllib.error.HTTPError as e:
        try:
            e.read()
        except Exception:
            pass
        return False
    except Exception:
        return False


def deliver_once_with_retries(targets, body_bytes):
    """Deliver to each target client's current address; a few retries on failure."""
    for client in targets:
        for attempt in range(len(RETRY_BACKOFF) + 1):
            url = client.webhook_url
            if not url:
                break   # nothing registered (or unregistered): drop, stop retrying
            if post_json(url, body_bytes):
                break
            if attempt < len(RETRY_BACKOFF):
                time.sleep(RETRY_BACKOFF[attempt])


class Deliverer:
    """One ordered queue per connection, drained by a background thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.queues = {}
        self.active = set()

    def enqueue(self, key, item):
        with self.lock:
            self.queues.setdefault(key, deque()).append(item)
            if key not in self.active:
                self.active.add(key)
                threading.Thread(target=self._run, args=(key,), daemon=True).start()

    def _run(self, key):
        while True:
            with self.lock:
                q = self.queues.get(key)
                if not q:
                    self.active.discard(key)
                    self.queues.pop(key, None)
                    return
                item = q.popleft()
            not_before, body, targets, after = item
            wait = not_before - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            data = json.dumps(body).encode()
            try:
                deliver_once_with_retries(targets, data)
                if v("duplicate-deliveries"):
                    # a second copy, same event id, not ordered against later events
                    t = threading.Timer(0.7, deliver_once_with_retries, args=(targets, data))
                    t.daemon = True
                    t.start()
            finally:
                if after:
                    try:
                        after()
                    except Exception as e:  # pragma: no cover
                        log("after-delivery hook failed", e)


DELIVERER = Deliverer()


def emit(conn, body, after=None):
    """Queue an event for delivery to the connection's client (after the change is visible)."""
    targets = [conn.client]
    if v("connected-fanout") and body["type"] == "connection.connected":
        targets = targets + [c for c in STORE.clients if c is not conn.client]
    delay = DELIVERY_DELAY
    if v("late-delivery"):
        delay = _sysrand.uniform(1.5, 2.0)
    DELIVERER.enqueue(conn.id, (time.monotonic() + delay, body, targets, after))


def make_event(conn, etype, extra):
    eid = new_id("evt_")
    ts = iso_ms()
    client_id = STORE.clients[0].id if v("shared-client-id") else conn.client.id
    data = {
        "eventId": eid,
        "type": etype,
        "occurredAt": ts,
        "clientId": client_id,
        "connectionId": conn.id,
    }
    data.update(extra)
    if v("event-id-split") and not etype.startswith("connection."):
        data["eventId"] = new_id("evt_")
    body = {"id": eid, "type": etype, "created_at": ts, "data": data}
    if v("other-shapes"):
        body["api_version"] = "v1"
        body["livemode"] = False
    return body


ERRORS_FOR = {
    FAILED_AUTH: {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    ERROR: {"code": "unexpected_error", "message": "An unexpected error occurred."},
    MFA: {"code": "mfa_required", "message": "The bank requires a second factor."},
}


def connection_event(conn, new_status, prev_lower):
    return make_event(conn, "connection." + new_status.lower(), {
        "previousStatus": prev_lower,
        "error": ERRORS_FOR.get(new_status),
    })


# --------------------------------------------------------------------------- data

INSTITUTION = {"id": "ins_ACMETESTBANK01", "name": "Acme Test Bank", "logo": None}

ACCOUNT_TEMPLATES = [
    # name, type, currency, base balance, number of transactions
    ("Everyday Checking", "checking", "USD", 2450.17, 57),
    ("High Yield Savings", "savings", "EUR", 10234.50, 8),
    ("Travel Rewards Card", "credit_card", "USD", -812.44, 23),
    ("Self-Directed Brokerage", "brokerage", "USD", 15320.00, 4),
    ("Retirement Plan", "pension", "USD", 48210.33, 3),
]

DEBITS = [("Green Grocer Market", "groceries"), ("City Transit", "transport"),
          ("Corner Cafe", "dining"), ("Power & Light Co", "utilities"),
          ("Online Bookstore", "shopping"), ("Fuel Station 24", "transport")]
CREDITS = [("Payroll ACME Corp", "income"), ("Interest payment", "interest"),
           ("Refund Online Bookstore", "refund")]


def money(x):
    return round(x, 2)


def make_txn(acc, date, created_dt, amount, desc, category):
    tid = new_id("txn_")
    pub = {
        "id": tid,
        "accountId": acc["pub"]["id"],
        "amount": money(amount),
        "currency": acc["pub"]["currency"],
        "description": desc,
        "transactionDate": date.strftime("%Y-%m-%d"),
        "category": category,
        "status": "posted",
        "createdAt": iso_ms(created_dt),
    }
    if v("other-shapes"):
        pub["merchantName"] = desc.split(" ")[0]
    acc["txns"][tid] = [STORE.next_seq(), False, pub]
    return tid


def generate_accounts(conn):
    rng = random.Random(conn.id)
    now = now_utc()
    today = now.date()
    for i, (name, typ, cur, base, ntx) in enumerate(ACCOUNT_TEMPLATES):
        balance = money(base + rng.uniform(-50, 50))
        aid = new_id("acc_")
        pub = {
            "id": aid,
            "connectionId": conn.id,
            "name": name,
            "type": typ,
            "currency": cur,
            "balance": balance,
            "availableBalance": balance,
            "accountNumber": "****%04d" % rng.randint(0, 9999),
            "createdAt": iso_ms(now),
            "lastSyncedAt": iso_ms(now),
            "institution": dict(INSTITUTION),
        }
        if typ == "credit_card":
            pub["creditLimit"] = {"amount": 5000.0, "currency": cur}
            pub["availableBalance"] = money(5000.0 + balance)
            pub["currencyBalances"] = [{"currency": "EUR", "balance": money(-rng.uniform(10, 90))}]
        if typ in ("brokerage", "pension"):
            pub["positions"] = [
                {"symbol": "VTI", "name": "Total Stock Market ETF", "quantity": 12.5,
                 "marketValue": money(3120.5 + rng.uniform(-20, 20)), "currency": cur},
                {"symbol": "BND", "name": "Total Bond Market ETF", "quantity": 40.0,
                 "marketValue": money(2905.2 + rng.uniform(-20, 20)), "currency": cur},
            ]
        if v("other-shapes"):
            pub["nickname"] = None
            pub["displayOrder"] = i
        acc = {"pub": pub, "conn": conn.id, "txns": {}}
        STORE.accounts[aid] = acc
        conn.accounts.append(aid)
        # oldest first, so that sequence numbers grow with time
        for k in range(ntx - 1, -1, -1):
            date = today - timedelta(days=1 + k // 2)
            created = datetime(date.year, date.month, date.day, 9 + (k % 2) * 6, rng.randint(0, 59),
                               rng.randint(0, 59), rng.randint(0, 999) * 1000, tzinfo=timezone.utc)
            if rng.random() < 0.2:
                desc, cat = rng.choice(CREDITS)
                amount = rng.uniform(20, 900)
            else:
                desc, cat = rng.choice(DEBITS)
                amount = -rng.uniform(3, 180)
            make_txn(acc, date, created, amount, desc, cat)


def live_txns(acc):
    items = [t for t in acc["txns"].values() if not t[1]]
    items.sort(key=lambda t: (t[2]["transactionDate"], t[0]), reverse=not v("oldest-first-small-pages"))
    return items


def sort_key(t):
    return (t[2]["transactionDate"], t[0])


def apply_account_change(acc, rng=None):
    """Change an account: a new posted transaction and the balance it moves."""
    rng = rng or _sysrand
    pub = acc["pub"]
    if rng.random() < 0.3:
        desc, cat = rng.choice(CREDITS)
        amount = money(rng.uniform(20, 400))
    else:
        desc, cat = rng.choice(DEBITS)
        amount = money(-rng.uniform(3, 120))
    now = now_utc()
    make_txn(acc, now.date(), now, amount, desc, cat)
    pub["balance"] = money(pub["balance"] + amount)
    if pub["type"] == "credit_card":
        pub["availableBalance"] = money(pub["creditLimit"]["amount"] + pub["balance"])
    else:
        pub["availableBalance"] = pub["balance"]
    pub["lastSyncedAt"] = iso_ms(now)


# --------------------------------------------------------------------------- lifecycle

def path_for(action, proj):
    """The states an action goes through from the projected state, or None if refused."""
    relink = (CREATED, FAILED_AUTH, ERROR, DISCONNECTED)
    if action == "connect":
        if proj in relink:
            return [CREDS, VERIFYING, CONNECTED]
        if proj == MFA:
            return [VERIFYING, CONNECTED]
    elif action == "fail_auth":
        if proj in relink:
            return [CREDS, VERIFYING, FAILED_AUTH]
        if proj == MFA:
            return [VERIFYING, FAILED_AUTH]
    elif action == "require_mfa":
        if proj in relink:
            return [CREDS, VERIFYING, MFA]
    elif action == "error":
        if proj not in (ERROR, DISCONNECTED):
            return [ERROR]
    elif action == "disconnect":
        if proj != DISCONNECTED:
            return [DISCONNECTED]
    return None


def enqueue_action(conn, fn):
    """Run fn on the connection's worker, after every action accepted before it."""
    with STORE.lock:
        conn.actions.append(fn)
        if conn.worker_active:
            return
        conn.worker_active = True
    threading.Thread(target=_worker, args=(conn,), daemon=True).start()


def _worker(conn):
    while True:
        with STORE.lock:
            if not conn.actions:
                conn.worker_active = False
                return
            fn = conn.actions.popleft()
        time.sleep(STEP_DELAY)
        try:
            fn()
        except Exception as e:  # pragma: no cover
            log("action failed:", repr(e))


def enter_state(conn, new_status):
    if new_status == CONNECTED and v("connected-announced-early"):
        return _enter_connected_early(conn)
    with STORE.lock:
        prev_lower = conn.status.lower()
        if v("previous-status-skip") and new_status == CONNECTED and len(conn.history) >= 2:
            prev_lower = conn.history[-2]
        conn.status = new_status
        conn.history.append(new_status.lower())
        if new_status == CONNECTED:
            if not conn.accounts:
                generate_accounts(conn)
            conn.snapshot = [copy.deepcopy(STORE.accounts[a]["pub"]) for a in conn.accounts]
        body = connection_event(conn, new_status, prev_lower)
    emit(conn, body)
    if new_status == CONNECTED and v("background-sync"):
        start_background_sync(conn)


def _enter_connected_early(conn):
    """Violation: connection.connected goes out while the status is still VERIFYING."""
    done = threading.Event()
    with STORE.lock:
        body = connection_event(conn, CONNECTED, conn.status.lower())

    def flip():
        with STORE.lock:
            conn.status = CONNECTED
            conn.history.append("connected")
            if not conn.accounts:
                generate_accounts(conn)
        done.set()

    def after():
        t = threading.Timer(LAG_AFTER_DELIVERY, flip)
        t.daemon = True
        t.start()

    emit(conn, body, after=after)
    done.wait(60)


def do_update(conn, account_id):
    with STORE.lock:
        if conn.status != CONNECTED or not conn.accounts:
            return
        aid = account_id if account_id in conn.accounts else conn.accounts[0]
        acc = STORE.accounts[aid]
        if not v("balance-after-event"):
            apply_account_change(acc)
        body = make_event(conn, "accounts.updated", {"accountId": aid})
    if v("balance-after-event"):
        done = threading.Event()

        def apply_late():
            with STORE.lock:
                apply_account_change(acc)
            done.set()

        def after():
            t = threading.Timer(LAG_AFTER_DELIVERY, apply_late)
            t.daemon = True
            t.start()

        emit(conn, body, after=after)
        done.wait(60)
    else:
        emit(conn, body)


def pick_transaction(conn, account_id):
    """The transaction a delete without an id removes: the first one listed in the account."""
    candidates = [account_id] if account_id else list(conn.accounts)
    for aid in candidates:
        acc = STORE.accounts.get(aid)
        if acc:
            items = live_txns(acc)
            if items:
                return aid, items[0][2]["id"]
    return None, None


def do_delete(conn, account_id, txn_id):
    with STORE.lock:
        if conn.status != CONNECTED:
            return
        if txn_id:
            owner = None
            for aid in conn.accounts:
                if txn_id in STORE.accounts[aid]["txns"]:
                    owner = aid
                    break
            if owner is None or STORE.accounts[owner]["txns"][txn_id][1]:
                return
        else:
            owner, txn_id = pick_transaction(conn, account_id)
            if not txn_id:
                return
        STORE.accounts[owner]["txns"][txn_id][1] = True
        announced = owner
        if v("delete-event-wrong-account"):
            i = conn.accounts.index(owner)
            announced = conn.accounts[(i + 1) % len(conn.accounts)]
        body = make_event(conn, "transaction.deleted", {"accountId": announced, "transactionId": txn_id})
    emit(conn, body)


def start_background_sync(conn):
    """Legal variant: the bank's side changes accounts on its own, each change announced."""
    with STORE.lock:
        if conn.bg_started:
            return
        conn.bg_started = True

    def tick():
        with STORE.lock:
            go = (conn.status == CONNECTED and conn.projected == CONNECTED
                  and conn.bg_count < 4 and conn.accounts)
            if go:
                conn.bg_count += 1
                aid = _sysrand.choice(conn.accounts)
        if not go:
            with STORE.lock:
                conn.bg_started = False
            return
        enqueue_action(conn, lambda: do_update(conn, aid))
        t = threading.Timer(3.0, tick)
        t.daemon = True
        t.start()

    t = threading.Timer(3.0, tick)
    t.daemon = True
    t.start()


# --------------------------------------------------------------------------- admin (driver)

class AdminError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def admin_action(p):
    action = p.get("action")
    if action == "register_webhook":
        c1 = STORE.by_key.get(p.get("apiKey") or "")
        if not c1:
            raise AdminError(400, "the client key is not one of this server's keys")
        with STORE.lock:
            c1.webhook_url = p.get("webhookUrl") or None
            if p.get("secondApiKey"):
                c2 = STORE.by_key.get(p["secondApiKey"])
                if not c2:
                    raise AdminError(400, "the second key is not one of this server's keys")
                c2.webhook_url = p.get("secondWebhookUrl") or None
        return {"ok": True, "webhooks": "per-client"}
    if action == "unregister_webhook":
        with STORE.lock:
            for c in STORE.clients:
                c.webhook_url = None
        return {"ok": True}

    cid = p.get("connectionId")
    with STORE.lock:
        conn = STORE.connections.get(cid or "")
        if not conn:
            raise AdminError(404, "no such connection")
        proj = conn.projected
        if action in ("connect", "fail_auth", "require_mfa", "error", "disconnect"):
            steps = path_for(action, proj)
            if steps is None:
                raise AdminError(409, "%s refused from %s" % (action, proj))
            conn.projected = steps[-1]
            for s in steps:
                enqueue_action(conn, (lambda st: lambda: enter_state(conn, st))(s))
            return {"ok": True, "from": proj, "to": steps[-1]}
        if action == "update_accounts":
            if proj != CONNECTED:
                raise AdminError(409, "update_accounts refused from %s" % proj)
            aid = p.get("accountId") or None
            if aid and conn.accounts and aid not in conn.accounts:
                raise AdminError(404, "the account is not one of this connection's")
            enqueue_action(conn, lambda: do_update(conn, aid))
            return {"ok": True}
        if action == "delete_transaction":
            if proj != CONNECTED:
                raise AdminError(409, "delete_transaction refused from %s" % proj)
            aid = p.get("accountId") or None
            tid = p.get("transactionId") or None
            if aid and conn.accounts and aid not in conn.accounts:
                raise AdminError(404, "the account is not one of this connection's")
            if conn.accounts:
                if tid:
                    owner = next((a for a in conn.accounts if tid in STORE.accounts[a]["txns"]), None)
                    if owner is None:
                        raise AdminError(404, "the transaction is not one of this connection's")
                    if STORE.accounts[owner]["txns"][tid][1]:
                        raise AdminError(409, "the transaction is already deleted")
                elif conn.status == CONNECTED and not conn.actions:
                    if pick_transaction(conn, aid)[1] is None:
                        raise AdminError(409, "no transaction left to delete")
            enqueue_action(conn, lambda: do_delete(conn, aid, tid))
            return {"ok": True}
    raise AdminError(501, "unsupported action")


# --------------------------------------------------------------------------- widget

WIDGET_JS = r"""/* %(service)s connect widget */
(function (global) {
  'use strict';
  var BASE = %(base)s;
  try {
    var cs = document.currentScript;
    if (cs && cs.src) { BASE = cs.src.replace(/\/widget\/[^\/?#]*([?#].*)?$/, ''); }
  } catch (e) { /* keep the embedded base */ }

  function call(fn, arg) {
    if (typeof fn !== 'function') { return; }
    try { fn(arg); } catch (e) { if (global.console) { global.console.error(e); } }
  }

  function open(options, connectionId, onSuccess) {
    var o = (options && typeof options === 'object') ? options
      : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    var token = o.token || o.widgetToken || '';
    var cid = o.connectionId || '';
    var url = BASE + '/widget/session?token=' + encodeURIComponent(token) +
      '&connectionId=' + encodeURIComponent(cid);
    var closed = false;
    var handle = { close: function () { closed = true; } };
    try {
      if (typeof fetch !== 'function') {
        setTimeout(function () { if (!closed) { call(o.onSuccess, { connectionId: cid }); } }, 0);
        return handle;
      }
      fetch(url, { method: 'GET', credentials: 'omit', mode: 'cors' })
        .then(function (r) {
          return r.json().then(function (body) { return { ok: r.ok, body: body }; });
        })
        .then(function (res) {
          if (closed) { return; }
          if (res.ok) {
            call(o.onSuccess, { connectionId: res.body.connectionId, status: res.body.status,
                                institution: res.body.institution });
          } else {
            call(o.onError, res.body);
          }
        })
        .catch(function (err) { if (!closed) { call(o.onError, { message: String(err) }); } });
    } catch (e) {
      call(o.onError, { message: String(e) });
    }
    return handle;
  }

  global[%(global)s] = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
"""


def widget_global_name():
    parts = re.split(r"[^A-Za-z0-9]+", SERVICE)
    name = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Bank"
    if name[0].isdigit():
        name = "W" + name
    return name + "Connect"


# --------------------------------------------------------------------------- HTTP

class HttpError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


PLAIN_ERROR_STATUS = {401: 403, 409: 404, 400: 422}

RE_CONN_ACCOUNTS = re.compile(r"^/v1/connections/([^/]+)/accounts$")
RE_CONN = re.compile(r"^/v1/connections/([^/]+)$")
RE_ACC_TXNS = re.compile(r"^/v1/accounts/([^/]+)/transactions$")
RE_ACC = re.compile(r"^/v1/accounts/([^/]+)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankService/1.0"
    sys_version = ""

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        log("%s - %s" % (self.address_string(), fmt % args))

    # -- helpers
    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, body, ctype="application/json", extra=None):
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body or b""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, val in (extra or {}).items():
            self.send_header(k, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, e, extra=None):
        status = e.status
        if v("plain-errors"):
            status = PLAIN_ERROR_STATUS.get(status, status)
            self._send(status, "%s: %s\n" % (e.code, e.message), "text/plain; charset=utf-8", extra)
        else:
            self._send(status, {"error": {"code": e.code, "message": e.message}}, extra=extra)

    def _client(self):
        auth = self.headers.get("Authorization") or ""
        m = re.match(r"^Bearer\s+(\S+)\s*$", auth)
        client = STORE.by_key.get(m.group(1)) if m else None
        if not client:
            raise HttpError(401, "unauthorized", "missing or invalid API key")
        return client

    def _conn_of(self, client, cid):
        conn = STORE.connections.get(cid)
        if not conn or conn.client is not client:
            raise HttpError(404, "not_found", "no such connection")
        return conn

    def _acc_of(self, client, aid):
        acc = STORE.accounts.get(aid)
        if not acc:
            raise HttpError(404, "not_found", "no such account")
        conn = STORE.connections[acc["conn"]]
        if conn.client is not client:
            raise HttpError(404, "not_found", "no such account")
        if v("gone-after-disconnect") and conn.status == DISCONNECTED:
            raise HttpError(404, "not_found", "the account is no longer linked")
        return acc, conn

    # -- methods
    def do_OPTIONS(self):
        self._read_body()
        self._send(204, b"", "text/plain", {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": "GET, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": "600",
        })

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method):
        body = self._read_body()
        parts = urlsplit(self.path)
        path = parts.path
        query = parse_qs(parts.query, keep_blank_values=True)
        try:
            if path == "/__admin/action":
                if method != "POST":
                    raise HttpError(405, "method_not_allowed", "POST only")
                return self._admin(body)
            if path.startswith("/widget/"):
                return self._widget(method, path, query)
            if path.startswith("/v1/") or path == "/v1":
                return self._api(method, path, query)
            raise HttpError(404, "not_found", "no such route")
        except HttpError as e:
            cors = {"Access-Control-Allow-Origin": "*"} if path.startswith("/widget/") else None
            if e.status == 401:
                cors = dict(cors or {}, **{"WWW-Authenticate": "Bearer"})
            self._error(e, cors)
        except Exception as e:  # pragma: no cover
            log("internal error", repr(e))
            self._error(HttpError(500, "internal_error", "internal error"))

    def _admin(self, body):
        try:
            p = json.loads(body or b"{}")
        except ValueError:
            raise HttpError(400, "bad_request", "body is not JSON")
        try:
            res = admin_action(p)
        except AdminError as e:
            return self._send(e.status, {"error": e.message})
        self._send(200, res)

    def _widget(self, method, path, query):
        if method != "GET":
            raise HttpError(405, "method_not_allowed", "GET only")
        if path == "/widget/%s-connect.js" % SERVICE:
            host = self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_address[1]
            js = WIDGET_JS % {"service": SERVICE, "base": json.dumps("http://" + host),
                              "global": json.dumps(widget_global_name())}
            return self._send(200, js, "application/javascript; charset=utf-8",
                              {"Access-Control-Allow-Origin": "*"})
        if path == "/widget/session":
            token = (query.get("token") or [""])[0]
            cid = (query.get("connectionId") or [""])[0]
            with STORE.lock:
                conn = STORE.connections.get(cid)
                if not conn or not token or not secrets.compare_digest(conn.widget_token, token):
                    raise HttpError(404, "not_found", "unknown widget session")
                res = {"connectionId": conn.id, "status": conn.status, "institution": dict(INSTITUTION)}
            return self._send(200, res, extra={"Access-Control-Allow-Origin": "*"})
        raise HttpError(404, "not_found", "no such widget resource")

    def _api(self, method, path, query):
        client = self._client()
        if path == "/v1/connections":
            if method != "POST":
                raise HttpError(405, "method_not_allowed", "POST only")
            return self._create(client)
        m = RE_CONN_ACCOUNTS.match(path)
        if m:
            if method != "GET":
                raise HttpError(405, "method_not_allowed", "GET only")
            return self._conn_accounts(client, m.group(1))
        m = RE_ACC_TXNS.match(path)
        if m:
            if method != "GET":
                raise HttpError(405, "method_not_allowed", "GET only")
            return self._transactions(client, m.group(1), query)
        m = RE_ACC.match(path)
        if m:
            if method != "GET":
                raise HttpError(405, "method_not_allowed", "GET only")
            with STORE.lock:
                acc, _ = self._acc_of(client, m.group(1))
                res = copy.deepcopy(acc["pub"])
            return self._send(200, res)
        m = RE_CONN.match(path)
        if m:
            if method != "GET":
                raise HttpError(405, "method_not_allowed", "GET only")
            with STORE.lock:
                conn = self._conn_of(client, m.group(1))
                res = {"connectionId": conn.id, "status": conn.status, "createdAt": conn.created_at}
            return self._send(200, res)
        raise HttpError(404, "not_found", "no such route")

    def _create(self, client):
        with STORE.lock:
            conn = Conn(client)
            STORE.connections[conn.id] = conn
            res = {"connectionId": conn.id, "status": CREATED, "widgetToken": conn.widget_token}
            if v("other-shapes"):
                res["createdAt"] = conn.created_at
                res["widgetTokenExpiresAt"] = iso_ms(now_utc() + timedelta(minutes=30))
            body = connection_event(conn, CREATED, None)
        emit(conn, body)
        self._send(201 if v("other-shapes") else 200, res)

    def _conn_accounts(self, client, cid):
        with STORE.lock:
            conn = self._conn_of(client, cid)
            ok = conn.status == CONNECTED
            if v("accounts-after-disconnect") and conn.status == DISCONNECTED and conn.accounts:
                ok = True
            if not ok:
                raise HttpError(409, "connection_not_connected",
                                "accounts are available only when the connection is CONNECTED "
                                "(status: %s)" % conn.status)
            if v("stale-account-list") and conn.snapshot is not None:
                res = copy.deepcopy(conn.snapshot)
            else:
                res = [copy.deepcopy(STORE.accounts[a]["pub"]) for a in conn.accounts]
        self._send(200, res)

    def _transactions(self, client, aid, query):
        small = v("oldest-first-small-pages")
        default_limit, max_limit = (10, 20) if small else (25, 100)
        limit = default_limit
        raw = query.get("limit")
        if raw is not None:
            s = raw[-1].strip()
            if not re.fullmatch(r"\d{1,9}", s) or int(s) < 1:
                raise HttpError(400, "invalid_limit", "limit must be a positive integer")
            limit = min(int(s), max_limit)
        cursor = (query.get("starting_after") or [""])[-1]
        with STORE.lock:
            acc, _ = self._acc_of(client, aid)
            items = live_txns(acc)
            start = 0
            if cursor:
                tid = cursor
                if v("opaque-cursor") and cursor.startswith("cur_"):
                    tid = decode_cursor(cursor, aid)
                entry = acc["txns"].get(tid) if tid else None
                if entry is None:
                    raise HttpError(400, "invalid_cursor", "starting_after names no transaction of this account")
                if v("cursor-as-offset") and (aid, cursor) in STORE.offsets:
                    start = STORE.offsets[(aid, cursor)]
                else:
                    ck = sort_key(entry)
                    if small:
                        start = sum(1 for t in items if sort_key(t) <= ck)
                    else:
                        start = sum(1 for t in items if sort_key(t) >= ck)
            page = items[start:start + limit]
            has_more = start + limit < len(items)
            res = {"data": [copy.deepcopy(t[2]) for t in page], "has_more": has_more}
            if has_more and page:
                last = page[-1][2]["id"]
                nc = encode_cursor(aid, last) if v("opaque-cursor") else last
                res["next_cursor"] = nc
                if v("cursor-as-offset"):
                    STORE.offsets[(aid, nc)] = start + len(page)
        self._send(200, res)


def encode_cursor(aid, tid):
    raw = json.dumps({"a": aid, "t": tid}, separators=(",", ":")).encode()
    return "cur_" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor, aid):
    try:
        s = cursor[4:]
        obj = json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
        if obj.get("a") != aid:
            return None
        return obj.get("t")
    except Exception:
        return None


# --------------------------------------------------------------------------- main

def main():
    global VARIANT, SERVICE, STORE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    args = ap.parse_args()
    if args.variant not in VARIANTS:
        print("unknown variant %r; known: %s" % (args.variant, ", ".join(VARIANTS)), file=sys.stderr)
        sys.exit(2)
    VARIANT = args.variant
    SERVICE = args.service
    keys = [k.strip() for k in (os.environ.get("FOREIGN_API_KEYS") or "").split(",") if k.strip()]
    if not keys:
        print("FOREIGN_API_KEYS is empty", file=sys.stderr)
        sys.exit(2)
    STORE = Store(keys)

    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print("PORT %d" % httpd.server_address[1], flush=True)

    # exit when stdin closes
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
