#!/usr/bin/env python3
"""A Bank Connection Aggregation Service written from the interface specification alone.

Standard library only.  Run:

    FOREIGN_API_KEYS=acme_live_xxx,acme_live_yyy \
        python3 server.py --port 0 --variant none --service acme --exit-on-stdin-eof

Variants (see VARIANTS.md) are either deliberate violations of the specification or legal
choices where the specification is open.  `--list-variants` prints them with their kind.
"""

import argparse
import hashlib
import itertools
import json
import os
import queue
import random
import secrets
import string
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------

VARIANTS = [
    ("none", "legal"),
    # violations
    ("connected-before-accounts", "violation"),
    ("update-late-data", "violation"),
    ("update-two-step", "violation"),
    ("deleted-still-listed", "violation"),
    ("timestamps-out-of-order", "violation"),
    ("db-clock-ahead", "violation"),
    ("single-account-stale", "violation"),
    ("refused-fail-auth-applies", "violation"),
    ("silent-balance-drift", "violation"),
    ("cursor-offset-cache", "violation"),
    ("has-more-on-full-page", "violation"),
    ("second-client-clientid", "violation"),
    ("mfa-status-uppercase", "violation"),
    ("deleted-txn-id-unprefixed", "violation"),
    ("accounts-after-disconnect", "violation"),
    ("reconnect-previous-status", "violation"),
    ("resync-emits-connected", "violation"),
    # legal choices
    ("alt-errors", "legal"),
    ("long-ids", "legal"),
    ("short-ids", "legal"),
    ("rate-limit-burst", "legal"),
    ("slow-responses", "legal"),
    ("slow-consistent", "legal"),
    ("late-webhooks", "legal"),
    ("duplicate-deliveries", "legal"),
    ("out-of-order-delivery", "legal"),
    ("short-connected", "legal"),
    ("small-page-max", "legal"),
    ("oldest-first", "legal"),
]
VARIANT_NAMES = [v for v, _ in VARIANTS]

V = "none"  # the active variant, set in main()


def is_v(*names):
    return V in names


# --------------------------------------------------------------------------------------------
# Tunables that variants change
# --------------------------------------------------------------------------------------------

def step_delay():
    if is_v("slow-consistent"):
        return 0.8
    if is_v("timestamps-out-of-order"):
        return 0.15
    return 0.03


def delivery_delay():
    if is_v("late-webhooks"):
        return 5.0
    if is_v("slow-consistent"):
        return 2.5
    return 0.0


def page_default():
    return 3 if is_v("small-page-max") else 20


def page_max():
    return 5 if is_v("small-page-max") else 100


DATA_CLOCK_OFFSET_MS = 0  # db-clock-ahead sets 1500


# --------------------------------------------------------------------------------------------
# Clock and identifiers
# --------------------------------------------------------------------------------------------

_clock_lock = threading.Lock()
_clock_last = 0


def now_ms():
    """Wall clock in ms, never going backwards."""
    global _clock_last
    with _clock_lock:
        t = int(time.time() * 1000)
        if t < _clock_last:
            t = _clock_last
        _clock_last = t
        return t


def iso_ms(ms):
    dt = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def iso_s(ms):
    dt = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def data_ts():
    """Timestamp for stored data (accounts, transactions)."""
    return iso_ms(now_ms() + DATA_CLOCK_OFFSET_MS)


_ALNUM_UP = string.ascii_uppercase + string.digits
_short_counters = {}
_short_lock = threading.Lock()


def new_id(prefix):
    if is_v("long-ids"):
        body = secrets.token_hex(32)  # 64 lower-case hex characters
    elif is_v("short-ids"):
        with _short_lock:
            n = _short_counters.get(prefix, 0) + 1
            _short_counters[prefix] = n
        body = str(n)
    else:
        body = "".join(secrets.choice(_ALNUM_UP) for _ in range(26))
    return prefix + "_" + body


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------

L = threading.RLock()  # guards every piece of state below

SERVICE = "acme"
CLIENTS = []          # list of Client
CLIENT_BY_KEY = {}
CONNS = {}            # id -> Conn
TOKENS = {}           # widget token -> Conn
ACCOUNTS = {}         # id -> Account
TXNS = {}             # id -> Txn
_seq = itertools.count(1)


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.client_id = new_id("cli")
        self.webhook_url = None
        self.webhook_gen = 0
        self.deliverer = Deliverer(self)


