#!/usr/bin/env python3
"""A foreign implementation of the Bank Connection Aggregation Service (service-spec.md).

Standard library only. Written from the spec alone, as an outside implementer would, to serve as a
conformance-test target for bankconf. `--variant base` conforms; the other variants (VARIANTS.md)
either break a rule of the spec on purpose or take a choice the spec leaves open.

    python3 server.py --port 0 --variant base --service acme

prints `http://127.0.0.1:PORT` as its first stdout line. API keys of the two clients come from the
environment variable FOREIGN_API_KEYS (comma separated, each `<service>_live_<random>`); without
it two keys are generated and printed on stdout lines 2 and 3 (`key1=...`, `key2=...`).

Admin API (for the driver, same port):
    POST   /admin/webhooks   {"url": ...}  with Authorization: Bearer <client key>: register the
                                           client's webhook address
    DELETE /admin/webhooks   {"url": ...}  unregister it (all of the client's when url absent)
    POST   /admin/connections/{id}/{action} {"accountId"?, "transactionId"?}
           action in connect, fail_auth, require_mfa, error, disconnect, update_accounts,
           delete_transaction; 200 done, 409 refused from the current state, 404 unknown.

The server stops when its stdin closes, on SIGTERM/SIGINT, and after --max-seconds (900).
"""

import argparse
import base64
import hashlib
import json
import os
import queue
import random
import secrets
import signal
import string
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

VIOLATIONS = {
    "event-id-derived", "account-wrong-object", "txn-id-per-account", "refused-creates",
    "no-disconnect-event", "reemit-connected", "deleted-still-listed", "tz-local-as-utc",
    "lazy-account-created", "widget-token-as-key", "cross-client-transactions",
    "key-truncated-compare", "widget-session-leaks-key", "webhook-cross-client",
    "cursor-inclusive", "has-more-empty-page", "limit-plus-one", "previous-status-upper",
    "created-at-no-ms", "fail-auth-as-error", "accounts-after-disconnect", "widget-no-global",
    "status-lowercase-api", "event-data-mismatch", "event-before-state",
}
LEGAL = {
    "error-codes", "id-format", "order-asc", "webhook-delay", "dup-shuffle", "clock-ahead",
    "rate-limit", "small-pages", "extra-fields", "account-minimal-shape", "next-cursor-always",
    "direct-failures", "short-connected", "widget-immediate-success", "strict-transitions",
    "reenter-announced",
}

ARGS = None
V = "base"
SERVICE = "acme"
LOCK = threading.RLock()
ALNUM = string.ascii_uppercase + string.digits


def is_(name):
    return V == name


# ---------------------------------------------------------------- time and ids

def now():
    t = time.time()
    if is_("clock-ahead"):
        t += 40.0
    return t


