#!/usr/bin/env python3
"""python-artisan: the Bank Connection Aggregation Service as a small team writes it when it owns
every layer itself: its own JSON writer, its own HTTP routing on the standard library, its own
webhook outbox and its own widget script. Python 3.11, standard library only.

Usage: server.py --port 0 --service artisan --variant NAME   (prints the base URL on line 1)
       server.py --list-variants
Keys: ARTISAN_API_KEYS (comma-separated), one client per key.
Test hook: POST /__admin/action with X-Admin-Token (ARTISAN_ADMIN_TOKEN), loopback only.
"""
import argparse
import hashlib
import http.client
import json
import os
import queue
import random
import string
import sys
import threading
import time
import urllib.parse
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VIOLATIONS = [
    "dup-balance-member", "id-case-folded", "soft-error-200", "minor-units-single",
    "subledger-accountid", "monotonic-occurred-at", "get-creates", "session-lists-siblings",
    "accounts-list-truncated", "token-expired-on-issue", "trailing-debug-json",
    "widget-shared-callback",
]
LEGAL = [
    "exponent-numbers", "escaped-json", "vendor-json-type", "cursorless-pages",
    "limit-zero-empty", "connect-via-mfa", "token-single-use", "global-is-function",
    "available-differs-checking", "ids-reserved-chars",
]
VARIANTS = ["none"] + VIOLATIONS + LEGAL

V = "none"
SERVICE = "artisan"
ADMIN_TOKEN = os.environ.get("ARTISAN_ADMIN_TOKEN", "adm_artisan_foreign")
LOCK = threading.RLock()

# ---------------------------------------------------------------- ids and clocks

ID_ALPHABET = string.ascii_uppercase + string.digits
_rng = random.SystemRandom()


def new_id(prefix):
    if V == "ids-reserved-chars":
        # Standard base64 without '/': '+' always present, '=' padding at the end.
        chars = string.ascii_letters + string.digits + "+"
        body = "".join(_rng.choice(chars) for _ in range(23))
        return prefix + body[:4] + "+" + body[4:] + "=="
    return prefix + "".join(_rng.choice(ID_ALPHABET) for _ in range(26))


def now_dt():
    return datetime.now(timezone.utc)


def iso_ms(dt=None):
    dt = dt or now_dt()
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


# ---------------------------------------------------------------- JSON writer


class Pairs(list):
    """An object written member by member, in order (duplicates allowed)."""


def _num(x):
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if V == "exponent-numbers":
        d = Decimal(repr(float(x))).normalize()
        return format(d, "E")
    return repr(float(x))


def _str(s):
    if V == "escaped-json":
        out = []
        for ch in s:
            o = ord(ch)
            if o > 0xFFFF:
                o -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF)))
            else:
                out.append("\\u%04x" % o)
        return '"' + "".join(out) + '"'
    return json.dumps(s)


