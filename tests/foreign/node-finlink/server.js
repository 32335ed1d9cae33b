'use strict';
// Bank Connection Aggregation Service: an implementation written from the
// interface specification alone, with one optional fault or legal choice per
// variant (see VARIANTS.md). Node standard library only.
//
//   node server.js --port 0 --variant NAME --service NAME
//   FOREIGN_API_KEYS="k1,k2"   one client per key, in that order
// Prints line 1 = API base URL, line 2 = admin URL; exits when stdin closes.

const http = require('http');
const crypto = require('crypto');

// ---------------------------------------------------------------- options
function argOf(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const PORT = Number(argOf('port', '0'));
const V = argOf('variant', 'plain');
const SERVICE = argOf('service', 'finlink');
const is = (name) => V === name;

const KNOWN_VARIANTS = new Set([
  'plain',
  // violations
  'accounts-before-connected', 'cursor-inclusive', 'has-more-off-by-one',
  'cursor-cached-offset', 'account-cross-client', 'deleted-event-first-client',
  'deleted-still-listed', 'updated-event-before-commit', 'previous-status-skip',
  'refused-create-leaks', 'widget-embeds-key', 'disconnect-no-event',
  'updated-account-id-from-input', 'account-stale-balance', 'new-txn-datetime',
  'card-sign-inverted', 'shared-client-id', 'connected-event-early',
  'widget-global-after-config', 'widget-no-cors', 'txn-id-from-count',
  // legal
  'error-codes-alt', 'ids-short-lowercase', 'order-oldest-first', 'small-limit',
  'opaque-cursor', 'delivery-shuffled-dupes', 'connected-short-form',
  'disconnected-accounts-gone', 'next-cursor-always', 'delivery-latency',
]);
if (!KNOWN_VARIANTS.has(V)) {
  process.stderr.write('unknown variant ' + V + '\n');
  process.exit(2);
}

const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}

// ---------------------------------------------------------------- ids and time
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
let idCounter = 0;
// 26 upper-case alphanumerics, monotonic (time, then a counter, then random):
// a later id always sorts after an earlier one.
function newId(prefix) {
  if (is('ids-short-lowercase')) return prefix + crypto.randomBytes(8).toString('hex');
  let t = Date.now();
  let s = '';
  for (let i = 0; i < 10; i++) { s = CROCKFORD[t % 32] + s; t = Math.floor(t / 32); }
  let c = ++idCounter;
  let cs = '';
  for (let i = 0; i < 6; i++) { cs = CROCKFORD[c % 32] + cs; c = Math.floor(c / 32); }
  const r = crypto.randomBytes(10);
  let rs = '';
  for (let i = 0; i < 10; i++) rs += CROCKFORD[r[i] % 32];
  return prefix + s + cs + rs;
}
const nowIso = () => new Date().toISOString();
const today = () => nowIso().slice(0, 10);
const round2 = (x) => Math.round(x * 100) / 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- state
const clients = KEYS.map((key, i) => ({
  key,
  index: i,
  id: is('shared-client-id') ? 'cli_' + SERVICE.toUpperCase().replace(/[^A-Z0-9]/g, '').padEnd(26, '0').slice(0, 26) : newId('cli_'),
  webhookUrl: null,
  queue: [],
  delivering: false,
  generation: 0,
}));
const clientByKey = new Map(clients.map((c) => [c.key, c]));
const connections = new Map(); // id -> connection
const accounts = new Map(); // id -> account
const tokens = new Map(); // widget token -> connection
const cursorOffsets = new Map(); // cursor-cached-offset only

const TOKEN_TTL_MS = 30 * 60 * 1000;
const STEP_MS = 25;

// ---------------------------------------------------------------- events
function emit(client, type, fields) {
  const id = newId('evt_');
  const at = nowIso();
  const data = Object.assign({ eventId: id, type, occurredAt: at, clientId: client.id }, fields);
  const envelope = { id, type, created_at: at, data };
  let target = client;
  if (is('deleted-event-first-client') && type === 'transaction.deleted') target = clients[0];
  enqueueDelivery(target, envelope);
  if (is('connected-short-form') && type === 'connection.connected') {
    enqueueDelivery(target, {
      event: 'connection.connected',
      connectionId: fields.connectionId,
      timestamp: at.replace(/\.\d{3}Z$/, 'Z'),
    });
  }
}

