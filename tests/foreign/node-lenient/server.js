#!/usr/bin/env node
// An independent Bank Connection Aggregation Service, written from the service spec alone
// (Node.js standard library only). One behaviour variant at a time: --variant NAME or VARIANT=NAME
// (VARIANTS.md lists them). Keys: FOREIGN_API_KEYS="key1,key2". Prints the API base URL on the
// first stdout line and the admin (driver) URL on the second.
'use strict';
const http = require('node:http');
const crypto = require('node:crypto');

// ---------------------------------------------------------------- arguments
const args = process.argv.slice(2);
function arg(name, dflt) {
  const i = args.indexOf('--' + name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
}
const VARIANT = arg('variant', process.env.VARIANT || 'base');
const SERVICE = arg('service', process.env.SERVICE || 'acme');
const PORT = Number(arg('port', process.env.PORT || 0));
const KEYS = (process.env.FOREIGN_API_KEYS || '').split(',').filter(Boolean);
const V = (name) => VARIANT === name;
const KNOWN = new Set([
  'base',
  // violations
  'list-stale-balance', 'resubmit-prev-created', 'deleted-event-next-account', 'createdat-per-read',
  'has-more-off-by-one', 'foreign-read-syncs', 'clientid-first-client', 'deleted-id-unprefixed',
  'widget-frame-key-hex', 'widget-wants-widgettoken', 'disconnect-prev-connected', 'ms-unpadded',
  'limit-ignored-on-cursor', 'accounts-expire',
  // legal
  'errors-problem-json', 'account-envelope', 'create-200-location', 'slow-answers', 'conn-close',
  'ids-uuid', 'order-by-amount', 'clock-behind', 'late-dup-reversed', 'account-reads-connected-only',
  'limit-default-all', 'deleted-cursor-400', 'accounts-order-shuffled', 'accounts-updated-on-delete',
  'utc-plus-offset',
]);
if (!KNOWN.has(VARIANT)) {
  process.stderr.write(`unknown variant ${VARIANT}\n`);
  process.exit(2);
}
if (KEYS.length === 0) {
  process.stderr.write('FOREIGN_API_KEYS is empty\n');
  process.exit(2);
}

// ---------------------------------------------------------------- helpers
const CLOCK_OFFSET = V('clock-behind') ? -30000 : 0;
const nowMs = () => Date.now() + CLOCK_OFFSET;
// utc-plus-offset: UTC written as `+00:00` rather than `Z`.
const iso = (ms = nowMs()) => {
  const s = new Date(ms).toISOString();
  return V('utc-plus-offset') ? s.replace(/Z$/, '+00:00') : s;
};
// Event timestamps. ms-unpadded: the milliseconds are written without zero padding.
function eventTime(ms) {
  if (!V('ms-unpadded')) return iso(ms);
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())}T${p(d.getUTCHours())}:` +
    `${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}.${d.getUTCMilliseconds()}Z`;
}
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
function rid(prefix) {
  if (V('ids-uuid')) return prefix + crypto.randomUUID();
  const b = crypto.randomBytes(26);
  let s = '';
  for (let i = 0; i < 26; i++) s += ALNUM[b[i] % 36];
  return prefix + s;
}
const token = () => 'sess_' + crypto.randomBytes(24).toString('hex');
const rnd = (lo, hi) => lo + Math.random() * (hi - lo);
const money = (x) => Math.round(x * 100) / 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- state
const clients = KEYS.map((key) => ({ key, id: rid('cli_'), webhook: null, queue: [], sending: false }));
const connections = new Map(); // id -> connection
const accounts = new Map(); // id -> account
const txnIndex = new Map(); // txn id -> account id
let seq = 0;

function clientByKey(req) {
  const h = req.headers['authorization'];
  if (typeof h !== 'string' || !h.startsWith('Bearer ')) return null;
  const k = h.slice(7);
  const kb = Buffer.from(k);
  return clients.find((c) => { const cb = Buffer.from(c.key); return cb.length === kb.length && crypto.timingSafeEqual(cb, kb); }) || null;
}

// ---------------------------------------------------------------- events and webhooks
function emit(conn, type, extra) {
  const id = rid('evt_');
  const at = nowMs();
  const client = conn.client;
  const data = {
    eventId: id,
    type,
    occurredAt: eventTime(at),
    clientId: V('clientid-first-client') ? clients[0].id : client.id,
    connectionId: conn.id,
    ...extra,
  };
  const event = { id, type, created_at: eventTime(at), data };
  deliver(client, event);
}

function connectionEvent(conn, status, previous) {
  emit(conn, 'connection.' + status, { previousStatus: previous, error: errorFor(status) });
}

function errorFor(status) {
  if (status === 'failed_auth') return { code: 'invalid_credentials', message: 'The bank rejected the credentials.' };
  if (status === 'error') return { code: 'internal_error', message: 'An unexpected error occurred.' };
  if (status === 'mfa_required') return { code: 'mfa_required', message: 'The bank asks for a second factor.' };
  return null;
}

function deliver(client, event) {
  if (!client.webhook) return;
  const url = client.webhook;
  if (V('late-dup-reversed')) {
    // Deliveries leave in batches every 800 ms, each batch in reverse order; every event is
    // delivered again (same id) 5 s later.
    client.batch = client.batch || [];
    client.batch.push(event);
    if (!client.batchTimer) {
      client.batchTimer = setTimeout(() => {
        const b = client.batch.reverse();
        client.batch = [];
        client.batchTimer = null;
        for (const e of b) client.queue.push({ url, event: e, tries: 0 });
        pump(client);
      }, 800);
    }
    setTimeout(() => { client.queue.push({ url, event, tries: 0 }); pump(client); }, 5000);
    return;
  }
  client.queue.push({ url, event, tries: 0 });
  pump(client);
}

async function pump(client) {
  if (client.sending) return;
  client.sending = true;
  while (client.queue.length) {
    const item = client.queue[0];
    if (client.webhook !== item.url) { client.queue.shift(); continue; }
    const ok = await post(item.url, item.event);
    if (ok || ++item.tries >= 4) client.queue.shift();
    else await sleep(300 * item.tries);
  }
  client.sending = false;
}

function post(url, body) {
  return new Promise((resolve) => {
    let u;
    try { u = new URL(url); } catch { return resolve(true); }
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request({
      hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': payload.length, 'User-Agent': 'acme-webhooks/1' },
      timeout: 5000,
    }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode >= 200 && res.statusCode < 300)); });
    req.on('error', () => resolve(false));
    req.on('timeout', () => { req.destroy(); resolve(false); });
    req.end(payload);
  });
}

// ---------------------------------------------------------------- domain
const TEMPLATES = [
  { type: 'checking', name: 'Everyday Checking', currency: 'EUR', balance: 2450.17, n: 28 },
  { type: 'savings', name: 'Rainy Day Savings', currency: 'EUR', balance: 10200, n: 4 },
  { type: 'credit_card', name: 'Travel Card', currency: 'USD', balance: -612.4, n: 11 },
  { type: 'brokerage', name: 'Brokerage', currency: 'USD', balance: 18320.55, n: 2 },
  { type: 'pension', name: 'Pension Plan', currency: 'GBP', balance: 40210, n: 0 },
];
const CATEGORIES = ['groceries', 'income', 'transport', 'dining', 'utilities', 'shopping', 'transfer'];
const DESCRIPTIONS = { groceries: 'Corner Market', income: 'Salary', transport: 'Metro card', dining: 'Cafe Lumen',
  utilities: 'City Power', shopping: 'Bookshop', transfer: 'Transfer' };

function dateDaysAgo(days) {
  return new Date(nowMs() - days * 86400000).toISOString().slice(0, 10);
}

function newTxn(acc, daysAgo) {
  const category = CATEGORIES[Math.floor(Math.random() * CATEGORIES.length)];
  const amount = category === 'income' ? money(rnd(500, 3000)) : -money(rnd(2, 180));
  const t = {
    id: rid('txn_'), accountId: acc.id, amount, currency: acc.currency, description: DESCRIPTIONS[category],
    transactionDate: dateDaysAgo(daysAgo), category, status: 'posted', createdAt: iso(),
  };
  return { t, seq: ++seq, deleted: false };
}

function createAccounts(conn) {
  const ts = iso();
  for (const tpl of TEMPLATES) {
    const acc = {
      id: rid('acc_'), connectionId: conn.id, name: tpl.name, type: tpl.type, currency: tpl.currency,
      balance: tpl.balance, availableBalance: tpl.type === 'credit_card' ? money(5000 + tpl.balance) : tpl.balance,
      accountNumber: '****' + String(1000 + Math.floor(Math.random() * 9000)), createdAt: ts, lastSyncedAt: ts,
      institution: { id: 'ins_demo_bank', name: 'Demo Bank', logo: null },
    };
    if (tpl.type === 'credit_card') {
      acc.creditLimit = { amount: 5000, currency: 'USD' };
      acc.currencyBalances = [{ currency: 'EUR', balance: -42.1 }];
    }
    if (tpl.type === 'brokerage' || tpl.type === 'pension') {
      acc.positions = [{ symbol: 'VWRL', quantity: 12, value: 1320.5, currency: tpl.currency }];
    }
    const rec = { acc, conn, txns: [], listBalance: null };
    acc.id && accounts.set(acc.id, rec);
    for (let i = tpl.n - 1; i >= 0; i--) rec.txns.push(newTxn(acc, 1 + i * 2));
    for (const x of rec.txns) txnIndex.set(x.t.id, acc.id);
    rec.listBalance = { balance: acc.balance, availableBalance: acc.availableBalance };
    conn.accounts.push(acc.id);
  }
}

function setStatus(conn, status, previousOverride) {
  const prev = conn.status;
  conn.status = status;
  if (status === 'connected') conn.connectedAt = Date.now();
  connectionEvent(conn, status, previousOverride !== undefined ? previousOverride : prev);
}

// Credentials chain: credentials_submitted -> verifying -> final.
function chain(conn, final) {
  const prevOverride = V('resubmit-prev-created') ? 'created' : undefined;
  setStatus(conn, 'credentials_submitted', prevOverride);
  setStatus(conn, 'verifying');
  if (final === 'connected' && conn.accounts.length === 0) createAccounts(conn);
  setStatus(conn, final);
}

// Driver actions: returns an HTTP status for the admin answer.
function act(a) {
  if (a.action === 'register_webhook' || a.action === 'unregister_webhook') {
    const on = a.action === 'register_webhook';
    const pairs = [[a.apiKey, a.webhookUrl], [a.secondApiKey, a.secondWebhookUrl]];
    for (const [key, url] of pairs) {
      const c = clients.find((x) => x.key === key);
      if (!c) continue;
      c.webhook = on ? url || null : null;
      if (!on) c.queue = [];
    }
    return [200, { webhooks: 'per-client' }];
  }
  const conn = connections.get(a.connectionId);
  if (!conn) return [409, { error: 'unknown connection' }];
  const s = conn.status;
  switch (a.action) {
    case 'connect':
      if (s === 'connected') return [409, { error: 'already connected' }];
      chain(conn, 'connected');
      return [200, {}];
    case 'fail_auth':
      if (s === 'failed_auth') return [409, { error: 'not from ' + s }];
      chain(conn, 'failed_auth');
      return [200, {}];
    case 'require_mfa':
      if (s === 'mfa_required') return [409, { error: 'not from ' + s }];
      chain(conn, 'mfa_required');
      return [200, {}];
    case 'error':
      if (s === 'error') return [409, { error: 'not from ' + s }];
      setStatus(conn, 'error');
      return [200, {}];
    case 'disconnect':
      if (s === 'disconnected') return [409, { error: 'already disconnected' }];
      setStatus(conn, 'disconnected', V('disconnect-prev-connected') ? 'connected' : undefined);
      return [200, {}];
    case 'update_accounts': {
      if (s !== 'connected') return [409, { error: 'not connected' }];
      const rec = accounts.get(a.accountId && conn.accounts.includes(a.accountId) ? a.accountId : conn.accounts[0]);
      if (!rec) return [409, { error: 'no account' }];
      const x = newTxn(rec.acc, 0);
      rec.txns.push(x);
      txnIndex.set(x.t.id, rec.acc.id);
      rec.acc.balance = money(rec.acc.balance + x.t.amount);
      rec.acc.availableBalance = money(rec.acc.availableBalance + x.t.amount);
      rec.acc.lastSyncedAt = iso();
      if (!V('list-stale-balance')) rec.listBalance = { balance: rec.acc.balance, availableBalance: rec.acc.availableBalance };
      emit(conn, 'accounts.updated', { accountId: rec.acc.id });
      return [200, {}];
    }
    case 'delete_transaction': {
      if (conn.accounts.length === 0) return [409, { error: 'no accounts' }];
      let rec, x;
      if (a.transactionId) {
        const accId = txnIndex.get(a.transactionId);
        rec = accId && conn.accounts.includes(accId) ? accounts.get(accId) : null;
        x = rec && rec.txns.find((y) => y.t.id === a.transactionId && !y.deleted);
      } else {
        const ids = a.accountId && conn.accounts.includes(a.accountId) ? [a.accountId] : conn.accounts;
        for (const id of ids) {
          const r = accounts.get(id);
          const live = r.txns.filter((y) => !y.deleted);
          if (live.length) { rec = r; x = live[live.length - 1]; break; }
        }
      }
      if (!rec || !x) return [409, { error: 'no such transaction' }];
      // A duplicate or corrected record is removed; the bank's balance does not change.
      x.deleted = true;
      let accountId = rec.acc.id;
      if (V('deleted-event-next-account')) {
        const i = conn.accounts.indexOf(rec.acc.id);
        accountId = conn.accounts[(i + 1) % conn.accounts.length];
      }
      const transactionId = V('deleted-id-unprefixed') ? x.t.id.slice(4) : x.t.id;
      emit(conn, 'transaction.deleted', { accountId, transactionId });
      if (V('accounts-updated-on-delete')) emit(conn, 'accounts.updated', { accountId: rec.acc.id });
      return [200, {}];
    }
    default:
      return [404, { error: 'unsupported action' }];
  }
}

// ---------------------------------------------------------------- views
function accountView(rec, forList) {
  const o = { ...rec.acc };
  if (forList) Object.assign(o, rec.listBalance);
  if (!forList && V('createdat-per-read')) o.createdAt = iso();
  return o;
}

function compare(a, b) {
  if (V('order-by-amount')) return a.t.amount - b.t.amount || (a.t.id < b.t.id ? -1 : a.t.id > b.t.id ? 1 : 0);
  return b.seq - a.seq; // newest first
}

// ---------------------------------------------------------------- HTTP
function errorBody(status, code, message) {
  if (V('errors-problem-json')) {
    return { type: `https://errors.${SERVICE}.example/${code}`, title: message, status, code };
  }
  return { error: { code, message } };
}

