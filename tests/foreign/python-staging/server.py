#!/usr/bin/env python3
"""Staging server for the Bank Connection Aggregation Service (written from the spec alone).

Standard library only.  One process holds an in-memory store for two clients (API keys from
FOREIGN_API_KEYS), runs each connection's work in a background worker (30-80 ms per step), and
delivers webhook events per client from an outbox with retries.

    python3 server.py --port 0 --variant NAME --service SERVICE --exit-on-stdin-eof

Prints "PORT <n>" once listening.  See VARIANTS.md for --variant.
"""

import argparse
import collections
import datetime
import hashlib
import heapq
import hmac
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
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VIOLATIONS = [
    "accounts-during-verifying",
    "accounts-once-connected",
    "connected-event-early",
    "connected-before-accounts",
    "stale-previous-status",
    "skipped-verifying-event",
    "noop-disconnect-event",
    "refused-connect-applies",
    "delete-not-applied",
    "update-event-early",
    "cross-client-reads",
    "single-webhook-endpoint",
    "pagination-peek-cursor",
    "has-more-full-page",
    "naive-timestamps",
    "silent-resync",
]
LEGAL = [
    "alt-errors",
    "slow-webhooks",
    "duplicate-deliveries",
    "shuffled-deliveries",
    "small-pages",
    "extra-fields",
    "slow-verification",
    "strict-transitions",
    "short-connected-form",
    "oldest-first",
    "opaque-ids",
    "account-reads-any-state",
]
VARIANTS = ["none"] + VIOLATIONS + LEGAL

VARIANT = "none"
TRACE = os.environ.get("FOREIGN_TRACE")
EMIT_T = {}
SERVICE = "acme"


def V(name):
    return VARIANT == name


def log(*args):
    print("[server]", *args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# identifiers and time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _ulid():
    t = int(time.time() * 1000)
    r = int.from_bytes(secrets.token_bytes(10), "big")
    n = (t << 80) | r
    out = []
    for _ in range(26):
        out.append(CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))


def new_id(prefix):
    if V("opaque-ids"):
        return prefix + "_" + uuid.uuid4().hex
    return prefix + "_" + _ulid()


def rand_alnum(n):
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


