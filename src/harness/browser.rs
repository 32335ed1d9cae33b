//! A headless Chromium that runs the widget script (§1 step 2), driven over the DevTools
//! protocol ([`cdp`], on the browser's `--remote-debugging-pipe`). The browser is found, never
//! fetched; one process serves every run of this process that is alive at once (the
//! self-test's runs share it), started on first use and killed when the last run lets go of it.

use super::cdp::{self, Cdp};
use super::errors::{BrowserLaunchError, CdpError};
use super::orphans;
use super::outcome::{ErrorSource, Stop};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// What to tell a user who has no browser.
pub(crate) const INSTALL_HINT: &str = "no browser found: `apt-get install chromium-headless-shell` (Debian/Ubuntu; or \
     `chromium`), Chromium or Chrome on PATH elsewhere, or --browser PATH (--skip-browser leaves these cases out)";

/// Why the browser cases are not judged when `--skip-browser` leaves them out.
pub(crate) const SKIPPED: &str =
    "left out on purpose (--skip-browser): the widget cases that run the script in a browser";

/// Names looked up on PATH, in order.
const NAMES: [&str; 3] = ["chromium", "chromium-headless-shell", "google-chrome"];

/// At least 20 s: a cold Chromium on a loaded machine is slow to answer its first call.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Cap on one probe of the script (navigation, load, grace for the global, the call of `open`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Bounds on what the probe keeps of everything the page receives: responses (frames, fetch,
/// XHR, any load), `postMessage` payloads and `onSuccess` arguments, each cut to
/// [`MAX_RECEIVED_BYTES`], at most [`MAX_RECEIVED_TOTAL`] in all.
const MAX_RECEIVED: usize = 32;
const MAX_RECEIVED_BYTES: usize = 256 * 1024;
const MAX_RECEIVED_TOTAL: usize = 2 * 1024 * 1024;

/// One running browser; dropping it kills the process and waits (briefly) for it to exit, so
/// that its profile can then be removed (fields drop in order: the profile last).
pub struct Session {
    cdp: Cdp,
    process: Process,
    /// Started with `--ignore-certificate-errors` (`--ca-cert`, `--insecure`).
    ignores_certificates: bool,
    /// Held only to be removed once the browser is gone (declared last: dropped last).
    _profile: Profile,
}

/// The browser process, leader of a process group of its own (its helpers): watched by
/// [`orphans`] from its start until it has ended, so that it dies with the harness. Dropped
/// (a run ended, or a launch cancelled), it kills the group and waits (briefly) for the leader,
/// so that the profile can then be removed.
struct Process {
    child: tokio::process::Child,
    group: Option<i32>,
}

impl Process {
    fn spawn(command: &mut tokio::process::Command) -> std::io::Result<Self> {
        let child = command.process_group(0).kill_on_drop(true).spawn()?;
        let group = child.id().and_then(|id| i32::try_from(id).ok());
        if let Some(group) = group {
            orphans::watch(-group);
        }
        Ok(Self { child, group })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(group) = self.group {
            // SAFETY: signals the process group of the browser this harness started; while the
            // group has a member, its id names no other group (and once empty, nothing).
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let child = &mut self.child;
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while !matches!(child.try_wait(), Ok(Some(_)) | Err(_)) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(group) = self.group {
            orphans::unwatch(-group);
        }
    }
}

impl Session {
    /// Closes the browser cleanly (its helper processes end with it), then lets it drop.
    pub async fn close(mut self) {
        let bound = Duration::from_secs(5);
        if self.cdp.call_within("Browser.close", Value::Object(Default::default()), None, bound).await.is_ok() {
            let _ = tokio::time::timeout(bound, self.process.child.wait()).await;
        }
    }
}

/// Prefix of the temporary profile folders: `bankconf-chromium-<pid>-<n>`.
const PROFILE_PREFIX: &str = "bankconf-chromium-";

/// A browser's temporary profile folder, removed when dropped. Chromium's helper processes may
/// write into it for a moment after the browser has gone, so removal is retried briefly.
struct Profile(PathBuf);

impl Profile {
    /// The `n`th profile of this process, in `base` (the temporary directory); folders left
    /// there by bankconf processes that no longer run (killed before their cleanup) go first.
    /// It is removed when dropped, or else when this process ends ([`orphans`]).
    fn new(base: &Path, n: u32) -> Self {
        sweep(base);
        let dir = base.join(format!("{PROFILE_PREFIX}{}-{n}", std::process::id()));
        orphans::remove_at_exit(&dir);
        Self(dir)
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        remove_patiently(&self.0);
    }
}

/// Removes `dir` and everything in it, trying again for up to a second while it still exists.
fn remove_patiently(dir: &Path) {
    for _ in 0..20 {
        let _ = std::fs::remove_dir_all(dir);
        if !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Removes the profile folders in `base` whose bankconf process no longer runs.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PROFILE_PREFIX)) else { continue };
        let Some(pid) = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Where runs find their browser. A run shares nothing by default: each configuration gets a
/// pool of its own. Runs given one pool (the self-test's trials) share one browser process,
/// alive while any of them holds it, so that a hundred runs start one Chromium.
#[derive(Clone, Default)]
pub(crate) struct BrowserPool(Arc<Pool>);

#[derive(Default)]
struct Pool {
    /// The browser of the runs alive that hold this pool.
    shared: StdMutex<Weak<Session>>,
    /// Serialises launches, so concurrent runs start one browser, not several.
    launching: Mutex<()>,
}

impl std::fmt::Debug for BrowserPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<browser pool>")
    }
}

