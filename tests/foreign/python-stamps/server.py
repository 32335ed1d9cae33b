#!/usr/bin/env python3
"""Bank Connection Aggregation Service: a test server written from the specification alone.

Standard library only.  Usage:

    FOREIGN_API_KEYS=key1,key2 python3 server.py --port 0 --service acme --variant none

It prints `PORT <n>` on stdout once it listens on 127.0.0.1.  With --exit-on-stdin-eof it stops
when its standard input is closed (run-variant.sh holds a fifo open).  The variant can also be
given by the environment variable FOREIGN_VARIANT.

Hidden state is driven through `POST /__admin/action` (see driver.py).
"""
import argparse
import bisect
import datetime
import email.utils
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
import traceback
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ---------------------------------------------------------------------------------------------
# Variants: one deliberate deviation at a time.  See VARIANTS.md for the reasoning.
# ---------------------------------------------------------------------------------------------
VIOLATIONS = [
    "ms-trailing-zeros", "occurred-micro", "connected-no-ms", "account-tz-offset",
    "created-prestamp", "connected-before-verifying", "nokey-creates", "badkey-sometimes-creates",
    "foreign-read-refresh", "short-account-ignores-limit", "cursor-last-404", "zero-txn-null",
    "has-more-full-page", "xclient-txn-leak", "xclient-verifying-webhook", "single-stale-balance",
    "list-unmasked",
]
LEGAL = [
    "ids-uuid", "asc-order", "alt-errors", "webhook-delay", "dup-deliveries", "extra-fields",
    "small-pages", "next-cursor-always", "offset-zero", "stamps-no-ms", "envelope-later",
    "widget-iframe", "optional-absent", "clock-behind",
]
ALL_VARIANTS = ["none"] + VIOLATIONS + LEGAL

VARIANT = "none"


def V(name):
    return VARIANT == name


# ---------------------------------------------------------------------------------------------
# Clock and timestamps
# ---------------------------------------------------------------------------------------------
CLOCK_SKEW = 0.0  # seconds added to the real clock (clock-behind: negative)


def now():
    return time.time() + CLOCK_SKEW


def _split(t):
    ms_total = int(t * 1000)  # truncate, never round up into the next second
    secs, ms = divmod(ms_total, 1000)
    return datetime.datetime.fromtimestamp(secs, datetime.timezone.utc), ms


def iso_ms(t):
    d, ms = _split(t)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % ms


def iso_s(t):
    d, _ = _split(t)
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_event(t):
    """created_at / occurredAt: ISO 8601 UTC with milliseconds (§6.1, §6.2)."""
    if V("ms-trailing-zeros"):
        # formatting bug: the fraction is printed as a number, so trailing zeros vanish
        d, ms = _split(t)
        frac = ("%.3f" % (ms / 1000.0))[1:].rstrip("0").rstrip(".")
        return d.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
    return iso_ms(t)


def iso_record(t):
    """createdAt / lastSyncedAt of accounts and transactions (§2.2, §2.3): ISO 8601 UTC."""
    if V("stamps-no-ms"):
        return iso_s(t)
    if V("offset-zero"):
        return iso_ms(t)[:-1] + "+00:00"
    return iso_ms(t)


def iso_account_created(t):
    if V("account-tz-offset"):
        # the account service formats in the data centre's local zone (IST, +05:30)
        tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
        ms_total = int(t * 1000)
        secs, ms = divmod(ms_total, 1000)
        d = datetime.datetime.fromtimestamp(secs, tz)
        return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%03d+05:30" % ms
    return iso_record(t)


# ---------------------------------------------------------------------------------------------
# Identifiers
# ---------------------------------------------------------------------------------------------
_ID_ALPHABET = string.ascii_uppercase + string.digits


def new_id(prefix):
    if V("ids-uuid"):
        return prefix + str(uuid.uuid4())
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(26))


def new_token():
    return "sess_" + secrets.token_urlsafe(32)


# ---------------------------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------------------------
LOCK = threading.RLock()
CLIENTS = []            # list of Client
CLIENT_BY_KEY = {}
CONNECTIONS = {}        # id -> Connection
ACCOUNTS = {}           # id -> Account
TXN_OWNER = {}          # txn id -> account id (including deleted ones)
TOKENS = {}             # widget token -> connection id
SERVICE = "acme"