function enqueueDelivery(client, body) {
  if (!client.webhookUrl) return; // nothing registered: the event is not kept
  const item = { url: client.webhookUrl, body: JSON.stringify(body), gen: client.generation, attempts: 0 };
  if (is('delivery-shuffled-dupes')) {
    // independent, unordered deliveries, each maybe twice, after a random delay
    const copies = Math.random() < 0.5 ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      setTimeout(() => deliverOnce(client, Object.assign({}, item)), Math.floor(Math.random() * 1200));
    }
    return;
  }
  if (is('delivery-latency')) {
    // every event leaves 1.5 s after it happened (kept in order: the delay is the same for all)
    setTimeout(() => { if (item.gen === client.generation) { client.queue.push(item); pump(client); } }, 1500);
    return;
  }
  client.queue.push(item);
  pump(client);
}

async function deliverOnce(client, item) {
  for (;;) {
    if (item.gen !== client.generation) return;
    const t0 = Date.now();
    const ok = await post(item.url, item.body);
    if (process.env.F6_DEBUG) process.stderr.write(`delivery ${ok ? 'ok' : 'FAILED'} in ${Date.now() - t0} ms, queue ${client.queue.length}\n`);
    if (ok) return;
    item.attempts++;
    if (item.attempts >= 4) return;
    await sleep([200, 1000, 3000][item.attempts - 1]);
  }
}

async function pump(client) {
  if (client.delivering) return;
  client.delivering = true;
  try {
    while (client.queue.length) {
      const item = client.queue[0];
      await deliverOnce(client, item);
      client.queue.shift();
    }
  } finally {
    client.delivering = false;
  }
}

function post(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch (e) { resolve(true); return; }
    const req = http.request({
      hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'User-Agent': SERVICE + '-webhooks/1' },
      timeout: 5000,
      agent: false, // a fresh connection per delivery: no stale keep-alive sockets
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode >= 200 && res.statusCode < 300));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end(body);
  });
}

// ---------------------------------------------------------------- data generation
const INSTITUTION = { id: 'ins_' + 'DEMOBANK0000000000000000001'.slice(0, 26), name: 'Demo National Bank', logo: null };
const CATEGORIES = {
  debit: ['groceries', 'restaurants', 'transport', 'utilities', 'shopping', 'entertainment', 'health'],
  credit: ['income', 'transfer', 'refund'],
};
const MERCHANTS = ['Corner Grocery', 'City Transit', 'Power & Light Co', 'Book Nook', 'Cafe Uno', 'Pharmacy Plus', 'Cinema 8', 'Hardware Hub'];

function pick(a) { return a[Math.floor(Math.random() * a.length)]; }
function digits(n) { let s = ''; for (let i = 0; i < n; i++) s += String(Math.floor(Math.random() * 10)); return s; }

function makeTxn(acc, daysAgo, kind) {
  const d = new Date(Date.now() - daysAgo * 86400000);
  let amount;
  let category;
  let description;
  if (kind === 'credit') {
    amount = round2(50 + Math.random() * 2500);
    category = pick(CATEGORIES.credit);
    description = category === 'income' ? 'Salary ACME Corp' : category === 'refund' ? 'Refund ' + pick(MERCHANTS) : 'Transfer in';
  } else {
    amount = -round2(2 + Math.random() * 180);
    category = pick(CATEGORIES.debit);
    description = pick(MERCHANTS);
  }
  if (is('card-sign-inverted') && acc.type === 'credit_card') amount = -amount;
  const t = {
    id: newId('txn_'),
    accountId: acc.id,
    amount,
    currency: acc.currency,
    description,
    transactionDate: d.toISOString().slice(0, 10),
    category,
    status: 'posted',
    createdAt: d.toISOString(),
  };
  return t;
}

