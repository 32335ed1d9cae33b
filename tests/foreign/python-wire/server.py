#!/usr/bin/env python3
"""python-wire: a bank-aggregation staging server written from service-spec.md alone.

Standard library only. One process serves the API (`/v1/...`), the widget (`/widget/...`) and a
loopback test hook (`/__admin/action`) that driver.py calls. `--variant NAME` switches exactly one
behaviour (VARIANTS below; `none` is the clean server). Line 1 of stdout is the base URL; the
process ends when its stdin closes.
"""
import argparse
import base64
import gzip
import hashlib
import http.client
import json
import os
import queue
import random
import secrets
import sys
import threading
import time
import unicodedata
import urllib.parse
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from zoneinfo import ZoneInfo
except ImportError:  # pragma: no cover
    ZoneInfo = None

VARIANTS = {
    "none": "legal",
    # violations
    "latin1-bodies": "violation",
    "phantom-304": "violation",
    "partial-content-206": "violation",
    "numeric-currency": "violation",
    "synced-at-backwards": "violation",
    "exclude-none-events": "violation",
    "read-echo-updated": "violation",
    "onsuccess-no-metadata": "violation",
    "split-surrogate": "violation",
    "create-dedup-window": "violation",
    "delivery-bom": "violation",
    "institution-numeric-id": "violation",
    "token-embeds-key": "violation",
    # legal choices
    "early-hints-103": "legal",
    "gzip-unasked": "legal",
    "iso-basic-timestamps": "legal",
    "dedup-unseen-deleted": "legal",
    "global-non-enumerable": "legal",
    "bank-local-dates": "legal",
    "synced-at-object": "legal",
    "nfd-strings": "legal",
    "bullet-mask": "legal",
    "float-balances": "legal",
}

# Written, run once, then withdrawn from the score (VARIANTS.md, "Withdrawn"): too close to an
# earlier target's class, or not legal beyond doubt. Still runnable by name.
WITHDRAWN = {
    "xssi-prefix": "violation",
    "unicode-ids": "legal",
    "no-next-cursor": "legal",
    "relink-new-accounts": "legal",
}

VARIANT = "none"
SERVICE = "wire"
ADMIN_TOKEN = os.environ.get("WIRE_ADMIN_TOKEN", "adm_wire_foreign")
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# unicode-ids: upper-case letters of the bank's own alphabets (Latin-1 and Greek), NFC.
UNICODE_ALPHABET = "0123456789\u00c4\u00d6\u00dc\u00c9\u00c8\u00c7\u00d1\u00d8\u00c5\u00c6\u0394\u03a3\u03a9\u03a6\u03a8\u039b\u0398\u039e"


def v(name):
    return VARIANT == name


# --------------------------------------------------------------------------------------------
# Clock and formats
# --------------------------------------------------------------------------------------------

_clock_lock = threading.Lock()
_last_ms = 0


def now_ms():
    """Milliseconds since the epoch, strictly increasing across the whole server."""
    global _last_ms
    with _clock_lock:
        t = int(time.time() * 1000)
        if t <= _last_ms:
            t = _last_ms + 1
        _last_ms = t
        return t


def iso_ms(ms):
    dt = datetime.fromtimestamp(ms // 1000, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def resource_ts(ms):
    """Timestamps of accounts and transactions (§2.2, §2.3: ISO 8601 UTC)."""
    if v("iso-basic-timestamps"):
        dt = datetime.fromtimestamp(ms // 1000, timezone.utc)
        return dt.strftime("%Y%m%dT%H%M%S.") + "%03dZ" % (ms % 1000)
    return iso_ms(ms)


def synced_value(ms):
    if v("synced-at-object"):
        return {"epochSecond": ms // 1000, "nano": (ms % 1000) * 1000000}
    return resource_ts(ms)


def bank_today():
    """The calendar day transactions are booked on."""
    if v("bank-local-dates"):
        if ZoneInfo is not None:
            return datetime.now(ZoneInfo("Pacific/Auckland")).date()
        return (datetime.now(timezone.utc) + timedelta(hours=13)).date()
    return datetime.now(timezone.utc).date()


def new_id(prefix, n=26):
    alphabet = UNICODE_ALPHABET if v("unicode-ids") else CROCKFORD
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n))


def money(x):
    return round(x + 0.0, 2)


def balance_value(x):
    """Balances: float-balances keeps the binary sum as it is (no rounding to cents)."""
    return x + 0.0 if v("float-balances") else round(x + 0.0, 2)


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------

LOCK = threading.RLock()
CLIENTS = []  # Client
CLIENT_BY_KEY = {}
CLIENT_BY_HASH = {}
CONNS = {}  # id -> Conn
ACCOUNTS = {}  # id -> Account
TXN_SEQ = [0]


class Client:
    def __init__(self, key):
        self.key = key
        self.key_hash = hashlib.sha256(key.encode()).hexdigest()
        self.id = new_id("cli_")
        self.webhook_url = None
        self.queue = queue.Queue()
        self.last_create = None  # (ms, conn) for create-dedup-window
        threading.Thread(target=self.deliver_loop, daemon=True).start()

    def enqueue(self, envelope):
        if self.webhook_url:
            self.queue.put(envelope)

    def deliver_loop(self):
        while True:
            env = self.queue.get()
            body = encode_delivery(env)
            delay = 0.5
            for _attempt in range(6):
                url = self.webhook_url
                if not url:
                    break
                if post_delivery(url, body, env["id"]):
                    break
                time.sleep(delay)
                delay *= 2


def encode_delivery(env):
    obj = nfd_all(env) if v("nfd-strings") else env
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if v("delivery-bom"):
        raw = b"\xef\xbb\xbf" + raw
    return raw


def post_delivery(url, body, event_id):
    try:
        u = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=5)
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        conn.request("POST", path, body=body, headers={
            "Content-Type": "application/json",
            "User-Agent": "wire-webhooks/1.0",
            "X-Wire-Event-Id": urllib.parse.quote(event_id, safe="_"),
        })
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return 200 <= resp.status < 300
    except Exception:
        return False


