//! What a case concludes, and the small vocabulary every layer above shares: the typed
//! [`Outcome`] of a case, the [`Stop`] a check returns with `?`, [`Problems`] to collect several
//! violations, schema validation, and [`CaseResult`]. It depends on nothing that does I/O, so
//! the pure rules, the runner and the reports can all use it.

use crate::harness::vocab::catalogue::{Case, Level};
use crate::schemas::{self, Schema};
use serde_json::Value;
use std::fmt;

pub use super::failure::{Contrast, Evidence, Failure, Problem};
use std::time::Duration;

/// Who could not judge a case (an error is never the target's fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorSource {
    /// The driver command failed (exit code other than 0, 3 or 4, or it could not start).
    Driver,
    /// The webhook receiver could not be set up or registered.
    Receiver,
    /// The harness itself: a check stopped unexpectedly.
    Harness,
    /// The widget script is not served where `--service` says (§1): a wrong `--service`, or a
    /// target that serves no widget; from outside the two look alike.
    Service,
}

impl ErrorSource {
    /// Its name in the reports (`driver`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Driver => "driver",
            Self::Receiver => "receiver",
            Self::Harness => "harness",
            Self::Service => "service",
        }
    }
}

/// Why a case was not judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoreCause {
    /// The configuration lacks what the case needs (driver, second key, service name…), or an
    /// earlier step it builds on did not happen.
    MissingPrerequisite,
    /// The target refused a transition from the connection's state (driver exit 4).
    RefusedByTarget,
    /// The target cannot do the action (driver exit 3), or the data has nothing to judge.
    Unsupported,
    /// The case did not finish within its time limit (slowness is not a violation).
    TimedOut,
    /// A request went unanswered: timeouts, refused or reset connections, or 429/503 past
    /// their budget (transport trouble is not evidence, §8).
    Transport,
    /// A rule rests on an event's absence, but no delivery reached the receiver after the read
    /// it concerns: deliveries stopped, so the absence is no evidence.
    NoDeliveries,
    /// The run was interrupted (SIGINT, SIGTERM) before the case finished.
    Interrupted,
    /// The run's deadline (`--deadline`) passed before the case finished.
    Deadline,
    /// A bound of the harness's own effort (items kept, bytes read, pages walked) cut what the
    /// case judges, and what was cut could hold the violation: judged in part, so not passed.
    Bound,
    /// Another case's failure blocks it: what it would find cannot be told apart from that
    /// failure's symptom, so it is not judged, in every run alike; nothing the user can do
    /// completes it but fixing that failure (its reason names that case).
    RestsOnFailure,
}

impl IgnoreCause {
    /// Its name in the reports (`missing-prerequisite`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingPrerequisite => "missing-prerequisite",
            Self::RefusedByTarget => "refused-by-target",
            Self::Unsupported => "unsupported",
            Self::TimedOut => "timed-out",
            Self::Transport => "transport",
            Self::NoDeliveries => "no-deliveries",
            Self::Interrupted => "interrupted",
            Self::Deadline => "deadline",
            Self::Bound => "bound",
            Self::RestsOnFailure => "rests-on-failure",
        }
    }
}

/// The mark of a case another case's failure blocks ([`Outcome::mark`]).
pub(crate) const RESTS: &str = "RESTS";

/// How the reason of a case another case's failure blocks starts ([`Outcome::rests_on`]).
pub(crate) const RESTS_ON: &str = "not judged: rests on ";

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The target kept the case's rule.
    Passed,
    /// The target broke the case's rule.
    Failed(Failure),
    /// The harness could not judge.
    Error {
        /// What broke.
        source: ErrorSource,
        /// How.
        message: String,
    },
    /// Not judged, with the cause.
    Ignored {
        /// Why, in a word.
        cause: IgnoreCause,
        /// Why, for a person (what would let the case run).
        reason: String,
    },
}

