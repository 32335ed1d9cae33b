'use strict';
// Test server for the Bank Connection Aggregation Service spec (/work/shared/spec/service-spec.md).
// Usage: node server.js --port 0 --variant NAME --service acme   (FOREIGN_API_KEYS="k1,k2")
// Variants are listed in VARIANTS.md; `none` is the clean server.
const http = require('http');
const crypto = require('crypto');

// ---------------------------------------------------------------- arguments
const argv = process.argv.slice(2);
function arg(name, dflt) {
  const i = argv.indexOf('--' + name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
}
const PORT = Number(arg('port', '0'));
const VARIANT = arg('variant', 'none');
const SERVICE = arg('service', 'acme');
const V = (name) => VARIANT === name;

const KNOWN_VARIANTS = [
  'none',
  // violations
  'auth-missing-return', 'widget-leaks-key', 'list-stale-balance', 'deleted-txn-on-later-pages',
  'cursor-inclusive', 'has-more-off-by-one', 'accounts-after-disconnect', 'connected-before-ready',
  'batch-wrong-client', 'duplicate-new-envelope-id', 'mfa-upper-previous', 'reconnect-previous-created',
  'deleted-event-no-ms', 'account-created-future', 'worker-client-id', 'new-txn-bad-prefix',
  'second-batch-datetime',
  // legal choices
  'error-shapes', 'oldest-first', 'uuid-ids', 'tiny-pages', 'rate-limited', 'late-shuffled-deliveries',
  'duplicate-deliveries', 'slow-answers', 'close-idle-connections', 'extra-fields', 'big-data',
  'clock-ahead', 'sparse-fields',
];
if (!KNOWN_VARIANTS.includes(VARIANT)) {
  process.stderr.write(`unknown variant ${VARIANT}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------- clock, ids, random
const CLOCK_OFFSET_MS = V('clock-ahead') ? 5 * 60 * 1000 : 0; // the whole server clock, Date header included
const now = () => Date.now() + CLOCK_OFFSET_MS;
const iso = (ms) => new Date(ms).toISOString();                 // 2024-05-01T10:11:12.345Z
const isoNoMs = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const dateOnly = (ms) => new Date(ms).toISOString().slice(0, 10);

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function randStr(n, alphabet = ALNUM) {
  const bytes = crypto.randomBytes(n);
  let s = '';
  for (let i = 0; i < n; i++) s += alphabet[bytes[i] % alphabet.length];
  return s;
}
function newId(prefix) {
  if (V('uuid-ids')) return prefix + crypto.randomUUID();
  return prefix + randStr(26);
}
function newToken() {
  return 'sess_' + (V('uuid-ids') ? crypto.randomBytes(32).toString('hex') : randStr(32, ALNUM + 'abcdefghijklmnopqrstuvwxyz'));
}
const rnd = (a, b) => a + Math.floor(Math.random() * (b - a + 1));
const pick = (arr) => arr[Math.floor(Math.random() * arr.length)];
const money = (a, b) => Math.round((a + Math.random() * (b - a)) * 100) / 100;
const round2 = (x) => Math.round(x * 100) / 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- clients (one per API key)
const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}
const clients = KEYS.map((key, i) => ({ key, id: newId('cli_'), index: i, webhookUrl: null, bucket: { tokens: 15, at: Date.now() } }));
const clientByKey = new Map(clients.map((c) => [c.key, c]));

// ---------------------------------------------------------------- store
const connections = new Map(); // id -> connection
const accounts = new Map();     // id -> account
const tokens = new Map();       // widget token -> connection id

const INSTITUTIONS = [
  { id: 'ins_NORTHWIND', name: 'Northwind Savings Bank' },
  { id: 'ins_CONTOSO', name: 'Contoso Federal Credit Union' },
  { id: 'ins_FABRIKAM', name: 'Fabrikam National' },
  { id: 'ins_WOODGROVE', name: 'Woodgrove Bank' },
];
const CURRENCIES = ['USD', 'USD', 'USD', 'EUR', 'GBP', 'CAD'];
const TYPES = ['checking', 'savings', 'credit_card', 'brokerage', 'pension'];
const NAMES = {
  checking: ['Everyday Checking', 'Premier Checking', 'Joint Checking'],
  savings: ['High Yield Savings', 'Rainy Day Fund', 'Holiday Savings'],
  credit_card: ['Rewards Visa', 'Cashback Mastercard', 'Travel Card'],
  brokerage: ['Individual Brokerage', 'Trading Account'],
  pension: ['401(k) Plan', 'Retirement IRA'],
};
const DEBITS = [
  ['groceries', ['Whole Foods Market', 'Trader Joes', 'Corner Grocery', 'Farmers Market']],
  ['dining', ['Blue Bottle Coffee', 'Pizza Palace', 'Sushi Bar']],
  ['transport', ['Uber Trip', 'Metro Card Reload', 'Shell Gas Station']],
  ['utilities', ['City Water', 'Power & Light Co', 'Mobile Phone Bill']],
  ['shopping', ['Amazon Marketplace', 'Hardware Store', 'Bookshop']],
  ['entertainment', ['Streaming Service', 'Cinema Tickets']],
];
const CREDITS = [
  ['income', ['Payroll ACME Corp', 'Salary Deposit', 'Freelance Payment']],
  ['transfer', ['Transfer from Savings', 'Refund', 'Interest Payment']],
];
const BIG_DESCRIPTIONS = ['', 'Überweisung Müller GmbH — Rechnung Nr. 2024/0815', '東京 コンビニ', 'x'.repeat(500), 'Café "Le Zinc" & Co <b>'];

function makeTxn(acc, dayMs, seq, origin) {
  const credit = acc.type === 'credit_card' ? Math.random() < 0.08 : Math.random() < 0.25;
  const [category, descs] = pick(credit ? CREDITS : DEBITS);
  let amount = credit ? money(5, credit && category === 'income' ? 4200 : 300) : -money(1, 250);
  if (V('big-data') && Math.random() < 0.05) amount = (credit ? 1 : -1) * money(100000, 987654321);
  let description = pick(descs);
  if (V('big-data') && Math.random() < 0.1) description = pick(BIG_DESCRIPTIONS);
  const created = now();
  const idPrefix = V('new-txn-bad-prefix') && origin === 'update' ? 'tx_' : 'txn_';
  const t = {
    id: newId(idPrefix),
    accountId: acc.id,
    amount,
    currency: acc.currency,
    description,
    transactionDate: dateOnly(dayMs),
    category,
    status: 'posted',
    createdAt: iso(created),
    deleted: false,
    seq,
  };
  if (V('second-batch-datetime') && origin === 'import' && seq >= 50) {
    // the second import batch goes through the bulk serializer, which keeps the time part
    t.transactionDate = new Date(dayMs).toISOString().replace(/T.*$/, 'T00:00:00.000Z');
  }
  if (V('sparse-fields')) {
    if (Math.random() < 0.3) delete t.category;
    if (Math.random() < 0.2) delete t.description;
  }
  if (V('extra-fields')) {
    t.merchant = { name: description.slice(0, 40), mcc: String(rnd(1000, 9999)) };
    t.pending = false;
    t.runningBalance = null;
  }
  return t;
}

// transactions are kept in list order: newest first (oldest first in `oldest-first`)
function sortTxns(acc) {
  const dir = V('oldest-first') ? 1 : -1;
  acc.txns.sort((a, b) => {
    const d = a.transactionDate.slice(0, 10).localeCompare(b.transactionDate.slice(0, 10));
    if (d !== 0) return dir * d;
    return dir * (a.seq - b.seq);
  });
}

function makeAccount(conn, institution) {
  const type = pick(TYPES);
  const currency = type === 'pension' || type === 'brokerage' ? pick(['USD', 'USD', 'EUR']) : pick(CURRENCIES);
  const t = now();
  let createdAt = iso(t - rnd(1, 900));
  if (V('account-created-future')) createdAt = iso(t + 3 * 3600 * 1000 - rnd(1, 900)); // local time labelled as UTC
  const acc = {
    id: newId('acc_'),
    connectionId: conn.id,
    clientIndex: conn.client.index,
    name: pick(NAMES[type]),
    type,
    currency,
    balance: 0,
    availableBalance: 0,
    accountNumber: '****' + String(rnd(0, 9999)).padStart(4, '0'),
    createdAt,
    lastSyncedAt: iso(t),
    institution: { id: institution.id, name: institution.name, logo: null },
    txns: [],
    nextSeq: 0,
  };
  if (V('big-data') && Math.random() < 0.2) acc.name = 'Compte courant — Société Générale ' + 'Ω'.repeat(rnd(1, 40));
  if (type === 'credit_card') {
    const limit = pick([1500, 3000, 5000, 12000]);
    acc.creditLimit = { amount: limit, currency };
    acc.balance = -money(0, limit * 0.6);
    acc.availableBalance = round2(limit + acc.balance);
    if (Math.random() < 0.35) {
      const other = currency === 'EUR' ? 'USD' : 'EUR';
      const b = -money(0, 400);
      acc.currencyBalances = [{ currency: other, balance: b, availableBalance: round2(b + 1000) }];
    }
  } else if (type === 'brokerage' || type === 'pension') {
    const n = rnd(0, V('big-data') ? 60 : 5);
    acc.positions = [];
    let total = 0;
    for (let i = 0; i < n; i++) {
      const qty = rnd(1, 400), price = money(3, 900);
      const mv = round2(qty * price);
      total += mv;
      acc.positions.push({ symbol: pick(['VTI', 'AAPL', 'MSFT', 'BND', 'VXUS', 'TSLA', 'NVDA']) + (i >= 7 ? i : ''), quantity: qty, price, marketValue: mv, currency });
    }
    acc.balance = round2(total + money(0, 2000));
    acc.availableBalance = round2(acc.balance - total);
  } else {
    acc.balance = money(0, type === 'savings' ? 50000 : 8000);
    acc.availableBalance = acc.balance;
  }
  const maxTx = V('big-data') ? 700 : 120;
  const nTx = Math.random() < 0.12 ? 0 : rnd(1, maxTx);
  for (let i = 0; i < nTx; i++) {
    const day = t - rnd(0, 120) * 86400000;
    acc.txns.push(makeTxn(acc, day, acc.nextSeq++, 'import'));
  }
  sortTxns(acc);
  if (V('extra-fields')) { acc.iban = null; acc.metadata = { source: 'aggregator', syncVersion: 3 }; }
  if (V('sparse-fields')) { delete acc.lastSyncedAt; delete acc.institution; delete acc.currencyBalances; }
  acc.listCache = null;
  return acc;
}

function generateAccounts(conn) {
  if (conn.accountIds.length) return; // a reconnect keeps the accounts already linked
  const institution = pick(INSTITUTIONS);
  const n = V('big-data') ? rnd(1, 12) : rnd(1, 5);
  for (let i = 0; i < n; i++) {
    const acc = makeAccount(conn, institution);
    accounts.set(acc.id, acc);
    conn.accountIds.push(acc.id);
  }
}

const ACCOUNT_FIELDS = ['id', 'connectionId', 'name', 'type', 'currency', 'balance', 'availableBalance', 'accountNumber',
  'createdAt', 'lastSyncedAt', 'institution', 'creditLimit', 'currencyBalances', 'positions', 'iban', 'metadata'];
function accountView(acc) {
  const o = {};
  for (const f of ACCOUNT_FIELDS) if (acc[f] !== undefined) o[f] = acc[f];
  return JSON.parse(JSON.stringify(o));
}
const TXN_HIDDEN = new Set(['deleted', 'seq']);
function txnView(t) {
  const o = {};
  for (const k of Object.keys(t)) if (!TXN_HIDDEN.has(k)) o[k] = t[k];
  return o;
}

// ---------------------------------------------------------------- webhook events
// One delivery queue for all clients, drained by a worker in batches every 100 ms.
const queue = [];
let eventCount = 0;

function eventTime(type) {
  const t = now();
  return V('deleted-event-no-ms') && type === 'transaction.deleted' ? isoNoMs(t) : iso(t);
}

function emit(conn, type, extra) {
  const client = conn.client;
  const id = newId('evt_');
  const ts = eventTime(type);
  let clientId = client.id;
  if (V('worker-client-id') && (type === 'connection.connected' || type === 'accounts.updated')) {
    clientId = clients[0].id; // the sync worker was deployed with one tenant's CLIENT_ID
  }
  const data = { eventId: id, type, occurredAt: ts, clientId, connectionId: conn.id, ...extra };
  const body = { id, type, created_at: ts, data };
  if (V('extra-fields')) { body.api_version = 'v1'; data.livemode = false; }
  enqueue(client, body);
}

function enqueue(client, body) {
  eventCount++;
  const item = { client, body, attempts: 0 };
  if (V('late-shuffled-deliveries')) {
    // every event gets its own delay: late (seconds) and in any order
    setTimeout(() => deliver(item, item.client), rnd(1000, 6000));
    return;
  }
  queue.push(item);
  if (V('duplicate-deliveries')) {
    const copies = Math.random() < 0.3 ? 2 : 1;
    for (let i = 0; i < copies; i++) setTimeout(() => queue.push({ client, body, attempts: 0 }), rnd(200, 4000));
  }
  if (V('duplicate-new-envelope-id') && eventCount % 3 === 0) {
    // the "redelivery" job re-wraps the stored payload in a fresh envelope
    setTimeout(() => {
      const copy = JSON.parse(JSON.stringify(body));
      copy.id = newId('evt_');
      queue.push({ client, body: copy, attempts: 0 });
    }, rnd(500, 1500));
  }
}

function post(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch { resolve(0); return; }
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({
      host: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': payload.length, 'User-Agent': `${SERVICE}-webhooks/1.0`, 'X-Event-Id': body.id || '', Date: new Date(now()).toUTCString() },
      timeout: 5000,
    }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end(payload);
  });
}

async function deliver(item, target) {
  const url = target.webhookUrl;
  if (!url || !item.client.webhookUrl) return; // not registered (or unregistered): dropped
  const status = await post(url, item.body);
  if (status >= 200 && status < 300) return;
  if (++item.attempts < 4 && item.client.webhookUrl) setTimeout(() => queue.push(item), 1000 * item.attempts);
}

let draining = false;
setInterval(async () => {
  if (draining || queue.length === 0) return;
  draining = true;
  try {
    const batch = queue.splice(0, queue.length);
    for (const item of batch) {
      // batch-wrong-client: the worker resolves the address once per batch
      const target = V('batch-wrong-client') ? batch[0].client : item.client;
      await deliver(item, target);
    }
  } finally { draining = false; }
}, 100);

// ---------------------------------------------------------------- connection state machine
function setStatus(conn, to) {
  const from = conn.status;
  let previousStatus = from;
  if (V('mfa-upper-previous') && from === 'mfa_required') previousStatus = 'MFA_REQUIRED';
  if (V('reconnect-previous-created') && to === 'credentials_submitted') previousStatus = 'created';
  conn.status = to;
  conn.updatedAt = now();
  let error = null;
  if (to === 'failed_auth') error = { code: 'invalid_credentials', message: 'The bank rejected the credentials' };
  if (to === 'error') error = { code: 'internal_error', message: 'Unexpected error while talking to the bank' };
  emit(conn, 'connection.' + to, { previousStatus, error });
}

// the user's part in the widget: submit credentials, the worker verifies
function authenticate(conn) {
  if (conn.status !== 'mfa_required') setStatus(conn, 'credentials_submitted');
  setStatus(conn, 'verifying');
}

function doAction(conn, action, env) {
  const s = conn.status;
  switch (action) {
    case 'connect': {
      if (s === 'connected') return [409, 'already connected'];
      authenticate(conn);
      generateAccounts(conn);
      for (const id of conn.accountIds) { const a = accounts.get(id); a.listCache = accountView(a); }
      if (V('connected-before-ready')) {
        // the event is published before the accounts transaction commits
        conn.readyAt = Date.now() + 3000;
        setStatus(conn, 'connected');
      } else {
        setStatus(conn, 'connected');
      }
      return [200, 'connected'];
    }
    case 'fail_auth':
      if (s === 'connected' || s === 'failed_auth') return [409, `cannot fail authentication from ${s}`];
      authenticate(conn);
      setStatus(conn, 'failed_auth');
      return [200, 'failed_auth'];
    case 'require_mfa':
      if (s === 'connected' || s === 'mfa_required') return [409, `cannot require mfa from ${s}`];
      authenticate(conn);
      setStatus(conn, 'mfa_required');
      return [200, 'mfa_required'];
    case 'error':
      if (s === 'error') return [409, 'already in error'];
      setStatus(conn, 'error');
      return [200, 'error'];
    case 'disconnect':
      if (s === 'disconnected') return [409, 'already disconnected'];
      setStatus(conn, 'disconnected');
      return [200, 'disconnected'];
    case 'update_accounts': {
      if (s !== 'connected') return [409, `accounts can only be updated while connected (status ${s})`];
      let acc = env.accountId ? accounts.get(env.accountId) : accounts.get(pick(conn.accountIds));
      if (!acc || acc.connectionId !== conn.id) return [404, 'no such account on this connection'];
      const delta = money(-300, 300);
      const added = rnd(1, 3);
      for (let i = 0; i < added; i++) {
        const t = makeTxn(acc, now(), acc.nextSeq++, 'update');
        if (V('oldest-first')) acc.txns.push(t); else acc.txns.unshift(t);
      }
      acc.balance = round2(acc.balance + delta);
      acc.availableBalance = acc.type === 'credit_card' && acc.creditLimit
        ? round2(acc.creditLimit.amount + acc.balance) : round2(acc.availableBalance + delta);
      if (acc.lastSyncedAt !== undefined) acc.lastSyncedAt = iso(Math.max(now(), Date.parse(acc.lastSyncedAt)));
      if (!V('list-stale-balance')) acc.listCache = accountView(acc);
      else acc.listCache = { ...accountView(acc), balance: acc.listCache.balance, availableBalance: acc.listCache.availableBalance };
      emit(conn, 'accounts.updated', { accountId: acc.id });
      return [200, acc.id];
    }
    case 'delete_transaction': {
      if (s !== 'connected') return [409, `transactions can only be deleted while connected (status ${s})`];
      let acc = null, txn = null;
      if (env.transactionId) {
        for (const id of conn.accountIds) {
          const a = accounts.get(id);
          const t = a.txns.find((x) => x.id === env.transactionId && !x.deleted);
          if (t) { acc = a; txn = t; break; }
        }
        if (!txn) return [404, 'no such transaction on this connection'];
      } else {
        const candidates = env.accountId ? [env.accountId] : conn.accountIds.slice().sort(() => Math.random() - 0.5);
        for (const id of candidates) {
          const a = accounts.get(id);
          if (!a || a.connectionId !== conn.id) continue;
          const live = a.txns.filter((x) => !x.deleted);
          if (live.length) { acc = a; txn = pick(live); break; }
        }
        if (!txn) return [409, 'no transaction to delete'];
      }
      txn.deleted = true; // kept as a tombstone so that a cursor on it still works
      emit(conn, 'transaction.deleted', { accountId: acc.id, transactionId: txn.id });
      return [200, txn.id];
    }
    default:
      return [501, 'unknown action'];
  }
}

// ---------------------------------------------------------------- HTTP helpers
function send(res, status, obj, headers = {}) {
  if (res.headersSent || res.writableEnded) return;
  const body = obj === undefined ? '' : JSON.stringify(obj);
  const h = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', ...headers };
  if (CLOCK_OFFSET_MS) h.Date = new Date(now()).toUTCString();
  if (V('close-idle-connections') && Math.random() < 0.25) h.Connection = 'close';
  res.writeHead(status, h);
  res.end(body);
}

const ERR_STATUS = { unauthorized: 401, not_found: 404, not_connected: 409, invalid_request: 400, rate_limited: 429, method_not_allowed: 405 };
function sendError(res, code, message, headers) {
  if (V('error-shapes')) {
    const status = { unauthorized: 403, not_found: 404, not_connected: 404, invalid_request: 422, rate_limited: 429, method_not_allowed: 405 }[code];
    send(res, status, { errors: [{ code: code.toUpperCase(), detail: message }] }, { 'Content-Type': 'application/problem+json', ...headers });
    return;
  }
  send(res, ERR_STATUS[code], { error: { code, message } }, headers);
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => { size += c.length; if (size < 1e6) chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

function authenticateRequest(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer ([^\s]+)$/.exec(h);
  if (!m) return null;
  return clientByKey.get(m[1]) || null;
}

function rateLimited(client) {
  if (!V('rate-limited')) return false;
  const b = client.bucket, t = Date.now();
  b.tokens = Math.min(15, b.tokens + ((t - b.at) / 1000) * 15);
  b.at = t;
  if (b.tokens < 1) return true;
  b.tokens -= 1;
  return false;
}

// ---------------------------------------------------------------- API handlers
function ownConnection(client, id) {
  const c = connections.get(id);
  return c && c.client === client ? c : null;
}
function ownAccount(client, id) {
  const a = accounts.get(id);
  if (!a || a.clientIndex !== client.index) return null;
  const conn = connections.get(a.connectionId);
  if (conn.readyAt && Date.now() < conn.readyAt) return null;
  return a;
}

function createConnection(client, res) {
  const conn = {
    id: newId('conn_'), client, status: 'created', token: newToken(), tokenExpires: Date.now() + 30 * 60 * 1000,
    accountIds: [], createdAt: now(), updatedAt: now(), readyAt: 0,
  };
  connections.set(conn.id, conn);
  tokens.set(conn.token, conn.id);
  emit(conn, 'connection.created', { previousStatus: null, error: null });
  const body = { connectionId: conn.id, status: 'CREATED', widgetToken: conn.token };
  if (V('extra-fields')) { body.createdAt = iso(conn.createdAt); body.widgetTokenExpiresAt = iso(now() + 30 * 60 * 1000); }
  send(res, 201, body, { Location: `/v1/connections/${conn.id}` });
}

function listAccounts(client, id, res) {
  const conn = ownConnection(client, id);
  if (!conn) return sendError(res, 'not_found', 'No such connection');
  const open = conn.status === 'connected' || (V('accounts-after-disconnect') && conn.status === 'disconnected' && conn.accountIds.length);
  if (!open || (conn.readyAt && Date.now() < conn.readyAt)) {
    return sendError(res, 'not_connected', `Accounts are available only when the connection is CONNECTED (status ${conn.status.toUpperCase()})`);
  }
  const list = conn.accountIds.map((aid) => {
    const a = accounts.get(aid);
    return V('list-stale-balance') && a.listCache ? a.listCache : accountView(a);
  });
  send(res, 200, list);
}

function getAccount(client, id, res) {
  const acc = ownAccount(client, id);
  if (!acc) return sendError(res, 'not_found', 'No such account');
  send(res, 200, accountView(acc));
}

const DEFAULT_LIMIT = V('tiny-pages') ? 3 : 25;
const MAX_LIMIT = V('tiny-pages') ? 10 : 100;

function listTransactions(client, id, query, res) {
  const acc = ownAccount(client, id);
  if (!acc) return sendError(res, 'not_found', 'No such account');
  let limit = DEFAULT_LIMIT;
  if (query.has('limit')) {
    const raw = query.get('limit');
    if (!/^\d{1,9}$/.test(raw) || Number(raw) < 1) return sendError(res, 'invalid_request', 'limit must be a positive integer');
    limit = Math.min(Number(raw), MAX_LIMIT);
  }
  const all = acc.txns;
  let start = 0;
  const after = query.get('starting_after');
  if (after !== null) {
    const idx = all.findIndex((t) => t.id === after);
    if (idx < 0) return sendError(res, 'invalid_request', 'starting_after does not name a transaction of this account');
    start = V('cursor-inclusive') ? idx : idx + 1;
  }
  const keepDeleted = V('deleted-txn-on-later-pages') && after !== null;
  const rest = all.slice(start).filter((t) => keepDeleted || !t.deleted);
  const page = rest.slice(0, limit);
  const hasMore = V('has-more-off-by-one') ? rest.length > limit + 1 : rest.length > limit;
  const body = { data: page.map(txnView), has_more: hasMore };
  if (hasMore) body.next_cursor = page[page.length - 1].id;
  send(res, 200, body);
}

// ---------------------------------------------------------------- widget
const GLOBAL_NAME = SERVICE.charAt(0).toUpperCase() + SERVICE.slice(1).replace(/[^A-Za-z0-9_$]/g, '') + 'Connect';
function widgetScript() {
  return `/* ${SERVICE} connect widget v2.3.1 */
(function () {
  'use strict';
  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src).origin : '';
  function el(tag, css, text) { var e = document.createElement(tag); if (css) e.style.cssText = css; if (text) e.textContent = text; return e; }
  function call(path, body) {
    return fetch(base + path, { method: 'POST', mode: 'cors', credentials: 'omit',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); });
  }
  function open(options, connectionId, onSuccess) {
    var o = (options && typeof options === 'object') ? options : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    if (typeof o.token !== 'string' || o.token.indexOf('sess_') !== 0) throw new TypeError('${GLOBAL_NAME}.open: token must be a widget token (sess_...)');
    if (typeof o.connectionId !== 'string' || !o.connectionId) throw new TypeError('${GLOBAL_NAME}.open: connectionId is required');
    var done = false, polls = 0, timer = null;
    var root = el('div', 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;font-family:sans-serif;z-index:2147483647');
    var box = el('div', 'background:#fff;border-radius:8px;padding:24px;min-width:320px');
    box.appendChild(el('h2', 'margin-top:0', 'Connect your bank'));
    var status = el('p', '', 'Loading…');
    box.appendChild(status);
    var list = el('ul', 'list-style:none;padding:0');
    box.appendChild(list);
    var close = el('button', '', 'Close');
    close.onclick = function () { api.close(); };
    box.appendChild(close);
    root.appendChild(box);
    (document.body || document.documentElement).appendChild(root);
    function finish(s) {
      if (done) return; done = true;
      status.textContent = 'Connected.';
      if (typeof o.onSuccess === 'function') {
        try { o.onSuccess({ connectionId: s.connectionId, institution: s.institution || null, accounts: s.accountCount }); } catch (e) { setTimeout(function () { throw e; }); }
      }
    }
    function poll() {
      if (done || polls++ > 20) return;
      call('/widget/session/status', { token: o.token, connectionId: o.connectionId }).then(function (r) {
        if (r.ok && r.body.status === 'CONNECTED') finish(r.body); else timer = setTimeout(poll, 1500);
      }).catch(function () { timer = setTimeout(poll, 3000); });
    }
    call('/widget/session', { token: o.token, connectionId: o.connectionId }).then(function (r) {
      if (!r.ok) { status.textContent = 'This link has expired. Please start again.'; return; }
      status.textContent = 'Choose your bank';
      r.body.institutions.forEach(function (ins) {
        var li = el('li', 'padding:6px 0;cursor:pointer', ins.name);
        list.appendChild(li);
      });
      if (r.body.status === 'CONNECTED') finish(r.body); else timer = setTimeout(poll, 1500);
    }).catch(function () { status.textContent = 'Network error. Please try again.'; });
    var api = { close: function () { done = true; clearTimeout(timer); if (root.parentNode) root.parentNode.removeChild(root); } };
    return api;
  }
  window.${GLOBAL_NAME} = { open: open, version: '2.3.1' };
})();
`;
}

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

function widgetSession(body, res, statusOnly) {
  let b;
  try { b = JSON.parse(body || '{}'); } catch { b = {}; }
  const cid = tokens.get(b.token);
  const conn = cid ? connections.get(cid) : null;
  if (!conn || conn.id !== b.connectionId || Date.now() > conn.tokenExpires) {
    return send(res, 401, { error: { code: 'invalid_widget_token', message: 'The widget session is invalid or expired' } }, CORS);
  }
  const first = conn.accountIds.length ? accounts.get(conn.accountIds[0]) : null;
  const out = {
    connectionId: conn.id,
    status: conn.status.toUpperCase(),
    institution: first && first.institution ? { id: first.institution.id, name: first.institution.name } : null,
    accountCount: conn.accountIds.length,
  };
  if (!statusOnly) {
    out.institutions = INSTITUTIONS.map((i) => ({ id: i.id, name: i.name, logo: null }));
    out.expiresAt = iso(conn.tokenExpires + CLOCK_OFFSET_MS);
    if (V('widget-leaks-key')) out.publishableKey = conn.client.key; // "publishable" key wired to the secret one
  }
  send(res, 200, out, CORS);
}

// ---------------------------------------------------------------- admin (test hooks for driver.js)
async function admin(req, res) {
  const raw = await readBody(req);
  let b;
  try { b = JSON.parse(raw || '{}'); } catch { return send(res, 400, { error: 'body must be JSON' }); }
  const action = b.action;
  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const pairs = [[b.apiKey, b.webhookUrl], [b.secondApiKey, b.secondWebhookUrl]];
    for (const [key, url] of pairs) {
      const c = key && clientByKey.get(key);
      if (!c) continue;
      c.webhookUrl = action === 'register_webhook' ? (url || null) : null;
    }
    if (action === 'unregister_webhook') queue.length = 0;
    return send(res, 200, { ok: true, webhooks: 'per-client' });
  }
  const conn = connections.get(b.connectionId);
  if (!conn) return send(res, 404, { error: 'no such connection' });
  const [status, message] = doAction(conn, action, b);
  send(res, status, { ok: status === 200, message, status: conn.status.toUpperCase() });
}

// ---------------------------------------------------------------- router
const server = http.createServer(async (req, res) => {
  let url;
  try { url = new URL(req.url, 'http://localhost'); } catch { return sendError(res, 'not_found', 'Not found'); }
  const path = url.pathname;
  const method = req.method;
  try {
    if (path === '/__admin/action') {
      if (method !== 'POST') return sendError(res, 'method_not_allowed', 'POST only', { Allow: 'POST' });
      return await admin(req, res);
    }
    if (path.startsWith('/widget/')) {
      if (method === 'OPTIONS') { res.writeHead(204, CORS); return res.end(); }
      if (path === `/widget/${SERVICE}-connect.js` && (method === 'GET' || method === 'HEAD')) {
        const js = widgetScript();
        res.writeHead(200, { 'Content-Type': 'application/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=300', ...CORS });
        return res.end(method === 'HEAD' ? undefined : js);
      }
      if ((path === '/widget/session' || path === '/widget/session/status') && method === 'POST') {
        return widgetSession(await readBody(req), res, path.endsWith('/status'));
      }
      return send(res, 404, { error: { code: 'not_found', message: 'Not found' } }, CORS);
    }
    if (!path.startsWith('/v1/')) return sendError(res, 'not_found', 'Not found');

    // ---- the API
    let client = authenticateRequest(req);
    if (!client) {
      sendError(res, 'unauthorized', 'Missing or invalid API key', { 'WWW-Authenticate': 'Bearer' });
      if (!V('auth-missing-return')) return;
      client = clients[0]; // falls through to the handler with the default tenant
    }
    if (rateLimited(client)) return sendError(res, 'rate_limited', 'Too many requests', { 'Retry-After': '1' });
    if (V('slow-answers')) await sleep(rnd(100, 2500));
    await readBody(req); // no request body is expected; drain whatever was sent

    let m;
    if (path === '/v1/connections') {
      if (method !== 'POST') return sendError(res, 'method_not_allowed', 'Method not allowed', { Allow: 'POST' });
      return createConnection(client, res);
    }
    if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
      if (method !== 'GET') return sendError(res, 'method_not_allowed', 'Method not allowed', { Allow: 'GET' });
      return listAccounts(client, decodeURIComponent(m[1]), res);
    }
    if ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
      if (method !== 'GET') return sendError(res, 'method_not_allowed', 'Method not allowed', { Allow: 'GET' });
      return listTransactions(client, decodeURIComponent(m[1]), url.searchParams, res);
    }
    if ((m = /^\/v1\/accounts\/([^/]+)$/.exec(path))) {
      if (method !== 'GET') return sendError(res, 'method_not_allowed', 'Method not allowed', { Allow: 'GET' });
      return getAccount(client, decodeURIComponent(m[1]), res);
    }
    return sendError(res, 'not_found', 'Not found');
  } catch (e) {
    process.stderr.write(`error on ${method} ${path}: ${e && e.stack}\n`);
    if (!res.headersSent) send(res, 500, { error: { code: 'internal_error', message: 'Internal error' } });
  }
});

if (V('close-idle-connections')) { server.keepAliveTimeout = 300; server.headersTimeout = 5000; }

server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});

// exit when stdin closes (run-variant.sh closes the fifo)
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
