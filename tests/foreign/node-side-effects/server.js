#!/usr/bin/env node
// Bank Connection Aggregation Service: a test server written from service-spec.md alone.
// Node.js 20, standard library only.
//
// Usage: FOREIGN_API_KEYS=key1,key2 node server.js [--port N] [--variant NAME]
//        [--service acme] [--exit-on-stdin-eof]
// Prints "PORT <n>" on stdout once listening. Test hook: POST /__admin/action (see driver.js).
'use strict';

const http = require('http');
const crypto = require('crypto');

// ---------------------------------------------------------------- arguments
const args = process.argv.slice(2);
function arg(name, dflt) {
  const i = args.indexOf('--' + name);
  if (i >= 0 && i + 1 < args.length) return args[i + 1];
  const pre = args.find((a) => a.startsWith('--' + name + '='));
  return pre ? pre.slice(name.length + 3) : dflt;
}
const PORT = parseInt(arg('port', '0'), 10) || 0;
const VARIANT = arg('variant', 'none');
const SERVICE = arg('service', process.env.SERVICE || 'acme');
const EXIT_ON_EOF = args.includes('--exit-on-stdin-eof');

const VIOLATIONS = [
  'near-miss-creates', 'widget-token-creates', 'foreign-read-syncs', 'missing-key-txn-syncs',
  'update-silenced', 'event-before-data', 'deleted-cursor-restarts', 'tombstones-after-cursor',
  'has-more-full-page', 'stale-account-read', 'future-synced-at', 'created-at-rewritten',
  'event-time-backwards', 'second-webhook-fallback', 'second-client-clientid',
  'accounts-while-created', 'upper-previous-status',
];
const LEGALS = [
  'coalesce-updates', 'duplicate-deliveries', 'late-delivery', 'shuffled-delivery',
  'error-object', 'alt-status-codes', 'short-ids', 'tiny-max-limit', 'oldest-first',
  'lenient-limit', 'short-form-connected', 'cursor-on-last-page', 'late-envelope',
  'unknown-cursor-empty',
];
if (VARIANT !== 'none' && !VIOLATIONS.includes(VARIANT) && !LEGALS.includes(VARIANT)) {
  process.stderr.write(`unknown variant ${VARIANT}\n`);
  process.exit(2);
}
const V = (name) => VARIANT === name;

// ---------------------------------------------------------------- helpers
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function rid(prefix) {
  if (V('short-ids')) return prefix + crypto.randomBytes(6).toString('hex'); // 12 lower-case hex
  const b = crypto.randomBytes(26);
  let s = '';
  for (let i = 0; i < 26; i++) s += ALNUM[b[i] % 36];
  return prefix + s;
}
function rnd(n) { return crypto.randomInt(n); }
function pick(a) { return a[rnd(a.length)]; }
function money(x) { return Math.round(x * 100) / 100; }
function iso(ms) { return new Date(ms).toISOString(); } // always with milliseconds, Z
let lastClock = 0;
function now() { // never moves back, even if the wall clock does
  const t = Date.now();
  lastClock = Math.max(lastClock, t);
  return lastClock;
}
function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// ---------------------------------------------------------------- clients
const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}
const clients = KEYS.map((key, index) => ({
  index, key, id: rid('cli_'), webhookUrl: null, gen: 0, pending: [], buffer: [], flushTimer: null,
}));
function clientByKey(k) { return clients.find((c) => c.key === k) || null; }

// ---------------------------------------------------------------- store
const connections = new Map(); // id -> connection
const tokens = new Map(); // widget token -> connection
const accounts = new Map(); // id -> account
const txns = new Map(); // id -> transaction (deleted ones kept as tombstones for cursors)
let txnSeq = 0;
const TOKEN_TTL_MS = 60 * 60 * 1000;

const INSTITUTIONS = [
  { id: 'ins_NORTHBANK', name: 'North Bank' }, { id: 'ins_RIVERCU', name: 'River Credit Union' },
  { id: 'ins_HARBOR', name: 'Harbor Savings' }, { id: 'ins_ALPINE', name: 'Alpine Trust' },
];
const DEBITS = [
  ['groceries', ['Fresh Market', 'Corner Grocer', 'Green Basket']],
  ['transport', ['City Metro', 'Fuel Station', 'Ride Share']],
  ['dining', ['Cafe Luna', 'Pizza Place', 'Sushi Bar']],
  ['utilities', ['Power Co', 'Water Works', 'Telecom Ltd']],
  ['shopping', ['Book Store', 'Online Shop', 'Hardware Depot']],
];
const CREDITS = [['income', ['Salary ACME Corp', 'Freelance payment']], ['transfer', ['Transfer from savings', 'Refund']]];