def iso(t=None):
    """ISO 8601 UTC with milliseconds."""
    if t is None:
        t = time.time()
    if V("naive-timestamps"):
        # the classic: datetime.now().isoformat() -- local, naive, microseconds
        return datetime.datetime.fromtimestamp(t).isoformat()
    ms = int((t - int(t)) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % ms


def iso_seconds(t=None):
    if t is None:
        t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def step_sleep(lo=0.03, hi=0.08):
    time.sleep(random.uniform(lo, hi))


# ---------------------------------------------------------------------------------------------
# the store

INSTITUTIONS = [
    ("First Meridian Bank", "USD"),
    ("Northwind Savings", "USD"),
    ("Banco Solar", "EUR"),
    ("Kestrel Building Society", "GBP"),
    ("Harbor Credit Union", "USD"),
]
CATEGORIES_DEBIT = ["groceries", "dining", "transport", "utilities", "shopping", "entertainment", "fees", "travel"]
DESCRIPTIONS = {
    "groceries": ["Whole Grain Market", "FreshMart #112", "Corner Grocer"],
    "dining": ["Luigi's Trattoria", "Bean There Coffee", "Noodle Bar"],
    "transport": ["Metro Transit", "City Cab", "Fuel Stop 44"],
    "utilities": ["Power & Light Co", "AquaWorks Water", "FiberNet Internet"],
    "shopping": ["Hardware Depot", "Bookhaven", "Online Marketplace"],
    "entertainment": ["Cinema 8", "StreamFlix", "Concert Hall"],
    "fees": ["Monthly maintenance fee", "Foreign transaction fee"],
    "travel": ["SkyJet Airlines", "Harbor Hotel"],
    "income": ["Payroll ACME Corp", "Interest payment", "Refund"],
    "transfer": ["Transfer from savings", "Transfer to checking"],
    "payment": ["Card payment - thank you"],
}


class Client:
    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.id = new_id("cli")
        self.webhook_url = None
        self.webhook_secret = None
        self.outbox = None
        self.events = []  # every event ever emitted for this client


class Connection:
    def __init__(self, client):
        self.id = new_id("conn")
        self.client = client
        self.status = "created"  # stored state, lower case inside
        self.projected = "created"  # state after every accepted job has run
        self.created_at = time.time()
        self.token = "sess_" + rand_alnum(32)
        self.token_expires = self.created_at + 30 * 60
        self.account_ids = []
        self.linked = False
        self.linking = False
        self.institution = None
        self.jobs = collections.deque()
        self.worker_running = False
        self.last_error = None


class Account:
    def __init__(self, conn, **kw):
        self.id = new_id("acc")
        self.conn = conn
        self.__dict__.update(kw)
        self.txn_ids = []


class Txn:
    def __init__(self, account, amount, description, category, date, created_at):
        self.id = new_id("txn")
        self.account = account
        self.amount = amount
        self.description = description
        self.category = category
        self.date = date
        self.created_at = created_at
        self.deleted = False
        self.delete_pending = False


class Store:
    def __init__(self, keys):
        self.lock = threading.RLock()
        self.clients = [Client(k, i) for i, k in enumerate(keys)]
        self.by_key = {c.key: c for c in self.clients}
        self.connections = {}
        self.tokens = {}
        self.accounts = {}
        self.txns = {}
        self.global_webhook_url = None  # single-webhook-endpoint

    def client_for_key(self, key):
        if not key:
            return None
        for c in self.clients:
            if hmac.compare_digest(c.key.encode(), key.encode()):
                return c
        return None


STORE = None


# ---------------------------------------------------------------------------------------------
# data generation

def _money(x):
    return round(x, 2)


def _gen_txns(acc, n, kind, now):
    today = datetime.datetime.utcfromtimestamp(now).date()
    out = []
    for _ in range(n):
        d = today - datetime.timedelta(days=random.randint(1, 120))
        if kind == "credit_card":
            if random.random() < 0.12:
                cat, amount = "payment", _money(random.uniform(100, 900))
            else:
                cat = random.choice(CATEGORIES_DEBIT)
                amount = -_money(random.uniform(3, 250))
        elif kind == "savings":
            if random.random() < 0.6:
                cat, amount = "income", _money(random.uniform(1, 60))
            else:
                cat, amount = "transfer", -_money(random.uniform(50, 500))
        elif kind in ("brokerage", "pension"):
            cat, amount = "transfer", _money(random.uniform(100, 1000))
        else:
            if random.random() < 0.15:
                cat, amount = "income", _money(random.uniform(200, 3200))
            else:
                cat = random.choice(CATEGORIES_DEBIT)
                amount = -_money(random.uniform(2, 400))
        t = Txn(acc, amount, random.choice(DESCRIPTIONS[cat]), cat, d.isoformat(), now)
        out.append(t)
    return out


def link_accounts(conn):
    """Create the accounts and transactions the bank returned.  Caller holds the lock."""
    if conn.linked:
        return
    now = time.time()
    inst_name, cur = random.choice(INSTITUTIONS)
    conn.institution = {"id": "ins_" + _ulid()[:12], "name": inst_name, "logo": None}

    def last4():
        return "****" + "".join(random.choice(string.digits) for _ in range(4))

    specs = [
        ("checking", "Everyday Checking", random.randint(30, 70)),
        ("savings", "High Yield Savings", random.randint(2, 9)),
        ("credit_card", "Rewards Visa", random.randint(8, 40)),
    ]
    if random.random() < 0.6:
        specs.append(("brokerage", "Self-Directed Brokerage", random.randint(0, 4)))
    if random.random() < 0.4:
        specs.append(("pension", "Retirement 401(k)", random.randint(0, 2)))
    for kind, name, ntx in specs:
        extra = {}
        if kind == "checking":
            bal = _money(random.uniform(200, 8000))
            avail = bal
        elif kind == "savings":
            bal = _money(random.uniform(1000, 40000))
            avail = bal
        elif kind == "credit_card":
            limit = random.choice([2500, 5000, 10000])
            bal = -_money(random.uniform(50, 2000))
            avail = _money(limit + bal)
            extra["creditLimit"] = {"amount": float(limit), "currency": cur}
            if random.random() < 0.5:
                other = "EUR" if cur != "EUR" else "USD"
                ob = -_money(random.uniform(5, 300))
                extra["currencyBalances"] = [{"currency": other, "balance": ob, "availableBalance": ob}]
        else:
            positions = []
            for sym, pname in random.sample(
                [("VTI", "Vanguard Total Stock Market ETF"), ("BND", "Vanguard Total Bond Market ETF"),
                 ("AAPL", "Apple Inc."), ("MSFT", "Microsoft Corp."), ("VXUS", "Vanguard Total Intl Stock ETF")],
                random.randint(1, 3),
            ):
                qty = round(random.uniform(1, 80), 4)
                price = _money(random.uniform(40, 400))
                positions.append({"symbol": sym, "name": pname, "quantity": qty, "price": price,
                                  "marketValue": _money(qty * price), "currency": cur})
            cash = _money(random.uniform(0, 2000))
            bal = _money(cash + sum(p["marketValue"] for p in positions))
            avail = cash
            extra["positions"] = positions
        acc = Account(conn, name=name, type=kind, currency=cur, balance=bal, available=avail,
                      number=last4(), created_at=now, synced_at=now, extra=extra)
        STORE.accounts[acc.id] = acc
        conn.account_ids.append(acc.id)
        for t in _gen_txns(acc, ntx, kind, now):
            STORE.txns[t.id] = t
            acc.txn_ids.append(t.id)
    conn.linked = True


# ---------------------------------------------------------------------------------------------
# serialisation

def account_json(acc):
    d = {
        "id": acc.id,
        "connectionId": acc.conn.id,
        "name": acc.name,
        "type": acc.type,
        "currency": acc.currency,
        "balance": acc.balance,
        "availableBalance": acc.available,
        "accountNumber": acc.number,
        "createdAt": iso(acc.created_at),
        "lastSyncedAt": iso(acc.synced_at),
        "institution": dict(acc.conn.institution),
    }
    for k, v in acc.extra.items():
        d[k] = json.loads(json.dumps(v))
    if V("extra-fields"):
        d["object"] = "account"
        d["status"] = "active"
        d["metadata"] = {}
        d["ownerName"] = "Jordan Example"
    return d


def txn_json(t):
    d = {
        "id": t.id,
        "accountId": t.account.id,
        "amount": t.amount,
        "currency": t.account.currency,
        "description": t.description,
        "transactionDate": t.date,
        "category": t.category,
        "status": "posted",
        "createdAt": iso(t.created_at),
    }
    if V("extra-fields"):
        d["object"] = "transaction"
        d["merchant"] = {"name": t.description, "mcc": None}
        d["pending"] = False
    return d


def connection_json(conn, with_token=False):
    d = {"connectionId": conn.id, "status": conn.status.upper()}
    if with_token:
        d["widgetToken"] = conn.token
    if V("extra-fields") or not with_token:
        d["createdAt"] = iso(conn.created_at)
    if V("extra-fields"):
        d["object"] = "connection"
        d["clientId"] = conn.client.id
        d["widgetTokenExpiresAt"] = iso(conn.token_expires)
    return d


# ---------------------------------------------------------------------------------------------
# events and the outbox

ERRORS = {
    "failed_auth": {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    "mfa_required": {"code": "mfa_required", "message": "The bank requires a second factor."},
    "error": {"code": "institution_error", "message": "The institution returned an unexpected error."},
}


def emit(conn, etype, previous=None, extra=None, connection_event=True):
    """Record an event and queue it for delivery.  Caller holds the lock."""
    client = conn.client
    eid = new_id("evt")
    now = time.time()
    data = {
        "eventId": eid,
        "type": etype,
        "occurredAt": iso(now),
        "clientId": client.id,
        "connectionId": conn.id,
    }
    if connection_event:
        data["previousStatus"] = previous
        state = etype.split(".", 1)[1]
        data["error"] = ERRORS.get(state)
    if extra:
        data.update(extra)
    env = {"id": eid, "type": etype, "created_at": iso(now), "data": data}
    if V("extra-fields"):
        env["api_version"] = "v1"
        env["object"] = "event"
    if V("short-connected-form") and etype == "connection.connected":
        env = {"event": etype, "connectionId": conn.id, "timestamp": iso_seconds(now)}
    client.events.append(env)
    if TRACE:
        EMIT_T[eid] = now
    if webhook_url_for(client) is not None:
        client.outbox.push(env)
    return env


def webhook_url_for(client):
    if V("single-webhook-endpoint"):
        return STORE.global_webhook_url
    return client.webhook_url


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BACKOFF = [0.5, 1, 2, 4, 8, 16]


def post_delivery(client, env, attempt):
    url = webhook_url_for(client)
    if url is None:
        return None  # nowhere to deliver any more: drop
    body = json.dumps(env, separators=(",", ":")).encode()
    ts = str(int(time.time()))
    secret = client.webhook_secret or ""
    sig = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    cap = SERVICE.capitalize()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "User-Agent": SERVICE + "-webhooks/1.0",
        "X-%s-Event-Id" % cap: env.get("id") or env.get("event", ""),
        "X-%s-Delivery-Attempt" % cap: str(attempt + 1),
        "X-%s-Signature" % cap: "t=%s,v1=%s" % (ts, sig),
    })
    t0 = time.time()
    try:
        with _NO_PROXY.open(req, timeout=5) as r:
            r.read()
            ok = 200 <= r.status < 300
    except urllib.error.HTTPError as e:
        ok = e.code < 400
    except Exception:
        ok = False
    if TRACE:
        with open(TRACE, "a") as f:
            f.write("%.3f %.3f %.3f %s %s\n" % (EMIT_T.get(env.get("id"), 0), t0, time.time(), ok, env.get("type")))
    return ok


