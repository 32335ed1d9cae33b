//! The conformance run: configuration → context (target, driver, receiver) → cases → report.
//!
//! - [`catalogue`]: the cases of `cases/*.toml`; [`checks`]: their code, by spec area;
//! - [`context`]: one run's state and shared fixtures; [`tour`]: driven lifecycles;
//! - [`http`], [`pagination`], [`receiver`], [`driver`], [`chain`]: how the harness talks to
//!   and reasons about a target;
//! - [`runner`] runs cases, [`report`] writes what they found.

pub mod catalogue;
pub mod chain;
pub mod checks;
pub mod config;
pub mod context;
pub mod driver;
pub mod http;
pub mod outcome;
pub mod pagination;
pub mod receiver;
pub mod redact;
pub mod report;
pub mod runner;
pub mod tour;

use context::RunContext;
use report::{Report, EXIT_NOT_RUN};
use std::io::Write;
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
        println!("{}", report::terminal::header(&ctx.target, ctx.seed, cases.len()));
    }
    let gate = ctx.config.gate.clone();
    let results = runner::run_all(ctx.clone(), cases, |r| {
        if progress {
            println!("{}", report::terminal::case_line(r, gate.contains(&r.case.level)));
            let _ = std::io::stdout().flush();
        }
    })
    .await;
    let report = Report { target: ctx.target.clone(), seed: ctx.seed, gate, results, duration: started.elapsed() };
    ctx.shutdown().await;
    Ok(report)
}

/// `bankconf run`: runs the selected cases, prints and writes the reports, returns the exit code.
pub async fn run(config: config::RunConfig) -> i32 {
    let report_json = config.report_json.clone();
    let report = match run_report(config, true).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("bankconf: {e}");
            return EXIT_NOT_RUN;
        }
    };
    println!("{}", report::terminal::summary(&report));
    if let Some(path) = report_json {
        let text = serde_json::to_string_pretty(&report::json::render(&report)).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("bankconf: cannot write {}: {e}", path.display());
            return EXIT_NOT_RUN;
        }
    }
    report.exit_code()
}
