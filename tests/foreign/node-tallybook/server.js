#!/usr/bin/env node
// tallybook: a bank-connection aggregation service (spec: service-spec.md), Node.js standard library only.
//
// Character: written by a retail-analytics team. Everything goes through their home-grown HTTP
// toolkit (router, response helpers, an optional micro-cache, per-socket sessions), transactions
// are categorised by a rules engine, and the data lives in an in-memory "read model" that the
// sync jobs project into. Webhooks go through a per-client outbox drained in order.
//
//   TALLY_API_KEYS="tally_a,tally_b" TALLY_ADMIN_TOKEN=x node server.js --port 0 --variant none
//
// Prints the port it listens on (127.0.0.1) as the first line of stdout.
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');

// ---------------------------------------------------------------------------------------------
// Options
const args = process.argv.slice(2);
function opt(name, dflt) {
  const i = args.indexOf('--' + name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
}
const PORT = Number(opt('port', '0'));
const VARIANT = opt('variant', 'none');
const VARIANTS = new Set([
  'none',
  // violations
  'month-zero', 'mask-wrong-end', 'shared-microcache', 'socket-auth', 'category-flaps',
  'event-ids-swapped', 'auth-lockout-401', 'widget-relative-url', 'cursor-not-decoded',
  'updated-names-bank-ref', 'concurrent-page-mixup', 'cache-control-public', 'widget-domready-only',
  // legal
  'webhook-text-plain', 'widget-class-instance', 'widget-current-script', 'script-redirect',
  'logo-url', 'expect-continue',
]);
if (!VARIANTS.has(VARIANT)) {
  console.error(`unknown variant ${VARIANT}; known: ${[...VARIANTS].join(', ')}`);
  process.exit(2);
}
const V = (name) => VARIANT === name;
const SERVICE = 'tally';
const ADMIN_TOKEN = process.env.TALLY_ADMIN_TOKEN || '';
const KEYS = (process.env.TALLY_API_KEYS || '').split(',').map((s) => s.trim()).filter(Boolean);
if (KEYS.length === 0) {
  console.error('TALLY_API_KEYS is empty');
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Ids and clock
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
function opaque(n = 26) {
  const bytes = crypto.randomBytes(n);
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHABET[bytes[i] & 31];
  return s;
}
const newId = (prefix) => `${prefix}_${opaque()}`;

let lastStamp = 0;
// A strictly increasing clock: two stamps of the service never tie.
function nowMs() {
  const t = Date.now();
  lastStamp = t > lastStamp ? t : lastStamp + 1;
  return lastStamp;
}
const iso = (ms) => new Date(ms).toISOString();
let seqCounter = 0;

// ---------------------------------------------------------------------------------------------
// Store
const clients = new Map(); // key -> client
const clientsById = new Map();
KEYS.forEach((key) => {
  const c = { id: newId('cli'), key, webhookUrl: null, outbox: [], draining: false };
  clients.set(key, c);
  clientsById.set(c.id, c);
});
const connections = new Map();
const accounts = new Map();
const tokens = new Map(); // widget token -> connection id

const INSTITUTIONS = [
  { id: 'ins_BANQUEHORIZON0000000000001', name: 'Banque Horizon' },
  { id: 'ins_NORDSPARKASSE00000000002', name: 'Nord Sparkasse' },
];

// ---------------------------------------------------------------------------------------------
// Fixtures: what the bank returns at the first sync of a connection
const CHECKING_LINES = [
  ['Café Crème – Lyon', -4.2, 'dining'],
  ['Bäckerei Müller', -6.85, 'groceries'],
  ['Salaire Décembre – ACME SA', 2850, 'income'],
  ['Monoprix Bellecour', -42.17, 'groceries'],
  ['SNCF Voyages', -78.5, 'transport'],
  ['AMZN Mktp – Fresh order', -63.4, 'groceries'], // ambiguous for the rules engine
  ['EDF Électricité', -71.03, 'utilities'],
  ['Boulangerie Paul', -3.9, 'dining'],
  ['Virement reçu – M. Dupont', 120, 'income'],
  ['Uber *Trip', -17.25, 'transport'],
  ['AMZN Mktp – Fresh order', -24.99, 'groceries'],
  ['Fnac Part-Dieu', -129, 'shopping'],
  ['Pharmacie du Rhône', -12.6, 'health'],
  ['Orange Mobile', -19.99, 'utilities'],
  ['Carrefour City', -27.45, 'groceries'],
];
const CARD_LINES = [
  ['Hôtel Le Méridien', -212.4, 'travel'],
  ['Decathlon', -59.99, 'shopping'],
  ['Spotify AB', -10.99, 'entertainment'],
  ['Shell Station', -55.3, 'transport'],
  ['Remboursement – Decathlon', 59.99, 'refund'],
  ['AMZN Mktp – Fresh order', -31.2, 'groceries'],
  ['Restaurant Ô Saveurs', -48.5, 'dining'],
];

function dateDaysAgo(days) {
  const d = new Date();
  d.setUTCHours(0, 0, 0, 0);
  d.setUTCDate(d.getUTCDate() - days);
  return d;
}
function round2(x) {
  return Math.round(x * 100) / 100;
}
function digits(n) {
  let s = '';
  while (s.length < n) s += String(crypto.randomInt(0, 10));
  return s;
}

function makeTxn(account, date, amount, description, category, createdAtMs, currency) {
  return {
    id: newId('txn'),
    accountId: account.id,
    amount: round2(amount),
    currency: currency || account.currency,
    description,
    date, // Date at 00:00 UTC
    category,
    status: 'posted',
    createdAt: createdAtMs,
    seq: ++seqCounter,
    reads: 0,
  };
}

// Transactions are ordered newest first: by date, then by sequence (later import first).
function sortKeyCmp(a, b) {
  const d = b.date.getTime() - a.date.getTime();
  return d !== 0 ? d : b.seq - a.seq;
}

function importAccounts(conn) {
  const t = nowMs();
  const inst = INSTITUTIONS[conn.ordinal % INSTITUTIONS.length];
  const specs = [
    { type: 'checking', name: 'Compte Courant', currency: 'EUR' },
    { type: 'savings', name: 'Livret Épargne', currency: 'EUR' },
    { type: 'credit_card', name: 'Carte Visa Premier', currency: 'EUR' },
    { type: 'brokerage', name: 'Compte-Titres', currency: 'EUR' },
  ];
  if (conn.ordinal % 2 === 1) specs.push({ type: 'pension', name: 'PER Retraite', currency: 'EUR' });
  for (const s of specs) {
    const acc = {
      id: newId('acc'),
      bankRef: newId('acc'), // the bank's own account reference
      connectionId: conn.id,
      clientId: conn.clientId,
      name: s.name,
      type: s.type,
      currency: s.currency,
      balance: 0,
      availableBalance: 0,
      accountNumber: digits(s.type === 'credit_card' ? 16 : 11),
      createdAt: t,
      lastSyncedAt: t,
      institution: inst,
      txns: [],
      tombstones: new Map(), // deleted transaction id -> {date, seq}
    };
    // Transactions, oldest first so that the sequence grows with time.
    const lines = [];
    if (s.type === 'checking') {
      for (let i = 0; i < 42; i++) {
        const [desc, amt, cat] = CHECKING_LINES[i % CHECKING_LINES.length];
        lines.push([Math.floor(62 - i * 1.5), desc, amt + (i % 7) * 0.11 * Math.sign(amt), cat]);
      }
    } else if (s.type === 'savings') {
      // Monthly interest on the first of each month, back 14 months.
      const now = new Date();
      for (let m = 14; m >= 1; m--) {
        const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - m + 1, 1));
        const days = Math.round((dateDaysAgo(0) - d) / 86400000);
        lines.push([days, 'Intérêts créditeurs', 3.1 + m * 0.07, 'interest']);
      }
      lines.push([20, 'Virement épargne', 200, 'transfer']);
    } else if (s.type === 'credit_card') {
      for (let i = 0; i < 16; i++) {
        const [desc, amt, cat] = CARD_LINES[i % CARD_LINES.length];
        lines.push([45 - i * 3, desc, amt, cat]);
      }
    } else if (s.type === 'brokerage') {
      lines.push([80, 'Achat 10 × Air Liquide', -1720.4, 'investment']);
      lines.push([40, 'Dividende – TotalEnergies', 38.2, 'income']);
      lines.push([12, 'Frais de garde', -4.99, 'fees']);
    } else if (s.type === 'pension') {
      lines.push([30, 'Versement programmé', 150, 'transfer']);
    }
    let bal = s.type === 'credit_card' ? 0 : s.type === 'checking' ? 1520.35 : 5000;
    for (const [days, desc, amt, cat] of lines) {
      acc.txns.push(makeTxn(acc, dateDaysAgo(Math.max(0, days)), amt, desc, cat, t));
      bal += amt;
    }
    acc.txns.sort(sortKeyCmp);
    acc.balance = round2(bal);
    if (s.type === 'credit_card') {
      acc.creditLimit = { amount: 3000, currency: 'EUR' };
      acc.availableBalance = round2(3000 + acc.balance);
      acc.currencyBalances = [{ currency: 'USD', balance: -42.1, availableBalance: 2957.9 }];
    } else {
      acc.availableBalance = acc.balance;
    }
    if (s.type === 'brokerage') {
      acc.positions = [
        { symbol: 'AI.PA', name: 'Air Liquide', quantity: 10, price: 172.04, marketValue: 1720.4, currency: 'EUR' },
        { symbol: 'TTE.PA', name: 'TotalEnergies', quantity: 25, price: 58.1, marketValue: 1452.5, currency: 'EUR' },
      ];
    } else if (s.type === 'pension') {
      acc.positions = [{ symbol: 'FR0010315770', name: 'Fonds Retraite Équilibre', quantity: 12.5, price: 101.3, marketValue: 1266.25, currency: 'EUR' }];
    }
    accounts.set(acc.id, acc);
    conn.accountIds.push(acc.id);
  }
}