_URL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.id = new_id("cli_")
        self.webhook_url = None
        self.generation = 0  # bumped on (un)registration: stale deliveries are dropped
        self.queue = queue.Queue()
        threading.Thread(target=self._deliver_loop, daemon=True).start()

    # -- deliveries -----------------------------------------------------------------------
    def enqueue(self, event, url_client=None):
        target = url_client or self
        with LOCK:
            url = target.webhook_url
            gen = target.generation
        if not url:
            return
        if V("webhook-delay"):
            delay = random.uniform(0.2, 2.0)
            threading.Timer(delay, lambda: target._post(url, gen, event, target)).start()
            return
        target.queue.put((url, gen, event))

    def _deliver_loop(self):
        while True:
            url, gen, event = self.queue.get()
            self._post(url, gen, event, self)
            if V("dup-deliveries"):
                self._post(url, gen, event, self)

    def _post(self, url, gen, event, owner):
        body = json.dumps(event).encode()
        for attempt in range(4):
            with LOCK:
                if owner.generation != gen:
                    return  # unregistered since: stop delivering and retrying
            try:
                req = urllib.request.Request(url, data=body, method="POST", headers={
                    "Content-Type": "application/json",
                    "User-Agent": SERVICE + "-webhooks/1.0",
                    "X-Event-Id": event["id"],
                    "X-Event-Type": event["type"],
                })
                with _URL_OPENER.open(req, timeout=5) as resp:
                    if 200 <= resp.status < 300:
                        return
            except urllib.error.HTTPError as e:
                if 400 <= e.code < 500 and e.code not in (408, 429):
                    return  # the receiver refuses it for good
            except Exception as e:
                print("delivery of %s failed (attempt %d): %s" % (event["id"], attempt + 1,
                                                                  type(e).__name__), file=sys.stderr)
            time.sleep(0.3 * (2 ** attempt))


class Account:
    def __init__(self, conn, t, acct_type, currency, index):
        self.id = new_id("acc_")
        self.conn = conn
        self.type = acct_type
        self.currency = currency
        self.created_t = t
        self.synced_t = t
        names = {
            "checking": ["Everyday Checking", "Main Account", "Current Account"],
            "savings": ["Rainy Day Savings", "High Yield Savings", "Savings"],
            "credit_card": ["Platinum Card", "Cashback Visa", "Travel Rewards Card"],
            "brokerage": ["Brokerage Account", "Self-directed Investing"],
            "pension": ["Pension Plan", "Retirement 401k"],
        }
        self.name = random.choice(names[acct_type]) + ("" if index == 0 else " %d" % (index + 1))
        self.number = "".join(random.choice(string.digits) for _ in range(random.randint(10, 14)))
        self.txns = []        # live transactions, sorted by sort key
        self.keys = {}        # txn id -> sort key, deleted ones included (cursors keep working)
        self.credit_limit = None
        self.currency_balances = None
        self.positions = None
        if acct_type == "credit_card":
            limit = float(random.choice([1000, 2500, 5000, 7500, 10000]))
            self.credit_limit = {"amount": limit, "currency": currency}
            self.balance = -round(random.uniform(0, limit * 0.6), 2)
            self.available = round(limit + self.balance, 2)
            if random.random() < 0.5:
                other = random.choice([c for c in ("USD", "EUR", "GBP") if c != currency])
                b = -round(random.uniform(0, 300), 2)
                self.currency_balances = [{"currency": other, "balance": b, "availableBalance": b}]
        elif acct_type in ("brokerage", "pension"):
            self.positions = []
            for sym, nm in random.sample([("VTI", "Vanguard Total Stock Market ETF"),
                                          ("AAPL", "Apple Inc."), ("MSFT", "Microsoft Corp."),
                                          ("BND", "Vanguard Total Bond Market ETF"),
                                          ("VXUS", "Vanguard Total International Stock ETF")],
                                         random.randint(0, 3)):
                qty = round(random.uniform(1, 80), 4)
                price = round(random.uniform(20, 400), 2)
                self.positions.append({"symbol": sym, "name": nm, "quantity": qty, "price": price,
                                       "marketValue": round(qty * price, 2), "currency": currency})
            cash = round(random.uniform(0, 2000), 2)
            self.balance = round(cash + sum(p["marketValue"] for p in self.positions), 2)
            self.available = cash
        else:
            self.balance = round(random.uniform(20, 15000), 2)
            self.available = self.balance if random.random() < 0.7 else round(self.balance - random.uniform(0, 20), 2)
        # balance cache of the single-account read (single-stale-balance only)
        self.cached_single = None

    def sort_key(self, txn):
        # clean: newest first (transactionDate, then createdAt, then id)
        k = (txn["transactionDate"], txn["_t"], txn["id"])
        return k

    def add_txn(self, txn):
        k = self.sort_key(txn)
        self.keys[txn["id"]] = k
        ks = [self.sort_key(x) for x in self.txns]
        i = bisect.bisect_left(ks, k)
        self.txns.insert(i, txn)
        TXN_OWNER[txn["id"]] = self.id

    def ordered(self):
        # stored ascending; the clean order is newest first
        if V("asc-order"):
            return list(self.txns)
        return list(reversed(self.txns))

    def to_json(self, for_list=False):
        number = self.number
        if not (V("list-unmasked") and for_list and self.type in ("checking", "savings")):
            number = "****" + self.number[-4:]
        bal, avail, synced = self.balance, self.available, self.synced_t
        if V("single-stale-balance") and not for_list:
            if self.cached_single is None:
                self.cached_single = (bal, avail, synced)
            bal, avail, synced = self.cached_single
        d = {
            "id": self.id,
            "connectionId": self.conn.id,
            "name": self.name,
            "type": self.type,
            "currency": self.currency,
            "balance": bal,
            "availableBalance": avail,
            "accountNumber": number,
            "createdAt": iso_account_created(self.created_t),
        }
        if not V("optional-absent"):
            d["lastSyncedAt"] = iso_record(synced)
            d["institution"] = dict(self.conn.institution)
        if self.credit_limit is not None:
            d["creditLimit"] = dict(self.credit_limit)
        if self.currency_balances is not None:
            d["currencyBalances"] = [dict(x) for x in self.currency_balances]
        if self.positions is not None:
            d["positions"] = [dict(x) for x in self.positions]
        if V("extra-fields"):
            d["status"] = "active"
            d["ownerName"] = "Sample Holder"
        return d


