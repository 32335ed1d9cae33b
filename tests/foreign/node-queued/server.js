#!/usr/bin/env node
// Bank Connection Aggregation Service: an independent implementation written from
// /work/shared/spec/service-spec.md only. Node 20, standard library only.
//
//   node server.js --port 0 --variant plain --service acme
//   env FOREIGN_API_KEYS="acme_xxx,acme_yyy"
//
// stdout line 1: the API base URL; line 2: the admin URL (used by driver.js).
// The process exits when its stdin closes.
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');
const { URL } = require('node:url');

// ---------------------------------------------------------------- options
function opt(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const PORT = Number(opt('port', '0'));
const V = opt('variant', 'plain');
const SERVICE = opt('service', 'acme');
const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  console.error('FOREIGN_API_KEYS is empty');
  process.exit(2);
}
const is = (name) => V === name;

// ---------------------------------------------------------------- ids and time
const ALNUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
function newId(prefix) {
  if (is('ids-uuid-lower')) return prefix + crypto.randomUUID().replace(/-/g, '');
  const bytes = crypto.randomBytes(26);
  let s = '';
  for (const b of bytes) s += ALNUM[b % 36];
  return prefix + s;
}
const isoMs = (d = new Date()) => d.toISOString(); // 2024-01-02T03:04:05.678Z
const isoNoMs = (d = new Date()) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
function isoOffset(d = new Date()) {
  // local-time rendering with a +02:00 offset (used by a violation variant)
  const t = new Date(d.getTime() + 2 * 3600e3).toISOString().replace('Z', '+02:00');
  return t;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- state
const clients = KEYS.map((key) => ({
  key,
  id: newId('cli_'),
  webhookUrl: null,
  secret: 'whsec_' + crypto.randomBytes(18).toString('hex'),
  queue: Promise.resolve(),
}));
const clientByKey = new Map(clients.map((c) => [c.key, c]));
const connections = new Map(); // id -> connection
const sessions = new Map(); // widget token -> connection id
const accounts = new Map(); // id -> account (internal)

// ---------------------------------------------------------------- events and delivery
function sign(client, body, ts) {
  return crypto.createHmac('sha256', client.secret).update(ts + '.' + body).digest('hex');
}

async function postOnce(url, body, client, evtId) {
  const ts = Math.floor(Date.now() / 1000).toString();
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), 5000);
  try {
    const r = await fetch(url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': `${SERVICE}-webhooks/1.0`,
        'X-Webhook-Id': evtId,
        'X-Webhook-Timestamp': ts,
        'X-Webhook-Signature': 'v1=' + sign(client, body, ts),
      },
      body,
      signal: ctrl.signal,
    });
    await r.arrayBuffer().catch(() => {});
    return r.status >= 200 && r.status < 300;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

// Deliver to the client's currently registered address, with retries (1 s, 2 s, 4 s).
async function deliver(client, body, evtId) {
  const delays = [0, 1000, 2000, 4000];
  for (const d of delays) {
    if (d) await sleep(d);
    const url = client.webhookUrl;
    if (!url) return; // unregistered: stop delivering and retrying
    if (await postOnce(url, body, client, evtId)) return;
  }
}

let shuffleBuf = [];
let shuffleTimer = null;
function flushShuffle() {
  const batch = shuffleBuf;
  shuffleBuf = [];
  shuffleTimer = null;
  for (let i = batch.length - 1; i > 0; i--) {
    const j = crypto.randomInt(i + 1);
    [batch[i], batch[j]] = [batch[j], batch[i]];
  }
  for (const [client, body, id] of batch) deliver(client, body, id);
}

function enqueueDelivery(client, body, evtId) {
  if (is('shuffled-delivery')) {
    shuffleBuf.push([client, body, evtId]);
    if (!shuffleTimer) shuffleTimer = setTimeout(flushShuffle, 700);
    return;
  }
  if (is('slow-delivery')) {
    setTimeout(() => deliver(client, body, evtId), 2500);
    return;
  }
  client.queue = client.queue.then(() => deliver(client, body, evtId)).catch(() => {});
  if (is('duplicate-deliveries')) {
    setTimeout(() => {
      client.queue = client.queue.then(() => deliver(client, body, evtId)).catch(() => {});
    }, 250);
  }
}

