'use strict';
// Bank Connection Aggregation Service: test server (Node.js 20, standard library only).
// Usage: FOREIGN_API_KEYS="k1,k2" node server.js --port 0 --variant none --service acme
// Prints "PORT <n>" once listening; exits when stdin closes.

const http = require('http');
const https = require('https');
const crypto = require('crypto');

// ---------------------------------------------------------------- arguments
const argv = process.argv.slice(2);
function arg(name, dflt) {
  const i = argv.indexOf('--' + name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
}
const PORT = parseInt(arg('port', '0'), 10) || 0;
const VARIANT = arg('variant', 'none');
const SERVICE = arg('service', 'acme');
const V = (name) => VARIANT === name;

const VARIANTS = [
  'none',
  // violations
  'txn-ids-shared-across-connections', 'per-client-event-sequence', 'account-createdat-future',
  'verifying-stamped-before-submitted', 'refused-create-has-effect', 'widget-token-opens-api',
  'account-events-broadcast', 'single-account-unmasked', 'cursor-offset-cache',
  'delete-event-before-commit', 'deleted-event-off-by-one', 'connected-event-before-status',
  'account-get-stale-cache', 'account-get-foreign-client',
  // legal
  'clock-behind-90s', 'whole-second-timestamps', 'bank-createdat', 'slow-answers', 'rate-limit-429',
  'late-reordered-webhooks', 'duplicate-deliveries', 'slow-verifying', 'background-sync', 'alt-ids',
  'problem-json-errors', 'newest-first', 'limit-max-10', 'extra-fields',
];
if (!VARIANTS.includes(VARIANT)) {
  process.stderr.write(`unknown variant ${VARIANT}; known: ${VARIANTS.join(', ')}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------- time
const SKEW = V('clock-behind-90s') ? 90000 : 0;
const nowMs = () => Date.now() - SKEW;
// Resource timestamps (accounts, transactions).
function isoRes(ms) {
  if (V('whole-second-timestamps')) return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
  return new Date(ms).toISOString();
}
// Event timestamps: always with milliseconds (section 6.1/6.2).
function isoEvt(ms) {
  if (V('whole-second-timestamps')) ms = Math.floor(ms / 1000) * 1000;
  return new Date(ms).toISOString();
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- ids
const usedIds = new Set();
const ALNUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
function randomPart() {
  if (V('alt-ids')) return crypto.randomBytes(12).toString('hex'); // 24 lower-case hex chars
  const b = crypto.randomBytes(26);
  let s = '';
  for (let i = 0; i < 26; i++) s += ALNUM[b[i] % 36];
  return s;
}
function genId(prefix) {
  for (;;) {
    const p = randomPart();
    if (!usedIds.has(p)) { usedIds.add(p); return prefix + p; }
  }
}
function hashPart(s) {
  const h = crypto.createHash('sha256').update(s).digest();
  let out = '';
  for (let i = 0; i < 26; i++) out += ALNUM[h[i] % 36];
  return out;
}

// ---------------------------------------------------------------- clients
const keys = (process.env.FOREIGN_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (keys.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}
const clients = keys.map((key) => ({
  id: genId('cli_'), key, webhookUrl: null, webhookGen: 0, evtSeq: 0, events: [],
}));
const clientByKey = new Map(clients.map((c) => [c.key, c]));
const clientById = new Map(clients.map((c) => [c.id, c]));

// ---------------------------------------------------------------- store
const conns = new Map();     // connectionId -> connection
const tokens = new Map();    // widgetToken -> connectionId
const accounts = new Map();  // accountId -> account
let txnSeq = 0;              // global ordering key of transactions
let lastAuthClient = null;   // only used by variant refused-create-has-effect

// ---------------------------------------------------------------- webhooks
function postJson(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch (e) { resolve(0); return; }
    const lib = u.protocol === 'https:' ? https : http;
    const data = Buffer.from(JSON.stringify(body));
    const req = lib.request(u, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': data.length, 'User-Agent': `${SERVICE}-webhooks/1.0` },
      timeout: 5000,
    }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); res.on('error', () => resolve(0)); });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end(data);
  });
}

async function deliverTo(client, body) {
  const url = client.webhookUrl;
  const gen = client.webhookGen;
  if (!url) return;
  if (V('late-reordered-webhooks')) await sleep(1000 + Math.random() * 3000);
  for (let attempt = 0; attempt < 4; attempt++) {
    if (client.webhookGen !== gen || client.webhookUrl !== url) return; // unregistered: stop retrying
    const st = await postJson(url, body);
    if (st >= 200 && st < 300) return;
    await sleep(500 * (attempt + 1));
  }
}

function deliver(client, evt) {
  const targets = [client];
  setImmediate(() => {
    for (const c of targets) {
      deliverTo(c, evt);
      if (V('duplicate-deliveries')) {
        setTimeout(() => deliverTo(c, evt), 150 + Math.random() * 400);
        if (Math.random() < 0.3) setTimeout(() => deliverTo(c, evt), 800);
      }
    }
  });
}

// Per-connection strictly increasing event clock (events of one connection never tie).
function eventMs(conn) {
  let t = nowMs();
  if (!V('whole-second-timestamps') && conn.lastEvtMs !== undefined && t <= conn.lastEvtMs) t = conn.lastEvtMs + 1;
  conn.lastEvtMs = Math.max(conn.lastEvtMs || 0, t);
  return t;
}

function newEventId(client) {
  if (V('per-client-event-sequence')) {
    client.evtSeq += 1;
    return 'evt_' + String(client.evtSeq).padStart(26, '0');
  }
  return genId('evt_');
}

function emit(conn, type, fields, opts = {}) {
  const client = clientById.get(conn.clientId);
  const id = newEventId(client);
  const t = opts.ms !== undefined ? opts.ms : eventMs(conn);
  const data = { eventId: id, type, occurredAt: isoEvt(t), clientId: client.id, connectionId: conn.id, ...fields };
  if (V('extra-fields')) data.environment = 'sandbox';
  const evt = { id, type, created_at: isoEvt(t), data };
  if (V('extra-fields')) evt.api_version = 'v1';
  client.events.push(evt);
  if (V('account-events-broadcast') && type === 'accounts.updated') {
    for (const c of clients) if (c.webhookUrl) setImmediate(() => deliverTo(c, evt));
  } else {
    deliver(client, evt);
  }
  return evt;
}

// ---------------------------------------------------------------- connection state machine
// internal statuses are lower case; the API shows them upper case.
function setStatus(conn, status, error, opts = {}) {
  const prev = conn.status;
  if (!opts.deferStatus) conn.status = status;
  return emit(conn, 'connection.' + status, { previousStatus: prev, error: error === undefined ? null : error }, opts);
}

function enqueue(conn, fn) {
  conn.queue = conn.queue.then(fn).catch((e) => { process.stderr.write(`action failed: ${e && e.stack}\n`); });
  return conn.queue;
}

const INSTITUTIONS = [
  { id: 'ins_DEMOBANK01', name: 'Demo Bank', logo: null },
  { id: 'ins_NORTHWIND1', name: 'Northwind Savings', logo: null },
];
const CATEGORIES_OUT = ['groceries', 'dining', 'transport', 'utilities', 'shopping', 'entertainment', 'health'];
const DESCS = {
  groceries: ['SuperMart', 'Fresh Foods Market', 'Corner Grocery'],
  dining: ['Cafe Luna', 'Pizza Roma', 'Sushi Bar'],
  transport: ['City Metro', 'Fuel Station 24', 'Taxi Ride'],
  utilities: ['Power & Light Co', 'Water Utility', 'Mobile Phone Bill'],
  shopping: ['Online Store', 'Book Shop', 'Electronics Outlet'],
  entertainment: ['Cinema', 'Streaming Service', 'Concert Tickets'],
  health: ['Pharmacy', 'Dental Clinic', 'Gym Membership'],
};
const r2 = (x) => Math.round(x * 100) / 100;
const pick = (a) => a[Math.floor(Math.random() * a.length)];
function dateStr(ms) { return new Date(ms).toISOString().slice(0, 10); }

function txnIdFor(acc) {
  if (V('txn-ids-shared-across-connections')) {
    // ids derived from the bank fixture position: the same for every connection
    return 'txn_' + hashPart(`${acc.ordinal}:${acc.txnOrdinal}`);
  }
  return genId('txn_');
}

function makeTxn(acc, amount, category, description, dayMs, createdMs) {
  const t = {
    id: txnIdFor(acc),
    accountId: acc.id,
    amount: r2(amount),
    currency: acc.currency,
    description,
    transactionDate: dateStr(dayMs),
    category,
    status: 'posted',
    createdAt: isoRes(createdMs),
  };
  if (V('extra-fields')) t.merchant = { name: description };
  acc.txnOrdinal += 1;
  const rec = { t, seq: ++txnSeq, deleted: false };
  acc.txns.push(rec);
  acc.txnById.set(t.id, rec);
  return rec;
}

function genTransactions(acc, n, createdMs) {
  const DAY = 86400000;
  for (let i = 0; i < n; i++) {
    const day = createdMs - (n - i) * (60 / n) * DAY;
    let amount, cat, desc;
    if (acc.type === 'credit_card') {
      if (i % 9 === 8) { amount = 250 + Math.random() * 200; cat = 'payment'; desc = 'Card payment, thank you'; }
      else { cat = pick(CATEGORIES_OUT); desc = pick(DESCS[cat]); amount = -(3 + Math.random() * 120); }
    } else if (acc.type === 'savings') {
      if (i % 3 === 0) { amount = -(50 + Math.random() * 200); cat = 'transfer'; desc = 'Transfer to checking'; }
      else { amount = 100 + Math.random() * 300; cat = 'savings'; desc = 'Monthly savings'; }
    } else if (acc.type === 'brokerage' || acc.type === 'pension') {
      amount = 10 + Math.random() * 90; cat = 'investment_income'; desc = 'Dividend payment';
    } else if (i % 10 === 0) {
      amount = 2800 + Math.random() * 400; cat = 'income'; desc = 'Salary ACME Corp';
    } else {
      cat = pick(CATEGORIES_OUT); desc = pick(DESCS[cat]); amount = -(2 + Math.random() * 150);
    }
    makeTxn(acc, amount, cat, desc, day, createdMs);
  }
}

function makeAccount(conn, ordinal, spec, createdMs) {
  const digits = String(1000000000000000 + Math.floor(Math.random() * 8999999999999999)).slice(0, 16);
  let created = createdMs;
  if (V('account-createdat-future')) created = createdMs + 2500; // stamped with the planned end of the sync job
  if (V('bank-createdat')) created = Date.UTC(2016 + ordinal, (ordinal * 5) % 12, 3 + ordinal, 9, 12, 44) - SKEW;
  const acc = {
    id: genId('acc_'),
    connectionId: conn.id,
    clientId: conn.clientId,
    ordinal,
    name: spec.name,
    type: spec.type,
    currency: spec.currency,
    balance: spec.balance,
    availableBalance: spec.availableBalance !== undefined ? spec.availableBalance : spec.balance,
    fullNumber: digits,
    createdMs: created,
    lastSyncedMs: V('account-createdat-future') ? created : createdMs,
    institution: conn.institution,
    creditLimit: spec.creditLimit,
    currencyBalances: spec.currencyBalances,
    positions: spec.positions,
    txns: [],
    txnById: new Map(),
    txnOrdinal: 0,
  };
  accounts.set(acc.id, acc);
  conn.accounts.push(acc.id);
  genTransactions(acc, spec.n, createdMs);
  return acc;
}

function createAccounts(conn) {
  const t = nowMs();
  const specs = [
    { name: 'Everyday Checking', type: 'checking', currency: 'EUR', balance: 2450.17, n: 42 },
    { name: 'Rainy Day Savings', type: 'savings', currency: 'EUR', balance: 10250, n: 8 },
    {
      name: 'Travel Credit Card', type: 'credit_card', currency: 'EUR', balance: -523.4, availableBalance: 4476.6, n: 23,
      creditLimit: { amount: 5000, currency: 'EUR' },
      currencyBalances: [{ currency: 'USD', balance: -84.1, availableBalance: -84.1 }],
    },
    {
      name: 'Investment Portfolio', type: 'brokerage', currency: 'USD', balance: 15320.55, n: 3,
      positions: [
        { symbol: 'VTI', name: 'Total Stock Market ETF', quantity: 40, price: 250.1, marketValue: 10004, currency: 'USD' },
        { symbol: 'BND', name: 'Total Bond Market ETF', quantity: 72.5, price: 73.33, marketValue: 5316.55, currency: 'USD' },
      ],
    },
  ];
  specs.forEach((s, i) => makeAccount(conn, i, s, t));
}

function projectedAfter(conn, action) {
  const s = conn.projected;
  switch (action) {
    case 'connect': return ['created', 'mfa_required', 'failed_auth', 'error'].includes(s) ? 'connected' : null;
    case 'fail_auth': return ['created', 'mfa_required', 'error'].includes(s) ? 'failed_auth' : null;
    case 'require_mfa': return ['created', 'failed_auth', 'error'].includes(s) ? 'mfa_required' : null;
    case 'error': return ['created', 'mfa_required', 'failed_auth', 'connected'].includes(s) ? 'error' : null;
    case 'disconnect': return s !== 'disconnected' ? 'disconnected' : null;
    default: return null;
  }
}

const STEP = 25;
async function runAuthFlow(conn, final, error) {
  await sleep(STEP);
  const cs = setStatus(conn, 'credentials_submitted');
  await sleep(STEP);
  let opts = {};
  if (V('verifying-stamped-before-submitted')) {
    // the verification job records the time it was queued, taken before the submission was recorded
    opts = { ms: Date.parse(cs.data.occurredAt) - 7 };
  }
  setStatus(conn, 'verifying', null, opts);
  await sleep(V('slow-verifying') ? 1500 : STEP);
  if (final === 'connected') {
    if (conn.accounts.length === 0) createAccounts(conn);
    else for (const id of conn.accounts) accounts.get(id).lastSyncedMs = nowMs();
    await sleep(2);
    if (V('connected-event-before-status')) {
      setStatus(conn, 'connected', null, { deferStatus: true });
      await sleep(2500);
      conn.status = 'connected';
    } else {
      setStatus(conn, 'connected', null);
    }
  } else {
    setStatus(conn, final, error);
  }
}

function addTxnAndUpdate(conn, acc) {
  const t = nowMs();
  const credit = Math.random() < 0.4;
  const cat = credit ? 'income' : pick(CATEGORIES_OUT);
  const amount = credit ? r2(20 + Math.random() * 300) : -r2(2 + Math.random() * 80);
  makeTxn(acc, amount, cat, credit ? 'Incoming transfer' : pick(DESCS[cat]), t, t);
  acc.balance = r2(acc.balance + amount);
  acc.availableBalance = r2(acc.availableBalance + amount);
  acc.lastSyncedMs = t;
  emit(conn, 'accounts.updated', { accountId: acc.id });
}

function liveTxns(acc) { return acc.txns.filter((r) => !r.deleted); }

function deleteTxn(conn, acc, rec) {
  const live = liveTxns(acc);
  const idx = live.indexOf(rec);
  let reportedId = rec.t.id;
  if (V('deleted-event-off-by-one')) {
    const other = live[idx + 1] || live[idx - 1];
    if (other) reportedId = other.t.id;
  }
  const commit = () => { rec.deleted = true; rec.deletedSeq = rec.seq; };
  if (V('delete-event-before-commit')) {
    emit(conn, 'transaction.deleted', { accountId: acc.id, transactionId: reportedId });
    setTimeout(commit, 4000);
  } else {
    commit();
    emit(conn, 'transaction.deleted', { accountId: acc.id, transactionId: reportedId });
  }
}

// ---------------------------------------------------------------- admin actions (driver)
async function adminAction(body) {
  const action = body.action;
  const ok = (stdout) => ({ exit: 0, stdout: stdout || '' });
  const refuse = (m) => ({ exit: 4, message: m });
  const fail = (m) => ({ exit: 1, message: m });

  if (action === 'register_webhook') {
    const c1 = clientByKey.get(body.apiKey || '');
    if (!c1) return fail('unknown BANKCONF_API_KEY');
    if (!body.webhookUrl) return fail('BANKCONF_WEBHOOK_URL missing');
    c1.webhookUrl = body.webhookUrl; c1.webhookGen++;
    if (body.secondApiKey && body.secondWebhookUrl) {
      const c2 = clientByKey.get(body.secondApiKey);
      if (!c2) return fail('unknown BANKCONF_SECOND_API_KEY');
      c2.webhookUrl = body.secondWebhookUrl; c2.webhookGen++;
    }
    return ok('webhooks=per-client');
  }
  if (action === 'unregister_webhook') {
    for (const k of [body.apiKey, body.secondApiKey]) {
      const c = clientByKey.get(k || '');
      if (c) { c.webhookUrl = null; c.webhookGen++; }
    }
    return ok();
  }

  let conn = body.connectionId ? conns.get(body.connectionId) : null;
  if (!conn && body.widgetToken && tokens.has(body.widgetToken)) conn = conns.get(tokens.get(body.widgetToken));
  if (!conn && body.accountId && accounts.has(body.accountId)) conn = conns.get(accounts.get(body.accountId).connectionId);
  if (!conn) return fail('unknown connection');

  if (['connect', 'fail_auth', 'require_mfa', 'error', 'disconnect'].includes(action)) {
    const to = projectedAfter(conn, action);
    if (!to) return refuse(`${action} not possible from ${conn.projected}`);
    const from = conn.projected;
    conn.projected = to;
    enqueue(conn, async () => {
      if (action === 'connect') await runAuthFlow(conn, 'connected');
      else if (action === 'fail_auth') await runAuthFlow(conn, 'failed_auth', { code: 'invalid_credentials', message: 'The bank rejected the credentials' });
      else if (action === 'require_mfa') await runAuthFlow(conn, 'mfa_required', null);
      else if (action === 'error') { await sleep(STEP); setStatus(conn, 'error', { code: 'institution_error', message: 'Unexpected error from the bank' }); }
      else if (action === 'disconnect') { await sleep(STEP); setStatus(conn, 'disconnected', null); }
    });
    return ok(`${from} -> ${to}`);
  }

  if (action === 'update_accounts') {
    if (conn.projected !== 'connected') return refuse(`connection is ${conn.projected}`);
    let acc = null;
    if (body.accountId) {
      acc = accounts.get(body.accountId);
      if (!acc || acc.connectionId !== conn.id) return fail('account not in this connection');
    }
    enqueue(conn, async () => {
      await sleep(10);
      const a = acc || accounts.get(conn.accounts[0]);
      if (!a) return;
      addTxnAndUpdate(conn, a);
    });
    return ok();
  }

  if (action === 'delete_transaction') {
    if (conn.projected !== 'connected') return refuse(`connection is ${conn.projected}`);
    let acc = body.accountId ? accounts.get(body.accountId) : null;
    if (body.accountId && (!acc || acc.connectionId !== conn.id)) return fail('account not in this connection');
    let rec = null;
    if (body.transactionId) {
      const accs = acc ? [acc] : conn.accounts.map((id) => accounts.get(id));
      for (const a of accs) {
        const r = a.txnById.get(body.transactionId);
        if (r) { rec = r; acc = a; break; }
      }
      if (!rec) return fail('transaction not found in this connection');
      if (rec.deleted || rec.pendingDelete) return refuse('transaction already deleted');
      rec.pendingDelete = true;
    }
    enqueue(conn, async () => {
      await sleep(10);
      let a = acc, r = rec;
      if (!r) {
        const accs = a ? [a] : conn.accounts.map((id) => accounts.get(id));
        for (const x of accs) {
          const live = liveTxns(x).filter((y) => !y.pendingDelete);
          if (live.length) { a = x; r = live[live.length - 1]; r.pendingDelete = true; break; }
        }
      }
      if (!r) return;
      deleteTxn(conn, a, r);
    });
    return ok();
  }
  return { exit: 3, message: `unsupported action ${action}` };
}

// ---------------------------------------------------------------- serialisation
function accountJson(acc, single) {
  const o = {
    id: acc.id,
    connectionId: acc.connectionId,
    name: acc.name,
    type: acc.type,
    currency: acc.currency,
    balance: acc.balance,
    availableBalance: acc.availableBalance,
    accountNumber: (single && V('single-account-unmasked')) ? acc.fullNumber : '****' + acc.fullNumber.slice(-4),
    createdAt: isoRes(acc.createdMs),
    lastSyncedAt: isoRes(acc.lastSyncedMs),
    institution: { ...acc.institution },
  };
  if (acc.type === 'credit_card') {
    o.creditLimit = { ...acc.creditLimit };
    if (acc.currencyBalances) o.currencyBalances = acc.currencyBalances.map((x) => ({ ...x }));
  }
  if (acc.type === 'brokerage' || acc.type === 'pension') o.positions = (acc.positions || []).map((x) => ({ ...x }));
  if (V('extra-fields')) o.metadata = { source: 'bank_api', ordinal: acc.ordinal };
  return o;
}

// ---------------------------------------------------------------- HTTP helpers
function httpDate() { return new Date(nowMs()).toUTCString(); }

function send(res, status, body, headers = {}) {
  const isStr = typeof body === 'string';
  const data = Buffer.from(isStr ? body : JSON.stringify(body));
  const h = {
    'Content-Type': isStr ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8',
    'Content-Length': data.length,
    'Cache-Control': 'no-store',
    ...headers,
  };
  if (SKEW) h.Date = httpDate();
  res.writeHead(status, h);
  res.end(data);
}

function sendError(res, status, code, message, headers = {}) {
  if (V('problem-json-errors')) {
    const map = { 401: 403, 400: 422 };
    const st = map[status] || status;
    const body = JSON.stringify({ type: `https://errors.${SERVICE}.example/${code}`, title: message, status: st, code });
    const data = Buffer.from(body);
    const h = { 'Content-Type': 'application/problem+json', 'Content-Length': data.length, ...headers };
    if (SKEW) h.Date = httpDate();
    res.writeHead(st, h);
    res.end(data);
    return;
  }
  const h = { ...headers };
  if (status === 401) h['WWW-Authenticate'] = 'Bearer realm="api"';
  send(res, status, { error: { code, message } }, h);
}

function readBody(req, limit = 1 << 20) {
  return new Promise((resolve) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => { n += c.length; if (n <= limit) chunks.push(c); });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

function bearer(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer +(\S+) *$/i.exec(h);
  return m ? m[1] : null;
}

// ---------------------------------------------------------------- widget
function widgetScript() {
  const globalName = SERVICE.replace(/(^|[-_])([a-z])/g, (_, __, c) => c.toUpperCase()) + 'Connect';
  return `/* ${SERVICE} connect widget */
(function (root) {
  'use strict';
  var script = document.currentScript;
  var base = script && script.src ? script.src.replace(/\\/widget\\/[^/]*$/, '') : '';
  function open(opts, connectionId, onSuccess) {
    if (typeof opts !== 'object' || opts === null) opts = { token: opts, connectionId: connectionId, onSuccess: onSuccess };
    var token = opts.token, connId = opts.connectionId, cb = opts.onSuccess;
    if (typeof token !== 'string' || token.indexOf('sess_') !== 0) throw new Error('${SERVICE}-connect: a widget token (sess_...) is required');
    if (typeof connId !== 'string') throw new Error('${SERVICE}-connect: connectionId is required');
    var box = document.createElement('div');
    box.setAttribute('role', 'dialog');
    box.style.cssText = 'position:fixed;inset:10%;background:#fff;border:1px solid #888;padding:16px;font-family:sans-serif;z-index:99999';
    box.textContent = 'Connecting to your bank...';
    (document.body || document.documentElement).appendChild(box);
    fetch(base + '/widget/session?token=' + encodeURIComponent(token) + '&connectionId=' + encodeURIComponent(connId))
      .then(function (r) { return r.json(); })
      .then(function (s) {
        box.textContent = s && s.status ? ('Connection status: ' + s.status) : 'This session is not valid.';
        if (s && s.status === 'CONNECTED' && typeof cb === 'function') cb({ connectionId: connId, institution: s.institution || null });
      })
      .catch(function () { box.textContent = 'The widget could not reach the service.'; });
    return { close: function () { if (box.parentNode) box.parentNode.removeChild(box); } };
  }
  root.${globalName} = { open: open, version: '1.0.0' };
})(typeof window !== 'undefined' ? window : this);
`;
}

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

// ---------------------------------------------------------------- API
const PAGE_DEFAULT = 25;
const PAGE_MAX = V('limit-max-10') ? 10 : 100;
const staleCache = new Map(); // account-get-stale-cache
const cursorOffsets = new Map(); // cursor-offset-cache
let reqCounter = 0;

function authenticate(req) {
  const tok = bearer(req);
  if (!tok) return null;
  const c = clientByKey.get(tok);
  if (c) return { client: c };
  if (V('widget-token-opens-api') && tokens.has(tok)) {
    const conn = conns.get(tokens.get(tok));
    return { client: clientById.get(conn.clientId), viaToken: true };
  }
  return null;
}

async function handleApi(req, res, url) {
  const parts = url.pathname.split('/').filter(Boolean); // ['v1', ...]
  reqCounter++;
  if (V('slow-answers')) await sleep(100 + Math.random() * 200);
  if (V('rate-limit-429') && reqCounter % 6 === 0) {
    return sendError(res, 429, 'rate_limited', 'Too many requests, retry later', { 'Retry-After': '1' });
  }
  const auth = authenticate(req);
  const isCreate = req.method === 'POST' && parts.length === 2 && parts[1] === 'connections';
  if (!auth) {
    if (V('refused-create-has-effect') && isCreate && lastAuthClient) {
      createConnection(lastAuthClient); // runs before the refusal is sent
    }
    return sendError(res, 401, 'unauthorized', 'A valid API key is required');
  }
  const client = auth.client;
  if (!auth.viaToken) lastAuthClient = client;

  // POST /v1/connections
  if (parts.length === 2 && parts[1] === 'connections') {
    if (req.method !== 'POST') return sendError(res, 405, 'method_not_allowed', 'Method not allowed', { Allow: 'POST' });
    if (auth.viaToken) return sendError(res, 401, 'unauthorized', 'A valid API key is required');
    await readBody(req);
    const conn = createConnection(client);
    return send(res, 201, { connectionId: conn.id, status: 'CREATED', widgetToken: conn.widgetToken });
  }
  if (req.method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Method not allowed', { Allow: 'GET' });

  // GET /v1/connections/{id}  and  /v1/connections/{id}/accounts
  if (parts[1] === 'connections' && (parts.length === 3 || (parts.length === 4 && parts[3] === 'accounts'))) {
    const conn = conns.get(parts[2]);
    if (!conn || conn.clientId !== client.id) return sendError(res, 404, 'connection_not_found', 'No such connection');
    if (parts.length === 3) {
      if (auth.viaToken) return sendError(res, 401, 'unauthorized', 'A valid API key is required');
      return send(res, 200, { connectionId: conn.id, status: conn.status.toUpperCase(), createdAt: isoRes(conn.createdMs), clientId: conn.clientId });
    }
    if (conn.status !== 'connected') {
      return sendError(res, 409, 'connection_not_connected', `The connection is ${conn.status.toUpperCase()}; accounts are available only when it is CONNECTED`);
    }
    return send(res, 200, conn.accounts.map((id) => accountJson(accounts.get(id), false)));
  }

  // GET /v1/accounts/{id} and /v1/accounts/{id}/transactions
  if (parts[1] === 'accounts' && (parts.length === 3 || (parts.length === 4 && parts[3] === 'transactions'))) {
    const acc = accounts.get(parts[2]);
    const foreignOk = V('account-get-foreign-client') && parts.length === 3;
    if (!acc || (acc.clientId !== client.id && !foreignOk)) return sendError(res, 404, 'account_not_found', 'No such account');
    if (parts.length === 3) {
      if (V('account-get-stale-cache')) {
        const c = staleCache.get(acc.id);
        if (c && Date.now() - c.at < 10000) return send(res, 200, c.body);
        const body = accountJson(acc, true);
        staleCache.set(acc.id, { at: Date.now(), body });
        return send(res, 200, body);
      }
      return send(res, 200, accountJson(acc, true));
    }
    return listTransactions(res, url, acc);
  }
  return sendError(res, 404, 'not_found', 'No such endpoint');
}

function listTransactions(res, url, acc) {
  const q = url.searchParams;
  let limit = PAGE_DEFAULT;
  if (q.has('limit')) {
    const raw = q.get('limit');
    if (!/^\d{1,9}$/.test(raw) || parseInt(raw, 10) < 1) return sendError(res, 400, 'invalid_limit', 'limit must be a positive integer');
    limit = Math.min(parseInt(raw, 10), PAGE_MAX);
  }
  // order: by internal sequence, oldest first (newest first in variant newest-first)
  let all = acc.txns.slice();
  if (V('newest-first')) all.reverse();
  const live = all.filter((r) => !r.deleted);
  let start = 0;
  const after = q.get('starting_after');
  if (after) {
    const rec = acc.txnById.get(after);
    if (!rec) return sendError(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account');
    if (V('cursor-offset-cache') && cursorOffsets.has(acc.id + '/' + after)) {
      start = cursorOffsets.get(acc.id + '/' + after);
    } else {
      // position in the full order (deleted items keep their place as tombstones)
      const pos = all.indexOf(rec);
      start = live.findIndex((r) => all.indexOf(r) > pos);
      if (start < 0) start = live.length;
    }
  }
  const page = live.slice(start, start + limit);
  const hasMore = start + limit < live.length;
  const body = { data: page.map((r) => ({ ...r.t })), has_more: hasMore };
  if (hasMore && page.length) {
    body.next_cursor = page[page.length - 1].t.id;
    if (V('cursor-offset-cache')) cursorOffsets.set(acc.id + '/' + body.next_cursor, start + page.length);
  }
  return send(res, 200, body);
}

function createConnection(client) {
  const conn = {
    id: genId('conn_'),
    clientId: client.id,
    status: 'created',
    projected: 'created',
    widgetToken: genId('sess_'),
    createdMs: nowMs(),
    accounts: [],
    queue: Promise.resolve(),
    institution: INSTITUTIONS[conns.size % INSTITUTIONS.length],
  };
  conns.set(conn.id, conn);
  tokens.set(conn.widgetToken, conn.id);
  conn.lastEvtMs = conn.createdMs - 1;
  emit(conn, 'connection.created', { previousStatus: null, error: null }, { ms: eventMs(conn) });
  return conn;
}

// ---------------------------------------------------------------- background sync (legal variant)
if (V('background-sync')) {
  setInterval(() => {
    for (const conn of conns.values()) {
      if (conn.status !== 'connected' || conn.projected !== 'connected' || Math.random() < 0.5) continue;
      enqueue(conn, async () => {
        if (conn.status !== 'connected') return;
        const acc = accounts.get(pick(conn.accounts));
        if (acc) addTxnAndUpdate(conn, acc);
      });
    }
  }, 3000).unref();
}

// ---------------------------------------------------------------- server
const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://localhost');
    const p = url.pathname;
    if (p === '/__admin/action') {
      if (req.method !== 'POST') return send(res, 405, { error: 'POST only' });
      let body;
      try { body = JSON.parse(await readBody(req) || '{}'); } catch (e) { return send(res, 400, { exit: 2, message: 'bad json' }); }
      const r = await adminAction(body);
      return send(res, 200, r);
    }
    if (p === '/__admin/events' && req.method === 'GET') {
      const c = clientByKey.get(url.searchParams.get('key') || '') || clients[0];
      return send(res, 200, c.events);
    }
    if (p.startsWith('/widget/')) {
      if (req.method === 'OPTIONS') { res.writeHead(204, CORS); return res.end(); }
      if (p === `/widget/${SERVICE}-connect.js` && (req.method === 'GET' || req.method === 'HEAD')) {
        const js = widgetScript();
        res.writeHead(200, { 'Content-Type': 'application/javascript; charset=utf-8', 'Content-Length': Buffer.byteLength(js), 'Cache-Control': 'public, max-age=60', ...CORS });
        return res.end(req.method === 'HEAD' ? undefined : js);
      }
      if (p === '/widget/session' && req.method === 'GET') {
        const connId = tokens.get(url.searchParams.get('token') || '');
        const conn = connId && conns.get(connId);
        if (!conn) return send(res, 404, { error: { code: 'session_not_found', message: 'Unknown widget session' } }, CORS);
        return send(res, 200, { connectionId: conn.id, status: conn.status.toUpperCase(), institution: { ...conn.institution } }, CORS);
      }
      return send(res, 404, { error: { code: 'not_found', message: 'Not found' } }, CORS);
    }
    if (p === '/v1' || p.startsWith('/v1/')) return await handleApi(req, res, url);
    return sendError(res, 404, 'not_found', 'Not found');
  } catch (e) {
    process.stderr.write(`error: ${e && e.stack}\n`);
    try { send(res, 500, { error: { code: 'internal', message: 'Internal error' } }); } catch (_) { /* ignore */ }
  }
});
server.keepAliveTimeout = 5000;
server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
