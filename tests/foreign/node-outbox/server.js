#!/usr/bin/env node
// Bank Connection Aggregation Service: a staging server written from the interface spec alone.
//
//   node server.js --port 0 --variant NAME --service acme --exit-on-stdin-eof
//
// API keys: FOREIGN_API_KEYS="key1,key2" (one client per key). Prints "PORT <n>" once listening
// on 127.0.0.1. The "database" is in memory; connection work runs on a per-connection job
// queue; webhook events go through an outbox and a delivery queue with retries.
// Variants (see VARIANTS.md) are switched with --variant; `none` is the clean server.
'use strict';

const http = require('http');
const crypto = require('crypto');

// ---------------------------------------------------------------------------------------------
// Command line

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) continue;
    const name = a.slice(2);
    if (name === 'exit-on-stdin-eof') { out[name] = true; continue; }
    out[name] = argv[++i];
  }
  return out;
}

const ARGS = parseArgs(process.argv.slice(2));
const PORT = Number(ARGS.port || 0);
const VARIANT = ARGS.variant || 'none';
const SERVICE = ARGS.service || 'acme';

const VARIANTS = new Set([
  'none',
  // violations
  'event-before-commit', 'connected-before-accounts', 'account-get-stale-cache',
  'update-applied-to-sibling', 'webhooks-single-endpoint', 'refused-create-persists',
  'offset-cursor', 'deleted-event-names-survivor', 'accounts-guard-not-created',
  'previous-status-captured-once', 'db-local-time-as-utc', 'account-createdat-now',
  'verifying-not-announced', 'widget-no-cors', 'widget-session-leaks-key',
  // legal choices
  'slow-api', 'late-webhooks', 'duplicate-webhooks', 'rate-limit-429', 'idle-close',
  'small-pages', 'opaque-ids', 'alt-errors', 'account-wrapped', 'batched-updates',
  'background-sync', 'short-form-connected', 'lenient-lifecycle',
]);
if (!VARIANTS.has(VARIANT)) {
  process.stderr.write(`server.js: unknown variant ${VARIANT}\n`);
  process.exit(2);
}
const V = (name) => VARIANT === name;

