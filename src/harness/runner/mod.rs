//! Runs cases: the one place that turns a catalogue entry into an outcome, used alike by
//! `bankconf run` and by `cargo test --test conformance`; and the whole run, from the session's
//! setup to the report.

pub(crate) mod causes;
mod consequences;
mod dispatch;
mod notes;
pub(crate) mod reproduce;
#[cfg(test)]
mod typed;

use crate::harness::checks;
use crate::harness::checks::Judged;
use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::expect::{Expectations, Standing};
use crate::harness::rules::verdict::{Origin, Report};
use crate::harness::runner::reproduce::{cite, reproduction, write_har};
use crate::harness::setup::config::RunConfig;
use crate::harness::setup::plan::RunPlan;
use crate::harness::setup::preflight;
use crate::harness::setup::session::Session;
use crate::harness::transport::har;
use crate::harness::vocab::cancel::{Cancel, Cause};
use crate::harness::vocab::catalogue::Selection;
use crate::harness::vocab::catalogue::{self, Case, Need};
use crate::harness::vocab::errors::SetupError;
use crate::harness::vocab::note::Note;
use crate::harness::vocab::outcome::{CaseResult, Consequence, ErrorSource, Gate, IgnoreCause, Outcome, Problems};
pub use crate::harness::vocab::progress::Progress;
use crate::harness::vocab::redact::Redactor;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sets up a session from its checked plan and runs the preflight; `Err` says why the run must
/// not start.
pub(crate) async fn start(plan: RunPlan) -> Result<Arc<RunContext>, SetupError> {
    let mut session = Session::setup(plan).await?;
    match preflight::check(&mut session).await {
        Ok(()) => Ok(RunContext::new(session)),
        Err(e) => {
            // The session's redactor knows the sandbox's keys and every token made so far.
            let e = e.redacted(&session.redactor);
            session.shutdown().await;
            Err(e)
        }
    }
}

/// Runs the selected cases and returns the report, telling `progress` as it goes. A run that
/// cannot start is a report with its `setup_error` (exit 2). Its only cancellation is its
/// deadline (`--deadline`); see `run_report_until`.
pub async fn run_report(config: RunConfig, progress: Option<Arc<dyn Progress>>) -> Report {
    run_report_until(config, progress, Cancel::default()).await
}

/// How long the cleanup of a run cut short may take (unregistering the webhook, closing the
/// browser): an interrupted run must end within seconds, whatever the driver does.
const CLEANUP: Duration = Duration::from_secs(5);

/// A task aborted when its handle is dropped: what a run spawned ends with it, even when the
/// run's own future is dropped (a library caller's cancellation).
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Drops with the run's future, done or dropped: from then on the run's browser starts no
/// more. Its flows are aborted, not stopped at once, and a widget flow not yet stopped takes
/// over the probe of one that was, and would start a browser that nothing closes.
struct ClosesBrowser(Arc<RunContext>);

impl Drop for ClosesBrowser {
    fn drop(&mut self) {
        self.0.browser.close_now();
    }
}

/// What every report of a run says, whatever became of it: taken from the plan before the
/// session owns it (or, for flags that do not validate, from the flags as given).
struct Frame {
    started: Instant,
    settings: String,
    gate: Gate,
    secrets: Redactor,
}

impl Frame {
    /// A report with no result: the run never got to its cases.
    fn empty(&self, setup_error: Option<SetupError>) -> Report {
        let mut report = Report::new(Origin::Run { seed: 0, settings: self.settings.clone() }, "", self.gate.clone());
        report.duration = self.started.elapsed();
        report.setup_error = setup_error;
        report.redactor = self.secrets.clone();
        report
    }

    /// The report of a run that must not start (exit 2); the error redacted with the flags'
    /// secrets (a setup error may quote a driver or a target that echoed a key).
    fn not_run(&self, setup_error: SetupError) -> Report {
        self.empty(Some(setup_error.redacted(&self.secrets)))
    }

    /// The report of a run cut short during its setup: every selected case is unfinished.
    fn cut(&self, cause: Cause, selection: &Selection) -> Report {
        let unfinished = Outcome::Ignored { cause: cause.ignore_cause(), reason: cause.unfinished() };
        let mut report = self.empty(None);
        let unfinished = catalogue::all()
            .iter()
            .filter(|c| selection.matches(c))
            .map(|case| CaseResult::new(case, unfinished.clone(), Duration::ZERO))
            .collect();
        report.results = with_left_out(unfinished, selection);
        report.notes =
            vec![Note::Said(format!("the run was cut short before its cases started: {}", cause.describe()))];
        report.stopped = Some(cause);
        report
    }
}

