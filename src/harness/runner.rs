//! Runs cases: the one place that turns a catalogue entry into an outcome, used alike by
//! `bankconf run` and by `cargo test --test conformance`; and the whole run, from the session's
//! setup to the report.

use super::catalogue::{self, Case};
use super::checks;
use super::config::RunConfig;
use super::fixtures::RunContext;
use super::http;
use super::outcome::{CaseResult, ErrorSource, IgnoreCause, Outcome};
use super::report::{self, Origin, Report, EXIT_NOT_RUN};
use super::session::Session;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the selected cases and returns the report; with `progress`, prints the header and each
/// case as it finishes. `Err`: the run could not start, or no case matches the selection.
pub async fn run_report(config: RunConfig, progress: bool) -> Result<Report, String> {
    let started = Instant::now();
    let session = Session::setup(config).await.map_err(|e| format!("the run could not start: {e}"))?;
    let ctx = RunContext::new(session);
    let cases = selected(&ctx);
    if cases.is_empty() {
        ctx.shutdown().await;
        return Err("no case matches the selection".into());
    }
    if progress {
        println!("{}", report::terminal::header(&ctx.server, Some(ctx.seed), cases.len()));
    }
    let gate = ctx.config.gate();
    // A progress prefix for people at a terminal; CI logs (not a TTY) get the plain lines.
    let tty = std::io::stdout().is_terminal();
    let (total, done) = (cases.len(), AtomicUsize::new(0));
    let results = run_all(ctx.clone(), cases, |r| {
        if progress {
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            let prefix = if tty { report::terminal::progress(n, total) } else { String::new() };
            println!("{prefix}{}", report::terminal::case_line(r, gate.gates(r.case.level)));
            let _ = std::io::stdout().flush();
        }
    })
    .await;
    let report = Report {
        origin: Origin::Run { seed: ctx.seed },
        server: ctx.server.clone(),
        gate,
        results,
        duration: started.elapsed(),
        notes: Vec::new(),
    };
    ctx.shutdown().await;
    Ok(report)
}

/// `bankconf run`: runs the selected cases, prints and writes the reports, returns the exit code.
pub async fn run(config: RunConfig) -> i32 {
    let outputs = config.outputs.clone();
    match run_report(config, true).await {
        Ok(report) => report::finish(&report, &outputs),
        Err(e) => {
            eprintln!("bankconf: {e}");
            EXIT_NOT_RUN
        }
    }
}

/// Runs one case: checks prerequisites, bounds it in time, and redacts its message.
pub async fn run_case(ctx: Arc<RunContext>, case: &'static Case) -> CaseResult {
    let started = Instant::now();
    let mut last_request = None;
    let outcome = if let Some(reason) = ctx.missing(case) {
        Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason }
    } else if let Some(check) = checks::code_of(&case.id) {
        // Generous: a case waits for events several times, and walks many pages.
        let limit = Duration::from_secs(60) + ctx.config.event_wait() * 6 + ctx.config.request_wait() * 2;
        let mut task = tokio::spawn(http::recording(check(ctx.clone())));
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok((result, last))) => {
                last_request = last;
                Outcome::from(result)
            }
            Ok(Err(join)) => Outcome::Error {
                source: ErrorSource::Harness,
                message: format!("the check stopped unexpectedly: {join}"),
            },
            // Slowness is not a violation the spec states (§8 fixes no time): not judged.
            Err(_) => {
                task.abort();
                Outcome::Ignored {
                    cause: IgnoreCause::TimedOut,
                    reason: format!(
                        "not judged: the case did not finish within {limit:?} (a slow target; see --event-timeout and --cases)"
                    ),
                }
            }
        }
    } else {
        Outcome::Error { source: ErrorSource::Harness, message: format!("no code for case {}", case.id) }
    };
    let reproduction = match (&outcome, last_request) {
        (Outcome::Failed(_), Some(sent)) => Some(ctx.redactor.redact(&sent.curl())),
        _ => None,
    };
    let outcome = outcome.map_text(|m| ctx.redactor.redact(m));
    CaseResult { case, outcome, duration: started.elapsed(), reproduction }
}

/// The cases the configuration selects, in catalogue order.
pub fn selected(ctx: &RunContext) -> Vec<&'static Case> {
    let selection = ctx.config.selection();
    catalogue::all().iter().filter(|c| selection.matches(c)).collect()
}

/// Runs `cases` concurrently (they share only read-only fixtures); results in catalogue order.
pub async fn run_all(
    ctx: Arc<RunContext>,
    cases: Vec<&'static Case>,
    on_result: impl Fn(&CaseResult),
) -> Vec<CaseResult> {
    let mut set = tokio::task::JoinSet::new();
    for (i, case) in cases.iter().enumerate() {
        let ctx = ctx.clone();
        let case: &'static Case = case;
        set.spawn(async move { (i, run_case(ctx, case).await) });
    }
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    while let Some(joined) = set.join_next().await {
        if let Ok((i, result)) = joined {
            on_result(&result);
            results[i] = Some(result);
        }
    }
    results
        .into_iter()
        .zip(cases)
        .map(|(r, case)| {
            r.unwrap_or(CaseResult {
                case,
                outcome: Outcome::Error { source: ErrorSource::Harness, message: "the case did not report".into() },
                duration: Duration::ZERO,
                reproduction: None,
            })
        })
        .collect()
}