impl Outcome {
    /// `passed`, `failed`, `error` or `ignored`, as the JSON report names it.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed(_) => "failed",
            Self::Error { .. } => "error",
            Self::Ignored { .. } => "ignored",
        }
    }

    /// The error's message or the reason it was ignored (a failure has problems instead,
    /// which each report renders: [`Failure::problems`]).
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Passed | Self::Failed(_) => None,
            Self::Error { message: m, .. } | Self::Ignored { reason: m, .. } => Some(m),
        }
    }

    /// Whether it says the same as `other` (the same kind, and the same problems or message):
    /// the reports group cases that share a diagnosis by it.
    pub fn says_as(&self, other: &Outcome) -> bool {
        let words = |p: &Problem| (p.request.clone(), p.detail.clone(), p.contrast.clone());
        match (self, other) {
            (Self::Failed(a), Self::Failed(b)) => a.problems.iter().map(words).eq(b.problems.iter().map(words)),
            (a, b) => a.label() == b.label() && a.message() == b.message(),
        }
    }

    /// Whether the target broke the rule.
    pub fn is_failed(&self) -> bool {
        matches!(self, Self::Failed(_))
    }

    /// The same outcome with its text passed through `f` (redaction).
    pub(crate) fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            Self::Passed => Self::Passed,
            Self::Failed(Failure { problems, evidence, shrunk_input }) => Self::Failed(Failure {
                problems: problems
                    .into_iter()
                    .map(|p| Problem {
                        request: p.request.map(|r| f(&r)),
                        detail: f(&p.detail),
                        contrast: p
                            .contrast
                            .map(|c| Box::new(Contrast { expected: f(&c.expected), actual: f(&c.actual) })),
                        about: p.about.iter().map(|a| f(a)).collect(),
                        ..p
                    })
                    .collect(),
                evidence,
                shrunk_input: shrunk_input.map(|s| Box::new(f(&s))),
            }),
            Self::Error { source, message } => Self::Error { source, message: f(&message) },
            Self::Ignored { cause, reason } => Self::Ignored { cause, reason: f(&reason) },
        }
    }

    /// The one-word mark of the terminal: `PASS`, `FAIL` (gating), `NOTE` (a failure at a
    /// level that does not gate), `ERROR`, `RESTS` (not judged: it rests on another case's
    /// failure), `SKIP` (not judged for any other cause).
    pub fn mark(&self, gating: bool) -> &'static str {
        match (self, gating) {
            (Self::Passed, _) => "PASS",
            (Self::Failed(_), true) => "FAIL",
            (Self::Failed(_), false) => "NOTE",
            (Self::Error { .. }, _) => "ERROR",
            (Self::Ignored { cause: IgnoreCause::RestsOnFailure, .. }, _) => RESTS,
            (Self::Ignored { .. }, _) => "SKIP",
        }
    }

    /// Its kind in the reports' tables: [`Outcome::label`], but `rests-on-failure` for a case
    /// another case's failure blocks (the JSON report's `cause`, the same word everywhere).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Ignored { cause: IgnoreCause::RestsOnFailure, .. } => IgnoreCause::RestsOnFailure.as_str(),
            other => other.label(),
        }
    }

    /// Not judged because case `on` failed: `why` says how this case rests on it (`it rests on
    /// the pagination …`). Its reason reads `not judged: rests on <case>, which failed; …` in
    /// every report; what it rests on is a value apart ([`CaseResult::consequence_of`]).
    pub(crate) fn rests_on(on: &str, why: &str) -> Self {
        Self::Ignored { cause: IgnoreCause::RestsOnFailure, reason: format!("{RESTS_ON}{on}, which failed; {why}") }
    }
}

/// Why a check stopped before passing; checks return `Result<(), Stop>` and use `?`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    Fail(Failure),
    Error(ErrorSource, String),
    Ignore(IgnoreCause, String),
}

impl Stop {
    pub fn fail(message: impl Into<String>) -> Self {
        Self::Fail(Failure::from(message.into()))
    }

    /// A finding of `kind`, said as `message` ([`Problem::found`], about nothing named).
    pub(crate) fn found(kind: impl Into<super::kind::Kind>, message: impl Into<String>) -> Self {
        Self::Fail(Failure::from(Problem::found(kind, [], message.into())))
    }

    /// Not judged: something the case builds on is missing.
    pub fn ignore(reason: impl Into<String>) -> Self {
        Self::Ignore(IgnoreCause::MissingPrerequisite, reason.into())
    }

    /// Not judged: the data or the target offers nothing to judge.
    pub fn unsupported(reason: impl Into<String>) -> Self {
        Self::Ignore(IgnoreCause::Unsupported, reason.into())
    }

    pub fn is_fail(&self) -> bool {
        matches!(self, Self::Fail(_))
    }

    /// Not judged: the target did not answer a request (see [`IgnoreCause::Transport`]).
    pub fn transport(reason: impl Into<String>) -> Self {
        Self::Ignore(IgnoreCause::Transport, reason.into())
    }

    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Ignore(IgnoreCause::Transport, _))
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fail(failure) => failure.fmt(f),
            Self::Error(_, m) | Self::Ignore(_, m) => f.write_str(m),
        }
    }
}

