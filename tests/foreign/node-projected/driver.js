'use strict';
// bankconf driver: one call per action (BANKCONF_ACTION), forwarded to the server's admin endpoint.
// Usage: node driver.js --admin http://127.0.0.1:PORT/__admin/action
// Exit: 0 accepted, 3 cannot, 4 refused from the current state, 1 driver failure.
const http = require('http');
const args = process.argv.slice(2);
const i = args.indexOf('--admin');
const admin = i >= 0 ? args[i + 1] : process.env.FOREIGN_ADMIN_URL;
if (!admin) { process.stderr.write('driver: --admin URL missing\n'); process.exit(1); }
const e = process.env;
const body = JSON.stringify({
  action: e.BANKCONF_ACTION,
  apiKey: e.BANKCONF_API_KEY,
  secondApiKey: e.BANKCONF_SECOND_API_KEY,
  connectionId: e.BANKCONF_CONNECTION_ID,
  widgetToken: e.BANKCONF_WIDGET_TOKEN,
  accountId: e.BANKCONF_ACCOUNT_ID,
  transactionId: e.BANKCONF_TRANSACTION_ID,
  webhookUrl: e.BANKCONF_WEBHOOK_URL,
  secondWebhookUrl: e.BANKCONF_SECOND_WEBHOOK_URL,
});
if (!e.BANKCONF_ACTION) { process.stderr.write('driver: BANKCONF_ACTION missing\n'); process.exit(1); }
const req = http.request(admin, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
  timeout: 25000,
}, (res) => {
  let d = '';
  res.setEncoding('utf8');
  res.on('data', (c) => { d += c; });
  res.on('end', () => {
    let r;
    try { r = JSON.parse(d); } catch (err) {
      process.stderr.write(`driver: admin answered ${res.statusCode} with non-JSON\n`);
      process.exit(1);
    }
    if (r.stdout && r.stdout.startsWith('webhooks=')) process.stdout.write(r.stdout + '\n');
    if (r.exit !== 0 && r.message) process.stderr.write(`driver: ${e.BANKCONF_ACTION}: ${r.message}\n`);
    process.exit(typeof r.exit === 'number' ? r.exit : 1);
  });
});
req.on('timeout', () => { req.destroy(new Error('timeout')); });
req.on('error', (err) => { process.stderr.write(`driver: admin request failed: ${err.message}\n`); process.exit(1); });
req.end(body);
