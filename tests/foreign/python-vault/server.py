#!/usr/bin/env python3
"""vault: a staging server for the Bank Connection Aggregation Service (standard library only).

Written from /work/shared/spec/service-spec.md alone.  One process holds an in-memory store,
a worker per connection that moves it through its states, and a webhook queue (one sender
thread) per client.  The driver (driver.py) reaches a control endpoint under /__control/.

    server.py --port 0 [--variant NAME] [--key K1 --key K2]     (keys also from VAULT_API_KEYS="k1,k2")

The first line on stdout is the port.  The process ends when its parent ends, or on SIGTERM.
`server.py --list-variants` prints every variant with its kind.
"""

import argparse
import collections
import gzip
import http.client
import json
import os
import random
import re
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVICE = "vault"

# name -> (kind, one line); VARIANTS.md has the full table with the sections.
VARIANTS = {
    "none": ("legal", "the clean server"),
    # legal choices
    "reenter-announced": ("legal", "fail_auth/require_mfa/error into the state the connection is in: re-entered and announced (previousStatus = that state)"),
    "reenter-silent": ("legal", "fail_auth/require_mfa/error into the state the connection is in: accepted, nothing changes, no event"),
    "gzip-negotiated": ("legal", "real gzip bodies when the request says Accept-Encoding: gzip"),
    "chunked": ("legal", "every /v1 answer and every webhook delivery uses Transfer-Encoding: chunked"),
    "create-202": ("legal", "POST /v1/connections answers 202 Accepted with a Location header"),
    "created-event-first": ("legal", "connection.created is delivered before the POST /v1/connections answer is sent"),
    "event-ids-per-client": ("legal", "event ids are evt_ + a client letter + a per-client counter"),
    # violations
    "gzip-label": ("violation", "GET /v1/accounts/{id} says Content-Encoding: gzip on a plain JSON body"),
    "html-content-type": ("violation", "the connection-accounts list is served as text/html"),
    "short-content-length": ("violation", "transaction pages: Content-Length counts characters, not UTF-8 bytes"),
    "nan-available": ("violation", "brokerage availableBalance is NaN, written as a bare NaN token"),
    "key-hint-401": ("violation", "a 401 for an unknown key suggests the closest real API key"),
    "ping-on-register": ("violation", "registering a webhook sends a connection.created for a connection nobody created"),
    "enum-kebab": ("violation", "credit card accounts have type credit-card"),
    "singular-updated-type": ("violation", "accounts.updated is sent as account.updated"),
    "account-event-conn-id": ("violation", "account and transaction events carry the account id as connectionId"),
    "data-as-string": ("violation", "account and transaction events carry data as a JSON-encoded string"),
    "delivery-leaks-key": ("violation", "every delivery carries the API key of the client that registered last"),
    "second-client-txn-404": ("violation", "the transactions endpoint serves only the default (first) client's accounts"),
}

VARIANT = "none"
STEP_SECONDS = 0.04                      # one step of the simulated bank work
DEFAULT_LIMIT, MAX_LIMIT = 25, 100
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"   # Crockford base 32

LOCK = threading.RLock()                 # guards the whole store
CLIENTS = []                             # Client, in the order of the keys
CLIENT_BY_KEY = {}
CONNECTIONS = {}                         # id -> Connection
TOKENS = {}                              # widget token -> Connection
ACCOUNTS = {}                            # id -> Account
LAST_REGISTERED = [None]                 # the client whose webhook was registered last


def rid(prefix, n=26):
    return prefix + "".join(secrets.choice(ALPHABET) for _ in range(n))


_stamp_lock = threading.Lock()
_last_ms = [0]


def now_ms():
    """Milliseconds since the epoch, strictly increasing across the server."""
    with _stamp_lock:
        ms = int(time.time() * 1000)
        if ms <= _last_ms[0]:
            ms = _last_ms[0] + 1
        _last_ms[0] = ms
        return ms


def iso(ms):
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def stamp():
    return iso(now_ms())


def today(days_back=0):
    return (datetime.now(timezone.utc).date() - timedelta(days=days_back)).isoformat()


def dumps(obj):
    # ensure_ascii=False: names and descriptions go out as UTF-8 (Épargne, the en dash of descriptions)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------

class Client:
    def __init__(self, index, key):
        self.index = index
        self.key = key
        self.id = rid("cli_")
        self.webhook_url = None
        self.events = 0
        self.outbox = WebhookQueue(self)