impl From<Result<(), Stop>> for Outcome {
    fn from(result: Result<(), Stop>) -> Self {
        match result {
            Ok(()) => Self::Passed,
            Err(Stop::Fail(m)) => Self::Failed(m),
            Err(Stop::Error(source, message)) => Self::Error { source, message },
            Err(Stop::Ignore(cause, reason)) => Self::Ignored { cause, reason },
        }
    }
}

/// Fails with a finding of `kind` said as `message` unless `condition` holds ([`Stop::found`]).
pub(crate) fn ensure_found(
    kind: impl Into<super::kind::Kind>,
    condition: bool,
    message: impl FnOnce() -> String,
) -> Result<(), Stop> {
    if condition {
        Ok(())
    } else {
        Err(Stop::found(kind, message()))
    }
}

/// Fails unless `instance` validates against `schema`; `what` names where it came from.
pub(crate) fn validate(schema: Schema, instance: &Value, what: &str) -> Result<(), Stop> {
    schemas::check(schema, instance, what).map_err(Stop::fail)
}

/// Collects every problem instead of stopping at the first, then fails with them all (their
/// evidence together, the first problem's first).
#[derive(Default)]
pub(crate) struct Problems(Vec<Failure>);

impl Problems {
    pub(crate) fn add(&mut self, problem: impl Into<Failure>) {
        self.0.push(problem.into());
    }

    /// A problem that the answer `seq` shows (`http::Exchange::seq`).
    pub(crate) fn add_at(&mut self, seq: Option<u64>, problem: impl Into<Failure>) {
        self.0.push(problem.into().shown_by(seq));
    }

    /// A problem that rests on the answer `seq` without showing it alone (the events that
    /// followed a creation, a read against another): evidence, never a reproduction.
    pub(crate) fn add_citing(&mut self, seq: Option<u64>, problem: impl Into<Failure>) {
        self.0.push(problem.into().on_answer(seq));
    }

    /// Keeps a failure as a problem; an ignore or error still stops.
    pub(crate) fn keep(&mut self, result: Result<(), Stop>) -> Result<(), Stop> {
        match result {
            Err(Stop::Fail(f)) => {
                self.0.push(f);
                Ok(())
            }
            other => other,
        }
    }

    pub(crate) fn finish(self) -> Result<(), Stop> {
        let mut all = self.0.into_iter();
        let Some(mut first) = all.next() else { return Ok(()) };
        // Every one, each a problem of its own: the reports render them.
        for other in all {
            first.evidence.extend(&other.evidence);
            first.problems.extend(other.problems);
        }
        first.problems = super::failure::distinct(std::mem::take(&mut first.problems));
        Err(Stop::Fail(first))
    }
}

/// `1 case`, `2 cases`: a count with its noun in the right number, for every message.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A string field of a JSON object, if it is one.
pub(crate) fn str_field<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
    value.get(field).and_then(Value::as_str)
}

/// What a root finding broke that other findings rest on: the reads a rule compares are only
/// as good as the mechanism that made them (issue 74). A finding that rests on a broken
/// foundation is that root's consequence, shown under it, not a fault of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Foundation {
    /// The pages read by following `next_cursor` (§4.3): a walk that skips or repeats items
    /// makes every listing built from cursors unreliable, so a transaction "missing" from one
    /// may only be skipped.
    Pagination,
    /// Which connection an event names (§6.2 `connectionId`): events that name another
    /// connection make every rule that matches events to connections unreliable.
    EventConnection,
    /// Which object an id names (§2): an id that names two objects makes every comparison of
    /// two reads under that id unreliable.
    IdOwner,
}

impl Foundation {
    /// Its name in the reports (`pagination`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pagination => "pagination",
            Self::EventConnection => "event-connection",
            Self::IdOwner => "id-owner",
        }
    }

    /// What it is, for a person.
    pub fn what(self) -> &'static str {
        match self {
            Self::Pagination => "the pages read by following next_cursor (§4.3)",
            Self::EventConnection => "which connection an event names (§6.2)",
            Self::IdOwner => "which object an id names (§2)",
        }
    }
}

/// A case whose outcome follows from another case's failure: not judged because of it
/// ([`IgnoreCause::RestsOnFailure`]), or failed only on reads that rest on what the root broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consequence {
    /// The root case: its failure is the finding the run fails by.
    pub root: String,
    /// What the root broke that this case's reads rest on.
    pub foundation: Foundation,
}