function send(res, status, body, headers = {}) {
  const h = { ...headers };
  let payload = '';
  if (body !== undefined) {
    payload = JSON.stringify(body);
    if (!h['Content-Type']) {
      h['Content-Type'] = V('errors-problem-json') && status >= 400 ? 'application/problem+json' : 'application/json';
    }
  }
  if (V('conn-close')) h['Connection'] = 'close';
  h['Content-Length'] = Buffer.byteLength(payload);
  res.writeHead(status, h);
  res.end(payload);
}

function fail(res, status, code, message) {
  if (V('errors-problem-json')) {
    const map = { unauthorized: 401, forbidden: 403, not_connected: 423, bad_request: 422 };
    status = map[code] || status;
  }
  send(res, status, errorBody(status, code, message));
}

function widgetScript() {
  const global = SERVICE.charAt(0).toUpperCase() + SERVICE.slice(1).replace(/[^A-Za-z0-9]/g, '') + 'Connect';
  let args;
  if (V('widget-wants-widgettoken')) {
    args = `var o = (a && typeof a === 'object') ? a : { connectionId: a, widgetToken: b, onSuccess: c };
    if (!o.widgetToken || String(o.widgetToken).indexOf('sess_') !== 0) throw new Error('${global}.open: widgetToken is required');
    o.token = o.widgetToken;`;
  } else {
    args = `var o = (a && typeof a === 'object') ? a : { token: a, connectionId: b, onSuccess: c };
    if (!o.token) throw new Error('${global}.open: token is required');`;
  }
  const frame = V('widget-frame-key-hex')
    ? `var f = document.createElement('iframe'); f.title = 'Connect your bank';
    f.src = base + '/widget/frame?connectionId=' + encodeURIComponent(o.connectionId || '') + '&t=' + encodeURIComponent(o.token);
    el.appendChild(f);`
    : '';
  return `/* ${SERVICE} connect widget */
(function () {
  var cur = document.currentScript && document.currentScript.src;
  var base = cur ? cur.replace(/\\/widget\\/[^\\/]*$/, '') : '';
  function open(a, b, c) {
    ${args}
    var el = document.createElement('div');
    el.className = '${SERVICE}-connect-widget';
    el.textContent = 'Connect your bank';
    (document.body || document.documentElement).appendChild(el);
    ${frame}
    var done = false;
    fetch(base + '/widget/session', { headers: { 'X-Widget-Token': o.token } })
      .then(function (r) { return r.json(); })
      .then(function (s) {
        el.setAttribute('data-status', s.status || '');
        if (!done && s.status === 'CONNECTED' && typeof o.onSuccess === 'function') {
          done = true;
          o.onSuccess({ connectionId: s.connectionId, institution: s.institution });
        }
      })
      .catch(function () {});
    return { close: function () { if (el.parentNode) el.parentNode.removeChild(el); } };
  }
  window.${global} = { open: open, version: '1.0.0' };
})();
`;
}