class Conn:
    def __init__(self, client):
        self.id = new_id("conn")
        self.client = client
        self.status = "created"        # lower-case state, as in §3.1
        self.projected = "created"     # the state once every accepted action is carried out
        self.widget_token = new_id("sess")
        self.account_ids = []
        self.created_at = iso_ms(now_ms())
        self.last_event_ms = 0
        self.connected_ms = None
        self.q = queue.Queue()
        self.worker = None
        self.rng = random.Random(int(hashlib.sha256(self.id.encode()).hexdigest()[:12], 16))

    def submit(self, fn):
        self.q.put(fn)
        if self.worker is None:
            self.worker = threading.Thread(target=self._run, daemon=True)
            self.worker.start()

    def _run(self):
        while True:
            fn = self.q.get()
            try:
                fn()
            except Exception:  # pragma: no cover - logged for the implementer
                traceback.print_exc(file=sys.stderr)

    def event_ms(self, at=None):
        """Event timestamps of one connection never repeat and never go backwards."""
        with L:
            t = now_ms() if at is None else at
            if at is None and t <= self.last_event_ms:
                t = self.last_event_ms + 1
            self.last_event_ms = max(self.last_event_ms, t)
            return t


class Account:
    def __init__(self, conn, kind, rng, ts):
        self.id = new_id("acc")
        self.conn = conn
        self.seq = next(_seq)
        self.txn_ids = []
        self.stale = None          # single-account-stale: (snapshot, until)
        self.f = build_account_fields(self, kind, rng, ts)
        self.f["id"] = self.id
        self.f["connectionId"] = conn.id

    def public(self):
        return json.loads(json.dumps(self.f))


class Txn:
    def __init__(self, account, amount, description, category, date, ts):
        self.id = new_id("txn")
        self.account = account
        self.seq = next(_seq)
        self.deleted = False
        self.deleting = False
        self.f = {
            "id": self.id,
            "accountId": account.id,
            "amount": round(amount, 2),
            "currency": account.f["currency"],
            "description": description,
            "transactionDate": date,
            "category": category,
            "status": "posted",
            "createdAt": ts,
        }

    def public(self):
        return dict(self.f)


INSTITUTIONS = [
    ("ins_FIRSTACME01", "First Acme Bank"),
    ("ins_NORTHRIVER2", "North River Credit Union"),
    ("ins_HARBORTRUST", "Harbor Trust"),
]

ACCOUNT_PLAN = [
    # kind, name, currency, number of transactions
    ("checking", "Everyday Checking", "USD", 47),
    ("savings", "High-Yield Savings", "USD", 9),
    ("credit_card", "Platinum Card", "USD", 31),
    ("brokerage", "Brokerage Account", "USD", 6),
    ("pension", "Retirement Plan", "EUR", 3),
]

DEBIT_TEMPLATES = [
    ("Grocery Mart", "groceries"),
    ("Corner Cafe", "dining"),
    ("City Transit", "transport"),
    ("Power & Light Co", "utilities"),
    ("Online Shop", "shopping"),
    ("Pharmacy Plus", "health"),
    ("Fuel Station", "transport"),
]
CREDIT_TEMPLATES = [
    ("Payroll ACME Corp", "income"),
    ("Refund Online Shop", "shopping"),
    ("Transfer from Savings", "transfer"),
]


def build_account_fields(acct, kind, rng, ts):
    inst_id, inst_name = INSTITUTIONS[rng.randrange(len(INSTITUTIONS))]
    name, currency = None, None
    for k, n, c, _ in ACCOUNT_PLAN:
        if k == kind:
            name, currency = n, c
    f = {
        "id": None,
        "connectionId": None,
        "name": name,
        "type": kind,
        "currency": currency,
        "balance": 0.0,
        "availableBalance": 0.0,
        "accountNumber": "****%04d" % rng.randrange(10000),
        "createdAt": ts,
        "lastSyncedAt": ts,
        "institution": {"id": inst_id, "name": inst_name, "logo": None},
    }
    if kind == "checking":
        f["balance"] = round(rng.uniform(800, 6000), 2)
        f["availableBalance"] = f["balance"]
    elif kind == "savings":
        f["balance"] = round(rng.uniform(5000, 40000), 2)
        f["availableBalance"] = f["balance"]
    elif kind == "credit_card":
        limit = 5000.0
        f["balance"] = -round(rng.uniform(100, 2000), 2)
        f["availableBalance"] = round(limit + f["balance"], 2)
        f["creditLimit"] = {"amount": limit, "currency": currency}
        f["currencyBalances"] = [
            {"currency": "EUR", "balance": -round(rng.uniform(10, 300), 2)},
            {"currency": "GBP", "balance": -round(rng.uniform(5, 100), 2)},
        ]
    elif kind in ("brokerage", "pension"):
        positions = []
        total = 0.0
        for sym, nm in (("VTI", "Vanguard Total Stock Market ETF"),
                        ("BND", "Vanguard Total Bond Market ETF"),
                        ("AAPL", "Apple Inc.")):
            qty = round(rng.uniform(1, 50), 3)
            price = round(rng.uniform(50, 300), 2)
            value = round(qty * price, 2)
            total += value
            positions.append({"symbol": sym, "name": nm, "quantity": qty, "price": price,
                              "marketValue": value, "currency": currency})
        cash = round(rng.uniform(100, 2000), 2)
        f["balance"] = round(total + cash, 2)
        f["availableBalance"] = cash
        f["positions"] = positions
    return f