// ---------------------------------------------------------------------------------------------
// Serialisation (the read model's projections)
function pad(n, w = 2) {
  return String(n).padStart(w, '0');
}
function fmtDate(d) {
  // month-zero: the formatter forgets that getUTCMonth() counts from 0.
  const month = V('month-zero') ? d.getUTCMonth() : d.getUTCMonth() + 1;
  return `${d.getUTCFullYear()}-${pad(month)}-${pad(d.getUTCDate())}`;
}
function mask(num) {
  if (V('mask-wrong-end')) return num.slice(0, 4) + '*'.repeat(num.length - 4);
  return '*'.repeat(num.length - 4) + num.slice(-4);
}
function institutionView(inst, baseUrl) {
  const logo = V('logo-url') ? `${baseUrl}/static/institutions/${inst.id}.png` : null;
  return { id: inst.id, name: inst.name, logo };
}
function accountView(acc, baseUrl) {
  const o = {
    id: acc.id,
    connectionId: acc.connectionId,
    name: acc.name,
    type: acc.type,
    currency: acc.currency,
    balance: acc.balance,
    availableBalance: acc.availableBalance,
    accountNumber: mask(acc.accountNumber),
    createdAt: iso(acc.createdAt),
    lastSyncedAt: iso(acc.lastSyncedAt),
    institution: institutionView(acc.institution, baseUrl),
  };
  if (acc.creditLimit) o.creditLimit = acc.creditLimit;
  if (acc.currencyBalances) o.currencyBalances = acc.currencyBalances;
  if (acc.positions) o.positions = acc.positions;
  return o;
}
// The rules engine. Descriptions matched by two rules of the same weight are ambiguous.
function categorise(t) {
  if (V('category-flaps') && /AMZN Mktp/.test(t.description)) {
    // The tie between the `groceries` and `shopping` rules goes to the rule hit least recently
    // (an LRU meant to spread "rule usage" statistics): every read flips the label.
    t.reads++;
    return t.reads % 2 === 1 ? 'groceries' : 'shopping';
  }
  return t.category;
}
function txnView(t) {
  return {
    id: t.id,
    accountId: t.accountId,
    amount: t.amount,
    currency: t.currency,
    description: t.description,
    transactionDate: fmtDate(t.date),
    category: categorise(t),
    status: t.status,
    createdAt: iso(t.createdAt),
  };
}

