'use strict';
// Quick evidence for one variant (not a conformance test): starts server.js with
// the variant, plays one scenario with both clients and prints what it saw.
// Usage: node verify.js VARIANT
const http = require('http');
const { spawn } = require('child_process');
const path = require('path');

const variant = process.argv[2] || 'plain';
const K1 = 'finlink_verifyone0000000000000001';
const K2 = 'finlink_verifytwo0000000000000002';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const events = { c1: [], c2: [] };

function req(method, url, key, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const data = body ? JSON.stringify(body) : '';
    const headers = { Accept: 'application/json' };
    if (key) headers.Authorization = 'Bearer ' + key;
    if (data) { headers['Content-Type'] = 'application/json'; headers['Content-Length'] = Buffer.byteLength(data); }
    const r = http.request({ hostname: u.hostname, port: u.port, path: u.pathname + u.search, method, headers }, (res) => {
      const ch = [];
      res.on('data', (c) => ch.push(c));
      res.on('end', () => {
        const text = Buffer.concat(ch).toString('utf8');
        let json = null; try { json = JSON.parse(text); } catch (e) { /* not json */ }
        resolve({ status: res.statusCode, json, text });
      });
    });
    r.on('error', reject);
    r.end(data);
  });
}

async function waitEvent(where, pred, ms) {
  const end = Date.now() + (ms || 6000);
  while (Date.now() < end) {
    const e = events[where].find(pred);
    if (e) return e;
    await sleep(20);
  }
  return null;
}

async function walk(B, key, accId, limit) {
  const seen = [];
  let cursor = null;
  for (let i = 0; i < 100; i++) {
    const r = await req('GET', `${B}/v1/accounts/${accId}/transactions?limit=${limit}` + (cursor ? '&starting_after=' + encodeURIComponent(cursor) : ''), key);
    seen.push(...r.json.data.map((t) => t.id));
    if (!r.json.has_more) break;
    cursor = r.json.next_cursor;
  }
  return seen;
}