impl BrowserPool {
    /// The pool's browser, started at `path` if none is alive.
    async fn get(&self, path: &Path, ignore_certificates: bool) -> Result<Arc<Session>, BrowserLaunchError> {
        let _launching = self.0.launching.lock().await;
        if let Some(session) = self.0.shared.lock().unwrap_or_else(|e| e.into_inner()).upgrade() {
            if session.ignores_certificates == ignore_certificates {
                return Ok(session);
            }
        }
        let session = Arc::new(launch(path, ignore_certificates).await?);
        *self.0.shared.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&session);
        Ok(session)
    }
}

/// The browser of one run: found and started on first use (from its pool), let go of at the
/// end of the run.
#[derive(Default)]
pub(crate) struct RunBrowser {
    pool: BrowserPool,
    /// Chromium takes no CA file: `--ca-cert` and `--insecure` start it trusting any.
    ignore_certificates: bool,
    session: Mutex<Option<Result<Arc<Session>, Stop>>>,
}

impl RunBrowser {
    /// The browser of a run whose configuration holds `pool`.
    pub(crate) fn new(pool: BrowserPool) -> Self {
        Self { pool, ignore_certificates: false, session: Mutex::default() }
    }

    /// This browser, started with `--ignore-certificate-errors` when `ignore` (the run's
    /// `--ca-cert` or `--insecure`: Chromium has no flag for a CA file).
    pub(crate) fn ignoring_certificate_errors(mut self, ignore: bool) -> Self {
        self.ignore_certificates = ignore;
        self
    }

    /// The browser, starting it if needed; an error names why there is none (ignore the
    /// browser cases) or why it did not start (an error of the harness's setup, not the
    /// target's fault).
    pub(crate) async fn get(&self, given: Option<&Path>) -> Result<Arc<Session>, Stop> {
        let mut slot = self.session.lock().await;
        if slot.is_none() {
            *slot = Some(match find(given) {
                None => Err(Stop::ignore(INSTALL_HINT)),
                Some(path) => {
                    self.pool.get(&path, self.ignore_certificates).await.map_err(|e| harness_error(e.to_string()))
                }
            });
        }
        slot.clone().expect("set above")
    }

    /// Lets go of the browser; the last run to do so closes it and removes its profile.
    pub(crate) async fn close(&self) {
        let Some(Ok(session)) = self.session.lock().await.take() else { return };
        if let Some(session) = Arc::into_inner(session) {
            session.close().await;
        }
    }
}