// ---------------------------------------------------------------------------------------------
// Webhooks: a per-client outbox, drained in order
function emit(conn, type, extra) {
  const client = clientsById.get(conn.clientId);
  const ms = nowMs();
  const id = newId('evt');
  const data = { eventId: id, type, occurredAt: iso(ms), clientId: client.id, connectionId: conn.id, ...extra };
  const envelope = { id, type, created_at: iso(ms), data };
  client.outbox.push(envelope);
  drain(client);
}
function emitConnection(conn, to, prev, error = null) {
  emit(conn, `connection.${to}`, { previousStatus: prev, error });
}

function post(url, body) {
  return new Promise((resolve) => {
    let u;
    try {
      u = new URL(url);
    } catch {
      return resolve(false);
    }
    const buf = Buffer.from(body, 'utf8');
    const headers = {
      'Content-Type': V('webhook-text-plain') ? 'text/plain; charset=utf-8' : 'application/json',
      'Content-Length': buf.length,
      'User-Agent': 'tallybook-webhooks/2.3',
    };
    if (V('expect-continue')) headers.Expect = '100-continue';
    const req = http.request(
      { method: 'POST', hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, headers, timeout: 5000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode >= 200 && res.statusCode < 300));
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    if (V('expect-continue')) {
      // RFC 9110 10.1.1: wait for 100 Continue, but not for ever.
      let sent = false;
      const send = () => {
        if (!sent) {
          sent = true;
          req.end(buf);
        }
      };
      req.on('continue', send);
      setTimeout(send, 1000);
    } else {
      req.end(buf);
    }
  });
}
async function drain(client) {
  if (client.draining) return;
  client.draining = true;
  try {
    while (client.outbox.length) {
      const evt = client.outbox[0];
      const url = client.webhookUrl;
      if (!url) {
        client.outbox.shift();
        continue;
      }
      let ok = false;
      for (let attempt = 0; attempt < 4 && !ok; attempt++) {
        if (attempt) await new Promise((r) => setTimeout(r, 300 * attempt));
        if (client.webhookUrl !== url) break;
        ok = await post(url, JSON.stringify(evt));
      }
      client.outbox.shift();
    }
  } finally {
    client.draining = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Lifecycle (driver actions and the widget's submit)
const STATES = ['created', 'credentials_submitted', 'verifying', 'connected', 'mfa_required', 'failed_auth', 'error', 'disconnected'];
function move(conn, to, error = null) {
  const prev = conn.status;
  conn.status = to;
  if (to === 'connected' && conn.accountIds.length === 0) importAccounts(conn);
  invalidate(conn);
  emitConnection(conn, to, prev, error);
}
const ERR = {
  failed_auth: { code: 'invalid_credentials', message: 'The bank rejected the credentials.' },
  error: { code: 'institution_error', message: 'Unexpected error while talking to the bank.' },
  mfa_required: { code: 'mfa_required', message: 'The bank asks for a second factor.' },
};
// Each returns true when accepted; the steps are carried through at once, in order.
function credentialsPath(conn, finalState) {
  const s = conn.status;
  if (s === 'mfa_required') {
    move(conn, 'verifying');
  } else if (['created', 'failed_auth', 'error', 'disconnected'].includes(s)) {
    move(conn, 'credentials_submitted');
    move(conn, 'verifying');
  } else {
    return false;
  }
  move(conn, finalState, ERR[finalState] || null);
  return true;
}
function act(conn, action, body) {
  switch (action) {
    case 'connect':
      return credentialsPath(conn, 'connected') ? {} : null;
    case 'fail_auth':
      return credentialsPath(conn, 'failed_auth') ? {} : null;
    case 'require_mfa':
      if (conn.status === 'mfa_required') return null;
      return credentialsPath(conn, 'mfa_required') ? {} : null;
    case 'error':
      if (conn.status === 'error' || conn.status === 'disconnected') return null;
      move(conn, 'error', ERR.error);
      return {};
    case 'disconnect':
      if (conn.status === 'disconnected') return null;
      move(conn, 'disconnected');
      return {};
    case 'update_accounts':
      return updateAccount(conn, body.accountId);
    case 'delete_transaction':
      return deleteTransaction(conn, body.accountId, body.transactionId);
    default:
      return undefined;
  }
}
const NEW_LINES = [
  ['Carte – Monop’ Daily', -8.4, 'groceries'],
  ['Virement reçu – Remboursement', 35, 'income'],
  ['Vélo’v abonnement', -3.5, 'transport'],
];
function updateAccount(conn, accountId) {
  if (conn.status !== 'connected') return null;
  const acc = accountId ? accounts.get(accountId) : accounts.get(conn.accountIds[0]);
  if (!acc || acc.connectionId !== conn.id) return null;
  const t = nowMs();
  const [desc, amt, cat] = NEW_LINES[seqCounter % NEW_LINES.length];
  const txn = makeTxn(acc, dateDaysAgo(0), amt, desc, cat, t);
  acc.txns.push(txn);
  acc.txns.sort(sortKeyCmp);
  acc.balance = round2(acc.balance + txn.amount);
  acc.availableBalance = acc.creditLimit ? round2(acc.creditLimit.amount + acc.balance) : acc.balance;
  acc.lastSyncedAt = t;
  invalidate(conn);
  const named = V('updated-names-bank-ref') ? acc.bankRef : acc.id;
  if (V('event-ids-swapped')) emit(conn, 'accounts.updated', { connectionId: named, accountId: conn.id });
  else emit(conn, 'accounts.updated', { accountId: named });
  return { accountId: acc.id, transactionId: txn.id };
}
function deleteTransaction(conn, accountId, transactionId) {
  if (conn.status !== 'connected') return null;
  let acc = null;
  let idx = -1;
  if (transactionId) {
    for (const aid of conn.accountIds) {
      const a = accounts.get(aid);
      const i = a.txns.findIndex((x) => x.id === transactionId);
      if (i >= 0) {
        acc = a;
        idx = i;
        break;
      }
    }
    if (!acc || (accountId && acc.id !== accountId)) return null;
  } else {
    acc = accountId ? accounts.get(accountId) : accounts.get(conn.accountIds[0]);
    if (!acc || acc.connectionId !== conn.id || acc.txns.length === 0) return null;
    idx = 0;
  }
  const [txn] = acc.txns.splice(idx, 1);
  acc.tombstones.set(txn.id, { date: txn.date, seq: txn.seq });
  invalidate(conn);
  if (V('event-ids-swapped')) emit(conn, 'transaction.deleted', { connectionId: acc.id, accountId: conn.id, transactionId: txn.id });
  else emit(conn, 'transaction.deleted', { accountId: acc.id, transactionId: txn.id });
  return { accountId: acc.id, transactionId: txn.id };
}

// ---------------------------------------------------------------------------------------------
// The toolkit: responses, micro-cache, auth
const microcache = new Map(); // url -> {at, status, body, connectionIds}
function invalidate(conn) {
  if (!V('shared-microcache')) return;
  for (const [url, entry] of microcache) if (entry.conn === conn.id) microcache.delete(url);
}

function send(res, status, obj, extraHeaders = {}) {
  const body = JSON.stringify(obj);
  const headers = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', ...extraHeaders };
  res.writeHead(status, headers);
  res.end(body);
  return body;
}
function fail(res, status, code, message, extra = {}) {
  return send(res, status, { error: { code, message } }, extra);
}

const failures = new Map(); // remote address -> [timestamps of refused keys]
const lockedUntil = new Map();
function authenticate(req) {
  const h = req.headers.authorization;
  if (!h) return { error: ['missing_api_key', 'The Authorization header is missing.'] };
  const m = /^Bearer ([^\s]+)$/i.exec(h);
  if (!m) return { error: ['invalid_authorization', 'Use Authorization: Bearer <API_KEY>.'] };
  const c = clients.get(m[1]);
  if (!c) return { error: ['invalid_api_key', 'The API key is not valid.'] };
  return { client: c };
}
function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}
function parseJson(s) {
  try {
    return s ? JSON.parse(s) : {};
  } catch {
    return null;
  }
}
function baseUrlOf(req) {
  return `http://${req.headers.host || '127.0.0.1'}`;
}

// ---------------------------------------------------------------------------------------------
// API handlers
async function handleApi(req, res, url) {
  const path = url.pathname;
  const remote = req.socket.remoteAddress;

  // The micro-cache sits in front of everything, auth included: "reads are idempotent".
  if (V('shared-microcache') && req.method === 'GET') {
    const hit = microcache.get(req.url);
    if (hit && Date.now() - hit.at < 1500) {
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'X-Cache': 'HIT' });
      return res.end(hit.body);
    }
  }

  if (V('auth-lockout-401') && (lockedUntil.get(remote) || 0) > Date.now()) {
    return fail(res, 401, 'invalid_api_key', 'The API key is not valid.', { 'WWW-Authenticate': 'Bearer' });
  }

  let client;
  if (V('socket-auth') && req.socket.tallyClient) {
    // The toolkit authenticates a keep-alive connection once, like a database session.
    client = req.socket.tallyClient;
  } else {
    const a = authenticate(req);
    if (a.error) {
      if (V('auth-lockout-401')) {
        const list = (failures.get(remote) || []).filter((t) => Date.now() - t < 10000);
        list.push(Date.now());
        failures.set(remote, list);
        if (list.length >= 5) {
          lockedUntil.set(remote, Date.now() + 5000);
          failures.set(remote, []);
        }
      }
      return fail(res, 401, a.error[0], a.error[1], { 'WWW-Authenticate': 'Bearer' });
    }
    client = a.client;
    if (V('socket-auth')) req.socket.tallyClient = client;
  }

  const cacheHeaders = V('cache-control-public') ? { 'Cache-Control': 'public, max-age=300' } : {};
  const remember = (connId, body) => {
    if (V('shared-microcache')) microcache.set(req.url, { at: Date.now(), body, conn: connId });
  };

  let m;
  if (path === '/v1/connections') {
    if (req.method !== 'POST') return fail(res, 405, 'method_not_allowed', 'Use POST.', { Allow: 'POST' });
    await readBody(req); // any body is ignored
    const conn = {
      id: newId('conn'),
      clientId: client.id,
      status: 'created',
      widgetToken: newId('sess'),
      tokenExpires: Date.now() + 30 * 60 * 1000,
      accountIds: [],
      createdAt: nowMs(),
      ordinal: connections.size,
    };
    connections.set(conn.id, conn);
    tokens.set(conn.widgetToken, conn.id);
    emitConnection(conn, 'created', null);
    return send(res, 201, { connectionId: conn.id, status: 'CREATED', widgetToken: conn.widgetToken });
  }
  if ((m = /^\/v1\/connections\/([^/]+)\/accounts$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn || conn.clientId !== client.id) return fail(res, 404, 'connection_not_found', 'No such connection.');
    if (conn.status !== 'connected') {
      return fail(res, 409, 'connection_not_connected', `The connection is ${conn.status.toUpperCase()}, not CONNECTED.`);
    }
    const list = conn.accountIds.map((id) => accountView(accounts.get(id), baseUrlOf(req)));
    return remember(conn.id, send(res, 200, list, cacheHeaders));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const acc = accounts.get(decodeURIComponent(m[1]));
    if (!acc || acc.clientId !== client.id) return fail(res, 404, 'account_not_found', 'No such account.');
    return remember(acc.connectionId, send(res, 200, accountView(acc, baseUrlOf(req)), cacheHeaders));
  }
  if ((m = /^\/v1\/accounts\/([^/]+)\/transactions$/.exec(path))) {
    if (req.method !== 'GET') return fail(res, 405, 'method_not_allowed', 'Use GET.', { Allow: 'GET' });
    const acc = accounts.get(decodeURIComponent(m[1]));
    if (!acc || acc.clientId !== client.id) return fail(res, 404, 'account_not_found', 'No such account.');
    let limit = 25;
    const rawLimit = url.searchParams.get('limit');
    if (rawLimit !== null) {
      if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1) return fail(res, 400, 'invalid_limit', 'limit must be a positive integer.');
      limit = Math.min(Number(rawLimit), 100);
    }
    let start = 0;
    let after;
    if (V('cursor-not-decoded')) {
      // The toolkit's query reader: a regex over the raw query string (ids need no decoding...).
      const raw = /(?:^|[?&])starting_after=([^&]*)/.exec(url.search);
      after = raw ? raw[1] : null;
      if (after !== null && !after.startsWith('txn_')) {
        try {
          const dec = Buffer.from(after, 'base64').toString('utf8');
          after = /^txn_[0-9A-Z]+:\d+$/.test(dec) ? dec.split(':')[0] : '\u0000invalid';
        } catch {
          after = '\u0000invalid';
        }
      }
    } else {
      after = url.searchParams.get('starting_after');
    }
    if (after !== null && after !== undefined) {
      let key = null;
      const live = acc.txns.find((x) => x.id === after);
      if (live) key = { date: live.date, seq: live.seq };
      else if (acc.tombstones.has(after)) key = acc.tombstones.get(after);
      if (!key) return fail(res, 400, 'invalid_cursor', 'starting_after does not name a transaction of this account.');
      start = acc.txns.findIndex((x) => sortKeyCmp(key, x) < 0);
      if (start < 0) start = acc.txns.length;
    }
    const items = acc.txns.slice(start, start + limit);
    const hasMore = start + limit < acc.txns.length;
    const page = { data: items.map(txnView), has_more: hasMore };
    if (hasMore) {
      const last = items[items.length - 1];
      page.next_cursor = V('cursor-not-decoded') ? Buffer.from(`${last.id}:${last.seq}`).toString('base64') : last.id;
    }
    if (V('concurrent-page-mixup')) {
      // The page is parked in the module-level read buffer while the audit record is written.
      pageBuffer = page;
      await auditWrite(client.id, acc.id);
      return remember(acc.connectionId, send(res, 200, pageBuffer, cacheHeaders));
    }
    return remember(acc.connectionId, send(res, 200, page, cacheHeaders));
  }
  return fail(res, 404, 'not_found', 'No such endpoint.');
}
let pageBuffer = null;
function auditWrite() {
  return new Promise((r) => setTimeout(r, 2 + crypto.randomInt(0, 25)));
}

