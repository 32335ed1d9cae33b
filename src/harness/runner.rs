//! Runs cases: the one place that turns a catalogue entry into an outcome, used alike by
//! `bankconf run` and by `cargo test --test conformance`.

use super::catalogue::{self, Case};
use super::checks;
use super::context::RunContext;
use super::http;
use super::outcome::Outcome;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The outcome of one case, with how long it took.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub case: &'static Case,
    pub outcome: Outcome,
    pub duration: Duration,
    /// For a failure: a `curl` command replaying the last request the case sent (keys as
    /// `$BANKCONF_API_KEY`), and for property cases the seed in the message.
    pub reproduction: Option<String>,
}

/// Runs one case: checks prerequisites, bounds it in time, and redacts its message.
pub async fn run_case(ctx: Arc<RunContext>, case: &'static Case) -> CaseResult {
    let started = Instant::now();
    let mut last_request = None;
    let outcome = if let Some(reason) = ctx.missing(case) {
        Outcome::Ignored(reason)
    } else if let Some(check) = checks::check(&case.id) {
        // Generous: a case waits for events several times, and walks many pages.
        let limit = Duration::from_secs(60) + ctx.config.event_wait() * 6 + ctx.config.request_wait() * 2;
        let mut task = tokio::spawn(http::recording(check(ctx.clone())));
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok((result, last))) => {
                last_request = last;
                Outcome::from(result)
            }
            Ok(Err(join)) => Outcome::Failed(format!("the check stopped unexpectedly: {join}")),
            // Slowness is not a violation the spec states (§8 fixes no time): not judged.
            Err(_) => {
                task.abort();
                Outcome::Ignored(format!(
                    "not judged: the case did not finish within {limit:?} (a slow target; see --event-timeout and --cases)"
                ))
            }
        }
    } else {
        Outcome::Failed(format!("no code for case {}", case.id))
    };
    let reproduction = match (&outcome, last_request) {
        (Outcome::Failed(_), Some(sent)) => Some(ctx.redactor.redact(&sent.curl())),
        _ => None,
    };
    let outcome = match outcome {
        Outcome::Failed(m) => Outcome::Failed(ctx.redactor.redact(&m)),
        Outcome::Ignored(m) => Outcome::Ignored(ctx.redactor.redact(&m)),
        Outcome::Passed => Outcome::Passed,
    };
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
                outcome: Outcome::Failed("the case did not report".into()),
                duration: Duration::ZERO,
                reproduction: None,
            })
        })
        .collect()
}
