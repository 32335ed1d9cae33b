#!/usr/bin/env python3
"""A test server of the bank connection aggregation service (service-spec.md), standard library only.

Usage: FOREIGN_API_KEYS=k1,k2 python3 server.py --port 0 --variant NAME --service NAME
Prints "PORT <n>" once listening on 127.0.0.1; exits when stdin closes.
Admin endpoint (not part of the service): POST /__admin/action, driven by driver.py.
"""
import argparse
import base64
import copy
import hashlib
import hmac
import json
import os
import queue
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
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

VIOLATIONS = [
    "account-id-per-client-index", "txn-id-from-count", "account-get-accepts-conn-id",
    "sess-token-create-leak", "dedupe-repeat-state-events", "txn-createdat-end-of-day",
    "connected-stamped-at-request", "widget-token-reads-accounts", "single-account-no-owner-check",
    "cursor-as-offset", "accounts-list-stale-cache",
]
LEGAL = [
    "clock-ahead-2min", "slow-answers", "rate-limit-429", "idle-close-fast",
    "webhooks-late-reordered", "webhooks-duplicated", "ids-uuid-lowercase", "extra-fields",
    "alt-error-codes", "oldest-first", "small-page-max", "connected-short-form",
]
VARIANT = "none"
SERVICE = "acme"


def v(name):
    return VARIANT == name


# ---------------------------------------------------------------- time and ids

def now():
    t = datetime.now(timezone.utc)
    if v("clock-ahead-2min"):
        t += timedelta(seconds=120)
    return t


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def iso_s(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


ALNUM = string.ascii_uppercase + string.digits


def new_id(prefix):
    if v("ids-uuid-lowercase"):
        return prefix + "_" + str(uuid.uuid4())
    return prefix + "_" + "".join(secrets.choice(ALNUM) for _ in range(26))


def hashed_id(prefix, seed):
    digest = base64.b32encode(hashlib.sha256(seed.encode()).digest()).decode()
    return prefix + "_" + "".join(c for c in digest if c in ALNUM)[:26]


def money(x):
    return round(x, 2)


# ---------------------------------------------------------------- state

LOCK = threading.RLock()
CLIENTS = []          # dicts: index, key, id, secret, webhook, gen, q
KEY2CLIENT = {}
CONNS = {}            # connectionId -> connection
ACCOUNTS = {}         # accountId -> account
TOKENS = {}           # widget token -> {"conn": id, "expires": epoch}
CURSOR_OFFSETS = {}   # (accountId, cursor) -> offset (variant cursor-as-offset)
RATE = {}             # client index -> request count (variant rate-limit-429)
TOKEN_LIFETIME = 3600

CATEGORIES_OUT = ["groceries", "dining", "transport", "utilities", "shopping", "entertainment", "health"]
DESCRIPTIONS = {
    "groceries": ["Corner Market", "FreshFoods Supermarket", "Organic Grocer"],
    "dining": ["Cafe Lumen", "Pizza Nord", "Sushi Bar 21"],
    "transport": ["City Metro", "RideNow trip", "Fuel Station 7"],
    "utilities": ["Power & Light Co", "Water Services", "Fibre Internet"],
    "shopping": ["Online Store", "Bookshop Central", "Hardware Depot"],
    "entertainment": ["StreamFlix", "Cinema Royal", "Concert Hall"],
    "health": ["Pharmacy Plus", "Dental Clinic", "Fitness Club"],
}
INSTITUTION = {"id": "ins_demo_bank", "name": "Demo Bank", "logo": None}


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def make_clients(keys):
    for i, key in enumerate(keys):
        c = {"index": i, "key": key, "id": new_id("cli"), "secret": secrets.token_hex(16),
             "webhook": None, "gen": 0, "q": queue.Queue()}
        CLIENTS.append(c)
        KEY2CLIENT[key] = c
        threading.Thread(target=delivery_worker, args=(c,), daemon=True).start()


# ---------------------------------------------------------------- webhooks

def enqueue(client, body):
    gen = client["gen"]
    if v("webhooks-late-reordered"):
        threading.Timer(random.uniform(2.0, 5.0), deliver, (client, body, gen)).start()
        return
    client["q"].put((body, gen, time.time()))
    if v("webhooks-duplicated"):
        threading.Timer(random.uniform(0.3, 1.5), deliver, (client, body, gen)).start()


def delivery_worker(client):
    while True:
        body, gen, queued = client["q"].get()
        deliver(client, body, gen, queued)


def deliver(client, body, gen, queued=None):
    queued = queued or time.time()
    for attempt in range(6):
        url = client["webhook"]
        if not url or client["gen"] != gen:
            return  # unregistered since: stop delivering and retrying
        ts = str(int(time.time()))
        sig = hmac.new(client["secret"].encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json",
            "User-Agent": SERVICE + "-webhooks/1.0",
            "X-Webhook-Signature": "t=%s,v1=%s" % (ts, sig),
        })
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                if 200 <= r.status < 300:
                    debug("delivered %s in %.3fs" % (json.loads(body).get("type"), time.time() - queued))
                    return
        except urllib.error.HTTPError as e:
            debug("delivery to %s answered %d" % (url, e.code))
            if 400 <= e.code < 500 and e.code not in (408, 429):
                return
        except Exception as e:
            debug("delivery to %s failed: %r" % (url, e))
        time.sleep(0.5 * (2 ** attempt))


