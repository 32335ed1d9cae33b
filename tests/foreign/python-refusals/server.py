#!/usr/bin/env python3
"""Bank Connection Aggregation Service: a server written from service-spec.md alone.

Usage: server.py --port 0 --variant NAME --service acme
API keys come from FOREIGN_API_KEYS (comma separated), one client per key.
Prints "PORT <n>" on stdout once listening; exits when stdin closes.
Standard library only. Variants are described in VARIANTS.md.
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
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VIOLATIONS = {
    "refused-create-still-creates", "refused-read-syncs", "refused-read-bumps-lastsynced",
    "refused-read-dedups", "refused-leaks-other-client", "pagination-skips-boundary",
    "has-more-off-by-one", "event-before-data", "connected-before-accounts",
    "previous-status-skips", "event-ids-disagree-on-retry", "client-id-shared",
    "cross-client-webhook", "deleted-txn-still-listed", "balance-stale-on-list",
    "disconnect-keeps-accounts", "widget-leaks-key",
}
LEGAL = {
    "create-200", "auth-403", "error-body-problem-json", "not-connected-404", "other-client-403",
    "txn-oldest-first", "small-page-limit", "ids-uuid", "duplicate-deliveries",
    "shuffled-delivery", "background-sync", "clock-ahead", "clock-behind", "rate-limit-429",
    "slow-answers", "connected-short-form", "opaque-cursor", "optional-fields-omitted",
    "account-shape-wrapped",
}

ARGS = None
VARIANT = "none"
SERVICE = "acme"
LOCK = threading.RLock()
RNG = random.Random()


def v(name):
    return VARIANT == name


DEBUG_LOG = os.environ.get("F12_DEBUG_LOG")


def dlog(msg):
    with open(DEBUG_LOG, "a") as f:
        f.write("%.3f %s\n" % (time.time(), msg))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- time and ids

def now_ts():
    off = 0.0
    if v("clock-ahead"):
        off = 60.0
    elif v("clock-behind"):
        off = -60.0
    return time.time() + off


def iso_ms(ts=None):
    ts = now_ts() if ts is None else ts
    d = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (d.microsecond // 1000)


def iso_s(ts=None):
    ts = now_ts() if ts is None else ts
    d = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def date_only(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d")


_ALNUM = string.ascii_uppercase + string.digits


def new_id(prefix):
    if v("ids-uuid"):
        return prefix + "_" + str(uuid.uuid4())
    return prefix + "_" + "".join(secrets.choice(_ALNUM) for _ in range(26))


# ---------------------------------------------------------------- data model

class Client:
    def __init__(self, key):
        self.key = key
        self.id = new_id("cli")
        self.webhook_url = None
        self.bucket = 40.0
        self.bucket_ts = time.time()
        # ordered delivery per connection: events are hashed by connection onto a few lanes,
        # each lane delivering one event at a time
        self.lanes = []
        for _ in range(8):
            lane = (collections.deque(), threading.Condition())
            self.lanes.append(lane)
            threading.Thread(target=self._deliver_loop, args=(lane,), daemon=True).start()

    def enqueue(self, body, lane_key=""):
        q, cond = self.lanes[hash(lane_key) % len(self.lanes)]
        with cond:
            q.append(body)
            cond.notify()

    def clear(self):
        for q, cond in self.lanes:
            with cond:
                q.clear()

    def _deliver_loop(self, lane):
        q, cond = lane
        while True:
            with cond:
                while not q:
                    cond.wait()
                body = q.popleft()
            deliver_with_retries(self, body)


class Connection:
    def __init__(self, client):
        self.id = new_id("conn")
        self.client = client
        self.status = "CREATED"
        self.projected = "created"      # state after every accepted action has run
        self.widget_token = new_id("sess")
        self.created_at = iso_ms()
        self.updated_at = self.created_at
        self.accounts = []              # list of account ids
        self.ever_connected = False
        self.accounts_ready_at = 0.0
        self.list_cache = None          # variant balance-stale-on-list
        self.queue = collections.deque()
        self.worker_running = False


class Account:
    def __init__(self, conn, typ, currency, name):
        self.id = new_id("acc")
        self.conn = conn
        self.type = typ
        self.currency = currency
        self.name = name
        self.created_at = iso_ms()
        self.last_synced_at = iso_ms()
        self.number = "****" + "".join(RNG.choice(string.digits) for _ in range(4))
        self.balance = 0.0
        self.available = 0.0
        self.credit_limit = None
        self.currency_balances = None
        self.positions = None
        self.txns = []                  # ordered list (display order), deleted ones kept as tombstones


class Txn:
    def __init__(self, acc, amount, description, category, day_ts):
        self.id = new_id("txn")
        self.acc = acc
        self.amount = round(amount, 2)
        self.currency = acc.currency
        self.description = description
        self.category = category
        self.date = date_only(day_ts)
        self.sort_key = day_ts
        self.created_at = iso_ms()
        self.deleted = False


CLIENTS = {}        # key -> Client
CLIENT_LIST = []
CONNS = {}          # id -> Connection
ACCOUNTS = {}       # id -> Account
TXNS = {}           # id -> Txn
TOKENS = {}         # widget token -> Connection

INSTITUTIONS = [{"id": "ins_ACMEBANK000000000000000000", "name": "Acme Savings Bank", "logo": None}]

DEBITS = [("Grocery store", "groceries"), ("Coffee shop", "dining"), ("Fuel station", "transport"),
          ("Online shop", "shopping"), ("Electricity bill", "utilities"), ("Pharmacy", "health"),
          ("Restaurant", "dining"), ("Train ticket", "transport")]
CREDITS = [("Salary", "income"), ("Refund", "income"), ("Interest", "income"),
           ("Transfer received", "transfer")]


def make_txn(acc, day_ts):
    if RNG.random() < 0.25:
        desc, cat = RNG.choice(CREDITS)
        amt = RNG.uniform(10, 3000)
    else:
        desc, cat = RNG.choice(DEBITS)
        amt = -RNG.uniform(1, 250)
    return Txn(acc, amt, desc, cat, day_ts)


def insert_txn(acc, t):
    """Keep acc.txns in display order: newest first (default) or oldest first."""
    TXNS[t.id] = t
    lst = acc.txns
    if v("txn-oldest-first"):
        # ascending by date, then creation; new ones go after equal dates
        i = len(lst)
        while i > 0 and lst[i - 1].sort_key > t.sort_key:
            i -= 1
        lst.insert(i, t)
    else:
        i = 0
        while i < len(lst) and lst[i].sort_key > t.sort_key:
            i += 1
        lst.insert(i, t)


def build_accounts(conn):
    specs = [("checking", "EUR", "Everyday Checking"), ("savings", "EUR", "Rainy Day Savings"),
             ("credit_card", "EUR", "Platinum Card")]
    extra = [("brokerage", "USD", "Brokerage Account"), ("pension", "EUR", "Pension Plan")]
    specs += RNG.sample(extra, RNG.randint(0, 2))
    counts = {"checking": RNG.randint(30, 62), "savings": RNG.randint(0, 4),
              "credit_card": RNG.randint(8, 26), "brokerage": RNG.randint(0, 3),
              "pension": RNG.randint(0, 1)}
    base = now_ts()
    for typ, cur, name in specs:
        a = Account(conn, typ, cur, name)
        if typ == "credit_card":
            limit = 5000.0
            a.balance = round(-RNG.uniform(50, 1500), 2)
            a.available = round(limit + a.balance, 2)
            a.credit_limit = {"amount": limit, "currency": cur}
            a.currency_balances = [{"currency": "USD", "balance": round(-RNG.uniform(0, 200), 2)}]
        else:
            a.balance = round(RNG.uniform(100, 20000), 2)
            a.available = a.balance
        if typ in ("brokerage", "pension"):
            a.positions = [{"symbol": s, "quantity": RNG.randint(1, 50),
                            "marketValue": round(RNG.uniform(100, 5000), 2), "currency": cur}
                           for s in RNG.sample(["ACME", "NWND", "IDXW", "BOND"], 2)]
        for k in range(counts[typ]):
            day = base - RNG.randint(1, 90) * 86400 - k
            insert_txn(a, make_txn(a, day))
        ACCOUNTS[a.id] = a
        conn.accounts.append(a.id)


def account_json(a, stale=False):
    d = {
        "id": a.id, "connectionId": a.conn.id, "name": a.name, "type": a.type,
        "currency": a.currency, "balance": a.balance, "availableBalance": a.available,
        "accountNumber": a.number, "createdAt": a.created_at,
    }
    if not v("optional-fields-omitted"):
        d["lastSyncedAt"] = a.last_synced_at
        d["institution"] = dict(INSTITUTIONS[0])
        if a.credit_limit is not None:
            d["creditLimit"] = dict(a.credit_limit)
        if a.currency_balances is not None:
            d["currencyBalances"] = [dict(x) for x in a.currency_balances]
        if a.positions is not None:
            d["positions"] = [dict(x) for x in a.positions]
    return d


def txn_json(t):
    return {"id": t.id, "accountId": t.acc.id, "amount": t.amount, "currency": t.currency,
            "description": t.description, "transactionDate": t.date, "category": t.category,
            "status": "posted", "createdAt": t.created_at}


# ---------------------------------------------------------------- events and delivery

def emit(conn, etype, previous=None, error=None, account=None, txn=None, is_conn_event=False):
    eid = new_id("evt")
    ts = iso_ms()
    client = conn.client
    cid = CLIENT_LIST[0].id if v("client-id-shared") else client.id
    data = {"eventId": eid, "type": etype, "occurredAt": ts, "clientId": cid,
            "connectionId": conn.id}
    if is_conn_event:
        data["previousStatus"] = previous
        data["error"] = error
    if account is not None:
        data["accountId"] = account
    if txn is not None:
        data["transactionId"] = txn
    body = {"id": eid, "type": etype, "created_at": ts, "data": data}
    send_event(client, body)
    if v("connected-short-form") and etype == "connection.connected":
        send_event(client, {"event": etype, "connectionId": conn.id, "timestamp": iso_s()})
    if v("cross-client-webhook"):
        for other in CLIENT_LIST:
            if other is not client:
                send_event(other, body)


def send_event(client, body):
    if v("shuffled-delivery"):
        def later():
            time.sleep(RNG.uniform(0.0, 1.2))
            deliver_with_retries(client, body)
        threading.Thread(target=later, daemon=True).start()
        return
    lane = (body.get("data") or body).get("connectionId", "")
    client.enqueue(body, lane)
    if v("duplicate-deliveries"):
        client.enqueue(body, lane)
    if v("event-ids-disagree-on-retry") and "data" in body:
        copy = json.loads(json.dumps(body))
        copy["id"] = new_id("evt")        # envelope id renewed, data.eventId left as it was
        client.enqueue(copy, lane)


def deliver_with_retries(client, body):
    url = client.webhook_url
    if not url:
        return
    raw = json.dumps(body).encode()
    delay = 0.5
    t0 = time.time()
    for attempt in range(6):
        if client.webhook_url != url:   # unregistered or changed: stop retrying
            return
        try:
            req = urllib.request.Request(url, data=raw, method="POST", headers={
                "Content-Type": "application/json", "User-Agent": SERVICE + "-webhooks/1"})
            with urllib.request.urlopen(req, timeout=5) as r:
                if 200 <= r.status < 300:
                    if DEBUG_LOG:
                        dlog("delivered %s %s after %.3fs attempt %d" % (
                            body.get("type"), (body.get("data") or {}).get("connectionId"),
                            time.time() - t0, attempt))
                    return
        except urllib.error.HTTPError as e:
            if e.code in (400, 404, 410, 413):
                return
        except Exception as e:
            if DEBUG_LOG:
                dlog("delivery error %r" % (e,))
        time.sleep(delay)
        delay = min(delay * 2, 4)


# ---------------------------------------------------------------- state machine

CONNECT_FROM = {"created", "mfa_required", "failed_auth", "error"}
ATTEMPT_FROM = {"created", "mfa_required", "failed_auth", "error"}


def accept_action(conn, action, account_id=None, txn_id=None):
    """Validate against the projected state, enqueue the steps. Returns (status, message)."""
    p = conn.projected
    steps = []
    if action in ("connect", "fail_auth", "require_mfa", "error"):
        if action == "error" and p == "connected":
            steps = [("state", "error")]
            conn.projected = "error"
        else:
            if p not in (CONNECT_FROM if action == "connect" else ATTEMPT_FROM):
                return 409, "cannot %s from %s" % (action, p)
            if action == "error" and p == "error":
                return 409, "already in error"
            target = {"connect": "connected", "fail_auth": "failed_auth",
                      "require_mfa": "mfa_required", "error": "error"}[action]
            steps = [("state", "credentials_submitted"), ("state", "verifying"), ("state", target)]
            conn.projected = target
    elif action == "disconnect":
        if p == "disconnected":
            return 409, "already disconnected"
        steps = [("state", "disconnected")]
        conn.projected = "disconnected"
    elif action == "update_accounts":
        if p != "connected":
            return 409, "connection is not connected"
        if account_id and (account_id not in ACCOUNTS or ACCOUNTS[account_id].conn is not conn):
            return 404, "unknown account"
        steps = [("update", account_id)]
    elif action == "delete_transaction":
        if p != "connected":
            return 409, "connection is not connected"
        if txn_id:
            t = TXNS.get(txn_id)
            if t is None or t.acc.conn is not conn:
                return 404, "unknown transaction"
            if t.deleted or getattr(t, "pending_delete", False):
                return 409, "already deleted"
            t.pending_delete = True
        elif account_id and (account_id not in ACCOUNTS or ACCOUNTS[account_id].conn is not conn):
            return 404, "unknown account"
        steps = [("delete", (account_id, txn_id))]
    else:
        return 400, "unknown action"
    conn.queue.extend(steps)
    if not conn.worker_running:
        conn.worker_running = True
        threading.Thread(target=conn_worker, args=(conn,), daemon=True).start()
    return 200, "accepted"


def conn_worker(conn):
    while True:
        with LOCK:
            if not conn.queue:
                conn.worker_running = False
                return
            step = conn.queue.popleft()
        time.sleep(0.05)
        try:
            run_step(conn, step)
        except Exception as e:  # keep the worker alive
            log("step failed", step, repr(e))


def set_state(conn, new):
    with LOCK:
        prev = conn.status.lower()
        if new == "connected" and not conn.accounts:
            build_accounts(conn)
        if new == "connected":
            conn.ever_connected = True
            for aid in conn.accounts:
                ACCOUNTS[aid].last_synced_at = iso_ms()
            if v("connected-before-accounts"):
                conn.accounts_ready_at = time.time() + 2.5
            conn.list_cache = [account_json(ACCOUNTS[a]) for a in conn.accounts]
        conn.status = new.upper()
        conn.updated_at = iso_ms()
        err = None
        if new == "failed_auth":
            err = {"code": "invalid_credentials", "message": "The bank rejected the credentials"}
        elif new == "error":
            err = {"code": "internal_error", "message": "Unexpected error while talking to the bank"}
        reported_prev = prev
        if v("previous-status-skips") and new == "connected" and prev == "verifying":
            reported_prev = "credentials_submitted"
        emit(conn, "connection." + new, previous=reported_prev, error=err, is_conn_event=True)


def change_account(a, new_txns=True):
    """A sync of one account: balance moves, maybe new transactions, lastSyncedAt set."""
    added = []
    if new_txns:
        for _ in range(RNG.randint(1, 2)):
            t = make_txn(a, now_ts())
            insert_txn(a, t)
            added.append(t)
    delta = round(sum(t.amount for t in added), 2) if added else round(RNG.uniform(-50, 50), 2)
    if delta == 0:
        delta = 1.0
    a.balance = round(a.balance + delta, 2)
    a.available = round(a.available + delta, 2)
    a.last_synced_at = iso_ms()


def run_step(conn, step):
    kind, arg = step
    if kind == "state":
        set_state(conn, arg)
    elif kind == "update":
        with LOCK:
            aid = arg or (conn.accounts[0] if conn.accounts else None)
            if aid is None:
                return
            a = ACCOUNTS[aid]
        if v("event-before-data"):
            emit(conn, "accounts.updated", account=a.id)
            time.sleep(2.5)
            with LOCK:
                change_account(a)
            return
        with LOCK:
            change_account(a)
        emit(conn, "accounts.updated", account=a.id)
    elif kind == "delete":
        account_id, txn_id = arg
        with LOCK:
            t = None
            if txn_id:
                t = TXNS.get(txn_id)
            else:
                cands = [ACCOUNTS[account_id]] if account_id else [ACCOUNTS[x] for x in conn.accounts]
                for a in cands:
                    live = [x for x in a.txns if not x.deleted and not getattr(x, "pending_delete", False)]
                    if live:
                        t = live[0]
                        break
            if t is None or t.deleted:
                return
            t.deleted = True
            a = t.acc
        emit(conn, "transaction.deleted", account=a.id, txn=t.id)


def background_sync_loop():
    while True:
        time.sleep(2.0)
        with LOCK:
            conns = [c for c in CONNS.values() if c.status == "CONNECTED" and c.projected == "connected"
                     and not c.queue and c.accounts]
        for c in conns:
            with LOCK:
                a = ACCOUNTS[RNG.choice(c.accounts)]
                change_account(a, new_txns=RNG.random() < 0.5)
            emit(c, "accounts.updated", account=a.id)


# ---------------------------------------------------------------- near-miss keys (violations)

def near_miss_client(key):
    """Which client a refused key 'looks like' (used only by violation variants)."""
    if not key:
        return None
    for c in CLIENT_LIST:
        k = c.key
        if key == k:
            return c
        if key.lower() == k.lower():
            return c
        if len(key) >= 12 and (k.startswith(key) or key.startswith(k)):
            return c
        if len(key) == len(k) and sum(1 for x, y in zip(key, k) if x != y) <= 3:
            return c
    return None


# ---------------------------------------------------------------- widget

WIDGET_JS = r"""
(function () {
  var script = document.currentScript;
  var base = '';
  try { base = new URL(script && script.src ? script.src : window.location.href).origin; } catch (e) { base = ''; }
  function open(a, b, c) {
    var opts = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    var token = opts.token, connectionId = opts.connectionId, onSuccess = opts.onSuccess;
    var host = document.body || document.documentElement;
    var box = document.createElement('div');
    box.setAttribute('data-__SERVICE__-connect', '1');
    box.style.cssText = 'position:fixed;top:10%;left:10%;width:80%;padding:16px;background:#fff;border:1px solid #888;font-family:sans-serif;z-index:99999';
    box.textContent = 'Connecting to your bank...';
    host.appendChild(box);
    var sessionUrl = base + '/widget/session/' + encodeURIComponent(token || '');
    fetch(sessionUrl, { method: 'GET', headers: { 'Accept': 'application/json' } })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
      .then(function (res) {
        if (!res.ok) { box.textContent = 'This link has expired. Please try again.'; return; }
        box.textContent = '';
        var p = document.createElement('p');
        p.textContent = 'Sign in to ' + (res.body.institution ? res.body.institution.name : 'your bank');
        var btn = document.createElement('button');
        btn.textContent = 'Continue';
        btn.onclick = function () {
          fetch(sessionUrl + '/submit', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })
            .then(function (r) { return r.json(); })
            .then(function (j) {
              box.textContent = 'Connected.';
              if (typeof onSuccess === 'function') {
                onSuccess({ connectionId: connectionId, institution: j.institution || null });
              }
            }).catch(function () { box.textContent = 'Something went wrong.'; });
        };
        box.appendChild(p); box.appendChild(btn);
      })
      .catch(function () { box.textContent = 'Something went wrong.'; });
    return { close: function () { if (box.parentNode) box.parentNode.removeChild(box); } };
  }
  window.__GLOBAL__ = { open: open, version: '1' };
})();
"""


def widget_global():
    s = "".join(ch for ch in SERVICE.title() if ch.isalnum())
    return (s or "Bank") + "Connect"


# ---------------------------------------------------------------- HTTP

class ApiError(Exception):
    def __init__(self, status, code, message, extra=None, headers=None):
        self.status, self.code, self.message = status, code, message
        self.extra = extra or {}
        self.headers = headers or {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "BankAgg/1.0"

    def log_message(self, fmt, *args):
        pass

    # -- plumbing
    def _send(self, status, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Cache-Control", "no-store")
        for k, val in (headers or {}).items():
            self.send_header(k, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _error(self, e):
        if v("error-body-problem-json"):
            body = {"type": "about:blank", "title": e.code, "status": e.status, "detail": e.message}
            body.update(e.extra)
            self._send(e.status, body, "application/problem+json", e.headers)
        else:
            body = {"error": {"code": e.code, "message": e.message}}
            body["error"].update(e.extra)
            self._send(e.status, body, headers=e.headers)

    def _read_body(self):
        n = self.headers.get("Content-Length")
        if n:
            try:
                n = int(n)
            except ValueError:
                raise ApiError(400, "bad_request", "invalid Content-Length")
            if n < 0 or n > 1_000_000:
                raise ApiError(413, "payload_too_large", "request body too large")
            return self.rfile.read(n)
        return b""

    def _key(self):
        h = self.headers.get("Authorization")
        if not h:
            return None
        parts = h.strip().split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":
            return None
        return parts[1].strip()

    def _client(self):
        key = self._key()
        c = CLIENTS.get(key) if key else None
        if c is None:
            st = 403 if v("auth-403") else 401
            hdr = {} if st == 403 else {"WWW-Authenticate": 'Bearer realm="api"'}
            raise ApiError(st, "unauthorized", "missing or invalid API key", headers=hdr)
        return c

    def _rate_limit(self, client):
        if not v("rate-limit-429"):
            return
        with LOCK:
            t = time.time()
            client.bucket = min(40.0, client.bucket + (t - client.bucket_ts) * 25.0)
            client.bucket_ts = t
            if client.bucket < 1.0:
                raise ApiError(429, "rate_limited", "too many requests", headers={"Retry-After": "1"})
            client.bucket -= 1.0

    def _cors(self):
        return {"Access-Control-Allow-Origin": "*",
                "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                "Access-Control-Allow-Headers": "Content-Type, Accept",
                "Access-Control-Max-Age": "600"}

    # -- dispatch
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_OPTIONS(self):
        try:
            self._read_body()
        except ApiError:
            pass
        self._send(204, b"", "text/plain", self._cors())

    def _dispatch(self, method):
        try:
            u = urllib.parse.urlsplit(self.path)
            path = u.path
            query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
            body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            if path.startswith("/widget/"):
                return self._widget(method, path, body)
            if path == "/__admin/action":
                if method != "POST":
                    raise ApiError(405, "method_not_allowed", "use POST")
                return self._admin(body)
            if v("slow-answers") and path.startswith("/v1/"):
                time.sleep(RNG.uniform(0.2, 0.8))
            return self._api(method, path, query)
        except ApiError as e:
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:
            log("internal error", repr(e))
            try:
                self._error(ApiError(500, "internal_error", "internal error"))
            except Exception:
                pass

    # -- widget
    def _widget(self, method, path, body):
        cors = self._cors()
        if path == "/widget/%s-connect.js" % SERVICE and method in ("GET", "HEAD"):
            js = WIDGET_JS.replace("__GLOBAL__", widget_global()).replace("__SERVICE__", SERVICE)
            return self._send(200, js, "application/javascript; charset=utf-8", cors)
        parts = path.split("/")
        # /widget/session/<token>[/submit]
        if len(parts) >= 4 and parts[1] == "widget" and parts[2] == "session":
            token = urllib.parse.unquote(parts[3])
            with LOCK:
                conn = TOKENS.get(token)
                if conn is None:
                    e = ApiError(404, "invalid_token", "unknown or expired widget token", headers=cors)
                    raise e
                if len(parts) == 4 and method in ("GET", "HEAD"):
                    out = {"connectionId": conn.id, "status": conn.status,
                           "institution": dict(INSTITUTIONS[0])}
                    if v("widget-leaks-key"):
                        out["client"] = {"id": conn.client.id, "apiKey": conn.client.key}
                    return self._send(200, out, headers=cors)
                if len(parts) == 5 and parts[4] == "submit" and method == "POST":
                    st, msg = accept_action(conn, "connect")
                    if st != 200:
                        raise ApiError(409, "invalid_state", msg, headers=cors)
                    return self._send(200, {"connectionId": conn.id,
                                            "institution": dict(INSTITUTIONS[0])}, headers=cors)
        raise ApiError(404, "not_found", "no such widget resource", headers=cors)

    # -- admin (driver)
    def _admin(self, body):
        try:
            req = json.loads(body or b"{}")
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            raise ApiError(400, "bad_request", "JSON object expected")
        action = req.get("action")
        with LOCK:
            if action == "register_webhook":
                c = CLIENTS.get(req.get("api_key") or "")
                if c is None:
                    raise ApiError(400, "bad_request", "unknown api_key")
                c.webhook_url = req.get("webhook_url") or None
                k2 = req.get("second_api_key")
                if k2 and req.get("second_webhook_url"):
                    c2 = CLIENTS.get(k2)
                    if c2 is None:
                        raise ApiError(400, "bad_request", "unknown second_api_key")
                    c2.webhook_url = req["second_webhook_url"]
                return self._send(200, {"ok": True, "webhooks": "per-client"})
            if action == "unregister_webhook":
                for k in (req.get("api_key"), req.get("second_api_key")):
                    c = CLIENTS.get(k or "")
                    if c is not None:
                        c.webhook_url = None
                        c.clear()
                return self._send(200, {"ok": True})
            conn = CONNS.get(req.get("connection_id") or "")
            if conn is None and req.get("widget_token"):
                conn = TOKENS.get(req["widget_token"])
            if conn is None and action in ("update_accounts", "delete_transaction"):
                if req.get("account_id") in ACCOUNTS:
                    conn = ACCOUNTS[req["account_id"]].conn
                elif req.get("transaction_id") in TXNS:
                    conn = TXNS[req["transaction_id"]].acc.conn
            if conn is None:
                raise ApiError(404, "not_found", "unknown connection")
            st, msg = accept_action(conn, action, req.get("account_id") or None,
                                    req.get("transaction_id") or None)
            if st == 200:
                return self._send(200, {"ok": True, "status": conn.projected})
            if st == 409:
                raise ApiError(409, "invalid_state", msg)
            raise ApiError(st, "bad_request", msg)

    # -- public API
    def _api(self, method, path, query):
        segs = [s for s in path.split("/")]
        # segs[0] == ''
        if len(segs) < 3 or segs[1] != "v1":
            raise ApiError(404, "not_found", "no such resource")
        rest = segs[2:]
        if rest == ["connections"]:
            if method != "POST":
                if method == "GET":
                    c = self._client()
                    self._rate_limit(c)
                    with LOCK:
                        lst = [conn_json(x) for x in CONNS.values() if x.client is c]
                    return self._send(200, lst)
                raise ApiError(405, "method_not_allowed", "method not allowed")
            return self._create()
        if len(rest) == 2 and rest[0] == "connections" and method in ("GET", "HEAD"):
            c = self._client()
            self._rate_limit(c)
            with LOCK:
                conn = CONNS.get(rest[1])
                if conn is None or conn.client is not c:
                    self._not_owned(conn is not None, "connection")
                return self._send(200, conn_json(conn))
        if len(rest) == 3 and rest[0] == "connections" and rest[2] == "accounts":
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "method not allowed")
            return self._accounts(rest[1])
        if len(rest) == 2 and rest[0] == "accounts":
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "method not allowed")
            return self._account(rest[1])
        if len(rest) == 3 and rest[0] == "accounts" and rest[2] == "transactions":
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "method not allowed")
            return self._transactions(rest[1], query)
        raise ApiError(404, "not_found", "no such resource")

    def _not_owned(self, exists, what, leak=None):
        if exists and v("other-client-403"):
            raise ApiError(403, "forbidden", "this %s belongs to another client" % what)
        extra = {}
        if exists and leak is not None and v("refused-leaks-other-client"):
            extra = {"details": leak}
        raise ApiError(404, "not_found", "no such %s" % what, extra=extra)

    def _create(self):
        key = self._key()
        c = CLIENTS.get(key) if key else None
        if c is None:
            if v("refused-create-still-creates"):
                with LOCK:
                    owner = near_miss_client(key) or CLIENT_LIST[0]
                    conn = Connection(owner)
                    CONNS[conn.id] = conn
                    TOKENS[conn.widget_token] = conn
                emit(conn, "connection.created", previous="created", is_conn_event=True)
            self._client()  # raises the refusal
        self._rate_limit(c)
        with LOCK:
            conn = Connection(c)
            CONNS[conn.id] = conn
            TOKENS[conn.widget_token] = conn
        emit(conn, "connection.created", previous="created", is_conn_event=True)
        out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.widget_token}
        return self._send(200 if v("create-200") else 201, out,
                          headers={"Location": "/v1/connections/" + conn.id})

    def _refused_side_effects(self, kind, obj):
        """Side effects that violation variants let a refused request have."""
        if kind == "accounts" and v("refused-read-bumps-lastsynced") and obj is not None:
            with LOCK:
                for aid in obj.accounts:
                    ACCOUNTS[aid].last_synced_at = iso_ms()
        if kind == "account" and v("refused-read-syncs") and obj is not None:
            with LOCK:
                obj.last_synced_at = iso_ms()
            emit(obj.conn, "accounts.updated", account=obj.id)
        if kind == "transactions" and v("refused-read-dedups") and obj is not None:
            with LOCK:
                live = [t for t in obj.txns if not t.deleted]
                t = live[0] if live else None
                if t is not None:
                    t.deleted = True
            if t is not None:
                emit(obj.conn, "transaction.deleted", account=obj.id, txn=t.id)

    def _authorize_for(self, kind, obj):
        """Authenticate; run violation side effects on refusal. Returns the client."""
        try:
            c = self._client()
        except ApiError:
            self._refused_side_effects(kind, obj)
            raise
        owner = None
        if obj is not None:
            owner = obj.client if kind == "accounts" else obj.conn.client
        if obj is not None and owner is not c:
            self._refused_side_effects(kind, obj)
        return c

    def _accounts(self, conn_id):
        with LOCK:
            conn = CONNS.get(conn_id)
        c = self._authorize_for("accounts", conn)
        self._rate_limit(c)
        with LOCK:
            if conn is None or conn.client is not c:
                leak = None
                if conn is not None:
                    leak = {"connectionId": conn.id, "status": conn.status, "clientId": conn.client.id,
                            "accounts": [account_json(ACCOUNTS[a]) for a in conn.accounts]}
                self._not_owned(conn is not None, "connection", leak)
            ok = conn.status == "CONNECTED" and time.time() >= conn.accounts_ready_at
            if v("disconnect-keeps-accounts") and conn.status == "DISCONNECTED" and conn.accounts:
                ok = True
            if not ok:
                if v("not-connected-404"):
                    raise ApiError(404, "not_found", "accounts are not available: connection is %s"
                                   % conn.status)
                raise ApiError(409, "connection_not_connected",
                               "accounts are available only when the connection is CONNECTED "
                               "(current status: %s)" % conn.status,
                               extra={"status": conn.status})
            if v("balance-stale-on-list") and conn.list_cache is not None:
                out = json.loads(json.dumps(conn.list_cache))
            else:
                out = [account_json(ACCOUNTS[a]) for a in conn.accounts]
        return self._send(200, out)

    def _account(self, acc_id):
        with LOCK:
            a = ACCOUNTS.get(acc_id)
        c = self._authorize_for("account", a)
        self._rate_limit(c)
        with LOCK:
            if a is None or a.conn.client is not c:
                self._not_owned(a is not None, "account", account_json(a) if a else None)
            d = account_json(a)
        if v("account-shape-wrapped"):
            d = {"account": d, "balance": {"current": a.balance, "available": a.available,
                                           "currency": a.currency}}
        return self._send(200, d)

    def _transactions(self, acc_id, query):
        with LOCK:
            a = ACCOUNTS.get(acc_id)
        c = self._authorize_for("transactions", a)
        self._rate_limit(c)
        default_limit, max_limit = (5, 10) if v("small-page-limit") else (25, 100)
        with LOCK:
            if a is None or a.conn.client is not c:
                leak = None
                if a is not None:
                    leak = {"accountId": a.id, "data": [txn_json(t) for t in a.txns[:3] if not t.deleted]}
                self._not_owned(a is not None, "account", leak)
            limit = default_limit
            if "limit" in query:
                raw = query["limit"][0].strip()
                try:
                    f = float(raw)
                    if f != int(f):
                        raise ValueError
                    limit = int(f)
                except (ValueError, OverflowError):
                    raise ApiError(400, "invalid_parameter", "limit must be a positive integer")
                if limit < 1:
                    raise ApiError(400, "invalid_parameter", "limit must be a positive integer")
                limit = min(limit, max_limit)
            lst = a.txns
            start = 0
            if "starting_after" in query:
                cur = query["starting_after"][0]
                tid = decode_cursor(cur)
                idx = None
                for i, t in enumerate(lst):
                    if t.id == tid:
                        idx = i
                        break
                if idx is None:
                    raise ApiError(400, "invalid_cursor", "starting_after does not name a "
                                   "transaction of this account")
                start = idx + (2 if v("pagination-skips-boundary") else 1)
            first_page = "starting_after" not in query
            if v("deleted-txn-still-listed") and not first_page:
                visible = lst[start:]
            else:
                visible = [t for t in lst[start:] if not t.deleted]
            page = visible[:limit]
            remaining = len(visible) - len(page)
            has_more = remaining > (1 if v("has-more-off-by-one") else 0)
            out = {"data": [txn_json(t) for t in page], "has_more": has_more}
            if has_more and page:
                out["next_cursor"] = encode_cursor(page[-1].id)
        return self._send(200, out)


def encode_cursor(tid):
    if v("opaque-cursor"):
        return "cur_" + base64.urlsafe_b64encode(("after:" + tid).encode()).decode().rstrip("=")
    return tid


def decode_cursor(cur):
    if cur.startswith("cur_"):
        s = cur[4:]
        try:
            d = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)).decode()
            if d.startswith("after:"):
                return d[6:]
        except Exception:
            return cur
    return cur


def conn_json(conn):
    return {"connectionId": conn.id, "status": conn.status, "createdAt": conn.created_at,
            "updatedAt": conn.updated_at}


# ---------------------------------------------------------------- main

def main():
    global ARGS, VARIANT, SERVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    ARGS = ap.parse_args()
    VARIANT = ARGS.variant
    SERVICE = ARGS.service
    if VARIANT != "none" and VARIANT not in VIOLATIONS and VARIANT not in LEGAL:
        log("unknown variant: %s" % VARIANT)
        sys.exit(2)
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        log("FOREIGN_API_KEYS is empty")
        sys.exit(2)
    for k in keys:
        if k not in CLIENTS:
            c = Client(k)
            CLIENTS[k] = c
            CLIENT_LIST.append(c)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 128

    srv = Server((ARGS.host, ARGS.port), Handler)
    if v("background-sync"):
        threading.Thread(target=background_sync_loop, daemon=True).start()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("PORT %d" % srv.server_address[1], flush=True)

    # run until stdin closes
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