// Build and send one event for a connection. `extra` holds the type-specific data fields.
function emit(conn, type, extra = {}) {
  const client = clients[conn.clientIdx];
  const now = new Date();
  const id = newId('evt_');
  let body;
  if (type === 'connection.connected' && is('connected-short-form')) {
    body = { event: type, connectionId: conn.id, timestamp: isoNoMs(now) };
  } else {
    const accountEvent = type === 'accounts.updated' || type === 'transaction.deleted';
    const data = {
      eventId: type === 'transaction.deleted' && is('event-id-mismatch-deleted') ? newId('evt_') : id,
      type,
      occurredAt: is('occurred-at-offset') ? isoOffset(now) : isoMs(now),
      clientId: is('clientid-first-client') ? clients[0].id : client.id,
      connectionId: conn.id,
      ...extra,
    };
    body = {
      id,
      type,
      created_at: accountEvent && is('account-events-no-millis') ? isoNoMs(now) : isoMs(now),
      data,
    };
  }
  const text = JSON.stringify(body);
  const targets = is('webhook-fanout') ? clients : [client];
  for (const c of targets) enqueueDelivery(c, text, id);
}

// A connection event announces entering `to`; previousStatus is the state left.
function setStatus(conn, to, error = null) {
  const prev = conn.status;
  conn.status = to;
  let type = 'connection.' + to;
  if (to === 'failed_auth' && is('failed-auth-as-error')) type = 'connection.error';
  let previousStatus = prev;
  if (to === 'connected' && is('connected-prev-upper')) previousStatus = prev.toUpperCase();
  emit(conn, type, { previousStatus, error });
}

// ---------------------------------------------------------------- sample data
const INSTITUTION = { id: 'ins_' + crypto.randomBytes(6).toString('hex'), name: 'Acme Savings Bank', logo: null };
const CATEGORIES = {
  debit: ['groceries', 'transport', 'utilities', 'restaurants', 'shopping', 'entertainment', 'rent'],
  credit: ['income', 'refund', 'transfer'],
};
const MERCHANTS = ['FreshMart', 'City Metro', 'Power & Light Co', 'Cafe Lumen', 'BookNook', 'Cinema Nova', 'Landlord Ltd'];

function dateDaysAgo(n) {
  const d = new Date(Date.now() - n * 86400e3);
  return d.toISOString().slice(0, 10);
}
const round2 = (x) => Math.round(x * 100) / 100;

function makeTxn(acc, daysAgo, isCreditCard) {
  const credit = crypto.randomInt(100) < (isCreditCard ? 10 : 25);
  let amount;
  let description;
  let category;
  if (credit) {
    amount = round2(50 + crypto.randomInt(250000) / 100);
    category = CATEGORIES.credit[crypto.randomInt(CATEGORIES.credit.length)];
    description = isCreditCard ? 'Card payment received' : category === 'income' ? 'Salary ACME Corp' : 'Incoming transfer';
  } else {
    const i = crypto.randomInt(MERCHANTS.length);
    amount = -round2(1 + crypto.randomInt(30000) / 100);
    category = CATEGORIES.debit[i];
    description = MERCHANTS[i];
  }
  if (isCreditCard && is('txn-sign-inverted-card')) amount = -amount;
  return {
    id: newId('txn_'),
    accountId: acc.id,
    amount,
    currency: acc.currency,
    description,
    transactionDate: dateDaysAgo(daysAgo),
    category,
    status: 'posted',
    createdAt: isoMs(new Date(Date.now() - daysAgo * 86400e3 - crypto.randomInt(3600e3))),
  };
}

function sortTxns(list) {
  list.sort((a, b) => {
    const c = a.transactionDate < b.transactionDate ? -1 : a.transactionDate > b.transactionDate ? 1 : a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1;
    return is('order-oldest-first') ? c : -c; // newest first by default
  });
}