def debug(msg):
    if os.environ.get("FOREIGN_DEBUG"):
        print("[%.3f] %s" % (time.time(), msg), file=sys.stderr, flush=True)


def emit(conn, etype, t=None, **extra):
    """Builds an event of conn and queues it for its client's address. Call under LOCK."""
    t = t or now()
    client = CLIENTS[conn["client"]]
    eid = new_id("evt")
    data = {"eventId": eid, "type": etype, "occurredAt": iso(t), "clientId": client["id"],
            "connectionId": conn["id"]}
    data.update(extra)
    env = {"id": eid, "type": etype, "created_at": iso(t), "data": data}
    if v("extra-fields"):
        env["api_version"] = "2024-01-01"
        data["livemode"] = False
    if v("connected-short-form") and etype == "connection.connected":
        env = {"event": etype, "connectionId": conn["id"], "timestamp": iso_s(t)}
    enqueue(client, json.dumps(env).encode())


# ---------------------------------------------------------------- connections and data

def create_connection(client):
    with LOCK:
        t = now()
        cid = new_id("conn")
        token = new_id("sess")
        conn = {"id": cid, "client": client["index"], "status": "created", "createdAt": t,
                "accounts": [], "emitted": {"created"}, "token": token, "lock": threading.Lock(),
                "list_cache": None}
        CONNS[cid] = conn
        TOKENS[token] = {"conn": cid, "expires": time.time() + TOKEN_LIFETIME}
        emit(conn, "connection.created", t, previousStatus="created", error=None)
        return conn


def set_status(conn, new, t=None, error=None):
    with LOCK:
        prev = conn["status"]
        conn["status"] = new
        if v("dedupe-repeat-state-events") and new in conn["emitted"]:
            return
        conn["emitted"].add(new)
        emit(conn, "connection." + new, t, previousStatus=prev, error=error)


def txn_sort_key(t):
    return (t["transactionDate"], t["_seq"])


def new_txn(acc, day, amount, category, description, t):
    acc["seq"] += 1
    if v("txn-id-from-count"):
        active = sum(1 for x in acc["txns"] if not x["_deleted"])
        tid = "txn_" + acc["id"].split("_", 1)[1][:20] + "%06d" % (active + 1)
    else:
        tid = new_id("txn")
    created = iso(t)
    if v("txn-createdat-end-of-day"):
        created = day.isoformat() + "T23:59:59.000Z"
    txn = {"id": tid, "accountId": acc["id"], "amount": money(amount), "currency": acc["currency"],
           "description": description, "transactionDate": day.isoformat(), "category": category,
           "status": "posted", "createdAt": created, "_seq": acc["seq"], "_deleted": False}
    acc["txns"].append(txn)
    return txn


def random_debit(rng):
    cat = rng.choice(CATEGORIES_OUT)
    return -rng.uniform(3, 180), cat, rng.choice(DESCRIPTIONS[cat])


ACCOUNT_PLAN = {
    "checking": ("Everyday Checking", 32, "EUR"),
    "savings": ("Rainy Day Savings", 6, "EUR"),
    "credit_card": ("Platinum Card", 14, "EUR"),
    "brokerage": ("Investment Portfolio", 4, "USD"),
    "pension": ("Retirement Plan", 3, "EUR"),
}


