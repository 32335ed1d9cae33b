//! A run cut short loses nothing and leaves nothing behind: `bankconf run` against `bankconf
//! serve` with 100 ms of latency and the example shell driver, stopped mid-run by SIGINT,
//! SIGTERM or SIGKILL, and a run past its `--deadline`. Every process the run starts carries a
//! tag in its environment, so that what outlives it is found wherever it was reparented.
//! Loopback only.

use serde_json::Value;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{external, temp_path, Server, BIN};
const KEY: &str = "bankconf_test_interruptprimary00001";
const SECOND_KEY: &str = "bankconf_test_interruptsecond00002";

/// One run at a time: each starts a browser, and the timings below assume a machine not
/// starved by several.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A `bankconf run` whose every descendant carries `BANKCONF_TEST_TAG=<tag>`, with its own
/// temporary folder (where the browser's profile goes) and report paths.
struct Run {
    child: Child,
    tag: String,
    tmp: PathBuf,
    json: PathBuf,
    junit: PathBuf,
    har: PathBuf,
    output: std::sync::mpsc::Receiver<String>,
}

impl Run {
    fn start(name: &str, args: &[&str]) -> Run {
        let tag = format!("{name}-{}", std::process::id());
        let tmp = temp_path(&format!("{name}-tmp"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let (json, junit) = (temp_path(&format!("{name}.json")), temp_path(&format!("{name}.xml")));
        let har = temp_path(&format!("{name}.har"));
        for file in [&json, &junit, &har] {
            let _ = std::fs::remove_file(file);
        }
        let mut child = Command::new(BIN)
            .arg("run")
            .args(args)
            .args(["--report-json", json.to_str().unwrap(), "--report-junit", junit.to_str().unwrap()])
            .args(["--report-har", har.to_str().unwrap()])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TMPDIR", &tmp)
            .env("BANKCONF_TEST_TAG", &tag)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start bankconf run");
        let (send, output) = std::sync::mpsc::channel();
        for mut stream in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let send = send.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stream.read_to_string(&mut text);
                let _ = send.send(text);
            });
        }
        Run { child, tag, tmp, json, junit, har, output }
    }

    /// Waits (at most 60 s) until the run has started its browser, if this machine has one,
    /// and a little longer: mid-run, with cases in flight.
    fn until_mid_run(&self) {
        let since = Instant::now();
        if bankconf::internal::browser::find(None).is_some() {
            while !self.descendants().iter().any(|(_, name)| name.contains("chrom")) {
                assert!(since.elapsed() < Duration::from_secs(60), "no browser started within 60 s");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    /// The live processes (not zombies) carrying this run's tag, as (pid, name).
    fn descendants(&self) -> Vec<(u32, String)> {
        let needle = format!("BANKCONF_TEST_TAG={}\0", self.tag).into_bytes();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
            if !environ.windows(needle.len()).any(|w| w == needle) {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
            if stat[close + 1..].trim_start().starts_with('Z') {
                continue;
            }
            found.push((pid, stat[open + 1..close].to_string()));
        }
        found
    }

    fn signal(&self, signal: i32) {
        // SAFETY: signals the child this test started, which has not been waited for yet.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits for the exit (at most 60 s, else kills it and fails): the exit code and the time.
    fn exit(&mut self) -> (Option<i32>, Duration) {
        use std::os::unix::process::ExitStatusExt;
        let since = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code().or(status.signal().map(|s| 128 + s)), since.elapsed());
            }
            if since.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("the run did not end within 60 s of the signal");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the run printed.
    fn printed(&self) -> String {
        self.output.iter().take(2).collect::<Vec<_>>().join("")
    }

    /// Waits (at most `cap`) until no tagged process is left; what is left then.
    fn survivors(&self, cap: Duration) -> Vec<(u32, String)> {
        let since = Instant::now();
        loop {
            let left = self.descendants();
            if left.is_empty() || since.elapsed() > cap {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The browser profile folders left in the run's temporary folder.
    fn profiles(&self) -> Vec<String> {
        std::fs::read_dir(&self.tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("bankconf-chromium-"))
            .collect()
    }
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let report = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    if let Err(v) = bankconf::internal::schemas::validate(bankconf::internal::schemas::Schema::Report, &report) {
        panic!("{} breaks schemas/report.json: {v:?}", path.display());
    }
    report
}

/// SIGINT or SIGTERM mid-run: every report says INCOMPLETE with the interrupted cases, the exit
/// code is the signal's, and no process or profile folder is left.
fn interrupted_by(signal: i32, name: &str, code: i32) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = Server::start(&[KEY, SECOND_KEY], &["--latency-ms", "100"]);
    let mut run = Run::start(name, &external(&server.url, KEY, SECOND_KEY));
    run.until_mid_run();
    let before = run.descendants();
    run.signal(signal);
    let (exit, took) = run.exit();
    let printed = run.printed();
    eprintln!("{name}: {} processes before the signal, exit {exit:?} {took:?} after it", before.len() + 1);
    assert_eq!(exit, Some(code), "{printed}");
    assert!(took < Duration::from_secs(10), "{took:?} from the signal to the exit\n{printed}");
    let left = run.survivors(Duration::from_secs(5));
    assert!(left.is_empty(), "left running: {left:?} (before the signal: {before:?})");
    assert_eq!(run.profiles(), Vec::<String>::new(), "profile folders left");

    let report = json(&run.json);
    assert_eq!(report["verdict"], "INCOMPLETE", "{printed}");
    assert_eq!(report["exit_code"], code);
    assert_eq!(report["stopped"]["cause"], "interrupted");
    let interrupted: Vec<&Value> =
        report["cases"].as_array().unwrap().iter().filter(|c| c["cause"] == "interrupted").collect();
    assert!(!interrupted.is_empty(), "no case was interrupted:\n{printed}");
    assert!(interrupted.iter().all(|c| c["outcome"] == "ignored"));
    let junit = std::fs::read_to_string(&run.junit).unwrap();
    assert!(junit.trim_end().ends_with("</testsuites>") && junit.contains("interrupted"), "{junit}");
    assert!(printed.contains("INCOMPLETE") && printed.contains("interrupted by"), "{printed}");
    // The webhook receiver was unregistered through the driver, as the HAR shows.
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&run.har).unwrap()).unwrap();
    let urls: Vec<&str> =
        har["log"]["entries"].as_array().unwrap().iter().filter_map(|e| e["request"]["url"].as_str()).collect();
    assert!(urls.iter().any(|u| u.starts_with("driver:unregister_webhook")), "no unregister_webhook in the HAR");
    assert!(!printed.contains(KEY) && !printed.contains(SECOND_KEY), "a key was printed");
}

#[test]
fn sigint_mid_run_writes_every_report_and_leaves_nothing() {
    interrupted_by(libc::SIGINT, "sigint", 130);
}

#[test]
fn sigterm_mid_run_writes_every_report_and_leaves_nothing() {
    interrupted_by(libc::SIGTERM, "sigterm", 143);
}

/// SIGKILL, which the harness never sees: its browser dies with it, its profile goes, and no
/// report file is left empty (none was written yet, and none was created ahead).
#[test]
fn sigkill_mid_run_leaves_no_browser_and_no_empty_report() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = Server::start(&[KEY, SECOND_KEY], &["--latency-ms", "100"]);
    let mut run = Run::start("sigkill", &external(&server.url, KEY, SECOND_KEY));
    run.until_mid_run();
    let before = run.descendants();
    run.signal(libc::SIGKILL);
    assert_eq!(run.exit().0, Some(128 + libc::SIGKILL));
    std::thread::sleep(Duration::from_secs(5));
    let left = run.descendants();
    assert!(left.is_empty(), "alive 5 s after SIGKILL: {left:?} (before: {before:?})");
    assert_eq!(run.profiles(), Vec::<String>::new(), "profile folders left");
    for file in [&run.json, &run.junit, &run.har] {
        if let Ok(meta) = std::fs::metadata(file) {
            assert!(meta.len() > 0, "{} is empty", file.display());
        }
    }
}

/// A run past its deadline: INCOMPLETE (exit 3) naming it, every report whole.
#[test]
fn a_run_past_its_deadline_is_incomplete_with_every_report_written() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut run = Run::start("deadline", &["--sandbox-latency-ms", "100", "--deadline", "1.5"]);
    let since = Instant::now();
    let (exit, _) = run.exit();
    let took = since.elapsed();
    let printed = run.printed();
    assert_eq!(exit, Some(3), "{printed}");
    assert!(took < Duration::from_secs(20), "{took:?}\n{printed}");
    let report = json(&run.json);
    assert_eq!(report["verdict"], "INCOMPLETE");
    assert_eq!(report["exit_code"], 3);
    assert_eq!(report["stopped"]["cause"], "deadline");
    assert!(report["cases"].as_array().unwrap().iter().any(|c| c["cause"] == "deadline"), "{printed}");
    assert!(std::fs::read_to_string(&run.junit).unwrap().trim_end().ends_with("</testsuites>"));
    assert!(printed.contains("--deadline 1.5 s"), "{printed}");
    assert!(run.survivors(Duration::from_secs(5)).is_empty());
}