def iso_ms(t):
    d = datetime.fromtimestamp(t, timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def iso_s(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_id(prefix):
    if is_("id-format"):
        return prefix + secrets.token_hex(16)
    return prefix + "".join(secrets.choice(ALNUM) for _ in range(26))


def new_token():
    if is_("id-format"):
        return "sess_" + secrets.token_urlsafe(30)
    return "sess_" + "".join(secrets.choice(ALNUM) for _ in range(32))


# ---------------------------------------------------------------- state

class Client:
    def __init__(self, idx, key):
        self.idx = idx
        self.key = key
        self.id = new_id("cli_")
        self.urls = []
        self.bucket = [15.0, time.monotonic()]


CLIENTS = []
CONNECTIONS = {}      # id -> dict
TOKENS = {}           # widget token -> connection id
ACCOUNTS = {}         # id -> dict (with "_txns", "_conn")
TXN_COUNTERS = {}     # account id -> int (txn-id-per-account)
DERIVED_SEEN = {}


STATUSES = ["created", "credentials_submitted", "verifying", "connected", "mfa_required",
            "failed_auth", "error", "disconnected"]


def client_by_key(key):
    if not key:
        return None
    for c in CLIENTS:
        if is_("key-truncated-compare"):
            n = len(SERVICE) + len("_live_") + 8
            if len(key) >= n and key[:n] == c.key[:n]:
                return c
        elif secrets.compare_digest(key.encode(), c.key.encode()):
            return c
    if is_("widget-token-as-key") and key in TOKENS:
        conn = CONNECTIONS.get(TOKENS[key])
        if conn:
            return CLIENTS[conn["client"]]
    return None


# ---------------------------------------------------------------- webhooks

class Deliverer:
    def __init__(self):
        self.q = queue.Queue()
        self.pending = []
        self.pending_lock = threading.Lock()
        for _ in range(4):
            threading.Thread(target=self.worker, daemon=True).start()
        if is_("dup-shuffle"):
            threading.Thread(target=self.shuffler, daemon=True).start()

    def submit(self, body, client_idx):
        targets = list(CLIENTS[client_idx].urls)
        if is_("webhook-cross-client") and body.get("type", "").startswith("connection."):
            for c in CLIENTS:
                if c.idx != client_idx:
                    targets += c.urls
        for url in targets:
            item = (url, body, client_idx)
            if is_("webhook-delay"):
                threading.Timer(random.uniform(2.0, 4.0), self.q.put, args=(item,)).start()
            elif is_("dup-shuffle"):
                with self.pending_lock:
                    self.pending.append(item)
                    self.pending.append(item)
            else:
                self.q.put(item)

    def shuffler(self):
        while True:
            time.sleep(0.4)
            with self.pending_lock:
                batch, self.pending = self.pending, []
            random.shuffle(batch)
            for item in batch:
                self.q.put(item)

    def worker(self):
        while True:
            url, body, client_idx = self.q.get()
            data = json.dumps(body).encode()
            for attempt in range(4):
                if not any(url in c.urls for c in CLIENTS):
                    break  # unregistered: stop delivering and retrying
                try:
                    req = urllib.request.Request(url, data=data, method="POST")
                    req.add_header("Content-Type", "application/json")
                    req.add_header("User-Agent", f"{SERVICE}-webhooks/1.0")
                    with urllib.request.urlopen(req, timeout=5) as r:
                        if 200 <= r.status < 300:
                            break
                except Exception:
                    pass
                time.sleep(0.5 * (2 ** attempt))


DELIVERER = None


def event_time():
    t = now()
    if is_("tz-local-as-utc"):
        t += 7200.0  # local time (UTC+2) written with a Z
    return t


def emit(conn, etype, previous=None, error=None, account_id=None, transaction_id=None,
         client_idx=None):
    client = CLIENTS[conn["client"] if client_idx is None else client_idx]
    if is_("event-id-derived"):
        h = hashlib.sha1(f"{conn['id']}|{etype}|{account_id}|{transaction_id}".encode()).hexdigest()
        eid = "evt_" + h[:26].upper()
    else:
        eid = new_id("evt_")
    t = event_time()
    if is_("short-connected") and etype == "connection.connected":
        body = {"event": etype, "connectionId": conn["id"], "timestamp": iso_s(t)}
        DELIVERER.submit(body, client.idx)
        return
    data = {
        "eventId": eid,
        "type": etype,
        "occurredAt": iso_ms(t),
        "clientId": client.id,
        "connectionId": conn["id"],
    }
    if is_("event-data-mismatch") and etype == "accounts.updated":
        data["eventId"] = new_id("evt_")
    if etype.startswith("connection."):
        prev = previous
        if prev is not None and is_("previous-status-upper"):
            prev = prev.upper()
        data["previousStatus"] = prev
        data["error"] = error
    if account_id is not None:
        data["accountId"] = account_id
    if transaction_id is not None:
        data["transactionId"] = transaction_id
    if is_("extra-fields"):
        data["institutionId"] = "ins_demo_bank"
    body = {
        "id": eid,
        "type": etype,
        "created_at": iso_s(t) if is_("created-at-no-ms") else iso_ms(t),
        "data": data,
    }
    if is_("extra-fields"):
        body["api_version"] = "v1"
        body["livemode"] = False
    DELIVERER.submit(body, client.idx)


# ---------------------------------------------------------------- data

CATEGORIES = ["groceries", "income", "transport", "restaurants", "utilities", "shopping", "rent"]
MERCHANTS = ["Corner Grocery", "Salary ACME Ltd", "City Transit", "Pizza Place", "Power & Light",
             "Book Shop", "Landlord Ltd"]


def make_txn(acc, k, t, days_ago, amount=None):
    if is_("txn-id-per-account"):
        TXN_COUNTERS[acc["id"]] = TXN_COUNTERS.get(acc["id"], 0) + 1
        tid = "txn_" + f"{TXN_COUNTERS[acc['id']]:026d}"
    else:
        tid = new_id("txn_")
    cat = CATEGORIES[k % len(CATEGORIES)]
    if amount is None:
        amount = round(random.uniform(1500, 3200), 2) if cat == "income" else -round(random.uniform(2, 180), 2)
    d = (datetime.fromtimestamp(t, timezone.utc) - timedelta(days=days_ago)).strftime("%Y-%m-%d")
    txn = {
        "id": tid,
        "accountId": acc["id"],
        "amount": amount,
        "currency": acc["currency"],
        "description": MERCHANTS[k % len(MERCHANTS)],
        "transactionDate": d,
        "category": cat,
        "status": "posted",
        "createdAt": iso_ms(t),
    }
    if is_("extra-fields"):
        txn["object"] = "transaction"
        txn["merchantName"] = MERCHANTS[k % len(MERCHANTS)]
    return txn


ACCOUNT_PLAN = [
    ("Everyday Checking", "checking", "EUR", 30),
    ("Rainy Day Savings", "savings", "EUR", 3),
    ("Travel Credit Card", "credit_card", "USD", 12),
    ("Brokerage", "brokerage", "USD", 0),
    ("Pension Plan", "pension", "EUR", 1),
]


def create_accounts(conn):
    t = now()
    for name, typ, cur, ntx in ACCOUNT_PLAN:
        acc = {
            "id": new_id("acc_"),
            "connectionId": conn["id"],
            "name": name,
            "type": typ,
            "currency": cur,
            "balance": 0.0,
            "availableBalance": 0.0,
            "accountNumber": "****" + "".join(random.choice(string.digits) for _ in range(4)),
            "createdAt": None if is_("lazy-account-created") else iso_ms(t),
            "lastSyncedAt": iso_ms(t),
            "institution": {"id": "ins_demo_bank", "name": "Demo Bank", "logo": None},
        }
        if typ == "credit_card":
            acc["creditLimit"] = {"amount": 5000.0, "currency": cur}
            acc["currencyBalances"] = [{"currency": "EUR", "balance": -12.5}]
        if typ in ("brokerage", "pension"):
            acc["positions"] = [{"symbol": "VWCE", "name": "All-World ETF", "quantity": 12.0,
                                 "value": 1380.24, "currency": cur}]
        if is_("extra-fields"):
            acc["object"] = "account"
            acc["updatedAt"] = iso_ms(t)
        txns = [make_txn(acc, k, t, days_ago=k // 2 + 1,
                         amount=(-round(random.uniform(2, 180), 2) if typ == "credit_card" else None))
                for k in range(ntx)]
        # newest first (transactionDate descending), stable
        if is_("order-asc"):
            txns.reverse()
        bal = round(1000.0 + sum(x["amount"] for x in txns), 2)
        if typ == "credit_card":
            bal = round(sum(x["amount"] for x in txns), 2)
            acc["availableBalance"] = round(5000.0 + bal, 2)
        elif typ in ("brokerage", "pension"):
            bal = 1380.24
            acc["availableBalance"] = 0.0
        else:
            acc["availableBalance"] = bal
        acc["balance"] = bal
        acc["_txns"] = txns
        acc["_deleted"] = set()
        ACCOUNTS[acc["id"]] = acc
        conn["accounts"].append(acc["id"])


def public_account(acc):
    if is_("lazy-account-created") and acc["createdAt"] is None:
        acc["createdAt"] = iso_ms(now())
    return {k: v for k, v in acc.items() if not k.startswith("_")}


# ---------------------------------------------------------------- transitions

def set_status(conn, new, etype=None, error=None, emit_event=True):
    prev = conn["status"]
    conn["status"] = new
    if emit_event:
        emit(conn, etype or f"connection.{new}", previous=prev, error=error)


AUTH_ERR = {"code": "invalid_credentials", "message": "The bank rejected the credentials."}
MFA_ERR = None
ERR_ERR = {"code": "institution_error", "message": "Unexpected error while talking to the bank."}

STRICT = {
    "connect": {"created", "mfa_required", "failed_auth", "error"},
    "fail_auth": {"created", "mfa_required"},
    "require_mfa": {"created"},
    "error": {"created", "verifying", "connected", "mfa_required"},
    "disconnect": {"created", "connected", "mfa_required", "failed_auth", "error"},
}
BASE_FROM = {
    "connect": {"created", "mfa_required", "failed_auth", "error", "disconnected"},
    "fail_auth": {"created", "mfa_required", "failed_auth", "error", "disconnected"},
    "require_mfa": {"created", "failed_auth", "error", "disconnected"},
    "error": {"created", "credentials_submitted", "verifying", "connected", "mfa_required",
              "failed_auth"},
    "disconnect": {"created", "credentials_submitted", "verifying", "connected", "mfa_required",
                   "failed_auth", "error"},
}


REENTERS = {"connect": "connected", "fail_auth": "failed_auth", "require_mfa": "mfa_required",
            "error": "error", "disconnect": "disconnected"}


def do_action(conn, action, body):
    """Returns (status code, json body)."""
    st = conn["status"]
    target = REENTERS.get(action)
    if is_("reenter-announced") and target == st:
        # The user did it again (wrong credentials again, another MFA prompt): the connection
        # re-enters the state it is in, announced with that state as previousStatus.
        set_status(conn, st, error=AUTH_ERR if st == "failed_auth" else (ERR_ERR if st == "error" else None))
        return 200, {"status": st.upper()}
    allowed = (STRICT if is_("strict-transitions") else BASE_FROM).get(action)
    if allowed is not None and st not in allowed:
        return 409, {"error": "invalid_state", "message": f"cannot {action} from {st}"}
    if action == "connect":
        if st == "mfa_required":
            set_status(conn, "credentials_submitted")  # the second factor is submitted
        else:
            set_status(conn, "credentials_submitted")
        set_status(conn, "verifying")
        if not conn["accounts"]:
            create_accounts(conn)
        else:
            for aid in conn["accounts"]:
                ACCOUNTS[aid]["lastSyncedAt"] = iso_ms(now())
        if is_("event-before-state"):
            emit(conn, "connection.connected", previous="verifying", error=None)

            def later():
                time.sleep(3.0)
                with LOCK:
                    conn["status"] = "connected"
            threading.Thread(target=later, daemon=True).start()
            return 200, {"status": "accepted"}
        set_status(conn, "connected")
        return 200, {"status": conn["status"].upper()}
    if action in ("fail_auth", "require_mfa"):
        target = "failed_auth" if action == "fail_auth" else "mfa_required"
        set_status(conn, "credentials_submitted")
        if not is_("direct-failures"):
            set_status(conn, "verifying")
        if target == "failed_auth":
            etype = "connection.error" if is_("fail-auth-as-error") else None
            set_status(conn, "failed_auth", etype=etype, error=AUTH_ERR)
        else:
            set_status(conn, "mfa_required", error=None)
        return 200, {"status": conn["status"].upper()}
    if action == "error":
        set_status(conn, "error", error=ERR_ERR)
        return 200, {"status": "ERROR"}
    if action == "disconnect":
        set_status(conn, "disconnected", emit_event=not is_("no-disconnect-event"))
        return 200, {"status": "DISCONNECTED"}
    if action == "update_accounts":
        if st != "connected":
            return 409, {"error": "invalid_state", "message": "connection is not CONNECTED"}
        aid = body.get("accountId")
        if aid and aid not in conn["accounts"]:
            return 404, {"error": "not_found", "message": "no such account in this connection"}
        aid = aid or conn["accounts"][0]
        acc = ACCOUNTS[aid]
        t = now()
        amount = -round(random.uniform(5, 90), 2)
        txn = make_txn(acc, random.randrange(len(CATEGORIES)), t, 0, amount=amount)
        if txn["category"] == "income":
            txn["category"] = "shopping"
        if is_("order-asc"):
            acc["_txns"].append(txn)
        else:
            acc["_txns"].insert(0, txn)
        acc["balance"] = round(acc["balance"] + amount, 2)
        acc["availableBalance"] = round(acc["availableBalance"] + amount, 2)
        acc["lastSyncedAt"] = iso_ms(t)
        if is_("extra-fields"):
            acc["updatedAt"] = iso_ms(t)
        if is_("reemit-connected"):
            emit(conn, "connection.connected", previous="connected", error=None)
        emit(conn, "accounts.updated", account_id=aid)
        return 200, {"accountId": aid, "transactionId": txn["id"]}
    if action == "delete_transaction":
        if st != "connected":
            return 409, {"error": "invalid_state", "message": "connection is not CONNECTED"}
        aid = body.get("accountId")
        tid = body.get("transactionId")
        if aid and aid not in conn["accounts"]:
            return 404, {"error": "not_found", "message": "no such account in this connection"}
        cands = [aid] if aid else list(conn["accounts"])
        found = None
        for a in cands:
            acc = ACCOUNTS[a]
            live = [x for x in acc["_txns"] if x["id"] not in acc["_deleted"]]
            for x in live:
                if tid is None or x["id"] == tid:
                    found = (acc, x)
                    break
            if found:
                break
        if not found:
            if tid:
                return 404, {"error": "not_found", "message": "no such transaction"}
            return 409, {"error": "invalid_state", "message": "no transaction to delete"}
        acc, x = found
        if not is_("deleted-still-listed"):
            acc["_deleted"].add(x["id"])
        emit(conn, "transaction.deleted", account_id=acc["id"], transaction_id=x["id"])
        return 200, {"accountId": acc["id"], "transactionId": x["id"]}
    return 404, {"error": "unknown_action"}


# ---------------------------------------------------------------- HTTP

def widget_script():
    name = "".join(p.capitalize() for p in SERVICE.replace("_", "-").split("-")) + "Connect"
    immediate = "true" if is_("widget-immediate-success") else "false"
    export = "" if is_("widget-no-global") else f"  window.{name} = api;\n"
    return f"""/* {SERVICE} connect widget */
(function () {{
  var current = document.currentScript;
  var base = current && current.src ? current.src.replace(/\\/widget\\/[^\\/]*$/, '') : '';
  var immediate = {immediate};
  function open(options, connectionId, onSuccess) {{
    if (typeof options === 'string') {{
      options = {{ token: options, connectionId: connectionId, onSuccess: onSuccess }};
    }}
    if (!options || typeof options.token !== 'string' || options.token.indexOf('sess_') !== 0) {{
      throw new Error('{name}.open: a widget token (sess_...) is required');
    }}
    var box = document.createElement('div');
    box.setAttribute('role', 'dialog');
    box.style.cssText = 'position:fixed;inset:10%;background:#fff;border:1px solid #888;padding:1em;font-family:sans-serif';
    box.textContent = 'Connecting to your bank...';
    (document.body || document.documentElement).appendChild(box);
    var done = false;
    function finish(meta) {{
      if (done) return;
      done = true;
      if (typeof options.onSuccess === 'function') options.onSuccess(meta);
    }}
    fetch(base + '/widget/session?connectionId=' + encodeURIComponent(options.connectionId || ''), {{
      headers: {{ 'Authorization': 'Bearer ' + options.token, 'Accept': 'application/json' }}
    }}).then(function (r) {{ return r.json(); }}).then(function (s) {{
      box.textContent = 'Choose your bank: ' + ((s.institutions || []).map(function (i) {{ return i.name; }}).join(', '));
      if (immediate) finish({{ connectionId: s.connectionId, status: s.status, institution: s.institutions && s.institutions[0] }});
    }}).catch(function (e) {{ box.textContent = 'The widget could not start.'; }});
    return {{ close: function () {{ if (box.parentNode) box.parentNode.removeChild(box); }} }};
  }}
  var api = {{ open: open, version: '1.0.0' }};
{export}}})();
"""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ForeignBank/1.0"

    def log_message(self, fmt, *args):
        if os.environ.get("FOREIGN_LOG"):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # ---- helpers
    def send(self, code, body=None, ctype="application/json", headers=None):
        if body is None:
            raw = b""
        elif isinstance(body, (bytes, str)):
            raw = body.encode() if isinstance(body, str) else body
        else:
            raw = json.dumps(body).encode()
        self.send_response(code)
        if raw or ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def err(self, code, kind, message):
        if is_("error-codes"):
            if code == 401 and kind == "missing":
                return self.send(401, "Unauthorized\n", ctype="text/plain")
            if code == 401:
                return self.send(403, {"errors": [{"code": "forbidden", "detail": message}]})
            if code == 409:
                return self.send(400, {"errors": [{"code": "connection_not_ready", "detail": message}]})
            if code == 404 and kind == "foreign":
                return self.send(403, {"errors": [{"code": "forbidden", "detail": "not yours"}]})
            if code == 404:
                return self.send(404, None, ctype="")
        return self.send(code, {"error": {"code": kind, "message": message}})

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        if not raw:
            return {}
        try:
            v = json.loads(raw)
            return v if isinstance(v, dict) else {}
        except ValueError:
            return {}

    def bearer(self):
        h = self.headers.get("Authorization") or ""
        parts = h.split(None, 1)
        if len(parts) == 2 and parts[0].lower() == "bearer":
            return parts[1].strip()
        return None

    def rate_limited(self, client):
        if not is_("rate-limit"):
            return False
        with LOCK:
            tokens, last = client.bucket
            t = time.monotonic()
            tokens = min(15.0, tokens + (t - last) * 15.0)
            if tokens < 1.0:
                client.bucket = [tokens, t]
                self.send(429, {"error": {"code": "rate_limited", "message": "slow down"}},
                          headers={"Retry-After": "1"})
                return True
            client.bucket = [tokens - 1.0, t]
        return False

    # ---- dispatch
    def do_OPTIONS(self):
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Headers", "Authorization, Accept, Content-Type")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PUT(self):
        self.route("PUT")

    def do_PATCH(self):
        self.route("PATCH")

    def route(self, method):
        try:
            self._route(method)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # never leak a traceback
            import traceback
            traceback.print_exc()
            try:
                self.send(500, {"error": {"code": "internal", "message": "internal error"}})
            except Exception:
                pass

    def _route(self, method):
        u = urlsplit(self.path)
        path = u.path
        q = parse_qs(u.query, keep_blank_values=True)
        segs = [unquote(s) for s in path.strip("/").split("/")] if path.strip("/") else []
        if segs and segs[0] == "widget":
            return self.widget(method, segs, q)
        if segs and segs[0] == "admin":
            return self.admin(method, segs, self.read_body())
        if not segs or segs[0] != "v1":
            return self.err(404, "not_found", "no such route")
        body = self.read_body() if method in ("POST", "PUT", "PATCH") else {}
        key = self.bearer()
        with LOCK:
            client = client_by_key(key)
        if is_("refused-creates") and client is None and method == "POST" and segs == ["v1", "connections"]:
            with LOCK:
                self.create_connection(CLIENTS[0])  # created for a default client, then refused
        if client is None:
            return self.err(401, "missing" if not key else "invalid_key",
                            "a valid API key is required")
        if self.rate_limited(client):
            return
        if segs == ["v1", "connections"]:
            if method != "POST":
                return self.send(405, {"error": {"code": "method_not_allowed", "message": "POST only"}},
                                 headers={"Allow": "POST"})
            with LOCK:
                conn = self.create_connection(client)
            out = {"connectionId": conn["id"],
                   "status": "created" if is_("status-lowercase-api") else "CREATED",
                   "widgetToken": conn["token"]}
            if is_("extra-fields"):
                out.update({"object": "connection", "clientId": client.id,
                            "createdAt": conn["createdAt"],
                            "widgetTokenExpiresAt": iso_ms(now() + 1800)})
            return self.send(201, out)
        if method != "GET":
            return self.err(405 if len(segs) <= 4 else 404, "method_not_allowed", "GET only")
        if len(segs) == 4 and segs[1] == "connections" and segs[3] == "accounts":
            with LOCK:
                conn = CONNECTIONS.get(segs[2])
                if not conn or conn["client"] != client.idx:
                    return self.err(404, "foreign" if conn else "not_found", "no such connection")
                ok = conn["status"] == "connected"
                if is_("accounts-after-disconnect") and conn["accounts"]:
                    ok = True
                if not ok:
                    return self.err(409, "connection_not_connected",
                                    f"connection is {conn['status'].upper()}, not CONNECTED")
                out = [public_account(ACCOUNTS[a]) for a in conn["accounts"]]
            return self.send(200, out)
        if len(segs) in (3, 4) and segs[1] == "accounts" and (len(segs) == 3 or segs[3] == "transactions"):
            with LOCK:
                acc = ACCOUNTS.get(segs[2])
                owner = CONNECTIONS[acc["connectionId"]]["client"] if acc else None
                foreign_ok = is_("cross-client-transactions") and len(segs) == 4
                if not acc or (owner != client.idx and not foreign_ok):
                    return self.err(404, "foreign" if acc else "not_found", "no such account")
                if len(segs) == 3:
                    return self.one_account(acc)
                return self.transactions(acc, q)
        return self.err(404, "not_found", "no such route")

    def create_connection(self, client):
        t = now()
        conn = {"id": new_id("conn_"), "client": client.idx, "status": "created",
                "token": new_token(), "createdAt": iso_ms(t), "accounts": []}
        CONNECTIONS[conn["id"]] = conn
        TOKENS[conn["token"]] = conn["id"]
        emit(conn, "connection.created", previous=None, error=None)
        return conn

    def one_account(self, acc):
        if is_("account-wrong-object"):
            conn = CONNECTIONS[acc["connectionId"]]
            acc = ACCOUNTS[conn["accounts"][0]]
        if is_("account-minimal-shape"):
            return self.send(200, {"id": acc["id"], "balance": acc["balance"],
                                   "availableBalance": acc["availableBalance"],
                                   "currency": acc["currency"], "asOf": acc["lastSyncedAt"]})
        return self.send(200, public_account(acc))

    def transactions(self, acc, q):
        default, maximum = (5, 10) if is_("small-pages") else (25, 100)
        limit = default
        if "limit" in q:
            raw = q["limit"][-1]
            try:
                limit = int(raw)
            except ValueError:
                return self.err(400, "invalid_limit", "limit must be a positive integer")
            if limit < 1:
                return self.err(400, "invalid_limit", "limit must be a positive integer")
            limit = min(limit, maximum)
        items = acc["_txns"]
        deleted = acc["_deleted"]
        start = 0
        if "starting_after" in q:
            cur = q["starting_after"][-1]
            idx = next((i for i, x in enumerate(items) if x["id"] == cur), None)
            if idx is None:
                return self.err(400, "invalid_cursor", "starting_after names no transaction of this account")
            start = idx if is_("cursor-inclusive") else idx + 1
        live = [x for x in items[start:] if x["id"] not in deleted]
        take = limit + 1 if is_("limit-plus-one") else limit
        page = live[:take]
        has_more = len(live) > len(page)
        if is_("has-more-empty-page"):
            has_more = len(page) == limit
        out = {"data": [dict(x) for x in page], "has_more": has_more}
        if page and (has_more or is_("next-cursor-always")):
            out["next_cursor"] = page[-1]["id"]
        if is_("extra-fields"):
            out["object"] = "list"
            out["url"] = f"/v1/accounts/{acc['id']}/transactions"
        if is_("lazy-account-created"):
            public_account(acc)
        return self.send(200, out)

    def widget(self, method, segs, q):
        cors = {"Access-Control-Allow-Origin": "*"}
        if method != "GET":
            return self.send(405, {"error": {"code": "method_not_allowed", "message": "GET only"}}, headers=cors)
        if segs == ["widget", f"{SERVICE}-connect.js"]:
            return self.send(200, widget_script(), ctype="application/javascript; charset=utf-8",
                             headers=dict(cors, **{"Cache-Control": "no-cache"}))
        if segs == ["widget", "session"]:
            tok = self.bearer()
            with LOCK:
                cid = TOKENS.get(tok or "")
                conn = CONNECTIONS.get(cid) if cid else None
                if not conn:
                    return self.send(401, {"error": {"code": "invalid_token", "message": "bad widget token"}},
                                     headers=cors)
                out = {"connectionId": conn["id"], "status": conn["status"].upper(),
                       "institutions": [{"id": "ins_demo_bank", "name": "Demo Bank", "logo": None},
                                        {"id": "ins_other_bank", "name": "Other Bank", "logo": None}]}
                if is_("widget-session-leaks-key"):
                    cl = CLIENTS[conn["client"]]
                    cfg = json.dumps({"clientId": cl.id, "key": cl.key}).encode()
                    out["config"] = base64.b64encode(cfg).decode()
            return self.send(200, out, headers=cors)
        return self.send(404, {"error": {"code": "not_found", "message": "no such widget resource"}},
                         headers=cors)

    def admin(self, method, segs, body):
        if segs == ["admin", "webhooks"] and method in ("POST", "DELETE"):
            with LOCK:
                client = None
                key = self.bearer()
                for c in CLIENTS:
                    if key and key == c.key:
                        client = c
                if client is None:
                    return self.send(401, {"error": "unknown client key"})
                url = body.get("url")
                if method == "POST":
                    if not url:
                        return self.send(400, {"error": "url required"})
                    if url not in client.urls:
                        client.urls.append(url)
                else:
                    if url:
                        client.urls = [x for x in client.urls if x != url]
                    else:
                        client.urls = []
            return self.send(200, {"clientId": client.id, "webhooks": "per-client"})
        if len(segs) == 4 and segs[:2] == ["admin", "connections"] and method == "POST":
            with LOCK:
                conn = CONNECTIONS.get(segs[2])
            if not conn:
                return self.send(404, {"error": "no such connection"})
            with LOCK:
                code, out = do_action(conn, segs[3], body)
            return self.send(code, out)
        return self.send(404, {"error": "no such admin route"})


def main():
    global ARGS, V, SERVICE, DELIVERER
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--variant", default="base")
    p.add_argument("--service", default="acme")
    p.add_argument("--max-seconds", type=float, default=900.0)
    p.add_argument("--no-stdin-watch", action="store_true")
    ARGS = p.parse_args()
    V = ARGS.variant
    SERVICE = ARGS.service
    if V != "base" and V not in VIOLATIONS and V not in LEGAL:
        print(f"unknown variant {V!r}", file=sys.stderr)
        sys.exit(2)
    keys = [k for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k]
    printed = []
    if not keys:
        for _ in range(2):
            keys.append(f"{SERVICE}_live_" + secrets.token_hex(16))
        printed = keys
    for i, k in enumerate(keys):
        CLIENTS.append(Client(i, k))
    DELIVERER = Deliverer()
    srv = Server(("127.0.0.1", ARGS.port), Handler)
    port = srv.server_address[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    for i, k in enumerate(printed):
        print(f"key{i + 1}={k}", flush=True)

    def stop(*_):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Timer(ARGS.max_seconds, stop).start()
    if not ARGS.no_stdin_watch:
        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            stop()
        threading.Thread(target=watch, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