function makeAccount(conn, spec) {
  const acc = {
    id: newId('acc_'),
    connectionId: conn.id,
    name: spec.name,
    type: spec.type,
    currency: spec.currency,
    balance: spec.balance,
    availableBalance: spec.available,
    accountNumber: '****' + digits(4),
    createdAt: nowIso(),
    lastSyncedAt: nowIso(),
    institution: Object.assign({}, INSTITUTION),
    extra: spec.extra || {},
    txns: [],
    conn,
    cachedBalance: null,
  };
  for (let i = 0; i < spec.txns; i++) {
    const daysAgo = 1 + Math.floor(Math.random() * 90);
    const kind = Math.random() < spec.creditShare ? 'credit' : 'debit';
    acc.txns.push(makeTxn(acc, daysAgo, kind));
  }
  accounts.set(acc.id, acc);
  return acc;
}

function populate(conn) {
  if (conn.accounts.length) return;
  const specs = [
    { name: 'Everyday Checking', type: 'checking', currency: 'USD', balance: 2543.17, available: 2543.17, txns: 57, creditShare: 0.2 },
    { name: 'Rainy Day Savings', type: 'savings', currency: 'USD', balance: 10250.0, available: 10250.0, txns: 12, creditShare: 0.9 },
    { name: 'Travel Rewards Card', type: 'credit_card', currency: 'USD', balance: -812.44, available: 4187.56, txns: 31, creditShare: 0.1,
      extra: { creditLimit: { amount: 5000, currency: 'USD' }, currencyBalances: [{ currency: 'EUR', balance: -120.5 }, { currency: 'GBP', balance: -42.1 }] } },
    { name: 'Brokerage Account', type: 'brokerage', currency: 'USD', balance: 18420.35, available: 1200.0, txns: 6, creditShare: 0.5,
      extra: { positions: [{ symbol: 'VTI', name: 'Total Stock Market ETF', quantity: 40, price: 245.5, marketValue: 9820.0, currency: 'USD' },
        { symbol: 'BND', name: 'Total Bond Market ETF', quantity: 100, price: 74.0035, marketValue: 7400.35, currency: 'USD' }] } },
  ];
  for (const s of specs) conn.accounts.push(makeAccount(conn, s));
  for (const a of conn.accounts) a.cachedBalance = { balance: a.balance, availableBalance: a.availableBalance };
}

function accountView(acc, forSingle) {
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
  if (forSingle && is('account-stale-balance') && acc.cachedBalance) {
    o.balance = acc.cachedBalance.balance;
    o.availableBalance = acc.cachedBalance.availableBalance;
  }
  Object.assign(o, acc.extra);
  return o;
}

function txnView(t) {
  return {
    id: t.id, accountId: t.accountId, amount: t.amount, currency: t.currency, description: t.description,
    transactionDate: t.transactionDate, category: t.category, status: t.status, createdAt: t.createdAt,
  };
}

// Order of the list: newest transaction date first, then newest id first.
function cmpTxn(a, b) {
  let c = a.transactionDate < b.transactionDate ? 1 : a.transactionDate > b.transactionDate ? -1 : 0;
  if (c === 0) c = a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
  return is('order-oldest-first') ? -c : c;
}
function visibleTxns(acc) {
  return acc.txns.filter((t) => !t.deleted || is('deleted-still-listed')).sort(cmpTxn);
}

// ---------------------------------------------------------------- connection state machine
function setStatus(conn, to, error) {
  const prev = conn.status;
  conn.status = to;
  if (to === 'connected') {
    if (is('connected-event-early')) {
      // announce first, fetch the accounts from the bank afterwards
      announce(conn, to, prev, error);
      setTimeout(() => populate(conn), 2500);
      conn.status = 'connected';
      conn.pendingPopulate = true;
      return;
    }
    populate(conn);
  }
  if (to === 'disconnected' && is('disconnect-no-event')) return;
  announce(conn, to, prev, error);
}

function announce(conn, to, prev, error) {
  let previousStatus = prev;
  if (is('previous-status-skip') && conn.actionStart) previousStatus = conn.actionStart;
  emit(conn.client, 'connection.' + to, {
    connectionId: conn.id,
    previousStatus: previousStatus || 'none',
    error: error || null,
  });
}

const ERRORS = {
  failed_auth: { code: 'invalid_credentials', message: 'The bank rejected the credentials.' },
  mfa_required: { code: 'mfa_required', message: 'The bank asks for a second factor.' },
  error: { code: 'unexpected_error', message: 'The bank returned an unexpected error.' },
};

