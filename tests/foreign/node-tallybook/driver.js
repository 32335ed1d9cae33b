#!/usr/bin/env node
// bankconf command driver for tallybook (docs/driver.md): one action per call, BANKCONF_ACTION.
// Talks to the server's admin routes with TALLY_ADMIN_TOKEN. Exit 0 done, 3 cannot, 4 refused.
'use strict';
const env = process.env;
const base = (env.BANKCONF_BASE_URL || '').replace(/\/$/, '');
const action = env.BANKCONF_ACTION;
const admin = env.TALLY_ADMIN_TOKEN || '';

async function call(method, path, body, key) {
  const headers = { 'Content-Type': 'application/json', 'X-Tally-Admin': admin };
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(base + path, { method, headers, body: JSON.stringify(body || {}), signal: AbortSignal.timeout(20000) });
  const text = await r.text();
  return { status: r.status, text };
}

function exitFor(r) {
  if (r.status >= 200 && r.status < 300) return 0;
  if (r.status === 409) return 4;
  if (r.status === 404 || r.status === 501) return 3;
  process.stderr.write(`driver: ${action} answered ${r.status}: ${r.text.slice(0, 500)}\n`);
  return 1;
}

(async () => {
  if (!base || !action) {
    process.stderr.write('driver: BANKCONF_BASE_URL and BANKCONF_ACTION are required\n');
    process.exit(1);
  }
  if (action === 'register_webhook' || action === 'unregister_webhook') {
    const method = action === 'register_webhook' ? 'POST' : 'DELETE';
    const pairs = [[env.BANKCONF_API_KEY, env.BANKCONF_WEBHOOK_URL]];
    if (env.BANKCONF_SECOND_API_KEY && env.BANKCONF_SECOND_WEBHOOK_URL) pairs.push([env.BANKCONF_SECOND_API_KEY, env.BANKCONF_SECOND_WEBHOOK_URL]);
    let code = 0;
    for (const [key, url] of pairs) {
      const r = await call(method, '/_admin/webhooks', { url }, key);
      code = Math.max(code, exitFor(r));
    }
    if (code === 0 && action === 'register_webhook' && pairs.length === 2) process.stdout.write('webhooks=per-client\n');
    process.exit(code);
  }
  const id = env.BANKCONF_CONNECTION_ID;
  if (!id) {
    process.stderr.write('driver: BANKCONF_CONNECTION_ID is required\n');
    process.exit(1);
  }
  const body = {};
  if (env.BANKCONF_ACCOUNT_ID) body.accountId = env.BANKCONF_ACCOUNT_ID;
  if (env.BANKCONF_TRANSACTION_ID) body.transactionId = env.BANKCONF_TRANSACTION_ID;
  const r = await call('POST', `/_admin/connections/${encodeURIComponent(id)}/${action}`, body);
  process.exit(exitFor(r));
})().catch((e) => {
  process.stderr.write(`driver: ${action} failed: ${e.message}\n`);
  process.exit(1);
});
