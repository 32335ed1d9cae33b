#!/usr/bin/env python3
"""A Bank Connection Aggregation Service written from the spec alone (a third foreign target).

Standard library only. Usage:
  FOREIGN_API_KEYS=key1,key2 server.py --port 0 --variant NAME --service acme
Prints the API base URL on line 1 and the admin URL (driven by driver.py) on line 2.
VARIANTS.md says what each variant changes and why.
"""
import argparse
import base64
import json
import os
import queue
import random
import secrets
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
V = "plain"
LOCK = threading.RLock()
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def on(name):
    return V == name


# ---------------------------------------------------------------- ids and clocks

def new_id(prefix):
    if on("ids-short-lower"):
        return prefix + secrets.token_hex(4)
    return prefix + "".join(secrets.choice(ALNUM) for _ in range(26))


def now():
    return datetime.now(timezone.utc)


def stamp_ms(t=None):
    t = t or now()
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def stamp_resource(t=None, kind="account"):
    """createdAt / lastSyncedAt of resources (not events)."""
    t = t or now()
    if on("stamps-mixed-precision"):
        if kind == "account":
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp_ms(t)


# ---------------------------------------------------------------- state

class Client:
    def __init__(self, key):
        self.key = key
        self.id = new_id("cli_")
        self.webhook = None
        self.pending = []  # events made before a webhook address was registered


CLIENTS = {}  # key -> Client
CONNECTIONS = {}  # id -> dict
ACCOUNTS = {}  # id -> dict
TOKENS = {}  # widget token -> connection id
ACCOUNT_CACHE = {}


def public_status(c):
    return c["status"].upper()


# ---------------------------------------------------------------- webhook deliveries

DELIVERIES = queue.Queue()


def post_json(url, body):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "foreign3-webhooks/1.0"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status


def deliver_loop():
    while True:
        client, body, tries = DELIVERIES.get()
        url = client.webhook
        if url is None:
            continue
        try:
            post_json(url, body)
        except Exception:  # retried a few times, then dropped
            if tries < 4:
                threading.Timer(0.5 * (tries + 1), DELIVERIES.put, args=((client, body, tries + 1),)).start()


def send(client, body):
    with LOCK:
        if client.webhook is None:
            client.pending.append(body)
            return
    if on("deliver-shuffled-dups"):
        copies = 2 if random.random() < 0.3 else 1
        for _ in range(copies):
            threading.Timer(random.uniform(0, 1.5), DELIVERIES.put, args=((client, body, 0),)).start()
        return
    DELIVERIES.put((client, body, 0))


def emit(client, etype, conn_id, **extra):
    eid = new_id("evt_")
    t = now()
    data = {"eventId": eid, "type": etype, "occurredAt": stamp_ms(t), "clientId": client.id,
            "connectionId": conn_id}
    data.update(extra)
    body = {"id": eid, "type": etype, "created_at": stamp_ms(t), "data": data}
    if etype == "connection.connected" and on("connected-short-form"):
        body = {"event": etype, "connectionId": conn_id, "timestamp": t.strftime("%Y-%m-%dT%H:%M:%SZ")}
    send(client, body)
    if on("dup-eventid-stale") and etype in ("accounts.updated", "transaction.deleted"):
        copy = json.loads(json.dumps(body))
        copy["id"] = new_id("evt_")  # a re-send under a fresh id, its data left as it was
        send(client, copy)


def set_status(conn, status, error=None):
    """Moves a connection to `status` and announces it (caller holds LOCK)."""
    prev = conn["status"]
    conn["status"] = status
    emit(conn["client"], "connection." + status, conn["id"], previousStatus=prev, error=error)


# ---------------------------------------------------------------- accounts and transactions

NAMES = {"checking": "Everyday Checking", "savings": "Rainy Day Savings", "credit_card": "Platinum Card",
         "brokerage": "Investment Account", "pension": "Retirement Plan"}
CATEGORIES = ["groceries", "income", "transport", "dining", "utilities", "shopping", "transfer"]