class Connection:
    def __init__(self, client):
        self.id = rid("conn_")
        self.client = client
        self.status = "created"          # lower case inside; the API writes it upper case
        self.projected = "created"       # the status once every queued job has run
        self.token = rid("sess_", 32)
        self.created_at = stamp()
        self.accounts = []               # account ids, in creation order
        self.jobs = collections.deque()
        self.running = False
        self.doomed = set()              # transactions whose deletion is queued


class Account:
    def __init__(self, conn, fields):
        self.conn = conn
        self.fields = fields             # the public Account object
        self.txns = []                   # every transaction ever listed (deleted ones as tombstones)
        self.seq = 0

    @property
    def id(self):
        return self.fields["id"]

    def add_txn(self, amount, description, category, date, currency=None, created_at=None):
        self.seq += 1
        t = {"id": rid("txn_"), "accountId": self.id, "amount": round(amount, 2),
             "currency": currency or self.fields["currency"], "description": description,
             "transactionDate": date, "category": category, "status": "posted",
             "createdAt": created_at or stamp(), "_seq": self.seq, "_deleted": False}
        self.txns.append(t)
        return t

    def live_sorted(self):
        """Newest first: transactionDate, then insertion order, descending."""
        return sorted((t for t in self.txns if not t["_deleted"]),
                      key=lambda t: (t["transactionDate"], t["_seq"]), reverse=True)


INSTITUTION = {"id": "ins_VAULTDEMOBANK", "name": "Banque Démo", "logo": None}
MERCHANTS = [("Carrefour", "groceries"), ("Monoprix", "groceries"), ("SNCF", "transport"),
             ("RATP", "transport"), ("EDF", "utilities"), ("Free Mobile", "utilities"),
             ("Fnac", "shopping"), ("Amazon", "shopping"), ("Le Café Zürich", "restaurants"),
             ("Boulangerie Paul", "restaurants"), ("Frais bancaires", "fees")]


def masked(rng):
    return "****" + "".join(rng.choice("0123456789") for _ in range(4))


def create_accounts(conn):
    """The bank's data for a connection, imported when it first reaches CONNECTED (under LOCK)."""
    rng = random.Random()
    created = stamp()
    specs = [
        ("checking", "Compte Courant", 37),
        ("savings", "Livret Épargne", 6),
        ("credit_card", "Visa Premier", 14),
        ("brokerage", "Compte Titres", 2),
        ("pension", "Plan Épargne Retraite", 0),
    ]
    for type_, name, count in specs:
        f = {"id": rid("acc_"), "connectionId": conn.id, "name": name, "type": type_,
             "currency": "EUR", "balance": 0.0, "availableBalance": 0.0,
             "accountNumber": masked(rng), "createdAt": created, "lastSyncedAt": created,
             "institution": dict(INSTITUTION)}
        acct = Account(conn, f)
        ACCOUNTS[f["id"]] = acct
        conn.accounts.append(f["id"])
        # history: ascending dates so that insertion order agrees with the date order
        days = sorted((rng.randint(0, 75) for _ in range(count)), reverse=True)
        for i, d in enumerate(days):
            if type_ in ("checking", "credit_card"):
                merchant, cat = rng.choice(MERCHANTS)
                amount = -round(rng.uniform(3, 180), 2)
                if type_ == "checking" and i % 9 == 4:
                    merchant, cat, amount = "Salaire ACME SAS", "income", round(rng.uniform(2100, 2600), 2)
                if type_ == "credit_card" and i % 7 == 6:
                    merchant, cat, amount = "Remboursement carte", "transfer", round(rng.uniform(200, 600), 2)
                cur = "USD" if (type_ == "credit_card" and i % 5 == 2) else None
                acct.add_txn(amount, "CB %s – %s" % (merchant, "réf. %04d" % rng.randint(0, 9999)), cat,
                             today(d), currency=cur, created_at=created)
            elif type_ == "savings":
                acct.add_txn(round(rng.uniform(50, 400), 2), "Virement – épargne mensuelle", "transfer",
                             today(d), created_at=created)
            else:
                acct.add_txn(round(rng.uniform(-900, -100), 2), "Achat titres – ordre %d" % rng.randint(1000, 9999),
                             "investment", today(d), created_at=created)
        if type_ == "checking":
            f["balance"] = f["availableBalance"] = round(rng.uniform(800, 4200), 2)
        elif type_ == "savings":
            f["balance"] = f["availableBalance"] = round(rng.uniform(3000, 15000), 2)
        elif type_ == "credit_card":
            limit = 3000.0
            f["balance"] = round(-rng.uniform(100, 1200), 2)
            f["availableBalance"] = round(limit + f["balance"], 2)
            f["creditLimit"] = {"amount": limit, "currency": "EUR"}
            f["currencyBalances"] = [{"currency": "USD", "balance": round(-rng.uniform(10, 150), 2)}]
        else:
            positions = [{"symbol": s, "name": n, "quantity": q, "price": p, "marketValue": round(q * p, 2),
                          "currency": "EUR"}
                         for s, n, q, p in (("CW8", "Amundi MSCI World", rng.randint(2, 40), 512.3),
                                            ("AIR", "Airbus SE", rng.randint(1, 20), 141.06))]
            f["positions"] = positions
            cash = round(rng.uniform(100, 2500), 2)
            f["balance"] = f["availableBalance"] = cash
            if type_ == "brokerage" and VARIANT == "nan-available":
                # unsettled orders come from a feed that answers "unknown" as NaN; cash - NaN is NaN
                f["availableBalance"] = cash - float("nan")