function widgetRoute(req, res, url) {
  const cors = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Allow-Headers': 'X-Widget-Token, Content-Type' };
  if (req.method === 'OPTIONS') { res.writeHead(204, { ...cors, 'Access-Control-Allow-Methods': 'GET' }); return res.end(); }
  if (url.pathname === `/widget/${SERVICE}-connect.js` && req.method === 'GET') {
    const body = widgetScript();
    res.writeHead(200, { ...cors, 'Content-Type': 'application/javascript; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    return res.end(body);
  }
  const byToken = (t) => [...connections.values()].find((c) => c.token === t);
  if (url.pathname === '/widget/session' && req.method === 'GET') {
    const conn = byToken(req.headers['x-widget-token']);
    if (!conn) return send(res, 401, { error: { code: 'invalid_session', message: 'Unknown widget session.' } }, cors);
    return send(res, 200, { connectionId: conn.id, status: conn.status.toUpperCase(),
      institution: { id: 'ins_demo_bank', name: 'Demo Bank' } }, cors);
  }
  if (url.pathname === '/widget/frame' && req.method === 'GET' && V('widget-frame-key-hex')) {
    const conn = byToken(url.searchParams.get('t'));
    const hex = conn ? Buffer.from(conn.client.key).toString('hex') : '';
    const html = `<!doctype html><html><head><meta charset="utf-8"><meta name="${SERVICE}-client" content="${hex}">` +
      `<title>Connect</title></head><body><p>Choose your bank</p></body></html>`;
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(html) });
    return res.end(html);
  }
  return send(res, 404, { error: { code: 'not_found', message: 'No such widget resource.' } }, cors);
}

