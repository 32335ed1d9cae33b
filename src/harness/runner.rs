//! Runs cases: the one place that turns a catalogue entry into an outcome, used alike by
//! `bankconf run` and by `cargo test --test conformance`; and the whole run, from the session's
//! setup to the report.

use super::catalogue::{self, Case};
use super::checks;
use super::config::RunConfig;
use super::expect::{Expectations, Standing};
use super::fixtures::RunContext;
use super::har::{self, Link};
use super::http;
use super::outcome::{CaseResult, ErrorSource, IgnoreCause, Outcome};
use super::preflight;
use super::report::{self, Origin, Report, EXIT_NOT_RUN};
use super::session::Session;
use super::{redact, sanitize};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sets up a session and runs the preflight; `Err` says why the run must not start.
pub async fn start(config: RunConfig) -> Result<(Arc<RunContext>, Vec<String>), String> {
    preflight::validate(&config)?;
    let selection = config.selection();
    catalogue::check_selection(&selection)?;
    let mut session = Session::setup(config).await.map_err(|e| format!("the run could not start: {e}"))?;
    match preflight::check(&mut session).await {
        Ok(notes) => Ok((RunContext::new(session), notes)),
        Err(e) => {
            session.shutdown().await;
            Err(format!("preflight: {e}"))
        }
    }
}

/// Runs the selected cases and returns the report; with `progress`, prints the header and each
/// case as it finishes. A run that cannot start is a report with its `setup_error` (exit 2).
pub async fn run_report(config: RunConfig, progress: bool) -> Report {
    let started = Instant::now();
    let (settings, gate) = (config.rerun_settings(), config.gate());
    let not_run = |setup_error: String| Report {
        origin: Origin::Run { seed: 0, settings: settings.clone() },
        server: String::new(),
        gate: gate.clone(),
        results: Vec::new(),
        duration: started.elapsed(),
        notes: Vec::new(),
        setup_error: Some(setup_error),
        transition_graph: None,
        expectations: None,
        latency: Default::default(),
        har: None,
    };
    // A broken expectations file is found before anything runs.
    let expectations = match config.expect.as_deref().map(Expectations::load).transpose() {
        Ok(e) => e,
        Err(e) => return not_run(e),
    };
    let (ctx, notes) = match start(config).await {
        Ok(started) => started,
        Err(e) => return not_run(e),
    };
    let cases = selected(&ctx);
    if progress {
        println!("{}", report::terminal::header(&ctx.server, Some(ctx.seed), cases.len()));
        for note in &notes {
            println!("{}", sanitize::visible(note));
        }
    }
    let gate = ctx.config.gate();
    // A progress prefix for people at a terminal; CI logs (not a TTY) get the plain lines.
    let tty = std::io::stdout().is_terminal();
    let (total, done) = (cases.len(), AtomicUsize::new(0));
    // At a terminal, a wait of over 2 s shows what it waits for on a line of its own, redrawn
    // each second and cleared by the next case line (never in CI logs).
    let ticker = (progress && tty).then(|| {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if let Some(status) = ctx.receiver().ok().and_then(|r| r.waiting(Duration::from_secs(2))) {
                    print!("\r\x1b[2K{}", sanitize::visible(&status));
                    let _ = std::io::stdout().flush();
                }
            }
        })
    });
    let results = run_all(ctx.clone(), cases, |r| {
        if progress {
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            let prefix = if tty { format!("\r\x1b[2K{}", report::terminal::progress(n, total)) } else { String::new() };
            let expected = expectations.as_ref().is_some_and(|e| e.standing(r) == Some(Standing::Held));
            println!("{prefix}{}", report::terminal::case_line(r, gate.gates(r.case.level) && !expected));
            let _ = std::io::stdout().flush();
        }
    })
    .await;
    if let Some(ticker) = ticker {
        ticker.abort();
        print!("\r\x1b[2K");
    }
    let results = attribute(results, &ctx);
    // Notes only the end of the run can give: late deliveries, 429s.
    let mut notes = notes;
    if let Ok(r) = ctx.receiver() {
        notes.extend(r.patience.late_note(|id| r.for_connection(id).len()));
    }
    notes.extend(ctx.api.throttle().note());
    notes.extend(ctx.unregister_webhook().await);
    let har = write_har(&ctx, &results, &mut notes);
    let report = Report {
        origin: Origin::Run { seed: ctx.seed, settings },
        server: ctx.server.clone(),
        gate,
        results,
        duration: started.elapsed(),
        notes,
        setup_error: None,
        transition_graph: ctx.graph().cloned(),
        expectations,
        latency: ctx.api.recorder().latency.summary(),
        har,
    };
    ctx.shutdown().await;
    report
}