const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  process.stderr.write('server.js: FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rnd = (a, b) => a + Math.random() * (b - a);
const round2 = (x) => Math.round(x * 100) / 100;
const iso = (ms) => new Date(ms).toISOString();
const isoSeconds = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// Timestamps as the account store writes them. The clean store writes UTC.
function dbIso(ms) {
  // db-local-time-as-utc: the staging database session runs at UTC+02:00 and the mapper
  // formats its local wall time with a hard-coded "Z".
  if (V('db-local-time-as-utc')) return new Date(ms + 2 * 3600 * 1000).toISOString();
  return iso(ms);
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function randomAlnum(n) {
  const b = crypto.randomBytes(n);
  let s = '';
  for (let i = 0; i < n; i++) s += ALNUM[b[i] % 36];
  return s;
}
function newId(prefix) {
  if (V('opaque-ids')) return `${prefix}_${crypto.randomUUID()}`;
  return `${prefix}_${randomAlnum(26)}`;
}
function newToken() {
  if (V('opaque-ids')) return `sess_${crypto.randomBytes(32).toString('base64url')}`;
  return `sess_${randomAlnum(32)}`;
}

// ---------------------------------------------------------------------------------------------
// The "database"

const clients = KEYS.map((key, i) => ({
  key,
  id: newId('cli'),
  name: i === 0 ? 'Acme Staging Client A' : `Acme Staging Client ${String.fromCharCode(65 + i)}`,
  webhookUrl: null,
  webhookGen: 0,
  webhookSecret: `whsec_${randomAlnum(24)}`,
  requestCount: 0,
}));
const clientByKey = new Map(clients.map((c) => [c.key, c]));

const db = {
  connections: new Map(), // id -> connection
  tokens: new Map(), // widget token -> connection id
  accounts: new Map(), // id -> account
  transactions: new Map(), // id -> transaction (deleted ones kept as tombstones)
  events: [], // the outbox: every event ever written
};
let txnSeq = 0;

// webhooks-single-endpoint: the dispatcher caches the first endpoint it is given
let globalEndpoint = null;

const INSTITUTION = { id: 'ins_ACMEBANK0000000000000000001', name: 'Acme Bank', logo: null };

const STATUS = {
  CREATED: 'CREATED', CREDENTIALS_SUBMITTED: 'CREDENTIALS_SUBMITTED', VERIFYING: 'VERIFYING',
  CONNECTED: 'CONNECTED', MFA_REQUIRED: 'MFA_REQUIRED', FAILED_AUTH: 'FAILED_AUTH',
  ERROR: 'ERROR', DISCONNECTED: 'DISCONNECTED',
};

const ERRORS = {
  FAILED_AUTH: { code: 'invalid_credentials', message: 'The bank rejected the credentials.' },
  MFA_REQUIRED: { code: 'mfa_required', message: 'The bank asks for a one-time code.' },
  ERROR: { code: 'institution_error', message: 'Unexpected error while talking to the bank.' },
};

// ---------------------------------------------------------------------------------------------
// Events: written to the outbox, then handed to the delivery queue

function writeEvent(conn, type, extra, occurredMs) {
  const now = Date.now();
  const occurred = occurredMs == null ? now : occurredMs;
  const id = newId('evt');
  const data = {
    eventId: id,
    type,
    occurredAt: iso(occurred),
    clientId: conn.client.id,
    connectionId: conn.id,
    ...extra,
  };
  const envelope = { id, type, created_at: iso(now), data };
  db.events.push(envelope);
  dispatch(conn.client, envelope);
  return envelope;
}

function setStatus(conn, to, previousOverride) {
  const prev = conn.status;
  conn.status = to;
  conn.updatedAt = Date.now();
  // verifying-not-announced: the verification worker flips the status with a direct UPDATE
  // that bypasses the outbox, so entering VERIFYING writes no event.
  if (V('verifying-not-announced') && to === STATUS.VERIFYING) return;
  const previous = (previousOverride || prev).toLowerCase();
  writeEvent(conn, `connection.${to.toLowerCase()}`, {
    previousStatus: previous,
    error: ERRORS[to] ? { ...ERRORS[to] } : null,
  });
}

// ---------------------------------------------------------------------------------------------
// Webhook delivery queue

const deliveryAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const BACKOFF = [1000, 2000, 4000, 8000, 16000];

function deliveryBody(envelope) {
  if (V('short-form-connected') && envelope.type === 'connection.connected') {
    const t = Date.parse(envelope.data.occurredAt);
    return { event: envelope.type, connectionId: envelope.data.connectionId, timestamp: isoSeconds(t) };
  }
  return envelope;
}

function dispatch(client, envelope) {
  let url = client.webhookUrl;
  let gen = client.webhookGen;
  let owner = client;
  if (V('webhooks-single-endpoint')) {
    url = globalEndpoint && globalEndpoint.url;
    owner = globalEndpoint && globalEndpoint.client;
    gen = owner ? owner.webhookGen : 0;
  }
  if (!url) return; // no endpoint registered: the event stays in the outbox only
  const job = { url, owner, gen, body: JSON.stringify(deliveryBody(envelope)), attempt: 0, secret: client.webhookSecret };
  let delay = 0;
  if (V('late-webhooks')) delay = rnd(2000, 5000);
  setTimeout(() => deliver(job), delay);
  if (V('duplicate-webhooks')) setTimeout(() => deliver({ ...job, attempt: 0 }), delay + rnd(300, 1500));
}

const DEBUG = !!process.env.FOREIGN_DEBUG;
function deliver(job) {
  if (!job.owner || job.owner.webhookGen !== job.gen) return; // unregistered since
  const started = Date.now();
  let u;
  try { u = new URL(job.url); } catch { return; }
  const ts = Math.floor(Date.now() / 1000);
  const sig = crypto.createHmac('sha256', job.secret).update(`${ts}.${job.body}`).digest('hex');
  const req = http.request({
    hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST',
    agent: deliveryAgent, timeout: 5000,
    headers: {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(job.body),
      'User-Agent': 'Acme-Webhooks/1.4',
      'Acme-Signature': `t=${ts},v1=${sig}`,
    },
  }, (res) => {
    res.resume();
    if (DEBUG && Date.now() - started > 500) process.stderr.write(`slow delivery ${Date.now() - started}ms status ${res.statusCode}\n`);
    if (res.statusCode >= 200 && res.statusCode < 300) return;
    retry(job);
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => {
    if (DEBUG) process.stderr.write(`delivery error after ${Date.now() - started}ms: ${e.message} (attempt ${job.attempt})\n`);
    retry(job);
  });
  req.end(job.body);
}

function retry(job) {
  if (job.retried) return;
  job.retried = true;
  if (job.attempt >= BACKOFF.length) return;
  const next = { ...job, attempt: job.attempt + 1, retried: false };
  setTimeout(() => deliver(next), BACKOFF[job.attempt]);
}

// ---------------------------------------------------------------------------------------------
// Bank data: what an import from the bank produces

const DESCRIPTIONS = [
  ['Grocery Store', 'groceries'], ['Coffee Bar', 'restaurants'], ['Salary ACME GmbH', 'income'],
  ['Electricity Utility', 'utilities'], ['Online Marketplace', 'shopping'], ['Metro Transit', 'transport'],
  ['Pharmacy', 'health'], ['Cinema', 'entertainment'], ['Interest', 'income'], ['Bakery', 'groceries'],
];

function dateDaysAgo(n) {
  return new Date(Date.now() - n * 86400000).toISOString().slice(0, 10);
}

function makeTransaction(acc, amount, date, description, category, nowMs) {
  const t = {
    id: newId('txn'),
    accountId: acc.id,
    amount: round2(amount),
    currency: acc.currency,
    description,
    transactionDate: date,
    category,
    status: 'posted',
    createdAt: nowMs,
    seq: ++txnSeq,
    deletedAt: null,
    pendingDelete: false,
  };
  db.transactions.set(t.id, t);
  acc.txnIds.push(t.id);
  return t;
}

const ACCOUNT_PLANS = [
  { name: 'Everyday Checking', type: 'checking', count: 12, balance: [900, 4000] },
  { name: 'Rainy Day Savings', type: 'savings', count: 5, balance: [2000, 15000] },
  { name: 'Platinum Card', type: 'credit_card', count: 3, balance: [-1200, -50] },
];

function importAccounts(conn) {
  const now = Date.now();
  for (const plan of ACCOUNT_PLANS) {
    const acc = {
      id: newId('acc'),
      connectionId: conn.id,
      client: conn.client,
      name: plan.name,
      type: plan.type,
      currency: 'EUR',
      balance: round2(rnd(plan.balance[0], plan.balance[1])),
      availableBalance: 0,
      accountNumber: `****${String(Math.floor(rnd(1000, 9999)))}`,
      createdAt: now,
      lastSyncedAt: now,
      creditLimit: plan.type === 'credit_card' ? { amount: 5000, currency: 'EUR' } : undefined,
      txnIds: [],
    };
    recomputeAvailable(acc);
    // oldest first, so that seq grows with the date
    for (let i = plan.count; i >= 1; i--) {
      const [desc, cat] = DESCRIPTIONS[(i * 7 + plan.count) % DESCRIPTIONS.length];
      const amount = cat === 'income' ? rnd(20, 2500) : -rnd(3, 180);
      makeTransaction(acc, amount, dateDaysAgo(i * 3), desc, cat, now);
    }
    db.accounts.set(acc.id, acc);
    conn.accountIds.push(acc.id);
  }
  conn.importedAt = now;
}

function recomputeAvailable(acc) {
  acc.availableBalance = acc.type === 'credit_card' ? round2(acc.creditLimit.amount + acc.balance) : acc.balance;
}

// ---------------------------------------------------------------------------------------------
// Job queue: one chain per connection, so accepted actions run in the order they were accepted

function enqueue(conn, fn) {
  conn.chain = conn.chain.then(fn).catch((e) => process.stderr.write(`job failed: ${e && e.stack}\n`));
}
const workerPause = () => sleep(rnd(30, 70));

// Which states each state action may start from (the clean server's lifecycle rules).
const ALLOWED_FROM = {
  CONNECTED: ['CREATED', 'MFA_REQUIRED', 'FAILED_AUTH', 'ERROR'],
  FAILED_AUTH: ['CREATED', 'MFA_REQUIRED', 'ERROR', 'CONNECTED'],
  MFA_REQUIRED: ['CREATED', 'FAILED_AUTH', 'ERROR', 'CONNECTED'],
  ERROR: ['CREATED', 'MFA_REQUIRED', 'FAILED_AUTH', 'CONNECTED'],
  DISCONNECTED: ['CREATED', 'MFA_REQUIRED', 'FAILED_AUTH', 'ERROR', 'CONNECTED'],
};

function pathFor(from, target) {
  if (target === STATUS.DISCONNECTED) return [target];
  if (from === STATUS.CONNECTED) return [target];
  if (from === STATUS.MFA_REQUIRED) return target === STATUS.ERROR ? [target] : [STATUS.VERIFYING, target];
  // CREATED, FAILED_AUTH, ERROR, DISCONNECTED: the user (re)submits credentials in the widget
  return [STATUS.CREDENTIALS_SUBMITTED, STATUS.VERIFYING, target];
}

// Accept a state action: returns 'accepted', 'noop' or 'refused'.
function acceptStateAction(conn, target) {
  const from = conn.projected;
  if (from === target) return V('lenient-lifecycle') ? 'noop' : 'refused';
  if (!V('lenient-lifecycle') && !ALLOWED_FROM[target].includes(from)) return 'refused';
  conn.projected = target;
  enqueue(conn, () => runPath(conn, target));
  return 'accepted';
}

async function runPath(conn, target) {
  const steps = pathFor(conn.status, target);
  const captured = conn.status; // previous-status-captured-once
  for (const step of steps) {
    await workerPause();
    const prevOverride = V('previous-status-captured-once') ? captured : null;
    if (step === STATUS.CONNECTED) {
      await workerPause(); // talking to the bank
      if (conn.accountIds.length === 0) {
        if (V('connected-before-accounts')) {
          // the status flips as soon as the credentials verify; the account import is a
          // separate job that lands a few seconds later
          setStatus(conn, step, prevOverride);
          setTimeout(() => { if (conn.accountIds.length === 0) importAccounts(conn); }, 4000);
          continue;
        }
        importAccounts(conn);
      }
    }
    setStatus(conn, step, prevOverride);
  }
}

// Data actions -------------------------------------------------------------------------------

function liveTransactions(acc) {
  return acc.txnIds.map((id) => db.transactions.get(id)).filter((t) => !t.deletedAt).sort(cmpTxn);
}

// Newest first: transaction date descending, then insertion order descending.
function cmpTxn(a, b) {
  if (a.transactionDate !== b.transactionDate) return a.transactionDate < b.transactionDate ? 1 : -1;
  return b.seq - a.seq;
}

const batches = new Map(); // batched-updates: account id -> { timer, lastChange }

function announceUpdate(conn, accountId) {
  if (V('batched-updates')) {
    const now = Date.now();
    const b = batches.get(accountId);
    if (b) { b.lastChange = now; return; }
    const nb = { lastChange: now };
    nb.timer = setTimeout(() => {
      batches.delete(accountId);
      writeEvent(conn, 'accounts.updated', { accountId }, nb.lastChange);
    }, 1500);
    batches.set(accountId, nb);
    return;
  }
  writeEvent(conn, 'accounts.updated', { accountId });
}

function applySync(acc, withTransaction) {
  const now = Date.now();
  let delta = round2(rnd(5, 250)) * (Math.random() < 0.5 ? -1 : 1);
  if (delta === 0) delta = -1;
  acc.balance = round2(acc.balance + delta);
  recomputeAvailable(acc);
  if (withTransaction) {
    makeTransaction(acc, delta, new Date(now).toISOString().slice(0, 10),
      delta < 0 ? 'Card payment' : 'Incoming transfer', delta < 0 ? 'shopping' : 'income', now);
  }
  acc.lastSyncedAt = now;
}

async function runUpdate(conn, accountId) {
  await workerPause();
  const list = conn.accountIds;
  let target = db.accounts.get(accountId);
  if (V('update-applied-to-sibling')) {
    // the bank's 1-based account position is used as a 0-based index
    const idx = list.indexOf(accountId);
    target = db.accounts.get(list[(idx + 1) % list.length]);
  }
  if (V('event-before-commit')) {
    // the event goes out when the sync job fetched the data; the write-behind store
    // flushes it three seconds later
    announceUpdate(conn, accountId);
    setTimeout(() => applySync(target, true), 3000);
    return;
  }
  applySync(target, true);
  announceUpdate(conn, accountId);
}

async function runDelete(conn, txnId) {
  await workerPause();
  const t = db.transactions.get(txnId);
  if (!t || t.deletedAt) return;
  const acc = db.accounts.get(t.accountId);
  const before = liveTransactions(acc);
  const idx = before.findIndex((x) => x.id === t.id);
  t.deletedAt = Date.now();
  let named = t.id;
  if (V('deleted-event-names-survivor')) {
    // the event is built from the row that took the deleted row's place in the listing
    const after = liveTransactions(acc);
    const survivor = after[idx] || after[idx - 1];
    if (survivor) named = survivor.id;
  }
  writeEvent(conn, 'transaction.deleted', { accountId: acc.id, transactionId: named });
}

// background-sync: a scheduler refreshes connected connections from the bank and announces it
if (V('background-sync')) {
  let turn = 0;
  setInterval(() => {
    turn++;
    for (const conn of db.connections.values()) {
      if (conn.status !== STATUS.CONNECTED || conn.projected !== STATUS.CONNECTED) continue;
      if (conn.accountIds.length === 0 || Date.now() - conn.updatedAt < 1000) continue;
      enqueue(conn, async () => {
        if (conn.status !== STATUS.CONNECTED) return;
        const accId = conn.accountIds[turn % conn.accountIds.length];
        applySync(db.accounts.get(accId), turn % 2 === 0);
        writeEvent(conn, 'accounts.updated', { accountId: accId });
      });
    }
  }, 3000).unref();
}

// ---------------------------------------------------------------------------------------------
// Serialisation

function accountDto(acc) {
  const o = {
    id: acc.id,
    connectionId: acc.connectionId,
    name: acc.name,
    type: acc.type,
    currency: acc.currency,
    balance: acc.balance,
    availableBalance: acc.availableBalance,
    accountNumber: acc.accountNumber,
    // account-createdat-now: the mapper reads a column name that does not exist and falls
    // back to "now"
    createdAt: V('account-createdat-now') ? iso(Date.now()) : dbIso(acc.createdAt),
    lastSyncedAt: dbIso(acc.lastSyncedAt),
    institution: { ...INSTITUTION },
  };
  if (acc.creditLimit) o.creditLimit = { ...acc.creditLimit };
  return o;
}

function txnDto(t) {
  return {
    id: t.id,
    accountId: t.accountId,
    amount: t.amount,
    currency: t.currency,
    description: t.description,
    transactionDate: t.transactionDate,
    category: t.category,
    status: t.status,
    createdAt: dbIso(t.createdAt),
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

function send(res, status, body, headers = {}) {
  if (res.headersSent) return;
  const text = body === undefined ? '' : (typeof body === 'string' ? body : JSON.stringify(body));
  const h = { 'X-Request-Id': `req_${randomAlnum(16)}`, ...headers };
  if (body !== undefined && !h['Content-Type']) h['Content-Type'] = 'application/json; charset=utf-8';
  h['Content-Length'] = Buffer.byteLength(text);
  res.writeHead(status, h);
  res.end(text);
}

// Error answers (§7 leaves them open). kind: unauthorized, not_found, not_connected, bad_request,
// rate_limited, method_not_allowed
function fail(res, kind, message, extraHeaders) {
  if (V('alt-errors')) {
    switch (kind) {
      case 'unauthorized': return send(res, 403, 'Forbidden\n', { 'Content-Type': 'text/plain; charset=utf-8' });
      case 'not_found': return send(res, 404, undefined);
      case 'not_connected': return send(res, 400, { message });
      case 'bad_request': return send(res, 422, { errors: [{ message }] });
      default: break;
    }
  }
  const status = {
    unauthorized: 401, not_found: 404, not_connected: 409, bad_request: 400,
    rate_limited: 429, method_not_allowed: 405,
  }[kind] || 400;
  const code = {
    unauthorized: 'invalid_api_key', not_found: 'resource_not_found', not_connected: 'connection_not_connected',
    bad_request: 'invalid_request', rate_limited: 'rate_limited', method_not_allowed: 'method_not_allowed',
  }[kind] || 'invalid_request';
  return send(res, status, { error: { code, message } }, extraHeaders);
}

function readBody(req, limit = 64 * 1024) {
  return new Promise((resolve) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size <= limit) chunks.push(c);
    });
    req.on('end', () => {
      if (size > limit) return resolve({ tooLarge: true });
      const raw = Buffer.concat(chunks).toString('utf8');
      if (!raw.trim()) return resolve({ json: {} });
      try { resolve({ json: JSON.parse(raw) }); } catch { resolve({ invalid: true }); }
    });
    req.on('error', () => resolve({ invalid: true }));
  });
}

function bearer(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1] : null;
}