def build_accounts(conn, t):
    """Creates the accounts and transactions of a newly connected connection. Call under LOCK."""
    rng = random.Random()
    client = CLIENTS[conn["client"]]
    types = ["checking", "savings", "credit_card", rng.choice(["brokerage", "pension"])]
    today = t.date()
    for i, typ in enumerate(types):
        name, ntx, cur = ACCOUNT_PLAN[typ]
        if v("account-id-per-client-index"):
            aid = hashed_id("acc", "%s:%d" % (client["id"], i))
        else:
            aid = new_id("acc")
        acc = {"id": aid, "conn": conn["id"], "client": conn["client"], "name": name, "type": typ,
               "currency": cur, "balance": 0.0, "available": 0.0,
               "number": "****%04d" % rng.randint(0, 9999), "createdAt": iso(t), "synced": iso(t),
               "txns": [], "seq": 0, "extra": {}}
        for k in range(ntx):
            day = today - timedelta(days=(0 if k == 0 else rng.randint(1, 75)))
            if typ == "checking" and k % 8 == 3:
                amt, cat, desc = rng.uniform(900, 2500), "income", "Salary ACME Corp"
            elif typ == "savings":
                amt, cat, desc = rng.uniform(20, 400), "transfer", "Standing order to savings"
            elif typ in ("brokerage", "pension"):
                amt, cat, desc = rng.uniform(10, 120), "investment", "Dividend payment"
            else:
                amt, cat, desc = random_debit(rng)
            new_txn(acc, day, amt, cat, desc, t)
        if typ == "credit_card":
            limit = 5000.0
            acc["balance"] = money(-rng.uniform(100, 1500))
            acc["available"] = money(limit + acc["balance"])
            acc["extra"]["creditLimit"] = {"amount": limit, "currency": cur}
            acc["extra"]["currencyBalances"] = [
                {"currency": "USD", "balance": money(-rng.uniform(5, 200)), "availableBalance": None}]
            acc["extra"]["currencyBalances"][0]["availableBalance"] = acc["extra"]["currencyBalances"][0]["balance"]
        else:
            acc["balance"] = money(rng.uniform(500, 20000))
            acc["available"] = acc["balance"]
        if typ in ("brokerage", "pension"):
            pos = []
            for sym, nm in (("VWCE", "FTSE All-World ETF"), ("AAPL", "Apple Inc.")):
                q, p = rng.randint(1, 50), money(rng.uniform(50, 200))
                pos.append({"symbol": sym, "name": nm, "quantity": q, "price": p,
                            "marketValue": money(q * p), "currency": cur})
            acc["extra"]["positions"] = pos
        ACCOUNTS[aid] = acc
        conn["accounts"].append(acc)


def acc_json(acc):
    d = {"id": acc["id"], "connectionId": acc["conn"], "name": acc["name"], "type": acc["type"],
         "currency": acc["currency"], "balance": acc["balance"], "availableBalance": acc["available"],
         "accountNumber": acc["number"], "createdAt": acc["createdAt"], "lastSyncedAt": acc["synced"],
         "institution": dict(INSTITUTION)}
    for k in ("creditLimit", "currencyBalances", "positions"):
        if k in acc["extra"]:
            d[k] = copy.deepcopy(acc["extra"][k])
    if v("extra-fields"):
        d["object"] = "account"
        d["holderName"] = "Alex Example"
        d["metadata"] = {}
    return d


def txn_json(t):
    d = {k: val for k, val in t.items() if not k.startswith("_")}
    if v("extra-fields"):
        d["object"] = "transaction"
        d["pending"] = False
        d["merchantName"] = t["description"]
    return d


# ---------------------------------------------------------------- driver actions