class Conn:
    def __init__(self, client):
        self.id = new_id("conn_")
        self.client = client
        self.status = "CREATED"
        self.token = "sess_" + "".join(secrets.choice(CROCKFORD) for _ in range(32))
        if v("token-embeds-key"):
            # a "stateless" widget token: everything the widget backend needs, no lookup
            exp = int(time.time()) + 1800
            raw = ("%s|%s|%d" % (client.key, self.id, exp)).encode()
            self.token = "sess_" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
        self.created_ms = now_ms()
        self.accounts = []  # account ids, in creation order
        self.last_event_ms = 0


class Txn:
    def __init__(self, account, amount, description, tdate, category, created_ms):
        TXN_SEQ[0] += 1
        self.seq = TXN_SEQ[0]
        self.id = new_id("txn_")
        self.account = account
        self.amount = money(amount)
        self.currency = account.currency_code
        self.description = description
        self.tdate = tdate
        self.category = category
        self.created_ms = created_ms
        self.deleted = False

    def key(self):
        return (self.tdate.isoformat(), self.seq)

    def to_json(self):
        desc = self.description
        if v("split-surrogate"):
            desc = utf16_cut(desc, 32)
        return {
            "id": self.id,
            "accountId": self.account.id,
            "amount": self.amount,
            "currency": self.currency,
            "description": desc,
            "transactionDate": self.tdate.isoformat(),
            "category": self.category,
            "status": "posted",
            "createdAt": resource_ts(self.created_ms),
        }


def utf16_cut(s, units):
    """Cut a string to `units` UTF-16 code units (the statement line of the card processor)."""
    raw = s.encode("utf-16-le", "surrogatepass")
    if len(raw) <= units * 2:
        return s
    return raw[: units * 2].decode("utf-16-le", "surrogatepass")


class Account:
    def __init__(self, conn, kind, name, currency, number, created_ms):
        self.id = new_id("acc_")
        self.conn = conn
        self.type = kind
        self.name = name
        self.currency_code = currency
        self.number = number
        self.created_ms = created_ms
        self.synced_ms = created_ms
        self.balance = 0.0
        self.available = 0.0
        self.credit_limit = None
        self.currency_balances = None
        self.positions = None
        self.txns = []  # in insertion order

    def currency(self):
        if v("numeric-currency") and self.type == "credit_card":
            return {"EUR": "978", "USD": "840", "GBP": "826"}[self.currency_code]
        return self.currency_code

    def masked(self):
        if v("bullet-mask"):
            return "\u2022\u2022\u2022\u2022 " + self.number[-4:]
        return "****" + self.number[-4:]

    def to_json(self):
        inst_id = 20041 if v("institution-numeric-id") else "ins_banque_demo"
        out = {
            "id": self.id,
            "connectionId": self.conn.id,
            "name": self.name,
            "type": self.type,
            "currency": self.currency(),
            "balance": balance_value(self.balance),
            "availableBalance": balance_value(self.available),
            "accountNumber": self.masked(),
            "createdAt": resource_ts(self.created_ms),
            "lastSyncedAt": synced_value(self.synced_ms),
            "institution": {"id": inst_id, "name": "Banque D\u00e9mo", "logo": None},
        }
        if self.credit_limit is not None:
            out["creditLimit"] = self.credit_limit
        if self.currency_balances is not None:
            out["currencyBalances"] = self.currency_balances
        if self.positions is not None:
            out["positions"] = self.positions
        return out

    def live(self):
        return [t for t in self.txns if not t.deleted]

    def ordered(self):
        return sorted(self.live(), key=lambda t: t.key(), reverse=True)


