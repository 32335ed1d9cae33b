#!/usr/bin/env node
// Conformance driver: node driver.js --admin http://127.0.0.1:PORT/__admin/action
// Run once per action with BANKCONF_ACTION and friends in the environment (docs/driver.md).
// Exit 0: accepted; 3: the server cannot do this action; 4: refused from the current state;
// 1: the driver or the server failed. Prints nothing but `webhooks=per-client` after
// register_webhook. Never prints keys or widget tokens.
'use strict';

const http = require('http');

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const admin = arg('admin') || process.env.FOREIGN_ADMIN_URL;
const env = process.env;
const action = env.BANKCONF_ACTION;

function die(code, message) {
  if (message) process.stderr.write(`driver.js: ${message}\n`);
  process.exit(code);
}

if (!admin) die(1, 'missing --admin URL');
if (!action) die(1, 'BANKCONF_ACTION is not set');

const body = { action };
const copy = [
  ['connectionId', 'BANKCONF_CONNECTION_ID'], ['accountId', 'BANKCONF_ACCOUNT_ID'],
  ['transactionId', 'BANKCONF_TRANSACTION_ID'], ['webhookUrl', 'BANKCONF_WEBHOOK_URL'],
  ['secondWebhookUrl', 'BANKCONF_SECOND_WEBHOOK_URL'],
];
for (const [field, name] of copy) if (env[name]) body[field] = env[name];
if (action === 'register_webhook' || action === 'unregister_webhook') {
  if (env.BANKCONF_API_KEY) body.apiKey = env.BANKCONF_API_KEY;
  if (env.BANKCONF_SECOND_API_KEY && env.BANKCONF_SECOND_WEBHOOK_URL) body.secondApiKey = env.BANKCONF_SECOND_API_KEY;
}

const payload = JSON.stringify(body);
const u = new URL(admin);
const req = http.request({
  hostname: u.hostname, port: u.port || 80, path: u.pathname + u.search, method: 'POST', timeout: 25000,
  headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
}, (res) => {
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (c) => { if (text.length < 2048) text += c; });
  res.on('end', () => {
    const s = res.statusCode;
    if (s >= 200 && s < 300) {
      if (action === 'register_webhook') {
        try {
          const j = JSON.parse(text);
          if (j.webhooks) process.stdout.write(`webhooks=${j.webhooks}\n`);
        } catch { /* nothing said */ }
      }
      process.exit(0);
    }
    if (s === 409) die(4, `refused from the current state: ${text.slice(0, 300)}`);
    if (s === 501) die(3, `not supported: ${text.slice(0, 300)}`);
    die(1, `admin endpoint answered ${s}: ${text.slice(0, 300)}`);
  });
});
req.on('timeout', () => req.destroy(new Error('timed out')));
req.on('error', (e) => die(1, `cannot reach the admin endpoint: ${e.message}`));
req.end(payload);