class Outbox:
    """Per-client outbox.  Each connection has a lane: its deliveries go out one at a time, in
    the order the events happened, and a failed one is retried with backoff while the lane waits
    behind it.  A few sender threads serve the lanes, so one busy or failing connection does not
    hold up the others."""

    SENDERS = 4

    def __init__(self, client):
        self.client = client
        self.cv = threading.Condition()
        self.lanes = {}  # lane key -> deque of [not_before, env, attempt]
        self.ready = collections.deque()  # lane keys whose head may go now
        self.timers = []  # heap of (not_before, seq, lane key)
        self.scheduled = set()  # lanes that are ready, timed or in flight
        self.seq = 0
        for i in range(self.SENDERS):
            threading.Thread(target=self.run, daemon=True, name="outbox-%d-%d" % (client.index, i)).start()

    @staticmethod
    def _lane(env):
        return (env.get("data") or {}).get("connectionId") or env.get("connectionId") or ""

    def push(self, env):
        now = time.time()
        if V("shuffled-deliveries"):
            threading.Thread(target=self._detached, args=(env, random.uniform(0.0, 0.9)), daemon=True).start()
            return
        nb = now
        if V("slow-webhooks"):
            nb = now + random.uniform(1.0, 3.0)
        key = self._lane(env)
        with self.cv:
            self.lanes.setdefault(key, collections.deque()).append([nb, env, 0])
            if key not in self.scheduled:
                self._schedule(key)
        if V("duplicate-deliveries"):
            threading.Thread(target=self._detached, args=(env, random.uniform(0.3, 1.5)), daemon=True).start()

    def _schedule(self, key):
        """Caller holds cv; the lane is not empty."""
        head = self.lanes[key][0]
        self.scheduled.add(key)
        if head[0] <= time.time():
            self.ready.append(key)
        else:
            self.seq += 1
            heapq.heappush(self.timers, (head[0], self.seq, key))
        self.cv.notify()

    def clear(self):
        with self.cv:
            self.lanes.clear()
            self.ready.clear()
            self.timers.clear()
            self.scheduled.clear()
            self.cv.notify_all()

    def _detached(self, env, delay):
        time.sleep(delay)
        for attempt in range(len(BACKOFF) + 1):
            ok = post_delivery(self.client, env, attempt)
            if ok is None or ok:
                return
            if attempt < len(BACKOFF):
                time.sleep(BACKOFF[attempt])
        log("dead letter", env.get("id"))

    def run(self):
        while True:
            with self.cv:
                while True:
                    now = time.time()
                    while self.timers and self.timers[0][0] <= now:
                        _, _, k = heapq.heappop(self.timers)
                        if k in self.lanes:
                            self.ready.append(k)
                    if self.ready:
                        key = self.ready.popleft()
                        lane = self.lanes.get(key)
                        if lane:
                            item = lane.popleft()
                            break
                        self.scheduled.discard(key)
                        continue
                    self.cv.wait(self.timers[0][0] - now if self.timers else None)
            nb, env, attempt = item
            ok = post_delivery(self.client, env, attempt)
            with self.cv:
                lane = self.lanes.get(key)
                if lane is None:  # cleared (unregistered) meanwhile
                    self.scheduled.discard(key)
                    continue
                if ok is False:
                    if attempt < len(BACKOFF):
                        item[0] = time.time() + BACKOFF[attempt]
                        item[2] = attempt + 1
                        lane.appendleft(item)
                    else:
                        log("dead letter after %d attempts: %s" % (attempt + 1, env.get("id")))
                if lane:
                    self._schedule(key)
                else:
                    del self.lanes[key]
                    self.scheduled.discard(key)