/// The browsers this process started that still run (its own children, not zombies).
fn own_browsers() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if stat[open + 1..close].contains("chrom") && rest.first() != Some(&"Z") && rest.get(1) == Some(&me.as_str()) {
            found.push(pid);
        }
    }
    found
}

/// Clock ticks a second, the unit of a start time in /proc/<pid>/stat.
fn ticks_per_second() -> i64 {
    // SAFETY: sysconf reads a constant of the system.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1)
}

/// The time since boot in clock ticks.
fn uptime_ticks() -> i64 {
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let seconds = uptime.split_whitespace().next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    (seconds * ticks_per_second() as f64) as i64
}

/// `Conformance::run` cancelled by dropping its future (a test's timeout) cleans up as a run
/// cut short does: its browser ends, its profile folder goes, and no browser starts after.
#[test]
fn a_library_run_dropped_mid_way_leaves_no_browser() {
    if bankconf::internal::browser::find(None).is_none() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (browser, starts) = counting_browser("dropped");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut run = run_with_browser(Some(browser)).await.unwrap_or_else(|ended| panic!("{ended}"));
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut run).await;
    });
    let started = || std::fs::read_to_string(&starts).unwrap_or_default().lines().count();
    let started_before = started();
    let prefix = format!("bankconf-chromium-{}-", std::process::id());
    let profiles = || -> Vec<String> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&prefix))
            .collect()
    };
    let (since, dropped_at) = (Instant::now(), uptime_ticks());
    // A cap, not a speed: on a loaded machine a killed Chromium takes seconds to be gone.
    while !(own_browsers().is_empty() && profiles().is_empty()) && since.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // And none starts afterwards: the run's flows are aborted one by one, and one not yet
    // stopped could start a browser (widget.rs takes over the probe of one that was).
    let quiet = Instant::now();
    while own_browsers().is_empty() && quiet.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ages: Vec<String> = own_browsers()
        .iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let start = stat.rsplit(')').next().unwrap_or("").split_whitespace().nth(19).and_then(|t| t.parse().ok());
            let after =
                start.map_or("?".into(), |t: i64| format!("{} ms", (t - dropped_at) * 1000 / ticks_per_second()));
            let cmdline =
                std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().replace('\0', " ");
            format!("{pid} started {after} after the drop: {}", cmdline.chars().take(300).collect::<String>())
        })
        .collect();
    assert_eq!(
        own_browsers(),
        Vec::<u32>::new(),
        "a browser outlived the dropped run, or started after it: {ages:?}; checked {:?} after the drop",
        since.elapsed()
    );
    assert_eq!(profiles(), Vec::<String>::new(), "profile folders left");
    // Counted where it starts: one killed at once is never seen by the polls above.
    assert_eq!(started(), started_before, "browsers started after the drop (each killed soon after)");
    drop(runtime);
}

