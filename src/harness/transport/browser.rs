//! A headless Chromium for the widget script (§1 step 2), driven over the DevTools protocol
//! ([`cdp`], on the browser's `--remote-debugging-pipe`): found, started, shared and killed.
//! What it does with the script is [`crate::harness::transport::probe`]'s. The browser is found, never
//! fetched; one process serves every run of this process that is alive at once (the
//! self-test's runs share it), started on first use and killed when the last run lets go of it.

use crate::harness::transport::cdp::Cdp;
use crate::harness::transport::orphans;
use crate::harness::vocab::errors::{BrowserLaunchError, CdpError};
use crate::harness::vocab::outcome::{ErrorSource, Stop};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;
use tokio::sync::Mutex;

/// What to tell a user who has no browser.
pub(crate) const INSTALL_HINT: &str = "no browser found: `apt-get install chromium-headless-shell` (Debian/Ubuntu; or \
     `chromium`), Chromium or Chrome on PATH elsewhere, or --browser PATH (--skip-browser leaves these cases out)";

/// Why the browser cases are not judged when `--skip-browser` leaves them out.
pub(crate) const SKIPPED: &str =
    "left out on purpose (--skip-browser): the widget cases that run the script in a browser";

/// Why a flow still running once its run let go of the browser gets none (it is being
/// aborted: no report shows this).
const CLOSED: &str = "the run ended before its browser started";

/// Names looked up on PATH, in order.
const NAMES: [&str; 3] = ["chromium", "chromium-headless-shell", "google-chrome"];

/// At least 20 s: a cold Chromium on a loaded machine is slow to answer its first call.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Cap on one call to the browser (a navigation, an evaluation: the probe's longest is the
/// global's 10 s and `open`'s 1.7 s), and on a page of another origin loading the script.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// One running browser; dropping it kills the process and waits (briefly) for it to exit, so
/// that its profile can then be removed (fields drop in order: the profile last).
pub struct Session {
    pub(crate) cdp: Cdp,
    process: Process,
    /// Started with `--ignore-certificate-errors` (`--ca-cert`, `--insecure`).
    pub(crate) ignores_certificates: bool,
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

/// The `--header` pairs a run's pages send to the target's origin, and only there (a gateway
/// that guards the widget script wants them from the browser as from bankconf).
#[derive(Clone, Default)]
pub struct PageHeaders {
    /// `http://host:port` of the target, as a browser writes it.
    pub origin: String,
    /// `(name, value)`; the values are secrets, never printed.
    pub pairs: Vec<(String, String)>,
}

impl PageHeaders {
    /// The checked `--header`s of a run whose target is at `base_url`.
    pub(crate) fn of(base_url: &reqwest::Url, headers: &crate::harness::transport::reach::Headers) -> Self {
        Self { origin: base_url.origin().ascii_serialization(), pairs: headers.pairs().to_vec() }
    }
}

/// The browser of one run: found and started on first use (from its pool), let go of at the
/// end of the run.
#[derive(Default)]
pub(crate) struct RunBrowser {
    pool: BrowserPool,
    /// Chromium takes no CA file: `--ca-cert` and `--insecure` start it trusting any.
    ignore_certificates: bool,
    /// What its pages send to the target's origin besides their own headers.
    pub(crate) headers: PageHeaders,
    session: Mutex<Option<Result<Arc<Session>, Stop>>>,
    /// Set once the run has let go of its browser ([`RunBrowser::close`], or its future
    /// dropped): no launch starts after it. A run's tasks are aborted, not stopped at once,
    /// and meanwhile a widget flow takes over the probe another one was making (a cancelled
    /// `get_or_init`), and would start a browser that nothing then closes.
    closed: AtomicBool,
}

impl RunBrowser {
    /// The browser of a run whose configuration holds `pool`.
    pub(crate) fn new(pool: BrowserPool) -> Self {
        Self {
            pool,
            ignore_certificates: false,
            headers: PageHeaders::default(),
            session: Mutex::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// This browser, its pages sending `headers` to the target's origin.
    pub(crate) fn sending(mut self, headers: PageHeaders) -> Self {
        self.headers = headers;
        self
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
            if self.is_closed() {
                return Err(Stop::ignore(CLOSED));
            }
            let got = match find(given) {
                None => Err(Stop::ignore(INSTALL_HINT)),
                Some(path) => {
                    self.pool.get(&path, self.ignore_certificates).await.map_err(|e| harness_error(e.to_string()))
                }
            };
            // Closed while it started: not kept (dropped here, it ends unless another run holds it).
            if self.is_closed() {
                return Err(Stop::ignore(CLOSED));
            }
            *slot = Some(got);
        }
        slot.clone().expect("set above")
    }

    /// No browser starts for this run from now on (its future was dropped: what it spawned
    /// is being aborted). Callable where nothing can be awaited.
    pub(crate) fn close_now(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Lets go of the browser; the last run to do so closes it and removes its profile. No
    /// browser starts for this run afterwards.
    pub(crate) async fn close(&self) {
        self.close_now();
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

/// The browser failed us (did not start, lost its connection): the run's setup, not the target.
pub(crate) fn harness_error(message: String) -> Stop {
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

    /// A run that let go of its browser starts none, whatever of it still asks (a flow not
    /// yet aborted once the run's future was dropped); an open one does start it.
    #[tokio::test]
    async fn a_closed_run_browser_starts_no_browser() {
        use std::os::unix::fs::PermissionsExt;
        let base = base("closed");
        let started = base.join("started");
        let fake = base.join("fake-browser");
        std::fs::write(&fake, format!("#!/bin/sh\ntouch '{}'\n", started.display())).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        for by_drop in [true, false] {
            let browser = RunBrowser::new(BrowserPool::default());
            if by_drop {
                browser.close_now();
            } else {
                browser.close().await;
            }
            let got = browser.get(Some(&fake)).await;
            assert!(matches!(&got, Err(Stop::Ignore(_, why)) if why == CLOSED), "{:?}", got.err());
            assert!(!started.exists(), "a closed run started its browser");
        }
        let open = RunBrowser::new(BrowserPool::default());
        let got = open.get(Some(&fake)).await;
        assert!(matches!(&got, Err(Stop::Error(..))), "{:?}", got.err());
        assert!(started.exists(), "an open run did not start its browser");
        std::fs::remove_dir_all(&base).unwrap();
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