/// [`run_report`], cut short when `cancel` fires (a signal) or the deadline passes: no new work
/// starts, the running cases end ignored with the cause, the cleanup runs (bounded by
/// 5 s), and the report holds what was judged, with the cause in `stopped`. The flags are
/// checked first, once ([`RunConfig::validate`]); the rest of the run reads the plan.
pub(crate) async fn run_report_until(config: RunConfig, progress: Option<Arc<dyn Progress>>, cancel: Cancel) -> Report {
    let started = Instant::now();
    let plan = match config.validate() {
        Ok(plan) => plan,
        Err(e) => {
            let frame =
                Frame { started, settings: config.rerun_settings(), gate: config.gate(), secrets: config.secrets() };
            return frame.not_run(e);
        }
    };
    drop(config); // From here on, the plan alone.
    let _deadline = plan.deadline.map(|after| Aborting(cancel.deadline(after)));
    let frame = Frame { started, settings: plan.rerun.clone(), gate: plan.gate.clone(), secrets: plan.secrets.clone() };
    let short_keys = plan.short_keys.clone();
    // A broken expectations file is found before anything runs.
    let expectations = match plan.expect.as_deref().map(Expectations::load).transpose() {
        Ok(e) => e,
        Err(e) => return frame.not_run(e.into()),
    };
    let ctx = match set_up(plan, &cancel).await {
        Ok(ctx) => ctx,
        Err(Unstarted::Refused(e)) => return frame.not_run(e),
        Err(Unstarted::Cut(cause, selection)) => {
            let mut report = frame.cut(cause, &selection);
            report.expectations = expectations;
            return report;
        }
    };
    let _closes = ClosesBrowser(ctx.clone());
    let results = run_cases(&ctx, progress, &cancel, &frame.gate, expectations.as_ref()).await;
    let results = with_left_out(results, &ctx.plan.selection);
    // Cut short: some case was left unfinished (a cause that came after the last case is none).
    let stopped = cancel.cause().filter(|cause| results.iter().any(|r| ignored_by(r, *cause)));
    let mut notes = end_notes(&ctx, &results, stopped, &cancel, started, short_keys).await;
    notes.extend(narrowed_note(&ctx.plan.selection).map(Note::Said));
    let mut report = report_of(&ctx, frame, results, notes);
    (report.expectations, report.stopped) = (expectations, stopped);
    match cancel.cause() {
        None => ctx.shutdown().await,
        // What the bound cuts off ends as it drops (the browser and driver processes are killed).
        Some(_) => drop(tokio::time::timeout(CLEANUP, ctx.shutdown()).await),
    }
    report
}

/// Why a run got no session: the setup or preflight refused it (exit 2), or it was cut short
/// meanwhile (with the selection whose cases it leaves unfinished).
enum Unstarted {
    Refused(SetupError),
    Cut(Cause, Selection),
}

/// The setup and preflight, raced against `cancel`.
async fn set_up(plan: RunPlan, cancel: &Cancel) -> Result<Arc<RunContext>, Unstarted> {
    let selection = plan.selection.clone();
    tokio::select! {
        biased;
        ctx = start(plan) => ctx.map_err(Unstarted::Refused),
        cause = cancel.fired() => Err(Unstarted::Cut(cause, selection)),
    }
}