CATEGORIES_OUT = [("groceries", ["Whole Foods Market", "Trader Joe's", "Lidl", "Corner Grocery"]),
                  ("dining", ["Blue Bottle Coffee", "Pizza Palace", "Sushi Bar"]),
                  ("transport", ["City Metro", "Uber Trip", "Shell Station"]),
                  ("utilities", ["Electric Company", "Water Utility", "Mobile Phone Bill"]),
                  ("shopping", ["Amazon Marketplace", "Book Shop", "Hardware Store"]),
                  ("entertainment", ["Streaming Service", "Cinema Tickets"]),
                  ("rent", ["Monthly Rent"]),
                  ("health", ["Pharmacy", "Dentist"])]
CATEGORIES_IN = [("income", ["Salary ACME Corp", "Payroll Deposit"]),
                 ("transfer", ["Transfer from Savings", "Incoming Transfer"]),
                 ("refund", ["Refund Online Order"])]


def make_txn(acct, t, days_ago=None, amount=None):
    if amount is None:
        if random.random() < 0.25:
            cat, descs = random.choice(CATEGORIES_IN)
            amount = round(random.uniform(10, 3000), 2)
        else:
            cat, descs = random.choice(CATEGORIES_OUT)
            amount = -round(random.uniform(1, 400), 2)
    else:
        cat, descs = random.choice(CATEGORIES_IN if amount > 0 else CATEGORIES_OUT)
    if amount == 0:
        amount = -1.0
    if days_ago is None:
        days_ago = random.randint(0, 120)
    date = (datetime.datetime.fromtimestamp(t, datetime.timezone.utc).date()
            - datetime.timedelta(days=days_ago)).isoformat()
    return {
        "id": new_id("txn_"),
        "accountId": acct.id,
        "amount": amount,
        "currency": acct.currency,
        "description": random.choice(descs),
        "transactionDate": date,
        "category": cat,
        "status": "posted",
        "createdAt": iso_record(t),
        "_t": t,
    }


def txn_json(txn):
    return {k: v for k, v in txn.items() if not k.startswith("_")}


INSTITUTIONS = [("ins_DEMO01", "First Demo Bank"), ("ins_DEMO02", "Lakeside Credit Union"),
                ("ins_DEMO03", "Northwind Savings"), ("ins_DEMO04", "Contoso Bank")]

# pre-generated connection ids (created-prestamp only): id and stamp are made in a batch
_PREPOOL = []