// ---------------------------------------------------------------------------------------------
// The API (§4)

function createConnection(client) {
  const now = Date.now();
  const conn = {
    id: newId('conn'),
    client,
    status: STATUS.CREATED,
    projected: STATUS.CREATED,
    widgetToken: newToken(),
    tokenExpiresAt: now + 30 * 60 * 1000,
    createdAt: now,
    updatedAt: now,
    accountIds: [],
    importedAt: null,
    chain: Promise.resolve(),
  };
  db.connections.set(conn.id, conn);
  db.tokens.set(conn.widgetToken, conn.id);
  // connection.created: no state before it; previousStatus repeats "created"
  writeEvent(conn, 'connection.created', { previousStatus: 'created', error: null });
  return conn;
}

// refused-create-persists: the tenant middleware resolves the tenant leniently (case-insensitive
// key index, prefix lookup, widget sessions) and opens the request's transaction; the strict key
// check runs in the controller afterwards.
function lenientTenant(token) {
  if (!token) return null;
  const lower = token.toLowerCase();
  for (const c of clients) {
    const k = c.key;
    if (k.toLowerCase() === lower) return c;
    if (Math.abs(k.length - token.length) === 1 && (k.startsWith(token) || token.startsWith(k))) return c;
  }
  const connId = db.tokens.get(token);
  if (connId) return db.connections.get(connId).client;
  return null;
}