/// The selected cases, run with their heartbeats: the first deliveries awaited beside them (a
/// silent receiver said the moment it is known), and, with `progress`, the header, a line per
/// case and a waiting line each second.
async fn run_cases(
    ctx: &Arc<RunContext>,
    progress: Option<Arc<dyn Progress>>,
    cancel: &Cancel,
    gate: &Gate,
    expectations: Option<&Expectations>,
) -> Vec<CaseResult> {
    let cases = selected(ctx);
    let _heard = Aborting(tokio::spawn({
        let (ctx, progress) = (ctx.clone(), progress.clone());
        async move {
            if let (Err(diagnosis), Some(p)) = (ctx.heard().await, progress) {
                p.diagnosis(&ctx.redactor.redact(&diagnosis.to_string()));
            }
        }
    }));
    if let Some(p) = &progress {
        p.started(&ctx.server, ctx.seed, cases.len());
        if let Some(diagnosis) = &ctx.widget_missing {
            p.diagnosis(&diagnosis.to_string());
        }
    }
    let ticker = progress.clone().map(|p| {
        let ctx = ctx.clone();
        Aborting(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if let Some(status) = ctx.receiver().ok().and_then(|r| r.waiting(Duration::from_secs(2))) {
                    p.waiting(&status);
                }
            }
        }))
    });
    let results = dispatch::run_all(ctx.clone(), cases, cancel, |r: &CaseResult| {
        if let Some(p) = &progress {
            let expected = expectations.is_some_and(|e| e.standing(r) == Some(Standing::Held));
            p.finished(r, gate.gates(r.case.level), expected);
        }
    })
    .await;
    drop(ticker);
    if let Some(p) = &progress {
        p.done();
    }
    results
}

/// Notes only the end of the run can give: a run cut short, the first deliveries, late ones,
/// copies, 429s, the harness's own bounds; and the receiver unregistered (bounded when the run
/// was cut short), with what the driver said of it.
async fn end_notes(
    ctx: &RunContext,
    results: &[CaseResult],
    stopped: Option<Cause>,
    cancel: &Cancel,
    started: Instant,
    short_keys: Option<String>,
) -> Vec<Note> {
    let mut notes: Vec<Note> = Vec::new();
    if let Some(cause) = stopped {
        let unfinished = results.iter().filter(|r| ignored_by(r, cause)).count();
        notes.push(Note::Said(format!(
            "the run was cut short after {:.1} s ({}): {unfinished} unfinished cases are ignored; the reports hold what was judged",
            started.elapsed().as_secs_f64(),
            cause.describe()
        )));
    }
    // A run cut short does not wait for its first deliveries.
    let heard = tokio::select! {
        biased;
        _ = cancel.fired() => ctx.heard_now(),
        heard = ctx.heard() => Some(heard),
    };
    match heard {
        Some(Ok(heard)) => notes.extend(heard.iter().cloned().map(Note::Said)),
        Some(Err(diagnosis)) => notes.insert(0, Note::Silent(diagnosis.to_string())),
        None => {}
    }
    if let Ok(r) = ctx.receiver() {
        notes.extend(r.patience.late_note(|id| r.for_connection(id).len()).map(Note::Said));
        let all: Vec<_> = r.timeline().into_iter().map(|(_, d)| d).collect();
        notes.extend(notes::deliveries(&all, r.refused()).map(Note::Said));
        // A bound of the receiver cut what the event rules judge: said, never silent (issue 51).
        if r.refused() > 0 {
            notes.push(Note::Said(format!(
                "bounds: the event cases judged only the webhook deliveries the receiver kept{}",
                r.refusals()
            )));
        }
        if r.strays() > 0 {
            notes.push(Note::Said(format!(
                "{} webhook deliveries came to the listener at another path than this run's address (an earlier \
                 run's late webhooks?): not judged",
                r.strays()
            )));
        }
    }
    notes.extend(short_keys.map(Note::Said));
    notes.extend(ctx.api.throttle().note().map(Note::Said));
    notes.extend(ctx.notes());
    let unkept = ctx.api.answers().unkept();
    if unkept > 0 {
        notes.push(Note::Said(format!(
            "{unkept} answers were too large to keep within the memory budget: their response rules went unjudged"
        )));
    }
    let unregistered = match cancel.cause() {
        None => ctx.unregister_webhook().await,
        Some(_) => tokio::time::timeout(CLEANUP, ctx.unregister_webhook()).await.unwrap_or_else(|_| {
            Some(format!("the driver did not unregister the webhook receiver within {CLEANUP:?} of the run's end"))
        }),
    };
    notes.extend(unregistered.map(Note::Said));
    notes
}