function makeAccounts(conn) {
  const now = isoMs();
  const specs = [
    { type: 'checking', name: 'Everyday Checking', currency: 'EUR', balance: 2417.35, n: 57 },
    { type: 'savings', name: 'Rainy Day Savings', currency: 'EUR', balance: 10250.0, n: 4 },
    { type: 'credit_card', name: 'Platinum Card', currency: 'EUR', balance: -842.19, n: 23 },
    { type: 'brokerage', name: 'Investment Depot', currency: 'USD', balance: 15873.4, n: 1 },
  ];
  for (const s of specs) {
    const acc = {
      id: newId('acc_'),
      connectionId: conn.id,
      clientIdx: conn.clientIdx,
      name: s.name,
      type: s.type,
      currency: s.currency,
      balance: s.balance,
      availableBalance: s.type === 'credit_card' ? round2(5000 + s.balance) : s.balance,
      accountNumber: '****' + String(1000 + crypto.randomInt(9000)),
      createdAt: now,
      lastSyncedAt: now,
      institution: { ...INSTITUTION },
      txns: [],
      deleted: new Set(),
    };
    if (s.type === 'credit_card') {
      acc.creditLimit = { amount: 5000, currency: s.currency };
      acc.currencyBalances = [{ currency: 'USD', balance: -120.5 }];
    }
    if (s.type === 'brokerage' || s.type === 'pension') {
      acc.positions = [
        { symbol: 'VWCE', name: 'FTSE All-World ETF', quantity: 80, marketValue: 9120.0, currency: 'USD' },
        { symbol: 'AAPL', name: 'Apple Inc.', quantity: 30, marketValue: 6753.4, currency: 'USD' },
      ];
    }
    for (let i = 0; i < s.n; i++) acc.txns.push(makeTxn(acc, 1 + Math.floor(i / 2), s.type === 'credit_card'));
    sortTxns(acc.txns);
    acc.snapshot = publicAccount(acc); // cache of the account as first synced
    accounts.set(acc.id, acc);
    conn.accounts.push(acc.id);
  }
}

function publicAccount(acc) {
  const o = {
    id: acc.id,
    connectionId: acc.connectionId,
    name: acc.name,
    type: acc.type,
    currency: acc.currency,
    balance: acc.balance,
    availableBalance: acc.availableBalance,
    accountNumber: acc.accountNumber,
    createdAt: acc.createdAt,
    lastSyncedAt: acc.lastSyncedAt,
    institution: acc.institution,
  };
  if (acc.type === 'credit_card' && is('credit-card-no-available')) delete o.availableBalance;
  if (acc.creditLimit) o.creditLimit = acc.creditLimit;
  if (acc.currencyBalances) o.currencyBalances = acc.currencyBalances;
  if (acc.positions) o.positions = acc.positions;
  return o;
}

// ---------------------------------------------------------------- lifecycle (test hooks)
// Every accepted action is queued on its connection and carried through in order. The
// state check is made against `projected`, the state once all queued actions are done.
const ALLOWED = {
  connect: ['created', 'failed_auth', 'mfa_required'],
  fail_auth: ['created', 'mfa_required'],
  require_mfa: ['created'],
  error: ['created', 'credentials_submitted', 'verifying', 'connected', 'mfa_required'],
  disconnect: ['created', 'credentials_submitted', 'verifying', 'connected', 'mfa_required', 'failed_auth', 'error'],
  update_accounts: ['connected'],
  delete_transaction: ['connected'],
};
const RESULT = {
  connect: 'connected', fail_auth: 'failed_auth', require_mfa: 'mfa_required', error: 'error',
  disconnect: 'disconnected', update_accounts: 'connected', delete_transaction: 'connected',
};

// Walk through the widget's steps to the final state.
async function authFlow(conn, final) {
  const step = 80;
  if (conn.status !== 'mfa_required') {
    await sleep(step);
    setStatus(conn, 'credentials_submitted');
  }
  await sleep(step);
  setStatus(conn, 'verifying');
  await sleep(step * 2);
  if (final === 'connected') {
    if (is('connected-event-early')) {
      // announces before the data and the state are ready
      emitEarlyConnected(conn);
      await sleep(2000);
      if (conn.accounts.length === 0) makeAccounts(conn);
      conn.status = 'connected';
      return;
    }
    if (conn.accounts.length === 0) makeAccounts(conn);
    setStatus(conn, 'connected');
  } else if (final === 'failed_auth') {
    setStatus(conn, 'failed_auth', { code: 'invalid_credentials', message: 'The bank rejected the credentials' });
  } else if (final === 'mfa_required') {
    setStatus(conn, 'mfa_required', { code: 'mfa_required', message: 'The bank asks for a one-time code' });
  }
}

function emitEarlyConnected(conn) {
  const prev = conn.status;
  emit(conn, 'connection.connected', { previousStatus: prev, error: null });
}