def today_str(days_ago=0):
    return (datetime.now(timezone.utc) - timedelta(days=days_ago)).strftime("%Y-%m-%d")


def make_history(acct, count, rng):
    """Past transactions of a freshly linked account."""
    ts = data_ts()
    out = []
    kind = acct.f["type"]
    for i in range(count):
        days_ago = 1 + (i * 90) // max(count, 1)
        if kind in ("brokerage", "pension"):
            if i % 2 == 0:
                desc, cat, amt = "Dividend VTI", "investment", rng.uniform(5, 60)
            else:
                desc, cat, amt = "Contribution", "transfer", rng.uniform(100, 500)
        elif kind == "savings":
            if i % 3 == 0:
                desc, cat, amt = "Transfer to Checking", "transfer", -rng.uniform(50, 500)
            else:
                desc, cat, amt = "Interest payment", "interest", rng.uniform(1, 30)
        else:
            if i % 9 == 4 and kind == "checking":
                desc, cat = CREDIT_TEMPLATES[rng.randrange(len(CREDIT_TEMPLATES))]
                amt = rng.uniform(200, 3000)
            else:
                desc, cat = DEBIT_TEMPLATES[rng.randrange(len(DEBIT_TEMPLATES))]
                amt = -rng.uniform(2, 180)
        t = Txn(acct, amt, desc, cat, today_str(days_ago), ts)
        out.append(t)
    return out


def ensure_accounts(conn):
    """Create the accounts of a connection (once: a reconnect keeps the same accounts)."""
    with L:
        if conn.account_ids:
            return
        ts = data_ts()
        for kind, _, _, count in ACCOUNT_PLAN:
            a = Account(conn, kind, conn.rng, ts)
            ACCOUNTS[a.id] = a
            conn.account_ids.append(a.id)
            for t in make_history(a, count, conn.rng):
                TXNS[t.id] = t
                a.txn_ids.append(t.id)


# --------------------------------------------------------------------------------------------
# Events and webhook delivery
# --------------------------------------------------------------------------------------------

class Deliverer:
    """One delivery queue per client: events go out in the order they were created."""

    def __init__(self, client):
        self.client = client
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def enqueue(self, payload):
        with L:
            url = self.client.webhook_url
            gen = self.client.webhook_gen
        if not url:
            return  # nobody to deliver to: §6.3 leaves registration open
        due = time.time() + delivery_delay()
        self.q.put((due, gen, payload))

    def _still_registered(self, gen):
        with L:
            return self.client.webhook_gen == gen and self.client.webhook_url

    def _post(self, gen, payload):
        body = json.dumps(payload).encode()
        backoff = [0.5, 1.0, 2.0, 4.0]
        for attempt in range(len(backoff) + 1):
            url = self._still_registered(gen)
            if not url:
                return
            try:
                req = urllib.request.Request(url, data=body, method="POST", headers={
                    "Content-Type": "application/json",
                    "User-Agent": "%s-webhooks/1.0" % SERVICE,
                })
                with urllib.request.urlopen(req, timeout=5) as r:
                    r.read()
                    if 200 <= r.status < 300:
                        return
            except urllib.error.HTTPError as e:
                if e.code in (400, 404, 410, 413):
                    return
            except Exception:
                pass
            if attempt < len(backoff):
                time.sleep(backoff[attempt])

    def _run(self):
        while True:
            item = self.q.get()
            batch = [item]
            if is_v("out-of-order-delivery"):
                # collect a window of events and send them newest first
                end = time.time() + 1.5
                while True:
                    left = end - time.time()
                    if left <= 0:
                        break
                    try:
                        batch.append(self.q.get(timeout=left))
                    except queue.Empty:
                        break
                batch.reverse()
            for due, gen, payload in batch:
                wait = due - time.time()
                if wait > 0:
                    time.sleep(wait)
                try:
                    self._post(gen, payload)
                    if is_v("duplicate-deliveries"):
                        time.sleep(0.3)
                        self._post(gen, payload)
                except Exception:
                    traceback.print_exc(file=sys.stderr)


def emit(conn, etype, extra, at_ms=None):
    """Build an event (§6.1, §6.2) and queue it for the client's webhook address."""
    with L:
        ms = conn.event_ms(at_ms)
        ts = iso_ms(ms)
        eid = new_id("evt")
        client_id = conn.client.client_id
        if is_v("second-client-clientid"):
            client_id = CLIENTS[0].client_id
        data = {
            "eventId": eid,
            "type": etype,
            "occurredAt": ts,
            "clientId": client_id,
            "connectionId": conn.id,
        }
        data.update(extra)
        payload = {"id": eid, "type": etype, "created_at": ts, "data": data}
        if is_v("short-connected") and etype == "connection.connected":
            payload = {"event": etype, "connectionId": conn.id, "timestamp": iso_s(ms)}
        conn.client.deliverer.enqueue(payload)


