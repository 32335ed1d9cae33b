//! The run's flows, dispatched and concluded apart (as nextest's executor and its reporter):
//! [`run_all`] runs every flow and hands each result to a [`Board`], the one place that decides
//! whether a case concludes as its flow ends or waits for the whole run's record.

use super::conclude;
use crate::harness::checks::{self, Judged};
use crate::harness::fixtures::context::RunContext;
use crate::harness::vocab::cancel::{Cancel, Cause};
use crate::harness::vocab::catalogue::Case;
use crate::harness::vocab::outcome::{CaseResult, ErrorSource, Outcome};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether the response checks of `case` judge the answers of the whole run.
fn responds(case: &Case) -> bool {
    checks::code_of(&case.id).is_some_and(checks::Registration::judges_answers)
}

/// Whether `case` concludes once every flow ended: the response checks judge every answer of
/// the run, another case's exploration may report a finding under it, and a case that events
/// naming other connections would block is judged on the whole run's record
/// (`checks::misnamed`).
fn deferred(case: &Case) -> bool {
    responds(case)
        || checks::receives_findings(&case.id)
        || checks::ON_EVENT_CONNECTION.contains(&case.id.as_str())
        || checks::reused::rests_on_connection_id(&case.id)
        || case.id == checks::reused::OWNER
        || case.id == checks::reused::ACCOUNT_OWNER
        || case.id == checks::reused::TRANSACTION_OWNER
}

/// The results of a run as its flows end, in catalogue order.
struct Board<'a, F: Fn(&CaseResult)> {
    ctx: &'a RunContext,
    cases: &'a [&'static Case],
    results: Vec<Option<CaseResult>>,
    /// The flows of deferred cases, with how long each took.
    flows: Vec<Option<(Outcome, Duration)>>,
    on_result: F,
}

impl<'a, F: Fn(&CaseResult)> Board<'a, F> {
    fn new(ctx: &'a RunContext, cases: &'a [&'static Case], on_result: F) -> Self {
        let n = cases.len();
        Self { ctx, cases, results: vec![None; n], flows: vec![None; n], on_result }
    }

    /// The flow of case `i` ended with `outcome`: concluded now, or kept for the end.
    fn settle(&mut self, i: usize, outcome: Outcome, took: Duration) {
        if deferred(self.cases[i]) {
            self.flows[i] = Some((outcome, took));
        } else {
            let result = conclude(self.ctx, self.cases[i], outcome, None, took);
            self.show(i, result);
        }
    }

    /// Every case whose flow did not end, settled with `outcome`.
    fn settle_the_rest(&mut self, outcome: impl Fn() -> Outcome, took: Duration) {
        for i in 0..self.cases.len() {
            if self.results[i].is_none() && self.flows[i].is_none() {
                self.settle(i, outcome(), took);
            }
        }
    }

    fn show(&mut self, i: usize, result: CaseResult) {
        (self.on_result)(&result);
        self.results[i] = Some(result);
    }

    /// The deferred cases concluded over `judged`, the record of the whole run. In a `deaf` run
    /// the findings an exploration reported under other cases are dropped: each rests on an
    /// event that did not arrive, and no delivery ever did (the reporter ends in the diagnosis).
    fn conclude_deferred(&mut self, mut judged: BTreeMap<&'static str, Judged>, stopped: Option<Cause>, deaf: bool) {
        let misnamed = checks::misnamed(self.ctx);
        let reused = checks::reused::reused(self.ctx);
        for i in 0..self.cases.len() {
            let Some((outcome, took)) = self.flows[i].take() else { continue };
            let case = self.cases[i];
            let mut found = responds(case).then(|| judged.remove(case.id.as_str()).unwrap_or_default());
            let reported = self.ctx.found_for(&case.id);
            if !reported.is_empty() && !deaf {
                found.get_or_insert_with(Default::default).problems.extend(reported);
            }
            // The case whose failure blocks this one, if one does (the last to block it): a
            // value (`Judged::blocked`) that `conclude` makes the outcome and the consequence of.
            if let Some(failed) = self.still_walk_failed() {
                checks::transactions::derive_under_changes(&case.id, failed, &mut found);
            }
            if let Some(m) = &misnamed {
                checks::derive_from_misnamed(&case.id, m, &mut found);
            }
            // Reused ids explain events that name one connection twice: theirs is the root finding.
            if let Some(r) = &reused {
                checks::reused::derive(&case.id, r, &mut found);
            }
            let mut result = conclude(self.ctx, case, outcome, found, took);
            if let Some(r) = &reused {
                checks::reused::over_driver_error(r, &mut result);
            }
            if let (Some(cause), Outcome::Passed, true) = (stopped, &result.outcome, responds(case)) {
                result.outcome = Outcome::Ignored {
                    cause: cause.ignore_cause(),
                    reason: format!("{}: its response rules judged only the answers read before", cause.unfinished()),
                };
            }
            self.show(i, result);
        }
    }

    /// The first walk of an account that does not change that failed, among the cases
    /// concluded so far (`checks::transactions::derive_under_changes`).
    fn still_walk_failed(&self) -> Option<&'static str> {
        checks::transactions::STILL_WALKS.into_iter().find(|id| {
            self.results.iter().flatten().any(|r| r.case.id == *id && matches!(r.outcome, Outcome::Failed(_)))
        })
    }

    fn finish(self) -> Vec<CaseResult> {
        let lost = || Outcome::Error { source: ErrorSource::Harness, message: "the case did not report".into() };
        self.results
            .into_iter()
            .zip(self.cases)
            .map(|(r, case)| r.unwrap_or_else(|| CaseResult::new(case, lost(), Duration::ZERO)))
            .collect()
    }
}