def make_txn(acc, date, status="posted"):
    amount = round(random.uniform(-250, 400), 2) or 1.0
    t = now() - timedelta(seconds=random.randint(0, 5))
    txn = {"id": new_id("txn_"), "accountId": acc["id"], "amount": amount, "currency": acc["currency"],
           "description": random.choice(["Corner grocery", "Salary", "Metro ticket", "Cafe", "Power bill",
                                         "Online shop", "Transfer"]),
           "transactionDate": date, "category": random.choice(CATEGORIES), "status": status,
           "createdAt": stamp_resource(t, "txn")}
    return txn


def sort_txns(acc):
    acc["txns"].sort(key=lambda x: (x["transactionDate"], x["id"]), reverse=not on("order-oldest-first"))


def make_account(conn, atype):
    created = now()
    if on("createdat-local-as-utc"):
        created = datetime.now() + timedelta(hours=2)  # local wall clock of a UTC+2 host, marked Z
        created = created.replace(tzinfo=timezone.utc)
    acc = {"id": new_id("acc_"), "connectionId": conn["id"], "name": NAMES[atype], "type": atype,
           "currency": "EUR", "balance": round(random.uniform(100, 9000), 2), "availableBalance": 0.0,
           "accountNumber": "****%04d" % random.randint(0, 9999), "createdAt": stamp_resource(created),
           "lastSyncedAt": stamp_resource(), "institution": {"id": "ins_demo", "name": "Demo Bank", "logo": None}}
    acc["availableBalance"] = acc["balance"]
    if atype == "credit_card":
        acc["balance"] = -round(random.uniform(50, 900), 2)
        acc["creditLimit"] = {"amount": 5000, "currency": "EUR"}
        acc["availableBalance"] = round(5000 + acc["balance"], 2)
        acc["currencyBalances"] = [{"currency": "USD", "balance": -12.5}]
    if atype in ("brokerage", "pension"):
        acc["positions"] = [{"symbol": "WRLD", "quantity": 12, "value": 1234.5}]
    today = now().date()
    dates = [(today - timedelta(days=d)).isoformat() for d in random.sample(range(1, 90), 12)]
    acc["txns"] = [make_txn(acc, random.choice(dates)) for _ in range(random.randint(24, 40))]
    acc["deleted"] = set()
    sort_txns(acc)
    acc["client"] = conn["client"]
    ACCOUNTS[acc["id"]] = acc
    conn["accounts"].append(acc["id"])
    return acc


def ensure_accounts(conn, only_first=False):
    if conn["accounts"]:
        return
    types = ["checking", "savings", "credit_card", "brokerage"]
    for t in types[:1] if only_first else types:
        make_account(conn, t)


def public_account(acc):
    return {k: v for k, v in acc.items() if k not in ("txns", "deleted", "client")}


def visible_txns(acc, first_page):
    if on("deleted-on-later-pages") and not first_page:
        return list(acc["txns"])
    return [t for t in acc["txns"] if t["id"] not in acc["deleted"]]


# ---------------------------------------------------------------- lifecycle (driven by the admin API)

def steps_delay():
    time.sleep(0.15)


def current(conn, job):
    """Whether the background steps of `job` still own the connection (another action ends them)."""
    return conn.get("job") == job


def run_connect(conn_id, job):
    with LOCK:
        conn = CONNECTIONS[conn_id]
        if not current(conn, job):
            return
        from_mfa = conn["status"] == "mfa_required"
        if not (from_mfa and on("mfa-skip-submitted")):
            set_status(conn, "credentials_submitted")
    steps_delay()
    with LOCK:
        if not current(conn, job):
            return
        set_status(conn, "verifying")
        if on("accounts-during-verifying"):
            ensure_accounts(conn)
    time.sleep(0.8 if on("accounts-during-verifying") else 0.15)
    with LOCK:
        if not current(conn, job):
            return
        if on("accounts-trickle") and not conn["accounts"]:
            ensure_accounts(conn, only_first=True)
            threading.Timer(2.0, later_accounts, args=(conn_id,)).start()
        else:
            ensure_accounts(conn)
        if on("connected-event-early"):
            emit(conn["client"], "connection.connected", conn["id"], previousStatus=conn["status"], error=None)
            threading.Timer(2.5, lambda: current(conn, job) and conn.__setitem__("status", "connected")).start()
            return
        set_status(conn, "connected")