/// The report of a run that judged its cases: the HAR written (a failure to write it is a
/// note), then what the reports cite from it, the trace and the root causes.
fn report_of(ctx: &RunContext, frame: Frame, mut results: Vec<CaseResult>, mut notes: Vec<Note>) -> Report {
    let deliveries: Vec<_> =
        ctx.receiver().map(|r| r.timeline().into_iter().map(|(_, d)| d).collect()).unwrap_or_default();
    let misnamed = crate::harness::checks::misnamed(ctx);
    let misnamed = misnamed.as_ref().map(|m| (crate::harness::checks::MISNAMED_OWNER, m.connection.as_str()));
    consequences::mark(&mut results, &ctx.api.answers().all(), &deliveries, misnamed);
    let har = write_har(ctx, &results, &mut notes);
    let trace = crate::harness::fixtures::recording::trace(ctx, frame.started, &results);
    let cited = cite(ctx, &results);
    let root_causes = crate::harness::runner::causes::find(&ctx.api.answers().all(), &deliveries, &results);
    let mut report =
        Report::new(Origin::Run { seed: ctx.seed, settings: frame.settings }, ctx.server.clone(), frame.gate);
    report.results = results;
    report.duration = frame.started.elapsed();
    report.notes = notes;
    report.transition_graph = ctx.graph().cloned();
    report.latency = ctx.api.recorder().latency.summary();
    report.har = har;
    report.redactor = ctx.redactor.clone();
    (report.trace, report.cited, report.root_causes) = (trace, cited, root_causes);
    report
}
/// Whether `result` is a case the cut-short run left unfinished.
fn ignored_by(result: &CaseResult, cause: Cause) -> bool {
    matches!(&result.outcome, Outcome::Ignored { cause: c, .. } if *c == cause.ignore_cause())
}

/// Runs one case's flow check: checks prerequisites and bounds it in time. The outcome is the
/// flow's alone; [`conclude`] adds what the response checks found.
async fn run_flow(ctx: Arc<RunContext>, case: &'static Case) -> Outcome {
    if let Some(reason) = ctx.missing(case) {
        return Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason };
    }
    if let (true, Some(diagnosis)) = (case.needs.contains(&Need::Service), &ctx.widget_missing) {
        return Outcome::Error { source: ErrorSource::Service, message: diagnosis.to_string() };
    }
    let Some(code) = checks::code_of(&case.id) else {
        return Outcome::Error { source: ErrorSource::Harness, message: format!("no code for case {}", case.id) };
    };
    // Generous: a case waits for events several times (each wait at most
    // `patience::MAX_WAIT`), and walks many pages.
    let waits = crate::harness::transport::patience::MAX_WAIT.max(ctx.plan.waits.event);
    let limit = Duration::from_secs(60) + waits * 6 + ctx.plan.waits.request * 2;
    // Aborted if this case is (the run cut short), so that its flow stops too.
    let mut task = Aborting(tokio::spawn(har::in_case(Some(case.id.as_str()), (code.flow)(ctx.clone()))));
    let outcome = match tokio::time::timeout(limit, &mut task.0).await {
        Ok(Ok(result)) => Outcome::from(result),
        Ok(Err(join)) => {
            Outcome::Error { source: ErrorSource::Harness, message: format!("the check stopped unexpectedly: {join}") }
        }
        // Slowness is not a violation the spec states (§8 fixes no time): not judged.
        Err(_) => {
            task.0.abort();
            Outcome::Ignored {
                cause: IgnoreCause::TimedOut,
                reason: format!(
                    "not judged: the case did not finish within {limit:?} (a slow target; see --event-timeout and --cases)"
                ),
            }
        }
    };
    // Silent webhooks are the setup's problem: an event case's outcome is this diagnosis.
    if case.needs.contains(&Need::Webhooks) {
        if let Err(diagnosis) = ctx.heard().await {
            return Outcome::Error { source: ErrorSource::Receiver, message: diagnosis.to_string() };
        }
    }
    outcome
}