// The path of states an action takes from a given state; null = refused from there.
function pathFor(action, from) {
  const viaCredentials = (target) => {
    if (from === 'created' || from === 'failed_auth') return ['credentials_submitted', 'verifying', target];
    if (from === 'credentials_submitted') return ['verifying', target];
    if (from === 'verifying') return [target];
    if (from === 'mfa_required' && target !== 'mfa_required') return ['verifying', target];
    return null;
  };
  switch (action) {
    case 'connect': return viaCredentials('connected');
    case 'fail_auth': return viaCredentials('failed_auth');
    case 'require_mfa': return viaCredentials('mfa_required');
    case 'error': return from === 'disconnected' || from === 'error' ? null : ['error'];
    case 'disconnect': return from === 'disconnected' ? null : ['disconnected'];
    default: return null;
  }
}

// Accept an action: checked against the state the connection will have once
// every action accepted before it is done; then queued and carried through in order.
function acceptAction(conn, action, opts) {
  const from = conn.projected;
  if (action === 'update_accounts' || action === 'delete_transaction') {
    if (from !== 'connected') return { ok: false, code: 409, why: 'connection is not connected' };
    if (opts.accountId) {
      const acc = accounts.get(opts.accountId);
      if (conn.accounts.length && (!acc || acc.conn !== conn)) return { ok: false, code: 409, why: 'unknown account for this connection' };
    }
    if (action === 'delete_transaction' && opts.transactionId && conn.accounts.length) {
      const found = findTxn(conn, opts.transactionId);
      if (!found || found.t.deleted || conn.pendingDeletes.has(opts.transactionId)) return { ok: false, code: 409, why: 'unknown transaction' };
      conn.pendingDeletes.add(opts.transactionId);
    }
    conn.queue.push({ kind: action, opts });
    runQueue(conn);
    return { ok: true };
  }
  const path = pathFor(action, from);
  if (!path) return { ok: false, code: 409, why: 'action ' + action + ' is not possible from ' + from };
  conn.projected = path[path.length - 1];
  conn.queue.push({ kind: 'path', path, action });
  runQueue(conn);
  return { ok: true };
}

function findTxn(conn, txnId) {
  for (const a of conn.accounts) {
    const t = a.txns.find((x) => x.id === txnId);
    if (t) return { a, t };
  }
  return null;
}

async function runQueue(conn) {
  if (conn.running) return;
  conn.running = true;
  try {
    while (conn.queue.length) {
      const job = conn.queue.shift();
      await sleep(STEP_MS);
      if (job.kind === 'path') {
        conn.actionStart = conn.status;
        for (const to of job.path) {
          await sleep(STEP_MS);
          setStatus(conn, to, ERRORS[to]);
        }
        conn.actionStart = null;
      } else if (job.kind === 'update_accounts') {
        await doUpdate(conn, job.opts);
      } else if (job.kind === 'delete_transaction') {
        doDelete(conn, job.opts);
      }
    }
  } finally {
    conn.running = false;
  }
}

async function doUpdate(conn, opts) {
  while (conn.pendingPopulate && !conn.accounts.length) await sleep(50);
  conn.pendingPopulate = false;
  const acc = (opts.accountId && accounts.get(opts.accountId)) || conn.accounts[0];
  if (!acc) return;
  const apply = () => {
    const t = makeTxn(acc, 0, 'debit');
    t.transactionDate = today();
    t.createdAt = nowIso();
    if (is('new-txn-datetime')) t.transactionDate = t.createdAt;
    if (is('txn-id-from-count')) {
      // "next number" ids for transactions found by a sync: the count of the list + 1
      t.id = 'txn_' + acc.id.slice(4, 16) + String(visibleTxns(acc).length + 1).padStart(14, '0');
    }
    acc.txns.push(t);
    acc.balance = round2(acc.balance + t.amount);
    acc.availableBalance = round2(acc.availableBalance + t.amount);
    acc.lastSyncedAt = nowIso();
  };
  if (is('updated-event-before-commit')) setTimeout(apply, 3000);
  else apply();
  const accountId = is('updated-account-id-from-input') ? (opts.accountId || null) : acc.id;
  emit(conn.client, 'accounts.updated', { connectionId: conn.id, accountId });
}

