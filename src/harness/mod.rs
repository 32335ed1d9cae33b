//! The conformance run: configuration → context (target, driver, receiver) → cases → report.
//!
//! - [`catalogue`]: the cases of `cases/*.toml`; [`checks`]: their code, by spec area;
//! - [`context`]: one run's state and shared fixtures; [`tour`]: driven lifecycles;
//! - [`http`], [`pagination`], [`receiver`], [`driver`], [`chain`]: how the harness talks to
//!   and reasons about a target;
//! - [`runner`] runs cases, [`report`] writes what they found.

pub mod browser;
pub mod capture;
pub mod catalogue;
pub mod chain;
pub mod checks;
pub mod config;
pub mod context;
pub mod driver;
pub mod http;
pub mod judge;
pub mod lifecycle;
pub mod outcome;
pub mod pagination;
pub mod property;
pub mod receiver;
pub mod redact;
pub mod report;
pub mod runner;
pub mod tour;

use context::RunContext;
use report::{Origin, Report, EXIT_NOT_RUN};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Runs the selected cases and returns the report; with `progress`, prints the header and each
/// case as it finishes. `Err`: the run could not start, or no case matches the selection.
pub async fn run_report(config: config::RunConfig, progress: bool) -> Result<Report, String> {
    let started = Instant::now();
    let ctx = RunContext::setup(config).await.map_err(|e| format!("the run could not start: {e}"))?;
    let cases = runner::selected(&ctx);
    if cases.is_empty() {
        ctx.shutdown().await;
        return Err("no case matches the selection".into());
    }
    if progress {
        println!("{}", report::terminal::header(&ctx.target, Some(ctx.seed), cases.len()));
    }
    let gate = ctx.config.gate.clone();
    // A progress prefix for people at a terminal; CI logs (not a TTY) get the plain lines.
    let tty = std::io::stdout().is_terminal();
    let (total, done) = (cases.len(), AtomicUsize::new(0));
    let results = runner::run_all(ctx.clone(), cases, |r| {
        if progress {
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            let prefix = if tty { report::terminal::progress(n, total) } else { String::new() };
            println!("{prefix}{}", report::terminal::case_line(r, gate.contains(&r.case.level)));
            let _ = std::io::stdout().flush();
        }
    })
    .await;
    let report = Report {
        origin: Origin::Run { seed: ctx.seed },
        target: ctx.target.clone(),
        gate,
        results,
        duration: started.elapsed(),
        notes: Vec::new(),
    };
    ctx.shutdown().await;
    Ok(report)
}

/// `bankconf run`: runs the selected cases, prints and writes the reports, returns the exit code.
pub async fn run(config: config::RunConfig) -> i32 {
    let outputs = config.outputs.clone();
    match run_report(config, true).await {
        Ok(report) => finish(&report, &outputs),
        Err(e) => {
            eprintln!("bankconf: {e}");
            EXIT_NOT_RUN
        }
    }
}

/// Prints the summary, writes the report files, and returns the exit code (2 when a file
/// cannot be written).
pub fn finish(report: &Report, outputs: &report::Outputs) -> i32 {
    println!("{}", report::terminal::summary(report));
    if let Err(e) = outputs.write(report) {
        eprintln!("bankconf: {e}");
        return EXIT_NOT_RUN;
    }
    report.exit_code()
}