def transition(conn, new_state, error=None, prev_override=None, at_ms=None):
    with L:
        prev = conn.status
        conn.status = new_state
        if new_state == "connected":
            conn.connected_ms = time.time()
        shown_prev = prev if prev_override is None else prev_override
        emit(conn, "connection." + new_state,
             {"previousStatus": shown_prev, "error": error}, at_ms=at_ms)


# --------------------------------------------------------------------------------------------
# Driver actions (carried out on the connection's own worker, in the order accepted)
# --------------------------------------------------------------------------------------------

USER_ACTIONS = {"connect": "connected", "fail_auth": "failed_auth", "require_mfa": "mfa_required"}


class Refused(Exception):
    pass


class Cannot(Exception):
    pass


def user_flow(conn, target):
    """credentials_submitted -> verifying -> target, as a person in the widget causes it."""
    d = step_delay()
    stamp = None
    if target == "connected" and is_v("timestamps-out-of-order"):
        # the sync job takes its timestamp when it starts and uses it for the final event
        stamp = now_ms()
    with L:
        prev = conn.status
    override = None
    if is_v("reconnect-previous-status") and prev != "created":
        override = "created"
    transition(conn, "credentials_submitted", prev_override=override)
    time.sleep(d)
    transition(conn, "verifying")
    time.sleep(d)
    if target == "connected":
        if is_v("connected-before-accounts"):
            with L:
                had = bool(conn.account_ids)
            transition(conn, "connected")
            if not had:
                time.sleep(2.0)
                ensure_accounts(conn)
            return
        ensure_accounts(conn)
        transition(conn, "connected", at_ms=stamp)
    elif target == "failed_auth":
        transition(conn, "failed_auth",
                   error={"code": "invalid_credentials",
                          "message": "The bank rejected the credentials."})
    elif target == "mfa_required":
        override = "VERIFYING" if is_v("mfa-status-uppercase") else None
        transition(conn, "mfa_required", prev_override=override)


def apply_update(acct, amount, desc, cat, add_balance=True, add_txn=True):
    with L:
        f = acct.f
        ts = data_ts()
        if add_balance:
            if is_v("single-account-stale") and (acct.stale is None
                                                 or time.time() >= acct.stale[1]):
                # the single-account read goes through a cache filled before the write
                acct.stale = (acct.public(), time.time() + 3.0)
            f["balance"] = round(f["balance"] + amount, 2)
            if f["type"] == "credit_card":
                f["availableBalance"] = round(f["creditLimit"]["amount"] + f["balance"], 2)
            else:
                f["availableBalance"] = round(f["availableBalance"] + amount, 2)
            f["lastSyncedAt"] = ts
            if is_v("single-account-stale"):
                snap, _ = acct.stale
                acct.stale = (snap, time.time() + 3.0)
        if add_txn:
            t = Txn(acct, amount, desc, cat, today_str(0), ts)
            TXNS[t.id] = t
            acct.txn_ids.append(t.id)


def do_update(conn, acct):
    rng = conn.rng
    kind = acct.f["type"]
    if kind in ("savings",):
        amount, desc, cat = round(rng.uniform(1, 25), 2), "Interest payment", "interest"
    elif kind in ("brokerage", "pension"):
        amount, desc, cat = round(rng.uniform(5, 60), 2), "Dividend BND", "investment"
    else:
        d, cat = DEBIT_TEMPLATES[rng.randrange(len(DEBIT_TEMPLATES))]
        amount, desc = -round(rng.uniform(3, 150), 2), d
    extra = {"accountId": acct.id}
    if is_v("resync-emits-connected"):
        # the re-sync runs through the connection pipeline and announces "connected" again
        emit(conn, "connection.connected", {"previousStatus": "connected", "error": None})
    if is_v("update-late-data"):
        emit(conn, "accounts.updated", extra)
        time.sleep(2.0)
        apply_update(acct, amount, desc, cat)
    elif is_v("update-two-step"):
        apply_update(acct, amount, desc, cat, add_txn=False)
        emit(conn, "accounts.updated", extra)
        time.sleep(2.5)
        apply_update(acct, amount, desc, cat, add_balance=False)
    else:
        apply_update(acct, amount, desc, cat)
        emit(conn, "accounts.updated", extra)


def do_delete(conn, txn):
    tid = txn.id
    if is_v("deleted-txn-id-unprefixed"):
        tid = tid.split("_", 1)[1]
    extra = {"accountId": txn.account.id, "transactionId": tid}
    if is_v("deleted-still-listed"):
        emit(conn, "transaction.deleted", extra)
        time.sleep(2.0)
        with L:
            txn.deleted = True
        return
    with L:
        txn.deleted = True
    emit(conn, "transaction.deleted", extra)