function doDelete(conn, opts) {
  let found = null;
  if (opts.transactionId) found = findTxn(conn, opts.transactionId);
  if (!found) {
    const list = opts.accountId && accounts.get(opts.accountId) ? [accounts.get(opts.accountId)] : conn.accounts;
    for (const a of list) {
      const t = visibleTxns(a).find((x) => !x.deleted && !conn.pendingDeletes.has(x.id));
      if (t) { found = { a, t }; break; }
    }
  }
  if (!found || found.t.deleted) return;
  found.t.deleted = true;
  conn.pendingDeletes.delete(found.t.id);
  emit(conn.client, 'transaction.deleted', { connectionId: conn.id, accountId: found.a.id, transactionId: found.t.id });
}

function createConnection(client) {
  const conn = {
    id: newId('conn_'),
    client,
    status: 'created',
    projected: 'created',
    widgetToken: 'sess_' + crypto.randomBytes(24).toString('base64url'),
    tokenExpires: Date.now() + TOKEN_TTL_MS,
    createdAt: nowIso(),
    accounts: [],
    queue: [],
    running: false,
    pendingDeletes: new Set(),
  };
  connections.set(conn.id, conn);
  tokens.set(conn.widgetToken, conn);
  emit(client, 'connection.created', { connectionId: conn.id, previousStatus: 'none', error: null });
  return conn;
}