function newTxn(acc, createdAtMs, dateStr) {
  const credit = rnd(5) === 0;
  const [category, names] = credit ? pick(CREDITS) : pick(DEBITS);
  const amount = credit ? money(100 + rnd(300000) / 100) : -money(1 + rnd(25000) / 100);
  const t = {
    id: rid('txn_'), accountId: acc.id, amount, currency: acc.currency, description: pick(names),
    transactionDate: dateStr, category, status: 'posted', createdAt: iso(createdAtMs),
    seq: ++txnSeq, deleted: false,
  };
  txns.set(t.id, t);
  acc.txns.push(t);
  return t;
}

function makeAccounts(conn, t) {
  const inst = pick(INSTITUTIONS);
  const n = 1 + rnd(4);
  const types = ['checking', 'savings', 'credit_card', 'brokerage', 'pension'];
  for (let i = 0; i < n; i++) {
    const type = i === 0 ? 'checking' : pick(types);
    const currency = pick(['EUR', 'EUR', 'USD', 'GBP']);
    const acc = {
      id: rid('acc_'), connectionId: conn.id, client: conn.client, type, currency,
      name: { checking: 'Everyday Checking', savings: 'Rainy Day Savings', credit_card: 'Rewards Card', brokerage: 'Investment Account', pension: 'Retirement Plan' }[type] + (i ? ' ' + (i + 1) : ''),
      balance: 0, availableBalance: 0,
      accountNumber: '****' + String(1000 + rnd(9000)),
      createdAt: iso(t), lastSyncedMs: t,
      institution: { id: inst.id, name: inst.name, logo: null },
      txns: [],
    };
    if (type === 'credit_card') {
      acc.creditLimit = { amount: 1000 * (1 + rnd(10)), currency };
      acc.balance = -money(rnd(80000) / 100);
      if (rnd(2) === 0) acc.currencyBalances = [{ currency: currency === 'USD' ? 'EUR' : 'USD', balance: -money(rnd(20000) / 100) }];
    } else {
      acc.balance = money(rnd(2000000) / 100);
    }
    if (type === 'brokerage' || type === 'pension') {
      const syms = [['VTI', 'Total Market ETF'], ['AAPL', 'Apple Inc.'], ['BND', 'Total Bond ETF'], ['MSFT', 'Microsoft Corp.']];
      acc.positions = [];
      let total = 0;
      for (let k = 0; k < 1 + rnd(3); k++) {
        const [symbol, pname] = syms[k];
        const quantity = 1 + rnd(200);
        const price = money(20 + rnd(40000) / 100);
        const marketValue = money(quantity * price);
        total += marketValue;
        acc.positions.push({ symbol, name: pname, quantity, price, marketValue, currency });
      }
      acc.balance = money(total);
    }
    recomputeAvailable(acc);
    // history: transactions dated in the past, oldest first (ascending seq)
    const count = 3 + rnd(43);
    const day = 24 * 3600 * 1000;
    let d = t - (count + rnd(30)) * day;
    for (let k = 0; k < count; k++) {
      d += rnd(2) * day;
      newTxn(acc, t, new Date(Math.min(d, t)).toISOString().slice(0, 10));
    }
    accounts.set(acc.id, acc);
    conn.accountIds.push(acc.id);
  }
}
function recomputeAvailable(acc) {
  acc.availableBalance = acc.type === 'credit_card' ? money(acc.creditLimit.amount + acc.balance) : acc.balance;
}

function accountView(acc) {
  const o = {
    id: acc.id, connectionId: acc.connectionId, name: acc.name, type: acc.type, currency: acc.currency,
    balance: acc.balance, availableBalance: acc.availableBalance, accountNumber: acc.accountNumber,
    createdAt: acc.createdAt, lastSyncedAt: iso(acc.lastSyncedMs), institution: { ...acc.institution },
  };
  if (acc.creditLimit) o.creditLimit = { ...acc.creditLimit };
  if (acc.currencyBalances) o.currencyBalances = acc.currencyBalances.map((x) => ({ ...x }));
  if (acc.positions) o.positions = acc.positions.map((x) => ({ ...x }));
  return o;
}
function txnView(t) {
  return {
    id: t.id, accountId: t.accountId, amount: t.amount, currency: t.currency, description: t.description,
    transactionDate: t.transactionDate, category: t.category, status: t.status, createdAt: t.createdAt,
  };
}