def accept_action(body):
    """Decide, from the projected state, whether to accept; queue the work.  Returns a dict."""
    action = body.get("action")
    if action == "register_webhook":
        with L:
            done = []
            for key_field, url_field in (("api_key", "webhook_url"),
                                         ("second_api_key", "second_webhook_url")):
                key, url = body.get(key_field), body.get(url_field)
                if key and url:
                    c = CLIENT_BY_KEY.get(key)
                    if c is None:
                        raise Cannot("unknown API key in %s" % key_field)
                    c.webhook_url = url
                    c.webhook_gen += 1
                    done.append(c.client_id)
        return {"webhooks": "per-client", "registered": len(done)}
    if action == "unregister_webhook":
        with L:
            for key_field in ("api_key", "second_api_key"):
                c = CLIENT_BY_KEY.get(body.get(key_field) or "")
                if c:
                    c.webhook_url = None
                    c.webhook_gen += 1
        return {"unregistered": True}

    cid = body.get("connection_id")
    conn = None
    with L:
        if cid:
            conn = CONNS.get(cid)
        if conn is None and body.get("widget_token"):
            conn = TOKENS.get(body.get("widget_token"))
        if conn is None:
            raise LookupError("no such connection")
        st = conn.projected

        if action in USER_ACTIONS:
            target = USER_ACTIONS[action]
            if st == "connected":
                if action == "fail_auth" and is_v("refused-fail-auth-applies"):
                    # the refusal is answered, but the credential check still runs and lands
                    conn.projected = "failed_auth"

                    def silent():
                        with L:
                            conn.status = "failed_auth"
                    conn.submit(silent)
                raise Refused("connection is already connected")
            conn.projected = target
            conn.submit(lambda: user_flow(conn, target))
            return {"accepted": action}
        if action == "error":
            if st in ("error", "disconnected"):
                raise Refused("connection is %s" % st)
            conn.projected = "error"
            conn.submit(lambda: transition(conn, "error", error={
                "code": "institution_error",
                "message": "An unexpected error occurred while talking to the bank."}))
            return {"accepted": action}
        if action == "disconnect":
            if st == "disconnected":
                raise Refused("connection is already disconnected")
            conn.projected = "disconnected"
            conn.submit(lambda: transition(conn, "disconnected"))
            return {"accepted": action}
        if action == "update_accounts":
            if st != "connected":
                raise Refused("connection is not connected")
            if not conn.account_ids:
                # accounts not yet created (connect still in progress): pick the first kind later
                aid = body.get("account_id")

                def later():
                    with L:
                        ids = conn.account_ids
                        a = ACCOUNTS.get(aid) if aid in ids else (ACCOUNTS[ids[0]] if ids else None)
                    if a is not None:
                        do_update(conn, a)
                conn.submit(later)
                return {"accepted": action}
            aid = body.get("account_id") or conn.account_ids[0]
            if aid not in conn.account_ids:
                raise Refused("account does not belong to this connection")
            acct = ACCOUNTS[aid]
            conn.submit(lambda: do_update(conn, acct))
            return {"accepted": action, "accountId": aid}
        if action == "delete_transaction":
            if st != "connected":
                raise Refused("connection is not connected")
            tid = body.get("transaction_id")
            aid = body.get("account_id")
            txn = None
            if tid:
                txn = TXNS.get(tid)
                if txn is None or txn.account.conn is not conn:
                    raise Refused("transaction does not belong to this connection")
                if aid and txn.account.id != aid:
                    raise Refused("transaction does not belong to that account")
                if txn.deleted or txn.deleting:
                    raise Refused("transaction already deleted")
            else:
                if aid and aid not in conn.account_ids:
                    raise Refused("account does not belong to this connection")
                cands = [aid] if aid else list(conn.account_ids)
                for a_id in cands:
                    live = [TXNS[t] for t in ACCOUNTS[a_id].txn_ids
                            if not TXNS[t].deleted and not TXNS[t].deleting]
                    if live:
                        txn = sort_txns(live)[0]
                        break
                if txn is None:
                    raise Refused("no transaction to delete")
            txn.deleting = True
            conn.submit(lambda: do_delete(conn, txn))
            return {"accepted": action, "transactionId": txn.id}
    raise Cannot("unknown action %r" % action)


# --------------------------------------------------------------------------------------------
# Background drift (silent-balance-drift)
# --------------------------------------------------------------------------------------------

def drift_loop():
    while True:
        time.sleep(2.0)
        with L:
            for conn in list(CONNS.values()):
                if conn.status != "connected" or not conn.account_ids:
                    continue
                a = ACCOUNTS[conn.account_ids[0]]
                # pending card authorisations settle in the background: no event is sent
                a.f["balance"] = round(a.f["balance"] - 0.37, 2)
                a.f["availableBalance"] = round(a.f["availableBalance"] - 0.37, 2)