def public_account(acct):
    f = dict(acct.fields)
    if VARIANT == "enum-kebab":
        f["type"] = f["type"].replace("_", "-")      # the serializer's enum naming strategy
    return f


def public_txn(t):
    return {k: v for k, v in t.items() if not k.startswith("_")}


# --------------------------------------------------------------------------------------------
# Events and webhook deliveries
# --------------------------------------------------------------------------------------------

ERRORS = {
    "failed_auth": {"code": "invalid_credentials", "message": "The bank refused the credentials."},
    "mfa_required": {"code": "mfa_required", "message": "The bank asks for a second factor."},
    "error": {"code": "bank_unavailable", "message": "Unexpected error while talking to the bank."},
}


def event_id(client):
    client.events += 1
    if VARIANT == "event-ids-per-client":
        return "evt_%s%025d" % ("ABCDEFGH"[client.index % 8], client.events)
    return rid("evt_")


def make_event(client, type_, connection_id, **extra):
    eid = event_id(client)
    at = stamp()
    if type_ == "accounts.updated" and VARIANT == "singular-updated-type":
        type_ = "account.updated"
    data = {"eventId": eid, "type": type_, "occurredAt": at, "clientId": client.id,
            "connectionId": connection_id}
    data.update(extra)
    if "accountId" in extra:
        if VARIANT == "account-event-conn-id":
            data["connectionId"] = extra["accountId"]
        if VARIANT == "data-as-string":
            # account events go through the outbox table, whose payload column is text
            data = dumps(data)
    return {"id": eid, "type": type_, "created_at": at, "data": data}


def emit(client, event):
    client.outbox.put(event)


class WebhookQueue:
    """One sender thread per client: deliveries in the order the events happened."""

    RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)

    def __init__(self, client):
        self.client = client
        self.q = collections.deque()
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def put(self, event):
        if not self.client.webhook_url:
            return                               # nobody to tell: not kept
        with self.cv:
            self.q.append(event)
            self.cv.notify()

    def drop_all(self):
        with self.cv:
            self.q.clear()

    def run(self):
        while True:
            with self.cv:
                while not self.q:
                    self.cv.wait()
                event = self.q.popleft()
            url = self.client.webhook_url
            for delay in (0,) + self.RETRY_DELAYS:
                if delay:
                    time.sleep(delay)
                if not url or self.client.webhook_url != url:
                    break                        # unregistered meanwhile: no more tries
                if deliver(url, event, self.client):
                    break


def deliver(url, event, client):
    body = dumps(event).encode()
    u = urllib.parse.urlsplit(url)
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    headers = {"Content-Type": "application/json", "User-Agent": "vault-webhooks/1.0",
               "X-Vault-Event-Id": event["id"]}
    if VARIANT == "delivery-leaks-key" and LAST_REGISTERED[0] is not None:
        # meant as a "verification" header, read from the last registration (a global)
        headers["X-Vault-Api-Key"] = LAST_REGISTERED[0].key
    try:
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=5)
        if VARIANT == "chunked":
            headers["Transfer-Encoding"] = "chunked"
            half = len(body) // 2
            conn.request("POST", path, body=iter([body[:half], body[half:]]), headers=headers,
                         encode_chunked=True)
        else:
            conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return 200 <= resp.status < 300
    except (OSError, http.client.HTTPException):
        return False