class Connection:
    def __init__(self, client):
        self.client = client
        if V("created-prestamp"):
            with LOCK:
                if not _PREPOOL:
                    t0 = now()
                    _PREPOOL.extend((new_id("conn_"), t0) for _ in range(20))
                self.id, self.created_t = _PREPOOL.pop(0)
        else:
            self.id = new_id("conn_")
            self.created_t = now()
        self.status = "created"
        self.projected = "created"
        self.token = new_token()
        self.token_expires = time.time() + 3600
        ins = random.choice(INSTITUTIONS)
        self.institution = {"id": ins[0], "name": ins[1], "logo": None}
        self.accounts = []
        self.last_event_t = 0.0
        self.steps = []
        self.worker = False
        self.pending_deletes = set()

    # -- events -----------------------------------------------------------------------------
    def stamp(self, t=None):
        t = now() if t is None else t
        if not V("connected-before-verifying"):
            t = max(t, self.last_event_t + 0.001)
        self.last_event_t = max(self.last_event_t, t)
        return t

    def emit(self, etype, extra, t, url_client=None):
        eid = new_id("evt_")
        occurred = iso_event(t)
        if V("occurred-micro"):
            d, _ = _split(t)
            occurred = d.strftime("%Y-%m-%dT%H:%M:%S") + ".%06dZ" % (int(round(t * 1e6)) % 1000000)
        created = iso_event(t)
        if V("envelope-later"):
            created = iso_event(t + random.uniform(0.003, 0.040))
        if V("connected-no-ms") and etype == "connection.connected":
            created = iso_s(t)
        data = {"eventId": eid, "type": etype, "occurredAt": occurred,
                "clientId": self.client.id, "connectionId": self.id}
        data.update(extra)
        event = {"id": eid, "type": etype, "created_at": created, "data": data}
        self.client.enqueue(event, url_client)

    def set_status(self, new, error=None, t=None):
        prev = self.status
        self.status = new
        t = self.stamp(t)
        url_client = None
        if V("xclient-verifying-webhook") and new == "verifying" and CLIENTS:
            url_client = CLIENTS[0]  # the verification worker posts with the default client's config
        self.emit("connection." + new, {"previousStatus": prev, "error": error}, t, url_client)

    # -- data -------------------------------------------------------------------------------
    def materialise(self):
        if self.accounts:
            return
        t = now()
        n = random.randint(1, 5)
        types = [random.choice(["checking", "savings", "credit_card", "brokerage", "pension"])
                 for _ in range(n)]
        ccy = random.choice(["USD", "USD", "EUR", "GBP", "CAD", "CHF"])
        counts = []
        for _ in range(n):
            r = random.random()
            if r < 0.18:
                counts.append(0)
            elif r < 0.34:
                counts.append(1)
            elif r < 0.50:
                counts.append(2)
            else:
                counts.append(random.randint(3, 60))
        if max(counts) < 3:
            counts[random.randrange(n)] = random.randint(3, 40)
        for i in range(n):
            acct = Account(self, t, types[i], ccy if random.random() < 0.8 else
                           random.choice(["USD", "EUR", "GBP"]), i)
            for _ in range(counts[i]):
                acct.add_txn(make_txn(acct, t + random.uniform(0, 0.0005)))
            self.accounts.append(acct)
            ACCOUNTS[acct.id] = acct

    def update_account(self, acct_id):
        acct = ACCOUNTS.get(acct_id) if acct_id else None
        if acct is None or acct.conn is not self:
            if not self.accounts:
                return
            acct = random.choice(self.accounts)
        t = now()
        delta = round(random.choice([-1, 1]) * random.uniform(1, 250), 2)
        if delta == 0:
            delta = 5.0
        acct.add_txn(make_txn(acct, t, days_ago=0, amount=delta))
        acct.balance = round(acct.balance + delta, 2)
        acct.available = round(acct.available + delta, 2)
        acct.synced_t = max(t, acct.synced_t)
        self.emit("accounts.updated", {"accountId": acct.id}, self.stamp())

    def delete_txn(self, acct_id, txn_id):
        acct = None
        txn = None
        if txn_id:
            acct = ACCOUNTS.get(TXN_OWNER.get(txn_id))
            if acct is not None:
                txn = next((x for x in acct.txns if x["id"] == txn_id), None)
        if txn is None and acct_id:
            a = ACCOUNTS.get(acct_id)
            if a is not None and a.conn is self and a.txns:
                acct, txn = a, random.choice(a.txns)
        if txn is None:
            cands = [a for a in self.accounts if a.txns]
            if not cands:
                return
            acct = random.choice(cands)
            txn = random.choice(acct.txns)
        acct.txns.remove(txn)
        self.pending_deletes.discard(txn["id"])
        self.emit("transaction.deleted", {"accountId": acct.id, "transactionId": txn["id"]},
                  self.stamp())

    # -- the action queue ---------------------------------------------------------------------
    def queue_steps(self, steps):
        self.steps.extend(steps)
        if not self.worker:
            self.worker = True
            threading.Thread(target=self._run_steps, daemon=True).start()

    def _run_steps(self):
        while True:
            with LOCK:
                if not self.steps:
                    self.worker = False
                    return
                step = self.steps.pop(0)
            time.sleep(random.uniform(0.03, 0.15))
            try:
                with LOCK:
                    kind = step[0]
                    if kind == "status":
                        _, new, err, fixed_t = step
                        if new == "connected":
                            self.materialise()
                        self.set_status(new, err, fixed_t)
                    elif kind == "update":
                        self.update_account(step[1])
                    elif kind == "delete":
                        self.delete_txn(step[1], step[2])
            except Exception:
                traceback.print_exc()


ERR_AUTH = {"code": "invalid_credentials", "message": "The bank rejected the credentials."}
ERR_INTERNAL = {"code": "internal_error", "message": "Unexpected error while connecting."}


def plan_action(conn, action, acct_id=None, txn_id=None):
    """Return (code, message). Code 'ok', 'refused' (from this state) or 'unsupported'.
    Must be called with LOCK held."""
    p = conn.projected
    steps = []
    if action in ("connect", "fail_auth", "require_mfa"):
        final = {"connect": "connected", "fail_auth": "failed_auth",
                 "require_mfa": "mfa_required"}[action]
        if p == final:
            return "refused", "connection is already %s" % p
        err = ERR_AUTH if final == "failed_auth" else None
        t_fixed = now() if (V("connected-before-verifying") and final == "connected") else None
        if p == "connected":
            # a re-authentication of a connected connection goes through verifying
            path = ["verifying", final]
        elif p == "credentials_submitted":
            path = ["verifying", final]
        elif p == "verifying":
            path = [final]
        else:
            path = ["credentials_submitted", "verifying", final]
        for s in path:
            steps.append(("status", s, err if s == final else None,
                          t_fixed if s == final else None))
        conn.projected = final
    elif action == "error":
        if p == "error":
            return "refused", "connection is already in error"
        steps.append(("status", "error", ERR_INTERNAL, None))
        conn.projected = "error"
    elif action == "disconnect":
        if p == "disconnected":
            return "refused", "connection is already disconnected"
        steps.append(("status", "disconnected", None, None))
        conn.projected = "disconnected"
    elif action == "update_accounts":
        if p != "connected":
            return "refused", "connection is not connected"
        if acct_id:
            a = ACCOUNTS.get(acct_id)
            if a is None or a.conn is not conn:
                return "refused", "unknown account for this connection"
        steps.append(("update", acct_id))
    elif action == "delete_transaction":
        if p != "connected":
            return "refused", "connection is not connected"
        if txn_id:
            owner = ACCOUNTS.get(TXN_OWNER.get(txn_id))
            if owner is None or owner.conn is not conn or txn_id in conn.pending_deletes or \
                    not any(x["id"] == txn_id for x in owner.txns):
                return "refused", "unknown or already deleted transaction"
            conn.pending_deletes.add(txn_id)
        elif conn.accounts:
            live = sum(len(a.txns) for a in conn.accounts) - len(conn.pending_deletes)
            if live <= 0:
                return "refused", "no transaction left to delete"
        steps.append(("delete", acct_id, txn_id))
    else:
        return "unsupported", "unknown action %r" % action
    conn.queue_steps(steps)
    return "ok", "accepted"


