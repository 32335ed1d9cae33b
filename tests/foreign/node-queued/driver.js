#!/usr/bin/env node
// bankconf driver for tests/foreign-4/server.js: one process per action (docs/driver.md).
//   node driver.js ADMIN_URL     (BANKCONF_ACTION and friends in the environment)
// exit 0: accepted; 3: the server cannot do it; 4: refused from the current state.
'use strict';
const admin = (process.argv[2] || '').replace(/\/+$/, '');
const env = process.env;
const action = env.BANKCONF_ACTION;

async function call(method, path, body, key) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(admin + path, { method, headers, body: body ? JSON.stringify(body) : undefined, signal: AbortSignal.timeout(20000) });
  const text = await r.text();
  return { status: r.status, text };
}

async function main() {
  if (!admin) { console.error('usage: driver.js ADMIN_URL'); return 2; }
  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const pairs = [[env.BANKCONF_API_KEY, env.BANKCONF_WEBHOOK_URL]];
    if (env.BANKCONF_SECOND_API_KEY && env.BANKCONF_SECOND_WEBHOOK_URL) pairs.push([env.BANKCONF_SECOND_API_KEY, env.BANKCONF_SECOND_WEBHOOK_URL]);
    for (const [key, url] of pairs) {
      const r = action === 'register_webhook' ? await call('POST', '/webhooks', { url }, key) : await call('DELETE', '/webhooks', null, key);
      if (r.status >= 300) { console.error(`${action}: ${r.status} ${r.text}`); return 1; }
    }
    if (action === 'register_webhook') process.stdout.write(pairs.length === 2 ? 'webhooks=per-client\n' : '');
    return 0;
  }
  const id = env.BANKCONF_CONNECTION_ID;
  if (!id) { console.error('BANKCONF_CONNECTION_ID missing'); return 1; }
  const body = {};
  if (env.BANKCONF_ACCOUNT_ID) body.accountId = env.BANKCONF_ACCOUNT_ID;
  if (env.BANKCONF_TRANSACTION_ID) body.transactionId = env.BANKCONF_TRANSACTION_ID;
  const r = await call('POST', `/connections/${encodeURIComponent(id)}/${encodeURIComponent(action || '')}`, body);
  if (r.status >= 200 && r.status < 300) return 0;
  if (r.status === 409) { console.error(`refused: ${r.text}`); return 4; }
  if (r.status === 501) { console.error(`unsupported: ${r.text}`); return 3; }
  console.error(`${action} on ${id}: ${r.status} ${r.text}`);
  return 1;
}
main().then((c) => process.exit(c), (e) => { console.error(String(e)); process.exit(1); });
