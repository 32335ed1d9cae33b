// Evidence for the widget variants (not a conformance test): loads the widget script in headless
// Chromium on a page of another origin (about:blank), calls open({token, connectionId, onSuccess})
// and prints what onSuccess received and how the global is defined.
// Usage: node --experimental-websocket widget-check.mjs BASE TOKEN CONNECTION_ID
import { spawn } from "node:child_process";

const [base, token, connectionId] = process.argv.slice(2);
const chrome = spawn("chromium-headless-shell", [
  "--headless", "--no-sandbox", "--remote-debugging-port=0", "--user-data-dir=/tmp/wire-chrome-" + process.pid,
  "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });

const wsUrl = await new Promise((resolve, reject) => {
  let buf = "";
  chrome.stderr.on("data", (d) => {
    buf += d;
    const m = buf.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  setTimeout(() => reject(new Error("no devtools")), 15000);
});
const port = new URL(wsUrl).port;
const pages = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = pages.find((p) => p.type === "page");
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener("open", r));
let id = 0;
const pending = new Map();
ws.addEventListener("message", (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
});
const send = (method, params) => new Promise((r) => { const i = ++id; pending.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });

const expr = `new Promise((resolve) => {
  const s = document.createElement('script');
  s.src = ${JSON.stringify(base)} + '/widget/wire-connect.js';
  s.onerror = () => resolve({error: 'script did not load'});
  s.onload = () => {
    const desc = Object.getOwnPropertyDescriptor(window, 'WireConnect');
    const g = window.WireConnect;
    const keys = Object.keys(window).filter((k) => /connect/i.test(k));
    if (!g) { resolve({error: 'no global', keys}); return; }
    g.open({token: ${JSON.stringify(token)}, connectionId: ${JSON.stringify(connectionId)},
      onSuccess: function () {
        resolve({argc: arguments.length, arg0: arguments[0] === undefined ? 'undefined' : JSON.stringify(arguments[0]),
                 thisLastResult: JSON.stringify(this && this.lastResult), enumerable: desc.enumerable,
                 typeofGlobal: typeof g, enumerableGlobalsMatchingConnect: keys});
      }});
  };
  document.head.appendChild(s);
  setTimeout(() => resolve({error: 'onSuccess not called within 20 s'}), 20000);
})`;
const res = await send("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true });
console.log(JSON.stringify(res.result && res.result.result ? res.result.result.value : res, null, 1));
ws.close();
chrome.kill("SIGKILL");
process.exit(0);