# --------------------------------------------------------------------------------------------
# The worker: actions become jobs, run in order per connection
# --------------------------------------------------------------------------------------------

def enqueue(conn, job):
    conn.jobs.append(job)
    if not conn.running:
        conn.running = True
        threading.Thread(target=run_jobs, args=(conn,), daemon=True).start()


def run_jobs(conn):
    while True:
        with LOCK:
            if not conn.jobs:
                conn.running = False
                return
            job = conn.jobs.popleft()
        time.sleep(STEP_SECONDS)
        try:
            job()
        except Exception as e:                   # a job that fails must not stop the others
            print("job failed on %s: %r" % (conn.id, e), file=sys.stderr)


def state_job(conn, new):
    def job():
        with LOCK:
            previous = conn.status
            if new == "connected" and not conn.accounts:
                create_accounts(conn)            # data first, then the status, then the event
            conn.status = new
            emit(conn.client, make_event(conn.client, "connection." + new, conn.id,
                                         previousStatus=previous, error=ERRORS.get(new)))
    return job


SUBMIT = ["credentials_submitted", "verifying"]


def plan(action, state):
    """The states an action goes through from `state`; None when refused from there."""
    if state == "disconnected":
        return None                              # final: a new connection is created instead
    if action in ("connect", "fail_auth", "require_mfa"):
        target = {"connect": "connected", "fail_auth": "failed_auth", "require_mfa": "mfa_required"}[action]
        if state == target:
            return reenter(target)
        if state == "connected":
            return None if action == "connect" else [target]    # the bank asks again on a refresh
        if state == "mfa_required":
            return ["verifying", target]         # the second factor goes straight to the check
        return SUBMIT + [target]                 # created, failed_auth, error
    if action == "error":
        return reenter("error") if state == "error" else ["error"]
    if action == "disconnect":
        return ["disconnected"]
    return None


def reenter(target):
    if target == "connected":
        return None
    if VARIANT == "reenter-announced":
        return [target]                          # the user failed again: the state is entered again
    if VARIANT == "reenter-silent":
        return []                                # nothing changes, nothing to announce
    return None


def pick_account(conn, account_id):
    if account_id:
        acct = ACCOUNTS.get(account_id)
        return acct if acct and acct.conn is conn else None
    return ACCOUNTS[conn.accounts[0]] if conn.accounts else None


def update_job(conn, account_id):
    def job():
        with LOCK:
            acct = pick_account(conn, account_id)
            if acct is None:
                return
            rng = random.Random()
            merchant, cat = rng.choice(MERCHANTS)
            amount = -round(rng.uniform(4, 90), 2)
            acct.add_txn(amount, "CB %s – %s" % (merchant, "réf. %04d" % rng.randint(0, 9999)), cat, today())
            f = acct.fields
            f["balance"] = round(f["balance"] + amount, 2)
            if f["availableBalance"] == f["availableBalance"]:      # not NaN
                f["availableBalance"] = round(f["availableBalance"] + amount, 2)
            f["lastSyncedAt"] = stamp()
            emit(conn.client, make_event(conn.client, "accounts.updated", conn.id, accountId=acct.id))
    return job


def pick_transaction(conn, account_id, txn_id):
    """(account, transaction) to delete, or None."""
    if txn_id:
        for aid in conn.accounts:
            for t in ACCOUNTS[aid].txns:
                if t["id"] == txn_id and (not account_id or aid == account_id):
                    return (ACCOUNTS[aid], t) if not t["_deleted"] and t["id"] not in conn.doomed else None
        return None
    candidates = [account_id] if account_id else list(conn.accounts)
    for aid in candidates:
        acct = ACCOUNTS.get(aid)
        if acct is None or acct.conn is not conn:
            return None
        for t in acct.live_sorted():
            if t["id"] not in conn.doomed:
                return acct, t
    return None


def delete_job(conn, account_id, txn_id):
    def job():
        with LOCK:
            if txn_id:                           # chosen when the action was accepted
                picked = next(((ACCOUNTS[a], t) for a in conn.accounts for t in ACCOUNTS[a].txns
                               if t["id"] == txn_id and not t["_deleted"]), None)
            else:                                # accepted before the accounts existed
                picked = pick_transaction(conn, account_id, None)
            if picked is None:
                return
            acct, t = picked
            t["_deleted"] = True                 # a tombstone: a cursor naming it keeps its place
            conn.doomed.discard(t["id"])
            emit(conn.client, make_event(conn.client, "transaction.deleted", conn.id,
                                         accountId=acct.id, transactionId=t["id"]))
    return job


