#!/usr/bin/env node
// foreign-23 driver: bankconf runs it once per action (BANKCONF_ACTION); it POSTs the action to
// the server's loopback admin endpoint and exits 0 (accepted), 3 (cannot), 4 (refused from the
// current state) or 1 (failed). It never prints keys or widget tokens.
'use strict';
const http = require('http');

const i = process.argv.indexOf('--admin');
const admin = i >= 0 ? process.argv[i + 1] : process.env.FOREIGN_ADMIN_URL;
const env = process.env;
const action = env.BANKCONF_ACTION || '';

function fail(code, msg) {
  process.stderr.write(`driver: ${action}: ${msg}\n`);
  process.exit(code);
}
if (!admin) fail(1, 'no --admin URL');
if (!action) fail(1, 'BANKCONF_ACTION is not set');

const body = { action };
const map = {
  connectionId: 'BANKCONF_CONNECTION_ID', accountId: 'BANKCONF_ACCOUNT_ID', transactionId: 'BANKCONF_TRANSACTION_ID',
  apiKey: 'BANKCONF_API_KEY', secondApiKey: 'BANKCONF_SECOND_API_KEY',
  webhookUrl: 'BANKCONF_WEBHOOK_URL', secondWebhookUrl: 'BANKCONF_SECOND_WEBHOOK_URL',
};
for (const [k, e] of Object.entries(map)) if (env[e]) body[k] = env[e];

const payload = Buffer.from(JSON.stringify(body));
const u = new URL(admin);
const req = http.request({
  hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST',
  headers: { 'Content-Type': 'application/json', 'Content-Length': payload.length },
  timeout: 25000,
}, (res) => {
  const chunks = [];
  res.on('data', (c) => chunks.push(c));
  res.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8').slice(0, 300);
    const s = res.statusCode;
    if (s === 200) {
      if (action === 'register_webhook') process.stdout.write('webhooks=per-client\n');
      process.exit(0);
    }
    if (s === 409) fail(4, `refused by the server: ${text}`);
    if (s === 501) fail(3, `the server cannot do this action: ${text}`);
    fail(1, `admin endpoint answered ${s}: ${text}`);
  });
});
req.on('timeout', () => { req.destroy(new Error('timed out')); });
req.on('error', (e) => fail(1, `admin endpoint unreachable: ${e.message}`));
req.end(payload);