// ---------------------------------------------------------------- HTTP helpers
function send(res, code, obj, extra) {
  const body = obj === undefined ? '' : JSON.stringify(obj);
  const h = Object.assign({ 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' }, extra || {});
  if (body) h['Content-Length'] = Buffer.byteLength(body);
  res.writeHead(code, h);
  res.end(body);
}
function fail(res, code, errCode, message, extra) {
  if (is('error-codes-alt')) {
    const alt = { 401: 403, 409: 400, 400: 422, 404: 404, 405: 400 };
    code = alt[code] || code;
    send(res, code, { type: 'about:blank', title: errCode, status: code, detail: message }, Object.assign({ 'Content-Type': 'application/problem+json' }, extra || {}));
    return;
  }
  send(res, code, { error: { code: errCode, message } }, extra);
}
function readBody(req, max) {
  return new Promise((resolve) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => { n += c.length; if (n <= (max || 65536)) chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}
function parseJson(s) { try { return s ? JSON.parse(s) : {}; } catch (e) { return null; } }

const CORS = is('widget-no-cors') ? {} : {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization, Accept',
  'Access-Control-Max-Age': '600',
};

function authenticate(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(h);
  if (!m) return null;
  return clientByKey.get(m[1]) || null;
}

// ---------------------------------------------------------------- API server
let BASE = '';

async function handleApi(req, res) {
  const u = new URL(req.url, 'http://x');
  const path = u.pathname;
  if (req.method === 'OPTIONS') { res.writeHead(is('widget-no-cors') ? 404 : 204, CORS); res.end(); return; }

  if (path.startsWith('/widget/')) return handleWidget(req, res, u);

  if (!path.startsWith('/v1/')) return fail(res, 404, 'not_found', 'No such route.');

  const client = authenticate(req);
  if (!client) {
    if (is('refused-create-leaks') && req.method === 'POST' && path === '/v1/connections') {
      // the auth check answers, but the handler below still runs for the default client
      createConnection(clients[0]);
    }
    return fail(res, 401, 'unauthorized', 'A valid API key is required (Authorization: Bearer <API_KEY>).', { 'WWW-Authenticate': 'Bearer' });
  }
  await readBody(req);

  let m;
  if (path === '/v1/connections') {
    if (req.method !== 'POST') return fail(res, 405, 'method_not_allowed', 'Use POST.', { Allow: 'POST' });
    const conn = createConnection(client);
    return send(res, 201, { connectionId: conn.id, status: 'CREATED', widgetToken: conn.widgetToken });
  }
  if ((m = /^\/v1\/connections\/([^/]+)$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn || conn.client !== client) return fail(res, 404, 'connection_not_found', 'No such connection.');
    return send(res, 200, { connectionId: conn.id, status: conn.status.toUpperCase(), createdAt: conn.createdAt });
  }
  if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn || conn.client !== client) return fail(res, 404, 'connection_not_found', 'No such connection.');
    if (conn.status !== 'connected') {
      if (is('accounts-before-connected') && conn.status !== 'created' && conn.status !== 'disconnected') {
        return send(res, 200, conn.accounts.map((a) => accountView(a, false)));
      }
      return fail(res, 409, 'connection_not_connected', 'Accounts are available only when the connection is CONNECTED; it is ' + conn.status.toUpperCase() + '.');
    }
    return send(res, 200, conn.accounts.map((a) => accountView(a, false)));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)(\/transactions)?$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const acc = accounts.get(decodeURIComponent(m[1]));
    const crossOk = is('account-cross-client') && !m[2];
    if (!acc || (acc.conn.client !== client && !crossOk)) return fail(res, 404, 'account_not_found', 'No such account.');
    if (is('disconnected-accounts-gone') && acc.conn.status === 'disconnected') return fail(res, 404, 'account_not_found', 'No such account.');
    if (!m[2]) return send(res, 200, accountView(acc, true));
    return listTransactions(res, acc, u.searchParams);
  }
  return fail(res, 404, 'not_found', 'No such route.');
}

function encodeCursor(accId, txnId) {
  return 'cur_' + Buffer.from(JSON.stringify({ a: accId, t: txnId })).toString('base64url');
}
function decodeCursor(s) {
  if (!s.startsWith('cur_')) return null;
  try { const o = JSON.parse(Buffer.from(s.slice(4), 'base64url').toString('utf8')); return o && typeof o.t === 'string' ? o : null; } catch (e) { return null; }
}

function listTransactions(res, acc, q) {
  const DEFAULT = is('small-limit') ? 10 : 25;
  const MAX = is('small-limit') ? 20 : 100;
  let limit = DEFAULT;
  const ls = q.get('limit');
  if (ls !== null) {
    if (!/^\d+$/.test(ls) || Number(ls) < 1) return fail(res, 400, 'invalid_limit', 'limit must be a positive integer.');
    limit = Math.min(Number(ls), MAX);
  }
  const list = visibleTxns(acc);
  let start = 0;
  const sa = q.get('starting_after');
  if (sa !== null && sa !== '') {
    let txnId = sa;
    if (is('opaque-cursor') && sa.startsWith('cur_')) {
      const c = decodeCursor(sa);
      if (!c || c.a !== acc.id) return fail(res, 400, 'invalid_cursor', 'starting_after is not a cursor of this list.');
      txnId = c.t;
    }
    if (is('cursor-cached-offset') && cursorOffsets.has(acc.id + '|' + txnId)) {
      start = cursorOffsets.get(acc.id + '|' + txnId);
    } else {
      const anchor = acc.txns.find((t) => t.id === txnId); // deleted ones still anchor the walk
      if (!anchor) return fail(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account.');
      start = list.findIndex((t) => cmpTxn(t, anchor) > 0);
      if (start < 0) start = list.length;
      if (is('cursor-inclusive')) {
        const i = list.indexOf(anchor);
        if (i >= 0) start = i;
      }
    }
  }
  const page = list.slice(start, start + limit);
  const end = start + page.length;
  const hasMore = is('has-more-off-by-one') ? end < list.length - 1 : end < list.length;
  const body = { data: page.map(txnView), has_more: hasMore };
  const last = page.length ? page[page.length - 1] : null;
  if (last && (hasMore || is('next-cursor-always'))) {
    body.next_cursor = is('opaque-cursor') ? encodeCursor(acc.id, last.id) : last.id;
    if (is('cursor-cached-offset')) cursorOffsets.set(acc.id + '|' + last.id, end);
  }
  return send(res, 200, body);
}

// ---------------------------------------------------------------- widget
const GLOBAL_NAME = SERVICE.replace(/(^|[^A-Za-z0-9])([a-z])/g, (x, p, c) => c.toUpperCase()).replace(/[^A-Za-z0-9]/g, '').replace(/^[a-z]/, (c) => c.toUpperCase()) + 'Connect';

function widgetScript() {
  const embedded = is('widget-embeds-key') ? '  var apiKey = ' + JSON.stringify(clients[0].key) + ';\n' : '';
  return `/* ${SERVICE} Connect widget. Opened with the widgetToken of POST /v1/connections, never with an API key. */
(function () {
  'use strict';
  var BASE = ${JSON.stringify(BASE)};
${embedded}  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text) e.textContent = text;
    return e;
  }
  function api(method, path, body) {
    var init = { method: method, headers: { 'Accept': 'application/json' } };
    if (body) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
${is('widget-embeds-key') ? "    init.headers['Authorization'] = 'Bearer ' + apiKey;\n" : ''}    return fetch(BASE + path, init).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw j; return j; });
    });
  }
  function open(a, b, c) {
    var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    var token = o.token, connectionId = o.connectionId;
    var onSuccess = typeof o.onSuccess === 'function' ? o.onSuccess : function () {};
    var onExit = typeof o.onExit === 'function' ? o.onExit : function () {};
    if (!token || !connectionId) throw new Error('${GLOBAL_NAME}.open needs token and connectionId');
    var done = false, timer = null;
    var root = el('div', { 'class': '${SERVICE}-connect-overlay', 'role': 'dialog', 'aria-label': 'Connect your bank',
      'style': 'position:fixed;inset:0;background:rgba(0,0,0,.4);display:flex;align-items:center;justify-content:center;z-index:2147483647' });
    var box = el('form', { 'style': 'background:#fff;padding:24px;border-radius:8px;min-width:280px;font-family:sans-serif' });
    box.appendChild(el('h2', {}, 'Connect your bank'));
    var user = el('input', { 'name': 'username', 'placeholder': 'Username', 'autocomplete': 'username' });
    var pass = el('input', { 'name': 'password', 'type': 'password', 'placeholder': 'Password', 'autocomplete': 'current-password' });
    var status = el('p', { 'aria-live': 'polite' }, '');
    var submit = el('button', { 'type': 'submit' }, 'Connect');
    var cancel = el('button', { 'type': 'button' }, 'Cancel');
    [user, pass, submit, cancel, status].forEach(function (n) { box.appendChild(n); });
    root.appendChild(box);
    (document.body || document.documentElement).appendChild(root);
    function close() { if (timer) clearInterval(timer); timer = null; if (root.parentNode) root.parentNode.removeChild(root); }
    function poll() {
      api('GET', '/widget/v1/session?token=' + encodeURIComponent(token) + '&connectionId=' + encodeURIComponent(connectionId))
        .then(function (s) {
          status.textContent = s.status;
          if (s.status === 'CONNECTED' && !done) {
            done = true; close();
            onSuccess({ connectionId: s.connectionId, institution: s.institution, accounts: s.accounts, status: s.status });
          }
        }, function () {});
    }
    box.addEventListener('submit', function (ev) {
      ev.preventDefault();
      status.textContent = 'Submitting...';
      api('POST', '/widget/v1/session/credentials', { token: token, connectionId: connectionId, username: user.value, password: pass.value })
        .then(poll, function (e) { status.textContent = (e && e.error && e.error.message) || 'Could not submit'; });
    });
    cancel.addEventListener('click', function () { close(); onExit({ connectionId: connectionId }); });
    timer = setInterval(poll, 400);
    poll();
    return { close: close };
  }
${is('widget-global-after-config') ? `  fetch(BASE + '/widget/v1/config').then(function (r) { return r.json(); }).then(function () {
    window[${JSON.stringify(GLOBAL_NAME)}] = { open: open, version: '1.0.0' };
  });` : `  window[${JSON.stringify(GLOBAL_NAME)}] = { open: open, version: '1.0.0' };`}
})();
`;
}

async function handleWidget(req, res, u) {
  const path = u.pathname;
  if (path === '/widget/' + SERVICE + '-connect.js' && (req.method === 'GET' || req.method === 'HEAD')) {
    const js = widgetScript();
    res.writeHead(200, Object.assign({ 'Content-Type': 'application/javascript; charset=utf-8', 'Content-Length': Buffer.byteLength(js), 'Cache-Control': 'no-cache' }, CORS));
    res.end(req.method === 'HEAD' ? '' : js);
    return;
  }
  if (path === '/widget/v1/config' && req.method === 'GET') {
    await sleep(1500); // the config comes from a slow store
    return send(res, 200, { service: SERVICE, theme: 'light' }, CORS);
  }
  if (path === '/widget/v1/session' && req.method === 'GET') {
    const conn = sessionConn(u.searchParams.get('token'), u.searchParams.get('connectionId'));
    if (!conn) return fail(res, 401, 'invalid_widget_token', 'The widget token is invalid or expired.', CORS);
    return send(res, 200, {
      connectionId: conn.id, status: conn.status.toUpperCase(),
      institution: conn.accounts.length ? { id: INSTITUTION.id, name: INSTITUTION.name } : null,
      accounts: conn.status === 'connected' ? conn.accounts.map((a) => ({ id: a.id, name: a.name, type: a.type })) : [],
    }, CORS);
  }
  if (path === '/widget/v1/session/credentials' && req.method === 'POST') {
    const body = parseJson(await readBody(req));
    if (!body) return fail(res, 400, 'invalid_body', 'Body must be JSON.', CORS);
    const conn = sessionConn(body.token, body.connectionId);
    if (!conn) return fail(res, 401, 'invalid_widget_token', 'The widget token is invalid or expired.', CORS);
    const uname = String(body.username || '');
    const action = /fail|bad|wrong/i.test(uname) ? 'fail_auth' : /mfa/i.test(uname) ? 'require_mfa' : 'connect';
    const r = acceptAction(conn, action, {});
    if (!r.ok) return fail(res, 409, 'not_possible', r.why, CORS);
    return send(res, 202, { accepted: true }, CORS);
  }
  return fail(res, 404, 'not_found', 'No such route.', CORS);
}

function sessionConn(token, connectionId) {
  if (typeof token !== 'string') return null;
  const conn = tokens.get(token);
  if (!conn || conn.tokenExpires < Date.now()) return null;
  if (connectionId && connectionId !== conn.id) return null;
  return conn;
}

// ---------------------------------------------------------------- admin server (drives state; used by driver.js)
async function handleAdmin(req, res) {
  const u = new URL(req.url, 'http://x');
  if (req.method !== 'POST') return send(res, 405, { error: 'POST only' });
  const body = parseJson(await readBody(req));
  if (!body) return send(res, 400, { error: 'bad json' });
  if (u.pathname === '/admin/webhooks') {
    const set = (key, url) => {
      const c = clientByKey.get(key);
      if (!c) return false;
      c.webhookUrl = url; c.generation++; c.queue.length = 0;
      return true;
    };
    if (!set(body.apiKey, body.url)) return send(res, 404, { error: 'unknown api key' });
    if (body.secondApiKey && body.secondUrl && !set(body.secondApiKey, body.secondUrl)) return send(res, 404, { error: 'unknown second api key' });
    return send(res, 200, { webhooks: 'per-client' });
  }
  if (u.pathname === '/admin/webhooks/unregister') {
    for (const k of [body.apiKey, body.secondApiKey]) {
      const c = k && clientByKey.get(k);
      if (c) { c.webhookUrl = null; c.generation++; c.queue.length = 0; }
    }
    return send(res, 200, { ok: true });
  }
  if (u.pathname === '/admin/actions') {
    const conn = connections.get(String(body.connectionId || ''));
    if (!conn) return send(res, 404, { error: 'unknown connection' });
    const allowed = ['connect', 'fail_auth', 'require_mfa', 'error', 'disconnect', 'update_accounts', 'delete_transaction'];
    if (!allowed.includes(body.action)) return send(res, 501, { error: 'unsupported action' });
    const r = acceptAction(conn, body.action, { accountId: body.accountId || null, transactionId: body.transactionId || null });
    if (!r.ok) return send(res, r.code, { error: r.why });
    return send(res, 202, { accepted: true });
  }
  return send(res, 404, { error: 'no such admin route' });
}

// ---------------------------------------------------------------- start
function guard(fn) {
  return (req, res) => {
    Promise.resolve(fn(req, res)).catch((e) => {
      process.stderr.write('internal error: ' + (e && e.stack || e) + '\n');
      if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: 'Internal error.' } });
      else res.end();
    });
  };
}

const api = http.createServer(guard(handleApi));
const admin = http.createServer(guard(handleAdmin));
api.keepAliveTimeout = 5000;
api.listen(PORT, '127.0.0.1', () => {
  BASE = 'http://127.0.0.1:' + api.address().port;
  admin.listen(0, '127.0.0.1', () => {
    process.stdout.write(BASE + '\n' + 'http://127.0.0.1:' + admin.address().port + '\n');
  });
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