# ---------------------------------------------------------------------------------------------
# lifecycle: actions, plans and the per-connection worker

PRE_CONNECT = ("created", "mfa_required", "failed_auth", "error")
VIA = ["credentials_submitted", "verifying"]


def plan(action, state):
    """States a connection goes through for an action from the state it will be in, or None."""
    if V("strict-transitions"):
        if action == "connect" and state in ("created", "mfa_required", "failed_auth"):
            return VIA + ["connected"]
        if action == "fail_auth" and state in ("created", "mfa_required"):
            return VIA + ["failed_auth"]
        if action == "require_mfa" and state == "created":
            return VIA + ["mfa_required"]
        if action == "error" and state in ("created", "connected", "mfa_required"):
            return ["error"]
        if action == "disconnect" and state != "disconnected":
            return ["disconnected"]
        return None
    if action == "connect":
        return VIA + ["connected"] if state in PRE_CONNECT else None
    if action == "fail_auth":
        if state in PRE_CONNECT:
            return VIA + ["failed_auth"]
        return ["failed_auth"] if state == "connected" else None
    if action == "require_mfa":
        if state in PRE_CONNECT:
            return VIA + ["mfa_required"]
        return ["mfa_required"] if state == "connected" else None
    if action == "error":
        return ["error"] if state not in ("error", "disconnected") else None
    if action == "disconnect":
        if state == "disconnected":
            return ["disconnected"] if V("noop-disconnect-event") else None
        return ["disconnected"]
    return None


class Refused(Exception):
    pass


class NotFound(Exception):
    pass


def submit(conn, job):
    """Queue a job on the connection's worker.  Caller holds the lock."""
    conn.jobs.append(job)
    if not conn.worker_running:
        conn.worker_running = True
        threading.Thread(target=worker, args=(conn,), daemon=True).start()


def accept_transition(conn, action):
    """Validate against the projected state and queue.  Caller holds the lock."""
    path = plan(action, conn.projected)
    if path is None:
        if V("refused-connect-applies") and action == "connect":
            # bug: the job was enqueued by the widget-session handler before the state check
            submit(conn, {"kind": "transition", "path": VIA + ["connected"], "from": conn.projected})
            conn.projected = "connected"
        raise Refused("cannot %s a connection that is %s" % (action, conn.projected))
    submit(conn, {"kind": "transition", "path": path, "from": conn.projected})
    conn.projected = path[-1]


def worker(conn):
    while True:
        with STORE.lock:
            if not conn.jobs:
                conn.worker_running = False
                return
            job = conn.jobs.popleft()
        try:
            if job["kind"] == "transition":
                run_transition(conn, job)
            elif job["kind"] == "update":
                run_update(conn, job)
            elif job["kind"] == "delete":
                run_delete(conn, job)
        except Exception as e:  # keep the worker alive
            log("job failed", job.get("kind"), repr(e))


def _delayed_link(conn):
    time.sleep(random.uniform(1.5, 2.5))
    with STORE.lock:
        link_accounts(conn)
        conn.linking = False


def run_transition(conn, job):
    for state in job["path"]:
        if conn.status == "verifying" and V("slow-verification"):
            time.sleep(random.uniform(2.0, 4.0))  # the bank takes its time answering
        else:
            step_sleep()
        if state == "connected" and V("connected-event-early"):
            with STORE.lock:
                emit(conn, "connection.connected", conn.status)
            time.sleep(random.uniform(0.4, 0.7))  # the account sync commits afterwards
            with STORE.lock:
                link_accounts(conn)
                conn.status = "connected"
            continue
        with STORE.lock:
            previous = conn.status
            if V("stale-previous-status"):
                previous = job["from"]
            if state == "connected":
                if V("connected-before-accounts"):
                    if not conn.linked and not conn.linking:
                        conn.linking = True
                        threading.Thread(target=_delayed_link, args=(conn,), daemon=True).start()
                elif conn.linked and V("silent-resync"):
                    resync_quietly(conn)
                else:
                    link_accounts(conn)
            if state == "verifying" and V("accounts-during-verifying"):
                link_accounts(conn)
            conn.status = state
            conn.last_error = ERRORS.get(state)
            if state == "verifying" and V("skipped-verifying-event"):
                continue
            emit(conn, "connection." + state, previous)


def resync_quietly(conn):
    """silent-resync: a re-connection pulls fresh balances and new transactions from the bank,
    and nobody is told.  Caller holds the lock."""
    now = time.time()
    today = datetime.datetime.utcfromtimestamp(now).date().isoformat()
    for i, aid in enumerate(conn.account_ids):
        acc = STORE.accounts[aid]
        delta = -_money(random.uniform(1, 90))
        if i == 0:
            t = Txn(acc, delta, "Card purchase", "shopping", today, now)
            STORE.txns[t.id] = t
            acc.txn_ids.append(t.id)
        acc.balance = _money(acc.balance + delta)
        acc.available = _money(acc.available + delta)
        acc.synced_at = now


def _wait_linked(conn):
    for _ in range(100):
        with STORE.lock:
            if conn.linked:
                return True
        time.sleep(0.05)
    return False