def create_connection(client):
    conn = Connection(client)
    CONNECTIONS[conn.id] = conn
    TOKENS[conn.token] = conn.id
    t = conn.stamp(conn.created_t)
    conn.emit("connection.created", {"previousStatus": None, "error": None}, t)
    return conn


# ---------------------------------------------------------------------------------------------
# Widget
# ---------------------------------------------------------------------------------------------
def widget_global():
    return "".join(p[:1].upper() + p[1:] for p in SERVICE.replace("_", "-").split("-") if p) + "Connect"


WIDGET_JS = r"""/* %(service)s Connect widget v1 */
(function (global) {
  'use strict';
  var BASE = (function () {
    try {
      var s = document.currentScript && document.currentScript.src;
      if (s) return s.replace(/\/widget\/[^\/?#]*([?#].*)?$/, '');
    } catch (e) {}
    return %(base)s;
  })();
  var IFRAME = %(iframe)s;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { e.setAttribute(k, attrs[k]); }
    if (text) e.textContent = text;
    return e;
  }
  function getJSON(url, opts) {
    return fetch(url, Object.assign({ credentials: 'omit', mode: 'cors' }, opts || {}))
      .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, body: b }; }); });
  }

  function open(a, b, c) {
    var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (!o.token || typeof o.token !== 'string') throw new TypeError('open: a widget token is required');
    var onSuccess = typeof o.onSuccess === 'function' ? o.onSuccess : function () {};
    var onExit = typeof o.onExit === 'function' ? o.onExit : function () {};
    var host = document.body || document.documentElement;
    var root = el('div', { 'class': '%(service)s-connect-overlay', role: 'dialog', 'aria-modal': 'true' });
    root.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;' +
      'align-items:center;justify-content:center;z-index:2147483647;font-family:sans-serif';
    var box = el('div');
    box.style.cssText = 'background:#fff;padding:24px;border-radius:8px;min-width:300px';
    root.appendChild(box);
    host.appendChild(root);
    var closed = false;
    function close() { closed = true; if (root.parentNode) root.parentNode.removeChild(root); }
    var q = '?token=' + encodeURIComponent(o.token) +
      (o.connectionId ? '&connectionId=' + encodeURIComponent(o.connectionId) : '');

    if (IFRAME) {
      var f = el('iframe', { src: BASE + '/widget/v1/frame' + q, title: 'Connect your bank' });
      f.style.cssText = 'border:0;width:360px;height:320px';
      box.appendChild(f);
      global.addEventListener('message', function (ev) {
        var d = ev.data;
        if (!d || d.source !== '%(service)s-connect') return;
        if (d.kind === 'success') { close(); try { onSuccess(d.metadata); } catch (e) {} }
        if (d.kind === 'exit') { close(); try { onExit(); } catch (e) {} }
      });
      return { close: close };
    }

    box.appendChild(el('h2', {}, 'Connect your bank'));
    var status = el('p', {}, 'Loading…');
    box.appendChild(status);
    getJSON(BASE + '/widget/v1/session' + q).then(function (r) {
      if (closed) return;
      if (!r.ok) { status.textContent = 'This link has expired. Please start again.'; return; }
      var s = r.body;
      status.textContent = 'Sign in to ' + s.institution.name;
      var form = el('form');
      var user = el('input', { name: 'username', placeholder: 'Username', autocomplete: 'username' });
      var pass = el('input', { name: 'password', type: 'password', placeholder: 'Password' });
      var btn = el('button', { type: 'submit' }, 'Connect');
      var cancel = el('button', { type: 'button' }, 'Cancel');
      cancel.onclick = function () { close(); try { onExit(); } catch (e) {} };
      form.appendChild(user); form.appendChild(pass); form.appendChild(btn); form.appendChild(cancel);
      box.appendChild(form);
      form.onsubmit = function (ev) {
        ev.preventDefault();
        status.textContent = 'Connecting…';
        fetch(BASE + '/widget/v1/session/submit', {
          method: 'POST', credentials: 'omit', mode: 'cors',
          headers: { 'Content-Type': 'text/plain' },
          body: JSON.stringify({ token: o.token, username: user.value, password: pass.value })
        }).then(function () { poll(0); }).catch(function () { status.textContent = 'Network error'; });
      };
    }).catch(function () { if (!closed) status.textContent = 'Network error'; });

    function poll(n) {
      if (closed || n > 60) return;
      getJSON(BASE + '/widget/v1/session' + q).then(function (r) {
        var st = r.body && r.body.status;
        if (st === 'connected') {
          close();
          try { onSuccess({ connectionId: r.body.connectionId, institution: r.body.institution }); } catch (e) {}
        } else if (st === 'failed_auth' || st === 'error') {
          status.textContent = st === 'failed_auth' ? 'Wrong username or password' : 'Something went wrong';
        } else if (st === 'mfa_required') {
          status.textContent = 'Your bank needs a second factor';
        } else { setTimeout(function () { poll(n + 1); }, 500); }
      }).catch(function () { setTimeout(function () { poll(n + 1); }, 1000); });
    }
    return { close: close };
  }

  global.%(global)s = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
"""