/// How the dispatch of the flows ended.
struct Ended {
    /// Whether the flows still running were aborted.
    aborted: bool,
    /// The preflight proved that no delivery reaches the receiver: why.
    deaf: Option<String>,
}

/// Runs every flow of `board`'s cases concurrently, settling each as it ends, until all ended
/// or `cancel` fired (the flows still running stop; those that finished meanwhile still count).
/// Whether the preflight's first deliveries are still awaited is watched too: once it proves
/// that none reaches the receiver (`deaf`), the run stops: the event cases cannot be judged,
/// and the setup is what to fix (exit 2), not a target to wait for.
async fn dispatch<F: Fn(&CaseResult)>(ctx: &Arc<RunContext>, board: &mut Board<'_, F>, cancel: &Cancel) -> Ended {
    let mut set = tokio::task::JoinSet::new();
    for (i, case) in board.cases.iter().copied().enumerate() {
        let ctx = ctx.clone();
        set.spawn(async move {
            let started = Instant::now();
            (i, super::run_flow(ctx, case).await, started.elapsed())
        });
    }
    let (mut ended, mut listening) = (Ended { aborted: false, deaf: None }, true);
    loop {
        let joined = tokio::select! {
            biased;
            joined = set.join_next() => match joined {
                Some(joined) => joined,
                None => break,
            },
            _ = cancel.fired(), if !ended.aborted => {
                set.abort_all();
                ended.aborted = true;
                continue;
            }
            heard = ctx.heard(), if listening && !ended.aborted => {
                listening = false;
                if let Err(diagnosis) = heard {
                    set.abort_all();
                    ended.aborted = true;
                    ended.deaf = Some(diagnosis.to_string());
                }
                continue;
            }
        };
        let Ok((i, outcome, took)) = joined else { continue };
        board.settle(i, outcome, took);
    }
    // The flows that awaited the diagnosis may all end before the select above sees it: the run
    // is deaf all the same, whichever came first.
    if let (None, false, Some(Err(diagnosis))) = (&ended.deaf, ended.aborted, ctx.heard_now()) {
        ended.deaf = Some(diagnosis.to_string());
    }
    ended
}

/// What the rules over the whole record found for the cases of `answered`: the response
/// checks (each answer read once, for both kinds of rule), the model rules and the invariants.
/// A run cut short does not wait for the deliveries a model's findings await: those findings
/// go unjudged; a deaf run judges no model nor invariant.
async fn judge_record(
    ctx: &RunContext,
    answered: &[&str],
    cancel: &Cancel,
    deaf: bool,
) -> BTreeMap<&'static str, Judged> {
    let (mut judged, reads) = checks::judge_responses(answered, &ctx.api.answers().all(), &ctx.api.answers().cut());
    let models = tokio::select! {
        biased;
        () = async {}, if deaf => Default::default(),
        models = checks::judge_models(ctx, answered, &reads) => models,
        _ = cancel.fired() => Default::default(),
    };
    let invariants = if deaf { Default::default() } else { checks::invariants::judge_record(ctx, answered) };
    for (id, found) in models.into_iter().chain(invariants) {
        let all = judged.entry(id).or_default();
        all.answers += found.answers;
        all.problems.extend(found.problems);
        all.unjudged = all.unjudged.take().or(found.unjudged);
        all.cut = all.cut.take().or(found.cut);
    }
    judged
}

/// Runs the flows of `cases` concurrently (they share only read-only fixtures), then the
/// response checks once over every answer the run read; results in catalogue order.
/// `on_result` sees each result when it is final: a case without response checks as its flow
/// ends, the others after the last flow. When `cancel` fires, the flows still running are
/// aborted and their cases ignored with its cause; the answers read so far are still judged,
/// and a violation they show still fails its case (a pass over part of the run is not one).
pub(crate) async fn run_all(
    ctx: Arc<RunContext>,
    cases: Vec<&'static Case>,
    cancel: &Cancel,
    on_result: impl Fn(&CaseResult),
) -> Vec<CaseResult> {
    let began = Instant::now();
    let mut board = Board::new(&ctx, &cases, on_result);
    let ended = dispatch(&ctx, &mut board, cancel).await;
    if let Some(diagnosis) = &ended.deaf {
        // One message for all, as the event cases that ended on it have: one diagnosis.
        let outcome = || Outcome::Error { source: ErrorSource::Receiver, message: diagnosis.clone() };
        board.settle_the_rest(outcome, began.elapsed());
    }
    let stopped = if ended.aborted && ended.deaf.is_none() { cancel.cause() } else { None };
    if let Some(cause) = stopped {
        let unfinished = || Outcome::Ignored { cause: cause.ignore_cause(), reason: cause.unfinished() };
        board.settle_the_rest(unfinished, began.elapsed());
    }
    let answered: Vec<&str> = cases.iter().filter(|c| responds(c)).map(|c| c.id.as_str()).collect();
    if !ended.aborted && ended.deaf.is_none() {
        let selected: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        let ends = futures::future::join(
            checks::last_look::last_look(&ctx, &answered),
            checks::events::creations_announced(&ctx, &selected),
        );
        tokio::select! {
            _ = ends => {}
            _ = cancel.fired() => {}
        }
    }
    let judged = judge_record(&ctx, &answered, cancel, ended.deaf.is_some()).await;
    board.conclude_deferred(judged, stopped, ended.deaf.is_some());
    board.finish()
}