def accept_action(conn, action, account_id, txn_id):
    """(status, body) for the control endpoint.  Called under LOCK."""
    if action in ("update_accounts", "delete_transaction"):
        if conn.projected != "connected":
            return 409, {"error": {"code": "not_connected", "message": "the connection will be %s" % conn.projected}}
        if account_id and conn.accounts and pick_account(conn, account_id) is None:
            return 404, {"error": {"code": "account_not_found", "message": "no such account on this connection"}}
        if action == "update_accounts":
            enqueue(conn, update_job(conn, account_id))
            return 202, {"accepted": action}
        if conn.accounts:
            picked = pick_transaction(conn, account_id, txn_id)
            if picked is None:
                return 409, {"error": {"code": "nothing_to_delete", "message": "no such live transaction"}}
            txn_id = picked[1]["id"]
            conn.doomed.add(txn_id)
        enqueue(conn, delete_job(conn, account_id, txn_id))
        return 202, {"accepted": action, "transactionId": txn_id}
    steps = plan(action, conn.projected)
    if steps is None:
        return 409, {"error": {"code": "transition_refused",
                               "message": "%s is refused from %s" % (action, conn.projected)}}
    for s in steps:
        enqueue(conn, state_job(conn, s))
        conn.projected = s
    return 202, {"accepted": action, "steps": steps}


# --------------------------------------------------------------------------------------------
# The widget
# --------------------------------------------------------------------------------------------

WIDGET_JS = r"""/* vault connect widget */
(function () {
  'use strict';
  var BASE = (function () {
    try { if (document.currentScript && document.currentScript.src) return new URL(document.currentScript.src).origin; } catch (e) {}
    return %(base)s;
  })();

  function post(path, body) {
    return fetch(BASE + path, {method: 'POST', headers: {'Content-Type': 'application/json'},
                               body: JSON.stringify(body)}).then(function (r) { return r.json(); });
  }

  function open(options, connectionId, onSuccess) {
    if (typeof options === 'string') options = {token: options, connectionId: connectionId, onSuccess: onSuccess};
    options = options || {};
    var token = options.token, cid = options.connectionId, cb = options.onSuccess;
    if (!token) throw new TypeError('VaultConnect.open: token is required');
    var done = false, timer = null, started = Date.now();
    var root = document.createElement('div');
    root.setAttribute('style', 'position:fixed;inset:0;background:rgba(0,0,0,.45);z-index:2147483647;' +
      'display:flex;align-items:center;justify-content:center;font-family:sans-serif');
    root.innerHTML = '<form style="background:#fff;padding:24px;border-radius:8px;min-width:280px">' +
      '<h3 style="margin-top:0">Connect your bank</h3><p class="vault-inst"></p>' +
      '<input name="username" placeholder="User id" style="display:block;margin:6px 0;width:100%%">' +
      '<input name="password" type="password" placeholder="Password" style="display:block;margin:6px 0;width:100%%">' +
      '<button type="submit">Connect</button> <button type="button" class="vault-close">Close</button>' +
      '<p class="vault-status" style="color:#555"></p></form>';
    (document.body || document.documentElement).appendChild(root);
    var form = root.querySelector('form'), statusEl = root.querySelector('.vault-status');

    function close() { if (timer) clearInterval(timer); if (root.parentNode) root.parentNode.removeChild(root); }
    function poll() {
      if (done || Date.now() - started > 30 * 60 * 1000) { if (timer) clearInterval(timer); return; }
      post('/widget/session', {token: token}).then(function (s) {
        if (!s || s.error) { statusEl.textContent = 'This session has expired.'; clearInterval(timer); return; }
        root.querySelector('.vault-inst').textContent = s.institution ? s.institution.name : '';
        statusEl.textContent = 'Status: ' + s.status;
        if (s.status === 'CONNECTED' && !done) {
          done = true; clearInterval(timer);
          if (typeof cb === 'function') cb({connectionId: s.connectionId, institution: s.institution, status: s.status});
        }
      }).catch(function () { statusEl.textContent = 'Cannot reach the service.'; });
    }
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      post('/widget/credentials', {token: token, username: form.username.value, password: form.password.value})
        .then(function () { statusEl.textContent = 'Checking with your bank…'; })
        .catch(function () { statusEl.textContent = 'Cannot reach the service.'; });
    });
    root.querySelector('.vault-close').addEventListener('click', close);
    timer = setInterval(poll, 1000);
    poll();
    return {close: close, connectionId: cid};
  }

  window.VaultConnect = {open: open, version: '1.4.0'};
})();
"""


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