# --------------------------------------------------------------------------------------------
# Transactions listing
# --------------------------------------------------------------------------------------------

def sort_txns(txns):
    asc = is_v("oldest-first")
    return sorted(txns, key=lambda t: (t.f["transactionDate"], t.f["createdAt"], t.seq),
                  reverse=not asc)


CURSOR_CACHE = {}  # cursor-offset-cache: (account id, txn id) -> offset in the visible list


def list_transactions(acct, limit, starting_after):
    with L:
        everything = sort_txns([TXNS[t] for t in acct.txn_ids])
        visible = [t for t in everything if not t.deleted]
        if starting_after is None:
            start = 0
        elif is_v("cursor-offset-cache") and (acct.id, starting_after) in CURSOR_CACHE:
            start = CURSOR_CACHE[(acct.id, starting_after)]
        else:
            idx = None
            for i, t in enumerate(everything):
                if t.id == starting_after:
                    idx = i
                    break
            if idx is None:
                return None
            # items after the cursor item (which may itself have been deleted since)
            after_ids = {t.id for t in everything[idx + 1:]}
            start = len(visible)
            for i, t in enumerate(visible):
                if t.id in after_ids:
                    start = i
                    break
        page = visible[start:start + limit]
        if is_v("has-more-on-full-page"):
            has_more = len(page) == limit
        else:
            has_more = start + len(page) < len(visible)
        out = {"data": [t.public() for t in page], "has_more": has_more}
        if has_more and page:
            out["next_cursor"] = page[-1].id
            if is_v("cursor-offset-cache"):
                CURSOR_CACHE[(acct.id, page[-1].id)] = start + len(page)
        return out


# --------------------------------------------------------------------------------------------
# Widget
# --------------------------------------------------------------------------------------------

