#!/usr/bin/env node
// foreign-21 driver: bankconf runs it once per action (BANKCONF_ACTION and friends in the
// environment, docs/driver.md) and it forwards the action to server.js's admin endpoint:
//
//   node driver.js --admin http://127.0.0.1:PORT/__admin/action
//
// Keys never leave this process: a registration names its client by the SHA-256 of the key.
// Exit: 0 accepted, 3 the server cannot do it (404/501), 4 refused from the current state (409),
// 1 anything else (with a message on stderr).
'use strict';

const crypto = require('crypto');

function fail(code, msg) {
  process.stderr.write(`driver.js: ${msg}\n`);
  process.exit(code);
}

let admin = process.env.FOREIGN_ADMIN_URL || '';
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--admin' && i + 1 < argv.length) admin = argv[++i];
  else if (argv[i].startsWith('--admin=')) admin = argv[i].slice(8);
  else fail(1, `unknown argument ${argv[i]}`);
}
if (!admin) fail(1, 'usage: driver.js --admin URL');

const env = process.env;
const action = env.BANKCONF_ACTION;
if (!action) fail(1, 'BANKCONF_ACTION is not set');

const hash = (k) => crypto.createHash('sha256').update(k).digest('hex');
const body = { action };

if (action === 'register_webhook' || action === 'unregister_webhook') {
  const regs = [];
  if (env.BANKCONF_API_KEY) {
    regs.push({ keyHash: hash(env.BANKCONF_API_KEY), url: env.BANKCONF_WEBHOOK_URL || null });
  }
  if (env.BANKCONF_SECOND_API_KEY) {
    // The second client's events go to the second address; without one they go nowhere.
    regs.push({ keyHash: hash(env.BANKCONF_SECOND_API_KEY), url: env.BANKCONF_SECOND_WEBHOOK_URL || null });
  }
  if (action === 'register_webhook') {
    if (!regs.length || !regs[0].url) fail(1, 'register_webhook needs BANKCONF_API_KEY and BANKCONF_WEBHOOK_URL');
    body.webhooks = regs.filter((r) => r.url);
  } else {
    body.webhooks = regs;
  }
} else {
  if (env.BANKCONF_CONNECTION_ID) body.connectionId = env.BANKCONF_CONNECTION_ID;
  if (env.BANKCONF_ACCOUNT_ID) body.accountId = env.BANKCONF_ACCOUNT_ID;
  if (env.BANKCONF_TRANSACTION_ID) body.transactionId = env.BANKCONF_TRANSACTION_ID;
}

(async () => {
  let res;
  let text = '';
  try {
    res = await fetch(admin, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(25000),
    });
    text = await res.text();
  } catch (e) {
    fail(1, `${action}: admin endpoint unreachable: ${e && e.message}`);
  }
  const short = text.slice(0, 500);
  if (res.status >= 200 && res.status < 300) {
    if (action === 'register_webhook') {
      try {
        const j = JSON.parse(text);
        if (j && j.webhooks === 'per-client') process.stdout.write('webhooks=per-client\n');
      } catch (e) {
        /* nothing to say */
      }
    }
    process.exit(0);
  }
  if (res.status === 409) fail(4, `${action} refused from the current state: ${short}`);
  if (res.status === 404 || res.status === 501) fail(3, `${action} cannot be done: ${res.status} ${short}`);
  fail(1, `${action}: admin endpoint answered ${res.status}: ${short}`);
})();