/// Writes the `--har` file, if asked; returns it with where each failure's evidence is in it.
/// (Its path was checked writable before the run; a failure to write it now is a note.)
fn write_har(
    ctx: &RunContext,
    results: &[CaseResult],
    notes: &mut Vec<String>,
) -> Option<(String, BTreeMap<String, Link>)> {
    let path = ctx.config.har.as_ref()?;
    let recorder = ctx.api.recorder();
    if let Err(e) = recorder.write(path, &ctx.redactor) {
        notes.push(format!("the HAR was not written: {e}"));
        return None;
    }
    let links = results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(f) => Some((r.case.id.clone(), recorder.link(&r.case.id, &f.message)?)),
            _ => None,
        })
        .collect();
    Some((path.display().to_string(), links))
}

/// A case that passed although a read made for another case or fixture broke one of its
/// endpoint rules ([`http::Api::broken_rules`]) fails with that read: no violation hides.
pub fn attribute(mut results: Vec<CaseResult>, ctx: &RunContext) -> Vec<CaseResult> {
    let broken = ctx.api.broken_rules();
    for r in results.iter_mut().filter(|r| r.outcome == Outcome::Passed) {
        if let Some((violation, sent)) = broken.iter().find(|(v, _)| v.case_id == r.case.id) {
            let message = format!("{} (seen in a read made for another case or fixture)", violation.message);
            r.outcome = Outcome::Failed(ctx.redactor.redact(&message).into());
            r.reproduction = Some(ctx.redactor.redact(&sent.curl()));
        }
    }
    results
}

/// `bankconf run`: runs the selected cases, prints and writes the reports, returns the exit code.
/// Report files are checked writable before anything runs, and written on every exit.
pub async fn run(config: RunConfig) -> i32 {
    let outputs = config.outputs.clone();
    let har = config.har.as_deref().map_or(Ok(()), report::writable);
    if let Err(e) = report::check_writable(&outputs).and(har) {
        eprintln!("bankconf: {e}");
        return EXIT_NOT_RUN;
    }
    // No process a driver started outlives the run: the session's shutdown stops its driver.
    let report = run_report(config, true).await;
    if let Some(e) = &report.setup_error {
        eprintln!("bankconf: {}", sanitize::visible(&redact::Redactor::default().redact(e)));
    }
    report::finish(&report, &outputs)
}

/// Runs one case: checks prerequisites, bounds it in time, and redacts its message.
pub async fn run_case(ctx: Arc<RunContext>, case: &'static Case) -> CaseResult {
    let started = Instant::now();
    let mut log = Vec::new();
    let outcome = if let Some(reason) = ctx.missing(case) {
        Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason }
    } else if let Some(check) = checks::code_of(&case.id) {
        // Generous: a case waits for events several times (each wait at most
        // `patience::MAX_WAIT`), and walks many pages.
        let waits = super::patience::MAX_WAIT.max(ctx.config.event_wait());
        let limit = Duration::from_secs(60) + waits * 6 + ctx.config.request_wait() * 2;
        let in_case = har::in_case(Some(case.id.as_str()), {
            let ctx = ctx.clone();
            async move { http::recording(check(ctx)).await }
        });
        let mut task = tokio::spawn(in_case);
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok((result, sent))) => {
                log = sent;
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
    // The curl replays the request the failure names (else the case's last one).
    let reproduction = match &outcome {
        Outcome::Failed(f) => http::evidence(&f.message, &log).map(|sent| ctx.redactor.redact(&sent.curl())),
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