def run_update(conn, job):
    step_sleep()
    _wait_linked(conn)
    with STORE.lock:
        acc = STORE.accounts.get(job["account"]) if job.get("account") else None
        if acc is None:
            if not conn.account_ids:
                log("update: no account on", conn.id)
                return
            acc = STORE.accounts[random.choice(conn.account_ids)]
    now = time.time()
    today = datetime.datetime.utcfromtimestamp(now).date().isoformat()
    if acc.type == "credit_card":
        cat = random.choice(CATEGORIES_DEBIT)
        amount = -_money(random.uniform(5, 150))
    elif random.random() < 0.3:
        cat, amount = "income", _money(random.uniform(50, 900))
    else:
        cat = random.choice(CATEGORIES_DEBIT)
        amount = -_money(random.uniform(3, 200))
    t = Txn(acc, amount, random.choice(DESCRIPTIONS[cat]), cat, today, now)

    def apply():
        STORE.txns[t.id] = t
        acc.txn_ids.append(t.id)
        acc.balance = _money(acc.balance + amount)
        acc.available = _money(acc.available + amount)
        acc.synced_at = time.time()

    if V("update-event-early"):
        with STORE.lock:
            emit(conn, "accounts.updated", extra={"accountId": acc.id}, connection_event=False)
        time.sleep(random.uniform(0.5, 0.8))
        with STORE.lock:
            apply()
        return
    with STORE.lock:
        apply()
        emit(conn, "accounts.updated", extra={"accountId": acc.id}, connection_event=False)


def run_delete(conn, job):
    step_sleep()
    with STORE.lock:
        t = STORE.txns[job["txn"]]
        if not V("delete-not-applied"):
            t.deleted = True
        emit(conn, "transaction.deleted",
             extra={"accountId": t.account.id, "transactionId": t.id}, connection_event=False)


def accept_update(conn, account_id):
    if conn.projected != "connected":
        raise Refused("accounts can only be updated on a connected connection (it is %s)" % conn.projected)
    if account_id:
        acc = STORE.accounts.get(account_id)
        if acc is None or acc.conn is not conn:
            raise NotFound("account %s is not an account of this connection" % account_id)
    submit(conn, {"kind": "update", "account": account_id})
    return account_id


def live_txns(acc):
    return [STORE.txns[i] for i in acc.txn_ids if not STORE.txns[i].deleted]


def accept_delete(conn, account_id, txn_id):
    if conn.projected != "connected":
        raise Refused("transactions can only be deleted on a connected connection (it is %s)" % conn.projected)
    if txn_id:
        t = STORE.txns.get(txn_id)
        if t is None or t.account.conn is not conn:
            raise NotFound("transaction %s is not a transaction of this connection" % txn_id)
        if t.deleted or t.delete_pending:
            raise Refused("transaction %s is already deleted" % txn_id)
    else:
        if not conn.linked:
            raise Refused("the connection has no accounts yet")
        if account_id:
            acc = STORE.accounts.get(account_id)
            if acc is None or acc.conn is not conn:
                raise NotFound("account %s is not an account of this connection" % account_id)
            pool = [acc]
        else:
            pool = [STORE.accounts[a] for a in conn.account_ids]
        cands = [t for a in pool for t in live_txns(a) if not t.delete_pending]
        if not cands:
            raise Refused("no transaction left to delete")
        t = random.choice(cands)
    t.delete_pending = True
    submit(conn, {"kind": "delete", "txn": t.id})
    return t.id


# ---------------------------------------------------------------------------------------------
# the widget script

WIDGET_JS = r"""/*! %(name)s widget v1.4.2 -- loads in the client's frontend; it only ever uses the
 * widget token (sess_...) returned by connection creation. */
(function (global) {
  'use strict';
  var NAME = %(name_json)s;
  var BASE = (function () {
    try {
      var s = document.currentScript && document.currentScript.src;
      if (s) { return new URL(s).origin; }
    } catch (e) { /* fall through */ }
    return %(base_json)s;
  })();

  function call(path, body) {
    return fetch(BASE + path, {
      method: 'POST', mode: 'cors', credentials: 'omit',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) { throw j; } return j; });
    });
  }

  function h(tag, text, style) {
    var e = document.createElement(tag);
    if (text) { e.textContent = text; }
    if (style) { e.setAttribute('style', style); }
    return e;
  }

  function open(opts, connectionId, onSuccess) {
    if (typeof opts === 'string') { opts = { token: opts, connectionId: connectionId, onSuccess: onSuccess }; }
    opts = opts || {};
    if (typeof opts.token !== 'string' || opts.token.indexOf('sess_') !== 0) {
      throw new TypeError(NAME + '.open: a widget token (sess_...) is required');
    }
    if (typeof opts.connectionId !== 'string' || !opts.connectionId) {
      throw new TypeError(NAME + '.open: connectionId is required');
    }
    var session = { token: opts.token, connectionId: opts.connectionId };
    var done = typeof opts.onSuccess === 'function' ? opts.onSuccess : function () {};
    var onExit = typeof opts.onExit === 'function' ? opts.onExit : function () {};
    var closed = false;

    var overlay = h('div', null, 'position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;' +
      'align-items:center;justify-content:center;z-index:2147483647;font-family:sans-serif');
    var box = h('div', null, 'background:#fff;border-radius:8px;padding:24px;width:320px');
    var title = h('h2', 'Connect your bank', 'margin:0 0 12px;font-size:18px');
    var msg = h('p', 'Loading\u2026', 'font-size:14px;color:#444');
    var form = h('form', null, 'display:none');
    var user = h('input'); user.placeholder = 'Username'; user.autocomplete = 'username';
    var pass = h('input'); pass.type = 'password'; pass.placeholder = 'Password';
    var code = h('input'); code.placeholder = 'One-time code'; code.style.display = 'none';
    var submit = h('button', 'Continue'); submit.type = 'submit';
    var cancel = h('button', 'Cancel'); cancel.type = 'button';
    [user, pass, code, submit, cancel].forEach(function (e) { e.style.display = e === code ? 'none' : 'block'; e.style.margin = '6px 0'; form.appendChild(e); });
    box.appendChild(title); box.appendChild(msg); box.appendChild(form); overlay.appendChild(box);

    function mount() { if (document.body) { document.body.appendChild(overlay); } }
    if (document.body) { mount(); } else { document.addEventListener('DOMContentLoaded', mount); }

    function close() { closed = true; if (overlay.parentNode) { overlay.parentNode.removeChild(overlay); } }
    cancel.onclick = function () { close(); onExit({ connectionId: session.connectionId, reason: 'user_cancelled' }); };

    function poll() {
      if (closed) { return; }
      call('/widget/api/status', session).then(function (s) {
        if (s.status === 'connected') {
          msg.textContent = 'Connected.';
          close();
          done({ connectionId: session.connectionId, institution: s.institution, accounts: s.accountCount });
        } else if (s.status === 'mfa_required') {
          msg.textContent = 'Enter the code your bank sent you.';
          form.style.display = 'block'; user.style.display = 'none'; pass.style.display = 'none'; code.style.display = 'block';
        } else if (s.status === 'failed_auth') {
          msg.textContent = 'Those credentials were not accepted. Try again.';
          form.style.display = 'block';
        } else if (s.status === 'error' || s.status === 'disconnected') {
          msg.textContent = 'Something went wrong. Please try again later.';
        } else { setTimeout(poll, 600); }
      }).catch(function () { msg.textContent = 'The session has expired.'; });
    }

    form.onsubmit = function (ev) {
      ev.preventDefault();
      form.style.display = 'none';
      msg.textContent = 'Checking with your bank\u2026';
      var body = { token: session.token, connectionId: session.connectionId };
      var path = '/widget/api/credentials';
      if (code.style.display !== 'none') { path = '/widget/api/mfa'; body.code = code.value; }
      else { body.username = user.value; body.password = pass.value; }
      call(path, body).then(function () { setTimeout(poll, 300); })
        .catch(function (e) { msg.textContent = (e && e.error && e.error.message) || 'Could not submit.'; form.style.display = 'block'; });
    };

    call('/widget/api/session', session).then(function (s) {
      if (closed) { return; }
      title.textContent = 'Connect ' + ((s.institution && s.institution.name) || 'your bank');
      if (s.status === 'connected') { msg.textContent = 'Already connected.'; return; }
      msg.textContent = 'Sign in with your online banking credentials.';
      form.style.display = 'block';
    }).catch(function (e) {
      msg.textContent = (e && e.error && e.error.message) || 'This link is no longer valid.';
    });

    return { close: close };
  }

  global[NAME] = { open: open, version: '1.4.2' };
})(typeof window !== 'undefined' ? window : this);
"""


