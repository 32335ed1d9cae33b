//! A client's frontend in the browser of [`crate::harness::transport::browser`]: a page of its
//! own origin, holding no key, that loads the widget script (§1 item 2) and calls `open` there,
//! as a client's frontend does; what the browser refused it for CORS, within bounds.

use crate::harness::transport::browser::{harness_error, PageHeaders, Session, PROBE_TIMEOUT};
use crate::harness::transport::probe::{Loads, GLOBAL_WAIT, PAGE_TIMEOUT, SETTLE_CAP};
use crate::harness::vocab::errors::CdpError;
use crate::harness::vocab::outcome::Stop;
use serde::Deserialize;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// A client's frontend, as the browser sees one: a page with no credentials, served from a
/// loopback port of its own (another origin than the service's; a `data:` page would be a
/// public context, which the browser keeps from loading a loopback target's script).
const ELSEWHERE_PAGE: &str = "<!doctype html><title>a client's frontend</title>";

/// How many of the requests the page's own origin received beyond its page are kept.
const ASKED_KEPT: usize = 8;

/// What the page's own origin was asked for beyond the page itself (and the icon a browser asks
/// for on its own): each request's method and path, query left out (it may carry the widget
/// token), at most [`ASKED_KEPT`].
#[derive(Clone, Default)]
struct Asked(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Asked {
    fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Serves [`ELSEWHERE_PAGE`] on 127.0.0.1, port 0, at `/` until aborted; any other path is a
/// 404, as a client's frontend serves nothing of the widget's, and is kept in [`Asked`].
async fn serve_elsewhere() -> std::io::Result<(String, JoinHandle<()>, Asked)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let asked = Asked::default();
    let kept = asked.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let n = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut head)).await;
                let n = n.ok().and_then(Result::ok).unwrap_or(0);
                let line = String::from_utf8_lossy(&head[..n]).lines().next().unwrap_or("").to_string();
                let mut words = line.split(' ');
                let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                let path = target.split(['?', '#']).next().unwrap_or("");
                let answer = match path {
                    "/" | "" | "/favicon.ico" => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ELSEWHERE_PAGE}",
                        ELSEWHERE_PAGE.len()
                    ),
                    _ => {
                        let mut list = kept.0.lock().unwrap_or_else(|e| e.into_inner());
                        let query = if target.len() > path.len() { " (query left out)" } else { "" };
                        if list.len() < ASKED_KEPT {
                            list.push(format!("{method} {path}{query}"));
                        }
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
                    }
                };
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok((url, task, asked))
}

/// The page's server, ended when dropped: with the call that serves it, however it ends.
struct Ends(JoinHandle<()>);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Adds `<script src>` to the page and answers whether it loaded (`__SRC__` replaced).
const LOAD_JS: &str = r#"new Promise((done) => {
  const s = document.createElement("script");
  s.src = __SRC__;
  s.onload = () => done(true);
  s.onerror = () => done(false);
  (document.head || document.documentElement).appendChild(s);
})"#;

impl Session {
    /// Whether a page of another origin, holding no key, loads `src` with a plain
    /// `<script src>` (§1 item 2: the client's frontend loads the widget).
    /// Its requests to the target's origin carry `headers` (the run's `--header`); the page's
    /// own origin never sees them.
    pub async fn loads_elsewhere(&self, src: &str, headers: &PageHeaders) -> Result<bool, Stop> {
        let run = async {
            let browser_error = |e: CdpError| harness_error(format!("the browser: {e}"));
            let (home, server, _) =
                serve_elsewhere().await.map_err(|e| harness_error(format!("a page of another origin: {e}")))?;
            let _server = Ends(server);
            let page = self.page_sending(&home, headers).await.map_err(browser_error)?;
            let quoted = serde_json::Value::from(src).to_string();
            let result = page.evaluate::<bool>(&LOAD_JS.replace("__SRC__", &quoted)).await;
            page.close().await;
            result.map_err(|e| match e {
                CdpError::Odd { reason, .. } => harness_error(format!("the browser's load answered oddly: {reason}")),
                e => browser_error(e),
            })
        };
        tokio::time::timeout(PROBE_TIMEOUT, run).await.map_err(|_| {
            harness_error(format!(
                "the browser did not finish loading {src} from another origin within {PROBE_TIMEOUT:?}"
            ))
        })?
    }
}