def enc(v):
    if v is None:
        return "null"
    if isinstance(v, (bool, int, float)):
        return _num(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, Pairs):
        return "{" + ",".join(_str(k) + ":" + enc(x) for k, x in v) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(_str(k) + ":" + enc(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(enc(x) for x in v) + "]"
    raise TypeError(type(v))


# ---------------------------------------------------------------- state

CLIENTS = {}        # key -> client
CONNECTIONS = {}    # id -> connection
ACCOUNTS = {}       # id -> account
TXNS = {}           # id -> transaction
TOKENS = {}         # widget token -> connection id
SESSIONS = {}       # widget session id -> connection id
USED_TOKENS = set()
CONN_SEQ = [0]


def lookup_account(aid):
    if V == "id-case-folded":
        # Ids are matched without regard to case (the store's collation).
        for k, a in ACCOUNTS.items():
            if k.lower() == aid.lower():
                return a
        return None
    return ACCOUNTS.get(aid)


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.id = new_id("cli_")
        self.key_hash = hashlib.sha256(key.encode()).hexdigest()
        self.webhook = None
        self.outbox = queue.Queue()
        self.generation = 0
        threading.Thread(target=self._deliver, daemon=True).start()

    def _deliver(self):
        while True:
            gen, body = self.outbox.get()
            for attempt in range(4):
                with LOCK:
                    url = self.webhook
                    live = gen == self.generation
                if not url or not live:
                    break
                try:
                    u = urllib.parse.urlsplit(url)
                    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=5)
                    path = (u.path or "/") + ("?" + u.query if u.query else "")
                    conn.request("POST", path, body=body, headers={
                        "Content-Type": "application/json", "User-Agent": "artisan-webhooks/1.4"})
                    resp = conn.getresponse()
                    resp.read()
                    conn.close()
                    if 200 <= resp.status < 300:
                        break
                except Exception:
                    pass
                time.sleep((0.3, 1.0, 2.0, 0)[attempt])


def emit(conn, etype, **fields):
    client = conn["client"]
    eid = new_id("evt_")
    t = now_dt()
    data = {"eventId": eid, "type": etype}
    if V == "monotonic-occurred-at":
        data["occurredAt"] = iso_ms(datetime.fromtimestamp(time.monotonic(), timezone.utc))
    else:
        data["occurredAt"] = iso_ms(t)
    data["clientId"] = client.id
    data["connectionId"] = conn["id"]
    data.update(fields)
    env = {"id": eid, "type": etype, "created_at": iso_ms(t), "data": data}
    client.outbox.put((client.generation, enc(env).encode("utf-8")))
    time.sleep(0.003)  # consecutive events get distinct, increasing stamps


def set_status(conn, new):
    prev = conn["status"]
    conn["status"] = new
    emit(conn, "connection." + new.lower(), previousStatus=prev.lower(), error=None)


# ---------------------------------------------------------------- bank data

CATEGORIES = ["groceries", "dining", "transport", "utilities", "shopping", "fees", "transfer"]
SHOPS = ["Fresh Market", "Bakery Lindqvist", "City Transit", "Power & Light Co", "Bookshop Nord",
         "Café Øresund", "Pharmacy 24", "Hardware Depot"]


def make_txn(acc, amount, currency, desc, day, category, created):
    t = {"id": new_id("txn_"), "accountId": acc["id"], "amount": round(amount, 2),
         "currency": currency, "description": desc, "transactionDate": day.isoformat(),
         "category": category, "status": "posted", "createdAt": created,
         "_seq": acc["_seq_next"], "_deleted": False}
    if V == "subledger-accountid" and currency != acc["currency"] and acc.get("_subledger"):
        t["accountId"] = acc["_subledger"]
    acc["_seq_next"] += 1
    TXNS[t["id"]] = t
    acc["_txns"].append(t)
    return t


def build_accounts(conn):
    rng = random.Random(1000 + conn["seq"])
    stamp = iso_ms()
    today = now_dt().date()
    specs = [("Everyday Checking", "checking", 23), ("Rainy Day Savings", "savings", 4),
             ("World Card", "credit_card", 12), ("Index Portfolio", "brokerage", 3),
             ("Retirement Plan", "pension", 0)]
    ids = []
    for name, typ, n in specs:
        a = {"id": new_id("acc_"), "connectionId": conn["id"], "name": name, "type": typ,
             "currency": "EUR", "accountNumber": "****%04d" % rng.randint(1000, 9999),
             "createdAt": stamp, "lastSyncedAt": stamp,
             "institution": {"id": "ins_artisan_demo", "name": "Artisan Demo Bank", "logo": None},
             "_txns": [], "_seq_next": 1}
        if typ == "credit_card":
            a["_subledger"] = new_id("acc_")
        balance = 0.0
        for i in range(n):
            day = today - timedelta(days=i // 2)
            if typ == "checking" and i % 9 == 4:
                amt, desc, cat, cur = 2450.00, "Salary Artisan Ltd", "income", "EUR"
            elif typ == "credit_card" and i % 5 == 2:
                amt, desc, cat, cur = 150.00, "Card payment received", "transfer", "EUR"
            elif typ == "savings":
                amt, desc, cat, cur = 100.00 + i, "Standing order to savings", "transfer", "EUR"
            elif typ in ("brokerage", "pension"):
                amt, desc, cat, cur = -(250.00 + 10 * i), "Fund purchase", "investment", "EUR"
            else:
                amt = -round(rng.uniform(2.5, 120.0), 2)
                desc = rng.choice(SHOPS)
                cat = rng.choice(CATEGORIES)
                cur = "USD" if typ == "credit_card" and i % 3 == 0 else "EUR"
            make_txn(a, amt, cur, desc, day, cat, stamp)
            if cur == "EUR":
                balance += amt
        base = {"checking": 1800.0, "savings": 5200.0, "credit_card": 0.0,
                "brokerage": 12500.0, "pension": 30400.0}[typ]
        a["_balance"] = round(base + balance, 2)
        a["_feed_balance"] = a["_balance"]
        if typ == "credit_card":
            a["creditLimit"] = {"amount": 5000.0, "currency": "EUR"}
            a["currencyBalances"] = [{"currency": "USD", "balance": round(-rng.uniform(20, 90), 2)}]
        if typ == "brokerage":
            a["positions"] = [{"symbol": "VWCE", "quantity": 42.0, "price": 112.5, "currency": "EUR"},
                              {"symbol": "EUNL", "quantity": 10.0, "price": 88.25, "currency": "EUR"}]
        if typ == "pension":
            a["positions"] = [{"symbol": "PENS-GLOBAL", "quantity": 310.0, "price": 98.0, "currency": "EUR"}]
        ACCOUNTS[a["id"]] = a
        ids.append(a["id"])
    conn["accounts"] = ids


def available(a):
    if a["type"] == "credit_card":
        return round(5000.0 + a["_balance"], 2)
    if a["type"] == "checking" and V == "available-differs-checking":
        return round(a["_balance"] - 125.40, 2)  # card holds not yet booked
    return a["_balance"]


def account_view(a, single=False):
    out = Pairs()
    out.append(("id", a["id"].split("_", 1)[0] + "_" + a["id"].split("_", 1)[1].lower()
                if single and V == "id-case-folded" else a["id"]))
    for k in ("connectionId", "name", "type", "currency"):
        out.append((k, a[k]))
    bal, avail = a["_balance"], available(a)
    if single and V == "minor-units-single":
        bal, avail = int(round(bal * 100)), int(round(avail * 100))
    if V == "dup-balance-member":
        out.append(("balance", a["_feed_balance"]))
    out.append(("balance", bal))
    out.append(("availableBalance", avail))
    for k in ("accountNumber", "createdAt", "lastSyncedAt", "institution", "creditLimit",
              "currencyBalances", "positions"):
        if k in a:
            out.append((k, a[k]))
    return out


def txn_view(t):
    return {k: v for k, v in t.items() if not k.startswith("_")}


def ordered(acc):
    return sorted(acc["_txns"], key=lambda t: (t["transactionDate"], t["_seq"]), reverse=True)


# ---------------------------------------------------------------- lifecycle (test hook)


class Refused(Exception):
    pass


def run_action(body):
    action = body.get("action")
    if action == "register_webhook":
        for kh, url in ((body.get("keyHash"), body.get("webhookUrl")),
                        (body.get("secondKeyHash"), body.get("secondWebhookUrl"))):
            if kh and url:
                for c in CLIENTS.values():
                    if c.key_hash == kh:
                        c.webhook = url
        return {}
    if action == "unregister_webhook":
        for c in CLIENTS.values():
            c.webhook = None
            c.generation += 1
        return {}
    conn = CONNECTIONS.get(body.get("connectionId") or "")
    if conn is None:
        raise KeyError("unknown connection")
    st = conn["status"]
    if action in ("connect", "fail_auth", "require_mfa"):
        target = {"connect": "CONNECTED", "fail_auth": "FAILED_AUTH",
                  "require_mfa": "MFA_REQUIRED"}[action]
        if st == target:
            raise Refused("already " + st)
        set_status(conn, "CREDENTIALS_SUBMITTED")
        set_status(conn, "VERIFYING")
        if action == "connect" and V == "connect-via-mfa" and st != "MFA_REQUIRED":
            set_status(conn, "MFA_REQUIRED")   # the bank always asks; the user answers at once
            set_status(conn, "VERIFYING")
        if target == "CONNECTED" and not conn["accounts"]:
            build_accounts(conn)
        set_status(conn, target)
        return {"status": conn["status"]}
    if action in ("error", "disconnect"):
        target = "ERROR" if action == "error" else "DISCONNECTED"
        if st == target:
            raise Refused("already " + st)
        set_status(conn, target)
        return {"status": conn["status"]}
    if action == "update_accounts":
        if st != "CONNECTED":
            raise Refused("not connected")
        aid = body.get("accountId")
        if aid:
            acc = ACCOUNTS.get(aid)
            if acc is None or acc["connectionId"] != conn["id"]:
                raise KeyError("unknown account")
        else:
            acc = ACCOUNTS[conn["accounts"][conn["update_rr"] % len(conn["accounts"])]]
            conn["update_rr"] += 1
        conn["update_n"] += 1
        amt = -round(10 + conn["update_n"] * 1.37, 2)
        stamp = iso_ms()
        t = make_txn(acc, amt, acc["currency"], "Card purchase %d" % conn["update_n"],
                     now_dt().date(), "shopping", stamp)
        acc["_balance"] = round(acc["_balance"] + amt, 2)
        acc["lastSyncedAt"] = stamp
        emit(conn, "accounts.updated", accountId=acc["id"])
        return {"accountId": acc["id"], "transactionId": t["id"]}
    if action == "delete_transaction":
        if st != "CONNECTED":
            raise Refused("not connected")
        tid = body.get("transactionId")
        if tid:
            t = TXNS.get(tid)
            if t is None or t["_deleted"]:
                raise KeyError("unknown transaction")
            acc = next((a for a in ACCOUNTS.values() if any(x is t for x in a["_txns"])), None)
            if acc is None:
                raise KeyError("unknown transaction")
        else:
            aid = body.get("accountId")
            cands = [ACCOUNTS[aid]] if aid in ACCOUNTS else [ACCOUNTS[x] for x in conn["accounts"]]
            t = acc = None
            for a in cands:
                live = [x for x in ordered(a) if not x["_deleted"]]
                if live:
                    t, acc = live[0], a
                    break
            if t is None:
                raise Refused("no transaction to delete")
        t["_deleted"] = True
        emit(conn, "transaction.deleted", accountId=acc["id"], transactionId=t["id"])
        return {"transactionId": t["id"]}
    raise NotImplementedError(action)


# ---------------------------------------------------------------- widget

WIDGET_JS = r"""/* %(Name)sConnect widget 1.4.2 (c) Artisan */
(function () {
  var BASE = %(base)s;
  function args(a, b, c) {
    if (a && typeof a === "object") return { token: a.token, connectionId: a.connectionId, onSuccess: a.onSuccess };
    return { token: a, connectionId: b, onSuccess: c };
  }
  function panel(text) {
    if (!document.body) return;
    var el = document.getElementById("artisan-connect-panel");
    if (!el) {
      el = document.createElement("div");
      el.id = "artisan-connect-panel";
      el.setAttribute("style", "position:fixed;right:16px;bottom:16px;padding:12px;background:#fff;border:1px solid #444;font:14px sans-serif;z-index:99999");
      document.body.appendChild(el);
    }
    el.textContent = text;
  }
  function session(o) {
    return fetch(BASE + "/widget/api/session", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: o.token, connectionId: o.connectionId })
    }).then(function (r) {
      if (!r.ok) throw new Error("session refused (" + r.status + ")");
      return r.json();
    });
  }
  function status(sid) {
    return fetch(BASE + "/widget/api/status?session=" + encodeURIComponent(sid)).then(function (r) { return r.json(); });
  }
%(open)s
})();
"""

OPEN_CLEAN = r"""  function open(a, b, c) {
    var o = args(a, b, c);
    if (!o.token || !o.connectionId) throw new TypeError("open: token and connectionId are required");
    var state = { done: false };
    panel("Connecting to your bank…");
    session(o).then(function (s) {
      var started = Date.now();
      (function poll() {
        if (state.done) return;
        status(s.sessionId).then(function (st) {
          if (st.status === "CONNECTED") {
            state.done = true;
            panel("Connected.");
            if (typeof o.onSuccess === "function") o.onSuccess({ connectionId: st.connectionId, status: st.status, institution: st.institution });
          } else if (Date.now() - started < 600000) {
            panel("Waiting for your bank (" + st.status.toLowerCase() + ")…");
            setTimeout(poll, 300);
          }
        }, function () { setTimeout(poll, 800); });
      })();
    }, function (e) { panel("The widget could not start: " + e.message); });
    return { close: function () { state.done = true; } };
  }
%(expose)s"""

OPEN_SHARED = r"""  var current = { sid: null, onSuccess: null, done: false }, polling = false;
  function poll() {
    if (current.done || !current.sid) { polling = false; return; }
    status(current.sid).then(function (st) {
      if (st.status === "CONNECTED") {
        current.done = true; polling = false;
        panel("Connected.");
        if (typeof current.onSuccess === "function") current.onSuccess({ connectionId: st.connectionId, status: st.status, institution: st.institution });
      } else { setTimeout(poll, 300); }
    }, function () { setTimeout(poll, 800); });
  }
  function open(a, b, c) {
    var o = args(a, b, c);
    if (!o.token || !o.connectionId) throw new TypeError("open: token and connectionId are required");
    current.onSuccess = o.onSuccess; current.done = false;
    panel("Connecting to your bank…");
    session(o).then(function (s) {
      current.sid = s.sessionId;
      if (!polling) { polling = true; poll(); }
    }, function (e) { panel("The widget could not start: " + e.message); });
    return { close: function () { current.done = true; } };
  }
%(expose)s"""

EXPOSE_OBJECT = '  window.%(Name)sConnect = { open: open, version: "1.4.2" };'
EXPOSE_FUNCTION = ('  function %(Name)sConnect(opts) { return opts ? open(opts) : %(Name)sConnect; }\n'
                   '  %(Name)sConnect.open = open;\n  %(Name)sConnect.version = "1.4.2";\n'
                   '  window.%(Name)sConnect = %(Name)sConnect;')


def widget_script(base):
    name = SERVICE[:1].upper() + SERVICE[1:]
    expose = (EXPOSE_FUNCTION if V == "global-is-function" else EXPOSE_OBJECT) % {"Name": name}
    body = (OPEN_SHARED if V == "widget-shared-callback" else OPEN_CLEAN) % {"expose": expose}
    return WIDGET_JS % {"Name": name, "base": json.dumps(base), "open": body}


# ---------------------------------------------------------------- HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "artisan/1.4"

    def log_message(self, fmt, *args):
        pass

    # -- output
    def send(self, status, body, ctype="application/json", headers=None):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def api(self, status, obj, trailer=None):
        ctype = ("application/vnd.%s.v1+json" % SERVICE if V == "vendor-json-type"
                 else "application/json")
        text = enc(obj)
        if trailer:
            text += "\n" + trailer
        self.send(status, text, ctype)

    def err(self, status, code, message):
        self.api(status, {"error": {"code": code, "message": message}})

    def cors(self, status, obj):
        self.send(status, json.dumps(obj), "application/json", {
            "Access-Control-Allow-Origin": "*", "Vary": "Origin"})

    # -- input
    def parts(self):
        u = urllib.parse.urlsplit(self.path)
        segs = [urllib.parse.unquote(s) for s in u.path.split("/")][1:]
        return segs, urllib.parse.parse_qs(u.query, keep_blank_values=True)

    def body_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def client(self):
        h = self.headers.get("Authorization") or ""
        if not h.startswith("Bearer "):
            return None
        return CLIENTS.get(h[len("Bearer "):].strip())

    def base_url(self):
        return "http://" + (self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_port)

    # -- methods
    def do_OPTIONS(self):
        self.send(204, b"", "text/plain", {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": "600"})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_HEAD(self):
        self.route("GET")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PATCH(self):
        self.route("PATCH")

    def route(self, method):
        try:
            with LOCK:
                self._route(method)
        except BrokenPipeError:
            pass
        except Exception as e:  # never leave a request unanswered
            sys.stderr.write("artisan: %s %s: %r\n" % (method, self.path, e))
            try:
                self.err(500, "internal_error", "internal error")
            except Exception:
                pass

    def _route(self, method):
        segs, q = self.parts()
        if segs and segs[0] == "widget":
            return self.widget(method, segs, q)
        if segs == ["__admin", "action"] and method == "POST":
            return self.admin()
        if not segs or segs[0] != "v1":
            return self.err(404, "not_found", "no such route")
        if method not in ("GET", "POST"):
            self.body_json()
            return self.err(405, "method_not_allowed", "method not allowed")
        client = self.client()
        if method == "POST":
            self.body_json()
        if client is None:
            return self.send(401, enc({"error": {"code": "unauthorized",
                                                 "message": "missing or invalid API key"}}),
                             "application/json", {"WWW-Authenticate": 'Bearer realm="%s"' % SERVICE})
        if segs == ["v1", "connections"]:
            if method == "POST" or V == "get-creates":
                return self.create(client)
            return self.err(405, "method_not_allowed", "method not allowed")
        if method != "GET":
            return self.err(405, "method_not_allowed", "method not allowed")
        if len(segs) == 4 and segs[1] == "connections" and segs[3] == "accounts":
            return self.accounts(client, segs[2])
        if len(segs) == 3 and segs[1] == "accounts":
            return self.account(client, segs[2])
        if len(segs) == 4 and segs[1] == "accounts" and segs[3] == "transactions":
            return self.transactions(client, segs[2], q)
        return self.err(404, "not_found", "no such route")

    # -- API
    def create(self, client):
        CONN_SEQ[0] += 1
        conn = {"id": new_id("conn_"), "client": client, "status": "CREATED",
                "token": new_id("sess_"), "accounts": [], "seq": CONN_SEQ[0],
                "update_rr": 0, "update_n": 0, "createdAt": iso_ms()}
        CONNECTIONS[conn["id"]] = conn
        TOKENS[conn["token"]] = conn["id"]
        self.api(201, {"connectionId": conn["id"], "status": "CREATED",
                       "widgetToken": conn["token"]})
        emit(conn, "connection.created", previousStatus=None, error=None)

    def accounts(self, client, cid):
        conn = CONNECTIONS.get(cid)
        if conn is None or conn["client"] is not client:
            return self.err(404, "connection_not_found", "no such connection")
        if conn["status"] != "CONNECTED":
            if V == "soft-error-200":
                return self.api(200, {"error": {"code": "connection_not_connected",
                                                "message": "connection is %s" % conn["status"]}})
            return self.err(409, "connection_not_connected",
                            "accounts are available once the connection is CONNECTED")
        ids = conn["accounts"][:4] if V == "accounts-list-truncated" else conn["accounts"]
        self.api(200, [account_view(ACCOUNTS[a]) for a in ids])

    def owned_account(self, client, aid):
        a = lookup_account(aid)
        if a is None or CONNECTIONS[a["connectionId"]]["client"] is not client:
            return None
        return a

    def account(self, client, aid):
        a = self.owned_account(client, aid)
        if a is None:
            return self.err(404, "account_not_found", "no such account")
        trailer = None
        if V == "trailing-debug-json":
            trailer = json.dumps({"debug": {"handler": "account.show", "tookMs": 3}})
        self.api(200, account_view(a, single=True), trailer)

    def transactions(self, client, aid, q):
        a = self.owned_account(client, aid)
        if a is None:
            return self.err(404, "account_not_found", "no such account")
        limit = 25
        if "limit" in q:
            raw = q["limit"][-1]
            try:
                limit = int(raw)
            except ValueError:
                return self.err(400, "invalid_limit", "limit must be a whole number")
            if limit < 1 and not (limit == 0 and V == "limit-zero-empty"):
                return self.err(400, "invalid_limit", "limit must be at least 1")
            limit = min(limit, 100)
        lst = ordered(a)
        start = 0
        if "starting_after" in q:
            cur = q["starting_after"][-1]
            idx = next((i for i, t in enumerate(lst) if t["id"] == cur), None)
            if idx is None:
                return self.err(400, "invalid_cursor", "starting_after names no transaction of this account")
            start = idx + 1
        rest = [t for t in lst[start:] if not t["_deleted"]]
        page = rest[:limit]
        out = {"data": [txn_view(t) for t in page], "has_more": len(rest) > len(page)}
        if out["has_more"] and page and V != "cursorless-pages":
            out["next_cursor"] = page[-1]["id"]
        self.api(200, out)

    # -- widget
    def widget(self, method, segs, q):
        if method == "GET" and segs == ["widget", SERVICE + "-connect.js"]:
            return self.send(200, widget_script(self.base_url()), "text/javascript; charset=utf-8", {
                "Access-Control-Allow-Origin": "*",
                "Cross-Origin-Resource-Policy": "cross-origin",
                "Cache-Control": "no-cache"})
        if method == "POST" and segs == ["widget", "api", "session"]:
            body = self.body_json() or {}
            token = body.get("token") or ""
            cid = TOKENS.get(token)
            if cid is None or cid != body.get("connectionId"):
                return self.cors(401, {"error": "invalid_token"})
            if V == "token-expired-on-issue":
                # Expiry is written in seconds and compared with a clock in milliseconds.
                return self.cors(401, {"error": "token_expired"})
            if V == "token-single-use":
                if token in USED_TOKENS:
                    return self.cors(410, {"error": "token_already_used"})
                USED_TOKENS.add(token)
            conn = CONNECTIONS[cid]
            sid = new_id("wss_")
            SESSIONS[sid] = cid
            out = {"sessionId": sid, "connectionId": cid, "status": conn["status"],
                   "institution": {"id": "ins_artisan_demo", "name": "Artisan Demo Bank"}}
            if V == "session-lists-siblings":
                out["recentConnections"] = [
                    {"connectionId": c["id"], "status": c["status"],
                     "accounts": [{"id": ACCOUNTS[x]["id"], "name": ACCOUNTS[x]["name"],
                                   "accountNumber": ACCOUNTS[x]["accountNumber"],
                                   "balance": ACCOUNTS[x]["_balance"]} for x in c["accounts"]]}
                    for c in list(CONNECTIONS.values())[-10:]
                    if c["client"] is conn["client"] and c["id"] != cid]
            return self.cors(200, out)
        if method == "GET" and segs == ["widget", "api", "status"]:
            cid = SESSIONS.get((q.get("session") or [""])[-1])
            if cid is None:
                return self.cors(401, {"error": "invalid_session"})
            conn = CONNECTIONS[cid]
            return self.cors(200, {"connectionId": cid, "status": conn["status"],
                                   "institution": {"id": "ins_artisan_demo",
                                                   "name": "Artisan Demo Bank"}})
        return self.send(404, json.dumps({"error": "not_found"}), "application/json",
                         {"Access-Control-Allow-Origin": "*"})

    # -- test hook
    def admin(self):
        body = self.body_json()
        if self.headers.get("X-Admin-Token") != ADMIN_TOKEN or self.client_address[0] != "127.0.0.1":
            return self.send(403, b'{"error":"forbidden"}')
        if not isinstance(body, dict):
            return self.send(400, b'{"error":"bad body"}')
        try:
            out = run_action(body)
        except Refused as e:
            return self.send(409, json.dumps({"error": str(e)}))
        except KeyError as e:
            return self.send(404, json.dumps({"error": str(e)}))
        except NotImplementedError as e:
            return self.send(501, json.dumps({"error": "unsupported %s" % e}))
        self.send(200, json.dumps(out))


def main():
    global V, SERVICE
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--variant", default="none")
    p.add_argument("--service", default="artisan")
    p.add_argument("--list-variants", action="store_true")
    a = p.parse_args()
    if a.list_variants:
        print("\n".join(VARIANTS))
        return
    if a.variant not in VARIANTS:
        sys.exit("unknown variant %r" % a.variant)
    V, SERVICE = a.variant, a.service
    keys = [k for k in os.environ.get("ARTISAN_API_KEYS", "").split(",") if k]
    for i, k in enumerate(keys):
        CLIENTS[k] = Client(k, i)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    print("http://127.0.0.1:%d" % srv.server_port, flush=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        sys.stdin.read()  # the runner holds stdin open while we should live
    except KeyboardInterrupt:
        pass
    srv.shutdown()


if __name__ == "__main__":
    main()
