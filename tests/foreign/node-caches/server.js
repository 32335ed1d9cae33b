#!/usr/bin/env node
// foreign-21: a staging server for the Bank Connection Aggregation Service, written from the
// interface specification alone (Node.js 20, standard library only).
//
//   node server.js --port 0 --variant NAME --service SERVICE --exit-on-stdin-eof
//
// API keys: env FOREIGN_API_KEYS="key1,key2" (one client each). Prints "PORT <n>" on stdout once
// listening on 127.0.0.1; logs go to stderr. Test hooks: POST /__admin/action (see driver.js).
'use strict';

const http = require('http');
const https = require('https');
const crypto = require('crypto');
const { URL } = require('url');

// ---------------------------------------------------------------------------------------------
// Command line and variants

const VIOLATIONS = [
  'status-replica-lag',
  'disconnect-keeps-accounts',
  'silent-session-expiry',
  'balance-cache',
  'deleted-txn-still-listed',
  'updated-event-wrong-account',
  'previous-status-at-accept',
  'webhook-fanout',
  'single-client-id',
  'one-account-no-owner-check',
  'foreign-read-reroutes-events',
  'auth-no-return',
  'txn-route-no-auth',
  'cursor-peek-skip',
  'has-more-full-page',
  'unstable-tie-order',
];
const LEGAL = [
  'none',
  'gate-reads-on-status',
  'created-expiry',
  'background-sync',
  'slow-batched-webhooks',
  'duplicate-deliveries',
  'rate-limit-429',
  'close-after-response',
  'long-ids',
  'small-pages',
  'not-connected-404',
  'oldest-first',
  'short-connected-form',
];