/// `--browser` / `BANKCONF_BROWSER`, else the first of `NAMES` on PATH.
pub fn find(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = given {
        return Some(path.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    NAMES.iter().find_map(|name| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
}

/// What Chromium runs with (puppeteer's defaults, headless): quiet, nothing in the background,
/// and DevTools on its fds 3 and 4 (no port).
const ARGS: &[&str] = &[
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-component-extensions-with-background-pages",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    // Frames of other sites stay in the page's process, so that its network events (what the
    // widget's frames load included) reach the probe.
    "--disable-features=TranslateUI,IsolateOrigins,site-per-process",
    "--disable-site-isolation-trials",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-renderer-backgrounding",
    "--disable-sync",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--lang=en_US",
];

/// Starts the browser (in a process group that `orphans` watches from its first moment) with
/// its DevTools pipes on fds 3 and 4, and waits for its first answer. Its certificate errors
/// are ignored when `ignore_certificates`.
pub async fn launch(path: &Path, ignore_certificates: bool) -> Result<Session, BrowserLaunchError> {
    static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Its own profile: the default one is locked by any other Chromium of this user.
    let profile = Profile::new(&std::env::temp_dir(), n);
    let shown = || path.display().to_string();
    let not_started = |source| BrowserLaunchError::NotStarted { path: shown(), source };
    let mut command = tokio::process::Command::new(path);
    command
        .args(ARGS)
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if running_as_root() {
        // Chromium refuses to start as root with its sandbox on.
        command.args(["--no-sandbox", "--disable-setuid-sandbox"]);
    }
    if ignore_certificates {
        command.arg("--ignore-certificate-errors");
    }
    command.arg("about:blank");
    let pipes = Pipes::new().map_err(not_started)?;
    pipes.give_to(&mut command);
    // Declared after the profile: dropped before it (a failed or cancelled launch included).
    let process = Process::spawn(&mut command).map_err(not_started)?;
    let cdp = pipes.connect(PROBE_TIMEOUT).map_err(not_started)?;
    match cdp.call_within("Browser.getVersion", Value::Object(Default::default()), None, LAUNCH_TIMEOUT).await {
        Ok(_) => {}
        Err(CdpError::Closed) => return Err(BrowserLaunchError::ExitedEarly { path: shown() }),
        Err(CdpError::Timeout { .. }) => {
            return Err(BrowserLaunchError::NoDevToolsAnswer { path: shown(), waited: LAUNCH_TIMEOUT })
        }
        Err(source) => return Err(BrowserLaunchError::DevToolsUnreachable { path: shown(), source }),
    }
    Ok(Session { cdp, process, ignores_certificates: ignore_certificates, _profile: profile })
}

/// The two pipes of `--remote-debugging-pipe`: the browser reads commands on its fd 3 and
/// writes on its fd 4. Made close-on-exec, so that no other child inherits them.
struct Pipes {
    /// Ours: commands to the browser, answers and events from it.
    to_browser: std::io::PipeWriter,
    from_browser: std::io::PipeReader,
    /// The browser's, dropped here once it has started.
    its_commands: std::io::PipeReader,
    its_answers: std::io::PipeWriter,
}

impl Pipes {
    fn new() -> std::io::Result<Self> {
        let (its_commands, to_browser) = std::io::pipe()?;
        let (from_browser, its_answers) = std::io::pipe()?;
        Ok(Self { to_browser, from_browser, its_commands, its_answers })
    }

    /// Has `command` put the browser's ends on fds 3 and 4 of its child.
    fn give_to(&self, command: &mut tokio::process::Command) {
        use std::os::fd::AsRawFd;
        let (commands, answers) = (self.its_commands.as_raw_fd(), self.its_answers.as_raw_fd());
        // SAFETY: runs in the child between fork and exec, and calls only fcntl and dup2
        // (async-signal-safe) on descriptors the child inherited. Both are first copied above
        // 10, so that placing one on 3 or 4 cannot close the other; the copies close at exec,
        // and dup2 leaves 3 and 4 open across it.
        unsafe {
            command.pre_exec(move || {
                let commands = libc::fcntl(commands, libc::F_DUPFD_CLOEXEC, 10);
                let answers = libc::fcntl(answers, libc::F_DUPFD_CLOEXEC, 10);
                if commands < 0 || answers < 0 || libc::dup2(commands, 3) < 0 || libc::dup2(answers, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Our ends as a DevTools connection whose calls are bounded by `timeout`; the browser's
    /// ends are closed here (the browser holds its own copies).
    fn connect(self, timeout: Duration) -> std::io::Result<Cdp> {
        let Self { to_browser, from_browser, its_commands, its_answers } = self;
        drop((its_commands, its_answers));
        let to_browser = tokio::net::unix::pipe::Sender::from_owned_fd(to_browser.into())?;
        let from_browser = tokio::net::unix::pipe::Receiver::from_owned_fd(from_browser.into())?;
        Ok(Cdp::new(to_browser, from_browser, timeout))
    }
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// What the page saw when it ran the widget script.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// The script element's `error` event fired (it could not be fetched).
    pub load_failed: bool,
    /// Uncaught errors while the script ran, as their text.
    pub errors: Vec<String>,
    /// Globals the script added.
    pub added: Vec<String>,
    /// The first added global whose `open` is a function.
    pub global: Option<String>,
    /// `typeof open` for each added global, as `name: type`.
    pub open_types: Vec<String>,
    /// The outcome of calling `open`: `None` if not called; `Some(Ok(form))` the form that
    /// did not throw; `Some(Err(text))` what both forms threw.
    pub call: Option<Call>,
    /// `postMessage` payloads the page got, as text (JSON for objects).
    pub messages: Vec<String>,
    /// The arguments `onSuccess` was called with, as JSON, when the widget called it.
    pub successes: Vec<String>,
    /// Every response the page loaded after the script was added (frames, `fetch`, XHR, any
    /// other load), bounded; the script's own URL left out (the script cases judge it).
    #[serde(skip)]
    pub responses: Vec<Received>,
}

/// One thing the page received: where it came from, and its text (kept in the harness only
/// to be searched, never printed).
#[derive(Clone, Debug, Default)]
pub struct Received {
    /// `GET <url>` for a response, `postMessage`, or `onSuccess`.
    pub what: String,
    pub text: String,
}

impl Probe {
    /// Everything the page received that the probe kept: responses, messages, `onSuccess`.
    pub fn received(&self) -> Vec<Received> {
        let mut all = self.responses.clone();
        all.extend(self.messages.iter().map(|m| Received { what: "a postMessage payload".into(), text: m.clone() }));
        all.extend(self.successes.iter().map(|s| Received { what: "the onSuccess metadata".into(), text: s.clone() }));
        all
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    pub accepted: Option<String>,
    pub thrown: Vec<String>,
}

/// The probe, run in a page of the script's own origin (so that errors carry their text)
/// with `__ARGS__` replaced by `[src, token, connectionId]`. The API key never reaches it.
const PROBE_JS: &str = r#"(async () => {
  const [src, token, connectionId] = __ARGS__;
  const text = (e) => { try { return String(e && e.message !== undefined ? e.message : e).slice(0, 300); } catch (_) { return "unprintable"; } };
  const before = new Set(Object.getOwnPropertyNames(window));
  const errors = [];
  const cut = (s) => String(s).slice(0, __MAX_BYTES__);
  const asText = (v) => { try { return typeof v === "string" ? v : JSON.stringify(v); } catch (_) { return text(v); } };
  const messages = [];
  window.addEventListener("message", (e) => { if (messages.length < __MAX__) messages.push(cut(asText(e.data))); });
  const successes = [];
  window.addEventListener("error", (e) => errors.push(text(e.error !== undefined && e.error !== null ? e.error : e.message)));
  window.addEventListener("unhandledrejection", (e) => e.preventDefault());
  const loadFailed = await new Promise((done) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = () => done(false);
    s.onerror = () => done(true);
    (document.head || document.documentElement).appendChild(s);
  });
  const added = () => Object.getOwnPropertyNames(window).filter((n) => !before.has(n));
  const openOf = (n) => { try { const v = window[n]; return v !== null && (typeof v === "object" || typeof v === "function") ? v.open : undefined; } catch (_) { return undefined; } };
  let global = null;
  for (let i = 0; i < 20 && !loadFailed && errors.length === 0; i++) {
    global = added().find((n) => typeof openOf(n) === "function") || null;
    if (global) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  let call = null;
  if (global && token !== null) {
    const api = window[global];
    const onSuccess = (...args) => { if (successes.length < __MAX__) successes.push(cut(asText(args))); };
    const thrown = [];
    let accepted = null;
    const attempt = (form, args) => {
      try { const r = api.open.apply(api, args); if (r && typeof r.then === "function") r.then(null, () => {}); accepted = form; }
      catch (e) { thrown.push(form + ": " + text(e)); }
    };
    attempt("object", [{ token, connectionId, onSuccess }]);
    if (accepted === null) attempt("positional", [token, connectionId, onSuccess]);
    call = { accepted, thrown };
    // What the widget loads and sends after `open` (frames, a session, onSuccess where it
    // calls it without a user): up to 1.5 s, less once onSuccess came.
    for (let i = 0; i < 15 && accepted !== null && successes.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    if (accepted !== null) await new Promise((r) => setTimeout(r, 200));
  }
  const names = added();
  return { loadFailed, errors: errors.slice(0, 5), added: names.slice(0, 20), global,
    openTypes: names.slice(0, 20).map((n) => n + ": " + typeof openOf(n)), call, messages, successes };
})()"#;

impl Session {
    /// Loads `src` in a fresh page and, if a global with `open` appears and `credentials`
    /// (widget token, connection id) are given, calls `open` with them.
    pub async fn probe(&self, src: &str, credentials: Option<(&str, &str)>) -> Result<Probe, Stop> {
        tokio::time::timeout(PROBE_TIMEOUT, self.probe_unbounded(src, credentials)).await.map_err(|_| {
            // A script that never returns control, or a machine too loaded: not provably
            // the target's fault, so an error rather than a failure.
            harness_error(format!("the browser did not finish running {src} within {PROBE_TIMEOUT:?}"))
        })?
    }

    async fn probe_unbounded(&self, src: &str, credentials: Option<(&str, &str)>) -> Result<Probe, Stop> {
        let browser_error = |e: CdpError| harness_error(format!("the browser: {e}"));
        // The script's own URL as the page: same origin, so error events carry their text.
        let page = self.page(src).await.map_err(browser_error)?;
        let loads = Loads::watch(&page);
        let (token, connection) = credentials.unzip();
        let args = serde_json::json!([src, token, connection]).to_string();
        let js = PROBE_JS
            .replace("__ARGS__", &args)
            .replace("__MAX_BYTES__", &MAX_RECEIVED_BYTES.to_string())
            .replace("__MAX__", &MAX_RECEIVED.to_string());
        let result = page.evaluate::<Probe>(&js).await;
        let responses = loads.bodies(&page, src).await;
        page.close().await;
        let mut probe = result.map_err(|e| match e {
            CdpError::Odd { reason, .. } => harness_error(format!("the browser's probe answered oddly: {reason}")),
            e => browser_error(e),
        })?;
        probe.responses = responses;
        Ok(probe)
    }

    /// A new page of this browser, at `url` once loaded (an error page if it cannot be).
    pub async fn page(&self, url: &str) -> Result<cdp::Page, CdpError> {
        let page = self.cdp.open_page().await?;
        page.navigate(url).await?;
        Ok(page)
    }
}

/// A client's frontend, as the browser sees one: a page with no credentials, served from a
/// loopback port of its own (another origin than the service's; a `data:` page would be a
/// public context, which the browser keeps from loading a loopback target's script).
const ELSEWHERE_PAGE: &str = "<!doctype html><title>a client's frontend</title>";

/// Serves [`ELSEWHERE_PAGE`] on 127.0.0.1, port 0, to every request, until aborted.
async fn serve_elsewhere() -> std::io::Result<(String, JoinHandle<()>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut head)).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ELSEWHERE_PAGE}",
                    ELSEWHERE_PAGE.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok((url, task))
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
    pub async fn loads_elsewhere(&self, src: &str) -> Result<bool, Stop> {
        let run = async {
            let browser_error = |e: CdpError| harness_error(format!("the browser: {e}"));
            let (home, server) =
                serve_elsewhere().await.map_err(|e| harness_error(format!("a page of another origin: {e}")))?;
            // The page's server ends with this call, however it ends.
            struct Ends(JoinHandle<()>);
            impl Drop for Ends {
                fn drop(&mut self) {
                    self.0.abort();
                }
            }
            let _server = Ends(server);
            let page = self.page(&home).await.map_err(browser_error)?;
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

/// The responses a page loads, from the DevTools network events: which requests finished, and
/// their URLs (bounded), collected aside while the probe runs.
struct Loads {
    seen: Arc<StdMutex<Vec<(String, String)>>>,
    finished: Arc<StdMutex<std::collections::HashSet<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Loads {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Loads {
    fn watch(page: &cdp::Page) -> Self {
        let mut events = page.events(&["Network.responseReceived", "Network.loadingFinished"]);
        let seen: Arc<StdMutex<Vec<(String, String)>>> = Arc::default();
        let done: Arc<StdMutex<std::collections::HashSet<String>>> = Arc::default();
        let (s, d) = (seen.clone(), done.clone());
        let task = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(id) = event.params["requestId"].as_str() else { continue };
                if event.method == "Network.responseReceived" {
                    let Some(url) = event.params["response"]["url"].as_str() else { continue };
                    let mut seen = s.lock().unwrap_or_else(|e| e.into_inner());
                    if seen.len() < MAX_RECEIVED {
                        seen.push((id.to_string(), url.to_string()));
                    }
                } else {
                    let mut done = d.lock().unwrap_or_else(|e| e.into_inner());
                    if done.len() < 4 * MAX_RECEIVED {
                        done.insert(id.to_string());
                    }
                }
            }
        });
        Self { seen, finished: done, task }
    }

    /// The text of each finished response but the script's own (`src`), within the bounds;
    /// a body the browser no longer has, or that is binary, is left out.
    async fn bodies(self, page: &cdp::Page, src: &str) -> Vec<Received> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let finished = self.finished.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out = Vec::new();
        let mut total = 0;
        for (id, url) in seen.into_iter().filter(|(id, url)| finished.contains(id) && url != src) {
            if total >= MAX_RECEIVED_TOTAL || !url.starts_with("http") {
                break;
            }
            let asked = serde_json::json!({ "requestId": id });
            let Ok(body) = page.call_within("Network.getResponseBody", asked, Duration::from_secs(2)).await else {
                continue;
            };
            let (Some(text), Some(false)) = (body["body"].as_str(), body["base64Encoded"].as_bool()) else { continue };
            let mut end = text.len().min(MAX_RECEIVED_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let text = text[..end].to_string();
            total += text.len();
            out.push(Received { what: format!("GET {url}"), text });
        }
        out
    }
}

/// The browser failed us (did not start, lost its connection): the run's setup, not the target.
fn harness_error(message: String) -> Stop {
    Stop::Error(ErrorSource::Harness, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own in the temporary directory, for one test.
    fn base(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bankconf-browser-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_profile_is_removed_when_dropped_even_while_written() {
        let base = base("drop");
        let profile = Profile::new(&base, 7);
        let dir = profile.0.clone();
        assert!(dir.file_name().unwrap().to_str().unwrap().starts_with("bankconf-chromium-"));
        std::fs::create_dir_all(dir.join("Default/Cache")).unwrap();
        std::fs::write(dir.join("Default/Cache/data"), "x").unwrap();
        // A helper process that writes into the profile a moment after the browser went.
        let late = dir.clone();
        let writer = std::thread::spawn(move || {
            for _ in 0..3 {
                let _ = std::fs::create_dir_all(late.join("Crashpad"));
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        writer.join().unwrap();
        drop(profile);
        assert!(!dir.exists(), "{} is left", dir.display());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[tokio::test]
    async fn a_program_that_is_no_browser_fails_its_launch_at_once() {
        let started = std::time::Instant::now();
        // `true` ignores its arguments and exits: it never answers on the DevTools pipe.
        let launched = launch(Path::new("true"), false).await;
        assert!(matches!(launched, Err(BrowserLaunchError::ExitedEarly { .. })), "{:?}", launched.err());
        assert!(started.elapsed() < LAUNCH_TIMEOUT / 2, "{:?}", started.elapsed());
        let missing = launch(Path::new("/nonexistent/chromium"), false).await;
        assert!(matches!(missing, Err(BrowserLaunchError::NotStarted { .. })), "{:?}", missing.err());
    }

    #[test]
    fn profiles_of_processes_gone_are_swept() {
        let base = base("sweep");
        // No process has a pid above the kernel's limit (at most 2^22).
        let gone = base.join(format!("{PROFILE_PREFIX}99999999-0"));
        let alive = base.join(format!("{PROFILE_PREFIX}1-0"));
        let other = base.join("someone-else-0");
        for dir in [&gone, &alive, &other] {
            std::fs::create_dir_all(dir.join("Default")).unwrap();
        }
        let mine = Profile::new(&base, 0);
        std::fs::create_dir_all(&mine.0).unwrap();
        assert!(!gone.exists(), "a dead process's profile is swept");
        assert!(alive.exists() && other.exists() && mine.0.exists(), "a live process's folder, or another's, stays");
        drop(mine);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