// ---------------------------------------------------------------- webhook delivery
function postJson(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch (e) { resolve(false); return; }
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request({
      hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': data.length, 'User-Agent': 'bank-webhooks/1' },
      timeout: 5000,
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode >= 200 && res.statusCode < 300));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end(data);
  });
}
function deliveryClient(client) {
  // variant second-webhook-fallback: the second client's events go to the first client's address
  if (V('second-webhook-fallback') && client.index > 0) return clients[0];
  return client;
}
// Sends one event to the client's address, retrying (same event id) on failure.
async function sendWithRetry(client, body) {
  const target = deliveryClient(client);
  const gen = target.gen;
  const url = target.webhookUrl;
  if (!url) return;
  const delays = [500, 1000, 2000, 4000, 8000];
  for (let attempt = 0; ; attempt++) {
    if (target.gen !== gen) return; // unregistered meanwhile: stop retrying
    const payload = typeof body === 'function' ? body() : body;
    if (await postJson(url, payload)) return;
    if (attempt >= delays.length) return;
    await sleep(delays[attempt]);
  }
}
function dispatch(client, conn, body) {
  const target = deliveryClient(client);
  if (!target.webhookUrl) { // not registered yet: hold (bounded) until registration
    if (target.pending.length < 10000) target.pending.push([client, conn, body]);
    return;
  }
  if (V('late-delivery')) {
    setTimeout(() => sendWithRetry(client, body), 2000 + rnd(3000));
    return;
  }
  if (V('shuffled-delivery')) {
    target.buffer.push([client, body]);
    if (!target.flushTimer) {
      target.flushTimer = setTimeout(() => {
        target.flushTimer = null;
        const batch = target.buffer.splice(0);
        for (let i = batch.length - 1; i > 0; i--) { const j = rnd(i + 1); [batch[i], batch[j]] = [batch[j], batch[i]]; }
        for (const [c, b] of batch) sendWithRetry(c, b);
      }, 1000);
    }
    return;
  }
  if (V('late-envelope')) {
    // the envelope is built when the queue gets to it, 1-2 s after the fact
    const delay = 1000 + rnd(1000);
    conn.chain = conn.chain.then(async () => {
      await sleep(delay);
      const b = { ...body, created_at: iso(now()) };
      await sendWithRetry(client, b);
    });
    return;
  }
  // clean: in order per connection
  conn.chain = conn.chain.then(() => sendWithRetry(client, body));
  if (V('duplicate-deliveries')) setTimeout(() => sendWithRetry(client, body), 1500 + rnd(2000));
}

function emit(conn, type, extra, occurredMs) {
  const client = conn.client;
  const id = rid('evt_');
  const clientId = V('second-client-clientid') ? clients[0].id : client.id;
  const body = {
    id, type, created_at: iso(occurredMs),
    data: { eventId: id, type, occurredAt: iso(occurredMs), clientId, connectionId: conn.id, ...extra },
  };
  dispatch(client, conn, body);
  if (V('short-form-connected') && type === 'connection.connected') {
    const short = { event: type, connectionId: conn.id, timestamp: new Date(occurredMs).toISOString().replace(/\.\d{3}Z$/, 'Z') };
    dispatch(client, conn, short);
  }
}

// ---------------------------------------------------------------- connection lifecycle
function createConnection(client) {
  const t = now();
  const conn = {
    id: rid('conn_'), client, status: 'created', widgetToken: 'sess_' + crypto.randomBytes(24).toString('base64url'),
    tokenExpires: t + TOKEN_TTL_MS, createdMs: t, accountIds: [], chain: Promise.resolve(),
  };
  connections.set(conn.id, conn);
  tokens.set(conn.widgetToken, conn);
  emit(conn, 'connection.created', { previousStatus: null, error: null }, t);
  return conn;
}