const accountCache = new Map(); // account-get-stale-cache: id -> { body, expires }

function parseLimit(q) {
  const raw = q.get('limit');
  const def = V('small-pages') ? 7 : 25;
  const max = V('small-pages') ? 20 : 100;
  if (raw === null) return { limit: def };
  if (!/^[0-9]+$/.test(raw)) return { error: 'limit must be a positive integer' };
  const n = Number(raw);
  if (n < 1) return { error: 'limit must be at least 1' };
  return { limit: Math.min(n, max) };
}

function encodeCursor(obj) { return Buffer.from(JSON.stringify(obj)).toString('base64url'); }
function decodeCursor(s) {
  try {
    const o = JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
    return o && typeof o === 'object' ? o : null;
  } catch { return null; }
}

function transactionsPage(acc, q) {
  const lim = parseLimit(q);
  if (lim.error) return { error: lim.error };
  const live = liveTransactions(acc);
  let items = live;
  const sa = q.get('starting_after');
  if (sa !== null) {
    let handled = false;
    if (V('offset-cursor') && !sa.startsWith('txn_')) {
      const c = decodeCursor(sa);
      if (c && Number.isInteger(c.o) && c.o >= 0 && c.a === acc.id) {
        items = live.slice(c.o); // the offset into the list as it is now
        handled = true;
      }
    }
    if (!handled && V('opaque-ids') && !sa.startsWith('txn_')) {
      const c = decodeCursor(sa);
      if (c && typeof c.d === 'string' && Number.isInteger(c.s) && c.a === acc.id) {
        const pivot = { transactionDate: c.d, seq: c.s };
        items = live.filter((t) => cmpTxn(t, pivot) > 0);
        handled = true;
      }
    }
    if (!handled) {
      const pivot = db.transactions.get(sa);
      if (!pivot || pivot.accountId !== acc.id) return { error: 'starting_after names no transaction of this account' };
      items = live.filter((t) => cmpTxn(t, pivot) > 0);
    }
  }
  const page = items.slice(0, lim.limit);
  const hasMore = items.length > page.length;
  const body = { data: page.map(txnDto), has_more: hasMore };
  if (hasMore) {
    const last = page[page.length - 1];
    if (V('offset-cursor')) {
      const offset = live.length - items.length + page.length;
      body.next_cursor = encodeCursor({ a: acc.id, o: offset });
    } else if (V('opaque-ids')) {
      body.next_cursor = encodeCursor({ a: acc.id, d: last.transactionDate, s: last.seq });
    } else {
      body.next_cursor = last.id;
    }
  }
  return { body };
}