/// What a page of another origin saw when it loaded the script and called `open`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Opened {
    /// The script loaded and a global with an `open` function appeared.
    pub found: bool,
    /// `open` returned without throwing, in either form.
    pub called: bool,
    /// The widget's requests the browser refused for CORS: each URL with the browser's reason.
    pub blocked: Vec<String>,
    /// What the bounds left out: refusals past those kept, requests still loading at the end.
    pub cut: Vec<String>,
    /// What the page's own origin was asked for beyond its page (method and path): a request
    /// the widget sent there, a URL it resolved against the client's page, not the service.
    pub asked_page_origin: Vec<String>,
}

/// Loads the script in the page, then calls `open` as [`PROBE_JS`](super::probe) does (the
/// object form, then the positional one), with `__ARGS__` replaced by `[src, token,
/// connectionId]`; waits up to 1.5 s after `open` (0.2 s once `onSuccess` came).
const OPEN_JS: &str = r#"(async () => {
  const [src, token, connectionId] = __ARGS__;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const before = new Set(Object.getOwnPropertyNames(window));
  window.addEventListener("unhandledrejection", (e) => e.preventDefault());
  const loaded = await new Promise((done) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = () => done(true);
    s.onerror = () => done(false);
    (document.head || document.documentElement).appendChild(s);
  });
  const openOf = (n) => { try { const v = window[n]; return v !== null && (typeof v === "object" || typeof v === "function") ? v.open : undefined; } catch (_) { return undefined; } };
  let global = null;
  for (const end = Date.now() + __GLOBAL_MS__; loaded; ) {
    global = Object.getOwnPropertyNames(window).filter((n) => !before.has(n)).find((n) => typeof openOf(n) === "function") || null;
    if (global || Date.now() >= end) break;
    await sleep(100);
  }
  let called = false, succeeded = false;
  if (global) {
    const api = window[global];
    const onSuccess = () => { succeeded = true; };
    for (const args of [[{ token, connectionId, onSuccess }], [token, connectionId, onSuccess]]) {
      try { const r = api.open.apply(api, args); if (r && typeof r.then === "function") r.then(null, () => {}); called = true; break; }
      catch (_) {}
    }
    for (let i = 0; i < 15 && called && !succeeded; i++) await sleep(100);
    if (called) await sleep(200);
  }
  return { found: global !== null, called };
})()"#;

impl Session {
    /// A page of another origin, holding no key, loads `src`, calls `open` with `token` and
    /// `connection` (§1 item 2: the client's frontend opens the widget), and waits until its
    /// requests settle as the probe's do; what the browser refused it for CORS is kept.
    /// Its requests to the target's origin carry `headers` (the run's `--header`).
    pub(crate) async fn opens_elsewhere(
        &self,
        src: &str,
        (token, connection): (&str, &str),
        headers: &PageHeaders,
    ) -> Result<Opened, Stop> {
        let run = async {
            let browser_error = |e: CdpError| harness_error(format!("the browser: {e}"));
            let (home, server, asked) =
                serve_elsewhere().await.map_err(|e| harness_error(format!("a page of another origin: {e}")))?;
            let _server = Ends(server);
            let page = self.page_sending(&home, headers).await.map_err(browser_error)?;
            let loads = Loads::watch(&page);
            let args = serde_json::json!([src, token, connection]).to_string();
            #[derive(Deserialize)]
            struct Seen {
                found: bool,
                called: bool,
            }
            let seen = page
                .evaluate::<Seen>(
                    &OPEN_JS.replace("__ARGS__", &args).replace("__GLOBAL_MS__", &GLOBAL_WAIT.as_millis().to_string()),
                )
                .await;
            let unsettled = loads.settle(Instant::now() + SETTLE_CAP).await;
            page.close().await;
            let seen = seen.map_err(|e| match e {
                CdpError::Odd { reason, .. } => harness_error(format!("the browser's open answered oddly: {reason}")),
                e => browser_error(e),
            })?;
            let blocked = loads.blocked.lock().unwrap_or_else(|e| e.into_inner());
            let mut cut = Vec::new();
            if blocked.over > 0 {
                cut.push(format!("{} more request(s) refused for CORS, past those kept", blocked.over));
            }
            if let Some(loading) = unsettled {
                cut.push(format!("{loading} request(s) of the page still loading at the end, never read"));
            }
            let asked_page_origin = asked.list();
            Ok(Opened { found: seen.found, called: seen.called, blocked: blocked.list.clone(), cut, asked_page_origin })
        };
        tokio::time::timeout(PAGE_TIMEOUT, run).await.map_err(|_| {
            harness_error(format!(
                "the browser did not finish opening {src} from another origin within {PAGE_TIMEOUT:?}"
            ))
        })?
    }
}