async function runAction(conn, action, params) {
  switch (action) {
    case 'connect': return authFlow(conn, 'connected');
    case 'fail_auth': return authFlow(conn, 'failed_auth');
    case 'require_mfa': return authFlow(conn, 'mfa_required');
    case 'error':
      await sleep(60);
      return setStatus(conn, 'error', { code: 'internal_error', message: 'Unexpected error while talking to the bank' });
    case 'disconnect':
      await sleep(60);
      return setStatus(conn, 'disconnected');
    case 'update_accounts': {
      await sleep(60);
      const acc = accounts.get(params.accountId) || accounts.get(conn.accounts[0]);
      if (!acc) return;
      const t = makeTxn(acc, 0, acc.type === 'credit_card');
      acc.txns.push(t);
      sortTxns(acc.txns);
      acc.balance = round2(acc.balance + t.amount);
      acc.availableBalance = acc.type === 'credit_card' ? round2(5000 + acc.balance) : acc.balance;
      acc.lastSyncedAt = isoMs();
      return emit(conn, 'accounts.updated', { accountId: acc.id });
    }
    case 'delete_transaction': {
      await sleep(60);
      let acc = accounts.get(params.accountId);
      let txn;
      if (params.transactionId) {
        for (const aid of conn.accounts) {
          const a = accounts.get(aid);
          const t = a.txns.find((x) => x.id === params.transactionId);
          if (t) { acc = a; txn = t; break; }
        }
      } else {
        if (!acc) acc = conn.accounts.map((a) => accounts.get(a)).find((a) => a.txns.some((t) => !a.deleted.has(t.id)));
        if (acc) txn = acc.txns.find((t) => !acc.deleted.has(t.id));
      }
      if (!acc || !txn) return;
      if (is('deleted-txn-still-listed')) acc.deleted.add(txn.id); // marked, but the list ignores the mark
      else acc.txns = acc.txns.filter((t) => t.id !== txn.id);
      return emit(conn, 'transaction.deleted', { accountId: acc.id, transactionId: txn.id });
    }
  }
}

function acceptAction(conn, action, params) {
  if (!ALLOWED[action]) return { code: 501, body: { error: 'unsupported action' } };
  if (!ALLOWED[action].includes(conn.projected)) {
    return { code: 409, body: { error: `cannot ${action} from ${conn.projected}` } };
  }
  if (params.accountId) {
    const acc = accounts.get(params.accountId);
    if (!acc || acc.connectionId !== conn.id) return { code: 409, body: { error: 'account not in this connection' } };
  }
  if (params.transactionId) {
    const found = conn.accounts.some((aid) => accounts.get(aid).txns.some((t) => t.id === params.transactionId));
    if (!found) return { code: 409, body: { error: 'transaction not in this connection' } };
  }
  conn.projected = RESULT[action];
  conn.chain = conn.chain.then(() => runAction(conn, action, params)).catch((e) => console.error(e));
  return { code: 202, body: { accepted: action, connectionId: conn.id } };
}

// ---------------------------------------------------------------- HTTP helpers
function send(res, code, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const ct = typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
  res.writeHead(code, { 'Content-Type': ct, 'Cache-Control': 'no-store', ...headers });
  res.end(text);
}
function apiError(res, code, errCode, message) {
  if (is('alt-errors')) {
    const alt = { 401: 403, 404: 403, 409: 422 }[code] || code;
    return send(res, alt, `${errCode}: ${message}`);
  }
  send(res, code, { error: { code: errCode, message } });
}
function readBody(req) {
  return new Promise((resolve) => {
    let raw = '';
    req.on('data', (c) => { raw += c; if (raw.length > 1e6) req.destroy(); });
    req.on('end', () => resolve(raw));
    req.on('error', () => resolve(''));
  });
}
function baseOf(req) {
  return `http://${req.headers.host}`;
}

// ---------------------------------------------------------------- API
function authenticate(req) {
  const h = req.headers.authorization || '';
  const m = /^Bearer (\S+)$/.exec(h);
  if (!m) return null;
  return clientByKey.get(m[1]) || null;
}