async function handleApi(req, res, url) {
  if (V('slow-api')) await sleep(rnd(80, 150));
  const token = bearer(req);
  const client = token ? clientByKey.get(token) : null;
  const path = url.pathname;
  if (!client) {
    if (V('refused-create-persists') && req.method === 'POST' && path === '/v1/connections') {
      const tenant = lenientTenant(token);
      if (tenant) createConnection(tenant);
    }
    return fail(res, 'unauthorized', 'A valid API key is required: Authorization: Bearer <API_KEY>.');
  }
  if (V('rate-limit-429')) {
    client.requestCount++;
    if (client.requestCount % 6 === 0) {
      return fail(res, 'rate_limited', 'Too many requests; retry later.', { 'Retry-After': '1' });
    }
  }

  let m;
  if (path === '/v1/connections') {
    if (req.method !== 'POST') return fail(res, 'method_not_allowed', 'Use POST.', { Allow: 'POST' });
    req.resume();
    const conn = createConnection(client);
    return send(res, 201, { connectionId: conn.id, status: conn.status, widgetToken: conn.widgetToken },
      { Location: `/v1/connections/${conn.id}` });
  }
  if ((m = /^\/v1\/connections\/([^/]+)$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const conn = db.connections.get(decodeURIComponent(m[1]));
    if (!conn || conn.client !== client) return fail(res, 'not_found', 'No such connection.');
    return send(res, 200, { connectionId: conn.id, status: conn.status, createdAt: iso(conn.createdAt) });
  }
  if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const conn = db.connections.get(decodeURIComponent(m[1]));
    if (!conn || conn.client !== client) return fail(res, 'not_found', 'No such connection.');
    // accounts-guard-not-created: the guard was written as "not CREATED" instead of "CONNECTED"
    const served = V('accounts-guard-not-created') ? conn.status !== STATUS.CREATED : conn.status === STATUS.CONNECTED;
    if (!served) return fail(res, 'not_connected', `The connection is ${conn.status}; accounts are available once it is CONNECTED.`);
    return send(res, 200, conn.accountIds.map((id) => accountDto(db.accounts.get(id))));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const id = decodeURIComponent(m[1]);
    const acc = db.accounts.get(id);
    if (!acc || acc.client !== client) return fail(res, 'not_found', 'No such account.');
    if (V('account-get-stale-cache')) {
      const hit = accountCache.get(id);
      if (hit && hit.expires > Date.now()) return send(res, 200, hit.body, { 'X-Cache': 'HIT' });
      const body = accountDto(acc);
      accountCache.set(id, { body, expires: Date.now() + 30000 });
      return send(res, 200, body, { 'X-Cache': 'MISS' });
    }
    if (V('account-wrapped')) {
      const a = accountDto(acc);
      return send(res, 200, {
        account: {
          id: a.id, connectionId: a.connectionId, currency: a.currency, balance: a.balance,
          availableBalance: a.availableBalance, lastSyncedAt: a.lastSyncedAt,
        },
        asOf: iso(Date.now()),
      });
    }
    return send(res, 200, accountDto(acc));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const acc = db.accounts.get(decodeURIComponent(m[1]));
    if (!acc || acc.client !== client) return fail(res, 'not_found', 'No such account.');
    const r = transactionsPage(acc, url.searchParams);
    if (r.error) return fail(res, 'bad_request', r.error);
    return send(res, 200, r.body);
  }
  return fail(res, 'not_found', 'No such endpoint.');
}