def later_accounts(conn_id):
    with LOCK:
        conn = CONNECTIONS[conn_id]
        for t in ["savings", "credit_card", "brokerage"]:
            make_account(conn, t)


def run_fail(conn_id, final, error, job):
    conn = CONNECTIONS[conn_id]
    with LOCK:
        if not current(conn, job):
            return
        set_status(conn, "credentials_submitted")
    steps_delay()
    if not (final == "failed_auth" and on("mfa-skip-submitted")):
        with LOCK:
            if not current(conn, job):
                return
            set_status(conn, "verifying")
        steps_delay()
    with LOCK:
        if current(conn, job):
            set_status(conn, final, error)


def admin_action(action, body):
    """Returns (http status, json body)."""
    if action == "register_webhook":
        with LOCK:
            pairs = [(body.get("api_key"), body.get("webhook_url")),
                     (body.get("second_api_key"), body.get("second_webhook_url"))]
            for key, url in pairs:
                if key and url and key in CLIENTS:
                    c = CLIENTS[key]
                    c.webhook = url
                    held, c.pending = c.pending, []
                    for b in held:
                        DELIVERIES.put((c, b, 0))
        return 200, {"webhooks": "per-client"}
    if action == "unregister_webhook":
        with LOCK:
            for c in CLIENTS.values():
                c.webhook = None
                c.pending = []
        return 200, {}
    cid = body.get("connection_id")
    with LOCK:
        conn = CONNECTIONS.get(cid)
        if conn is None and action in ("update_accounts", "delete_transaction") and body.get("account_id"):
            acc = ACCOUNTS.get(body["account_id"])
            conn = CONNECTIONS.get(acc["connectionId"]) if acc else None
        if conn is None:
            return 404, {"error": "unknown connection"}
        st = conn["status"]
        job = conn.get("job", 0) + 1
        if action == "connect":
            if st not in ("created", "mfa_required", "failed_auth", "error"):
                return 409, {"error": "cannot connect from " + st}
            conn["job"] = job
        if action in ("fail_auth", "require_mfa"):
            if st not in ("created", "mfa_required"):
                return 409, {"error": "cannot from " + st}
            final = "failed_auth" if action == "fail_auth" else "mfa_required"
            err = {"code": "invalid_credentials"} if final == "failed_auth" else None
            conn["job"] = job
    # The driver's call returns once the connection has reached the action's state, so that an
    # accepted action is never overtaken by the next one (the steps take the lock one by one).
    if action == "connect":
        run_connect(conn["id"], job)
        return 200, {}
    if action in ("fail_auth", "require_mfa"):
        run_fail(conn["id"], final, err, job)
        return 200, {}
    with LOCK:
        if action == "error":
            if st in ("error", "disconnected"):
                return 409, {"error": "cannot from " + st}
            if on("error-event-still-serving") and st == "connected":
                emit(conn["client"], "connection.error", conn["id"], previousStatus=st,
                     error={"code": "sync_failed"})
                return 200, {}
            conn["job"] = job
            set_status(conn, "error", {"code": "unexpected", "message": "bank unavailable"})
            return 200, {}
        if action == "disconnect":
            if st == "disconnected":
                return 409, {"error": "already disconnected"}
            conn["job"] = job
            set_status(conn, "disconnected")
            return 200, {}
        if action == "update_accounts":
            if st != "connected" or not conn["accounts"]:
                return 409, {"error": "not connected"}
            acc = ACCOUNTS.get(body.get("account_id") or conn["accounts"][0])
            if acc is None or acc["connectionId"] != conn["id"]:
                return 404, {"error": "unknown account"}
            delta = round(random.uniform(-120, 120), 2) or 5.0
            new = [make_txn(acc, now().date().isoformat(), "pending" if on("new-txn-pending") else "posted")]
            new[0]["amount"] = delta

            def apply():
                with LOCK:
                    acc["balance"] = round(acc["balance"] + delta, 2)
                    acc["availableBalance"] = round(acc["availableBalance"] + delta, 2)
                    acc["lastSyncedAt"] = stamp_resource()
                    acc["txns"].extend(new)
                    sort_txns(acc)
            if on("updated-before-commit"):
                threading.Timer(2.0, apply).start()
            else:
                apply()
            emit(conn["client"], "accounts.updated", conn["id"], accountId=acc["id"])
            return 200, {}
        if action == "delete_transaction":
            acc = ACCOUNTS.get(body.get("account_id") or "") if body.get("account_id") else None
            if acc is None:
                if not conn["accounts"]:
                    return 409, {"error": "no accounts"}
                acc = ACCOUNTS[conn["accounts"][0]]
            live = [t for t in acc["txns"] if t["id"] not in acc["deleted"]]
            tid = body.get("transaction_id")
            if tid:
                if tid not in [t["id"] for t in live]:
                    return 409, {"error": "unknown transaction"}
            else:
                if not live:
                    return 409, {"error": "no transactions"}
                tid = live[len(live) // 2]["id"]
            acc["deleted"].add(tid)
            emit(conn["client"], "transaction.deleted", acc["connectionId"], accountId=acc["id"], transactionId=tid)
            return 200, {}
    return 501, {"error": "unknown action"}


# ---------------------------------------------------------------- HTTP

WIDGET_JS = r"""
(function () {
  var script = document.currentScript;
  var base = script ? script.src.replace(/\/widget\/[^\/]*$/, '') : '';
  function open(a, b, c) {
    var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (!o.token || !o.connectionId) { throw new Error('token and connectionId are required'); }
    var frame = document.createElement('iframe');
    frame.src = base + '/widget/frame?token=' + encodeURIComponent(o.token) +
      '&connectionId=' + encodeURIComponent(o.connectionId);
    frame.style.cssText = 'position:fixed;inset:10%;width:80%;height:80%;border:0;z-index:99999';
    function onMessage(ev) {
      if (ev.source !== frame.contentWindow || !ev.data || ev.data.type !== '__NAME__:success') { return; }
      window.removeEventListener('message', onMessage);
      frame.remove();
      if (typeof o.onSuccess === 'function') { o.onSuccess(ev.data.metadata); }
    }
    window.addEventListener('message', onMessage);
    (document.body || document.documentElement).appendChild(frame);
    return { close: function () { frame.remove(); } };
  }
  window.__NAME__ = { open: open };
})();
"""

FRAME_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Connect your bank</title></head>
<body><h1>Demo Bank</h1><form id="f"><input name="user" placeholder="User"><input name="pass" type="password">
<button>Connect</button></form>
<script>
document.getElementById('f').addEventListener('submit', function (e) {
  e.preventDefault();
  parent.postMessage({type: '__NAME__:success', metadata: {connectionId: __CONN__, institution: 'Demo Bank'}}, '*');
});
</script></body></html>"""


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "foreign3"

    def log_message(self, *a):
        pass

    # -- responses
    def send_body(self, code, body, ctype="application/json", headers=None):
        data = body if isinstance(body, bytes) else (json.dumps(body) if ctype == "application/json" else body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, code, err, message):
        if on("errors-plain-403"):
            code = {401: 403, 409: 404, 400: 422}.get(code, code)
            return self.send_body(code, message + "\n", "text/plain; charset=utf-8")
        return self.send_body(code, {"error": {"code": err, "message": message}})

    def client(self):
        h = self.headers.get("Authorization", "")
        if not h.startswith("Bearer "):
            return None
        key = h[len("Bearer "):].strip()
        if not key.startswith(ARGS.service + "_"):
            return None
        return CLIENTS.get(key)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # -- routing
    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PATCH(self):
        self.route("PATCH")

    def route(self, method):
        try:
            self.read_body()
            u = urllib.parse.urlsplit(self.path)
            path, q = u.path, urllib.parse.parse_qs(u.query, keep_blank_values=True)
            if path.startswith("/widget/"):
                return self.widget(method, path, q)
            parts = [p for p in path.split("/") if p]
            if not parts or parts[0] != "v1":
                return self.error(404, "not_found", "no such route")
            client = self.client()
            if client is None:
                if method == "POST" and parts == ["v1", "connections"] and on("refused-create-emits"):
                    self.create_connection(list(CLIENTS.values())[0], respond=False)
                return self.error(401, "unauthorized", "missing or invalid API key")
            if parts == ["v1", "connections"] and method == "POST":
                return self.create_connection(client)
            if len(parts) == 4 and parts[1] == "connections" and parts[3] == "accounts" and method == "GET":
                return self.connection_accounts(client, parts[2])
            if len(parts) == 3 and parts[1] == "accounts" and method == "GET":
                return self.one_account(client, parts[2])
            if len(parts) == 4 and parts[1] == "accounts" and parts[3] == "transactions" and method == "GET":
                return self.transactions(client, parts[2], q)
            if parts[:2] in (["v1", "connections"], ["v1", "accounts"]) and len(parts) <= 4:
                return self.error(405 if method != "GET" else 404, "not_found", "no such route")
            return self.error(404, "not_found", "no such route")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def widget(self, method, path, q):
        name = ARGS.service[:1].upper() + ARGS.service[1:] + "Connect"
        if path == "/widget/%s-connect.js" % ARGS.service and method == "GET":
            js = WIDGET_JS.replace("__NAME__", name)
            if on("widget-nosniff-json"):
                return self.send_body(200, js, "application/json", {"X-Content-Type-Options": "nosniff",
                                                                     "Access-Control-Allow-Origin": "*"})
            return self.send_body(200, js, "application/javascript; charset=utf-8",
                                  {"Access-Control-Allow-Origin": "*", "Cache-Control": "no-cache"})
        if path == "/widget/frame" and method == "GET":
            token = (q.get("token") or [""])[0]
            with LOCK:
                cid = TOKENS.get(token)
                conn = CONNECTIONS.get(cid) if cid else None
            if conn is None:
                return self.send_body(404, "<!doctype html><p>This link has expired.</p>", "text/html; charset=utf-8")
            html = FRAME_HTML.replace("__NAME__", name).replace("__CONN__", json.dumps(conn["id"]))
            headers = {}
            if on("widget-key-cookie"):
                headers["Set-Cookie"] = "%s_session=%s; Path=/widget; SameSite=None; Secure" % (
                    ARGS.service, conn["client"].key)
            return self.send_body(200, html, "text/html; charset=utf-8", headers)
        return self.send_body(404, "not found\n", "text/plain")

    def create_connection(self, client, respond=True):
        with LOCK:
            conn = {"id": new_id("conn_"), "client": client, "status": "created", "accounts": [],
                    "token": "sess_" + (secrets.token_hex(6) if on("ids-short-lower") else secrets.token_urlsafe(24)),
                    "createdAt": stamp_ms()}
            CONNECTIONS[conn["id"]] = conn
            TOKENS[conn["token"]] = conn["id"]
            emit(client, "connection.created", conn["id"], previousStatus=None, error=None)
        if not respond:
            return
        body = {"connectionId": conn["id"], "status": "CREATED", "widgetToken": conn["token"]}
        if on("create-201-extra"):
            body.update({"object": "connection", "clientId": client.id, "createdAt": conn["createdAt"],
                         "widgetTokenExpiresAt": stamp_ms(now() + timedelta(minutes=30))})
            return self.send_body(201, body, headers={"Location": "/v1/connections/" + conn["id"]})
        return self.send_body(200, body)

    def connection_accounts(self, client, cid):
        with LOCK:
            conn = CONNECTIONS.get(cid)
            if conn is None or conn["client"] is not client:
                return self.error(404, "connection_not_found", "no such connection")
            ok = conn["status"] == "connected" or (on("accounts-during-verifying") and conn["status"] == "verifying")
            if not ok:
                return self.error(409, "connection_not_connected",
                                  "connection status is %s" % public_status(conn))
            body = [public_account(ACCOUNTS[a]) for a in conn["accounts"]]
        return self.send_body(200, body)

    def owned_account(self, client, aid):
        acc = ACCOUNTS.get(aid)
        if acc is None or acc["client"] is not client:
            return None
        return acc

    def one_account(self, client, aid):
        with LOCK:
            acc = self.owned_account(client, aid)
            if acc is None:
                return self.error(404, "account_not_found", "no such account")
            if on("account-single-minimal"):
                body = {"accountId": acc["id"], "balance": acc["balance"],
                        "availableBalance": acc["availableBalance"], "currency": acc["currency"],
                        "asOf": stamp_ms()}
            else:
                body = public_account(acc)
        return self.send_body(200, body)

    def transactions(self, client, aid, q):
        default, maximum = 20, 100
        if on("limit-over-max-400"):
            default, maximum = 10, 25
        raw = (q.get("limit") or [None])[0]
        limit = default
        if raw is not None:
            try:
                limit = int(raw)
            except ValueError:
                return self.error(400, "invalid_limit", "limit must be a positive integer")
            if limit < 1:
                return self.error(400, "invalid_limit", "limit must be a positive integer")
            if limit > maximum:
                if on("limit-over-max-400"):
                    return self.error(400, "invalid_limit", "limit must be at most %d" % maximum)
                limit = maximum
        cursor = (q.get("starting_after") or [None])[0]
        with LOCK:
            acc = self.owned_account(client, aid)
            if acc is None:
                return self.error(404, "account_not_found", "no such account")
            if cursor is not None and on("cursor-opaque") and not cursor.startswith("txn_"):
                try:
                    cursor = json.loads(base64.urlsafe_b64decode(cursor + "==").decode())["after"]
                except Exception:
                    return self.error(400, "invalid_cursor", "malformed cursor")
            items = visible_txns(acc, cursor is None)
            if cursor is not None:
                allpos = [t["id"] for t in acc["txns"]]  # deleted ones keep their place for cursors
                if cursor not in allpos:
                    return self.error(400, "invalid_cursor", "unknown starting_after")
                if on("keyset-date-only"):
                    cdate = acc["txns"][allpos.index(cursor)]["transactionDate"]
                    items = [t for t in items if t["transactionDate"] < cdate]
                else:
                    rank = {t: i for i, t in enumerate(allpos)}
                    items = [t for t in items if rank[t["id"]] > rank[cursor]]
            page = items[:limit]
            has_more = len(items) > limit
            body = {"data": [dict(t) for t in page], "has_more": has_more}
            if has_more and page:
                nxt = page[-1]["id"]
                if on("cursor-opaque"):
                    nxt = base64.urlsafe_b64encode(json.dumps({"after": nxt, "v": 1}).encode()).decode().rstrip("=")
                body["next_cursor"] = nxt
        return self.send_body(200, body)


class Admin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            body = {}
        action = self.path.strip("/").split("/")[-1]
        try:
            code, out = admin_action(action, body)
        except Exception as e:  # an admin failure is the driver's error, never a hang
            code, out = 500, {"error": type(e).__name__}
        data = json.dumps(out).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    global ARGS, V
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--variant", default="plain")
    p.add_argument("--service", default="acme")
    ARGS = p.parse_args()
    V = ARGS.variant
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        print("FOREIGN_API_KEYS is empty", file=sys.stderr)
        sys.exit(2)
    for k in keys:
        CLIENTS[k] = Client(k)
    for _ in range(2):
        threading.Thread(target=deliver_loop, daemon=True).start()
    api = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Api)
    admin = ThreadingHTTPServer(("127.0.0.1", 0), Admin)
    api.daemon_threads = admin.daemon_threads = True
    threading.Thread(target=admin.serve_forever, daemon=True).start()
    print("http://127.0.0.1:%d" % api.server_address[1])
    print("http://127.0.0.1:%d/admin" % admin.server_address[1], flush=True)
    api.serve_forever()


if __name__ == "__main__":
    main()