/// A second signal ends the process at once, still without leaving children.
#[test]
fn a_second_signal_ends_at_once_and_leaves_nothing() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = Server::start(&[KEY, SECOND_KEY], &["--latency-ms", "100"]);
    let mut run = Run::start("twice", &external(&server.url, KEY, SECOND_KEY));
    run.until_mid_run();
    run.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(20));
    run.signal(libc::SIGINT);
    let (exit, took) = run.exit();
    assert_eq!(exit, Some(130), "{}", run.printed());
    assert!(took < Duration::from_secs(3), "{took:?} from the signals to the exit");
    let left = run.survivors(Duration::from_secs(5));
    assert!(left.is_empty(), "left running: {left:?}");
    assert_eq!(run.profiles(), Vec::<String>::new(), "profile folders left");
}

/// Run by [`a_test_binary_that_panics_or_is_killed_leaves_no_browser`] in a process of its own
/// (this test binary, started again): a library run that panics, or hangs until killed, once
/// its browser runs. Without `BANKCONF_TEST_CHILD` it does nothing. What it prints goes to the
/// parent, which shows it when the child ends before its browser ran.
#[test]
fn library_child() {
    let Ok(mode) = std::env::var("BANKCONF_TEST_CHILD") else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let _run = match run_with_browser(None).await {
            Ok(run) => run,
            Err(ended) => return println!("{ended}"),
        };
        println!("browser running");
        if mode == "panic" {
            panic!("a test that fails while its run is under way");
        }
        std::future::pending::<()>().await;
    });
}