const FAILURE_ERRORS = {
  failed_auth: { code: 'invalid_credentials', message: 'The bank rejected the credentials' },
  mfa_required: { code: 'mfa_required', message: 'The bank asks for a second factor' },
  error: { code: 'internal_error', message: 'Unexpected error while connecting' },
};
function pathTo(from, to) {
  if (to === 'disconnected') return from === 'disconnected' ? null : ['disconnected'];
  if (to === 'error' && from === 'connected') return ['error'];
  if (from === 'mfa_required') return to === 'mfa_required' ? null : ['verifying', to];
  if (['created', 'failed_auth', 'error', 'disconnected'].includes(from)) return ['credentials_submitted', 'verifying', to];
  return null; // connected (other than error/disconnect), or a transient state
}
function transition(conn, to) {
  const steps = pathTo(conn.status, to);
  if (!steps) return false;
  let csMs = null;
  for (const s of steps) {
    const prev = conn.status;
    const t = now();
    if (s === 'credentials_submitted') csMs = t;
    conn.status = s;
    if (s === 'connected' && conn.accountIds.length === 0) makeAccounts(conn, t);
    let occurred = t;
    if (V('event-time-backwards') && s === 'connected' && csMs !== null) occurred = csMs - 1000;
    const prevOut = V('upper-previous-status') && prev === 'connected' ? prev.toUpperCase() : prev;
    const error = V('error-object') && FAILURE_ERRORS[s] ? { ...FAILURE_ERRORS[s] } : null;
    emit(conn, 'connection.' + s, { previousStatus: prevOut, error }, occurred);
  }
  return true;
}

const lastUpdateEvent = new Map(); // accountId -> ms (update-silenced)
const coalesceTimers = new Map(); // accountId -> timer (coalesce-updates)
// A sync of one account: new transactions, a new balance, a new lastSyncedAt; announced.
function syncAccount(acc) {
  const conn = connections.get(acc.connectionId);
  const t = now();
  const apply = () => {
    const n = 1 + rnd(3);
    let delta = 0;
    const today = new Date(t).toISOString().slice(0, 10);
    for (let i = 0; i < n; i++) delta += newTxn(acc, t, today).amount;
    acc.balance = money(acc.balance + delta);
    recomputeAvailable(acc);
    acc.lastSyncedMs = V('future-synced-at') ? t + 10 * 60 * 1000 : t;
    if (V('created-at-rewritten')) acc.createdAt = iso(t);
  };
  const announce = () => emit(conn, 'accounts.updated', { accountId: acc.id }, t);
  if (V('event-before-data')) {
    announce();
    setTimeout(apply, 2500);
    return;
  }
  apply();
  if (V('update-silenced')) {
    const last = lastUpdateEvent.get(acc.id) || 0;
    if (t - last < 3000) return; // "rate limited": the change is never announced
    lastUpdateEvent.set(acc.id, t);
    announce();
    return;
  }
  if (V('coalesce-updates')) {
    clearTimeout(coalesceTimers.get(acc.id));
    coalesceTimers.set(acc.id, setTimeout(() => { coalesceTimers.delete(acc.id); announce(); }, 1500));
    return;
  }
  announce();
}

function deleteTransaction(conn, t) {
  t.deleted = true;
  emit(conn, 'transaction.deleted', { accountId: t.accountId, transactionId: t.id }, now());
}