CS, VER = "credentials_submitted", "verifying"
PATHS = {
    "connect": {"created": [CS, VER, "connected"], "mfa_required": [VER, "connected"],
                "failed_auth": [CS, VER, "connected"], "error": [CS, VER, "connected"]},
    "fail_auth": {"created": [CS, VER, "failed_auth"], "mfa_required": [VER, "failed_auth"],
                  "failed_auth": [CS, VER, "failed_auth"], "error": [CS, VER, "failed_auth"]},
    "require_mfa": {"created": [CS, VER, "mfa_required"], "mfa_required": [VER, "mfa_required"],
                    "failed_auth": [CS, VER, "mfa_required"], "error": [CS, VER, "mfa_required"]},
    "error": {"created": [CS, VER, "error"], "mfa_required": [VER, "error"],
              "failed_auth": [CS, VER, "error"], "connected": ["error"]},
}
ERRORS = {
    "failed_auth": {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    "mfa_required": {"code": "mfa_required", "message": "The bank asks for a second factor."},
    "error": {"code": "internal_error", "message": "Unexpected error while talking to the bank."},
}
STEP = 0.03  # seconds between the steps of a transition walk


def walk(conn, action):
    t0 = now()
    path = PATHS[action].get(conn["status"])
    if path is None:
        raise ApiError(409, "invalid_state", "cannot %s from %s" % (action, conn["status"]))
    for i, state in enumerate(path):
        time.sleep(STEP)
        with LOCK:
            if state == "connected" and not conn["accounts"]:
                build_accounts(conn, now())
            t = None
            if state == "connected" and v("connected-stamped-at-request"):
                t = t0
            set_status(conn, state, t, ERRORS.get(state))
            if state != "connected":
                conn["list_cache"] = None


def act_disconnect(conn):
    if conn["status"] == "disconnected":
        raise ApiError(409, "invalid_state", "already disconnected")
    time.sleep(STEP)
    set_status(conn, "disconnected")


def conn_account(conn, account_id):
    for acc in conn["accounts"]:
        if acc["id"] == account_id:
            return acc
    raise ApiError(409, "unknown_account", "account is not one of this connection")


def act_update(conn, account_id):
    with LOCK:
        if conn["status"] != "connected":
            raise ApiError(409, "invalid_state", "connection is not connected")
        acc = conn_account(conn, account_id) if account_id else conn["accounts"][0]
        t = now()
        rng = random.Random()
        if acc["type"] in ("brokerage", "pension"):
            amt, cat, desc = rng.uniform(10, 90), "investment", "Dividend payment"
        elif acc["type"] == "savings":
            amt, cat, desc = rng.uniform(20, 300), "transfer", "Standing order to savings"
        else:
            amt, cat, desc = random_debit(rng)
        txn = new_txn(acc, t.date(), amt, cat, desc, t)
        acc["balance"] = money(acc["balance"] + txn["amount"])
        acc["available"] = money(acc["available"] + txn["amount"])
        acc["synced"] = iso(t)
        emit(conn, "accounts.updated", t, accountId=acc["id"])
        return {"accountId": acc["id"], "transactionId": txn["id"]}


def act_delete(conn, account_id, txn_id):
    with LOCK:
        if conn["status"] != "connected":
            raise ApiError(409, "invalid_state", "connection is not connected")
        target = None
        accounts = [conn_account(conn, account_id)] if account_id else conn["accounts"]
        for acc in accounts:
            live = sorted((x for x in acc["txns"] if not x["_deleted"]), key=txn_sort_key, reverse=True)
            if txn_id:
                live = [x for x in live if x["id"] == txn_id]
            if live:
                target = (acc, live[0])
                break
        if target is None:
            raise ApiError(409, "unknown_transaction", "no such transaction on this connection")
        acc, txn = target
        txn["_deleted"] = True
        emit(conn, "transaction.deleted", now(), accountId=acc["id"], transactionId=txn["id"])
        return {"accountId": acc["id"], "transactionId": txn["id"]}


def admin_action(body):
    action = body.get("action")
    if action in ("register_webhook", "unregister_webhook"):
        pairs = [("apiKey", "webhookUrl", 0), ("secondApiKey", "secondWebhookUrl", 1)]
        with LOCK:
            for key_field, url_field, default in pairs:
                if url_field not in body and action == "register_webhook":
                    continue
                client = KEY2CLIENT.get(body.get(key_field) or "")
                if client is None:
                    if default >= len(CLIENTS):
                        continue
                    client = CLIENTS[default]
                client["gen"] += 1
                client["webhook"] = body.get(url_field) if action == "register_webhook" else None
        return 200, {"webhooks": "per-client"}
    cid = body.get("connectionId")
    conn = CONNS.get(cid or "")
    if conn is None:
        raise ApiError(404, "unknown_connection", "no such connection")
    with conn["lock"]:
        if action in PATHS:
            walk(conn, action)
            return 200, {"status": conn["status"].upper()}
        if action == "disconnect":
            act_disconnect(conn)
            return 200, {"status": "DISCONNECTED"}
        if action == "update_accounts":
            return 200, act_update(conn, body.get("accountId"))
        if action == "delete_transaction":
            return 200, act_delete(conn, body.get("accountId"), body.get("transactionId"))
    raise ApiError(501, "unknown_action", "unknown action")


# ---------------------------------------------------------------- pagination

def page_size(query):
    default, maximum = (5, 10) if v("small-page-max") else (25, 100)
    raw = query.get("limit")
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", raw) or int(raw) < 1:
        raise ApiError(400, "invalid_limit", "limit must be a positive integer")
    return min(int(raw), maximum)


def list_transactions(acc, query):
    limit = page_size(query)
    after = query.get("starting_after") or None
    ordered = sorted(acc["txns"], key=txn_sort_key, reverse=not v("oldest-first"))
    live = [x for x in ordered if not x["_deleted"]]
    if after is None:
        rest = live
    elif v("cursor-as-offset") and (acc["id"], after) in CURSOR_OFFSETS:
        rest = live[CURSOR_OFFSETS[(acc["id"], after)]:]
    else:
        idx = next((i for i, x in enumerate(ordered) if x["id"] == after), None)
        if idx is None:
            raise ApiError(400, "invalid_cursor", "starting_after does not name a transaction of this account")
        rest = [x for x in ordered[idx + 1:] if not x["_deleted"]]
    items = rest[:limit]
    out = {"data": [txn_json(x) for x in items], "has_more": len(rest) > limit}
    if out["has_more"]:
        out["next_cursor"] = items[-1]["id"]
        if v("cursor-as-offset"):
            CURSOR_OFFSETS[(acc["id"], items[-1]["id"])] = len(live) - len(rest) + len(items)
    if v("extra-fields"):
        out["object"] = "list"
    return out


# ---------------------------------------------------------------- widget

WIDGET_JS = r"""/* %(service)s connect widget */
(function (w) {
  'use strict';
  var BASE = %(base)s;
  try {
    var cs = document.currentScript;
    if (cs && cs.src) { BASE = cs.src.replace(/\/widget\/[^\/]*$/, ''); }
  } catch (e) { /* keep the default */ }
  function post(path, body) {
    return fetch(BASE + path, { method: 'POST', headers: { 'Content-Type': 'text/plain' },
                                body: JSON.stringify(body) })
      .then(function (r) {
        return r.json().then(function (j) {
          if (!r.ok) { throw new Error((j && j.error && j.error.message) || ('HTTP ' + r.status)); }
          return j;
        });
      });
  }
  function mount(el) {
    if (document.body) { document.body.appendChild(el); return; }
    document.addEventListener('DOMContentLoaded', function () { document.body.appendChild(el); });
  }
  function open(a, b, c) {
    var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (!o.token || !o.connectionId) { throw new TypeError('open needs token and connectionId'); }
    var box = document.createElement('div');
    box.setAttribute('role', 'dialog');
    box.style.cssText = 'position:fixed;top:10%%;left:50%%;transform:translateX(-50%%);' +
      'background:#fff;border:1px solid #888;padding:16px;font-family:sans-serif;z-index:99999';
    box.textContent = 'Loading your bank...';
    mount(box);
    var done = false;
    function success(meta) {
      if (done) { return; }
      done = true;
      box.textContent = 'Your bank is connected.';
      if (typeof o.onSuccess === 'function') { o.onSuccess(meta); }
    }
    post('/widget/v1/session', { token: o.token, connectionId: o.connectionId }).then(function (s) {
      if (s.status === 'CONNECTED') { success(s.metadata); return; }
      box.textContent = '';
      var h = document.createElement('p');
      h.textContent = 'Sign in to ' + s.institution.name;
      var btn = document.createElement('button');
      btn.textContent = 'Continue';
      btn.onclick = function () {
        btn.disabled = true;
        post('/widget/v1/submit', { token: o.token, connectionId: o.connectionId })
          .then(function (r) { success(r.metadata); })
          .catch(function (e) { box.textContent = 'Could not connect: ' + e.message; });
      };
      box.appendChild(h);
      box.appendChild(btn);
    }).catch(function (e) { box.textContent = 'Could not open the widget: ' + e.message; });
    return { close: function () { if (box.parentNode) { box.parentNode.removeChild(box); } } };
  }
  w[%(name)s] = { open: open, version: '1.0.0' };
})(window);
"""


def widget_global():
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", SERVICE) if p) + "Connect"


def widget_session(body):
    info = TOKENS.get(body.get("token") or "")
    if info is None or info["expires"] < time.time():
        raise ApiError(401, "invalid_token", "the widget session is invalid or expired")
    conn = CONNS[info["conn"]]
    if body.get("connectionId") not in (None, conn["id"]):
        raise ApiError(400, "connection_mismatch", "the session belongs to another connection")
    return conn


def widget_meta(conn):
    return {"connectionId": conn["id"], "institution": {"id": INSTITUTION["id"], "name": INSTITUTION["name"]}}


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAgg/1.0"

    def log_message(self, fmt, *args):
        pass

    # -- plumbing
    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def send(self, status, payload, ctype="application/json", headers=None):
        if isinstance(payload, (dict, list)):
            data = json.dumps(payload).encode()
        elif isinstance(payload, str):
            data = payload.encode()
        else:
            data = payload or b""
        self.send_response(status)
        if data or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, val in (headers or {}).items():
            self.send_header(k, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error_json(self, e, cors=False):
        headers = {"Access-Control-Allow-Origin": "*"} if cors else {}
        status = e.status
        if v("alt-error-codes"):
            if status == 401:
                return self.send(403, {"message": "Forbidden: " + e.message}, headers=headers)
            if status == 404:
                return self.send(404, "Not Found\n", "text/plain; charset=utf-8", headers)
            if status in (400, 409):
                problem = {"type": "about:blank", "title": e.code, "status": 422 if status == 400 else 400,
                           "detail": e.message}
                return self.send(problem["status"], problem, "application/problem+json", headers)
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="api"'
        self.send(status, {"error": {"code": e.code, "message": e.message}}, headers=headers)

    def handle_any(self):
        parts = urlsplit(self.path)
        path = parts.path
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        body = self.read_body()
        try:
            if path == "/__admin/action":
                if self.command != "POST":
                    raise ApiError(405, "method_not_allowed", "use POST")
                status, out = admin_action(json.loads(body or b"{}"))
                return self.send(status, out)
            if path.startswith("/widget/"):
                return self.widget(path, body)
            if path.startswith("/v1/"):
                return self.api(path, query)
            raise ApiError(404, "not_found", "no such route")
        except ApiError as e:
            self.send_error_json(e, cors=path.startswith("/widget/"))
        except (ValueError, KeyError, TypeError):
            self.send_error_json(ApiError(400, "bad_request", "malformed request"))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any

    def do_OPTIONS(self):
        self.read_body()
        self.send(204, b"", headers={
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type, Authorization",
            "Access-Control-Max-Age": "600"})

    # -- widget
    def widget(self, path, body):
        cors = {"Access-Control-Allow-Origin": "*"}
        if path == "/widget/%s-connect.js" % SERVICE:
            if self.command not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "use GET")
            host = self.headers.get("Host") or "127.0.0.1"
            js = WIDGET_JS % {"service": SERVICE, "base": json.dumps("http://" + host),
                              "name": json.dumps(widget_global())}
            h = dict(cors)
            h["Cache-Control"] = "no-cache"
            return self.send(200, js, "application/javascript; charset=utf-8", h)
        if path in ("/widget/v1/session", "/widget/v1/submit") and self.command == "POST":
            conn = widget_session(json.loads(body or b"{}"))
            if path.endswith("/submit"):
                with conn["lock"]:
                    if conn["status"] != "connected":
                        walk(conn, "connect")
            return self.send(200, {"connectionId": conn["id"], "status": conn["status"].upper(),
                                   "institution": dict(INSTITUTION), "metadata": widget_meta(conn)},
                             headers=cors)
        raise ApiError(404, "not_found", "no such route")

    # -- API
    def bearer(self):
        m = re.fullmatch(r"Bearer +(\S+) *", self.headers.get("Authorization") or "")
        return m.group(1) if m else None

    def api(self, path, query):
        if v("slow-answers"):
            time.sleep(random.uniform(0.15, 0.3))
        token = self.bearer()
        client = KEY2CLIENT.get(token or "")
        session = None
        if client is None:
            info = TOKENS.get(token or "")
            live = info is not None and info["expires"] > time.time()
            if live and v("sess-token-create-leak") and path == "/v1/connections" and self.command == "POST":
                create_connection(CLIENTS[CONNS[info["conn"]]["client"]])  # created before the scope check
            if live and v("widget-token-reads-accounts") and self.command in ("GET", "HEAD"):
                session = CONNS[info["conn"]]
                client = CLIENTS[session["client"]]
            else:
                raise ApiError(401, "unauthorized", "missing or invalid API key")
        if v("rate-limit-429"):
            with LOCK:
                RATE[client["index"]] = RATE.get(client["index"], 0) + 1
                limited = RATE[client["index"]] % 7 == 0
            if limited:
                return self.send(429, {"error": {"code": "rate_limited", "message": "too many requests"}},
                                 headers={"Retry-After": "1"})
        segs = [unquote(s) for s in path.split("/")[2:]]
        method = self.command if self.command != "HEAD" else "GET"
        if segs == ["connections"]:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", "use POST")
            if session is not None:
                raise ApiError(401, "unauthorized", "missing or invalid API key")
            conn = create_connection(client)
            out = {"connectionId": conn["id"], "status": "CREATED", "widgetToken": conn["token"]}
            if v("extra-fields"):
                out.update({"object": "connection", "clientId": client["id"], "createdAt": iso(conn["createdAt"])})
            return self.send(200 if v("alt-error-codes") else 201, out)
        if method != "GET":
            raise ApiError(405, "method_not_allowed", "use GET")
        with LOCK:
            if len(segs) in (2, 3) and segs[0] == "connections" and segs[2:] in ([], ["accounts"]):
                conn = self.own_connection(client, segs[1], session)
                if len(segs) == 2:
                    if session is not None:
                        raise ApiError(401, "unauthorized", "missing or invalid API key")
                    return self.send(200, {"connectionId": conn["id"], "status": conn["status"].upper(),
                                           "createdAt": iso(conn["createdAt"])})
                if conn["status"] != "connected":
                    raise ApiError(409, "connection_not_connected",
                                   "accounts are available only when the connection is CONNECTED")
                if v("accounts-list-stale-cache"):
                    if conn["list_cache"] is None:
                        conn["list_cache"] = [acc_json(a) for a in conn["accounts"]]
                    return self.send(200, conn["list_cache"])
                return self.send(200, [acc_json(a) for a in conn["accounts"]])
            if len(segs) in (2, 3) and segs[0] == "accounts" and segs[2:] in ([], ["transactions"]):
                acc = self.own_account(client, segs[1], session, single=len(segs) == 2)
                if len(segs) == 2:
                    return self.send(200, acc_json(acc))
                return self.send(200, list_transactions(acc, query))
        raise ApiError(404, "not_found", "no such route")

    def own_connection(self, client, cid, session):
        conn = CONNS.get(cid)
        if conn is None or conn["client"] != client["index"]:
            raise ApiError(404, "connection_not_found", "no such connection")
        if session is not None and conn is not session:
            raise ApiError(401, "unauthorized", "missing or invalid API key")
        return conn

    def own_account(self, client, aid, session, single):
        acc = ACCOUNTS.get(aid)
        if acc is None and single and v("account-get-accepts-conn-id"):
            conn = CONNS.get(aid)
            if conn is not None and conn["client"] == client["index"] and conn["accounts"]:
                acc = conn["accounts"][0]  # "primary account" helper resolves connection ids too
        owner_ok = acc is not None and (acc["client"] == client["index"]
                                        or (single and v("single-account-no-owner-check")))
        if not owner_ok:
            raise ApiError(404, "account_not_found", "no such account")
        if session is not None and acc["conn"] != session["id"]:
            raise ApiError(401, "unauthorized", "missing or invalid API key")
        return acc


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    global VARIANT, SERVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    args = ap.parse_args()
    if args.variant not in ["none"] + VIOLATIONS + LEGAL:
        sys.exit("unknown variant %s" % args.variant)
    VARIANT, SERVICE = args.variant, args.service
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        sys.exit("FOREIGN_API_KEYS is empty")
    make_clients(keys)
    if v("idle-close-fast"):
        Handler.timeout = 0.5  # idle keep-alive connections are closed after half a second
    srv = Server(("127.0.0.1", args.port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
