'use strict';
// bankconf driver (docs/driver.md): one action per call, BANKCONF_ACTION says which.
// Usage: node driver.js ADMIN_URL
// Exit 0 accepted, 3 cannot, 4 refused from the current state, 1 failure.
const http = require('http');
const admin = process.argv[2];
const env = process.env;
const action = env.BANKCONF_ACTION || '';

function call(path, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(path, admin);
    const data = JSON.stringify(body);
    const req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) }, timeout: 20000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error('admin call timed out')));
    req.on('error', reject);
    req.end(data);
  });
}

async function main() {
  if (!admin) { process.stderr.write('usage: node driver.js ADMIN_URL\n'); return 1; }
  let r;
  switch (action) {
    case 'register_webhook':
      r = await call('/admin/webhooks', { apiKey: env.BANKCONF_API_KEY, url: env.BANKCONF_WEBHOOK_URL,
        secondApiKey: env.BANKCONF_SECOND_API_KEY || null, secondUrl: env.BANKCONF_SECOND_WEBHOOK_URL || null });
      if (r.status === 200) { process.stdout.write('webhooks=per-client\n'); return 0; }
      break;
    case 'unregister_webhook':
      r = await call('/admin/webhooks/unregister', { apiKey: env.BANKCONF_API_KEY, secondApiKey: env.BANKCONF_SECOND_API_KEY || null });
      if (r.status === 200) return 0;
      break;
    case 'connect': case 'fail_auth': case 'require_mfa': case 'error': case 'disconnect':
    case 'update_accounts': case 'delete_transaction':
      r = await call('/admin/actions', { action, connectionId: env.BANKCONF_CONNECTION_ID || '',
        accountId: env.BANKCONF_ACCOUNT_ID || null, transactionId: env.BANKCONF_TRANSACTION_ID || null });
      if (r.status === 202 || r.status === 200) return 0;
      if (r.status === 409) { process.stderr.write('refused: ' + r.body + '\n'); return 4; }
      if (r.status === 501) { process.stderr.write('cannot: ' + r.body + '\n'); return 3; }
      break;
    default:
      process.stderr.write('unknown action ' + action + '\n');
      return 3;
  }
  process.stderr.write('admin answered ' + r.status + ': ' + r.body + '\n');
  return 1;
}

main().then((c) => process.exit(c), (e) => { process.stderr.write('driver error: ' + e.message + '\n'); process.exit(1); });
