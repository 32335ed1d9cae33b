'use strict';
// bankconf driver (docs/driver.md): one action per run, taken from BANKCONF_ACTION, forwarded to
// the server's test hook.  Usage: node driver.js --admin http://127.0.0.1:PORT/__admin/action
// Exit: 0 accepted, 3 the server cannot do it, 4 refused from the current state, 1 failure.
const http = require('http');

const i = process.argv.indexOf('--admin');
const adminUrl = i >= 0 ? process.argv[i + 1] : process.env.ADMIN_URL;
const env = process.env;
const action = env.BANKCONF_ACTION;

function fail(code, msg) {
  process.stderr.write(`driver: ${action}: ${msg}\n`);
  process.exit(code);
}
if (!adminUrl) fail(1, 'no --admin URL given');
if (!action) fail(1, 'BANKCONF_ACTION is not set');

const body = JSON.stringify({
  action,
  connectionId: env.BANKCONF_CONNECTION_ID || undefined,
  accountId: env.BANKCONF_ACCOUNT_ID || undefined,
  transactionId: env.BANKCONF_TRANSACTION_ID || undefined,
  apiKey: env.BANKCONF_API_KEY || undefined,
  secondApiKey: env.BANKCONF_SECOND_API_KEY || undefined,
  webhookUrl: env.BANKCONF_WEBHOOK_URL || undefined,
  secondWebhookUrl: env.BANKCONF_SECOND_WEBHOOK_URL || undefined,
});

const u = new URL(adminUrl);
const req = http.request({
  host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
  headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
  timeout: 20000,
}, (res) => {
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (c) => { text += c; });
  res.on('end', () => {
    let j = {};
    try { j = JSON.parse(text); } catch { /* keep the raw text */ }
    const msg = (j && (j.message || j.error)) || text;
    if (res.statusCode === 200) {
      if (action === 'register_webhook') process.stdout.write('webhooks=per-client\n');
      process.exit(0);
    }
    if (res.statusCode === 409) fail(4, `refused: ${msg}`);
    if (res.statusCode === 501) fail(3, `not supported: ${msg}`);
    fail(1, `HTTP ${res.statusCode}: ${msg}`);
  });
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (e) => fail(1, `cannot reach ${u.origin}: ${e.message}`));
req.end(body);