// ---------------------------------------------------------------------------------------------
// Widget
function widgetScript(baseUrl) {
  const baseLine = V('widget-current-script')
    ? "var BASE = new URL(document.currentScript.src).origin;"
    : `var BASE = ${JSON.stringify(baseUrl)};`;
  const sessionUrl = V('widget-relative-url') ? "'/widget/session'" : "BASE + '/widget/session'";
  const submitUrl = V('widget-relative-url') ? "'/widget/submit'" : "BASE + '/widget/submit'";
  const body = `
  ${baseLine}
  function el(tag, text) { var e = document.createElement(tag); if (text) e.textContent = text; return e; }
  function normalise(a, b, c) {
    if (a && typeof a === 'object') return { token: a.token, connectionId: a.connectionId, onSuccess: a.onSuccess, onExit: a.onExit };
    return { token: a, connectionId: b, onSuccess: c };
  }
  function postJson(url, payload) {
    return fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(payload) })
      .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error((j && j.error && j.error.message) || ('HTTP ' + r.status)); return j; }); });
  }
  function openWidget(base, a, b, c) {
    var o = normalise(a, b, c);
    if (typeof o.token !== 'string' || typeof o.connectionId !== 'string') {
      throw new TypeError('${SERVICE}Connect.open: token and connectionId are required');
    }
    var root = el('div');
    root.setAttribute('role', 'dialog');
    root.setAttribute('aria-label', 'Connect your bank');
    root.style.cssText = 'position:fixed;inset:10% 30%;background:#fff;border:1px solid #ccc;padding:16px;font:14px sans-serif;z-index:2147483647';
    root.appendChild(el('p', 'Connecting to your bank…'));
    (document.body || document.documentElement).appendChild(root);
    postJson(${sessionUrl}, { token: o.token, connectionId: o.connectionId })
      .then(function (session) {
        root.textContent = '';
        root.appendChild(el('h2', session.institution ? session.institution.name : 'Your bank'));
        var user = el('input'); user.placeholder = 'Identifiant';
        var pass = el('input'); pass.type = 'password'; pass.placeholder = 'Mot de passe';
        var go = el('button', 'Se connecter');
        root.appendChild(user); root.appendChild(pass); root.appendChild(go);
        go.addEventListener('click', function () {
          postJson(${submitUrl}, { token: o.token, connectionId: o.connectionId, username: user.value, password: pass.value })
            .then(function (r) {
              if (r.status === 'CONNECTED') {
                root.remove();
                if (typeof o.onSuccess === 'function') o.onSuccess({ connectionId: o.connectionId, institution: session.institution, accounts: r.accounts });
              } else {
                root.appendChild(el('p', 'Status: ' + r.status));
              }
            })
            .catch(function (e) { root.appendChild(el('p', 'Error: ' + e.message)); });
        });
      })
      .catch(function (e) { root.textContent = 'Unable to open the bank connection: ' + e.message; });
    return { close: function () { root.remove(); } };
  }`;
  let expose;
  if (V('widget-class-instance')) {
    expose = `
  function TallyConnectWidget(base) { this._base = base; this.version = '2.3.0'; }
  TallyConnectWidget.prototype.open = function (a, b, c) { return openWidget(this._base, a, b, c); };
  window.TallyConnect = new TallyConnectWidget(BASE);`;
  } else {
    expose = `
  window.TallyConnect = { version: '2.3.0', open: function (a, b, c) { return openWidget(BASE, a, b, c); } };`;
  }
  if (V('widget-domready-only')) {
    return `/* tallybook connect widget */\n(function () {\n  document.addEventListener('DOMContentLoaded', function () {${body}${expose}\n  });\n})();\n`;
  }
  return `/* tallybook connect widget */\n(function () {${body}${expose}\n})();\n`;
}
const WIDGET_CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
  'Cross-Origin-Resource-Policy': 'cross-origin',
};
const SCRIPT_HASHED = '/widget/tally-connect.7f3a9c1e.js';
async function handleWidget(req, res, url) {
  const path = url.pathname;
  if (req.method === 'OPTIONS') {
    res.writeHead(204, WIDGET_CORS);
    return res.end();
  }
  if (path === `/widget/${SERVICE}-connect.js` && req.method === 'GET') {
    if (V('script-redirect')) {
      res.writeHead(302, { Location: SCRIPT_HASHED, 'Cache-Control': 'no-cache', ...WIDGET_CORS });
      return res.end();
    }
    res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-cache', ...WIDGET_CORS });
    return res.end(widgetScript(baseUrlOf(req)));
  }
  if (path === SCRIPT_HASHED && V('script-redirect') && req.method === 'GET') {
    res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=31536000, immutable', ...WIDGET_CORS });
    return res.end(widgetScript(baseUrlOf(req)));
  }
  if ((path === '/widget/session' || path === '/widget/submit') && req.method === 'POST') {
    const b = parseJson(await readBody(req)) || {};
    const connId = tokens.get(b.token);
    const conn = connId && connections.get(connId);
    const sendW = (status, obj) => {
      res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', ...WIDGET_CORS });
      res.end(JSON.stringify(obj));
    };
    if (!conn || conn.id !== b.connectionId || conn.tokenExpires < Date.now()) {
      return sendW(401, { error: { code: 'invalid_widget_token', message: 'The widget session is not valid.' } });
    }
    const inst = INSTITUTIONS[conn.ordinal % INSTITUTIONS.length];
    if (path === '/widget/session') {
      return sendW(200, { connectionId: conn.id, status: conn.status.toUpperCase(), institution: institutionView(inst, baseUrlOf(req)) });
    }
    const action = b.password === 'wrong' ? 'fail_auth' : b.username === 'mfa' ? 'require_mfa' : 'connect';
    act(conn, action, {});
    return sendW(200, { connectionId: conn.id, status: conn.status.toUpperCase(), accounts: conn.accountIds.length });
  }
  res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8', ...WIDGET_CORS });
  res.end(JSON.stringify({ error: { code: 'not_found', message: 'No such widget resource.' } }));
}
// 1x1 PNG for the logo-url variant
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