// ---------------------------------------------------------------------------------------------
// The widget (§1): script and the session API it calls from the client's page

function corsHeaders() {
  if (V('widget-no-cors')) return {};
  return {
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
    'Access-Control-Allow-Headers': 'Content-Type',
    'Access-Control-Max-Age': '600',
  };
}

function widgetScript() {
  const globalName = SERVICE.charAt(0).toUpperCase() + SERVICE.slice(1).replace(/[^A-Za-z0-9_$]/g, '') + 'Connect';
  return `/* ${SERVICE} connect widget v1.4.2 */
(function () {
  'use strict';
  var script = document.currentScript;
  var BASE = script && script.src ? script.src.replace(/\\/widget\\/[^\\/?#]*([?#].*)?$/, '') : '';
  function api(path, body) {
    return fetch(BASE + '/widget/api/' + path, {
      method: 'POST', mode: 'cors', credentials: 'omit',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (!r.ok) { var e = new Error((j && j.error && j.error.message) || ('HTTP ' + r.status)); e.status = r.status; throw e; }
        return j;
      });
    });
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
    if (text) e.textContent = text;
    return e;
  }
  function open(options, connectionId, onSuccess) {
    var o = (options && typeof options === 'object') ? options : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    if (!o.token || typeof o.token !== 'string') throw new Error('${globalName}.open: token is required');
    var token = o.token, connId = o.connectionId, done = false;
    var root = el('div', { 'data-${SERVICE}-connect': '1', role: 'dialog', 'aria-modal': 'true',
      style: 'position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;align-items:center;justify-content:center;z-index:2147483647;font:14px sans-serif' });
    var box = el('div', { style: 'background:#fff;border-radius:8px;padding:20px;min-width:280px' });
    var title = el('h2', { style: 'margin:0 0 12px;font-size:16px' }, 'Connect your bank');
    var msg = el('p', {}, 'Loading...');
    box.appendChild(title); box.appendChild(msg); root.appendChild(box);
    (document.body || document.documentElement).appendChild(root);
    function close() { if (root.parentNode) root.parentNode.removeChild(root); }
    function finish(status) {
      if (done) return; done = true;
      msg.textContent = 'Connected.';
      setTimeout(close, 300);
      if (typeof o.onSuccess === 'function') {
        o.onSuccess({ connectionId: status.connectionId, institution: status.institution, status: status.status });
      }
    }
    function poll() {
      api('status', { token: token }).then(function (s) {
        if (s.status === 'CONNECTED') return finish(s);
        if (s.status === 'MFA_REQUIRED') return form(true);
        if (s.status === 'FAILED_AUTH') { msg.textContent = 'The bank rejected these credentials.'; return form(false); }
        if (s.status === 'ERROR') { msg.textContent = 'Something went wrong. Please try again.'; return form(false); }
        setTimeout(poll, 1000);
      }).catch(function (e) { msg.textContent = 'Error: ' + e.message; });
    }
    function form(mfa) {
      var f = el('form'); var fields = [];
      if (mfa) { fields.push(el('input', { name: 'mfaCode', placeholder: 'One-time code', autocomplete: 'one-time-code' })); }
      else {
        fields.push(el('input', { name: 'username', placeholder: 'Username', autocomplete: 'username' }));
        fields.push(el('input', { name: 'password', type: 'password', placeholder: 'Password', autocomplete: 'current-password' }));
      }
      fields.forEach(function (x) { x.style.display = 'block'; x.style.margin = '6px 0'; f.appendChild(x); });
      f.appendChild(el('button', { type: 'submit' }, mfa ? 'Verify' : 'Connect'));
      f.addEventListener('submit', function (ev) {
        ev.preventDefault();
        var body = { token: token };
        fields.forEach(function (x) { body[x.name] = x.value; });
        msg.textContent = 'Verifying with your bank...';
        api('credentials', body).then(poll).catch(function (e) { msg.textContent = 'Error: ' + e.message; });
      });
      var old = box.querySelector('form'); if (old) box.removeChild(old);
      box.appendChild(f);
    }
    api('session', { token: token, connectionId: connId }).then(function (s) {
      title.textContent = 'Connect to ' + s.institution.name;
      if (s.status === 'CONNECTED') return finish(s);
      msg.textContent = 'Sign in with your online banking credentials.';
      form(s.status === 'MFA_REQUIRED');
    }).catch(function (e) { msg.textContent = 'This link has expired or is invalid (' + e.message + ').'; });
    return { close: close };
  }
  window.${globalName} = { version: '1.4.2', open: open };
})();
`;
}

