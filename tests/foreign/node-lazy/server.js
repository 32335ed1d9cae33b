#!/usr/bin/env node
// foreign-23: a staging server for the Bank Connection Aggregation Service, written from the
// interface specification alone. Node.js 20, standard library only.
//
//   FOREIGN_API_KEYS=k1,k2 node server.js --port 0 --variant NAME --service acme --exit-on-stdin-eof
//
// Variants (see VARIANTS.md) switch on deliberate faults ("violations") or legal choices.
'use strict';

const http = require('http');
const crypto = require('crypto');

// ---------------------------------------------------------------------------------------------
// Command line and configuration
// ---------------------------------------------------------------------------------------------

function argValue(name, dflt) {
  const i = process.argv.indexOf(name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  return dflt;
}
const PORT = Number(argValue('--port', '0'));
const V = argValue('--variant', 'none');
const SERVICE = argValue('--service', 'acme');
const EXIT_ON_EOF = process.argv.includes('--exit-on-stdin-eof');

const VARIANTS = new Set([
  'none',
  // violations
  'stale-account-cache', 'connected-before-commit', 'retry-rebuilds-event', 'process-wide-client-id',
  'fanout-all-clients', 'cursor-skips-one', 'deleted-event-names-neighbour', 'silent-background-sync',
  'disconnect-keeps-accounts', 'debounced-update-timestamp', 'fresh-txn-pending', 'fx-amount-as-string',
  'shared-template-credit-limit', 'widget-session-leaks-key', 'token-pool-exhausted',
  'created-event-lazy', 'coalesced-status-events', 'status-cache-ttl',
  // legal
  'slow-responses', 'idle-close', 'burst-429', 'late-webhooks', 'duplicate-webhooks',
  'shuffled-webhooks', 'small-pages', 'alt-errors', 'ascending-order', 'long-ids',
  'announced-background-sync', 'connected-short-form-too', 'sparse-optional-fields', 'extra-fields',
]);
if (!VARIANTS.has(V)) {
  process.stderr.write(`unknown variant: ${V}\n`);
  process.exit(2);
}

const RAW_KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (RAW_KEYS.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}

const PAGE_DEFAULT = V === 'small-pages' ? 7 : 25;
const PAGE_MAX = V === 'small-pages' ? 15 : 100;
const STEP_MS = 40; // time a worker spends per lifecycle step

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function randomUpper(n) {
  const bytes = crypto.randomBytes(n);
  let s = '';
  for (let i = 0; i < n; i++) s += ALNUM[bytes[i] % ALNUM.length];
  return s;
}
function newId(prefix) {
  if (V === 'long-ids') return prefix + crypto.randomBytes(20).toString('hex'); // 40 lower-case hex
  return prefix + randomUpper(26);
}
function newToken() {
  if (V === 'long-ids') return 'sess_' + crypto.randomBytes(24).toString('hex');
  return 'sess_' + crypto.randomBytes(24).toString('base64url');
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rnd = (a, b) => a + Math.floor(Math.random() * (b - a + 1));
const money = (x) => Math.round(x * 100) / 100;
const pick = (arr) => arr[Math.floor(Math.random() * arr.length)];
const iso = (ms) => new Date(ms === undefined ? Date.now() : ms).toISOString(); // always with ms
const isoNoMs = (ms) => iso(ms).replace(/\.\d{3}Z$/, 'Z');
const dateOnly = (ms) => iso(ms).slice(0, 10);
const lower = (s) => (s == null ? null : String(s).toLowerCase());
function log(msg) {
  // Never log keys or tokens: only ids, types and statuses.
  process.stderr.write(`[${iso()}] ${msg}\n`);
}

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

/** key -> client */
const clients = new Map();
RAW_KEYS.forEach((key, index) => {
  const digest = crypto.createHash('sha256').update('client:' + key).digest();
  let cid = 'cli_';
  if (V === 'long-ids') cid += digest.toString('hex').slice(0, 40);
  else for (let i = 0; i < 26; i++) cid += ALNUM[digest[i] % ALNUM.length];
  clients.set(key, { key, index, id: cid, webhookUrl: null, queue: [], pumping: false, epoch: 0, held: [] });
});

const connections = new Map(); // connectionId -> connection
const accounts = new Map(); // accountId -> account record
const tokens = new Map(); // widgetToken -> connectionId
const accountCache = new Map(); // stale-account-cache: accountId -> serialized snapshot
let connectionsCreated = 0; // token-pool-exhausted
let processClientId = null; // process-wide-client-id
let txnSeq = 0;

// ---------------------------------------------------------------------------------------------
// Webhook events and delivery (one queue and one delivery worker per client)
// ---------------------------------------------------------------------------------------------

function eventClientId(client) {
  if (V === 'process-wide-client-id') {
    if (processClientId === null) processClientId = client.id; // cached once per process
    return processClientId;
  }
  return client.id;
}

function buildEvent(conn, type, extra) {
  const id = newId('evt_');
  const now = Date.now();
  const data = {
    eventId: id,
    type,
    occurredAt: iso(now),
    clientId: eventClientId(conn.client),
    connectionId: conn.id,
    ...extra,
  };
  const ev = { id, type, created_at: iso(now), data };
  if (V === 'extra-fields') {
    ev.api_version = 'v1';
    ev.livemode = false;
    data.source = 'worker';
  }
  return ev;
}

function emit(conn, type, extra) {
  const ev = buildEvent(conn, type, extra || {});
  log(`event ${ev.type} ${conn.id}`);
  if (V === 'debounced-update-timestamp' && type === 'accounts.updated') {
    // The update debouncer holds account events and restamps them when it flushes.
    setTimeout(() => {
      const t = Date.now();
      ev.created_at = isoNoMs(t);
      ev.data.occurredAt = isoNoMs(t);
      route(conn.client, ev);
    }, 1500);
    return ev;
  }
  route(conn.client, ev);
  if (V === 'connected-short-form-too' && type === 'connection.connected') {
    route(conn.client, { event: 'connection.connected', connectionId: conn.id, timestamp: isoNoMs() });
  }
  return ev;
}

function route(client, body) {
  if (V === 'fanout-all-clients') {
    // Broadcast bug: every registered address gets every event.
    for (const c of clients.values()) enqueue(c, body);
    return;
  }
  enqueue(client, body);
}

function enqueue(client, body) {
  if (!client.webhookUrl) return; // no address registered: nothing to deliver to
  const now = Date.now();
  const item = { body, due: now, attempts: 0, epoch: client.epoch };
  if (V === 'late-webhooks') item.due = now + rnd(2500, 4000);
  if (V === 'shuffled-webhooks') {
    // Deliveries are batched per client and sent in random order.
    client.held.push(item);
    if (client.held.length === 1) {
      setTimeout(() => {
        const batch = client.held.splice(0);
        for (let i = batch.length - 1; i > 0; i--) {
          const j = Math.floor(Math.random() * (i + 1));
          [batch[i], batch[j]] = [batch[j], batch[i]];
        }
        for (const it of batch) { it.due = Date.now(); client.queue.push(it); }
        pump(client);
      }, 1200);
    }
    return;
  }
  client.queue.push(item);
  if (V === 'duplicate-webhooks') client.queue.push({ body, due: now + 400, attempts: 0, epoch: client.epoch });
  pump(client);
}

function postJson(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch { resolve(0); return; }
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({
      hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': payload.length, 'User-Agent': `${SERVICE}-webhooks/1` },
      timeout: 5000,
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', () => resolve(0));
    });
    req.on('timeout', () => { req.destroy(); });
    req.on('error', () => resolve(0));
    req.end(payload);
  });
}