/// The outcome of one case, with how long it took.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CaseResult {
    /// The case, from the catalogue.
    pub case: &'static Case,
    /// What it concluded.
    pub outcome: Outcome,
    /// How long it ran.
    pub duration: Duration,
    /// For a failure: a `curl` command replaying the last request the case sent (keys as
    /// `$BANKCONF_API_KEY`), and for property cases the seed in the message.
    pub reproduction: Option<String>,
    /// The root whose consequence this outcome is, when it is one: shown under that root in
    /// every report, and never a deviation of the `--expect` gate by itself (the root is).
    pub consequence_of: Option<Consequence>,
}

impl CaseResult {
    /// The result of `case`: its `outcome` after `duration`, with no reproduction (set it after).
    pub fn new(case: &'static Case, outcome: Outcome, duration: Duration) -> Self {
        Self { case, outcome, duration, reproduction: None, consequence_of: None }
    }
}

/// The levels whose failures decide the exit code: the one place that answers "does it gate?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate(pub Vec<Level>);

impl Gate {
    /// Whether a failure at `level` decides the exit code.
    pub fn gates(&self, level: Level) -> bool {
        self.0.contains(&level)
    }

    /// `must, security`, or `none`.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|l| l.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// Counts of outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// [`Outcome::Passed`].
    pub passed: usize,
    /// [`Outcome::Failed`].
    pub failed: usize,
    /// [`Outcome::Error`].
    pub errors: usize,
    /// [`Outcome::Ignored`].
    pub ignored: usize,
}

impl Counts {
    /// Counts `results` at `level` (all levels with `None`).
    pub fn of<'a>(results: impl IntoIterator<Item = &'a CaseResult>, level: Option<Level>) -> Self {
        let mut counts = Self::default();
        for r in results.into_iter().filter(|r| level.is_none_or(|l| r.case.level == l)) {
            match r.outcome {
                Outcome::Passed => counts.passed += 1,
                Outcome::Failed(_) => counts.failed += 1,
                Outcome::Error { .. } => counts.errors += 1,
                Outcome::Ignored { .. } => counts.ignored += 1,
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing said is lost: the message names every problem (only the terminal shortens it).
    #[test]
    fn problems_are_all_kept() {
        let mut problems = Problems::default();
        for n in 1..=5 {
            problems.add(format!("problem {n}"));
        }
        let Err(Stop::Fail(f)) = problems.finish() else { panic!("a failure") };
        let details: Vec<&str> = f.problems.iter().map(|p| p.detail.as_str()).collect();
        assert_eq!(details, ["problem 1", "problem 2", "problem 3", "problem 4", "problem 5"]);
    }

    /// Several problems fail once, with every problem's evidence, the first problem's first:
    /// the reports link and replay what the first finding rests on.
    #[test]
    fn problems_keep_the_evidence_of_each_the_first_leading() {
        let mut problems = Problems::default();
        problems.add_at(Some(7), "GET /v1/accounts/acc_1: expected 2xx, got status 500");
        problems.add(Failure::from("delivery evt_1: body is not JSON").on_delivery(3));
        problems.add_at(Some(2), "GET /v1/accounts/acc_2: expected 2xx, got status 500");
        problems.add_at(Some(7), "the same answer again");
        let Err(Stop::Fail(failure)) = problems.finish() else { panic!("a failure") };
        assert_eq!(*failure.evidence, Evidence { answers: vec![7, 2], deliveries: vec![3], ..Evidence::default() });
        assert!(failure.to_string().starts_with("4 problems: GET /v1/accounts/acc_1"), "{failure}");
    }

    /// Rewording keeps the evidence; redaction reaches what was expected and what came.
    #[test]
    fn a_reworded_or_redacted_failure_keeps_its_evidence() {
        let failure = Failure::from("x").on_answer(Some(1)).expected("2xx", "status 500: sk_live_secret");
        let failure = failure.reworded(|m| format!("after accounts.updated: {m}"));
        assert_eq!(failure.evidence.answers, [1]);
        let redacted = Outcome::Failed(failure).map_text(|t| t.replace("sk_live_secret", "[redacted]"));
        let Outcome::Failed(redacted) = redacted else { panic!("still a failure") };
        assert_eq!(redacted.contrast().map(|c| c.actual.as_str()), Some("status 500: [redacted]"));
        assert_eq!(redacted.evidence.answers, [1]);
    }
}