MERCHANTS = [
    ("Boulangerie P\u00e2tisserie Dupont", "groceries", -4.8),
    ("Caf\u00e9 de Flore", "restaurants", -12.5),
    ("M\u00fcller Drogerie Stra\u00dfe 12", "shopping", -23.9),
    ("Carrefour Market \u2013 r\u00e9f. 0042", "groceries", -64.37),
    ("SNCF Voyageurs \u2013 Paris \u2192 Lyon", "transport", -89.0),
    ("\u00c9lectricit\u00e9 de France \u2013 \u00e9ch\u00e9ance", "utilities", -71.2),
    ("Pharmacie de la Gare", "shopping", -9.95),
    ("Monoprix \u2013 Bd Saint-Germain", "groceries", -31.44),
    ("Cin\u00e9ma Path\u00e9 Wepler", "shopping", -11.9),
    ("Frais de tenue de compte", "fees", -2.5),
]
EMOJI_LINES = [
    ("Deliveroo \u00b7 Pizzeria Napoli commande", "\U0001F355", "restaurants", -27.4),
    ("Uber \u00b7 Course Gare de Lyon \u2192 Bastille", "\U0001F695", "transport", -18.6),
    ("Fnac Digitale \u00b7 abonnement musique", "\U0001F3B5", "shopping", -10.99),
]


def emoji_description(text, emoji, suffix):
    # The emoji sits at UTF-16 unit 31, so a 32-unit statement line ends in its high surrogate.
    head = (text + " " * 31)[:31]
    return head + emoji + " " + suffix


