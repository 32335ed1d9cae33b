#!/usr/bin/env node
// bankconf driver (docs/driver.md) for server.js: one action per process, taken from the
// environment (BANKCONF_ACTION, ...), forwarded as one JSON POST to the server's test hook.
// Usage: node driver.js --admin http://127.0.0.1:PORT/__admin/action
// Exit: 0 accepted, 3 the server cannot do it, 4 refused from the current state, 1 otherwise.
// Never prints a key or a widget token.
'use strict';

const http = require('http');

const args = process.argv.slice(2);
const i = args.indexOf('--admin');
const admin = (i >= 0 && args[i + 1]) || process.env.FOREIGN_ADMIN_URL;
const env = process.env;
const action = env.BANKCONF_ACTION;

if (!admin) { process.stderr.write('driver: --admin URL is required\n'); process.exit(1); }
if (!action) { process.stderr.write('driver: BANKCONF_ACTION is not set\n'); process.exit(1); }

const payload = {
  action,
  apiKey: env.BANKCONF_API_KEY || '',
  secondApiKey: env.BANKCONF_SECOND_API_KEY || undefined,
  connectionId: env.BANKCONF_CONNECTION_ID || undefined,
  accountId: env.BANKCONF_ACCOUNT_ID || undefined,
  transactionId: env.BANKCONF_TRANSACTION_ID || undefined,
  webhookUrl: env.BANKCONF_WEBHOOK_URL || undefined,
  secondWebhookUrl: env.BANKCONF_SECOND_WEBHOOK_URL || undefined,
};
const data = Buffer.from(JSON.stringify(payload));
const u = new URL(admin);
const req = http.request({
  hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST',
  headers: { 'Content-Type': 'application/json', 'Content-Length': data.length }, timeout: 20000,
}, (res) => {
  const chunks = [];
  res.on('data', (c) => chunks.push(c));
  res.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    const s = res.statusCode;
    if (s >= 200 && s < 300) {
      if (action === 'register_webhook') process.stdout.write('webhooks=per-client\n');
      process.exit(0);
    }
    process.stderr.write(`driver: ${action} answered ${s}: ${text.slice(0, 300)}\n`);
    if (s === 409) process.exit(4);
    if (s === 501) process.exit(3);
    process.exit(1);
  });
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (e) => { process.stderr.write(`driver: ${action}: ${e.message}\n`); process.exit(1); });
req.end(data);