function createConnection(client) {
  const conn = {
    id: newId('conn_'),
    clientIdx: clients.indexOf(client),
    status: 'created',
    projected: 'created',
    widgetToken: newId('sess_'),
    accounts: [],
    createdAt: new Date(),
    chain: Promise.resolve(),
  };
  connections.set(conn.id, conn);
  sessions.set(conn.widgetToken, conn.id);
  // connection.created announces the first state; nothing came before it.
  emit(conn, 'connection.created', { previousStatus: 'created', error: null });
  return conn;
}

function listTransactions(res, acc, query) {
  let limit = 25;
  if (query.has('limit')) {
    const raw = query.get('limit');
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100) {
      return apiError(res, 400, 'invalid_limit', 'limit must be an integer between 1 and 100');
    }
    limit = Number(raw);
  }
  if (is('limit-cap-10')) limit = Math.min(limit, 10);
  const list = acc.txns; // deleted transactions are removed from acc.txns (plain)
  let start = 0;
  const after = query.get('starting_after');
  if (after !== null && after !== '') {
    let afterId = after;
    if (is('opaque-cursor') && after.startsWith('cur_')) {
      try { afterId = JSON.parse(Buffer.from(after.slice(4), 'base64url').toString()).after; } catch { afterId = ''; }
    }
    const idx = list.findIndex((t) => t.id === afterId);
    if (idx < 0) return apiError(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account');
    start = idx + 1;
    if (is('pagination-skip')) start = idx + 2;
  }
  let pageLen = limit;
  if (is('limit-plus-one-first-page') && start === 0) pageLen = limit + 1;
  const page = list.slice(start, start + pageLen);
  const end = start + page.length;
  const hasMore = is('has-more-off-by-one') ? end < list.length - 1 : end < list.length;
  const out = { data: page.map((t) => {
    if (is('txn-date-later-pages') && start > 0) return { ...t, transactionDate: t.createdAt.slice(0, 19) + 'Z' };
    return t;
  }), has_more: hasMore };
  if (hasMore && page.length) {
    const lastId = page[page.length - 1].id;
    out.next_cursor = is('opaque-cursor') ? 'cur_' + Buffer.from(JSON.stringify({ after: lastId })).toString('base64url') : lastId;
  }
  send(res, 200, out);
}

async function handleApi(req, res, url) {
  const client = authenticate(req);
  if (!client) return apiError(res, 401, 'unauthorized', 'missing or invalid API key');
  const path = url.pathname.replace(/\/+$/, '');
  let m;
  if (path === '/v1/connections') {
    if (req.method !== 'POST') return apiError(res, 405, 'method_not_allowed', 'use POST');
    await readBody(req);
    const conn = createConnection(client);
    const body = { connectionId: conn.id, status: 'CREATED', widgetToken: conn.widgetToken };
    if (is('extra-fields')) {
      Object.assign(body, {
        clientId: client.id,
        createdAt: isoMs(conn.createdAt),
        widgetTokenExpiresAt: isoMs(new Date(conn.createdAt.getTime() + 30 * 60e3)),
        widgetUrl: `${baseOf(req)}/widget/${SERVICE}-connect.js`,
        accounts: [],
      });
    }
    return send(res, is('alt-errors') ? 200 : 201, body);
  }
  if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
    if (req.method !== 'GET') return apiError(res, 405, 'method_not_allowed', 'use GET');
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn || clients[conn.clientIdx] !== client) return apiError(res, 404, 'connection_not_found', 'no such connection');
    const readable = conn.status === 'connected' || (is('accounts-after-disconnect') && conn.status === 'disconnected');
    if (!readable) {
      return apiError(res, 409, 'connection_not_connected', `connection status is ${conn.status.toUpperCase()}`);
    }
    return send(res, 200, conn.accounts.map((id) => publicAccount(accounts.get(id))));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
    if (req.method !== 'GET') return apiError(res, 405, 'method_not_allowed', 'use GET');
    const acc = accounts.get(decodeURIComponent(m[1]));
    const owned = acc && (clients[acc.clientIdx] === client || is('txn-cross-client'));
    if (!owned) return apiError(res, 404, 'account_not_found', 'no such account');
    return listTransactions(res, acc, url.searchParams);
  }
  if ((m = /^\/v1\/accounts\/([^/]+)$/.exec(path))) {
    if (req.method !== 'GET') return apiError(res, 405, 'method_not_allowed', 'use GET');
    const acc = accounts.get(decodeURIComponent(m[1]));
    if (!acc || clients[acc.clientIdx] !== client) return apiError(res, 404, 'account_not_found', 'no such account');
    return send(res, 200, is('stale-single-account') ? acc.snapshot : publicAccount(acc));
  }
  return apiError(res, 404, 'not_found', 'no such endpoint');
}