async function main() {
  const recv = http.createServer((rq, rs) => {
    const ch = [];
    rq.on('data', (c) => ch.push(c));
    rq.on('end', () => {
      try { events[rq.url.slice(1)].push(JSON.parse(Buffer.concat(ch).toString('utf8'))); } catch (e) { /* ignore */ }
      rs.writeHead(204); rs.end();
    });
  });
  await new Promise((r) => recv.listen(0, '127.0.0.1', r));
  const R = 'http://127.0.0.1:' + recv.address().port;
  const srv = spawn('node', [path.join(__dirname, 'server.js'), '--port', '0', '--variant', variant, '--service', 'finlink'],
    { env: Object.assign({}, process.env, { FOREIGN_API_KEYS: K1 + ',' + K2 }), stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  await new Promise((r) => srv.stdout.on('data', (d) => { out += d; if (out.split('\n').length > 2) r(); }));
  const [B, A] = out.trim().split('\n');
  const act = (action, connectionId, extra) => req('POST', A + '/admin/actions', null, Object.assign({ action, connectionId }, extra || {}));
  const say = (k, v) => console.log(`${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
  try {
    await req('POST', A + '/admin/webhooks', null, { apiKey: K1, url: R + '/c1', secondApiKey: K2, secondUrl: R + '/c2' });
    const bad = await req('POST', B + '/v1/connections', 'finlink_notakey000', null);
    const ca = (await req('POST', B + '/v1/connections', K1)).json;
    const cb = (await req('POST', B + '/v1/connections', K2)).json;
    const cc = (await req('POST', B + '/v1/connections', K1)).json;
    say('create', ca);
    await sleep(300);
    const createdIds = events.c1.filter((e) => e.type === 'connection.created').map((e) => e.data.connectionId);
    say('refused create -> status', bad.status);
    say('connection.created events at c1 for connections c1 never got', createdIds.filter((x) => x !== ca.connectionId && x !== cc.connectionId).length);

    await act('require_mfa', cc.connectionId);
    await waitEvent('c1', (e) => e.type === 'connection.mfa_required');
    const mfaAcc = await req('GET', `${B}/v1/connections/${cc.connectionId}/accounts`, K1);
    say('accounts while MFA_REQUIRED -> status', mfaAcc.status);

    await act('connect', ca.connectionId);
    await act('connect', cb.connectionId);
    const conEv = await waitEvent('c1', (e) => e.type === 'connection.connected' && e.data && e.data.connectionId === ca.connectionId);
    const accR = await req('GET', `${B}/v1/connections/${ca.connectionId}/accounts`, K1);
    say('accounts right after connection.connected', accR.status + ' n=' + (Array.isArray(accR.json) ? accR.json.length : '-'));
    await sleep(2800);
    const accs = (await req('GET', `${B}/v1/connections/${ca.connectionId}/accounts`, K1)).json;
    const chain = events.c1.filter((e) => e.data && e.data.connectionId === ca.connectionId && e.type.startsWith('connection.')).map((e) => e.data.previousStatus + '->' + e.type.slice(11));
    say('previousStatus chain of A', chain.join(', '));
    say('eventId==id in all', events.c1.every((e) => !e.data || e.data.eventId === e.id));
    await waitEvent('c2', (e) => e.type === 'connection.connected');
    const cli1 = new Set(events.c1.filter((e) => e.data).map((e) => e.data.clientId));
    const cli2 = new Set(events.c2.filter((e) => e.data).map((e) => e.data.clientId));
    say('clientIds c1 / c2', [...cli1].join(',') + ' / ' + [...cli2].join(','));
    say('short-form deliveries', events.c1.filter((e) => e.event).length);

    const checking = accs[0];
    const card = accs.find((a) => a.type === 'credit_card');
    const full = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=100`, K1)).json.data.map((t) => t.id);
    const walked = await walk(B, K1, checking.id, 7);
    say('full list vs walk(limit 7)', `full=${full.length} walked=${walked.length} distinct=${new Set(walked).size} missing=${full.filter((x) => !walked.includes(x)).length}`);
    const walked19 = await walk(B, K1, checking.id, 19);
    say('walk(limit 19)', `walked=${walked19.length} distinct=${new Set(walked19).size} missing=${full.filter((x) => !walked19.includes(x)).length}`);
    const cardT = (await req('GET', `${B}/v1/accounts/${card.id}/transactions?limit=100`, K1)).json.data;
    say('credit card: positive/negative amounts', cardT.filter((t) => t.amount > 0).length + '/' + cardT.filter((t) => t.amount < 0).length);

    // walk while deleting from the first page
    const p1 = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=10`, K1)).json;
    await act('delete_transaction', ca.connectionId, { accountId: checking.id, transactionId: p1.data[2].id });
    const delEv = await waitEvent('c1', (e) => e.type === 'transaction.deleted' && e.data.transactionId === p1.data[2].id);
    const p2 = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=10&starting_after=${encodeURIComponent(p1.next_cursor)}`, K1)).json;
    const expectFirst = full[10];
    say('page 2 after deleting from page 1 starts at the 11th item', p2.data.length && p2.data[0].id === expectFirst);
    say('transaction.deleted event arrived at c1', !!delEv);
    const after = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=100`, K1)).json.data.map((t) => t.id);
    say('deleted transaction still listed', after.includes(p1.data[2].id));

    // deletion on client 2
    const accsB = (await req('GET', `${B}/v1/connections/${cb.connectionId}/accounts`, K2)).json;
    await act('delete_transaction', cb.connectionId, {});
    await sleep(500);
    say('client 2 transaction.deleted at c2 / c1', events.c2.filter((e) => e.type === 'transaction.deleted').length + ' / ' + events.c1.filter((e) => e.type === 'transaction.deleted' && e.data.connectionId === cb.connectionId).length);

    // update without an account id
    const before = (await req('GET', `${B}/v1/accounts/${checking.id}`, K1)).json;
    await act('update_accounts', ca.connectionId, {});
    const upd = await waitEvent('c1', (e) => e.type === 'accounts.updated');
    say('accounts.updated accountId', upd && upd.data.accountId);
    const one = (await req('GET', `${B}/v1/accounts/${checking.id}`, K1)).json;
    const listed = (await req('GET', `${B}/v1/connections/${ca.connectionId}/accounts`, K1)).json.find((a) => a.id === checking.id);
    say('balance before / GET account / accounts list (right after event)', `${before.balance} / ${one.balance} / ${listed.balance}`);
    const newest = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=100`, K1)).json.data;
    const dates = newest.map((t) => t.transactionDate).filter((d) => !/^\d{4}-\d{2}-\d{2}$/.test(d));
    say('transactionDate values not YYYY-MM-DD', dates);
    say('txn count before/after update', `${after.length} / ${newest.length}`);

    // another deletion, then another update: ids in the list stay distinct?
    await act('delete_transaction', ca.connectionId, { accountId: checking.id });
    await sleep(300);
    await act('update_accounts', ca.connectionId, { accountId: checking.id });
    await sleep(300);
    const ids2 = (await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=100`, K1)).json.data.map((t) => t.id);
    say('ids in the list after delete+update: total / distinct', ids2.length + ' / ' + new Set(ids2).size);

    // cross client
    const x1 = await req('GET', `${B}/v1/accounts/${checking.id}`, K2);
    const x2 = await req('GET', `${B}/v1/accounts/${checking.id}/transactions`, K2);
    const x3 = await req('GET', `${B}/v1/connections/${ca.connectionId}/accounts`, K2);
    say('client 2 reads client 1 account / txns / accounts', `${x1.status} / ${x2.status} / ${x3.status}`);
    say('client 2 accounts n', accsB.length);

    // errors
    const nk = await req('GET', `${B}/v1/accounts/${checking.id}`, null);
    const bl = await req('GET', `${B}/v1/accounts/${checking.id}/transactions?limit=abc`, K1);
    say('no key / bad limit', `${nk.status} ${nk.text.slice(0, 80)} / ${bl.status}`);

    // disconnect
    await act('disconnect', ca.connectionId);
    const dis = await waitEvent('c1', (e) => e.type === 'connection.disconnected', 3000);
    say('connection.disconnected arrived', !!dis);
    const afterDis = await req('GET', `${B}/v1/accounts/${checking.id}`, K1);
    say('account read after disconnect', afterDis.status);

    const jsr = await req('GET', `${B}/widget/finlink-connect.js`);
    const js = jsr.text;
    const pre = await req('OPTIONS', `${B}/widget/v1/session/credentials`);
    say('widget preflight status / allow-origin', pre.status + ' / ' + (pre.text === '' ? 'n/a' : ''));
    say('global assigned synchronously', /\n  window\[/.test(js));
    say('widget script contains a key', js.includes(K1) || js.includes(K2));
  } finally {
    srv.stdin.end();
    recv.close();
    setTimeout(() => process.exit(0), 200);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