/// The browser this machine has, behind a script that first writes a line to the file
/// returned with it: each start counted as it begins (its name holds "chrom").
fn counting_browser(name: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let real = bankconf::internal::browser::find(None).expect("a browser");
    let dir = temp_path(&format!("{name}-browser"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (script, starts) = (dir.join("chromium-counted"), dir.join("starts"));
    let text = format!("#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n", starts.display(), real.display());
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script, starts)
}

/// A run of the embedded sandbox (with `browser`, else the one found), slowed down so that it
/// is still under way when its browser runs, polled until a browser of this process runs. Should a run end first (its browser did
/// not start: on a machine too busy for Chromium's launch bound, say), up to two more are
/// started, since these tests are about what a run leaves behind and need one whose browser
/// runs. After three, the error says how each ended.
async fn run_with_browser(
    browser: Option<PathBuf>,
) -> Result<Pin<Box<impl Future<Output = bankconf::Report>>>, String> {
    let mut ended = Vec::new();
    for attempt in 1..=3 {
        let mut run = Box::pin(
            bankconf::Conformance::default()
                .configure(|c| {
                    c.sandbox_conditions.sandbox_latency_ms = 100;
                    c.browser = browser.clone();
                })
                .run(),
        );
        let since = Instant::now();
        while own_browsers().is_empty() {
            if since.elapsed() > Duration::from_secs(60) {
                return Err(format!("run {attempt}: no browser started within 60 s"));
            }
            if let Ok(report) = tokio::time::timeout(Duration::from_millis(50), &mut run).await {
                ended.push(format!("run {attempt} ended before its browser ran: {}", bankconf::summary(&report)));
                break;
            }
        }
        if ended.len() < attempt {
            return Ok(run);
        }
    }
    Err(ended.join("\n"))
}

/// A test binary that panics mid-run, or is killed (SIGTERM, which a test binary does not
/// handle; SIGKILL), leaves no browser behind and no profile folder.
#[test]
fn a_test_binary_that_panics_or_is_killed_leaves_no_browser() {
    if bankconf::internal::browser::find(None).is_none() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (mode, signal) in [("panic", None), ("hang", Some(libc::SIGTERM)), ("hang", Some(libc::SIGKILL))] {
        let tag = format!("child-{mode}-{signal:?}-{}", std::process::id());
        let tmp = temp_path(&format!("{tag}-tmp"));
        std::fs::create_dir_all(&tmp).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "library_child", "--nocapture", "--test-threads", "1"])
            .env("BANKCONF_TEST_CHILD", mode)
            .env("BANKCONF_TEST_TAG", &tag)
            .env("TMPDIR", &tmp)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(tmp.join("stderr")).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (mut line, mut printed) = (String::new(), String::new());
        while !line.contains("browser running") {
            line.clear();
            if std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() == 0 {
                break;
            }
            printed.push_str(&line);
        }
        if !line.contains("browser running") {
            let _ = child.wait();
            let stderr = std::fs::read_to_string(tmp.join("stderr")).unwrap_or_default();
            panic!("{mode}: the child ended before its browser ran; it printed:\n{printed}\n{stderr}");
        }
        if let Some(signal) = signal {
            // SAFETY: signals the child this test started, not yet waited for.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
        let status = child.wait().unwrap();
        assert!(!status.success(), "{mode}: {status:?}");
        let run = Run {
            child,
            tag,
            tmp,
            json: PathBuf::new(),
            junit: PathBuf::new(),
            har: PathBuf::new(),
            output: std::sync::mpsc::channel().1,
        };
        let left = run.survivors(Duration::from_secs(10));
        assert!(left.is_empty(), "{mode} {signal:?}: left running: {left:?}");
        // The supervisor removes the folder once the browser is gone: waited for, within a cap.
        let since = Instant::now();
        while !run.profiles().is_empty() && since.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let profiles = run.profiles();
        let inside = |name: &String| std::fs::read_dir(run.tmp.join(name)).into_iter().flatten().flatten().count();
        let shown: Vec<String> = profiles.iter().map(|name| format!("{name} ({} entries)", inside(name))).collect();
        assert!(profiles.is_empty(), "{mode} {signal:?}: profile folders left: {shown:?}");
    }
}