// ---------------------------------------------------------------------------------------------
// Admin (driver) routes
async function handleAdmin(req, res, url) {
  if (!ADMIN_TOKEN || req.headers['x-tally-admin'] !== ADMIN_TOKEN) return fail(res, 403, 'forbidden', 'Admin token required.');
  const body = parseJson(await readBody(req)) || {};
  if (url.pathname === '/_admin/webhooks') {
    const a = authenticate(req);
    if (a.error) return fail(res, 401, a.error[0], a.error[1]);
    if (req.method === 'POST') {
      a.client.webhookUrl = body.url;
      drain(a.client);
      return send(res, 200, { clientId: a.client.id, url: body.url });
    }
    if (req.method === 'DELETE') {
      a.client.webhookUrl = null;
      a.client.outbox.length = 0;
      return send(res, 200, { clientId: a.client.id, url: null });
    }
    return fail(res, 405, 'method_not_allowed', 'POST or DELETE.');
  }
  const m = /^\/_admin\/connections\/([^/]+)\/([a-z_]+)$/.exec(url.pathname);
  if (m && req.method === 'POST') {
    const conn = connections.get(decodeURIComponent(m[1]));
    if (!conn) return fail(res, 404, 'connection_not_found', 'No such connection.');
    const r = act(conn, m[2], body);
    if (r === undefined) return fail(res, 501, 'unknown_action', 'Unknown action.');
    if (r === null) return fail(res, 409, 'refused', `Refused from ${conn.status}.`);
    return send(res, 200, { status: conn.status.toUpperCase(), ...r });
  }
  return fail(res, 404, 'not_found', 'No such admin route.');
}

// ---------------------------------------------------------------------------------------------
const server = http.createServer(async (req, res) => {
  if (process.env.TALLY_LOG) console.error(`${new Date().toISOString()} ${req.method} ${req.url} origin=${req.headers.origin || '-'}`);
  try {
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname.startsWith('/v1/')) return await handleApi(req, res, url);
    if (url.pathname.startsWith('/widget/')) return await handleWidget(req, res, url);
    if (url.pathname.startsWith('/_admin/')) return await handleAdmin(req, res, url);
    if (url.pathname.startsWith('/static/institutions/') && req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'image/png', 'Access-Control-Allow-Origin': '*' });
      return res.end(PNG);
    }
    return fail(res, 404, 'not_found', 'No such resource.');
  } catch (e) {
    console.error(e);
    if (!res.headersSent) fail(res, 500, 'internal', 'Internal error.');
    else res.destroy();
  }
});
server.keepAliveTimeout = 5000;
server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
  console.error(`tallybook listening on 127.0.0.1:${server.address().port}, variant ${VARIANT}`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