async function pump(client) {
  if (client.pumping) return;
  client.pumping = true;
  try {
    while (client.queue.length > 0) {
      // the earliest due item first
      let bi = 0;
      for (let i = 1; i < client.queue.length; i++) if (client.queue[i].due < client.queue[bi].due) bi = i;
      const item = client.queue[bi];
      const wait = item.due - Date.now();
      if (wait > 0) { await sleep(Math.min(wait, 200)); continue; }
      client.queue.splice(bi, 1);
      if (item.epoch !== client.epoch || !client.webhookUrl) continue; // unregistered since
      const status = await postJson(client.webhookUrl, item.body);
      if (status >= 200 && status < 300) {
        if (V === 'retry-rebuilds-event' && item.attempts === 0 && item.body.data) {
          // The ack timer fires before the answer is read, so every event is sent again; the
          // retry path rebuilds the payload from the event record and mints a new data id.
          const rebuilt = { ...item.body, data: { ...item.body.data, eventId: newId('evt_') } };
          client.queue.push({ body: rebuilt, due: Date.now() + 300, attempts: 1, epoch: item.epoch });
        }
        continue;
      }
      item.attempts += 1;
      if (item.attempts < 6) {
        item.due = Date.now() + 250 * 2 ** item.attempts;
        client.queue.push(item);
      }
    }
  } finally {
    client.pumping = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Bank data
// ---------------------------------------------------------------------------------------------

const DEBITS = [
  ['Groceries', 'groceries', 8, 120], ['Coffee shop', 'food_and_drink', 2, 9], ['Rent', 'housing', 600, 1400],
  ['Electricity bill', 'utilities', 30, 140], ['Train ticket', 'transport', 3, 60], ['Restaurant', 'food_and_drink', 15, 90],
  ['Online store', 'shopping', 10, 250], ['Pharmacy', 'health', 4, 40], ['Cinema', 'entertainment', 8, 30],
];
const CREDITS = [['Salary', 'income', 1800, 4200], ['Refund', 'refund', 5, 80], ['Transfer from savings', 'transfer', 50, 500]];
const INSTITUTIONS = [
  { id: 'ins_ACMEBANK', name: 'Acme Bank', logo: null },
  { id: 'ins_NORTHWIND', name: 'Northwind Savings', logo: null },
  { id: 'ins_CONTOSO', name: 'Contoso Credit Union', logo: null },
];

function makeTxn(acct, opts) {
  const credit = opts.credit !== undefined ? opts.credit : Math.random() < 0.2;
  const [desc, cat, lo, hi] = pick(credit ? CREDITS : DEBITS);
  let amount = money(lo + Math.random() * (hi - lo));
  if (!credit) amount = -amount;
  const now = Date.now();
  return {
    id: newId('txn_'),
    accountId: acct.id,
    amount,
    currency: opts.currency || acct.currency,
    description: opts.description || desc,
    transactionDate: opts.date || dateOnly(now - rnd(0, 90) * 86400000),
    category: cat,
    status: 'posted',
    createdAt: iso(now - rnd(0, 5000)),
    _seq: ++txnSeq,
    _ts: now,
    _deleted: false,
    _ingested: !!opts.ingested,
  };
}

function sortTxns(acct) {
  acct.txns.sort((a, b) => (a.transactionDate < b.transactionDate ? 1 : a.transactionDate > b.transactionDate ? -1 : b._seq - a._seq));
}

function generateAccounts(conn) {
  const inst = pick(INSTITUTIONS);
  const home = pick(['EUR', 'GBP', 'USD']);
  const foreign = home === 'USD' ? 'EUR' : 'USD';
  const specs = [
    { type: 'checking', name: 'Everyday Checking', n: rnd(30, 70) },
    { type: 'credit_card', name: 'Travel Card', n: rnd(6, 14), multi: true },
    { type: 'savings', name: 'Rainy Day Savings', n: rnd(3, 9) },
    { type: 'brokerage', name: 'Brokerage Account', n: rnd(3, 8) },
  ];
  if (Math.random() < 0.5) specs.push({ type: 'pension', name: 'Pension Plan', n: rnd(3, 6) });
  const now = Date.now();
  let cardLimit = null; // shared-template-credit-limit
  for (const s of specs) {
    const last4 = String(rnd(0, 9999)).padStart(4, '0');
    const acct = {
      id: newId('acc_'),
      connectionId: conn.id,
      name: s.name,
      type: s.type,
      currency: home,
      balance: 0,
      availableBalance: 0,
      accountNumber: (s.type === 'credit_card' ? '**** **** **** ' : '****') + last4,
      createdAt: iso(now),
      lastSyncedAt: iso(now),
      institution: { ...inst },
      txns: [],
      conn,
    };
    for (let i = 0; i < s.n; i++) acct.txns.push(makeTxn(acct, {}));
    if (s.multi) {
      // a multi-currency card: some purchases abroad, in the secondary currency
      acct.txns.push(makeTxn(acct, { credit: false, currency: foreign, description: 'Hotel abroad' }));
      acct.txns.push(makeTxn(acct, { credit: false, currency: foreign, description: 'Taxi abroad' }));
    }
    sortTxns(acct);
    const sum = money(acct.txns.filter((t) => t.currency === home).reduce((a, t) => a + t.amount, 0));
    if (s.type === 'credit_card') {
      acct.creditLimit = { amount: 5000, currency: home };
      acct.balance = money(Math.min(sum, 0));
      acct.availableBalance = money(5000 + acct.balance);
      const fsum = money(acct.txns.filter((t) => t.currency === foreign).reduce((a, t) => a + t.amount, 0));
      acct.currencyBalances = [{ currency: foreign, balance: fsum }];
      cardLimit = acct.creditLimit;
    } else {
      acct.balance = money(rnd(500, 20000) + sum);
      acct.availableBalance = acct.balance;
      if (cardLimit && V === 'shared-template-credit-limit') {
        // accounts are built from one mutable template; the card's limit stays on it
        acct.creditLimit = cardLimit;
      }
    }
    if (s.type === 'brokerage' || s.type === 'pension') {
      acct.positions = [
        { symbol: 'VWRL', name: 'FTSE All-World ETF', quantity: rnd(1, 200), price: money(80 + Math.random() * 40), currency: home },
        { symbol: 'AGGH', name: 'Global Aggregate Bond ETF', quantity: rnd(1, 200), price: money(4 + Math.random() * 2), currency: home },
      ];
    }
    accounts.set(acct.id, acct);
    conn.accounts.push(acct.id);
  }
  if (V === 'stale-account-cache') for (const id of conn.accounts) accountCache.set(id, serializeAccount(accounts.get(id)));
}

function serializeAccount(a) {
  const out = {
    id: a.id, connectionId: a.connectionId, name: a.name, type: a.type, currency: a.currency,
    balance: a.balance, availableBalance: a.availableBalance, accountNumber: a.accountNumber, createdAt: a.createdAt,
  };
  if (V !== 'sparse-optional-fields') {
    out.lastSyncedAt = a.lastSyncedAt;
    out.institution = { ...a.institution };
    if (a.creditLimit) out.creditLimit = { ...a.creditLimit };
    if (a.currencyBalances) out.currencyBalances = a.currencyBalances.map((c) => ({ ...c }));
    if (a.positions) out.positions = a.positions.map((p) => ({ ...p }));
  } else if (a.creditLimit && a.type !== 'credit_card') {
    out.creditLimit = { ...a.creditLimit };
  }
  if (V === 'extra-fields') { out.nickname = null; out.metadata = { region: 'eu' }; }
  return out;
}

function serializeTxn(t, acct) {
  const out = {
    id: t.id, accountId: t.accountId, amount: t.amount, currency: t.currency, description: t.description,
    transactionDate: t.transactionDate, category: t.category, status: t.status, createdAt: t.createdAt,
  };
  if (V === 'fresh-txn-pending' && t._ingested && Date.now() - t._ts < 30000) out.status = 'pending';
  if (V === 'fx-amount-as-string' && t.currency !== acct.currency) out.amount = t.amount.toFixed(2);
  if (V === 'sparse-optional-fields') delete out.category;
  if (V === 'extra-fields') { out.merchantName = t.description; out.reference = 'REF' + t._seq; }
  return out;
}

// changes an account as the bank reports new activity; returns nothing
function ingestActivity(acct) {
  const n = rnd(1, 2);
  let delta = 0;
  for (let i = 0; i < n; i++) {
    const t = makeTxn(acct, { date: dateOnly(Date.now()), ingested: true });
    acct.txns.unshift(t);
    delta += t.amount;
  }
  sortTxns(acct);
  if (Math.abs(delta) < 0.01) delta = -1.5;
  acct.balance = money(acct.balance + delta);
  acct.availableBalance = acct.type === 'credit_card' ? money(acct.creditLimit.amount + acct.balance) : acct.balance;
  acct.lastSyncedAt = iso();
}

// ---------------------------------------------------------------------------------------------
// Connection lifecycle: actions are accepted against the state the queue will reach, then
// carried out in order by the connection's worker.
// ---------------------------------------------------------------------------------------------

const RETRYABLE = new Set(['CREATED', 'FAILED_AUTH', 'ERROR']);

// the state an action leads to from state s, or null when refused
function nextState(s, action) {
  switch (action) {
    case 'connect': return RETRYABLE.has(s) || s === 'MFA_REQUIRED' ? 'CONNECTED' : null;
    case 'fail_auth': return RETRYABLE.has(s) || s === 'MFA_REQUIRED' ? 'FAILED_AUTH' : null;
    case 'require_mfa': return RETRYABLE.has(s) ? 'MFA_REQUIRED' : null;
    case 'error': return RETRYABLE.has(s) && s !== 'ERROR' ? 'ERROR' : s === 'MFA_REQUIRED' || s === 'CONNECTED' ? 'ERROR' : null;
    case 'disconnect': return s !== 'DISCONNECTED' ? 'DISCONNECTED' : null;
    case 'update_accounts':
    case 'delete_transaction': return s === 'CONNECTED' ? s : null;
    default: return null;
  }
}

function transition(conn, to, error) {
  const prev = conn.status;
  conn.status = to;
  if (to === 'CONNECTED') { conn.connectedAt = Date.now(); conn.everConnected = true; }
  if (V === 'coalesced-status-events' && to === 'VERIFYING') {
    // the queue coalesces a status that is left within the same worker run
    return;
  }
  emit(conn, 'connection.' + lower(to), { previousStatus: lower(prev), error: error === undefined ? null : error });
}

function scheduleBackgroundSync(conn) {
  if (V !== 'silent-background-sync' && V !== 'announced-background-sync') return;
  const at = conn.connectedAt;
  setTimeout(() => {
    if (conn.status !== 'CONNECTED' || conn.connectedAt !== at) return;
    conn.queue.push({ action: '__sync' });
    runWorker(conn);
  }, V === 'silent-background-sync' ? 6000 : 5000);
}

async function performConnect(conn, target) {
  const from = conn.status;
  if (RETRYABLE.has(from)) {
    transition(conn, 'CREDENTIALS_SUBMITTED');
    await sleep(STEP_MS);
  }
  transition(conn, 'VERIFYING');
  await sleep(STEP_MS);
  if (target === 'CONNECTED') {
    if (V === 'connected-before-commit') {
      // the success event leaves the worker before the sync is written
      const prev = conn.status;
      emit(conn, 'connection.connected', { previousStatus: lower(prev), error: null });
      await sleep(4000);
      if (conn.accounts.length === 0) generateAccounts(conn);
      conn.status = 'CONNECTED';
      conn.connectedAt = Date.now();
      conn.everConnected = true;
      scheduleBackgroundSync(conn);
      return;
    }
    if (conn.accounts.length === 0) generateAccounts(conn);
    else for (const id of conn.accounts) accounts.get(id).lastSyncedAt = iso();
    transition(conn, 'CONNECTED');
    scheduleBackgroundSync(conn);
  } else if (target === 'FAILED_AUTH') {
    transition(conn, 'FAILED_AUTH', { code: 'invalid_credentials', message: 'The bank rejected the credentials.' });
  } else if (target === 'MFA_REQUIRED') {
    transition(conn, 'MFA_REQUIRED');
  } else if (target === 'ERROR') {
    transition(conn, 'ERROR', { code: 'institution_error', message: 'The bank answered unexpectedly.' });
  }
}

function pickAccount(conn, accountId) {
  if (accountId && conn.accounts.includes(accountId)) return accounts.get(accountId);
  return accounts.get(conn.accounts[0]);
}

async function perform(conn, job) {
  const { action } = job;
  if (action === '__sync') {
    if (conn.status !== 'CONNECTED') return;
    for (const id of conn.accounts) {
      const acct = accounts.get(id);
      ingestActivity(acct);
      if (V === 'announced-background-sync') emit(conn, 'accounts.updated', { accountId: acct.id });
    }
    return;
  }
  if (action === 'disconnect') { transition(conn, 'DISCONNECTED'); return; }
  if (action === 'error' && conn.status === 'CONNECTED') {
    transition(conn, 'ERROR', { code: 'institution_error', message: 'The bank answered unexpectedly.' });
    return;
  }
  if (action === 'update_accounts') {
    const acct = pickAccount(conn, job.accountId);
    if (!acct) return;
    ingestActivity(acct);
    emit(conn, 'accounts.updated', { accountId: acct.id });
    return;
  }
  if (action === 'delete_transaction') {
    let acct = job.accountId && conn.accounts.includes(job.accountId) ? accounts.get(job.accountId) : null;
    let txn = null;
    if (job.transactionId) {
      for (const id of conn.accounts) {
        const t = accounts.get(id).txns.find((x) => x.id === job.transactionId && !x._deleted);
        if (t) { acct = accounts.get(id); txn = t; break; }
      }
    }
    if (!txn) {
      const cands = acct ? [acct] : conn.accounts.map((id) => accounts.get(id));
      for (const a of cands) {
        const live = a.txns.filter((x) => !x._deleted);
        if (live.length > 0) { acct = a; txn = live[live.length - 1]; break; }
      }
    }
    if (!txn) return;
    const live = acct.txns.filter((x) => !x._deleted);
    const idx = live.indexOf(txn);
    txn._deleted = true; // kept as a tombstone so that a cursor naming it still works
    let named = txn;
    if (V === 'deleted-event-names-neighbour') {
      // the event is built from the position the deletion had, read after the list shrank
      const after = acct.txns.filter((x) => !x._deleted);
      if (after.length > 0) named = after[idx % after.length];
    }
    emit(conn, 'transaction.deleted', { accountId: acct.id, transactionId: named.id });
    return;
  }
  await performConnect(conn, job.target);
}

async function runWorker(conn) {
  if (conn.working) return;
  conn.working = true;
  try {
    while (conn.queue.length > 0) {
      const job = conn.queue.shift();
      if (V === 'created-event-lazy' && !conn.announced) {
        conn.announced = true;
        emit(conn, 'connection.created', { previousStatus: null, error: null });
      }
      try { await perform(conn, job); } catch (e) { log(`worker error on ${conn.id}: ${e && e.message}`); }
      await sleep(5);
    }
  } finally {
    conn.working = false;
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP plumbing
// ---------------------------------------------------------------------------------------------

let responseCount = 0;
function send(res, status, body, headers) {
  const h = { 'Cache-Control': 'no-store', ...(headers || {}) };
  let payload = '';
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    if (!h['Content-Type']) h['Content-Type'] = 'application/json; charset=utf-8';
  }
  responseCount += 1;
  if (V === 'idle-close' && responseCount % 7 === 0) h.Connection = 'close';
  const finish = () => {
    if (res.writableEnded || res.destroyed) return;
    res.writeHead(status, h);
    res.end(payload);
  };
  if (V === 'slow-responses' && res.__api) setTimeout(finish, rnd(100, 300));
  else finish();
}

function apiError(res, kind, message) {
  const table = V === 'alt-errors'
    ? { unauthorized: 403, not_found: 404, not_connected: 423, bad_request: 422, method: 405 }
    : { unauthorized: 401, not_found: 404, not_connected: 409, bad_request: 400, method: 405 };
  const status = table[kind];
  if (V === 'alt-errors') {
    send(res, status, { type: 'about:blank', title: kind.replace('_', ' '), status, detail: message },
      { 'Content-Type': 'application/problem+json' });
  } else {
    send(res, status, { error: { code: kind, message } }, kind === 'unauthorized' ? { 'WWW-Authenticate': 'Bearer' } : undefined);
  }
}

function readBody(req, limit = 1 << 20) {
  return new Promise((resolve) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => { size += c.length; if (size <= limit) chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

function authClient(req) {
  const h = req.headers.authorization || '';
  const m = /^Bearer (.+)$/.exec(h);
  if (!m) return null;
  return clients.get(m[1].trim()) || null;
}

// burst-429: a token bucket per client
const buckets = new Map();
function rateLimited(client) {
  if (V !== 'burst-429') return false;
  const now = Date.now();
  let b = buckets.get(client.key);
  if (!b) { b = { tokens: 20, at: now }; buckets.set(client.key, b); }
  b.tokens = Math.min(20, b.tokens + ((now - b.at) / 1000) * 25);
  b.at = now;
  if (b.tokens < 1) return true;
  b.tokens -= 1;
  return false;
}

function isLoopback(req) {
  const a = req.socket.remoteAddress || '';
  return a === '127.0.0.1' || a === '::1' || a === '::ffff:127.0.0.1';
}

// ---------------------------------------------------------------------------------------------
// API handlers
// ---------------------------------------------------------------------------------------------

function createConnection(client, res) {
  connectionsCreated += 1;
  let token = newToken();
  if (V === 'token-pool-exhausted' && connectionsCreated > 8) {
    // the pre-minted session pool holds 8; the fallback minter uses the legacy format
    token = 'wt_' + crypto.randomBytes(24).toString('base64url');
  }
  const conn = {
    id: newId('conn_'), client, status: 'CREATED', token, accounts: [], queue: [], working: false,
    createdAt: Date.now(), connectedAt: 0, everConnected: false, announced: false, target: 'CREATED',
  };
  connections.set(conn.id, conn);
  tokens.set(token, conn.id);
  if (V !== 'created-event-lazy') {
    conn.announced = true;
    emit(conn, 'connection.created', { previousStatus: null, error: null });
  }
  const body = { connectionId: conn.id, status: 'CREATED', widgetToken: token };
  if (V === 'extra-fields') body.expiresAt = iso(Date.now() + 30 * 60000);
  if (V === 'alt-errors') send(res, 201, body, { Location: `/v1/connections/${conn.id}` });
  else send(res, 200, body);
}

function readableStatus(conn) {
  if (V === 'status-cache-ttl' && conn.status === 'CONNECTED' && Date.now() - conn.connectedAt > 10000) {
    // the status cache entry expired; the fallback reads the row the worker last persisted
    return 'VERIFYING';
  }
  return conn.status;
}

function getAccounts(client, conn, res) {
  const status = readableStatus(conn);
  const open = V === 'disconnect-keeps-accounts' ? conn.everConnected && conn.accounts.length > 0 : status === 'CONNECTED';
  if (!open) return apiError(res, 'not_connected', `The connection is ${status}; accounts are available once it is CONNECTED.`);
  send(res, 200, conn.accounts.map((id) => serializeAccount(accounts.get(id))));
}

function getAccount(client, acct, res) {
  if (V === 'stale-account-cache' && accountCache.has(acct.id)) return send(res, 200, accountCache.get(acct.id));
  send(res, 200, serializeAccount(acct));
}

function getTransactions(client, acct, query, res) {
  let limit = PAGE_DEFAULT;
  const rawLimit = query.get('limit');
  if (rawLimit !== null && rawLimit !== '') {
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1) return apiError(res, 'bad_request', 'limit must be a positive integer');
    limit = Math.min(Number(rawLimit), PAGE_MAX);
  }
  const ordered = V === 'ascending-order' ? acct.txns.slice().reverse() : acct.txns;
  let start = 0;
  const cursor = query.get('starting_after');
  if (cursor !== null && cursor !== '') {
    const pos = ordered.findIndex((t) => t.id === cursor);
    if (pos < 0) return apiError(res, 'bad_request', 'starting_after names no transaction of this account');
    start = pos + 1;
    if (V === 'cursor-skips-one') start += 1; // the offset is taken as "after the next one"
  }
  const rest = ordered.slice(start).filter((t) => !t._deleted);
  const page = rest.slice(0, limit);
  const hasMore = rest.length > page.length;
  const body = { data: page.map((t) => serializeTxn(t, acct)), has_more: hasMore };
  if (hasMore && page.length > 0) body.next_cursor = page[page.length - 1].id;
  send(res, 200, body);
}

async function handleApi(req, res, url) {
  res.__api = true;
  const client = authClient(req);
  if (!client) return apiError(res, 'unauthorized', 'A valid API key is required in the Authorization header.');
  if (rateLimited(client)) {
    return send(res, 429, { error: { code: 'rate_limited', message: 'Too many requests; retry after a second.' } }, { 'Retry-After': '1' });
  }
  const parts = url.pathname.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  // parts[0] === 'v1'
  if (parts.length === 2 && parts[1] === 'connections') {
    if (req.method !== 'POST') return apiError(res, 'method', 'Use POST.');
    await readBody(req);
    return createConnection(client, res);
  }
  if (parts[1] === 'connections' && parts.length >= 3) {
    const conn = connections.get(parts[2]);
    if (!conn || conn.client !== client) return apiError(res, 'not_found', 'No such connection.');
    if (parts.length === 3) {
      if (req.method !== 'GET') return apiError(res, 'method', 'Use GET.');
      return send(res, 200, { connectionId: conn.id, status: readableStatus(conn) });
    }
    if (parts.length === 4 && parts[3] === 'accounts') {
      if (req.method !== 'GET') return apiError(res, 'method', 'Use GET.');
      return getAccounts(client, conn, res);
    }
    return apiError(res, 'not_found', 'No such route.');
  }
  if (parts[1] === 'accounts' && (parts.length === 3 || (parts.length === 4 && parts[3] === 'transactions'))) {
    const acct = accounts.get(parts[2]);
    if (!acct || acct.conn.client !== client) return apiError(res, 'not_found', 'No such account.');
    if (req.method !== 'GET') return apiError(res, 'method', 'Use GET.');
    if (parts.length === 3) return getAccount(client, acct, res);
    return getTransactions(client, acct, url.searchParams, res);
  }
  return apiError(res, 'not_found', 'No such route.');
}

// ---------------------------------------------------------------------------------------------
// Widget
// ---------------------------------------------------------------------------------------------

const GLOBAL_NAME = SERVICE.replace(/(^|[-_])(\w)/g, (_, __, c) => c.toUpperCase()) + 'Connect';

const WIDGET_JS = `/* ${SERVICE} connect widget */
(function () {
  'use strict';
  var script = document.currentScript;
  var base = script && script.src ? new URL(script.src).origin : window.location.origin;
  function mount(el) {
    if (document.body) { document.body.appendChild(el); return; }
    document.addEventListener('DOMContentLoaded', function () { document.body.appendChild(el); });
  }
  function open(options, connectionId, onSuccess) {
    var o = options && typeof options === 'object' ? options
      : { token: options, connectionId: connectionId, onSuccess: onSuccess };
    if (typeof o.token !== 'string' || o.token.length === 0) throw new TypeError('${GLOBAL_NAME}.open: a widget token is required');
    if (typeof o.connectionId !== 'string' || o.connectionId.length === 0) throw new TypeError('${GLOBAL_NAME}.open: a connectionId is required');
    var overlay = document.createElement('div');
    overlay.setAttribute('data-${SERVICE}-connect', o.connectionId);
    overlay.style.cssText = 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647';
    var frame = document.createElement('iframe');
    frame.title = 'Connect your bank';
    frame.style.cssText = 'width:380px;height:560px;border:0;border-radius:8px;background:#fff';
    frame.src = base + '/widget/frame?connectionId=' + encodeURIComponent(o.connectionId);
    overlay.appendChild(frame);
    mount(overlay);
    var state = { closed: false };
    function onMessage(ev) {
      if (ev.origin !== base || !ev.data || typeof ev.data !== 'object') return;
      if (ev.data.type === '${SERVICE}:success' && typeof o.onSuccess === 'function') {
        o.onSuccess({ connectionId: o.connectionId, institution: ev.data.institution || null });
        close();
      }
      if (ev.data.type === '${SERVICE}:close') close();
    }
    function close() {
      if (state.closed) return;
      state.closed = true;
      window.removeEventListener('message', onMessage);
      if (overlay.parentNode) overlay.parentNode.removeChild(overlay);
    }
    window.addEventListener('message', onMessage);
    fetch(base + '/widget/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: o.token, connectionId: o.connectionId })
    }).then(function (r) { return r.json(); }).then(function (session) {
      state.session = session;
      if (frame.contentWindow) frame.contentWindow.postMessage({ type: '${SERVICE}:session', institutions: session.institutions || [] }, base);
    }).catch(function () { /* the frame shows its own error */ });
    return { close: close };
  }
  window.${GLOBAL_NAME} = { open: open, version: '1.4.0' };
})();
`;

const FRAME_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect your bank</title>
<style>body{font-family:sans-serif;margin:24px}label{display:block;margin:8px 0}</style></head>
<body><h1>Connect your bank</h1>
<form onsubmit="return false"><label>Bank <select id="bank">${INSTITUTIONS.map((i) => `<option value="${i.id}">${i.name}</option>`).join('')}</select></label>
<label>User name <input autocomplete="username"></label><label>Password <input type="password" autocomplete="current-password"></label>
<button type="submit">Continue</button></form></body></html>`;

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

async function handleWidget(req, res, url) {
  if (url.pathname === `/widget/${SERVICE}-connect.js` && (req.method === 'GET' || req.method === 'HEAD')) {
    return send(res, 200, WIDGET_JS, { 'Content-Type': 'application/javascript; charset=utf-8', 'Access-Control-Allow-Origin': '*' });
  }
  if (url.pathname === '/widget/frame' && req.method === 'GET') {
    return send(res, 200, FRAME_HTML, { 'Content-Type': 'text/html; charset=utf-8' });
  }
  if (url.pathname === '/widget/session') {
    if (req.method === 'OPTIONS') return send(res, 204, undefined, CORS);
    if (req.method !== 'POST') return send(res, 405, { error: { code: 'method' } }, CORS);
    let body = {};
    try { body = JSON.parse(await readBody(req, 65536) || '{}'); } catch { body = {}; }
    const cid = typeof body.token === 'string' ? tokens.get(body.token) : undefined;
    const conn = cid ? connections.get(cid) : undefined;
    if (!conn || (body.connectionId && body.connectionId !== conn.id)) {
      return send(res, 401, { error: { code: 'invalid_session', message: 'The widget session is not valid.' } }, CORS);
    }
    const out = {
      connectionId: conn.id,
      status: conn.status,
      institutions: INSTITUTIONS.map((i) => ({ id: i.id, name: i.name })),
    };
    if (V === 'widget-session-leaks-key') {
      // a debugging aid left in: which client key opened the session
      out.client = { id: conn.client.id, keyHint: conn.client.key.slice(0, 16) };
    }
    return send(res, 200, out, CORS);
  }
  return send(res, 404, { error: { code: 'not_found', message: 'No such route.' } });
}

// ---------------------------------------------------------------------------------------------
// Admin endpoint (the test hook the driver calls)
// ---------------------------------------------------------------------------------------------

async function handleAdmin(req, res) {
  if (!isLoopback(req)) return send(res, 403, { error: 'loopback only' });
  if (req.method !== 'POST') return send(res, 405, { error: 'use POST' });
  let b;
  try { b = JSON.parse(await readBody(req)); } catch { return send(res, 400, { error: 'bad JSON' }); }
  const action = b.action;
  if (action === 'register_webhook') {
    const c1 = clients.get(b.apiKey || '');
    if (!c1 || !b.webhookUrl) return send(res, 400, { error: 'unknown client key or no webhook URL' });
    c1.webhookUrl = b.webhookUrl;
    c1.epoch += 1;
    if (b.secondApiKey && b.secondWebhookUrl) {
      const c2 = clients.get(b.secondApiKey);
      if (!c2) return send(res, 400, { error: 'unknown second client key' });
      c2.webhookUrl = b.secondWebhookUrl;
      c2.epoch += 1;
    }
    log(`webhooks registered for ${[...clients.values()].filter((c) => c.webhookUrl).length} client(s)`);
    return send(res, 200, { webhooks: 'per-client' });
  }
  if (action === 'unregister_webhook') {
    for (const key of [b.apiKey, b.secondApiKey]) {
      const c = key && clients.get(key);
      if (c) { c.webhookUrl = null; c.epoch += 1; c.queue.length = 0; c.held.length = 0; }
    }
    log('webhooks unregistered');
    return send(res, 200, { ok: true });
  }
  const KNOWN = ['connect', 'fail_auth', 'require_mfa', 'error', 'disconnect', 'update_accounts', 'delete_transaction'];
  if (!KNOWN.includes(action)) return send(res, 501, { error: `cannot do ${action}` });
  const conn = connections.get(b.connectionId || '');
  if (!conn) return send(res, 404, { error: 'no such connection' });
  const from = conn.target;
  const to = nextState(from, action);
  if (!to) return send(res, 409, { error: `refused: ${action} from ${from}` });
  if (action === 'update_accounts' && b.accountId && conn.accounts.length > 0 && !conn.accounts.includes(b.accountId)) {
    return send(res, 409, { error: 'the account is not one of this connection' });
  }
  if (action === 'delete_transaction' && b.transactionId && conn.accounts.length > 0) {
    const exists = conn.accounts.some((id) => accounts.get(id).txns.some((t) => t.id === b.transactionId && !t._deleted));
    if (!exists) return send(res, 409, { error: 'no such live transaction on this connection' });
  }
  conn.target = to;
  conn.queue.push({ action, target: action === 'update_accounts' || action === 'delete_transaction' ? null : to,
    accountId: b.accountId || null, transactionId: b.transactionId || null });
  log(`accepted ${action} on ${conn.id} (${from} -> ${to})`);
  runWorker(conn);
  return send(res, 200, { accepted: true, from, to });
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname === '/__admin/action') return await handleAdmin(req, res);
    if (url.pathname.startsWith('/widget/')) return await handleWidget(req, res, url);
    if (url.pathname === '/v1' || url.pathname.startsWith('/v1/')) return await handleApi(req, res, url);
    return send(res, 404, { error: { code: 'not_found', message: 'No such route.' } });
  } catch (e) {
    log(`handler error: ${e && e.message}`);
    if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: 'Internal error.' } });
  }
});
if (V === 'idle-close') server.keepAliveTimeout = 250;

server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
  log(`listening, variant ${V}, ${clients.size} client(s)`);
});

if (EXIT_ON_EOF) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
process.on('SIGTERM', () => process.exit(0));