FRAME_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Connect your bank</title></head>
<body style="font-family:sans-serif"><h3>Connect your bank</h3>
<p id="s">Sign in to your bank.</p>
<form id="f"><input name="username" placeholder="Username"><input name="password" type="password" placeholder="Password"><button>Connect</button></form>
<script>
document.getElementById('f').onsubmit = function (e) {
  e.preventDefault();
  var p = new URLSearchParams(location.search);
  fetch('/widget/v1/session/submit', {method: 'POST', headers: {'Content-Type': 'text/plain'},
    body: JSON.stringify({token: p.get('token'), username: this.username.value, password: this.password.value})})
  .then(function () { parent.postMessage({source: '%(service)s-connect', kind: 'success',
     metadata: {connectionId: p.get('connectionId')}}, '*'); });
};
</script></body></html>
"""


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status, code, message, headers=None):
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def err_status(kind):
    """Status codes per error kind (not fixed by §7)."""
    alt = V("alt-errors")
    return {
        "unauthorized": 403 if alt else 401,
        "not_found": 404,
        "not_connected": 400 if alt else 409,
        "bad_request": 422 if alt else 400,
        "method": 405,
    }[kind]


def error_body(status, code, message):
    if V("alt-errors"):
        return {"error": {"type": "invalid_request_error", "code": code, "message": message,
                          "status": status}}
    return {"error": code, "message": message}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAgg/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet
        pass

    def version_string(self):
        return self.server_version

    def date_time_string(self, timestamp=None):
        return email.utils.formatdate(now() if timestamp is None else timestamp, usegmt=True)

    # -- plumbing -------------------------------------------------------------------------
    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            data = b""
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    break
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    self.close_connection = True
                    return b""
                if size == 0:
                    while True:
                        l2 = self.rfile.readline(65537)
                        if not l2 or l2 in (b"\r\n", b"\n"):
                            break
                    break
                if len(data) + size > 1 << 20:
                    self.close_connection = True
                    raise ApiError(413, "payload_too_large", "request body too large")
                data += self.rfile.read(size)
                self.rfile.readline(3)
            return data
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise ApiError(400, "bad_request", "invalid Content-Length")
        if n < 0:
            self.close_connection = True
            raise ApiError(400, "bad_request", "invalid Content-Length")
        if n > 1 << 20:
            self.close_connection = True
            raise ApiError(413, "payload_too_large", "request body too large")
        return self.rfile.read(n) if n else b""

    def _send(self, status, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)) or body is None and ctype == "application/json":
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        if "Cache-Control" not in (headers or {}):
            self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _error(self, e):
        h = dict(e.headers)
        if self.path.startswith("/widget/"):
            h.update(CORS)
        self._send(e.status, error_body(e.status, e.code, e.message), headers=h)

    def _dispatch(self):
        try:
            self.route()
        except ApiError as e:
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            traceback.print_exc()
            try:
                self.close_connection = True
                self._send(500, error_body(500, "internal_error", "internal error"))
            except Exception:
                pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    # -- auth -----------------------------------------------------------------------------
    def auth_key(self):
        h = self.headers.get("Authorization")
        if h is None:
            return None, "missing"
        parts = h.strip().split(" ")
        if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1]:
            return None, "malformed"
        return parts[1], "ok"

    def client(self):
        key, why = self.auth_key()
        client = CLIENT_BY_KEY.get(key) if key else None
        if client is None:
            raise ApiError(err_status("unauthorized"), "unauthorized",
                           "missing or invalid API key" if why != "ok" else "invalid API key",
                           {"WWW-Authenticate": 'Bearer realm="api"'})
        return client

    # -- routing --------------------------------------------------------------------------
    def route(self):
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        m = self.command
        if path.startswith("/widget/"):
            return self.widget(m, path, query)
        if path == "/__admin/action":
            if m != "POST":
                raise ApiError(405, "method_not_allowed", "POST only", {"Allow": "POST"})
            return self.admin()
        if path == "/" or path == "/health":
            if m in ("GET", "HEAD"):
                return self._send(200, {"service": SERVICE, "status": "ok"})
        segs = path.split("/")
        if len(segs) < 2 or segs[1] != "v1":
            raise ApiError(404, "not_found", "no such route")
        segs = [urllib.parse.unquote(s) for s in segs[2:]]
        body = self._read_body() if m in ("POST", "PUT", "PATCH") else b""

        # POST /v1/connections
        if segs == ["connections"]:
            if m != "POST":
                self.client()
                raise ApiError(405, "method_not_allowed", "method not allowed", {"Allow": "POST"})
            return self.create(body)
        if len(segs) == 3 and segs[0] == "connections" and segs[2] == "accounts":
            return self.get_accounts(m, segs[1])
        if len(segs) == 2 and segs[0] == "accounts":
            return self.get_account(m, segs[1])
        if len(segs) == 3 and segs[0] == "accounts" and segs[2] == "transactions":
            return self.get_transactions(m, segs[1], query)
        self.client()
        raise ApiError(404, "not_found", "no such route")

    def _only_get(self, m):
        if m not in ("GET", "HEAD"):
            raise ApiError(405, "method_not_allowed", "method not allowed", {"Allow": "GET"})

    def create(self, body):
        key, why = self.auth_key()
        with LOCK:
            client = CLIENT_BY_KEY.get(key) if key else None
            if client is None:
                if CLIENTS and ((V("nokey-creates") and why == "missing") or
                                (V("badkey-sometimes-creates") and why == "ok" and random.random() < 0.34)):
                    create_connection(CLIENTS[0])  # falls through to the default tenant
                self.client()  # raises
            conn = create_connection(client)
            out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.token}
            if V("extra-fields"):
                out["createdAt"] = iso_record(conn.created_t)
                out["widgetTokenExpiresAt"] = iso_record(conn.token_expires + CLOCK_SKEW)
        self._send(200 if V("alt-errors") else 201, out,
                   headers={"Location": "/v1/connections/" + conn.id})

    def _own_conn(self, client, cid):
        conn = CONNECTIONS.get(cid)
        if conn is None or conn.client is not client:
            raise ApiError(404, "connection_not_found", "no such connection")
        return conn

    def _account(self, client, aid, allow_foreign=False):
        acct = ACCOUNTS.get(aid)
        if acct is None or (acct.conn.client is not client and not allow_foreign):
            raise ApiError(404, "account_not_found", "no such account")
        return acct

    def get_accounts(self, m, cid):
        client = self.client()
        self._only_get(m)
        with LOCK:
            conn = self._own_conn(client, cid)
            if conn.status != "connected":
                raise ApiError(err_status("not_connected"), "connection_not_connected",
                               "the connection is %s, not CONNECTED" % conn.status.upper())
            out = [a.to_json(for_list=True) for a in conn.accounts]
        self._send(200, out)

    def get_account(self, m, aid):
        client = self.client()
        self._only_get(m)
        with LOCK:
            acct = ACCOUNTS.get(aid)
            if V("foreign-read-refresh") and acct is not None and acct.conn.client is not client:
                # refresh-on-read runs before the ownership check
                acct.synced_t = max(now(), acct.synced_t)
                acct.conn.emit("accounts.updated", {"accountId": acct.id}, acct.conn.stamp())
            acct = self._account(client, aid)
            out = acct.to_json(for_list=False)
        self._send(200, out)

    def get_transactions(self, m, aid, query):
        client = self.client()
        self._only_get(m)

        def one(name):
            v = query.get(name)
            return None if v is None else v[0]

        default_limit, max_limit = (3, 10) if V("small-pages") else (25, 100)
        raw_limit = one("limit")
        if raw_limit is None:
            limit = default_limit
        else:
            try:
                f = float(raw_limit)
                if f != f or f in (float("inf"), float("-inf")) or f != int(f) or f < 1:
                    raise ValueError
                limit = min(int(f), max_limit)
            except (ValueError, OverflowError):
                raise ApiError(err_status("bad_request"), "invalid_limit",
                               "limit must be a positive integer")
        cursor = one("starting_after")
        with LOCK:
            acct = self._account(client, aid, allow_foreign=V("xclient-txn-leak"))
            items = acct.ordered()
            total_all = len(items)
            if cursor is not None:
                key = acct.keys.get(cursor)
                if key is None:
                    raise ApiError(err_status("bad_request"), "invalid_cursor",
                                   "starting_after is not a transaction of this account")
                if V("cursor-last-404") and items and cursor == items[-1]["id"]:
                    raise ApiError(404, "invalid_cursor", "cursor not found")
                if V("asc-order"):
                    items = [x for x in items if acct.sort_key(x) > key]
                else:
                    items = [x for x in items if acct.sort_key(x) < key]
            if V("short-account-ignores-limit") and total_all <= 2:
                page = items  # "small accounts fit on one page"
            else:
                page = items[:limit]
            has_more = len(items) > len(page)
            if V("has-more-full-page"):
                has_more = len(page) == limit
            out = {"data": [txn_json(x) for x in page], "has_more": has_more}
            if V("zero-txn-null") and total_all == 0:
                out["data"] = None
            if page and (has_more or V("next-cursor-always")):
                out["next_cursor"] = page[-1]["id"]
        self._send(200, out)

    # -- widget -----------------------------------------------------------------------------
    def widget(self, m, path, query):
        if m == "OPTIONS":
            return self._send(204, b"", ctype="text/plain", headers=dict(CORS, **{
                "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                "Access-Control-Allow-Headers": "Content-Type",
                "Access-Control-Max-Age": "600"}))
        script = "/widget/%s-connect.js" % SERVICE
        if path == script:
            if m not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "GET only", {"Allow": "GET"})
            host = self.headers.get("Host") or "127.0.0.1"
            js = WIDGET_JS % {"service": SERVICE, "global": widget_global(),
                              "base": json.dumps("http://" + host),
                              "iframe": "true" if V("widget-iframe") else "false"}
            return self._send(200, js, ctype="application/javascript; charset=utf-8",
                              headers=dict(CORS, **{"Cache-Control": "public, max-age=60"}))
        if path in ("/widget/v1/session", "/widget/v1/frame"):
            if m not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "GET only", {"Allow": "GET"})
            tok = (query.get("token") or [""])[0]
            with LOCK:
                cid = TOKENS.get(tok)
                conn = CONNECTIONS.get(cid) if cid else None
                if conn is None or conn.token_expires < time.time():
                    raise ApiError(401, "invalid_token", "unknown or expired widget token")
                info = {"connectionId": conn.id, "status": conn.status,
                        "institution": dict(conn.institution)}
            if path.endswith("frame"):
                return self._send(200, FRAME_HTML % {"service": SERVICE},
                                  ctype="text/html; charset=utf-8")
            return self._send(200, info, headers=CORS)
        if path == "/widget/v1/session/submit":
            if m != "POST":
                raise ApiError(405, "method_not_allowed", "POST only", {"Allow": "POST"})
            body = self._read_body()
            try:
                d = json.loads(body or b"{}")
                tok = d.get("token") if isinstance(d, dict) else None
                pw = str(d.get("password", "")) if isinstance(d, dict) else ""
            except (ValueError, UnicodeDecodeError):
                raise ApiError(400, "bad_request", "invalid JSON")
            with LOCK:
                cid = TOKENS.get(tok) if isinstance(tok, str) else None
                conn = CONNECTIONS.get(cid) if cid else None
                if conn is None or conn.token_expires < time.time():
                    raise ApiError(401, "invalid_token", "unknown or expired widget token")
                action = "fail_auth" if pw == "wrong" else "require_mfa" if pw == "mfa" else "connect"
                res, msg = plan_action(conn, action)
            return self._send(202 if res == "ok" else 409, {"result": res, "message": msg},
                              headers=CORS)
        raise ApiError(404, "not_found", "no such widget resource")

    # -- test hook ----------------------------------------------------------------------------
    def admin(self):
        key, _ = self.auth_key()
        if key not in CLIENT_BY_KEY:
            raise ApiError(401, "unauthorized", "admin needs a client key")
        try:
            d = json.loads(self._read_body() or b"{}")
            if not isinstance(d, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "bad_request", "invalid JSON")
        action = d.get("action")
        with LOCK:
            if action in ("register_webhook", "unregister_webhook"):
                pairs = [(key, d.get("webhookUrl"))]
                if d.get("secondApiKey") in CLIENT_BY_KEY:
                    pairs.append((d.get("secondApiKey"), d.get("secondWebhookUrl")))
                for k, url in pairs:
                    c = CLIENT_BY_KEY[k]
                    c.generation += 1
                    c.webhook_url = url if (action == "register_webhook" and url) else None
                return self._send(200, {"result": "ok", "webhooks": "per-client"})
            conn = CONNECTIONS.get(d.get("connectionId") or "")
            if conn is None:
                raise ApiError(404, "connection_not_found", "no such connection")
            res, msg = plan_action(conn, action, d.get("accountId") or None,
                                   d.get("transactionId") or None)
        status = {"ok": 200, "refused": 409, "unsupported": 501}[res]
        self._send(status, {"result": res, "message": msg})


CORS = {"Access-Control-Allow-Origin": "*", "Vary": "Origin"}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass


def main():
    global VARIANT, SERVICE, CLOCK_SKEW
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "0")))
    ap.add_argument("--variant", default=os.environ.get("FOREIGN_VARIANT", "none"))
    ap.add_argument("--service", default=os.environ.get("FOREIGN_SERVICE", "acme"))
    ap.add_argument("--keys", default=os.environ.get("FOREIGN_API_KEYS", ""))
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    ap.add_argument("--list-variants", action="store_true")
    args = ap.parse_args()
    if args.list_variants:
        print("\n".join(ALL_VARIANTS))
        return
    if args.variant not in ALL_VARIANTS:
        sys.exit("unknown variant %r; one of: %s" % (args.variant, ", ".join(ALL_VARIANTS)))
    VARIANT = args.variant
    SERVICE = args.service
    if V("clock-behind"):
        CLOCK_SKEW = -0.8
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    if not keys:
        alpha = string.ascii_letters + string.digits
        keys = [SERVICE + "_live_" + "".join(secrets.choice(alpha) for _ in range(32))
                for _ in range(2)]
        print("generated keys: " + ",".join(keys), file=sys.stderr)
    for i, k in enumerate(keys):
        c = Client(k, i)
        CLIENTS.append(c)
        CLIENT_BY_KEY[k] = c

    httpd = Server(("127.0.0.1", args.port), Handler)
    print("PORT %d" % httpd.server_address[1], flush=True)

    def stop(*_):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_on_stdin_eof:
        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            stop()
        threading.Thread(target=watch, daemon=True).start()
    httpd.serve_forever(poll_interval=0.2)
    httpd.server_close()


if __name__ == "__main__":
    main()