class ApiError(Exception):
    def __init__(self, http_status, code, message, headers=(), **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.headers, self.extra = http_status, code, message, list(headers), extra


def closest_key(token):
    def common(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n
    return max(CLIENTS, key=lambda c: common(c.key, token)).key


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vault/1.4"
    timeout = 30

    def log_message(self, fmt, *args):
        if os.environ.get("VAULT_DEBUG"):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # ---- plumbing ----------------------------------------------------------------------------

    def body_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        if not raw.strip():
            return {}
        try:
            v = json.loads(raw)
        except ValueError:
            raise ApiError(400, "invalid_json", "the request body is not JSON")
        return v if isinstance(v, dict) else {}

    def send(self, status, obj=None, *, raw=None, ctype="application/json", headers=(),
             content_length=None, close=False):
        body = raw if raw is not None else (dumps(obj).encode() if obj is not None else b"")
        hdrs = [("Content-Type", ctype)] if body else []
        hdrs += list(headers)
        if (VARIANT == "gzip-negotiated" and body and status != 204
                and "gzip" in (self.headers.get("Accept-Encoding") or "").lower()):
            body = gzip.compress(body)
            hdrs += [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
        chunked = VARIANT == "chunked" and self.path.startswith("/v1") and status != 204
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command == "HEAD":
            return
        if chunked:
            for i in range(0, len(body), 512):
                piece = body[i:i + 512]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(body)

    def fail(self, e):
        err = {"code": e.code, "message": e.message}
        err.update(e.extra)
        self.send(e.status, {"error": err}, headers=e.headers)

    def cors(self):
        return [("Access-Control-Allow-Origin", "*")]

    def route(self, method):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        try:
            if parts[:1] == ["v1"]:
                client = self.authenticate()
                return self.api(method, parts[1:], query, client)
            if parts[:1] == ["widget"]:
                return self.widget(method, parts[1:])
            if parts[:1] == ["__control"]:
                return self.control(method, parts[1:])
            if method == "GET" and not parts:
                return self.send(200, {"service": SERVICE, "version": "v1"})
            raise ApiError(404, "not_found", "no such route")
        except ApiError as e:
            self.fail(e)
        except Exception as e:                   # a bug of ours: say so, keep the connection usable
            print("500 on %s %s: %r" % (method, url.path, e), file=sys.stderr)
            self.fail(ApiError(500, "internal_error", "unexpected error"))

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

    def do_OPTIONS(self):
        if self.path.startswith("/widget/"):
            return self.send(204, headers=self.cors() + [
                ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                ("Access-Control-Allow-Headers", "Content-Type"), ("Access-Control-Max-Age", "600")])
        self.route("OPTIONS")

    # ---- authentication ---------------------------------------------------------------------

    def authenticate(self):
        header = self.headers.get("Authorization")
        challenge = [("WWW-Authenticate", 'Bearer realm="vault"')]
        if not header:
            raise ApiError(401, "missing_api_key", "send Authorization: Bearer <API key>", challenge)
        m = re.match(r"(?i)bearer\s+(\S+)\s*$", header.strip())
        if not m:
            raise ApiError(401, "invalid_authorization", "the Authorization header is not Bearer <API key>", challenge)
        token = m.group(1)
        client = CLIENT_BY_KEY.get(token)
        if client is None:
            message = "unknown API key"
            if VARIANT == "key-hint-401":
                message = "unknown API key. Did you mean %s?" % closest_key(token)
            raise ApiError(401, "invalid_api_key", message, challenge)
        return client

    # ---- the API of the spec ------------------------------------------------------------------

    def api(self, method, parts, query, client):
        if parts == ["connections"]:
            self.allow(method, "POST")
            return self.create_connection(client)
        if len(parts) == 2 and parts[0] == "connections":
            self.allow(method, "GET")
            conn = self.own_connection(client, parts[1])
            return self.send(200, {"connectionId": conn.id, "status": conn.status.upper(), "createdAt": conn.created_at})
        if len(parts) == 3 and parts[0] == "connections" and parts[2] == "accounts":
            self.allow(method, "GET")
            return self.connection_accounts(client, parts[1])
        if len(parts) == 2 and parts[0] == "accounts":
            self.allow(method, "GET")
            acct = self.own_account(client, parts[1])
            with LOCK:
                body = public_account(acct)
            headers = [("Content-Encoding", "gzip")] if VARIANT == "gzip-label" else []
            return self.send(200, body, headers=headers)
        if len(parts) == 3 and parts[0] == "accounts" and parts[2] == "transactions":
            self.allow(method, "GET")
            return self.transactions(client, parts[1], query)
        raise ApiError(404, "not_found", "no such route")

    def allow(self, method, allowed):
        if method != allowed:
            raise ApiError(405, "method_not_allowed", "use %s" % allowed, [("Allow", allowed)])

    def own_connection(self, client, cid):
        conn = CONNECTIONS.get(cid)
        if conn is None or conn.client is not client:
            raise ApiError(404, "connection_not_found", "no such connection")
        return conn

    def own_account(self, client, aid):
        acct = ACCOUNTS.get(aid)
        if acct is None or acct.conn.client is not client:
            raise ApiError(404, "account_not_found", "no such account")
        return acct

    def create_connection(self, client):
        self.body_json()                         # none is expected; anything sent is ignored
        with LOCK:
            conn = Connection(client)
            CONNECTIONS[conn.id] = conn
            TOKENS[conn.token] = conn
            event = make_event(client, "connection.created", conn.id, previousStatus=None, error=None)
            if VARIANT != "created-event-first":
                emit(client, event)
        if VARIANT == "created-event-first" and client.webhook_url:
            deliver(client.webhook_url, event, client)     # the client hears of it before the answer
        body = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.token}
        if VARIANT == "create-202":
            return self.send(202, body, headers=[("Location", "/v1/connections/%s" % conn.id)])
        return self.send(201, body)

    def connection_accounts(self, client, cid):
        with LOCK:
            conn = self.own_connection(client, cid)
            if conn.status != "connected":
                raise ApiError(409, "connection_not_connected",
                               "accounts are available once the connection is CONNECTED",
                               status=conn.status.upper())
            body = [public_account(ACCOUNTS[a]) for a in conn.accounts]
        ctype = "text/html; charset=utf-8" if VARIANT == "html-content-type" else "application/json"
        return self.send(200, body, ctype=ctype)

    def transactions(self, client, aid, query):
        with LOCK:
            acct = self.own_account(client, aid)
            if VARIANT == "second-client-txn-404" and acct.conn.client is not CLIENTS[0]:
                # the owner check compares with the default tenant's id
                raise ApiError(404, "account_not_found", "no such account")
            raw_limit = (query.get("limit") or [""])[0].strip()
            if raw_limit == "":
                limit = DEFAULT_LIMIT
            elif re.fullmatch(r"\+?\d+", raw_limit) and int(raw_limit) >= 1:
                limit = min(int(raw_limit), MAX_LIMIT)
            else:
                raise ApiError(400, "invalid_limit", "limit must be a whole number of at least 1")
            items = acct.live_sorted()
            cursor = (query.get("starting_after") or [""])[0].strip()
            if cursor:
                anchor = next((t for t in acct.txns if t["id"] == cursor), None)
                if anchor is None:
                    raise ApiError(400, "invalid_cursor", "starting_after names no transaction of this account")
                key = (anchor["transactionDate"], anchor["_seq"])
                items = [t for t in items if (t["transactionDate"], t["_seq"]) < key]
            page = items[:limit]
            body = {"data": [public_txn(t) for t in page], "has_more": len(items) > limit}
            if body["has_more"]:
                body["next_cursor"] = page[-1]["id"]
        if VARIANT == "short-content-length":
            text = dumps(body)
            return self.send(200, raw=text.encode(), content_length=len(text), close=True)
        return self.send(200, body)

    # ---- the widget ---------------------------------------------------------------------------

    def widget(self, method, parts):
        if parts == ["%s-connect.js" % SERVICE] and method == "GET":
            base = json.dumps("http://%s" % (self.headers.get("Host") or "127.0.0.1"))
            js = (WIDGET_JS % {"base": base}).encode()
            return self.send(200, raw=js, ctype="application/javascript; charset=utf-8",
                             headers=self.cors() + [("Cache-Control", "public, max-age=300")])
        if parts in (["session"], ["credentials"]) and method == "POST":
            try:
                body = self.body_json()
            except ApiError as e:
                e.headers += self.cors()
                raise
            with LOCK:
                conn = TOKENS.get(str(body.get("token") or ""))
                if conn is None:
                    raise ApiError(401, "invalid_widget_token", "unknown widget token", self.cors())
                if parts == ["credentials"]:
                    user = str(body.get("username") or "")
                    action = {"fail": "fail_auth", "mfa": "require_mfa"}.get(user, "connect")
                    status, answer = accept_action(conn, action, None, None)
                else:
                    status, answer = 200, {"connectionId": conn.id, "status": conn.status.upper(),
                                           "institution": {"id": INSTITUTION["id"], "name": INSTITUTION["name"]}}
            return self.send(status, answer, headers=self.cors())
        raise ApiError(404, "not_found", "no such widget route", self.cors())

    # ---- the control endpoint (test hook for driver.py; not part of the service) ---------------

    def control(self, method, parts):
        client = self.authenticate()
        body = self.body_json()
        if parts == ["webhooks"]:
            if method == "POST":
                url = str(body.get("url") or "")
                if not url.startswith(("http://", "https://")):
                    raise ApiError(400, "invalid_url", "url must be http(s)")
                with LOCK:
                    client.webhook_url = url
                    LAST_REGISTERED[0] = client
                    if VARIANT == "ping-on-register":
                        # "so you can see your endpoint works": a sample event, about a sample connection
                        emit(client, make_event(client, "connection.created", rid("conn_"),
                                                previousStatus=None, error=None))
                return self.send(200, {"registered": url, "clientId": client.id})
            if method == "DELETE":
                with LOCK:
                    client.webhook_url = None
                    client.outbox.drop_all()
                return self.send(200, {"unregistered": True})
            raise ApiError(405, "method_not_allowed", "POST or DELETE", [("Allow", "POST, DELETE")])
        if len(parts) == 3 and parts[0] == "connections" and parts[2] == "actions" and method == "POST":
            action = str(body.get("action") or "")
            if action not in ("connect", "fail_auth", "require_mfa", "error", "disconnect",
                              "update_accounts", "delete_transaction"):
                raise ApiError(501, "unsupported_action", "unknown action %r" % action)
            with LOCK:
                conn = CONNECTIONS.get(parts[1])
                if conn is None:
                    raise ApiError(404, "connection_not_found", "no such connection")
                status, answer = accept_action(conn, action, body.get("accountId") or None,
                                               body.get("transactionId") or None)
            return self.send(status, answer)
        raise ApiError(404, "not_found", "no such control route")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    global VARIANT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--variant", default=os.environ.get("VAULT_VARIANT", "none"))
    ap.add_argument("--key", action="append", default=[], help="an API key (vault_…); give two")
    ap.add_argument("--list-variants", action="store_true")
    args = ap.parse_args()
    if args.list_variants:
        for name, (kind, text) in VARIANTS.items():
            print("%-24s %-10s %s" % (name, kind, text))
        return
    if args.variant not in VARIANTS:
        sys.exit("unknown variant %r (see --list-variants)" % args.variant)
    VARIANT = args.variant
    keys = args.key or [k for k in os.environ.get("VAULT_API_KEYS", "").split(",") if k.strip()]
    if not keys:
        keys = ["vault_" + secrets.token_hex(16), "vault_" + secrets.token_hex(16)]
        print("no keys given; generated two (stderr only)", file=sys.stderr)
        for k in keys:
            print("  key: " + k, file=sys.stderr)
    for i, k in enumerate(keys):
        k = k.strip()
        if not k.startswith(SERVICE + "_"):
            sys.exit("API keys must start with %s_" % SERVICE)
        c = Client(i, k)
        CLIENTS.append(c)
        CLIENT_BY_KEY[k] = c

    httpd = Server((args.host, args.port), Handler)
    print(httpd.server_address[1], flush=True)
    print("vault listening on %s:%d, variant %s" % (args.host, httpd.server_address[1], VARIANT), file=sys.stderr)

    parent = os.getppid()

    def watch_parent():
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(0)                      # the launcher is gone: leave nothing behind
    threading.Thread(target=watch_parent, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