async function handleWidget(req, res, url) {
  const path = url.pathname;
  if (path === `/widget/${SERVICE}-connect.js`) {
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, 'method_not_allowed', 'Use GET.');
    return send(res, 200, widgetScript(), {
      'Content-Type': 'application/javascript; charset=utf-8',
      'Cache-Control': 'public, max-age=300',
      'Access-Control-Allow-Origin': '*',
    });
  }
  if (!path.startsWith('/widget/api/')) return fail(res, 'not_found', 'No such widget resource.');
  const cors = corsHeaders();
  if (req.method === 'OPTIONS') return send(res, 204, undefined, cors);
  if (req.method !== 'POST') return send(res, 405, { error: { code: 'method_not_allowed', message: 'Use POST.' } }, cors);
  const body = await readBody(req);
  if (!body.json || typeof body.json !== 'object') return send(res, 400, { error: { code: 'invalid_request', message: 'JSON body expected.' } }, cors);
  const b = body.json;
  const connId = typeof b.token === 'string' ? db.tokens.get(b.token) : null;
  const conn = connId ? db.connections.get(connId) : null;
  if (!conn || conn.tokenExpiresAt < Date.now() || (b.connectionId && b.connectionId !== conn.id)) {
    return send(res, 401, { error: { code: 'invalid_session', message: 'The widget session is invalid or expired.' } }, cors);
  }
  const view = () => ({ connectionId: conn.id, status: conn.status, institution: { ...INSTITUTION } });
  if (path === '/widget/api/session') {
    const out = { ...view(), expiresAt: iso(conn.tokenExpiresAt), client: { name: conn.client.name } };
    // widget-session-leaks-key: the session endpoint serialises the whole client record
    if (V('widget-session-leaks-key')) out.client = { id: conn.client.id, name: conn.client.name, apiKey: conn.client.key };
    return send(res, 200, out, cors);
  }
  if (path === '/widget/api/status') return send(res, 200, view(), cors);
  if (path === '/widget/api/credentials') {
    // sandbox bank: username "fail" is rejected, "mfa" asks for a code, anything else connects
    let target = STATUS.CONNECTED;
    if (conn.projected === STATUS.MFA_REQUIRED) target = b.mfaCode === '000000' ? STATUS.FAILED_AUTH : STATUS.CONNECTED;
    else if (b.username === 'fail') target = STATUS.FAILED_AUTH;
    else if (b.username === 'mfa') target = STATUS.MFA_REQUIRED;
    const r = acceptStateAction(conn, target);
    if (r === 'refused') return send(res, 409, { error: { code: 'invalid_state', message: `Cannot submit credentials now (${conn.projected}).` } }, cors);
    return send(res, 202, { status: conn.status }, cors);
  }
  return send(res, 404, { error: { code: 'resource_not_found', message: 'No such widget resource.' } }, cors);
}