// ---------------------------------------------------------------- HTTP plumbing
function send(res, status, body, headers) {
  const h = { 'Cache-Control': 'no-store', ...(headers || {}) };
  if (body === undefined || body === null) { res.writeHead(status, h); res.end(); return; }
  if (typeof body === 'string') {
    res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', ...h });
    res.end(body);
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', ...h });
  res.end(JSON.stringify(body));
}
function fail(res, status, code, message) {
  if (V('alt-status-codes')) {
    const alt = { 401: 403, 409: 423, 400: 422 }[status] || status;
    send(res, alt, status === 404 ? null : `${code}: ${message}\n`);
    return;
  }
  send(res, status, { error: { code, message } });
}
function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => { size += c.length; if (size <= 1 << 20) chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

// Authentication: returns { client } or { reason, token }.
function authenticate(req) {
  const h = req.headers.authorization;
  if (h === undefined) return { reason: 'missing' };
  const m = /^Bearer ([^\s]+)$/.exec(h);
  if (!m) return { reason: 'malformed' };
  const c = clientByKey(m[1]);
  if (c) return { client: c };
  if (tokens.has(m[1])) return { reason: 'widget', token: m[1] };
  return { reason: 'unknown', token: m[1] };
}
function nearMissClient(k) {
  return clients.find((c) => k.toLowerCase() === c.key.toLowerCase() ||
    (Math.abs(k.length - c.key.length) <= 1 && (k.startsWith(c.key) || c.key.startsWith(k)))) || null;
}

const staleCache = new Map(); // stale-account-read

function parseLimit(raw) {
  const dflt = V('tiny-max-limit') ? 3 : 25;
  const max = V('tiny-max-limit') ? 5 : 100;
  if (raw === null) return dflt;
  if (!/^[0-9]+$/.test(raw) || parseInt(raw, 10) < 1) return V('lenient-limit') ? dflt : NaN;
  return Math.min(parseInt(raw, 10), max);
}

function listTransactions(res, acc, url) {
  const limit = parseLimit(url.searchParams.get('limit'));
  if (Number.isNaN(limit)) return fail(res, 400, 'invalid_limit', 'limit must be a positive integer');
  const sa = url.searchParams.get('starting_after');
  const oldestFirst = V('oldest-first');
  const ordered = oldestFirst ? acc.txns.slice() : acc.txns.slice().reverse(); // acc.txns is by ascending seq
  let rest;
  if (sa !== null) {
    if (V('deleted-cursor-restarts')) {
      const live = ordered.filter((t) => !t.deleted);
      const idx = live.findIndex((t) => t.id === sa);
      if (idx < 0 && !txns.has(sa)) return fail(res, 400, 'invalid_cursor', 'unknown starting_after');
      rest = live.slice(idx + 1); // a deleted cursor is "not found": idx -1 starts over
    } else {
      const cur = txns.get(sa);
      if (!cur || cur.accountId !== acc.id) {
        if (V('unknown-cursor-empty')) return send(res, 200, { data: [], has_more: false });
        return fail(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account');
      }
      rest = ordered.filter((t) => (oldestFirst ? t.seq > cur.seq : t.seq < cur.seq));
      if (!V('tombstones-after-cursor')) rest = rest.filter((t) => !t.deleted);
    }
  } else {
    rest = ordered.filter((t) => !t.deleted);
  }
  const page = rest.slice(0, limit);
  const hasMore = V('has-more-full-page') ? page.length === limit : rest.length > limit;
  const body = { data: page.map(txnView), has_more: hasMore };
  if ((hasMore || V('cursor-on-last-page')) && page.length > 0) body.next_cursor = page[page.length - 1].id;
  send(res, 200, body);
}

// ---------------------------------------------------------------- widget
function widgetScript(base) {
  const globalName = SERVICE.replace(/[^A-Za-z0-9]/g, '').replace(/^./, (c) => c.toUpperCase()) + 'Connect';
  return `/* ${SERVICE} Connect widget. Opened with a widget token (sess_...), never an API key. */
(function (global) {
  'use strict';
  var script = document.currentScript;
  var BASE = ${JSON.stringify(base)};
  try { if (script && script.src) { BASE = new URL(script.src).origin; } } catch (e) {}

  function el(tag, text, style) {
    var e = document.createElement(tag);
    if (text) e.textContent = text;
    if (style) e.setAttribute('style', style);
    return e;
  }
  function mount(node) {
    if (document.body) { document.body.appendChild(node); return; }
    document.addEventListener('DOMContentLoaded', function () { document.body.appendChild(node); });
  }

  function open(options) {
    var o = (options && typeof options === 'object') ? options
      : { token: arguments[0], connectionId: arguments[1], onSuccess: arguments[2] };
    if (!o || typeof o.token !== 'string' || o.token.length === 0) {
      throw new TypeError('${globalName}.open: a widget token is required');
    }
    var closed = false, done = false, polls = 0;
    var overlay = el('div', null, 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647');
    var box = el('div', null, 'background:#fff;padding:24px;border-radius:8px;font-family:sans-serif;min-width:280px');
    var title = el('h2', 'Connect your bank');
    var status = el('p', 'Loading…');
    var close = el('button', 'Close');
    close.onclick = function () { handle.close(); };
    box.appendChild(title); box.appendChild(status); box.appendChild(close);
    overlay.appendChild(box);
    mount(overlay);

    function poll() {
      if (closed || done) return;
      polls++;
      fetch(BASE + '/widget/v1/session', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: o.token, connectionId: o.connectionId || null })
      }).then(function (r) {
        return r.json().then(function (b) { return { ok: r.ok, body: b }; });
      }).then(function (r) {
        if (closed) return;
        if (!r.ok) { status.textContent = 'This session is not valid any more.'; return; }
        var s = r.body.status;
        status.textContent = s === 'CONNECTED' ? 'Connected.' : 'Sign in with your bank to continue (' + s.toLowerCase() + ').';
        if (s === 'CONNECTED') {
          done = true;
          if (typeof o.onSuccess === 'function') {
            try { o.onSuccess({ connectionId: r.body.connectionId, institution: r.body.institution || null }); } catch (e) { setTimeout(function () { throw e; }); }
          }
          return;
        }
        if (polls < 120) setTimeout(poll, 2000);
      }).catch(function () {
        if (!closed) status.textContent = 'The service cannot be reached.';
      });
    }
    poll();
    var handle = {
      close: function () {
        closed = true;
        if (overlay.parentNode) overlay.parentNode.removeChild(overlay);
      }
    };
    return handle;
  }

  global.${globalName} = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
`;
}
const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

// ---------------------------------------------------------------- test hook (driver)
async function adminAction(req, res) {
  let a;
  try { a = JSON.parse((await readBody(req)) || '{}'); } catch (e) { return send(res, 400, { error: 'bad json' }); }
  const actor = clientByKey(a.apiKey || '');
  if (!actor) return send(res, 401, { error: 'the test hook needs a valid API key' });
  const action = a.action;
  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const pairs = [[actor, a.webhookUrl]];
    const second = a.secondApiKey ? clientByKey(a.secondApiKey) : null;
    if (second && second !== actor) pairs.push([second, a.secondWebhookUrl]);
    for (const [c, url] of pairs) {
      c.gen++;
      if (action === 'register_webhook' && url) {
        c.webhookUrl = url;
        const held = c.pending.splice(0);
        for (const [cl, conn, body] of held) dispatch(cl, conn, body);
      } else {
        c.webhookUrl = null;
        c.pending = [];
        c.buffer = [];
      }
    }
    return send(res, 200, { ok: true, webhooks: 'per-client' });
  }
  const conn = connections.get(a.connectionId || '');
  if (!conn) return send(res, 404, { error: 'unknown connection' });
  const targets = { connect: 'connected', fail_auth: 'failed_auth', require_mfa: 'mfa_required', error: 'error', disconnect: 'disconnected' };
  if (targets[action]) {
    if (!transition(conn, targets[action])) return send(res, 409, { error: `cannot ${action} from ${conn.status}` });
    return send(res, 200, { ok: true, status: conn.status.toUpperCase() });
  }
  if (action === 'update_accounts') {
    if (conn.status !== 'connected') return send(res, 409, { error: 'not connected' });
    let acc = a.accountId ? accounts.get(a.accountId) : accounts.get(pick(conn.accountIds));
    if (!acc || acc.connectionId !== conn.id) return send(res, 404, { error: 'unknown account' });
    syncAccount(acc);
    return send(res, 200, { ok: true, accountId: acc.id });
  }
  if (action === 'delete_transaction') {
    if (conn.status !== 'connected') return send(res, 409, { error: 'not connected' });
    let t;
    if (a.transactionId) {
      t = txns.get(a.transactionId);
      if (!t || accounts.get(t.accountId).connectionId !== conn.id) return send(res, 404, { error: 'unknown transaction' });
      if (t.deleted) return send(res, 409, { error: 'already deleted' });
    } else {
      const ids = a.accountId ? [a.accountId] : conn.accountIds;
      const live = [];
      for (const id of ids) {
        const acc = accounts.get(id);
        if (acc && acc.connectionId === conn.id) live.push(...acc.txns.filter((x) => !x.deleted));
      }
      if (live.length === 0) return send(res, 409, { error: 'no transaction to delete' });
      t = pick(live);
    }
    deleteTransaction(conn, t);
    return send(res, 200, { ok: true, transactionId: t.id });
  }
  return send(res, 501, { error: `action ${action} not supported` });
}

// ---------------------------------------------------------------- routes
async function handle(req, res) {
  const url = new URL(req.url, 'http://localhost');
  const p = url.pathname;
  const method = req.method;

  if (p === '/__admin/action' && method === 'POST') return adminAction(req, res);

  // widget
  if (p.startsWith('/widget/')) {
    if (method === 'OPTIONS') return send(res, 204, null, CORS);
    if (p === `/widget/${SERVICE}-connect.js` && (method === 'GET' || method === 'HEAD')) {
      const base = `http://${req.headers.host || 'localhost'}`;
      res.writeHead(200, { 'Content-Type': 'application/javascript; charset=utf-8', 'Cache-Control': 'no-cache', ...CORS });
      return res.end(method === 'HEAD' ? undefined : widgetScript(base));
    }
    if (p === '/widget/v1/session' && method === 'POST') {
      let b = {};
      try { b = JSON.parse((await readBody(req)) || '{}'); } catch (e) { /* empty */ }
      const conn = typeof b.token === 'string' ? tokens.get(b.token) : undefined;
      if (!conn || conn.tokenExpires < Date.now() || (b.connectionId && b.connectionId !== conn.id)) {
        return send(res, 401, { error: { code: 'invalid_session', message: 'unknown or expired widget session' } }, CORS);
      }
      return send(res, 200, { connectionId: conn.id, status: conn.status.toUpperCase(), institution: null }, CORS);
    }
    return send(res, 404, { error: { code: 'not_found', message: 'no such widget resource' } }, CORS);
  }

  if (!p.startsWith('/v1/')) return fail(res, 404, 'not_found', 'no such route');

  let m;
  const route =
    (p === '/v1/connections' && ['POST', 'create']) ||
    ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(p)) && ['GET', 'accounts', m[1]]) ||
    ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(p)) && ['GET', 'transactions', m[1]]) ||
    ((m = /^\/v1\/accounts\/([^/]+)$/.exec(p)) && ['GET', 'account', m[1]]) ||
    null;
  if (!route) return fail(res, 404, 'not_found', 'no such route');
  const [allowed, kind, rawId] = route;
  const id = rawId === undefined ? undefined : decodeURIComponent(rawId);
  await readBody(req);

  const auth = authenticate(req);
  if (!auth.client) {
    // --- variants in which a refused request still has an effect
    if (kind === 'create' && method === 'POST') {
      if (V('near-miss-creates') && auth.reason === 'unknown') {
        const c = nearMissClient(auth.token);
        if (c) createConnection(c);
      }
      if (V('widget-token-creates') && auth.reason === 'widget') createConnection(tokens.get(auth.token).client);
    }
    if (V('missing-key-txn-syncs') && kind === 'transactions' && auth.reason === 'missing' && method === 'GET') {
      const acc = accounts.get(id);
      if (acc && connections.get(acc.connectionId).status === 'connected') syncAccount(acc);
    }
    return fail(res, 401, 'unauthorized', auth.reason === 'missing' ? 'missing Authorization header' : 'invalid API key');
  }
  const client = auth.client;
  if (method !== allowed) return fail(res, 405, 'method_not_allowed', `use ${allowed}`);

  if (kind === 'create') {
    const conn = createConnection(client);
    return send(res, 201, { connectionId: conn.id, status: 'CREATED', widgetToken: conn.widgetToken });
  }
  if (kind === 'accounts') {
    const conn = connections.get(id);
    if (!conn || conn.client !== client) return fail(res, 404, 'not_found', 'no such connection');
    if (V('accounts-while-created') && conn.status === 'created') return send(res, 200, []);
    if (conn.status !== 'connected') return fail(res, 409, 'connection_not_connected', `connection is ${conn.status.toUpperCase()}`);
    return send(res, 200, conn.accountIds.map((a) => accountView(accounts.get(a))));
  }
  const acc = accounts.get(id);
  if (!acc || acc.client !== client) {
    if (V('foreign-read-syncs') && kind === 'account' && acc && connections.get(acc.connectionId).status === 'connected') syncAccount(acc);
    return fail(res, 404, 'not_found', 'no such account');
  }
  if (kind === 'account') {
    if (V('stale-account-read')) {
      if (!staleCache.has(acc.id)) staleCache.set(acc.id, accountView(acc));
      return send(res, 200, staleCache.get(acc.id));
    }
    return send(res, 200, accountView(acc));
  }
  return listTransactions(res, acc, url);
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    process.stderr.write(`error: ${e && e.stack}\n`);
    if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: 'internal error' } });
    else res.end();
  });
});
server.keepAliveTimeout = 5000;
server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
if (EXIT_ON_EOF) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