def global_name(service):
    parts = [p for p in service.replace("_", "-").split("-") if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Connect"


WIDGET_JS = r"""/* __NAME__ widget: opens a bank connection session with a widget token. */
(function (global) {
  "use strict";
  var script = (typeof document !== "undefined") ? document.currentScript : null;
  var BASE = "__ORIGIN__";
  try { if (script && script.src) { BASE = new URL(script.src).origin; } } catch (e) {}

  function el(tag, text, style) {
    var n = document.createElement(tag);
    if (text) { n.textContent = text; }
    if (style) { n.setAttribute("style", style); }
    return n;
  }

  function open(a, b, c) {
    var opts = (a !== null && typeof a === "object") ? a : { token: a, connectionId: b, onSuccess: c };
    var token = opts.token, connectionId = opts.connectionId, onSuccess = opts.onSuccess;
    if (typeof token !== "string" || token.length === 0) {
      throw new TypeError("__NAME__.open: a widget token is required");
    }
    var done = false, timer = null, polls = 0;
    var host = document.body || document.documentElement;
    var root = el("div", null, "position:fixed;inset:0;background:rgba(0,0,0,.4);" +
      "display:flex;align-items:center;justify-content:center;font-family:sans-serif");
    var box = el("div", null, "background:#fff;padding:24px;border-radius:8px;min-width:280px");
    var title = el("h2", "Connect your bank");
    var status = el("p", "Loading\u2026");
    box.appendChild(title); box.appendChild(status); root.appendChild(box);
    host.appendChild(root);

    function sessionUrl() {
      return BASE + "/widget/session?token=" + encodeURIComponent(token);
    }
    function close() {
      done = true;
      if (timer) { clearTimeout(timer); timer = null; }
      if (root.parentNode) { root.parentNode.removeChild(root); }
    }
    function poll() {
      if (done) { return; }
      polls += 1;
      fetch(sessionUrl(), { method: "GET", credentials: "omit" })
        .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
        .then(function (res) {
          if (done) { return; }
          if (!res.ok) { status.textContent = "This session is no longer valid."; return; }
          var s = res.j;
          if (s.status === "CONNECTED") {
            status.textContent = "Connected to " + (s.institution ? s.institution.name : "your bank") + ".";
            done = true;
            if (typeof onSuccess === "function") {
              onSuccess({ connectionId: s.connectionId, institution: s.institution || null,
                          accounts: s.accountCount || 0 });
            }
            return;
          }
          status.textContent = "Waiting for your bank\u2026 (" + s.status.toLowerCase() + ")";
          if (polls < 60) { timer = setTimeout(poll, 2000); }
        })
        .catch(function () { if (!done && polls < 60) { timer = setTimeout(poll, 2000); } });
    }
    poll();
    return { close: close, connectionId: connectionId };
  }

  global.__NAME__ = { open: open, version: "1.0.0" };
})(typeof window !== "undefined" ? window : this);
"""


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

RATE = {}  # rate-limit-burst: key -> list of request times
RATE_LOCK = threading.Lock()
RATE_MAX = 25


class ApiError(Exception):
    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


def err_status(kind):
    """HTTP status per error kind; alt-errors picks others the spec equally allows (§7)."""
    alt = is_v("alt-errors")
    return {
        "missing_key": 401,
        "invalid_key": 403 if alt else 401,
        "not_found": 404,
        "not_connected": 422 if alt else 409,
        "bad_param": 422 if alt else 400,
        "method": 405,
    }[kind]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAggregation/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet
        pass

    # ---------------------------------------------------------------- plumbing
    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, obj=None, ctype="application/json", headers=None, raw=None):
        if raw is not None:
            data = raw
        elif obj is None:
            data = b""
        else:
            data = json.dumps(obj).encode()
        self.send_response(status)
        if data or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, e):
        if is_v("alt-errors"):
            if e.status == 404:
                return self._send(404, raw=b"Not Found\n", ctype="text/plain; charset=utf-8",
                                  headers=e.headers)
            obj = {"message": e.message, "status": e.status}
        else:
            obj = {"error": {"code": e.code, "message": e.message}}
        self._send(e.status, obj, headers=e.headers)

    def _cors(self):
        return {"Access-Control-Allow-Origin": "*",
                "Access-Control-Allow-Methods": "GET, OPTIONS",
                "Access-Control-Allow-Headers": "Content-Type"}

    # ---------------------------------------------------------------- dispatch
    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")

    def _dispatch(self, method):
        try:
            body = self._body()
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            if path == "/__admin/action":
                return self._admin(method, body)
            if path.startswith("/widget/"):
                return self._widget(method, path, query)
            if path.startswith("/v1/") or path == "/v1":
                return self._api(method, path, query)
            raise ApiError(404, "not_found", "No such route.")
        except ApiError as e:
            self._send_error(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:
            traceback.print_exc(file=sys.stderr)
            try:
                self._send(500, {"error": {"code": "internal_error", "message": "Internal error."}})
            except Exception:
                pass

    # ---------------------------------------------------------------- admin hook
    def _admin(self, method, raw):
        if method != "POST":
            raise ApiError(405, "method_not_allowed", "POST only.", {"Allow": "POST"})
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, {"error": "body is not JSON"})
        try:
            res = accept_action(body)
            return self._send(200, dict(res, ok=True))
        except Refused as e:
            return self._send(409, {"ok": False, "refused": str(e)})
        except Cannot as e:
            return self._send(501, {"ok": False, "cannot": str(e)})
        except LookupError as e:
            return self._send(404, {"ok": False, "error": str(e)})

    # ---------------------------------------------------------------- widget
    def _widget(self, method, path, query):
        cors = self._cors()
        if method == "OPTIONS":
            return self._send(204, None, headers=cors)
        if path == "/widget/%s-connect.js" % SERVICE:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "GET only.", dict(cors, Allow="GET"))
            host = self.headers.get("Host") or "127.0.0.1"
            js = (WIDGET_JS.replace("__NAME__", global_name(SERVICE))
                  .replace("__ORIGIN__", "http://" + host))
            return self._send(200, raw=js.encode(), ctype="application/javascript; charset=utf-8",
                              headers=cors)
        if path == "/widget/session":
            token = (query.get("token") or [""])[0]
            with L:
                conn = TOKENS.get(token)
                if conn is None:
                    raise ApiError(401, "invalid_token", "Unknown or expired widget token.", cors)
                info = {"connectionId": conn.id, "status": conn.status.upper(),
                        "accountCount": len(conn.account_ids)}
                if conn.account_ids:
                    info["institution"] = ACCOUNTS[conn.account_ids[0]].f["institution"]
            return self._send(200, info, headers=cors)
        raise ApiError(404, "not_found", "No such widget resource.", cors)

    # ---------------------------------------------------------------- API
    def _auth(self):
        h = self.headers.get("Authorization")
        if not h:
            raise ApiError(err_status("missing_key"), "missing_api_key",
                           "The Authorization header is missing.",
                           {"WWW-Authenticate": "Bearer"})
        parts = h.split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":
            raise ApiError(err_status("invalid_key"), "invalid_api_key",
                           "The Authorization header must be 'Bearer <API key>'.",
                           {"WWW-Authenticate": "Bearer"})
        c = CLIENT_BY_KEY.get(parts[1].strip())
        if c is None:
            raise ApiError(err_status("invalid_key"), "invalid_api_key", "The API key is not valid.",
                           {"WWW-Authenticate": "Bearer error=\"invalid_token\""})
        return c

    def _rate(self, who):
        now = time.time()
        with RATE_LOCK:
            lst = [t for t in RATE.get(who, []) if now - t < 1.0]
            if len(lst) >= RATE_MAX:
                RATE[who] = lst
                raise ApiError(429, "rate_limited", "Too many requests; retry later.",
                               {"Retry-After": "1"})
            lst.append(now)
            RATE[who] = lst

    def _api(self, method, path, query):
        if is_v("slow-responses", "slow-consistent"):
            h = int(hashlib.md5(path.encode()).hexdigest()[:4], 16)
            time.sleep(0.1 + (h % 100) / 1000.0 if is_v("slow-responses") else 0.12)
        if is_v("rate-limit-burst"):
            self._rate(self.headers.get("Authorization") or self.client_address[0])
        client = self._auth()
        segs = [urllib.parse.unquote(s) for s in path.split("/")[1:]]
        # segs[0] == "v1"
        if segs == ["v1", "connections"]:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", "Use POST.", {"Allow": "POST"})
            return self._create(client)
        if len(segs) == 4 and segs[1] == "connections" and segs[3] == "accounts" and segs[2]:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "Use GET.", {"Allow": "GET"})
            return self._conn_accounts(client, segs[2])
        if len(segs) == 3 and segs[1] == "accounts" and segs[2]:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "Use GET.", {"Allow": "GET"})
            return self._account(client, segs[2])
        if len(segs) == 4 and segs[1] == "accounts" and segs[3] == "transactions" and segs[2]:
            if method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", "Use GET.", {"Allow": "GET"})
            return self._transactions(client, segs[2], query)
        raise ApiError(404, "not_found", "No such route.")

    def _create(self, client):
        with L:
            conn = Conn(client)
            CONNS[conn.id] = conn
            TOKENS[conn.widget_token] = conn
            emit(conn, "connection.created", {"previousStatus": "none", "error": None})
            out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.widget_token}
        status = 200 if is_v("alt-errors") else 201
        return self._send(status, out)

    def _own_conn(self, client, cid):
        conn = CONNS.get(cid)
        if conn is None or conn.client is not client:
            raise ApiError(404, "connection_not_found", "No such connection.")
        return conn

    def _own_account(self, client, aid):
        a = ACCOUNTS.get(aid)
        if a is None or a.conn.client is not client:
            raise ApiError(404, "account_not_found", "No such account.")
        return a

    def _conn_accounts(self, client, cid):
        with L:
            conn = self._own_conn(client, cid)
            ok = conn.status == "connected"
            if is_v("accounts-after-disconnect") and conn.status == "disconnected" \
                    and conn.account_ids:
                ok = True  # availability was checked as "has accounts" on this path
            if not ok:
                raise ApiError(err_status("not_connected"), "connection_not_connected",
                               "The connection is %s; accounts are available only when it is "
                               "CONNECTED." % conn.status.upper())
            out = [ACCOUNTS[a].public() for a in conn.account_ids]
        return self._send(200, out)

    def _account(self, client, aid):
        with L:
            a = self._own_account(client, aid)
            if a.stale is not None:
                snap, until = a.stale
                if time.time() < until:
                    return self._send(200, snap)
                a.stale = None
            out = a.public()
        return self._send(200, out)

    def _transactions(self, client, aid, query):
        limit_s = query.get("limit", [None])[0]
        cursor = query.get("starting_after", [None])[0]
        if limit_s is None or limit_s == "":
            limit = page_default()
        else:
            if not limit_s.isdigit() or int(limit_s) < 1:
                raise ApiError(err_status("bad_param"), "invalid_limit",
                               "limit must be a positive integer.")
            limit = min(int(limit_s), page_max())
        if cursor == "":
            cursor = None
        with L:
            a = self._own_account(client, aid)
            out = list_transactions(a, limit, cursor)
        if out is None:
            raise ApiError(err_status("bad_param"), "invalid_cursor",
                           "starting_after does not name a transaction of this account.")
        return self._send(200, out)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True


def main():
    global V, SERVICE, DATA_CLOCK_OFFSET_MS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    ap.add_argument("--list-variants", action="store_true")
    args = ap.parse_args()
    if args.list_variants:
        for name, kind in VARIANTS:
            print("%s %s" % (name, kind))
        return 0
    if args.variant not in VARIANT_NAMES:
        print("unknown variant %r; --list-variants lists them" % args.variant, file=sys.stderr)
        return 2
    V = args.variant
    SERVICE = args.service
    if V == "db-clock-ahead":
        DATA_CLOCK_OFFSET_MS = 1500
    keys = [k.strip() for k in (os.environ.get("FOREIGN_API_KEYS") or "").split(",") if k.strip()]
    if not keys:
        print("FOREIGN_API_KEYS is empty", file=sys.stderr)
        return 2
    for i, k in enumerate(keys):
        c = Client(k, i)
        CLIENTS.append(c)
        CLIENT_BY_KEY[k] = c
    if V == "silent-balance-drift":
        threading.Thread(target=drift_loop, daemon=True).start()
    srv = Server((args.host, args.port), Handler)
    port = srv.server_address[1]
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    if args.exit_on_stdin_eof:
        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
