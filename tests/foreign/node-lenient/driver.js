#!/usr/bin/env node
// The bankconf driver (docs/driver.md, command protocol) for server.js: forwards the action named
// by BANKCONF_ACTION to the server's admin endpoint (argv[2]) and maps its answer to an exit code:
// 2xx -> 0, 409 -> 4 (refused from the current state), 404/501 -> 3 (cannot), else 1.
'use strict';
const http = require('node:http');
const e = process.env;
const adminUrl = new URL(process.argv[2]);
const body = JSON.stringify({
  action: e.BANKCONF_ACTION,
  connectionId: e.BANKCONF_CONNECTION_ID,
  accountId: e.BANKCONF_ACCOUNT_ID,
  transactionId: e.BANKCONF_TRANSACTION_ID,
  webhookUrl: e.BANKCONF_WEBHOOK_URL,
  secondWebhookUrl: e.BANKCONF_SECOND_WEBHOOK_URL,
  apiKey: e.BANKCONF_API_KEY,
  secondApiKey: e.BANKCONF_SECOND_API_KEY,
});
const req = http.request({
  hostname: adminUrl.hostname, port: adminUrl.port, path: adminUrl.pathname, method: 'POST',
  headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }, timeout: 20000,
}, (res) => {
  let raw = '';
  res.on('data', (c) => (raw += c));
  res.on('end', () => {
    const s = res.statusCode;
    if (s >= 200 && s < 300) {
      if (e.BANKCONF_ACTION === 'register_webhook') process.stdout.write('webhooks=per-client\n');
      process.exit(0);
    }
    process.stderr.write(`driver: ${e.BANKCONF_ACTION} answered ${s}: ${raw.slice(0, 300)}\n`);
    process.exit(s === 409 ? 4 : s === 404 || s === 501 ? 3 : 1);
  });
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (err) => { process.stderr.write(`driver: ${err.message}\n`); process.exit(1); });
req.end(body);