// ---------------------------------------------------------------------------------------------
// Admin endpoint for the conformance driver: POST /__admin/action

const STATE_ACTIONS = {
  connect: STATUS.CONNECTED, fail_auth: STATUS.FAILED_AUTH, require_mfa: STATUS.MFA_REQUIRED,
  error: STATUS.ERROR, disconnect: STATUS.DISCONNECTED,
};

async function handleAdmin(req, res) {
  if (req.method !== 'POST') return send(res, 405, { error: 'POST only' });
  const body = await readBody(req);
  if (!body.json) return send(res, 400, { error: 'JSON body expected' });
  const a = body.json;
  const action = a.action;
  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const pairs = [[a.apiKey, a.webhookUrl], [a.secondApiKey, a.secondWebhookUrl]].filter(([k]) => k);
    for (const [key, hook] of pairs) {
      const c = clientByKey.get(key);
      if (!c) return send(res, 400, { error: 'unknown api key' });
      c.webhookGen++; // stops retries to the old address
      if (action === 'register_webhook') {
        c.webhookUrl = hook || null;
        if (V('webhooks-single-endpoint') && !globalEndpoint && hook) globalEndpoint = { url: hook, client: c };
      } else {
        c.webhookUrl = null;
        if (globalEndpoint && globalEndpoint.client === c) globalEndpoint = null;
      }
    }
    return send(res, 200, action === 'register_webhook' ? { webhooks: 'per-client' } : { ok: true });
  }
  const conn = db.connections.get(a.connectionId);
  if (!conn) return send(res, 404, { error: 'unknown connection' });
  if (STATE_ACTIONS[action]) {
    const r = acceptStateAction(conn, STATE_ACTIONS[action]);
    if (r === 'refused') return send(res, 409, { error: `cannot ${action} from ${conn.projected}` });
    return send(res, 202, { ok: true, result: r });
  }
  if (action === 'update_accounts') {
    if (conn.projected !== STATUS.CONNECTED) return send(res, 409, { error: `connection is ${conn.projected}` });
    let accId = a.accountId;
    if (accId) {
      const acc = db.accounts.get(accId);
      if (!acc || acc.connectionId !== conn.id) return send(res, 409, { error: 'account not on this connection' });
    } else {
      accId = conn.accountIds[0];
      if (!accId) return send(res, 409, { error: 'connection has no accounts yet' });
    }
    enqueue(conn, () => runUpdate(conn, accId));
    return send(res, 202, { ok: true, accountId: accId });
  }
  if (action === 'delete_transaction') {
    if (conn.projected !== STATUS.CONNECTED) return send(res, 409, { error: `connection is ${conn.projected}` });
    let t = null;
    if (a.transactionId) {
      t = db.transactions.get(a.transactionId);
      const acc = t && db.accounts.get(t.accountId);
      if (!t || !acc || acc.connectionId !== conn.id || (a.accountId && a.accountId !== acc.id)) {
        return send(res, 409, { error: 'transaction not on this connection' });
      }
      if (t.deletedAt || t.pendingDelete) return send(res, 409, { error: 'transaction already deleted' });
    } else {
      const accIds = a.accountId ? [a.accountId] : conn.accountIds;
      for (const id of accIds) {
        const acc = db.accounts.get(id);
        if (!acc || acc.connectionId !== conn.id) continue;
        t = liveTransactions(acc).find((x) => !x.pendingDelete) || null;
        if (t) break;
      }
      if (!t) return send(res, 409, { error: 'no transaction to delete' });
    }
    t.pendingDelete = true;
    enqueue(conn, () => runDelete(conn, t.id));
    return send(res, 202, { ok: true, transactionId: t.id });
  }
  return send(res, 501, { error: `unsupported action ${action}` });
}

// ---------------------------------------------------------------------------------------------
// Server

const server = http.createServer((req, res) => {
  let url;
  try { url = new URL(req.url, 'http://localhost'); } catch { return fail(res, 'bad_request', 'Bad URL.'); }
  const p = url.pathname;
  let h;
  if (p === '/__admin/action') h = handleAdmin(req, res);
  else if (p.startsWith('/widget/')) h = handleWidget(req, res, url);
  else if (p === '/v1' || p.startsWith('/v1/')) h = handleApi(req, res, url);
  else if (p === '/health') h = Promise.resolve(send(res, 200, { ok: true }));
  else h = Promise.resolve(fail(res, 'not_found', 'No such endpoint.'));
  Promise.resolve(h).catch((e) => {
    process.stderr.write(`handler error: ${e && e.stack}\n`);
    send(res, 500, { error: { code: 'internal_error', message: 'Internal error.' } });
  });
});

// idle-close: the staging load balancer closes keep-alive connections idle for 250 ms
if (V('idle-close')) server.keepAliveTimeout = 250;

server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});

if (ARGS['exit-on-stdin-eof']) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('close', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