// ---------------------------------------------------------------- widget
function widgetScript(base) {
  const globalName = SERVICE.charAt(0).toUpperCase() + SERVICE.slice(1).replace(/[^A-Za-z0-9_$]/g, '_') + 'Connect';
  const positional = is('widget-positional-args');
  const needsExit = is('widget-open-needs-onexit');
  return `/* ${SERVICE} connect widget */
(function (global) {
  'use strict';
  var script = document.currentScript;
  var BASE = ${JSON.stringify(base)};
  if (script && script.src) { BASE = script.src.replace(/\\/widget\\/[^\\/]*$/, ''); }
  var ORIGIN = new URL(BASE).origin;
  var current = null;
  function close() {
    if (current) { current.parentNode && current.parentNode.removeChild(current); current = null; }
  }
  function open(${positional ? 'token, connectionId, onSuccess' : 'options'}) {
    ${positional
      ? `if (typeof token !== 'string') throw new TypeError('${globalName}.open(token, connectionId, onSuccess): token must be a string');`
      : `if (!options || typeof options !== 'object') throw new TypeError('${globalName}.open expects an options object');
    var token = options.token, connectionId = options.connectionId, onSuccess = options.onSuccess;`}
    ${needsExit ? "var onExit = options.onExit.bind(null);" : 'var onExit = (typeof options === "object" && options && typeof options.onExit === "function") ? options.onExit : null;'}
    if (typeof token !== 'string' || typeof connectionId !== 'string') throw new TypeError('token and connectionId are required');
    close();
    var overlay = document.createElement('div');
    overlay.setAttribute('style', 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647');
    var frame = document.createElement('iframe');
    frame.title = '${SERVICE} connect';
    frame.setAttribute('style', 'width:400px;height:560px;border:0;border-radius:8px;background:#fff');
    frame.src = BASE + '/widget/frame?connectionId=' + encodeURIComponent(connectionId) + '#token=' + encodeURIComponent(token);
    overlay.appendChild(frame);
    (document.body || document.documentElement).appendChild(overlay);
    current = overlay;
    function onMessage(ev) {
      if (ev.origin !== ORIGIN || !ev.data || ev.data.source !== '${SERVICE}-connect') return;
      if (ev.data.kind === 'success') {
        global.removeEventListener('message', onMessage);
        close();
        if (typeof onSuccess === 'function') onSuccess(ev.data.metadata);
      } else if (ev.data.kind === 'exit') {
        global.removeEventListener('message', onMessage);
        close();
        if (onExit) onExit(ev.data.metadata || null);
      }
    }
    global.addEventListener('message', onMessage);
    return { close: close };
  }
  global.${globalName} = { open: open, close: close, version: '1.4.2' };
})(window);
`;
}