/// A case's result: its flow's outcome and what its response checks found over the run's
/// answers (`None`: it has none). A violation an answer shows fails the case whatever its flow
/// concluded; a response-checked case whose rules judged no answer is not judged.
fn conclude(
    ctx: &RunContext,
    case: &'static Case,
    flow: Outcome,
    judged: Option<Judged>,
    duration: Duration,
) -> CaseResult {
    let mut consequence_of = None;
    let outcome = match (flow, judged) {
        // Blocked by another case's finding (issue 51): the same in every run, whatever it found;
        // nothing but that case's fix completes it.
        (flow, Some(Judged { blocked: Some(blocked), .. })) if !matches!(flow, Outcome::Error { .. }) => {
            let own = match &flow {
                Outcome::Failed(f) => format!("; its own flow: {f}"),
                Outcome::Ignored { reason, .. } => format!("; its own flow: {reason}"),
                _ => "; its own flow saw an event naming its connection, which may be another's".to_string(),
            };
            consequence_of = Some(Consequence { root: blocked.on.to_string(), foundation: blocked.foundation });
            Outcome::rests_on(blocked.on, &format!("{}{own}", blocked.why))
        }
        // Blocked, and its own flow ended in an error: the error stands (the caller may find
        // that the blocking finding explains it), never the findings the block set aside.
        (flow @ Outcome::Error { .. }, Some(Judged { blocked: Some(_), .. })) => flow,
        (flow, Some(judged)) if !judged.problems.is_empty() => {
            // The flow's failure first: its evidence leads.
            let mut problems = Problems::default();
            if let Outcome::Failed(f) = flow {
                problems.add(f);
            }
            for problem in judged.problems {
                problems.add(problem);
            }
            Outcome::from(problems.finish())
        }
        // Nothing failed in what was read, but a bound left out an answer its rules judge.
        (Outcome::Passed, Some(Judged { cut: Some(reason), .. })) => {
            Outcome::Ignored { cause: IgnoreCause::Bound, reason }
        }
        // Nothing failed, but a rule lacked its evidence (no delivery after the read it rests on).
        (Outcome::Passed, Some(Judged { unjudged: Some(reason), .. })) => {
            Outcome::Ignored { cause: IgnoreCause::NoDeliveries, reason }
        }
        (Outcome::Passed, Some(judged)) if judged.answers == 0 => {
            let reason = "no 2xx answer (or delivery) that its rules judge came in, so they went unjudged".to_string();
            Outcome::Ignored { cause: IgnoreCause::Unsupported, reason }
        }
        (flow, _) => flow,
    };
    let reproduction = match &outcome {
        Outcome::Failed(f) => reproduction(ctx, case, f).map(|r| ctx.redactor.redact(&r)),
        _ => None,
    };
    let outcome = outcome.map_text(|m| ctx.redactor.redact(m));
    CaseResult { case, outcome, duration, reproduction, consequence_of }
}

/// The results of a run with the cases its `--exclude` left out, in catalogue order: each one
/// chosen by the filter but left out is not run, and ignored with the flag that left it out
/// ([`catalogue::left_out`]), as `--skip-browser` leaves out the browser cases. So a gating case
/// excluded makes the run INCOMPLETE (exit 3) unless an expectations file expects it ignored, and
/// every report names the flag: a gate cannot be weakened without trace.
fn with_left_out(mut results: Vec<CaseResult>, selection: &Selection) -> Vec<CaseResult> {
    let left_out = catalogue::all().iter().filter(|c| selection.chosen(c)).filter_map(|case| {
        let how = format!("--exclude {}", selection.excluded_by(case)?);
        let outcome = Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason: catalogue::left_out(&how) };
        Some(CaseResult::new(case, outcome, Duration::ZERO))
    });
    results.extend(left_out);
    let at = |case: &Case| catalogue::all().iter().position(|c| std::ptr::eq(c, case)).unwrap_or(usize::MAX);
    results.sort_by_key(|r| at(r.case));
    results
}

/// A note on a run the filter narrowed (CASE, `--section`, `--level`): a rerun, or a run of one
/// area. Its verdict covers the cases chosen, alone; the reports list the others as not
/// selected, and the exit code is theirs (as nextest's and hurl's filters).
fn narrowed_note(selection: &Selection) -> Option<String> {
    let words = selection.filter_words();
    let runnable = catalogue::all().iter().filter(|c| !c.offline).count();
    let chosen = catalogue::all().iter().filter(|c| selection.chosen(c)).count();
    (!words.is_empty() && chosen < runnable).then(|| {
        format!(
            "selection: the filter `{words}` chose {chosen} of the {runnable} cases; the verdict covers those alone \
             ({} not selected)",
            runnable - chosen
        )
    })
}

/// The cases the configuration selects, in catalogue order.
pub(crate) fn selected(ctx: &RunContext) -> Vec<&'static Case> {
    let selection = &ctx.plan.selection;
    catalogue::all().iter().filter(|c| selection.matches(c)).collect()
}