def build_accounts(conn, stamp):
    """Accounts and their history, created while the connection is being linked."""
    rng = random.Random(conn.id)
    today = bank_today()
    accs = []

    def add_txn(acc, amount, desc, days_ago, category):
        t = Txn(acc, amount, desc, today - timedelta(days=days_ago), category, stamp)
        acc.txns.append(t)
        return t

    def number():
        return "".join(rng.choice("0123456789") for _ in range(11))

    checking = Account(conn, "checking", "Compte Courant", "EUR", number(), stamp)
    bal = 1840.0
    for i in range(34):
        days = 1 + (i * 2) // 3
        if i % 11 == 5:
            amount, desc, cat = 2450.0, "Virement re\u00e7u \u2013 Salaire", "income"
        elif i % 7 == 3:
            text, emoji, cat, amount = EMOJI_LINES[(i // 7) % len(EMOJI_LINES)]
            desc = emoji_description(text, emoji, "n\u00b0 %04d" % rng.randint(1, 9999))
        else:
            desc, cat, base = MERCHANTS[rng.randrange(len(MERCHANTS))]
            amount = base * (0.6 + rng.random())
        add_txn(checking, amount, desc, days, cat)
        bal += money(amount)
    checking.balance = balance_value(bal)
    checking.available = checking.balance
    accs.append(checking)

    savings = Account(conn, "savings", "Livret \u00c9pargne", "EUR", number(), stamp)
    for m in range(6):
        add_txn(savings, 8.12 + m, "Int\u00e9r\u00eats cr\u00e9diteurs", 3 + 30 * m, "interest")
    savings.balance = 4210.55
    savings.available = savings.balance
    accs.append(savings)

    card = Account(conn, "credit_card", "Carte Visa Premier", "EUR", number(), stamp)
    owed = 0.0
    for i in range(18):
        if i % 6 == 2:
            text, emoji, cat, amount = EMOJI_LINES[i % len(EMOJI_LINES)]
            desc = emoji_description(text, emoji, "carte **%02d" % i)
        else:
            desc, cat, base = MERCHANTS[rng.randrange(len(MERCHANTS))]
            amount = base * (0.5 + rng.random())
        add_txn(card, amount, desc, 1 + i, cat)
        owed += money(amount)
    card.balance = balance_value(owed)
    card.credit_limit = {"amount": 3000.0, "currency": "EUR"}
    card.available = balance_value(3000.0 + card.balance)
    card.currency_balances = [{"currency": "USD", "balance": -42.1}]
    accs.append(card)

    broker = Account(conn, "brokerage", "Compte-Titres Ordinaire", "EUR", number(), stamp)
    add_txn(broker, -1500.0, "Achat 12 \u00d7 Air Liquide", 20, "investment")
    add_txn(broker, 1500.0, "Virement depuis Compte Courant", 21, "transfer")
    add_txn(broker, 18.4, "Dividende Air Liquide", 40, "income")
    broker.balance = 18.4
    broker.available = 18.4
    broker.positions = [
        {"symbol": "AI.PA", "name": "Air Liquide", "quantity": 12, "price": 171.3,
         "marketValue": 2055.6, "currency": "EUR"},
        {"symbol": "MC.PA", "name": "LVMH Mo\u00ebt Hennessy", "quantity": 1, "price": 612.0,
         "marketValue": 612.0, "currency": "EUR"},
    ]
    accs.append(broker)

    pension = Account(conn, "pension", "Plan d'\u00c9pargne Retraite", "EUR", number(), stamp)
    add_txn(pension, 150.0, "Versement programm\u00e9 PER", 12, "transfer")
    pension.balance = 9120.0
    pension.available = 9120.0
    pension.positions = [
        {"symbol": "FR0010315770", "name": "Fonds Euro S\u00e9curit\u00e9", "quantity": 1,
         "price": 9120.0, "marketValue": 9120.0, "currency": "EUR"},
    ]
    accs.append(pension)
    return accs


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------

def emit(conn, etype, extra):
    """Builds the envelope of §6.1 and queues it for the client's address."""
    ms = now_ms()
    if ms <= conn.last_event_ms:
        ms = conn.last_event_ms + 1
    conn.last_event_ms = ms
    eid = new_id("evt_")
    data = {
        "eventId": eid,
        "type": etype,
        "occurredAt": iso_ms(ms),
        "clientId": conn.client.id,
        "connectionId": conn.id,
    }
    data.update(extra)
    if v("exclude-none-events"):
        data = {k: val for k, val in data.items() if val is not None}
    env = {"id": eid, "type": etype, "created_at": iso_ms(ms), "data": data}
    stat("event " + etype)
    conn.client.enqueue(env)
    return env


def set_status(conn, new_status, error=None):
    prev = conn.status
    conn.status = new_status
    emit(conn, "connection." + new_status.lower(),
         {"previousStatus": prev.lower(), "error": error})


ERRORS = {
    "FAILED_AUTH": {"code": "invalid_credentials", "message": "The bank rejected the credentials."},
    "MFA_REQUIRED": {"code": "mfa_required", "message": "The bank asks for a second factor."},
    "ERROR": {"code": "bank_unavailable", "message": "The bank did not answer."},
}


# --------------------------------------------------------------------------------------------
# Lifecycle (the test hook and the widget both come here)
# --------------------------------------------------------------------------------------------

class Refused(Exception):
    pass


def attempt(conn, target):
    """connect / fail_auth / require_mfa: the user's part of the widget, then the bank's answer."""
    st = conn.status
    if target == "CONNECTED" and st == "CONNECTED":
        raise Refused("already connected")
    relink = False
    if st in ("CREATED", "FAILED_AUTH", "ERROR", "DISCONNECTED", "CONNECTED"):
        relink = st != "CREATED" and st != "CONNECTED"
        set_status(conn, "CREDENTIALS_SUBMITTED")
        set_status(conn, "VERIFYING")
    elif st == "MFA_REQUIRED":
        set_status(conn, "VERIFYING")
    else:
        raise Refused("connection is busy")
    if target == "CONNECTED":
        if conn.accounts and relink and v("relink-new-accounts"):
            stat("relinked with new accounts")
            for aid in conn.accounts:
                ACCOUNTS.pop(aid, None)
            conn.accounts = []
        if not conn.accounts:
            stamp = now_ms()
            for acc in build_accounts(conn, stamp):
                ACCOUNTS[acc.id] = acc
                conn.accounts.append(acc.id)
        set_status(conn, "CONNECTED")
    else:
        set_status(conn, target, dict(ERRORS[target]))


def drive(conn, action, account_id=None, txn_id=None):
    if action == "connect":
        attempt(conn, "CONNECTED")
    elif action == "fail_auth":
        attempt(conn, "FAILED_AUTH")
    elif action == "require_mfa":
        attempt(conn, "MFA_REQUIRED")
    elif action == "error":
        if conn.status == "ERROR":
            raise Refused("already in error")
        set_status(conn, "ERROR", dict(ERRORS["ERROR"]))
    elif action == "disconnect":
        if conn.status == "DISCONNECTED":
            raise Refused("already disconnected")
        set_status(conn, "DISCONNECTED")
    elif action == "update_accounts":
        update_accounts(conn, account_id)
    elif action == "delete_transaction":
        delete_transaction(conn, account_id, txn_id)
    else:
        raise NotImplementedError(action)


def pick_account(conn, account_id):
    if account_id:
        acc = ACCOUNTS.get(account_id)
        if acc is None or acc.conn is not conn:
            raise LookupError("unknown account")
        return acc
    return ACCOUNTS[conn.accounts[0]]


def update_accounts(conn, account_id):
    if conn.status != "CONNECTED":
        raise Refused("not connected")
    acc = pick_account(conn, account_id)
    stamp = now_ms()
    today = bank_today()
    desc, cat, base = MERCHANTS[random.randrange(len(MERCHANTS))]
    t = Txn(acc, base, desc, today, cat, stamp)
    acc.txns.append(t)
    acc.balance = balance_value(acc.balance + t.amount)
    acc.available = balance_value(acc.available + t.amount)
    if v("synced-at-backwards"):
        # the statement's "as of" day, midnight UTC
        d = datetime.now(timezone.utc).date()
        acc.synced_ms = int(datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp() * 1000)
    else:
        acc.synced_ms = stamp
    twin = None
    if v("dedup-unseen-deleted"):
        # the feed sent the same card payment twice (pending, then booked): the twin is
        # recognised while importing and removed before the import commits.
        twin = Txn(acc, base, desc, today, cat, stamp)
        twin.deleted = True
        acc.txns.append(twin)
    emit(conn, "accounts.updated", {"accountId": acc.id})
    if twin is not None:
        emit(conn, "transaction.deleted", {"accountId": acc.id, "transactionId": twin.id})


def delete_transaction(conn, account_id, txn_id):
    if conn.status != "CONNECTED":
        raise Refused("not connected")
    target = None
    if txn_id:
        for aid in conn.accounts:
            for t in ACCOUNTS[aid].txns:
                if t.id == txn_id:
                    target = t
        if target is None:
            raise LookupError("unknown transaction")
        if target.deleted:
            raise Refused("already deleted")
    else:
        accs = [pick_account(conn, account_id)] if account_id else [ACCOUNTS[a] for a in conn.accounts]
        for acc in accs:
            live = acc.ordered()
            if live:
                target = live[len(live) // 2]
                break
        if target is None:
            raise Refused("nothing to delete")
    target.deleted = True
    emit(conn, "transaction.deleted", {"accountId": target.account.id, "transactionId": target.id})


# --------------------------------------------------------------------------------------------
# Representation helpers
# --------------------------------------------------------------------------------------------

def decode_path(path):
    """Percent-decoded path; a request line sent as raw UTF-8 is read as UTF-8 too."""
    try:
        path = path.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    return urllib.parse.unquote(path, encoding="utf-8", errors="strict")


def nfd_all(obj):
    if isinstance(obj, str):
        return unicodedata.normalize("NFD", obj)
    if isinstance(obj, list):
        return [nfd_all(x) for x in obj]
    if isinstance(obj, dict):
        return {k: nfd_all(val) for k, val in obj.items()}
    return obj


def error_body(code, message):
    return {"error": {"code": code, "message": message}}


WIDGET_JS = r"""/* %SERVICE%-connect.js: hosted bank connection widget (v1.4.2) */
(function () {
  "use strict";
  var BASE = "%BASE%";
  var NAME = "%GLOBAL%";

  function post(path, body) {
    return fetch(BASE + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) { return r.json(); });
  }

  function open(a, b, c) {
    var opts = (a && typeof a === "object") ? a : { token: a, connectionId: b, onSuccess: c };
    if (!opts.token || !opts.connectionId) {
      throw new TypeError(NAME + ".open: token and connectionId are required");
    }
    var done = false;
    var overlay = document.createElement("div");
    overlay.setAttribute("data-wire-widget", "");
    overlay.style.cssText = "position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;" +
      "align-items:center;justify-content:center;z-index:2147483647;font:14px sans-serif";
    var box = document.createElement("form");
    box.style.cssText = "background:#fff;padding:24px;border-radius:8px;min-width:280px";
    box.innerHTML = '<h2 style="margin-top:0">Connect your bank</h2>' +
      '<p class="wire-status">Loading\u2026</p>' +
      '<label>Username <input name="username" autocomplete="username"></label><br>' +
      '<label>Password <input name="password" type="password"></label><br>' +
      '<button type="submit">Connect</button> <button type="button" class="wire-close">Cancel</button>';
    overlay.appendChild(box);
    (document.body || document.documentElement).appendChild(overlay);
    var statusLine = box.querySelector(".wire-status");

    function close() {
      done = true;
      if (overlay.parentNode) overlay.parentNode.removeChild(overlay);
    }
    box.querySelector(".wire-close").onclick = close;

    function finish(s) {
      if (done) return;
      close();
      var meta = { connectionId: s.connectionId, status: s.status, institution: s.institution };
      if (typeof opts.onSuccess === "function") {
        %CALLBACK%
      }
    }

    function poll() {
      if (done) return;
      post("/widget/session", { token: opts.token, connectionId: opts.connectionId }).then(function (s) {
        if (s && s.status === "CONNECTED") { finish(s); return; }
        if (s && s.status) statusLine.textContent = "Status: " + s.status.toLowerCase();
        setTimeout(poll, 700);
      }, function () { setTimeout(poll, 1500); });
    }

    box.onsubmit = function (ev) {
      ev.preventDefault();
      statusLine.textContent = "Verifying\u2026";
      post("/widget/credentials", {
        token: opts.token, connectionId: opts.connectionId,
        username: box.username.value, password: box.password.value
      }).then(poll, poll);
    };
    poll();
    return { close: close };
  }

  var api = { open: open, version: "1.4.2" };
  %EXPOSE%
})();
"""


def widget_script(base):
    glob = SERVICE[:1].upper() + SERVICE[1:] + "Connect"
    callback = "opts.onSuccess(meta);"
    if v("onsuccess-no-metadata"):
        callback = "api.lastResult = meta; opts.onSuccess.call(api);"
    expose = "window[NAME] = api;"
    if v("global-non-enumerable"):
        expose = ("Object.defineProperty(window, NAME, { value: api, enumerable: false, "
                  "writable: false, configurable: true });")
    return (WIDGET_JS.replace("%BASE%", base).replace("%GLOBAL%", glob)
            .replace("%SERVICE%", SERVICE).replace("%CALLBACK%", callback)
            .replace("%EXPOSE%", expose))


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

STATS = {}
STATS_LOCK = threading.Lock()


def stat(name):
    with STATS_LOCK:
        STATS[name] = STATS.get(name, 0) + 1


ETAGS = {}  # phantom-304: (client id, path) -> etag of the last 200 sent
ECHO = {}  # read-echo-updated: account id -> ms of the last echo


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "wire/1.4"

    def log_message(self, fmt, *args):
        if os.environ.get("WIRE_DEBUG"):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    # ---- plumbing ------------------------------------------------------------------------

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def raw(self, status, body, ctype, headers=()):
        stat("status %d" % status)
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
        for k, val in headers:
            self.send_header(k, val)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def api(self, status, obj, headers=()):
        """A JSON answer of the API (§4: bodies are JSON)."""
        headers = list(headers)
        if v("nfd-strings"):
            obj = nfd_all(obj)
        if v("latin1-bodies"):
            text = json.dumps(obj, ensure_ascii=False)
            body = text.encode("iso-8859-1", errors="replace")
            ctype = "application/json; charset=iso-8859-1"
        elif v("split-surrogate"):
            body = json.dumps(obj, ensure_ascii=True).encode("ascii")
            ctype = "application/json"
        else:
            body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
            ctype = "application/json; charset=utf-8"
        if v("xssi-prefix") and isinstance(obj, list):
            body = b")]}',\n" + body
        if v("early-hints-103") and self.request_version == "HTTP/1.1":
            stat("sent 103")
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\n"
                             b"Link: </widget/" + SERVICE.encode() + b"-connect.js>; rel=preload; as=script\r\n\r\n")
        if v("gzip-unasked") and self.gzip_acceptable():
            stat("gzip (Accept-Encoding: %s)" % self.headers.get("Accept-Encoding"))
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
            headers.append(("Vary", "Accept-Encoding"))
        self.raw(status, body, ctype, headers)
        return body

    def gzip_acceptable(self):
        ae = self.headers.get("Accept-Encoding")
        if ae is None:
            return True  # RFC 9110 §12.5.3: no preference, any coding is acceptable
        for part in ae.split(","):
            bits = [b.strip() for b in part.split(";")]
            coding = bits[0].lower()
            q = 1.0
            for b in bits[1:]:
                if b.lower().startswith("q="):
                    try:
                        q = float(b[2:])
                    except ValueError:
                        q = 0.0
            if coding in ("gzip", "*") and q > 0:
                return True
        return False

    def err(self, status, code, message, headers=()):
        return self.api(status, error_body(code, message), headers)

    def cors(self):
        return [("Access-Control-Allow-Origin", "*"),
                ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                ("Access-Control-Allow-Headers", "Content-Type"),
                ("Access-Control-Max-Age", "600")]

    def widget_json(self, status, obj):
        body = json.dumps(nfd_all(obj) if v("nfd-strings") else obj, ensure_ascii=False).encode("utf-8")
        self.raw(status, body, "application/json; charset=utf-8", self.cors())

    # ---- dispatch ------------------------------------------------------------------------

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_OPTIONS(self):
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/widget/"):
            self.raw(204, None, None, self.cors())
        else:
            self.raw(204, None, None, [("Allow", "GET, POST, OPTIONS")])

    def dispatch(self, method):
        try:
            parts = urllib.parse.urlsplit(self.path)
            path = decode_path(parts.path)
            query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
            body = self.read_body() if method in ("POST", "PUT", "PATCH") else b""
            if path.startswith("/widget/"):
                return self.widget(method, path, body)
            if path == "/__admin/action":
                return self.admin(method, body)
            if path.startswith("/v1/") or path == "/v1":
                return self.v1(method, path, query)
            return self.err(404, "not_found", "No such route.")
        except Exception as exc:  # never leave a socket without an answer
            import traceback
            traceback.print_exc()
            try:
                return self.err(500, "internal_error", "Internal error: %s" % type(exc).__name__)
            except Exception:
                pass

    # ---- widget ---------------------------------------------------------------------------

    def widget(self, method, path, body):
        if path == "/widget/%s-connect.js" % SERVICE and method in ("GET", "HEAD"):
            host = self.headers.get("Host") or "127.0.0.1"
            js = widget_script("http://" + host).encode("utf-8")
            return self.raw(200, js, "application/javascript; charset=utf-8",
                            self.cors() + [("Cross-Origin-Resource-Policy", "cross-origin"),
                                           ("Cache-Control", "no-cache")])
        if path in ("/widget/session", "/widget/credentials") and method == "POST":
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                return self.widget_json(400, error_body("bad_request", "Body is not JSON."))
            with LOCK:
                conn = CONNS.get(req.get("connectionId") or "")
                if conn is None or not secrets.compare_digest(conn.token, str(req.get("token") or "")):
                    return self.widget_json(401, error_body("invalid_widget_token", "Unknown widget session."))
                if path == "/widget/credentials":
                    user = str(req.get("username") or "")
                    action = {"fail": "fail_auth", "mfa": "require_mfa"}.get(user, "connect")
                    try:
                        drive(conn, action)
                    except Refused:
                        pass
                info = {"connectionId": conn.id, "status": conn.status,
                        "institution": {"id": "ins_banque_demo", "name": "Banque D\u00e9mo"}}
            return self.widget_json(200, info)
        return self.raw(404, b"not found", "text/plain", self.cors())

    # ---- test hook ------------------------------------------------------------------------

    def admin(self, method, body):
        if method != "POST" or self.headers.get("X-Admin-Token") != ADMIN_TOKEN:
            return self.raw(403, b"forbidden", "text/plain")
        if not self.client_address[0].startswith("127."):
            return self.raw(403, b"forbidden", "text/plain")
        req = json.loads(body or b"{}")
        action = req.get("action")
        with LOCK:
            if action in ("register_webhook", "unregister_webhook"):
                pairs = [(req.get("keyHash"), req.get("webhookUrl")),
                         (req.get("secondKeyHash"), req.get("secondWebhookUrl"))]
                for h, url in pairs:
                    cl = CLIENT_BY_HASH.get(h or "")
                    if cl is None or not url:
                        continue
                    cl.webhook_url = url if action == "register_webhook" else None
                    if action == "unregister_webhook":
                        while not cl.queue.empty():
                            try:
                                cl.queue.get_nowait()
                            except queue.Empty:
                                break
                return self.raw(200, json.dumps({"webhooks": "per-client"}).encode(), "application/json")
            conn = CONNS.get(req.get("connectionId") or "")
            if conn is None:
                return self.raw(404, b'{"error":"unknown connection"}', "application/json")
            try:
                drive(conn, action, req.get("accountId"), req.get("transactionId"))
            except Refused as exc:
                return self.raw(409, json.dumps({"error": str(exc)}).encode(), "application/json")
            except LookupError as exc:
                return self.raw(409, json.dumps({"error": str(exc)}).encode(), "application/json")
            except NotImplementedError:
                return self.raw(501, b'{"error":"unsupported"}', "application/json")
        return self.raw(200, b'{"ok":true}', "application/json")

    # ---- API ------------------------------------------------------------------------------

    def auth(self):
        h = self.headers.get("Authorization")
        if not h:
            return None, "missing_api_key"
        scheme, _, token = h.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None, "invalid_authorization"
        cl = CLIENT_BY_KEY.get(token.strip())
        if cl is None:
            return None, "invalid_api_key"
        return cl, None

    def v1(self, method, path, query):
        client, why = self.auth()
        if client is None:
            return self.err(401, why, "A valid API key is required.",
                            [("WWW-Authenticate", 'Bearer realm="wire"')])
        seg = [s for s in path.split("/") if s][1:]  # after "v1"
        if seg == ["connections"]:
            if method != "POST":
                return self.err(405, "method_not_allowed", "Use POST.", [("Allow", "POST")])
            return self.create(client)
        if len(seg) == 2 and seg[0] == "connections":
            if method not in ("GET", "HEAD"):
                return self.err(405, "method_not_allowed", "Use GET.", [("Allow", "GET")])
            with LOCK:
                conn = CONNS.get(seg[1])
                if conn is None or conn.client is not client:
                    return self.err(404, "connection_not_found", "No such connection.")
                out = {"connectionId": conn.id, "status": conn.status,
                       "createdAt": iso_ms(conn.created_ms)}
            return self.api(200, out)
        if len(seg) == 3 and seg[0] == "connections" and seg[2] == "accounts":
            if method not in ("GET", "HEAD"):
                return self.err(405, "method_not_allowed", "Use GET.", [("Allow", "GET")])
            return self.list_accounts(client, seg[1], path)
        if len(seg) == 2 and seg[0] == "accounts":
            if method not in ("GET", "HEAD"):
                return self.err(405, "method_not_allowed", "Use GET.", [("Allow", "GET")])
            return self.get_account(client, seg[1], path)
        if len(seg) == 3 and seg[0] == "accounts" and seg[2] == "transactions":
            if method not in ("GET", "HEAD"):
                return self.err(405, "method_not_allowed", "Use GET.", [("Allow", "GET")])
            return self.list_transactions(client, seg[1], query)
        return self.err(404, "not_found", "No such route.")

    def create(self, client):
        with LOCK:
            if v("create-dedup-window") and client.last_create is not None:
                ms, prev = client.last_create
                if now_ms() - ms < 1500 and prev.status == "CREATED":
                    out = {"connectionId": prev.id, "status": prev.status, "widgetToken": prev.token}
                    return self.api(201, out, [("Location", "/v1/connections/" + urllib.parse.quote(prev.id))])
            conn = Conn(client)
            CONNS[conn.id] = conn
            client.last_create = (now_ms(), conn)
            out = {"connectionId": conn.id, "status": "CREATED", "widgetToken": conn.token}
            emit(conn, "connection.created", {"previousStatus": None, "error": None})
        return self.api(201, out, [("Location", "/v1/connections/" + urllib.parse.quote(conn.id))])

    def cached_read(self, client, path, obj):
        """phantom-304: the ETag middleware compares with the last answer to this client."""
        body = json.dumps(obj, ensure_ascii=False, sort_keys=True).encode("utf-8")
        etag = '"%s"' % hashlib.sha1(body).hexdigest()[:20]
        key = (client.id, path)
        if ETAGS.get(key) == etag:
            return self.raw(304, None, None, [("ETag", etag), ("Cache-Control", "private, no-cache")])
        ETAGS[key] = etag
        return self.api(200, obj, [("ETag", etag), ("Cache-Control", "private, no-cache")])

    def list_accounts(self, client, conn_id, path):
        with LOCK:
            conn = CONNS.get(conn_id)
            if conn is None or conn.client is not client:
                return self.err(404, "connection_not_found", "No such connection.")
            if conn.status != "CONNECTED":
                return self.err(409, "connection_not_connected",
                                "The connection is %s, not CONNECTED." % conn.status)
            out = [ACCOUNTS[a].to_json() for a in conn.accounts]
        if v("phantom-304"):
            return self.cached_read(client, path, out)
        return self.api(200, out)

    def get_account(self, client, acc_id, path):
        with LOCK:
            acc = ACCOUNTS.get(acc_id)
            if acc is None or acc.conn.client is not client:
                return self.err(404, "account_not_found", "No such account.")
            out = acc.to_json()
            if v("read-echo-updated"):
                # "refresh on read": the account is re-checked against the cache and the
                # client is told to re-read, whether or not anything moved.
                last = ECHO.get(acc.id, 0)
                if time.time() * 1000 - last > 2000:
                    ECHO[acc.id] = time.time() * 1000
                    stat("echo accounts.updated")
                    emit(acc.conn, "accounts.updated", {"accountId": acc.id})
        if v("phantom-304"):
            return self.cached_read(client, path, out)
        return self.api(200, out)

    def list_transactions(self, client, acc_id, query):
        limit_raw = (query.get("limit") or [""])[0]
        cursor = (query.get("starting_after") or [""])[0]
        if limit_raw == "":
            limit = 25
        else:
            if not limit_raw.isdigit() or int(limit_raw) < 1:
                return self.err(400, "invalid_limit", "limit must be a positive integer.")
            limit = min(int(limit_raw), 100)
        with LOCK:
            acc = ACCOUNTS.get(acc_id)
            if acc is None or acc.conn.client is not client:
                return self.err(404, "account_not_found", "No such account.")
            items = acc.ordered()
            start = 0
            if cursor:
                anchor = None
                for t in acc.txns:
                    if t.id == cursor:
                        anchor = t
                if anchor is None:
                    return self.err(400, "invalid_cursor", "starting_after names no transaction of this account.")
                k = anchor.key()
                start = len([t for t in items if t.key() >= k])
            page = items[start:start + limit]
            has_more = start + limit < len(items)
            out = {"data": [t.to_json() for t in page], "has_more": has_more}
            if has_more and page and not v("no-next-cursor"):
                out["next_cursor"] = page[-1].id
        if v("partial-content-206") and has_more:
            rng = "items %d-%d/%d" % (start, start + len(page) - 1, len(items))
            return self.api(206, out, [("Content-Range", rng)])
        return self.api(200, out)


# --------------------------------------------------------------------------------------------

def main():
    global VARIANT, SERVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--service", default="wire")
    ap.add_argument("--list-variants", action="store_true")
    args = ap.parse_args()
    if args.list_variants:
        for name, kind in VARIANTS.items():
            print("%s\t%s" % (name, kind))
        return
    if args.variant not in VARIANTS and args.variant not in WITHDRAWN:
        sys.exit("unknown variant %s" % args.variant)
    VARIANT = args.variant
    SERVICE = args.service
    keys = [k for k in os.environ.get("WIRE_API_KEYS", "").split(",") if k]
    if not keys:
        sys.exit("WIRE_API_KEYS names no key")
    for k in keys:
        cl = Client(k)
        CLIENTS.append(cl)
        CLIENT_BY_KEY[k] = cl
        CLIENT_BY_HASH[cl.key_hash] = cl
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    port = srv.server_address[1]
    print("http://127.0.0.1:%d" % port, flush=True)

    def watch_stdin():
        try:
            while sys.stdin.read(65536):
                pass
        except Exception:
            pass
        with STATS_LOCK:
            line = "stats: %s\n" % json.dumps(STATS, sort_keys=True)
        sys.stderr.write(line)
        if os.environ.get("WIRE_STATS_DIR"):
            with open(os.path.join(os.environ["WIRE_STATS_DIR"], VARIANT + ".stats"), "w") as f:
                f.write(line)
        sys.stderr.flush()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()

    def write_stats():
        while True:
            time.sleep(1.0)
            with STATS_LOCK:
                line = "stats: %s\n" % json.dumps(STATS, sort_keys=True)
            with open(os.path.join(os.environ["WIRE_STATS_DIR"], VARIANT + ".stats"), "w") as f:
                f.write(line)

    if os.environ.get("WIRE_STATS_DIR"):
        threading.Thread(target=write_stats, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