function parseLimit(raw) {
  if (raw === null) return V('limit-default-all') ? Infinity : 20;
  if (!/^\d+$/.test(raw)) return NaN;
  const n = Number(raw);
  if (n < 1) return NaN;
  return V('limit-default-all') ? n : Math.min(n, 100);
}

async function api(req, res, url) {
  if (V('slow-answers')) await sleep(rnd(200, 700));
  const client = clientByKey(req);
  const parts = url.pathname.split('/').filter(Boolean); // v1, ...
  if (!client) {
    const missing = !req.headers['authorization'];
    return fail(res, 401, missing ? 'unauthorized' : (V('errors-problem-json') ? 'forbidden' : 'unauthorized'),
      missing ? 'Missing API key.' : 'Invalid API key.');
  }
  // POST /v1/connections
  if (parts.length === 2 && parts[1] === 'connections') {
    if (req.method !== 'POST') return fail(res, 405, 'method_not_allowed', 'Method not allowed.');
    const conn = { id: rid('conn_'), client, status: 'created', token: token(), accounts: [], createdAt: iso(), connectedAt: 0 };
    connections.set(conn.id, conn);
    connectionEvent(conn, 'created', null);
    const body = { connectionId: conn.id, status: 'CREATED', widgetToken: conn.token };
    if (V('create-200-location')) {
      Object.assign(body, { clientId: client.id, createdAt: conn.createdAt, widgetTokenExpiresAt: iso(nowMs() + 3600000) });
      return send(res, 200, body, { Location: `/v1/connections/${conn.id}` });
    }
    return send(res, 201, body);
  }
  if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Method not allowed.');
  // GET /v1/connections/{id}/accounts
  if (parts.length === 4 && parts[1] === 'connections' && parts[3] === 'accounts') {
    const conn = connections.get(decodeURIComponent(parts[2]));
    if (!conn || conn.client !== client) {
      if (conn && V('foreign-read-syncs') && conn.status === 'connected' && conn.accounts.length) {
        // "Refresh before authorise": the sync hook runs before the owner check, and announces
        // a change although nothing changed.
        emit(conn, 'accounts.updated', { accountId: conn.accounts[0] });
      }
      return fail(res, 404, 'not_found', 'No such connection.');
    }
    if (conn.status !== 'connected') {
      return fail(res, 409, 'not_connected', `The connection is ${conn.status.toUpperCase()}, not CONNECTED.`);
    }
    if (V('accounts-expire') && Date.now() - conn.connectedAt > 10000) return send(res, 200, []);
    const list = conn.accounts.map((id) => accountView(accounts.get(id), true));
    if (V('accounts-order-shuffled')) {
      for (let i = list.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [list[i], list[j]] = [list[j], list[i]];
      }
    }
    return send(res, 200, list);
  }
  // GET /v1/accounts/{id} and /v1/accounts/{id}/transactions
  if ((parts.length === 3 || (parts.length === 4 && parts[3] === 'transactions')) && parts[1] === 'accounts') {
    const rec = accounts.get(decodeURIComponent(parts[2]));
    if (!rec || rec.conn.client !== client) return fail(res, 404, 'not_found', 'No such account.');
    if (V('account-reads-connected-only') && rec.conn.status !== 'connected') {
      return fail(res, 409, 'not_connected', `The connection is ${rec.conn.status.toUpperCase()}, not CONNECTED.`);
    }
    if (parts.length === 3) {
      const view = accountView(rec, false);
      if (V('account-envelope')) return send(res, 200, { data: view, meta: { requestId: rid('req_'), servedAt: iso() } });
      return send(res, 200, view);
    }
    const after = url.searchParams.get('starting_after');
    let limit = parseLimit(url.searchParams.get('limit'));
    if (Number.isNaN(limit)) return fail(res, 400, 'bad_request', 'limit must be a positive integer.');
    if (after !== null && V('limit-ignored-on-cursor')) limit = 20;
    const sorted = [...rec.txns].sort(compare);
    let start = 0;
    if (after !== null) {
      const i = sorted.findIndex((x) => x.t.id === after);
      if (i < 0) return fail(res, 400, 'bad_request', 'starting_after is not a transaction of this account.');
      if (V('deleted-cursor-400') && sorted[i].deleted) {
        return fail(res, 400, 'cursor_expired', 'starting_after names a transaction that was removed.');
      }
      start = i + 1;
    }
    const rest = sorted.slice(start).filter((x) => !x.deleted);
    const page = rest.slice(0, limit).map((x) => ({ ...x.t }));
    const hasMore = V('has-more-off-by-one') ? rest.length > page.length + 1 : rest.length > page.length;
    const body = { data: page, has_more: hasMore };
    if (hasMore) body.next_cursor = page[page.length - 1].id;
    return send(res, 200, body);
  }
  return fail(res, 404, 'not_found', 'No such resource.');
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

const server = http.createServer(async (req, res) => {
  try {
    await readBody(req);
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname.startsWith('/widget/')) return widgetRoute(req, res, url);
    if (url.pathname === '/v1' || url.pathname.startsWith('/v1/')) return await api(req, res, url);
    return send(res, 404, errorBody(404, 'not_found', 'No such resource.'));
  } catch (e) {
    process.stderr.write(`error: ${e && e.stack}\n`);
    if (!res.headersSent) send(res, 500, errorBody(500, 'internal_error', 'Internal error.'));
  }
});
server.keepAliveTimeout = 5000;
if (V('conn-close')) server.keepAliveTimeout = 1;

// The admin endpoint the driver talks to (a separate port, loopback only).
const admin = http.createServer(async (req, res) => {
  let a;
  try { a = JSON.parse(await readBody(req)); } catch { res.writeHead(400); return res.end(); }
  let out;
  try { out = act(a); } catch (e) { process.stderr.write(`admin error: ${e && e.stack}\n`); out = [500, { error: String(e) }]; }
  const body = JSON.stringify(out[1]);
  res.writeHead(out[0], { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
});

server.listen(PORT, '127.0.0.1', () => {
  admin.listen(0, '127.0.0.1', () => {
    process.stdout.write(`http://127.0.0.1:${server.address().port}\nhttp://127.0.0.1:${admin.address().port}/admin\n`);
  });
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