function widgetFrame() {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${SERVICE} connect</title>
<style>body{font-family:sans-serif;margin:24px}label{display:block;margin:8px 0}input{width:100%}</style>
</head><body>
<h2 id="inst">Connect your bank</h2>
<form id="f"><label>User name <input id="u" autocomplete="username"></label>
<label>Password <input id="p" type="password" autocomplete="current-password"></label>
<button>Connect</button> <button type="button" id="x">Cancel</button></form>
<p id="msg"></p>
<script>
(function () {
  var token = decodeURIComponent((location.hash.match(/token=([^&]+)/) || [])[1] || '');
  var connectionId = new URLSearchParams(location.search).get('connectionId');
  function post(kind, metadata) { parent.postMessage({ source: '${SERVICE}-connect', kind: kind, metadata: metadata }, '*'); }
  fetch('session', { headers: { 'X-Widget-Token': token } }).then(function (r) { return r.json(); }).then(function (s) {
    if (s.institution) document.getElementById('inst').textContent = 'Connect to ' + s.institution.name;
  }).catch(function () {});
  document.getElementById('x').onclick = function () { post('exit', { connectionId: connectionId, reason: 'user_cancelled' }); };
  document.getElementById('f').onsubmit = function (e) {
    e.preventDefault();
    fetch('credentials', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Widget-Token': token },
      body: JSON.stringify({ username: document.getElementById('u').value, password: document.getElementById('p').value }) })
      .then(function (r) { return r.json(); }).then(function (s) {
        if (s.ok) post('success', { connectionId: connectionId, institution: s.institution });
        else document.getElementById('msg').textContent = s.error || 'Failed';
      });
  };
})();
</script></body></html>`;
}

async function handleWidget(req, res, url) {
  const cors = { 'Access-Control-Allow-Origin': '*' };
  if (url.pathname === `/widget/${SERVICE}-connect.js`) {
    res.writeHead(200, { 'Content-Type': 'application/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=60', ...cors });
    return res.end(widgetScript(baseOf(req)));
  }
  if (url.pathname === '/widget/frame') {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
    return res.end(widgetFrame());
  }
  if (url.pathname === '/widget/session' || url.pathname === '/widget/credentials') {
    if (process.env.F4_DEBUG) console.error(`widget ${req.method} ${url.pathname} token=${req.headers['x-widget-token'] ? 'yes' : 'no'}`);
    const token = req.headers['x-widget-token'] || '';
    const conn = connections.get(sessions.get(token));
    if (!conn) return send(res, 401, { ok: false, error: 'invalid or expired session' });
    if (url.pathname === '/widget/session') {
      const s = { connectionId: conn.id, status: conn.status.toUpperCase(), institution: INSTITUTION };
      if (is('widget-key-leak')) s.client = { id: clients[conn.clientIdx].id, publishableKey: clients[conn.clientIdx].key };
      return send(res, 200, s);
    }
    if (req.method !== 'POST') return send(res, 405, { ok: false, error: 'use POST' });
    const body = JSON.parse((await readBody(req)) || '{}');
    const action = body.username === 'mfa' ? 'require_mfa' : body.password === 'wrong' ? 'fail_auth' : 'connect';
    const r = acceptAction(conn, action, {});
    return send(res, r.code === 202 ? 200 : r.code, { ok: r.code === 202 && action === 'connect', institution: INSTITUTION, error: r.body.error });
  }
  return send(res, 404, { error: 'not found' });
}

// ---------------------------------------------------------------- admin (test hooks for the driver)
async function handleAdmin(req, res, url) {
  const path = url.pathname.replace(/\/+$/, '');
  let m;
  if (path === '/admin/webhooks') {
    const client = authenticate(req);
    if (!client) return send(res, 401, { error: 'unknown key' });
    if (req.method === 'POST') {
      const body = JSON.parse((await readBody(req)) || '{}');
      if (typeof body.url !== 'string') return send(res, 400, { error: 'url required' });
      client.webhookUrl = body.url;
      return send(res, 200, { clientId: client.id, url: body.url });
    }
    if (req.method === 'DELETE') {
      client.webhookUrl = null;
      return send(res, 200, { clientId: client.id, url: null });
    }
    return send(res, 405, { error: 'method' });
  }
  if ((m = /^\/admin\/connections\/([^/]+)\/([a-z_]+)$/.exec(path)) && req.method === 'POST') {
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn) return send(res, 404, { error: 'no such connection' });
    const body = JSON.parse((await readBody(req)) || '{}');
    const r = acceptAction(conn, m[2], { accountId: body.accountId || null, transactionId: body.transactionId || null });
    return send(res, r.code, r.body);
  }
  return send(res, 404, { error: 'not found' });
}

// ---------------------------------------------------------------- servers
function wrap(fn) {
  return (req, res) => {
    let url;
    try { url = new URL(req.url, 'http://x'); } catch { return send(res, 400, { error: 'bad url' }); }
    Promise.resolve(fn(req, res, url)).catch((e) => {
      console.error(e);
      if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: 'internal error' } });
    });
  };
}
const api = http.createServer(wrap((req, res, url) => {
  if (url.pathname.startsWith('/widget/')) return handleWidget(req, res, url);
  return handleApi(req, res, url);
}));
const admin = http.createServer(wrap(handleAdmin));
api.keepAliveTimeout = 5000;

api.listen(PORT, '127.0.0.1', () => {
  admin.listen(0, '127.0.0.1', () => {
    process.stdout.write(`http://127.0.0.1:${api.address().port}\n`);
    process.stdout.write(`http://127.0.0.1:${admin.address().port}/admin\n`);
  });
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
