#!/usr/bin/env python3
"""Staging server for the Bank Connection Aggregation Service (foreign-22).

Written from /work/shared/spec/service-spec.md alone.  Standard library only.

    FOREIGN_API_KEYS="key1,key2" python3 server.py --port 0 --variant none --service acme

Prints "PORT <n>" on stdout once it listens.  Each API key is one client (cli_...).
The test hook is POST /__admin/action (loopback only), used by driver.py.

--variant selects one of the behaviours described in VARIANTS.md: "none" is the clean server;
the others are either legal choices the spec leaves open, or shipped bugs.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import queue
import random
import re
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LEGAL = {
    "none", "created-200", "alt-status-codes", "ascending-order", "uuid-ids", "small-pages",
    "strict-limit", "cursor-on-last-page", "webhook-duplicates", "webhook-shuffled-late",
    "rate-limited", "background-sync", "slow-verification",
}
VIOLATIONS = {
    "txn-ids-per-account-counter", "account-ids-by-position", "event-ids-per-connection-seq",
    "txn-id-from-count", "dedup-drops-lookalikes", "resync-restores-deleted",
    "page-cache-misses-deletes", "updated-before-commit", "updated-event-wrong-account",
    "deleted-event-neighbour-id", "cursor-skips-same-date", "has-more-off-by-one",
    "ties-unstable-order", "account-balance-cache", "single-account-no-owner-check",
    "client-id-from-last-request", "connected-before-accounts", "widget-session-leaks-key",
    "auth-key-prefix-index",
}

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


# ----------------------------------------------------------------------------------------------
# Configuration.  Every knob below is a deployment setting or a piece of code that differs between
# the builds we keep in staging; the variant name picks the build.
# ----------------------------------------------------------------------------------------------

class Config:
    def __init__(self, variant):
        v = variant
        self.variant = v
        # API surface
        self.create_status = 200 if v == "created-200" else 201
        self.error_style = "problem" if v == "alt-status-codes" else "plain"
        self.descending = v != "ascending-order"
        self.id_style = "uuid" if v == "uuid-ids" else "ulid"
        self.page_default, self.page_max = (5, 20) if v == "small-pages" else (25, 100)
        self.reject_over_max = v == "strict-limit"
        self.cursor_on_last_page = v == "cursor-on-last-page"
        self.rate_limit = 25.0 if v == "rate-limited" else 0.0
        # webhooks
        self.delivery = {"webhook-duplicates": "duplicates",
                         "webhook-shuffled-late": "shuffled"}.get(v, "fifo")
        # workers
        self.background_sync = v == "background-sync"
        self.step_delay = 0.5 if v == "slow-verification" else 0.0
        # builds with known defects
        self.txn_ids = {"txn-ids-per-account-counter": "account-seq",
                        "txn-id-from-count": "bank-ref"}.get(v, "random")
        self.account_ids = "positional" if v == "account-ids-by-position" else "random"
        self.event_ids = "time-seq" if v == "event-ids-per-connection-seq" else "random"
        self.dedupe_key = ("date-amount-desc" if v == "dedup-drops-lookalikes" else "bank-ref")
        self.full_resync = v == "resync-restores-deleted"
        self.delete_bumps_version = v != "page-cache-misses-deletes"
        self.write_behind = 2.0 if v == "updated-before-commit" else 0.0
        self.event_account_from_loop = v == "updated-event-wrong-account"
        self.delete_event_from_listing = v == "deleted-event-neighbour-id"
        self.cursor_date_only = v == "cursor-skips-same-date"
        self.has_more_last_index = v == "has-more-off-by-one"
        self.sharded_listing = v == "ties-unstable-order"
        self.account_cache_ttl = 20.0 if v == "account-balance-cache" else 0.0
        self.single_account_owner_check = v != "single-account-no-owner-check"
        self.client_from_request_context = v == "client-id-from-last-request"
        self.populate_after_connected = 2.5 if v == "connected-before-accounts" else 0.0
        self.session_includes_client = v == "widget-session-leaks-key"
        self.key_index_prefix = 20 if v == "auth-key-prefix-index" else 0


CFG = None  # set in main()


def now_dt():
    return datetime.now(timezone.utc)


def iso_ms(dt=None):
    dt = dt or now_dt()
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def new_id(prefix):
    if CFG.id_style == "uuid":
        return prefix + str(uuid.uuid4())
    return prefix + "".join(secrets.choice(CROCKFORD) for _ in range(26))


def b32_26(data):
    s = base64.b32encode(hashlib.sha256(data.encode()).digest()).decode().rstrip("=")
    return s[:26]


def to_crockford(n, width):
    out = []
    while n:
        n, r = divmod(n, 32)
        out.append(CROCKFORD[r])
    return "".join(reversed(out)).rjust(width, "0")[-width:]


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------

class Client:
    def __init__(self, key):
        self.id = new_id("cli_")
        self.key = key
        self.webhook_url = None


class Txn:
    __slots__ = ("id", "account_id", "amount", "currency", "description", "date", "category",
                 "created_at", "ref")

    def to_json(self):
        return {
            "id": self.id, "accountId": self.account_id, "amount": self.amount,
            "currency": self.currency, "description": self.description,
            "transactionDate": self.date, "category": self.category, "status": "posted",
            "createdAt": self.created_at,
        }

    def sort_key(self):
        return (self.date, self.created_at, self.id)


class Account:
    def __init__(self, acc_id, conn, kind, currency, name, number):
        self.id = acc_id
        self.conn_id = conn.id
        self.client = conn.client
        self.type = kind
        self.currency = currency
        self.name = name
        self.number = number
        self.balance = 0.0
        self.available = 0.0
        self.credit_limit = None
        self.currency_balances = None
        self.positions = None
        self.created_at = iso_ms()
        self.last_synced_at = self.created_at
        self.institution = None
        self.feed = []          # everything the bank ever reported for this account
        self.synced = 0         # how far into the feed the store is
        self.txns = {}          # live transactions, by id
        self.deleted = {}       # tombstones: id -> sort key (cursors on deleted rows still work)
        self.version = 0
        self.seq = 0
        self.synced_pending = 0
        self.imported = False

    def touch(self):
        self.version += 1

    def to_json(self):
        out = {
            "id": self.id, "connectionId": self.conn_id, "name": self.name, "type": self.type,
            "currency": self.currency, "balance": round(self.balance, 2),
            "availableBalance": round(self.available, 2), "accountNumber": self.number,
            "createdAt": self.created_at, "lastSyncedAt": self.last_synced_at,
            "institution": self.institution,
        }
        if self.credit_limit is not None:
            out["creditLimit"] = self.credit_limit
        if self.currency_balances is not None:
            out["currencyBalances"] = self.currency_balances
        if self.positions is not None:
            out["positions"] = self.positions
        return out


class Connection:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "CREATED"
        self.projected = "CREATED"     # status once every accepted action has run
        self.token = new_id("sess_")
        self.account_ids = []
        self.populated = False
        self.event_seq = 0
        self.steps = []
        self.worker = None


# Plain global: the handler stores who is calling, for the audit log and for events.
REQUEST_CONTEXT = {"client": None}


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# ----------------------------------------------------------------------------------------------
# Webhook delivery
# ----------------------------------------------------------------------------------------------

class Dispatcher:
    def __init__(self):
        self.lock = threading.Lock()
        self.queues = {}
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def publish(self, client, envelope):
        body = json.dumps(envelope).encode()
        mode = CFG.delivery
        if mode == "shuffled":
            delay = random.uniform(0.0, 2.0)
            threading.Timer(delay, self._send_with_retries, (client, body)).start()
            return
        self._queue(client).put(body)
        if mode == "duplicates" and random.random() < 0.7:
            threading.Timer(random.uniform(0.2, 3.0), self._send_with_retries,
                            (client, body)).start()

    def _queue(self, client):
        with self.lock:
            q = self.queues.get(client.id)
            if q is None:
                q = self.queues[client.id] = queue.Queue()
                threading.Thread(target=self._worker, args=(client, q), daemon=True).start()
            return q

    def _worker(self, client, q):
        while True:
            body = q.get()
            self._send_with_retries(client, body)

    def _send_with_retries(self, client, body):
        for attempt in range(4):
            url = client.webhook_url
            if not url:
                return  # nobody listens (not registered, or unregistered): drop
            try:
                req = urllib.request.Request(url, data=body, method="POST", headers={
                    "Content-Type": "application/json", "User-Agent": "bankagg-webhooks/1"})
                with self.opener.open(req, timeout=5) as r:
                    r.read()
                return
            except urllib.error.HTTPError as e:
                if 400 <= e.code < 500 and e.code not in (408, 429):
                    return
            except Exception:
                pass
            time.sleep(0.5 * (2 ** attempt))


# ----------------------------------------------------------------------------------------------
# The service
# ----------------------------------------------------------------------------------------------

MERCHANTS = [
    ("Grocery Market", "groceries", -85.0, -8.0),
    ("Corner Bakery", "groceries", -12.0, -2.0),
    ("City Transit", "transport", -40.0, -2.5),
    ("Fuel Station", "transport", -90.0, -30.0),
    ("Streaming Service", "entertainment", -15.99, -7.99),
    ("Restaurant Luna", "dining", -95.0, -18.0),
    ("Pharmacy", "health", -35.0, -4.0),
    ("Online Shop", "shopping", -160.0, -9.0),
    ("Electricity Co", "utilities", -120.0, -45.0),
    ("ATM Withdrawal", "cash", -200.0, -20.0),
]
INCOME = [("Salary ACME GmbH", "income", 2400.0, 3900.0), ("Refund", "income", 5.0, 80.0),
          ("Transfer from savings", "transfer", 50.0, 500.0)]
INSTITUTIONS = [("ins_DEMOBANK", "Demo Bank"), ("ins_NORTHCU", "North Credit Union"),
                ("ins_HARBOR", "Harbor Savings")]


class Service:
    def __init__(self, keys):
        self.lock = threading.RLock()
        self.clients = {}
        self.key_index = {}
        for k in keys:
            c = Client(k)
            self.clients[c.id] = c
            self.key_index[self._index_key(k)] = c
        self.connections = {}
        self.accounts = {}
        self.txn_index = {}
        self.dispatcher = Dispatcher()
        self.page_cache = {}
        self.account_cache = {}
        self.buckets = {}
        if CFG.background_sync:
            threading.Thread(target=self._background_sync, daemon=True).start()

    # -- authentication ------------------------------------------------------------------------

    def _index_key(self, key):
        n = CFG.key_index_prefix
        return key[:n] if n else key

    def authenticate(self, header):
        if not header:
            raise ApiError(401, "missing_api_key", "The Authorization header is missing.")
        m = re.match(r"^Bearer[ ]+(\S+)$", header.strip())
        if not m:
            raise ApiError(401, "invalid_authorization",
                           "The Authorization header must be 'Bearer <API_KEY>'.")
        token = m.group(1)
        client = self.key_index.get(self._index_key(token))
        if client is None:
            raise ApiError(401, "invalid_api_key", "The API key is not valid.")
        n = CFG.key_index_prefix or max(len(token), len(client.key))
        if not hmac.compare_digest(client.key[:n].encode(), token[:n].encode()):
            raise ApiError(401, "invalid_api_key", "The API key is not valid.")
        return client

    def client_by_key_hash(self, digest):
        for c in self.clients.values():
            if digest and hmac.compare_digest(hashlib.sha256(c.key.encode()).hexdigest(), digest):
                return c
        return None

    def rate_check(self, client):
        rate = CFG.rate_limit
        if not rate:
            return None
        with self.lock:
            tokens, last = self.buckets.get(client.id, (rate, time.monotonic()))
            t = time.monotonic()
            tokens = min(rate, tokens + (t - last) * rate)
            if tokens < 1.0:
                self.buckets[client.id] = (tokens, t)
                return max(1, int((1.0 - tokens) / rate + 0.999))
            self.buckets[client.id] = (tokens - 1.0, t)
            return None

    # -- events --------------------------------------------------------------------------------

    def _event_id(self, conn):
        if CFG.event_ids == "time-seq":
            # sortable ids, ULID style: 10 characters of timestamp, then the connection's event
            # counter (the timestamp is time.time() truncated, i.e. seconds, not milliseconds)
            seq = conn.event_seq
            conn.event_seq += 1
            return "evt_" + to_crockford(int(time.time()), 10) + to_crockford(seq, 16)
        return new_id("evt_")

    def emit(self, conn, etype, **extra):
        client = conn.client
        if CFG.client_from_request_context and REQUEST_CONTEXT["client"] is not None:
            client_id = REQUEST_CONTEXT["client"].id
        else:
            client_id = client.id
        eid = self._event_id(conn)
        ts = iso_ms()
        data = {"eventId": eid, "type": etype, "occurredAt": ts, "clientId": client_id,
                "connectionId": conn.id}
        data.update(extra)
        self.dispatcher.publish(client, {"id": eid, "type": etype, "created_at": ts,
                                         "data": data})

    def _set_status(self, conn, new):
        prev = conn.status
        if prev == new:
            return
        conn.status = new
        err = None
        if new == "FAILED_AUTH":
            err = {"code": "invalid_credentials", "message": "The bank rejected the credentials."}
        elif new == "ERROR":
            err = {"code": "institution_error", "message": "Unexpected error at the bank."}
        self.emit(conn, "connection." + new.lower(), previousStatus=prev.lower(), error=err)

    # -- connections ---------------------------------------------------------------------------

    def create_connection(self, client):
        with self.lock:
            conn = Connection(client)
            self.connections[conn.id] = conn
            # connection.created announces the initial state; it has no previous state
            self.emit(conn, "connection.created", previousStatus="none", error=None)
            return {"connectionId": conn.id, "status": conn.status, "widgetToken": conn.token}

    def _owned_connection(self, client, conn_id):
        conn = self.connections.get(conn_id)
        if conn is None:
            raise ApiError(404, "connection_not_found", "No such connection.")
        if conn.client is not client:
            if CFG.error_style == "problem":
                raise ApiError(403, "forbidden", "This connection belongs to another client.")
            raise ApiError(404, "connection_not_found", "No such connection.")
        return conn

    def _owned_account(self, client, acc_id, check_owner=True):
        acc = self.accounts.get(acc_id)
        if acc is None:
            raise ApiError(404, "account_not_found", "No such account.")
        if check_owner and acc.client is not client:
            if CFG.error_style == "problem":
                raise ApiError(403, "forbidden", "This account belongs to another client.")
            raise ApiError(404, "account_not_found", "No such account.")
        return acc

    def connection_accounts(self, client, conn_id):
        with self.lock:
            conn = self._owned_connection(client, conn_id)
            if conn.status != "CONNECTED":
                st = 400 if CFG.error_style == "problem" else 409
                raise ApiError(st, "connection_not_connected",
                               "The connection is %s; accounts are available once it is "
                               "CONNECTED." % conn.status)
            return [self.accounts[a].to_json() for a in conn.account_ids if a in self.accounts]

    def get_account(self, client, acc_id):
        ttl = CFG.account_cache_ttl
        if ttl:
            hit = self.account_cache.get(acc_id)
            if hit and hit[0] > time.monotonic() and (
                    not CFG.single_account_owner_check or hit[1] is client):
                return hit[2]
        with self.lock:
            acc = self._owned_account(client, acc_id, CFG.single_account_owner_check)
            body = acc.to_json()
            if ttl:
                self.account_cache[acc_id] = (time.monotonic() + ttl, acc.client, body)
            return body

    # -- transactions listing ------------------------------------------------------------------

    def _parse_limit(self, raw):
        if raw is None:
            return CFG.page_default
        try:
            f = float(raw)
        except ValueError:
            raise ApiError(400, "invalid_limit", "limit must be a positive integer.")
        if f != f or f != int(f) or f < 1:
            raise ApiError(400, "invalid_limit", "limit must be a positive integer.")
        n = int(f)
        if n > CFG.page_max:
            if CFG.reject_over_max:
                raise ApiError(400, "invalid_limit", "limit must be at most %d." % CFG.page_max)
            n = CFG.page_max
        return n

    def _rows(self, acc):
        if CFG.sharded_listing:
            # rows are spread over two shards read in parallel and merged as they arrive
            shards = [[], []]
            for t in acc.txns.values():
                shards[int(hashlib.md5(t.id.encode()).hexdigest(), 16) % 2].append(t)
            merged, ml = [], threading.Lock()

            def read(rows):
                time.sleep(random.random() * 0.003)  # shard round trip
                with ml:
                    merged.extend(rows)
            ths = [threading.Thread(target=read, args=(s,)) for s in shards]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            return sorted(merged, key=lambda t: t.date, reverse=CFG.descending)
        return sorted(acc.txns.values(), key=Txn.sort_key, reverse=CFG.descending)

    def _cursor_key(self, acc, cursor):
        t = acc.txns.get(cursor)
        if t is not None:
            return t.sort_key()
        return acc.deleted.get(cursor)

    def _after(self, row, ck):
        if CFG.cursor_date_only:
            rk, ck = row.date, ck[0]
        else:
            rk = row.sort_key()
        return rk < ck if CFG.descending else rk > ck

    def list_transactions(self, client, acc_id, limit_raw, cursor):
        limit = self._parse_limit(limit_raw)
        with self.lock:
            acc = self._owned_account(client, acc_id)
            ck = (acc.id, acc.version, limit, cursor)
            hit = self.page_cache.get(ck)
            if hit and hit[0] > time.monotonic():
                return hit[1]
            rows = self._rows(acc)
            if cursor:
                if CFG.sharded_listing:
                    ids = [r.id for r in rows]
                    if cursor not in ids:
                        raise ApiError(400, "invalid_cursor", "starting_after is not a "
                                       "transaction of this account.")
                    rows = rows[ids.index(cursor) + 1:]
                else:
                    key = self._cursor_key(acc, cursor)
                    if key is None:
                        raise ApiError(400, "invalid_cursor", "starting_after is not a "
                                       "transaction of this account.")
                    rows = [r for r in rows if self._after(r, key)]
            page = rows[:limit]
            if CFG.has_more_last_index:
                last_index = len(rows) - 1
                has_more = limit < last_index
            else:
                has_more = len(rows) > limit
            body = {"data": [t.to_json() for t in page], "has_more": has_more}
            if page and (has_more or CFG.cursor_on_last_page):
                body["next_cursor"] = page[-1].id
            self.page_cache[ck] = (time.monotonic() + 30.0, body)
            if len(self.page_cache) > 5000:
                self.page_cache.clear()
            return body

    # -- bank side: generating and syncing data ------------------------------------------------

    def _txn_id(self, acc):
        if CFG.txn_ids == "account-seq":
            acc.seq += 1
            return "txn_" + to_crockford(acc.seq, 26)
        if CFG.txn_ids == "bank-ref":
            # the bank's reference is the row number of the statement line
            return "txn_" + b32_26("%s/%d" % (acc.id, len(acc.txns) + acc.synced_pending))
        return new_id("txn_")

    def _bank_txn(self, acc, day, desc, category, amount):
        t = Txn()
        t.account_id = acc.id
        t.amount = round(amount, 2)
        t.currency = acc.currency
        t.description = desc
        t.date = day.isoformat()
        t.category = category
        t.created_at = iso_ms()
        t.ref = None
        t.id = self._txn_id(acc)
        acc.synced_pending += 1
        acc.feed.append(t)
        return t

    def _account_id(self, conn, position):
        if CFG.account_ids == "positional":
            # stable across re-links: the same client's n-th account keeps its id
            return "acc_" + b32_26("%s:%d" % (conn.client.id, position))
        return new_id("acc_")

    def _populate(self, conn):
        if conn.populated:
            return
        conn.populated = True
        rng = random.Random()
        inst_id, inst_name = rng.choice(INSTITUTIONS)
        institution = {"id": inst_id, "name": inst_name, "logo": None}
        kinds = [("checking", "EUR", "Everyday Account"), ("savings", "EUR", "Savings"),
                 ("credit_card", "EUR", "Travel Card"),
                 rng.choice([("brokerage", "EUR", "Brokerage"), ("pension", "EUR", "Pension")])]
        if rng.random() < 0.5:
            kinds.insert(1, ("checking", "GBP", "GBP Account"))
        today = date.today()
        for pos, (kind, cur, name) in enumerate(kinds):
            acc = Account(self._account_id(conn, pos), conn, kind, cur, name,
                          "****%04d" % rng.randint(0, 9999))
            acc.institution = institution
            if kind == "checking":
                n = rng.randint(30, 130) if cur == "EUR" else rng.randint(3, 12)
            elif kind == "savings":
                n = rng.choice([0, 0, 2, 4])
            elif kind == "credit_card":
                n = rng.randint(12, 40)
            else:
                n = rng.randint(0, 5)
            for i in range(n):
                day = today - timedelta(days=rng.randint(1, 90))
                if kind == "savings" or (kind in ("brokerage", "pension")):
                    desc, cat, lo, hi = ("Monthly deposit", "transfer", 25.0, 400.0)
                elif rng.random() < 0.12:
                    desc, cat, lo, hi = rng.choice(INCOME)
                else:
                    desc, cat, lo, hi = rng.choice(MERCHANTS)
                self._bank_txn(acc, day, desc, cat, rng.uniform(lo, hi))
            if kind == "checking" and cur == "EUR":
                # two coffees on the same morning: genuinely two transactions
                day = today - timedelta(days=rng.randint(2, 20))
                self._bank_txn(acc, day, "Coffee Bar", "dining", -3.8)
                self._bank_txn(acc, day, "Coffee Bar", "dining", -3.8)
            if kind == "credit_card":
                acc.balance = -round(rng.uniform(50, 1500), 2)
                limit = 3000.0
                acc.credit_limit = {"amount": limit, "currency": cur}
                acc.available = limit + acc.balance
                if rng.random() < 0.5:
                    acc.currency_balances = [{"currency": "USD",
                                              "balance": -round(rng.uniform(5, 200), 2)}]
            elif kind in ("brokerage", "pension"):
                acc.positions = [
                    {"symbol": "VWCE", "name": "FTSE All-World ETF",
                     "quantity": rng.randint(1, 80), "price": 112.4, "currency": cur},
                    {"symbol": "EUNA", "name": "Global Aggregate Bond ETF",
                     "quantity": rng.randint(1, 60), "price": 4.9, "currency": cur},
                ]
                acc.balance = round(sum(p["quantity"] * p["price"] for p in acc.positions), 2)
                acc.available = acc.balance
            else:
                acc.balance = round(rng.uniform(200, 8000), 2)
                acc.available = acc.balance
            self.accounts[acc.id] = acc
            conn.account_ids.append(acc.id)
            self._resync(acc)

    def _resync(self, acc):
        """Bring the store up to date with the bank feed.  Returns True if anything changed."""
        changed = False
        first_import = not acc.imported
        acc.imported = True
        start = 0 if CFG.full_resync else acc.synced
        for t in acc.feed[start:]:
            if not CFG.full_resync and t.id in acc.deleted:
                continue
            if t.id in acc.txns and acc.txns[t.id] is t:
                continue
            acc.txns[t.id] = t
            self.txn_index[t.id] = acc.id
            changed = True
        acc.synced = len(acc.feed)
        acc.synced_pending = 0
        # duplicates (pending, then posted) only show up on re-syncs, never in the first import
        if not first_import and self._dedupe(acc):
            changed = True
        if changed:
            acc.touch()
            acc.last_synced_at = iso_ms()
        return changed

    def _dedupe(self, acc):
        """A bank sometimes reports one line twice (pending, then posted)."""
        seen, drop = set(), []
        for t in sorted(acc.txns.values(), key=lambda t: t.created_at):
            if CFG.dedupe_key == "bank-ref":
                k = t.id
            else:
                k = (t.date, t.amount, t.description)
            if k in seen:
                drop.append(t.id)
            seen.add(k)
        for tid in drop:
            del acc.txns[tid]
        return bool(drop)

    def _sync_new_activity(self, conn, target, count):
        """The bank reports `count` new lines on `target`; sync the connection and announce."""
        today = date.today()
        rng = random.Random()
        delta = 0.0

        def bank_reports():
            nonlocal delta
            for _ in range(count):
                desc, cat, lo, hi = rng.choice(MERCHANTS + INCOME[:1] if rng.random() < 0.2
                                               else MERCHANTS)
                t = self._bank_txn(target, today, desc, cat, rng.uniform(lo, hi))
                delta += t.amount

        def commit():
            with self.lock:
                bank_reports()
                target.balance = round(target.balance + delta, 2)
                target.available = round(
                    (target.credit_limit["amount"] + target.balance) if target.credit_limit
                    else target.balance, 2)
                for acc in [self.accounts[a] for a in conn.account_ids if a in self.accounts]:
                    self._resync(acc)
                target.touch()
                target.last_synced_at = iso_ms()
                return acc

        if CFG.write_behind:
            # the write goes through the write-behind queue; announce right away
            threading.Timer(CFG.write_behind, commit).start()
            self.emit(conn, "accounts.updated", accountId=target.id)
            return
        acc = commit()
        announced = acc if CFG.event_account_from_loop else target
        self.emit(conn, "accounts.updated", accountId=announced.id)

    def _delete(self, conn, acc, tid):
        listing = self._rows(acc)
        pos = next((i for i, r in enumerate(listing) if r.id == tid), 0)
        t = acc.txns.pop(tid)
        acc.deleted[tid] = t.sort_key()
        if CFG.delete_bumps_version:
            acc.touch()
        if CFG.delete_event_from_listing:
            listing = self._rows(acc)  # refreshed listing, for the notification payload
            victim = listing[min(pos, len(listing) - 1)] if listing else t
            tid = victim.id
        self.emit(conn, "transaction.deleted", accountId=acc.id, transactionId=tid)

    def _background_sync(self):
        while True:
            time.sleep(3.0)
            with self.lock:
                conns = [c for c in self.connections.values()
                         if c.status == "CONNECTED" and c.projected == "CONNECTED"
                         and not c.steps and c.account_ids]
                for c in conns:
                    if random.random() < 0.25:
                        target = self.accounts.get(random.choice(c.account_ids))
                        if target is not None:
                            self._sync_new_activity(c, target, 1)

    # -- the test hook: actions on connections -------------------------------------------------

    FROM_ANY_LIVE = ("CREATED", "CREDENTIALS_SUBMITTED", "VERIFYING", "CONNECTED",
                     "MFA_REQUIRED", "FAILED_AUTH", "ERROR")
    LOGIN_FROM = ("CREATED", "MFA_REQUIRED", "FAILED_AUTH", "ERROR")

    def plan(self, conn, action, body):
        """Validate `action` against the state the connection will be in once its accepted
        actions have run, and return its steps."""
        p = conn.projected
        login = [("status", "CREDENTIALS_SUBMITTED"), ("status", "VERIFYING")]
        if action == "connect":
            if p not in self.LOGIN_FROM:
                return None, "connect is not possible from %s" % p
            return login + [("populate",), ("status", "CONNECTED")], "CONNECTED"
        if action == "fail_auth":
            if p not in self.LOGIN_FROM:
                return None, "fail_auth is not possible from %s" % p
            return login + [("status", "FAILED_AUTH")], "FAILED_AUTH"
        if action == "require_mfa":
            if p not in ("CREATED", "FAILED_AUTH", "ERROR"):
                return None, "require_mfa is not possible from %s" % p
            return login + [("status", "MFA_REQUIRED")], "MFA_REQUIRED"
        if action == "error":
            if p not in self.FROM_ANY_LIVE or p == "ERROR":
                return None, "error is not possible from %s" % p
            return [("status", "ERROR")], "ERROR"
        if action == "disconnect":
            if p == "DISCONNECTED":
                return None, "already disconnected"
            return [("status", "DISCONNECTED")], "DISCONNECTED"
        if action in ("update_accounts", "delete_transaction"):
            if p != "CONNECTED":
                return None, "%s needs a CONNECTED connection (it is %s)" % (action, p)
            acc_id = body.get("accountId")
            if acc_id and (acc_id not in conn.account_ids or acc_id not in self.accounts):
                return None, "account is not one of this connection's"
            if action == "update_accounts":
                return [("update", acc_id)], "CONNECTED"
            tid = body.get("transactionId")
            if tid:
                if acc_id and tid in self.accounts[acc_id].txns:
                    owner = acc_id
                else:
                    owner = self.txn_index.get(tid)
                if owner is None or owner not in conn.account_ids \
                        or tid not in self.accounts[owner].txns:
                    return None, "transaction is not a live one of this connection's"
                if acc_id and owner != acc_id:
                    return None, "transaction is not one of that account's"
                acc_id = owner
            return [("delete", acc_id, tid)], "CONNECTED"
        return "unsupported", None

    def run_step(self, conn, step):
        kind = step[0]
        if kind == "status":
            self._set_status(conn, step[1])
        elif kind == "populate":
            if CFG.populate_after_connected:
                def later():
                    with self.lock:
                        self._populate(conn)
                threading.Timer(CFG.populate_after_connected, later).start()
            else:
                self._populate(conn)
        elif kind == "update":
            accs = [self.accounts[a] for a in conn.account_ids if a in self.accounts]
            if not accs:
                return
            target = self.accounts.get(step[1]) if step[1] else accs[0]
            self._sync_new_activity(conn, target, random.randint(1, 3))
        elif kind == "delete":
            acc_id, tid = step[1], step[2]
            candidates = [acc_id] if acc_id else list(conn.account_ids)
            for a in candidates:
                acc = self.accounts.get(a)
                if acc is None:
                    continue
                if tid and tid in acc.txns:
                    return self._delete(conn, acc, tid)
                if not tid and acc.txns:
                    rows = self._rows(acc)
                    return self._delete(conn, acc, rows[len(rows) // 2].id)

    def _worker(self, conn):
        while True:
            time.sleep(CFG.step_delay)
            with self.lock:
                if not conn.steps:
                    conn.worker = None
                    return
                step = conn.steps.pop(0)
                self.run_step(conn, step)

    def admin(self, body):
        action = body.get("action", "")
        if action in ("register_webhook", "unregister_webhook"):
            pairs = [("apiKey", "webhookUrl"), ("secondApiKey", "secondWebhookUrl")]
            done = 0
            for kf, uf in pairs:
                client = self.client_by_key_hash(body.get(kf))
                if client is None or not body.get(uf):
                    continue
                client.webhook_url = body[uf] if action == "register_webhook" else None
                done += 1
            if not done:
                return 400, {"error": {"code": "bad_request", "message": "no client named"}}
            return 200, {"webhooks": "per-client"}
        with self.lock:
            conn = self.connections.get(body.get("connectionId", ""))
            if conn is None:
                return 404, {"error": {"code": "not_found", "message": "no such connection"}}
            steps, target = self.plan(conn, action, body)
            if steps == "unsupported":
                return 501, {"error": {"code": "unsupported", "message": action}}
            if steps is None:
                return 409, {"error": {"code": "invalid_transition", "message": target}}
            if action in ("update_accounts", "delete_transaction") and conn.status != "CONNECTED" \
                    and not CFG.step_delay:
                return 409, {"error": {"code": "invalid_transition", "message": "not connected"}}
            conn.projected = target
            if not CFG.step_delay:
                for s in steps:
                    self.run_step(conn, s)
            else:
                conn.steps.extend(steps)
                if conn.worker is None:
                    conn.worker = threading.Thread(target=self._worker, args=(conn,), daemon=True)
                    conn.worker.start()
            return 200, {"accepted": action}

    # -- widget ---------------------------------------------------------------------------------

    def widget_session(self, token):
        with self.lock:
            conn = next((c for c in self.connections.values() if c.token == token), None)
            if conn is None:
                raise ApiError(401, "invalid_widget_token", "The widget token is not valid.")
            out = {"connectionId": conn.id, "status": conn.status,
                   "institutions": [{"id": i, "name": n} for i, n in INSTITUTIONS]}
            if CFG.session_includes_client:
                out["client"] = {"id": conn.client.id, "apiKey": conn.client.key}
            return out


WIDGET_JS = r"""/* %(service)s connect widget */
(function () {
  var BASE = %(base)s;
  try {
    var cs = document.currentScript;
    if (cs && cs.src) { BASE = new URL(cs.src).origin; }
  } catch (e) {}
  function el(tag, text) { var e = document.createElement(tag); if (text) e.textContent = text; return e; }
  function open(options, connectionId, onSuccess) {
    var o = (options && typeof options === "object") ? options
          : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    if (!o.token || typeof o.token !== "string") { throw new TypeError("open: token is required"); }
    var root = el("div");
    root.setAttribute("data-widget", "%(service)s-connect");
    root.style.cssText = "position:fixed;inset:10%%;background:#fff;border:1px solid #888;padding:16px;font:14px sans-serif;z-index:99999";
    root.appendChild(el("h2", "Connect your bank"));
    var status = el("p", "Loading\u2026");
    root.appendChild(status);
    (document.body || document.documentElement).appendChild(root);
    var done = false, polls = 0;
    function poll() {
      fetch(BASE + "/widget/session?token=" + encodeURIComponent(o.token), { credentials: "omit" })
        .then(function (r) { return r.json(); })
        .then(function (s) {
          status.textContent = "Connection " + (s.connectionId || "") + ": " + (s.status || "unknown");
          if (s.status === "CONNECTED" && !done) {
            done = true;
            if (typeof o.onSuccess === "function") {
              o.onSuccess({ connectionId: s.connectionId, status: s.status });
            }
          } else if (!done && ++polls < 20) { setTimeout(poll, 1500); }
        })
        .catch(function () { status.textContent = "Could not reach the service."; });
    }
    poll();
    return { close: function () { done = true; if (root.parentNode) root.parentNode.removeChild(root); } };
  }
  window.%(global)s = { open: open, version: "1.0.0" };
})();
"""


# ----------------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------------

SERVICE = None
SERVICE_NAME = "acme"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "BankAgg/1.4"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def _send(self, status, body, ctype="application/json", headers=None):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _error(self, e, headers=None):
        if CFG.error_style == "problem":
            st = e.status
            if e.code in ("invalid_api_key",):
                st = 403
            body = {"type": "about:blank", "title": e.code.replace("_", " "), "status": st,
                    "detail": e.message}
            return self._send(st, body, "application/problem+json", headers)
        return self._send(e.status, {"error": {"code": e.code, "message": e.message}},
                          headers=headers)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def do_GET(self):
        self.route("GET")

    def do_HEAD(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PUT(self):
        self.route("PUT")

    def do_PATCH(self):
        self.route("PATCH")

    def do_DELETE(self):
        self.route("DELETE")

    def do_OPTIONS(self):
        self._read_body()
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Content-Type")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def route(self, method):
        try:
            self._route(method)
        except ApiError as e:
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # pragma: no cover
            print("internal error: %r" % (e,), file=sys.stderr)
            try:
                self._send(500, {"error": {"code": "internal", "message": "internal error"}})
            except Exception:
                pass

    def _route(self, method):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        qs = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        cors = {"Access-Control-Allow-Origin": "*"}

        if path == "/__admin/action":
            if method != "POST":
                raise ApiError(405, "method_not_allowed", "POST only")
            if self.client_address[0] not in ("127.0.0.1", "::1"):
                raise ApiError(404, "not_found", "Not found.")
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                raise ApiError(400, "bad_request", "body must be JSON")
            st, ans = SERVICE.admin(req if isinstance(req, dict) else {})
            return self._send(st, ans)

        if path == "/widget/%s-connect.js" % SERVICE_NAME and method == "GET":
            host = self.headers.get("Host") or "127.0.0.1"
            glob = re.sub(r"[^A-Za-z0-9_]", "", SERVICE_NAME.title().replace("-", "")) + "Connect"
            js = WIDGET_JS % {"service": SERVICE_NAME, "global": glob,
                              "base": json.dumps("http://" + host)}
            return self._send(200, js.encode(), "application/javascript; charset=utf-8", cors)
        if path == "/widget/session" and method == "GET":
            token = (qs.get("token") or [""])[0]
            try:
                return self._send(200, SERVICE.widget_session(token), headers=cors)
            except ApiError as e:
                return self._error(e, cors)

        if not path.startswith("/v1/"):
            raise ApiError(404, "not_found", "Not found.")

        client = SERVICE.authenticate(self.headers.get("Authorization"))
        REQUEST_CONTEXT["client"] = client
        retry = SERVICE.rate_check(client)
        if retry:
            return self._send(429, {"error": {"code": "rate_limited",
                                              "message": "Too many requests."}},
                              headers={"Retry-After": str(retry)})

        parts = path.rstrip("/").split("/")[2:]
        if parts == ["connections"]:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", "Use POST to create a connection.")
            return self._send(CFG.create_status, SERVICE.create_connection(client))
        if len(parts) == 3 and parts[0] == "connections" and parts[2] == "accounts":
            if method != "GET":
                raise ApiError(405, "method_not_allowed", "Use GET.")
            return self._send(200, SERVICE.connection_accounts(client, parts[1]))
        if len(parts) == 2 and parts[0] == "accounts":
            if method != "GET":
                raise ApiError(405, "method_not_allowed", "Use GET.")
            return self._send(200, SERVICE.get_account(client, parts[1]))
        if len(parts) == 3 and parts[0] == "accounts" and parts[2] == "transactions":
            if method != "GET":
                raise ApiError(405, "method_not_allowed", "Use GET.")
            limit = (qs.get("limit") or [None])[0]
            cursor = (qs.get("starting_after") or [None])[0]
            return self._send(200, SERVICE.list_transactions(client, parts[1], limit,
                                                             cursor or None))
        raise ApiError(404, "not_found", "Not found.")


def main():
    global CFG, SERVICE, SERVICE_NAME
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="acme")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    a = ap.parse_args()
    if a.variant not in LEGAL | VIOLATIONS:
        print("unknown variant %r" % a.variant, file=sys.stderr)
        return 2
    keys = [k for k in os.environ.get("FOREIGN_API_KEYS", "").split(",") if k]
    if not keys:
        print("FOREIGN_API_KEYS is empty", file=sys.stderr)
        return 2
    CFG = Config(a.variant)
    SERVICE_NAME = a.service
    SERVICE = Service(keys)
    httpd = ThreadingHTTPServer((a.host, a.port), Handler)
    httpd.daemon_threads = True
    print("PORT %d" % httpd.server_address[1], flush=True)
    if a.exit_on_stdin_eof:
        def watch():
            try:
                while sys.stdin.read(4096):
                    pass
            except Exception:
                pass
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
