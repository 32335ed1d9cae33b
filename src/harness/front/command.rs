//! The two front doors of a conformance run: `bankconf run` and `cargo test --test conformance`.
//! Each runs [`runner::run_report`] once and hands the report to its reporter (the terminal and
//! report files, or libtest's trials): the top layer, so that reports never import the runner's
//! callers and the runner never imports a report.

use crate::harness::report::{self, progress, EXIT_NOT_RUN};
use crate::harness::setup::config::RunConfig;
use crate::harness::vocab::cancel::{Cancel, Cause, Signal};
use crate::harness::vocab::catalogue;
use crate::harness::{runner, transport::orphans, vocab::sanitize};
use libtest_mimic::Arguments;
use std::process::ExitCode;
use std::sync::Arc;

/// `bankconf run`: runs the selected cases, prints and writes the reports, returns the exit code.
/// Report files are checked writable before anything runs, and written on every exit: a first
/// SIGINT or SIGTERM cuts the run short (exit 130 or 143 once the reports are written), a
/// second ends the process at once.
pub async fn run(config: RunConfig) -> i32 {
    let config = config.with_legacy_env();
    let (outputs, quiet) = (config.outputs.clone(), config.quiet);
    if let Err(e) = report::check_writable(&outputs, config.har.as_deref()) {
        eprintln!("bankconf: {e}");
        return EXIT_NOT_RUN;
    }
    let cancel = Cancel::default();
    on_signals(cancel.clone());
    // No process a driver started outlives the run: the session's shutdown stops its driver.
    let report = runner::run_report_until(
        config,
        Some(Arc::new(progress::Terminal::new(report::terminal::full_text(&outputs).to_string()).quiet(quiet))),
        cancel,
    )
    .await;
    if let Some(e) = &report.setup_error {
        eprintln!("bankconf: {}", sanitize::visible(&report.redactor.redact(&e.to_string())));
    }
    report::finish(&report, &outputs, quiet)
}

/// Names this binary in every rerun command (`verdict::set_program`):
/// `bankconf` when that name on PATH is this very file, else the path of this file, relative to
/// the current directory when it is below it (`./target/release/bankconf`, after `cargo run`),
/// so that a rerun pasted in the same directory runs it.
pub fn name_this_binary() {
    crate::harness::rules::verdict::set_program(invoked_as());
}

fn invoked_as() -> String {
    let real = |p: std::path::PathBuf| p.canonicalize().ok();
    let Some(exe) = std::env::current_exe().ok().and_then(real) else { return "bankconf".into() };
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).map(|dir| dir.join("bankconf")).find(|p| p.is_file()).and_then(real)
    });
    if on_path.as_ref() == Some(&exe) {
        return "bankconf".into();
    }
    let below = std::env::current_dir()
        .ok()
        .and_then(real)
        .and_then(|cwd| exe.strip_prefix(cwd).ok().map(|rel| std::path::Path::new(".").join(rel)));
    sanitize::shell_word(&below.unwrap_or(exe).display().to_string())
}

/// Cancels the run on the first SIGINT or SIGTERM; on a second, kills what the run started and
/// exits at once. Once installed, the handler stays for the life of the process. It waits on a
/// thread and runtime of its own, so that a second signal ends the process at once even while
/// every worker of the run's runtime is busy (a browser being waited for as it is killed).
fn on_signals(cancel: Cancel) {
    use tokio::signal::unix::{signal, SignalKind};
    let (ready, installed) = std::sync::mpsc::channel();
    let watcher = move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async move {
            let signals = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
            let _ = ready.send(());
            let (Ok(mut interrupt), Ok(mut terminate)) = signals else { return };
            let mut next = async || {
                tokio::select! {
                    _ = interrupt.recv() => Signal::Interrupt,
                    _ = terminate.recv() => Signal::Terminate,
                }
            };
            let first = next().await;
            eprintln!(
                "bankconf: {}: stopping the cases and writing the reports (a second signal ends at once)",
                first.name()
            );
            cancel.fire(Cause::Interrupted(first));
            let second = next().await;
            orphans::kill_now();
            std::process::exit(second.exit_code());
        });
    };
    // Returns once the handlers are installed (or could not be), so that no signal that comes
    // after it meets the default action.
    if std::thread::Builder::new().name("bankconf-signals".into()).spawn(watcher).is_ok() {
        let _ = installed.recv();
    }
}

/// `cargo test --test conformance`: the run configured by the `BANKCONF_*` variables (the
/// embedded sandbox without `BANKCONF_BASE_URL`), as `test_main` runs it.
pub fn conformance_test() -> ExitCode {
    match RunConfig::from_env() {
        Ok(config) => test_main(config, Arguments::from_args()),
        Err(e) => {
            eprintln!("bankconf: bad BANKCONF_* configuration: {e}");
            ExitCode::from(2)
        }
    }
}

/// A conformance run as a `harness = false` test: libtest's filters select its cases, and
/// each case result is one trial ([`report::libtest`]). Exit 2 when the run cannot start.
/// Blocks on a runtime of its own (call it outside any async runtime).
pub(crate) fn test_main(mut config: RunConfig, args: Arguments) -> ExitCode {
    if args.list {
        return libtest_mimic::run(&args, report::libtest::listed()).exit_code();
    }
    if args.filter.is_some() || !args.skip.is_empty() {
        config.ids = selected_by(&args);
        if config.ids.is_empty() {
            return libtest_mimic::run(&args, report::libtest::listed()).exit_code();
        }
    }
    let embedded = config.base_url.is_none();
    let outputs = config.outputs.clone();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bankconf: no async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let cancel = Cancel::default();
    let report = runtime.block_on(async {
        on_signals(cancel.clone());
        runner::run_report_until(config, None, cancel).await
    });
    let visible = |text: &str| sanitize::visible(&report.redactor.redact(text));
    if let Some(e) = &report.setup_error {
        eprintln!("bankconf: {}", visible(&e.to_string()));
        return ExitCode::from(2);
    }
    eprintln!("bankconf: {} (seed {})", visible(&report.server), report.seed().unwrap_or_default());
    for note in &report.notes {
        eprintln!("bankconf: {}", visible(&note.to_string()));
    }
    if let Err(e) = report::write(&outputs, &report) {
        eprintln!("bankconf: {e}");
    }
    let tests = libtest_mimic::run(&args, report::libtest::trials(&report, embedded)).exit_code();
    // Interrupted: the signal's exit code (130, 143), once the trials are reported.
    match report.stopped {
        Some(Cause::Interrupted(signal)) => ExitCode::from(signal.exit_code() as u8),
        _ => tests,
    }
}

/// The case ids libtest's filter and `--skip` select, as libtest matches test names.
fn selected_by(args: &Arguments) -> Vec<String> {
    let hit = |pattern: &str, id: &str| if args.exact { id == pattern } else { id.contains(pattern) };
    catalogue::all()
        .iter()
        .filter(|c| !c.offline)
        .filter(|c| args.filter.as_deref().is_none_or(|f| hit(f, &c.id)))
        .filter(|c| !args.skip.iter().any(|s| hit(s, &c.id)))
        .map(|c| c.id.clone())
        .collect()
}