def global_name():
    parts = re.split(r"[^A-Za-z0-9]+", SERVICE)
    name = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Bank"
    if name[0].isdigit():
        name = "_" + name
    return name + "Connect"


# ---------------------------------------------------------------------------------------------
# HTTP

class ApiError(Exception):
    def __init__(self, status, code, message, etype="invalid_request_error", headers=None):
        self.status, self.code, self.message, self.etype = status, code, message, etype
        self.headers = headers or {}


def _alt(status, code):
    """alt-errors: the same refusals, other status codes."""
    if not V("alt-errors"):
        return status
    return {
        "missing_api_key": 403, "invalid_api_key": 403,
        "connection_not_connected": 400, "invalid_parameter": 422, "invalid_cursor": 422,
    }.get(code, status)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AcmeStaging/1.4"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # -- plumbing ------------------------------------------------------------------------------
    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, payload, ctype="application/json; charset=utf-8", headers=None):
        if isinstance(payload, (dict, list)):
            body = json.dumps(payload, separators=(",", ":")).encode()
        elif isinstance(payload, str):
            body = payload.encode()
        else:
            body = payload or b""
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", self.request_id)
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(body)

    def _error(self, e):
        status = _alt(e.status, e.code)
        if V("alt-errors"):
            body = {"message": e.message, "code": e.code, "status": status}
        else:
            body = {"error": {"type": e.etype, "code": e.code, "message": e.message,
                              "request_id": self.request_id}}
        self._send(status, body, headers=e.headers)

    def _dispatch(self):
        self.request_id = "req_" + _ulid()
        try:
            raw = self._read_body()
            path, _, query = self.path.partition("?")
            self.query = urllib.parse.parse_qs(query, keep_blank_values=True)
            self.raw_body = raw
            self.route(self.command, path)
        except ApiError as e:
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # pragma: no cover
            log("500", self.command, self.path, repr(e))
            try:
                self._error(ApiError(500, "internal_error", "An internal error occurred.", "api_error"))
            except Exception:
                pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def do_OPTIONS(self):
        self.request_id = "req_" + _ulid()
        self._read_body()
        if self.path.startswith("/widget/"):
            self._send(204, b"", headers={
                "Access-Control-Allow-Origin": "*",
                "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                "Access-Control-Allow-Headers": "Content-Type",
                "Access-Control-Max-Age": "600",
            })
        else:
            self._send(204, b"", headers={"Allow": "GET, POST, OPTIONS"})

    def _json_body(self):
        if not self.raw_body:
            return {}
        try:
            v = json.loads(self.raw_body)
        except ValueError:
            raise ApiError(400, "invalid_json", "The request body is not valid JSON.")
        if not isinstance(v, dict):
            raise ApiError(400, "invalid_json", "The request body must be a JSON object.")
        return v

    def _client(self):
        h = self.headers.get("Authorization")
        if not h:
            raise ApiError(401, "missing_api_key", "No API key provided. Send 'Authorization: Bearer <API_KEY>'.",
                           "authentication_error", {"WWW-Authenticate": 'Bearer realm="api"'})
        m = re.match(r"^\s*Bearer\s+(\S+)\s*$", h, re.I)
        c = STORE.client_for_key(m.group(1)) if m else None
        if c is None:
            raise ApiError(401, "invalid_api_key", "The API key provided is not valid.",
                           "authentication_error",
                           {"WWW-Authenticate": 'Bearer realm="api", error="invalid_token"'})
        return c

    @staticmethod
    def _method(cmd, allowed):
        if cmd not in allowed:
            raise ApiError(405, "method_not_allowed", "Method %s is not allowed here." % cmd,
                           headers={"Allow": ", ".join(allowed)})

    # -- routing -------------------------------------------------------------------------------
    def route(self, cmd, path):
        if path == "/__admin/action":
            self._method(cmd, ["POST"])
            return self.admin()
        if path == "/__admin/health":
            return self._send(200, {"ok": True, "variant": VARIANT})
        if path.startswith("/widget/"):
            return self.widget(cmd, path)
        if path == "/v1/connections":
            self._method(cmd, ["POST"])
            return self.create_connection(self._client())
        m = re.match(r"^/v1/connections/([^/]+)/accounts$", path)
        if m:
            self._method(cmd, ["GET", "HEAD"])
            return self.connection_accounts(self._client(), urllib.parse.unquote(m.group(1)))
        m = re.match(r"^/v1/connections/([^/]+)$", path)
        if m:
            self._method(cmd, ["GET", "HEAD"])
            return self.get_connection(self._client(), urllib.parse.unquote(m.group(1)))
        m = re.match(r"^/v1/accounts/([^/]+)/transactions$", path)
        if m:
            self._method(cmd, ["GET", "HEAD"])
            return self.transactions(self._client(), urllib.parse.unquote(m.group(1)))
        m = re.match(r"^/v1/accounts/([^/]+)$", path)
        if m:
            self._method(cmd, ["GET", "HEAD"])
            return self.get_account(self._client(), urllib.parse.unquote(m.group(1)))
        if path.startswith("/v1/"):
            self._client()
        raise ApiError(404, "not_found", "No such endpoint: %s %s" % (cmd, path))

    # -- API -----------------------------------------------------------------------------------
    def create_connection(self, client):
        with STORE.lock:
            conn = Connection(client)
            STORE.connections[conn.id] = conn
            STORE.tokens[conn.token] = conn
            emit(conn, "connection.created", None)
            body = connection_json(conn, with_token=True)
        status = 200 if V("alt-errors") else 201
        self._send(status, body, headers={"Location": "/v1/connections/" + conn.id})

    def _conn(self, client, cid):
        conn = STORE.connections.get(cid)
        if conn is None or conn.client is not client:
            raise ApiError(404, "connection_not_found", "No connection with id %s." % cid)
        return conn

    def _account(self, client, aid):
        acc = STORE.accounts.get(aid)
        if acc is None or (acc.conn.client is not client and not V("cross-client-reads")):
            raise ApiError(404, "account_not_found", "No account with id %s." % aid)
        return acc

    @staticmethod
    def serves_accounts(conn):
        if V("accounts-once-connected"):
            return conn.linked
        if V("accounts-during-verifying"):
            return conn.status in ("verifying", "connected") and conn.linked
        return conn.status == "connected"

    def _not_connected(self, conn):
        return ApiError(409, "connection_not_connected",
                        "Connection %s is %s; accounts are available once it is CONNECTED."
                        % (conn.id, conn.status.upper()))

    def get_connection(self, client, cid):
        with STORE.lock:
            conn = self._conn(client, cid)
            body = connection_json(conn)
        self._send(200, body)

    def connection_accounts(self, client, cid):
        with STORE.lock:
            conn = self._conn(client, cid)
            if not self.serves_accounts(conn):
                raise self._not_connected(conn)
            body = [account_json(STORE.accounts[a]) for a in conn.account_ids]
        self._send(200, body)

    def _readable_account(self, client, aid):
        acc = self._account(client, aid)
        if V("account-reads-any-state"):
            if not acc.conn.linked:
                raise self._not_connected(acc.conn)
        elif not self.serves_accounts(acc.conn):
            raise self._not_connected(acc.conn)
        return acc

    def get_account(self, client, aid):
        with STORE.lock:
            acc = self._readable_account(client, aid)
            body = account_json(acc)
        self._send(200, body)

    def transactions(self, client, aid):
        default, maximum = (5, 20) if V("small-pages") else (25, 100)
        lim = self.query.get("limit", [None])[-1]
        after = self.query.get("starting_after", [None])[-1]
        if lim is None or lim == "":
            limit = default
        else:
            if not re.fullmatch(r"\+?\d+", lim.strip()):
                raise ApiError(400, "invalid_parameter", "limit must be a positive integer.")
            limit = int(lim)
            if limit < 1:
                raise ApiError(400, "invalid_parameter", "limit must be at least 1.")
            limit = min(limit, maximum)
        with STORE.lock:
            acc = self._readable_account(client, aid)
            desc = not V("oldest-first")
            every = [STORE.txns[i] for i in acc.txn_ids]

            def key(t):
                return (t.date, t.id)

            live = [t for t in every if not t.deleted]
            live.sort(key=key, reverse=desc)
            if after:
                cur = STORE.txns.get(after)
                if cur is None or cur.account is not acc:
                    raise ApiError(400, "invalid_cursor",
                                   "starting_after %s is not a transaction of this account." % after)
                ck = key(cur)  # a deleted transaction still marks its place
                live = [t for t in live if (key(t) < ck if desc else key(t) > ck)]
            page = live[:limit]
            if V("has-more-full-page"):
                has_more = len(page) == limit
            else:
                has_more = len(live) > limit
            body = {"data": [txn_json(t) for t in page], "has_more": has_more}
            if has_more and page:
                if V("pagination-peek-cursor") and len(live) > limit:
                    body["next_cursor"] = live[limit].id
                else:
                    body["next_cursor"] = page[-1].id
            if V("extra-fields"):
                body["object"] = "list"
                body["url"] = "/v1/accounts/%s/transactions" % acc.id
        self._send(200, body)

    # -- widget --------------------------------------------------------------------------------
    def widget(self, cmd, path):
        cors = {"Access-Control-Allow-Origin": "*"}
        if path == "/widget/%s-connect.js" % SERVICE:
            self._method(cmd, ["GET", "HEAD"])
            host = self.headers.get("Host") or "127.0.0.1"
            js = WIDGET_JS % {"name": global_name(), "name_json": json.dumps(global_name()),
                              "base_json": json.dumps("http://" + host)}
            h = dict(cors)
            h["Cache-Control"] = "public, max-age=300"
            return self._send(200, js, "application/javascript; charset=utf-8", h)
        if path.startswith("/widget/api/"):
            self._method(cmd, ["POST"])
            try:
                return self.widget_api(path[len("/widget/api/"):], cors)
            except ApiError as e:
                e.headers.update(cors)
                raise
        raise ApiError(404, "not_found", "No such widget resource.")

    def widget_api(self, op, cors):
        b = self._json_body()
        tok, cid = b.get("token"), b.get("connectionId")
        with STORE.lock:
            conn = STORE.tokens.get(tok) if isinstance(tok, str) else None
            if conn is None or conn.id != cid or time.time() > conn.token_expires:
                raise ApiError(401, "invalid_widget_token", "This widget session is not valid.",
                               "authentication_error")
            if op in ("session", "status"):
                body = {"connectionId": conn.id, "status": conn.status,
                        "institution": conn.institution or {"id": None, "name": "your bank", "logo": None},
                        "accountCount": len(conn.account_ids) if conn.status == "connected" else 0}
                return self._send(200, body, headers=cors)
            if op == "credentials":
                u, p = str(b.get("username") or ""), str(b.get("password") or "")
                if not u or not p:
                    raise ApiError(400, "missing_credentials", "Username and password are required.")
                action = "connect"
                if p.lower().startswith("wrong"):
                    action = "fail_auth"
                elif u.lower().startswith("mfa"):
                    action = "require_mfa"
            elif op == "mfa":
                if conn.projected != "mfa_required":
                    raise ApiError(409, "no_mfa_pending", "No second factor is pending.")
                action = "connect" if str(b.get("code") or "").strip() else "fail_auth"
            else:
                raise ApiError(404, "not_found", "No such widget operation.")
            try:
                accept_transition(conn, action)
            except Refused as e:
                raise ApiError(409, "invalid_state", str(e))
        self._send(202, {"accepted": True}, headers=cors)

    # -- admin (driver) ------------------------------------------------------------------------
    def admin(self):
        b = self._json_body()
        action = b.get("action")
        keys = [k for k in (b.get("apiKey"), b.get("secondApiKey")) if k]
        clients = [c for c in (STORE.client_for_key(k) for k in keys) if c]
        if not clients:
            raise ApiError(401, "invalid_api_key", "The admin call carries no known API key.",
                           "authentication_error")
        if action == "register_webhook":
            return self.admin_register(b)
        if action == "unregister_webhook":
            with STORE.lock:
                for c in STORE.clients:
                    c.webhook_url = None
                    c.outbox.clear()
                STORE.global_webhook_url = None
            return self._send(200, {"ok": True})
        if action not in ("connect", "fail_auth", "require_mfa", "error", "disconnect",
                          "update_accounts", "delete_transaction"):
            raise ApiError(501, "unsupported_action", "Action %r is not supported." % action)
        cid = b.get("connectionId")
        with STORE.lock:
            conn = STORE.connections.get(cid) if cid else None
            if conn is None and b.get("widgetToken"):
                conn = STORE.tokens.get(b.get("widgetToken"))
            if conn is None or conn.client not in clients:
                raise ApiError(404, "connection_not_found", "No connection %s for these keys." % cid)
            try:
                if action == "update_accounts":
                    res = {"accountId": accept_update(conn, b.get("accountId"))}
                elif action == "delete_transaction":
                    res = {"transactionId": accept_delete(conn, b.get("accountId"), b.get("transactionId"))}
                else:
                    accept_transition(conn, action)
                    res = {}
            except Refused as e:
                raise ApiError(409, "invalid_transition", str(e))
            except NotFound as e:
                raise ApiError(404, "not_found", str(e))
            res.update({"accepted": True, "connectionId": conn.id, "willBe": conn.projected.upper()})
        self._send(202, res)

    def admin_register(self, b):
        pairs = [(b.get("apiKey"), b.get("webhookUrl")), (b.get("secondApiKey"), b.get("secondWebhookUrl"))]
        out = {}
        with STORE.lock:
            for key, url in pairs:
                if not key or not url:
                    continue
                c = STORE.client_for_key(key)
                if c is None:
                    raise ApiError(401, "invalid_api_key", "Unknown API key in registration.",
                                   "authentication_error")
                u = urllib.parse.urlparse(url)
                if u.scheme not in ("http", "https") or not u.netloc:
                    raise ApiError(400, "invalid_url", "The webhook URL is not an absolute http(s) URL.")
                c.webhook_url = url
                c.webhook_secret = "whsec_" + rand_alnum(32)
                if STORE.global_webhook_url is None:
                    STORE.global_webhook_url = url
                out[c.id] = {"secret": c.webhook_secret}
        self._send(200, {"webhooks": "per-client", "registered": len(out)})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    global VARIANT, SERVICE, STORE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    a = ap.parse_args()
    if a.variant not in VARIANTS:
        print("unknown variant %r; known: %s" % (a.variant, ", ".join(VARIANTS)), file=sys.stderr)
        sys.exit(2)
    VARIANT, SERVICE = a.variant, a.service
    keys = [k.strip() for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k.strip()]
    if len(keys) != 2 or keys[0] == keys[1]:
        print("FOREIGN_API_KEYS must hold two different comma-separated keys", file=sys.stderr)
        sys.exit(2)
    STORE = Store(keys)
    for c in STORE.clients:
        c.outbox = Outbox(c)
    srv = Server(("127.0.0.1", a.port), Handler)
    if a.exit_on_stdin_eof:
        def watch():
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except Exception:
                pass
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