function parseArgs(argv) {
  const o = { port: 0, variant: 'none', service: 'acme', exitOnStdinEof: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fatal(`missing value after ${a}`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(next());
    else if (a.startsWith('--port=')) o.port = Number(a.slice(7));
    else if (a === '--variant') o.variant = next();
    else if (a.startsWith('--variant=')) o.variant = a.slice(10);
    else if (a === '--service') o.service = next();
    else if (a.startsWith('--service=')) o.service = a.slice(10);
    else if (a === '--exit-on-stdin-eof') o.exitOnStdinEof = true;
    else fatal(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) fatal('bad --port');
  if (!/^[a-z0-9][a-z0-9_-]{0,40}$/i.test(o.service)) fatal('bad --service');
  return o;
}

function fatal(msg) {
  process.stderr.write(`server.js: ${msg}\n`);
  process.exit(2);
}

const OPTS = parseArgs(process.argv.slice(2));
const V = OPTS.variant;
if (!VIOLATIONS.includes(V) && !LEGAL.includes(V)) fatal(`unknown variant ${V}`);
const is = (name) => V === name;

function log(...parts) {
  process.stderr.write(`[${new Date().toISOString()}] ${parts.join(' ')}\n`);
}
const DEBUG = !!process.env.FOREIGN_DEBUG;

// ---------------------------------------------------------------------------------------------
// Identifiers, clock helpers

const UPPER_ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function randomString(n, alphabet) {
  const bytes = crypto.randomBytes(n * 2);
  let s = '';
  for (let i = 0; s.length < n; i++) {
    const b = bytes[i % bytes.length];
    if (b < 252) s += alphabet[b % alphabet.length];
    if (i > n * 8) s += alphabet[crypto.randomInt(alphabet.length)];
  }
  return s;
}
function newId(prefix) {
  if (is('long-ids')) return prefix + crypto.randomBytes(45).toString('base64url'); // 60 chars
  return prefix + randomString(26, UPPER_ALNUM);
}
const nowIso = () => new Date().toISOString();
const round2 = (x) => Math.round(x * 100) / 100;
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');

// ---------------------------------------------------------------------------------------------
// Clients

const rawKeys = (process.env.FOREIGN_API_KEYS || '').split(',').map((k) => k.trim()).filter(Boolean);
if (rawKeys.length < 1) fatal('FOREIGN_API_KEYS must hold the API keys, comma separated');
const clients = rawKeys.map((key, i) => ({
  index: i,
  key,
  keyHash: sha256(key),
  id: newId('cli_'),
  webhookUrl: null,
  webhookGen: 0,
  signingSecret: crypto.randomBytes(24).toString('hex'),
  queue: [],
  inFlight: 0,
  flushTimer: null,
}));

function clientForKey(key) {
  const h = Buffer.from(sha256(key), 'hex');
  let found = null;
  for (const c of clients) {
    if (crypto.timingSafeEqual(h, Buffer.from(c.keyHash, 'hex'))) found = c;
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Store

const connections = new Map(); // id -> connection
const accounts = new Map(); // id -> account (internal)
const transactions = new Map(); // id -> txn (internal)
const widgetTokens = new Map(); // token -> connection id
let txnSeq = 0;

const TOKEN_TTL_MS = 30 * 60 * 1000;
const STEP_DELAY_FIRST_MS = 60;
const STEP_DELAY_MS = 250;

function createConnection(client) {
  const conn = {
    id: newId('conn_'),
    client,
    status: 'CREATED',
    projected: 'CREATED', // status once every accepted action has been carried out
    createdAt: Date.now(),
    widgetToken: 'sess_' + randomString(32, UPPER_ALNUM + 'abcdefghijklmnopqrstuvwxyz'),
    tokenExpiresAt: Date.now() + TOKEN_TTL_MS,
    accounts: [],
    queue: [],
    running: false,
    history: [{ t: Date.now(), status: 'CREATED' }],
    connectedAt: 0,
    driven: false,
    syncs: 0,
    lastSyncAt: 0,
  };
  connections.set(conn.id, conn);
  widgetTokens.set(conn.widgetToken, conn.id);
  emitConnectionEvent(conn, 'CREATED', null, null);
  return conn;
}

// ---------------------------------------------------------------------------------------------
// Accounts and transactions (generated at the first CONNECTED)

const CATEGORIES_OUT = ['groceries', 'restaurants', 'transport', 'utilities', 'shopping', 'entertainment', 'health', 'rent'];
const CATEGORIES_IN = ['income', 'transfer', 'refund', 'interest'];
const MERCHANTS = ['Fresh Market', 'City Metro', 'Power & Light Co', 'Corner Cafe', 'BookNook', 'Pharma Plus', 'Cinema 8', 'Landlord Ltd'];
const INSTITUTION = { id: 'ins_DEMOBANK01', name: 'Demo Savings Bank', logo: null };

function isoDate(daysAgo) {
  const d = new Date(Date.now() - daysAgo * 86400000);
  return d.toISOString().slice(0, 10);
}

function makeTxn(account, daysAgo, amount, description, category) {
  const t = {
    id: newId('txn_'),
    accountId: account.id,
    amount: round2(amount),
    currency: account.currency,
    description,
    transactionDate: isoDate(daysAgo),
    category,
    status: 'posted',
    createdAt: nowIso(),
    _seq: ++txnSeq,
    _deletedAt: 0,
    _pendingDelete: false,
  };
  transactions.set(t.id, t);
  return t;
}

function randomTxn(account, daysAgo) {
  if (crypto.randomInt(5) === 0) {
    const c = CATEGORIES_IN[crypto.randomInt(CATEGORIES_IN.length)];
    return makeTxn(account, daysAgo, 50 + crypto.randomInt(250000) / 100, `Incoming ${c}`, c);
  }
  const i = crypto.randomInt(MERCHANTS.length);
  return makeTxn(account, daysAgo, -(1 + crypto.randomInt(20000) / 100), MERCHANTS[i], CATEGORIES_OUT[i]);
}

function makeAccount(conn, spec) {
  const a = {
    id: newId('acc_'),
    connectionId: conn.id,
    name: spec.name,
    type: spec.type,
    currency: spec.currency,
    balance: 0,
    availableBalance: 0,
    accountNumber: '****' + String(1000 + crypto.randomInt(9000)),
    createdAt: nowIso(),
    lastSyncedAt: nowIso(),
    institution: { ...INSTITUTION },
    txns: [], // kept in chronological order of creation; deleted ones stay as tombstones
  };
  // Oldest first, several per day so that dates tie.
  let day = Math.ceil(spec.txns / 3) + 1;
  for (let i = 0; i < spec.txns; i++) {
    if (i % 3 === 0) day--;
    a.txns.push(randomTxn(a, Math.max(day, 0)));
  }
  const sum = a.txns.reduce((s, t) => s + t.amount, 0);
  if (spec.type === 'credit_card') {
    a.balance = round2(-Math.abs(sum) - 120.5);
    a.creditLimit = { amount: 5000, currency: spec.currency };
    a.availableBalance = round2(5000 + a.balance);
    a.currencyBalances = [{ currency: 'EUR', balance: -42.1, availableBalance: 957.9 }];
  } else if (spec.type === 'brokerage' || spec.type === 'pension') {
    a.positions = [
      { symbol: 'WRLD', name: 'World Equity ETF', quantity: 12.5, price: 101.2, value: 1265, currency: spec.currency },
      { symbol: 'BOND', name: 'Global Bond Fund', quantity: 40, price: 25.05, value: 1002, currency: spec.currency },
    ];
    a.balance = 2267 + round2(sum);
    a.availableBalance = a.balance;
  } else {
    a.balance = round2(1500 + sum + (spec.type === 'savings' ? 8000 : 0));
    a.availableBalance = a.balance;
  }
  a.balance = round2(a.balance);
  a.availableBalance = round2(a.availableBalance);
  accounts.set(a.id, a);
  return a;
}

function ensureAccounts(conn) {
  if (conn.accounts.length) {
    for (const a of conn.accounts) a.lastSyncedAt = nowIso();
    return;
  }
  const specs = [
    { name: 'Everyday Checking', type: 'checking', currency: 'EUR', txns: 57 },
    { name: 'Rainy Day Savings', type: 'savings', currency: 'EUR', txns: 4 },
    { name: 'Travel Credit Card', type: 'credit_card', currency: 'USD', txns: 23 },
    { name: 'Investment Portfolio', type: 'brokerage', currency: 'USD', txns: 6 },
    { name: 'Retirement Plan', type: 'pension', currency: 'GBP', txns: 0 },
  ];
  conn.accounts = specs.map((s) => makeAccount(conn, s));
}

function accountView(a) {
  const o = {
    id: a.id,
    connectionId: a.connectionId,
    name: a.name,
    type: a.type,
    currency: a.currency,
    balance: a.balance,
    availableBalance: a.availableBalance,
    accountNumber: a.accountNumber,
    createdAt: a.createdAt,
    lastSyncedAt: a.lastSyncedAt,
    institution: { ...a.institution },
  };
  if (a.creditLimit) o.creditLimit = { ...a.creditLimit };
  if (a.currencyBalances) o.currencyBalances = a.currencyBalances.map((c) => ({ ...c }));
  if (a.positions) o.positions = a.positions.map((p) => ({ ...p }));
  return o;
}

function txnView(t) {
  return {
    id: t.id,
    accountId: t.accountId,
    amount: t.amount,
    currency: t.currency,
    description: t.description,
    transactionDate: t.transactionDate,
    category: t.category,
    status: t.status,
    createdAt: t.createdAt,
  };
}

// The order of a list: newest transaction date first, then newest created first.
function orderedTxns(a) {
  const list = a.txns.slice();
  if (is('unstable-tie-order')) {
    // Sorted by date only; rows of the same date come back in whatever order the store yields.
    for (let i = list.length - 1; i > 0; i--) {
      const j = crypto.randomInt(i + 1);
      [list[i], list[j]] = [list[j], list[i]];
    }
    return list.sort((x, y) => (x.transactionDate < y.transactionDate ? 1 : x.transactionDate > y.transactionDate ? -1 : 0));
  }
  const dir = is('oldest-first') ? -1 : 1;
  return list.sort((x, y) => {
    if (x.transactionDate !== y.transactionDate) return (x.transactionDate < y.transactionDate ? 1 : -1) * dir;
    return (y._seq - x._seq) * dir;
  });
}

function txnVisible(t) {
  if (!t._deletedAt) return true;
  // deleted-txn-still-listed: deletions are soft flags that a compaction job applies to the
  // listing index only after a minute.
  if (is('deleted-txn-still-listed')) return Date.now() - t._deletedAt < 60000;
  return false;
}

// Account changes made by the driver (update_accounts) and the background sync.
function applyAccountUpdate(conn, account) {
  const t = randomTxn(account, 0);
  account.txns.push(t);
  account.balance = round2(account.balance + t.amount);
  account.availableBalance = account.type === 'credit_card' && account.creditLimit
    ? round2(account.creditLimit.amount + account.balance)
    : account.balance;
  account.lastSyncedAt = nowIso();
  let announced = account.id;
  if (is('updated-event-wrong-account')) {
    // The sync loop's variable outlives the loop: the event names the last account it visited.
    for (const a of conn.accounts) announced = a.id;
  }
  emitEvent(conn, 'accounts.updated', { accountId: announced });
}

// ---------------------------------------------------------------------------------------------
// Connection state machine: actions are accepted against the projected status and carried out
// in order by a per-connection worker.

const ERRORS = {
  FAILED_AUTH: { code: 'invalid_credentials', message: 'The bank rejected the credentials.' },
  MFA_REQUIRED: { code: 'mfa_required', message: 'The bank requires a second factor.' },
  ERROR: { code: 'internal_error', message: 'Unexpected error while connecting to the bank.' },
};

function statusStep(to, extra) {
  return { kind: 'status', to, ...extra };
}

// Returns the steps of an action from the projected status, or null when refused.
function planAction(conn, action) {
  const from = conn.projected;
  const viaWidget = (target) => {
    if (from === 'CREATED' || from === 'FAILED_AUTH' || from === 'ERROR') {
      return [statusStep('CREDENTIALS_SUBMITTED'), statusStep('VERIFYING'), statusStep(target)];
    }
    if (from === 'MFA_REQUIRED') return [statusStep('VERIFYING'), statusStep(target)];
    return null;
  };
  switch (action) {
    case 'connect':
      return viaWidget('CONNECTED');
    case 'fail_auth':
      if (from === 'CONNECTED') return [statusStep('FAILED_AUTH')]; // credentials revoked at the bank
      return viaWidget('FAILED_AUTH');
    case 'require_mfa':
      if (from === 'CONNECTED') return [statusStep('MFA_REQUIRED')]; // bank asks again on a sync
      if (from === 'MFA_REQUIRED') return null;
      return viaWidget('MFA_REQUIRED');
    case 'error':
      if (from === 'ERROR' || from === 'DISCONNECTED') return null;
      return [statusStep('ERROR')];
    case 'disconnect':
      if (from === 'DISCONNECTED') return null;
      return [statusStep('DISCONNECTED')];
    default:
      return null;
  }
}

function enqueueSteps(conn, steps) {
  const acceptedFrom = conn.status;
  steps.forEach((s, i) => {
    s.acceptedFrom = acceptedFrom;
    if (s.delay === undefined) s.delay = i === 0 && !conn.running ? STEP_DELAY_FIRST_MS : STEP_DELAY_MS;
    conn.queue.push(s);
  });
  for (const s of steps) if (s.kind === 'status') conn.projected = s.to;
  if (!conn.running) runNext(conn);
}

function runNext(conn) {
  if (!conn.queue.length) {
    conn.running = false;
    return;
  }
  conn.running = true;
  const step = conn.queue[0];
  setTimeout(() => {
    conn.queue.shift();
    try {
      runStep(conn, step);
    } catch (e) {
      log('step failed', conn.id, step.kind, e && e.stack);
    }
    runNext(conn);
  }, step.delay);
}

function runStep(conn, step) {
  if (step.kind === 'status') {
    const prev = is('previous-status-at-accept') ? step.acceptedFrom : conn.status;
    setStatus(conn, step.to, prev);
  } else if (step.kind === 'update') {
    const a = (step.accountId && accounts.get(step.accountId)) || conn.accounts[0];
    if (!a) return log('update_accounts: no account on', conn.id);
    applyAccountUpdate(conn, a);
  } else if (step.kind === 'delete') {
    let t = step.transactionId && transactions.get(step.transactionId);
    if (!t) t = pickTransaction(conn, step.accountId);
    if (!t) return log('delete_transaction: nothing to delete on', conn.id);
    t._deletedAt = Date.now();
    t._pendingDelete = false;
    emitEvent(conn, 'transaction.deleted', { accountId: t.accountId, transactionId: t.id });
  }
}

function setStatus(conn, to, prevStatus) {
  conn.status = to;
  conn.history.push({ t: Date.now(), status: to });
  if (conn.history.length > 50) conn.history.splice(0, conn.history.length - 50);
  if (to === 'CONNECTED') {
    ensureAccounts(conn);
    conn.connectedAt = Date.now();
    conn.lastSyncAt = Date.now();
  }
  emitConnectionEvent(conn, to, prevStatus, ERRORS[to] || null);
}

function pickTransaction(conn, accountId) {
  const list = accountId ? [accounts.get(accountId)].filter(Boolean) : conn.accounts;
  for (const a of list) {
    const ordered = orderedTxns(a).filter((t) => !t._deletedAt && !t._pendingDelete);
    if (ordered.length) return ordered[0];
  }
  return null;
}

// silent-session-expiry: a consent sweeper flips CONNECTED rows to DISCONNECTED in the database
// after 10 s, bypassing the event publisher. Evaluated whenever the row is loaded.
function loadConnection(id) {
  const conn = connections.get(id);
  if (conn && is('silent-session-expiry') && conn.status === 'CONNECTED' && !conn.running &&
      Date.now() - conn.connectedAt > 10000) {
    conn.status = 'DISCONNECTED';
    conn.projected = 'DISCONNECTED';
    conn.history.push({ t: Date.now(), status: 'DISCONNECTED' });
  }
  return conn;
}

// ---------------------------------------------------------------------------------------------
// Events and webhook delivery

function emitConnectionEvent(conn, status, prevStatus, error) {
  emitEvent(conn, 'connection.' + status.toLowerCase(), {
    previousStatus: prevStatus ? prevStatus.toLowerCase() : null,
    error: error ? { ...error } : null,
  });
}

// foreign-read-reroutes-events: the tenant cache that the event publisher consults is also
// written by the not-found branch of the read handlers ("negative caching"), and its key lacks
// the caller: after another client's refused read, the connection's events go to that client
// for the next minute.
const tenantCache = new Map();
function rememberForeignLookup(conn, client) {
  if (!is('foreign-read-reroutes-events')) return;
  if (tenantCache.size > 10000) tenantCache.clear();
  tenantCache.set(conn.id, { client, until: Date.now() + 60000 });
}
function tenantOf(conn) {
  const hit = tenantCache.get(conn.id);
  if (hit && hit.until > Date.now()) return hit.client;
  return conn.client;
}

function emitEvent(conn, type, extra) {
  const owner = tenantOf(conn);
  const id = newId('evt_');
  const at = nowIso();
  const data = {
    eventId: id,
    type,
    occurredAt: at,
    clientId: is('single-client-id') ? clients[0].id : owner.id,
    connectionId: conn.id,
    ...extra,
  };
  let body = { id, type, created_at: at, data };
  if (is('short-connected-form') && type === 'connection.connected') {
    body = { event: type, connectionId: conn.id, timestamp: at.replace(/\.\d{3}Z$/, 'Z') };
  }
  if (DEBUG) log('event', type, conn.id, 'prev', extra.previousStatus);
  const targets = is('webhook-fanout') ? clients : [owner];
  for (const c of targets) enqueueDelivery(c, id, JSON.stringify(body));
}

const MAX_QUEUE = 5000;
const MAX_ATTEMPTS = 6;
const webhookAgentHttp = new http.Agent({ keepAlive: true, maxSockets: 8 });
const webhookAgentHttps = new https.Agent({ keepAlive: true, maxSockets: 8 });

function enqueueDelivery(client, eventId, body) {
  if (!client.webhookUrl) return; // nobody registered: the event is not delivered
  if (client.queue.length >= MAX_QUEUE) {
    const dropped = client.queue.shift();
    log('delivery queue full for', client.id, 'dropping', dropped.eventId);
  }
  client.queue.push({ eventId, body, url: client.webhookUrl, gen: client.webhookGen, attempt: 0 });
  if (is('slow-batched-webhooks')) {
    // A batching publisher: flushed every 2.5 s, each batch posted by parallel workers.
    if (!client.flushTimer) {
      client.flushTimer = setTimeout(() => {
        client.flushTimer = null;
        const batch = client.queue.splice(0);
        for (const d of batch) sendDelivery(client, d);
      }, 2500);
    }
    return;
  }
  pump(client);
}

// One delivery in flight per client keeps a client's events in the order they were emitted.
function pump(client) {
  if (client.inFlight || !client.queue.length) return;
  const d = client.queue.shift();
  client.inFlight++;
  sendDelivery(client, d, () => {
    client.inFlight--;
    pump(client);
  });
}

function sendDelivery(client, d, done) {
  const finish = once(done || (() => {}));
  if (d.gen !== client.webhookGen || !client.webhookUrl) return finish(); // unregistered meanwhile
  d.attempt++;
  let url;
  try {
    url = new URL(d.url);
  } catch (e) {
    log('bad webhook url for', client.id);
    return finish();
  }
  const lib = url.protocol === 'https:' ? https : http;
  const ts = Math.floor(Date.now() / 1000);
  const sig = crypto.createHmac('sha256', client.signingSecret).update(`${ts}.${d.body}`).digest('hex');
  const req = lib.request(url, {
    method: 'POST',
    agent: url.protocol === 'https:' ? webhookAgentHttps : webhookAgentHttp,
    headers: {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(d.body),
      'User-Agent': `${OPTS.service}-webhooks/1.0`,
      'X-Webhook-Event-Id': d.eventId,
      'X-Webhook-Signature': `t=${ts},v1=${sig}`,
    },
    timeout: 10000,
  }, (res) => {
    res.resume();
    res.on('end', () => {
      if (res.statusCode >= 200 && res.statusCode < 300) {
        if (is('duplicate-deliveries') && d.attempt === 1 && !d.duplicate) {
          // At-least-once: the publisher's ack got lost, so the same event goes out again.
          const copy = { ...d, duplicate: true, attempt: 0 };
          setTimeout(() => sendDelivery(client, copy), 700 + crypto.randomInt(600)).unref();
        }
        finish();
      } else {
        retry(client, d, `status ${res.statusCode}`);
        finish();
      }
    });
    res.on('error', () => {});
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => {
    retry(client, d, e.message);
    finish();
  });
  req.end(d.body);
}

function retry(client, d, why) {
  if (d.gen !== client.webhookGen) return;
  if (d.attempt >= MAX_ATTEMPTS) {
    log('giving up delivery', d.eventId, 'after', d.attempt, 'attempts:', why);
    return;
  }
  const delay = Math.min(500 * 2 ** (d.attempt - 1), 16000);
  setTimeout(() => sendDelivery(client, d), delay).unref();
}

function once(fn) {
  let called = false;
  return () => {
    if (!called) {
      called = true;
      fn();
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Background jobs (only in the variants that have them); one bounded interval.

if (is('created-expiry') || is('background-sync')) {
  setInterval(() => {
    const now = Date.now();
    for (const conn of connections.values()) {
      if (conn.running || conn.queue.length) continue;
      if (is('created-expiry') && conn.status === 'CREATED' && !conn.driven && now - conn.createdAt > 8000) {
        // The widget session was never used: the connection attempt is closed as an error.
        conn.projected = 'ERROR';
        conn.status = 'ERROR';
        conn.history.push({ t: now, status: 'ERROR' });
        emitConnectionEvent(conn, 'ERROR', 'CREATED', { code: 'widget_session_expired', message: 'The widget session expired before credentials were submitted.' });
      }
      if (is('background-sync') && conn.status === 'CONNECTED' && conn.syncs < 12 && now - conn.lastSyncAt > 8000) {
        conn.syncs++;
        conn.lastSyncAt = now;
        const a = conn.accounts[conn.syncs % conn.accounts.length];
        if (a) applyAccountUpdate(conn, a);
      }
    }
  }, 1000).unref();
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

const MAX_BODY = 1024 * 1024;

function send(res, status, body, headers = {}) {
  if (res.headersSent || res.writableEnded) return;
  const text = body === undefined ? '' : JSON.stringify(body);
  const h = { ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json; charset=utf-8';
  h['Content-Length'] = Buffer.byteLength(text);
  h['Cache-Control'] = 'no-store';
  if (is('close-after-response')) h.Connection = 'close';
  res.writeHead(status, h);
  res.end(text);
}

function sendError(res, status, code, message, headers) {
  send(res, status, { error: { code, message, requestId: res.requestId } }, headers);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(Object.assign(new Error('body too large'), { status: 413 }));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function decodeSegment(s) {
  try {
    const d = decodeURIComponent(s);
    return d.length > 0 && d.length <= 200 ? d : null;
  } catch (e) {
    return null;
  }
}

// Rate limiting (variant rate-limit-429): a token bucket per credential, 20 requests a second.
const buckets = new Map();
function rateLimited(req) {
  const id = sha256(String(req.headers.authorization || req.socket.remoteAddress || ''));
  const now = Date.now();
  let b = buckets.get(id);
  if (!b) {
    if (buckets.size > 10000) buckets.clear();
    b = { tokens: 20, at: now };
    buckets.set(id, b);
  }
  b.tokens = Math.min(20, b.tokens + ((now - b.at) / 1000) * 20);
  b.at = now;
  if (b.tokens < 1) return true;
  b.tokens -= 1;
  return false;
}

function authenticate(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return { error: 'missing_api_key' };
  const m = /^Bearer +([^\s]+) *$/i.exec(h);
  if (!m) return { error: 'invalid_authorization_header' };
  const c = clientForKey(m[1]);
  if (!c) return { error: 'invalid_api_key' };
  return { client: c };
}

// ---------------------------------------------------------------------------------------------
// API handlers

function notConnected(res, conn, seen) {
  const status = (seen || conn.status).toLowerCase();
  if (is('not-connected-404')) {
    return sendError(res, 404, 'connection_not_connected', 'The connection is not connected; its accounts are not available.');
  }
  sendError(res, 409, 'connection_not_connected', `The connection is ${status}; accounts are available only when it is connected.`);
}

function statusForAccountsGate(conn) {
  if (is('status-replica-lag')) {
    // The gate reads the status from a read replica that lags about 4 s behind the primary.
    const cutoff = Date.now() - 4000;
    let s = conn.history[0].status;
    for (const h of conn.history) if (h.t <= cutoff) s = h.status;
    return s;
  }
  return conn.status;
}

function handleCreateConnection(req, res, client) {
  const conn = createConnection(client);
  log('created', conn.id, 'for client', client.index + 1);
  send(res, 201, { connectionId: conn.id, status: conn.status, widgetToken: conn.widgetToken });
}

function handleConnectionAccounts(req, res, client, connId) {
  const conn = loadConnection(connId);
  if (!conn || conn.client !== client) {
    if (conn) rememberForeignLookup(conn, client);
    return sendError(res, 404, 'connection_not_found', 'No such connection.');
  }
  if (is('disconnect-keeps-accounts')) {
    if (!conn.accounts.length) return notConnected(res, conn);
  } else {
    const seen = statusForAccountsGate(conn);
    if (seen !== 'CONNECTED') return notConnected(res, conn, seen);
  }
  send(res, 200, conn.accounts.map(accountView));
}

// Cache of one-account answers (variant balance-cache only).
const accountCache = new Map();

function findAccount(client, accId, checkOwner) {
  const a = accounts.get(accId);
  if (!a) return null;
  const conn = loadConnection(a.connectionId);
  if (checkOwner && (!conn || conn.client !== client)) {
    if (conn && client) rememberForeignLookup(conn, client);
    return null;
  }
  return { a, conn };
}

function gateReads(res, conn) {
  if (is('gate-reads-on-status') && conn.status !== 'CONNECTED') {
    sendError(res, 409, 'connection_not_connected', `The connection is ${conn.status.toLowerCase()}; its data is available only when it is connected.`);
    return true;
  }
  return false;
}

function handleAccount(req, res, client, accId) {
  const found = findAccount(client, accId, !is('one-account-no-owner-check'));
  if (!found) return sendError(res, 404, 'account_not_found', 'No such account.');
  if (gateReads(res, found.conn)) return;
  if (is('balance-cache')) {
    const hit = accountCache.get(accId);
    if (hit && hit.until > Date.now()) return send(res, 200, hit.body);
    const body = accountView(found.a);
    if (accountCache.size > 10000) accountCache.clear();
    accountCache.set(accId, { body, until: Date.now() + 30000 });
    return send(res, 200, body);
  }
  send(res, 200, accountView(found.a));
}

const DEFAULT_LIMIT = is('small-pages') ? 5 : 25;
const MAX_LIMIT = is('small-pages') ? 10 : 100;

function handleTransactions(req, res, client, accId, query) {
  const checkOwner = !is('one-account-no-owner-check') && !is('txn-route-no-auth');
  const found = findAccount(client, accId, checkOwner);
  if (!found) return sendError(res, 404, 'account_not_found', 'No such account.');
  if (gateReads(res, found.conn)) return;

  let limit = DEFAULT_LIMIT;
  if (query.has('limit')) {
    const raw = query.get('limit');
    if (!/^[0-9]{1,9}$/.test(raw) || Number(raw) < 1) {
      return sendError(res, 400, 'invalid_limit', 'limit must be a positive integer.');
    }
    limit = Math.min(Number(raw), MAX_LIMIT);
  }
  const ordered = orderedTxns(found.a);
  let start = 0;
  if (query.has('starting_after')) {
    const cursor = query.get('starting_after');
    const idx = ordered.findIndex((t) => t.id === cursor);
    if (idx < 0) return sendError(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account.');
    start = idx + 1;
  }
  const rest = ordered.slice(start).filter(txnVisible);
  const page = rest.slice(0, limit);
  let hasMore = rest.length > limit;
  if (is('has-more-full-page')) hasMore = page.length === limit;
  const body = { data: page.map(txnView), has_more: hasMore };
  if (hasMore && page.length) {
    // cursor-peek-skip: the query fetches limit+1 rows and hands out the peeked row's id.
    body.next_cursor = is('cursor-peek-skip') && rest[limit] ? rest[limit].id : page[page.length - 1].id;
  }
  send(res, 200, body);
}

async function handleApi(req, res, url) {
  const path = url.pathname;
  const method = req.method === 'HEAD' ? 'GET' : req.method;

  if (is('rate-limit-429') && rateLimited(req)) {
    return sendError(res, 429, 'rate_limited', 'Too many requests; retry later.', { 'Retry-After': '1' });
  }

  let m;
  // txn-route-no-auth: the transactions route was registered on the router before the auth
  // middleware was mounted.
  if (is('txn-route-no-auth') && method === 'GET' && (m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
    const id = decodeSegment(m[1]);
    if (!id) return sendError(res, 404, 'account_not_found', 'No such account.');
    const auth = authenticate(req);
    return handleTransactions(req, res, auth.client || null, id, url.searchParams);
  }

  const auth = authenticate(req);
  if (!auth.client) {
    sendError(res, 401, auth.error, 'A valid API key is required: Authorization: Bearer <API_KEY>.', {
      'WWW-Authenticate': 'Bearer realm="api"',
    });
    // auth-no-return: the middleware answers 401 but falls through to the handler, which runs
    // with the default tenant.
    if (!(is('auth-no-return') && method === 'POST' && path === '/v1/connections')) return;
  }
  const client = auth.client || clients[0];

  if (path === '/v1/connections') {
    if (method !== 'POST') return sendError(res, 405, 'method_not_allowed', 'Use POST.', { Allow: 'POST' });
    await readBody(req); // a body is not expected; whatever came is ignored
    return handleCreateConnection(req, res, client);
  }
  if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
    if (method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET, HEAD' });
    const id = decodeSegment(m[1]);
    if (!id) return sendError(res, 404, 'connection_not_found', 'No such connection.');
    return handleConnectionAccounts(req, res, client, id);
  }
  if ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
    if (method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET, HEAD' });
    const id = decodeSegment(m[1]);
    if (!id) return sendError(res, 404, 'account_not_found', 'No such account.');
    return handleTransactions(req, res, client, id, url.searchParams);
  }
  if ((m = /^\/v1\/accounts\/([^/]+)$/.exec(path))) {
    if (method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET, HEAD' });
    const id = decodeSegment(m[1]);
    if (!id) return sendError(res, 404, 'account_not_found', 'No such account.');
    return handleAccount(req, res, client, id);
  }
  return sendError(res, 404, 'not_found', 'No such endpoint.');
}

// ---------------------------------------------------------------------------------------------
// Widget

const GLOBAL_NAME = OPTS.service.replace(/(^|[-_])([a-z0-9])/gi, (_, __, c) => c.toUpperCase()).replace(/[^A-Za-z0-9]/g, '') + 'Connect';
const SAFE_GLOBAL = /^[A-Za-z]/.test(GLOBAL_NAME) ? GLOBAL_NAME : 'W' + GLOBAL_NAME;

function widgetScript(origin) {
  return `/* ${OPTS.service} connect widget v1 */
(function (w, d) {
  'use strict';
  var cs = d && d.currentScript;
  var base = ${JSON.stringify(origin)};
  try { if (cs && cs.src) base = new URL(cs.src).origin; } catch (e) {}
  function post(path, body) {
    return fetch(base + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), credentials: 'omit', mode: 'cors' })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); });
  }
  function open(a, b, c) {
    var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (typeof o.token !== 'string' || !o.token) throw new TypeError('open: token is required');
    if (typeof o.connectionId !== 'string' || !o.connectionId) throw new TypeError('open: connectionId is required');
    var onSuccess = typeof o.onSuccess === 'function' ? o.onSuccess : function () {};
    var closed = false, done = false, polls = 0, timer = null, root = null;
    function ui(text) {
      try {
        if (!d || !d.createElement) return;
        if (!root) {
          root = d.createElement('div');
          root.setAttribute('role', 'dialog');
          root.setAttribute('aria-label', 'Connect your bank');
          root.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647;font-family:sans-serif';
          var box = d.createElement('div');
          box.style.cssText = 'background:#fff;padding:24px;border-radius:8px;min-width:280px';
          root.appendChild(box);
          (d.body || d.documentElement).appendChild(root);
        }
        root.firstChild.textContent = text;
      } catch (e) {}
    }
    function close() {
      closed = true;
      if (timer) clearTimeout(timer);
      try { if (root && root.parentNode) root.parentNode.removeChild(root); } catch (e) {}
    }
    function poll() {
      if (closed || done || polls++ > 300) return;
      post('/widget/api/status', { token: o.token, connectionId: o.connectionId }).then(function (r) {
        if (closed || done) return;
        if (r.ok && r.body && r.body.status === 'CONNECTED') {
          done = true;
          ui('Connected.');
          try { onSuccess({ connectionId: o.connectionId, institution: r.body.institution || null }); } catch (e) {}
          setTimeout(close, 800);
          return;
        }
        if (!r.ok) { ui('This session is no longer valid.'); return; }
        timer = setTimeout(poll, 2000);
      }, function () { if (!closed) timer = setTimeout(poll, 4000); });
    }
    ui('Connecting to your bank...');
    post('/widget/api/session', { token: o.token, connectionId: o.connectionId }).then(function (r) {
      if (!r.ok) { ui('This session is no longer valid.'); return; }
      ui('Sign in with your bank to continue.');
      poll();
    }, function () { ui('The service cannot be reached.'); });
    return { close: close };
  }
  w[${JSON.stringify(SAFE_GLOBAL)}] = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this, typeof document !== 'undefined' ? document : null);
`;
}

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
  Vary: 'Origin',
};

async function handleWidget(req, res, url) {
  const path = url.pathname;
  if (path === `/widget/${OPTS.service}-connect.js`) {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET, HEAD' });
    const host = /^[A-Za-z0-9.:[\]-]{1,200}$/.test(req.headers.host || '') ? req.headers.host : `127.0.0.1:${PORT}`;
    const text = widgetScript(`http://${host}`);
    const h = {
      ...CORS,
      'Content-Type': 'application/javascript; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
      'Cache-Control': 'public, max-age=300',
      'Cross-Origin-Resource-Policy': 'cross-origin',
      'X-Content-Type-Options': 'nosniff',
    };
    if (is('close-after-response')) h.Connection = 'close';
    res.writeHead(200, h);
    return res.end(text);
  }
  if (path === '/widget/api/session' || path === '/widget/api/status') {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...CORS, 'Content-Length': 0 });
      return res.end();
    }
    if (req.method !== 'POST') return sendError(res, 405, 'method_not_allowed', 'Use POST.', { ...CORS, Allow: 'POST, OPTIONS' });
    let body;
    try {
      body = JSON.parse((await readBody(req)) || '{}');
    } catch (e) {
      return sendError(res, 400, 'invalid_json', 'The body is not JSON.', CORS);
    }
    const token = body && typeof body.token === 'string' ? body.token : '';
    const connId = widgetTokens.get(token);
    const conn = connId && loadConnection(connId);
    if (!conn || conn.id !== body.connectionId || conn.tokenExpiresAt < Date.now()) {
      return sendError(res, 401, 'invalid_widget_token', 'The widget session is not valid.', CORS);
    }
    return send(res, 200, { connectionId: conn.id, status: conn.status, institution: { id: INSTITUTION.id, name: INSTITUTION.name } }, CORS);
  }
  return sendError(res, 404, 'not_found', 'No such widget resource.', CORS);
}

// ---------------------------------------------------------------------------------------------
// Admin endpoint (test hooks for the driver)

async function handleAdmin(req, res) {
  if (req.method !== 'POST') return sendError(res, 405, 'method_not_allowed', 'Use POST.', { Allow: 'POST' });
  let a;
  try {
    a = JSON.parse(await readBody(req));
  } catch (e) {
    return sendError(res, 400, 'invalid_json', 'The body is not JSON.');
  }
  if (!a || typeof a !== 'object' || typeof a.action !== 'string') return sendError(res, 400, 'invalid_action', 'action is required.');
  const action = a.action;

  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const regs = Array.isArray(a.webhooks) ? a.webhooks : [];
    const touched = [];
    for (const r of regs) {
      const c = r && clients.find((x) => x.keyHash === r.keyHash);
      if (!c) return sendError(res, 400, 'unknown_client', 'A registration names no known client.');
      if (action === 'register_webhook') {
        try {
          const u = new URL(r.url);
          if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
        } catch (e) {
          return sendError(res, 400, 'invalid_url', 'The webhook URL is not an http(s) URL.');
        }
      }
      touched.push([c, r.url]);
    }
    for (const [c, u] of touched) {
      c.webhookGen++;
      c.queue.length = 0;
      if (c.flushTimer) {
        clearTimeout(c.flushTimer);
        c.flushTimer = null;
      }
      c.webhookUrl = action === 'register_webhook' ? u : null;
    }
    log(action, 'for', touched.length, 'client(s)');
    const perClient = touched.length === clients.length && clients.length > 1;
    return send(res, 200, action === 'register_webhook' ? { webhooks: perClient ? 'per-client' : 'registered' } : { ok: true });
  }

  const known = ['connect', 'fail_auth', 'require_mfa', 'error', 'disconnect', 'update_accounts', 'delete_transaction'];
  if (!known.includes(action)) return sendError(res, 501, 'unsupported_action', `Action ${action} is not supported.`);
  const conn = typeof a.connectionId === 'string' ? loadConnection(a.connectionId) : null;
  if (!conn) return sendError(res, 404, 'connection_not_found', 'No such connection.');
  conn.driven = true;

  if (action === 'update_accounts' || action === 'delete_transaction') {
    if (conn.projected !== 'CONNECTED') {
      return sendError(res, 409, 'invalid_state', `The connection will be ${conn.projected.toLowerCase()}; it must be connected.`);
    }
    let accountId = typeof a.accountId === 'string' && a.accountId ? a.accountId : null;
    if (accountId) {
      const acc = accounts.get(accountId);
      if (!acc || acc.connectionId !== conn.id) return sendError(res, 404, 'account_not_found', 'The account is not one of this connection.');
    }
    if (action === 'update_accounts') {
      enqueueSteps(conn, [{ kind: 'update', accountId: accountId || (conn.accounts[0] && conn.accounts[0].id) || null }]);
      log('accepted update_accounts on', conn.id);
      return send(res, 202, { accepted: true });
    }
    let txnId = typeof a.transactionId === 'string' && a.transactionId ? a.transactionId : null;
    if (txnId) {
      const t = transactions.get(txnId);
      const acc = t && accounts.get(t.accountId);
      if (!t || !acc || acc.connectionId !== conn.id || (accountId && t.accountId !== accountId)) {
        return sendError(res, 404, 'transaction_not_found', 'The transaction is not one of this connection.');
      }
      if (t._deletedAt || t._pendingDelete) return sendError(res, 409, 'already_deleted', 'The transaction is already deleted.');
      t._pendingDelete = true;
    } else if (conn.accounts.length) {
      const t = pickTransaction(conn, accountId);
      if (!t) return sendError(res, 409, 'no_transaction', 'No transaction left to delete.');
      t._pendingDelete = true;
      txnId = t.id;
    }
    enqueueSteps(conn, [{ kind: 'delete', accountId, transactionId: txnId }]);
    log('accepted delete_transaction on', conn.id);
    return send(res, 202, { accepted: true, transactionId: txnId });
  }

  const steps = planAction(conn, action);
  if (!steps) {
    return sendError(res, 409, 'invalid_transition', `${action} is not possible from ${conn.projected.toLowerCase()}.`);
  }
  enqueueSteps(conn, steps);
  log('accepted', action, 'on', conn.id, '->', conn.projected);
  return send(res, 202, { accepted: true, status: conn.projected });
}

// ---------------------------------------------------------------------------------------------
// Server

let PORT = 0;
let requestCounter = 0;

const server = http.createServer(async (req, res) => {
  res.requestId = 'req_' + (++requestCounter).toString(36) + randomString(6, UPPER_ALNUM);
  res.setHeader('X-Request-Id', res.requestId);
  if (is('close-after-response')) res.shouldKeepAlive = false;
  req.on('error', () => {});
  res.on('error', () => {});
  try {
    let url;
    try {
      url = new URL(req.url, 'http://localhost');
    } catch (e) {
      return sendError(res, 400, 'bad_request', 'The request target is not valid.');
    }
    const path = url.pathname;
    if (DEBUG) log(req.method, req.url);
    if (path === '/__admin/action') return await handleAdmin(req, res);
    if (path.startsWith('/widget/')) return await handleWidget(req, res, url);
    if (path === '/v1' || path.startsWith('/v1/')) return await handleApi(req, res, url);
    if (path === '/healthz') return send(res, 200, { ok: true });
    return sendError(res, 404, 'not_found', 'No such endpoint.');
  } catch (e) {
    if (e && e.status === 413) return sendError(res, 413, 'payload_too_large', 'The body is too large.', { Connection: 'close' });
    log('unhandled error', e && e.stack);
    sendError(res, 500, 'internal_error', 'Internal error.');
  }
});

server.keepAliveTimeout = 5000;
server.headersTimeout = 15000;
server.requestTimeout = 30000;
server.on('clientError', (err, socket) => {
  if (socket.writable && !socket.destroyed) {
    const line = err && err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    socket.end(`HTTP/1.1 ${line}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  } else {
    socket.destroy();
  }
});

server.listen(OPTS.port, '127.0.0.1', () => {
  PORT = server.address().port;
  process.stdout.write(`PORT ${PORT}\n`);
  log(`listening on 127.0.0.1:${PORT}, variant ${V}, service ${OPTS.service}, ${clients.length} client(s)`);
});

function shutdown(why) {
  log('shutting down:', why);
  server.close();
  setTimeout(() => process.exit(0), 50).unref();
  process.exit(0);
}

if (OPTS.exitOnStdinEof) {
  process.stdin.on('end', () => shutdown('stdin closed'));
  process.stdin.on('error', () => shutdown('stdin error'));
  process.stdin.resume();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('uncaughtException', (e) => log('uncaught exception', e && e.stack));
process.on('unhandledRejection', (e) => log('unhandled rejection', e && e.stack));
