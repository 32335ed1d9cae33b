//! The data every report renders: a finished run's results, its gate, and the verdict and
//! exit code they lead to.

use crate::harness::rules::expect::{Expectations, Standing};
use crate::harness::rules::graph::TransitionGraph;
use crate::harness::rules::latency;
use crate::harness::rules::trace::Trace;
use crate::harness::vocab::cancel::Cause;
use crate::harness::vocab::catalogue::Level;
use crate::harness::vocab::errors::SetupError;
use crate::harness::vocab::note::Note;
use crate::harness::vocab::outcome::{CaseResult, Counts, ErrorSource, Failure, Gate, IgnoreCause, Outcome};
use crate::harness::vocab::redact::Redactor;
use crate::harness::vocab::sanitize::shell_word;
use std::collections::BTreeMap;
use std::time::Duration;

/// Exit code: every gating case passed. Whose problem each code is: 1 the target's, 2 the
/// setup's, 3 coverage's.
pub const EXIT_PASSED: i32 = 0;
/// Exit code: a gating case failed: the target broke a rule.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the setup's problem: the run could not start (configuration, preflight, a report
/// file that cannot be written), no case ran, or a gating case ended in an error.
pub const EXIT_NOT_RUN: i32 = 2;
/// Exit code: no gating case failed, but some went unjudged (ignored): the run is INCOMPLETE.
pub const EXIT_INCOMPLETE: i32 = 3;

/// How a rerun command calls bankconf: `bankconf` unless the binary said otherwise
/// ([`set_program`]).
static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the program of every rerun command this process prints: the binary gives the path it
/// was run by (`./target/release/bankconf`) when `bankconf` on PATH is not itself, so that a
/// pasted rerun works. A fact of the process, not of a run: set once, by `main` alone.
pub(crate) fn set_program(word: String) {
    let _ = PROGRAM.set(word);
}

/// The program word of a rerun or replay: `bankconf`, or what `main` named ([`set_program`]).
pub(crate) fn program() -> &'static str {
    PROGRAM.get().map_or("bankconf", String::as_str)
}

/// The mark of an outcome the `--expect` file expects (see [`Report::mark`]).
pub(crate) const KNOWN: &str = "KNOWN";

/// What made a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `bankconf run`, with the seed of its property-based cases and the target settings of its
    /// rerun commands (`--base-url … --api-key "$BANKCONF_API_KEY"`; empty for the sandbox).
    Run {
        /// The seed of the property-based cases (`--seed` repeats the run).
        seed: u64,
        /// The target settings of a rerun command.
        settings: String,
    },
    /// `bankconf check-events FILE`.
    Capture {
        /// The capture file, as given.
        file: String,
    },
}

/// Where a case's evidence is in the HAR: the entry its failure names (else its latest) and how
/// many it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Its index in `log.entries` (`jq '.log.entries[N]'`).
    pub entry: usize,
    /// Its `_id` (the order it was recorded in).
    pub id: u64,
    pub entries: usize,
}

/// One thing a failure rests on, named as a user finds it: by its request and the `_id` of its
/// entry in the written HAR, or by its event's `id` and `type` and its HAR entry. The HAR ids are
/// those of the file written (none without `--report-har`, or past its budget).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cited {
    /// A request the harness sent: `GET /v1/accounts/acc_1`, and the status of its answer (0
    /// when none came).
    Request { request: String, status: u16, har: Option<u64> },
    /// A webhook delivery: its event's `id` and `type` as sent (absent from a malformed body).
    Delivery { event: Option<String>, kind: Option<String>, har: Option<u64> },
    /// An item the widget's page received, by where it came from (`GET <url>`, `a postMessage
    /// payload`, `the onSuccess metadata`): its text is never shown.
    Received { what: String },
}

impl Cited {
    /// `GET /v1/accounts/acc_1 → 200 (HAR _id 12)`, `delivery evt_1 accounts.updated (HAR _id 40)`.
    pub fn describe(&self) -> String {
        let har = |id: &Option<u64>| id.map(|id| format!(" (HAR _id {id})")).unwrap_or_default();
        match self {
            Self::Request { request, status: 0, har: id } => format!("{request} → no answer{}", har(id)),
            Self::Request { request, status, har: id } => format!("{request} → {status}{}", har(id)),
            Self::Delivery { event, kind, har: id } => format!(
                "delivery {} {}{}",
                event.as_deref().unwrap_or("(no id)"),
                kind.as_deref().unwrap_or("(no type)"),
                har(id)
            ),
            Self::Received { what } => format!("the widget's page received {what}"),
        }
    }
}

pub use super::roots::RootCause;

/// Most items of a failure's evidence a line names; the JSON report lists them all.
const CITED_IN_A_LINE: usize = 4;

/// A finished run: what [`Conformance::run`](crate::Conformance::run) returns, and what every
/// report format renders. Its other fields (the transition graph, the `--expect` file, latency,
/// the HAR's links, why the run was cut short) are the report formats' own, hidden here;
/// [`summary`](crate::summary) renders them.
///
/// ```no_run
/// # async fn example() {
/// let report = bankconf::Conformance::new("http://127.0.0.1:8080").api_key("acme_test_1").run().await;
/// for result in report.failures() {
///     if let bankconf::Outcome::Failed(failure) = &result.outcome {
///         for problem in &failure.problems {
///             println!("{} ({}): {}", result.case.id, result.case.section, problem.text());
///         }
///     }
/// }
/// if report.exit_code() != bankconf::EXIT_PASSED {
///     eprintln!("{}", bankconf::summary(&report));
/// }
/// # }
/// ```
#[non_exhaustive]
pub struct Report {
    /// What made the report.
    pub origin: Origin,
    /// What was judged: `embedded sandbox at …`, the base URL, or `capture FILE`.
    pub server: String,
    /// The levels whose failures decide the exit code.
    pub gate: Gate,
    /// One result per case of the run.
    pub results: Vec<CaseResult>,
    /// How long the run took.
    pub duration: Duration,
    /// Facts about the run worth a line in every report (never secrets), as values each
    /// report renders.
    pub notes: Vec<Note>,
    /// Why the run could not start or judge (preflight, configuration): exit 2.
    pub setup_error: Option<SetupError>,
    /// The transition graph the target revealed, when `lifecycle.transition-graph` ran.
    #[doc(hidden)]
    pub transition_graph: Option<TransitionGraph>,
    /// The `--expect` file the run was judged with.
    #[doc(hidden)]
    pub expectations: Option<Expectations>,
    /// How fast the target answered and how late its webhooks came (not judged).
    #[doc(hidden)]
    pub latency: latency::Summary,
    /// The `--report-har` file, and where each failed case's evidence is in it.
    #[doc(hidden)]
    pub har: Option<(String, BTreeMap<String, Link>)>,
    /// Why the run was cut short (a signal, its deadline), if it was: its unfinished cases are
    /// ignored with this cause, and the run is INCOMPLETE at best.
    #[doc(hidden)]
    pub stopped: Option<Cause>,
    /// The run's secrets: every report passes each string it writes through it, whatever made
    /// the string (a setup error, a note, a driver's words), as the last step of its rendering.
    #[doc(hidden)]
    pub redactor: Redactor,
    /// What the run did, in time, and the failures' evidence, for the HTML report.
    #[doc(hidden)]
    pub trace: Trace,
    /// Per failed case, what its failure rests on, named as the written files name it.
    #[doc(hidden)]
    pub cited: BTreeMap<String, Vec<Cited>>,
    /// Facts of the run that may explain several failures at once, said before them.
    #[doc(hidden)]
    pub root_causes: Vec<RootCause>,
}

impl Report {
    /// A report made by `origin`, of `server`, gated by `gate`, and nothing else yet (no result,
    /// no note, no time): the one way to make one (the type is `#[non_exhaustive]`); set the
    /// fields a run fills afterwards.
    pub fn new(origin: Origin, server: impl Into<String>, gate: Gate) -> Self {
        Self {
            origin,
            server: server.into(),
            gate,
            results: Vec::new(),
            duration: Duration::ZERO,
            notes: Vec::new(),
            setup_error: None,
            transition_graph: None,
            expectations: None,
            latency: Default::default(),
            har: None,
            stopped: None,
            redactor: Redactor::default(),
            trace: Trace::default(),
            cited: BTreeMap::new(),
            root_causes: Vec::new(),
        }
    }

    /// `API answers: 412 samples, median …; webhook deliveries: …`, one line per kind seen.
    pub(crate) fn latency_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(s) = self.latency.api {
            lines.push(format!("latency of API answers: {}", s.line()));
        }
        if let Some(s) = self.latency.webhooks {
            lines.push(format!(
                "latency of webhook deliveries (from the triggering request or driver call): {}",
                s.line()
            ));
        }
        if self.latency.requests + self.latency.deliveries > 0 {
            lines.push(format!(
                "traffic: {} API requests sent, {} webhook deliveries received",
                self.latency.requests, self.latency.deliveries
            ));
        }
        lines
    }

    /// `evidence (context, not a reproduction): …` for a failure that no pasted command
    /// reproduces: what it rests on, for a person to look up in the HAR or the receiver's log.
    pub fn context(&self, result: &CaseResult) -> Option<String> {
        if result.reproduction.is_some() || !result.outcome.is_failed() {
            return None;
        }
        let cited = self.cited.get(&result.case.id).filter(|c| !c.is_empty())?;
        let mut items: Vec<String> = cited.iter().take(CITED_IN_A_LINE).map(Cited::describe).collect();
        if cited.len() > CITED_IN_A_LINE {
            items.push(format!("and {} more (the JSON report lists them)", cited.len() - CITED_IN_A_LINE));
        }
        Some(format!("evidence (context, not a reproduction): {}", items.join("; ")))
    }

    /// The seed of a conformance run (none for a capture check).
    pub fn seed(&self) -> Option<u64> {
        match self.origin {
            Origin::Run { seed, .. } => Some(seed),
            Origin::Capture { .. } => None,
        }
    }

    /// The subcommand that made the report.
    pub fn command(&self) -> &'static str {
        match self.origin {
            Origin::Run { .. } => "run",
            Origin::Capture { .. } => "check-events",
        }
    }

    /// The command that replays one case against the same target, secrets as `$BANKCONF_*`.
    pub fn rerun(&self, result: &CaseResult) -> String {
        self.rerun_cases(&[result.case.id.as_str()])
    }

    /// The command that replays these cases against the same target, pasteable as is.
    pub fn rerun_cases(&self, ids: &[&str]) -> String {
        let ids = ids.join(" ");
        match &self.origin {
            Origin::Run { seed, settings } if settings.is_empty() => format!("{} run --seed {seed} {ids}", program()),
            Origin::Run { seed, settings } => format!("{} run {settings} --seed {seed} {ids}", program()),
            Origin::Capture { file } => format!("{} check-events {}", program(), shell_word(file)),
        }
    }

    /// The one-word mark of a result in every report: `PASS`, `FAIL` (gating), `NOTE` (a failure
    /// at a level that does not gate), `ERROR`, `RESTS` (another case's failure blocks it), `SKIP`,
    /// or `KNOWN` (the `--expect` file expects this outcome, so it does not decide the exit code).
    pub fn mark(&self, result: &CaseResult) -> &'static str {
        match self.standing(result) {
            Some(Standing::Held) if self.gate.gates(result.case.level) => KNOWN,
            _ => result.outcome.mark(self.gates(result)),
        }
    }

    /// The failed and errored cases a person should act on, gating ones first, each group
    /// sharing one diagnosis (the same mark and message: a setup problem many cases ran into).
    /// Outcomes the `--expect` file expects are left out (they are listed as expected).
    pub(crate) fn to_act_on(&self) -> Vec<(&'static str, Vec<&CaseResult>)> {
        let mut groups: Vec<(&'static str, Vec<&CaseResult>)> = Vec::new();
        let mut acted: Vec<&CaseResult> = self
            .results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_) | Outcome::Error { .. }))
            .filter(|r| self.mark(r) != KNOWN && r.consequence_of.is_none())
            .collect();
        acted.sort_by_key(|r| (!self.gates(r), !r.outcome.is_failed()));
        for r in acted {
            let mark = self.mark(r);
            match groups.iter_mut().find(|(m, cases)| *m == mark && cases[0].outcome.says_as(&r.outcome)) {
                Some((_, cases)) => cases.push(r),
                None => groups.push((mark, vec![r])),
            }
        }
        groups
    }

    /// The failures, gating ones first.
    pub fn failures(&self) -> Vec<&CaseResult> {
        let mut failed: Vec<&CaseResult> = self.results.iter().filter(|r| r.outcome.is_failed()).collect();
        failed.sort_by_key(|r| !self.gates(r));
        failed
    }

    /// Counts at `level`, or over all levels.
    pub fn counts(&self, level: Option<Level>) -> Counts {
        Counts::of(&self.results, level)
    }

    /// The counts-by-level table of every report: each level, its counts, whether it gates.
    pub fn by_level(&self) -> impl Iterator<Item = (Level, Counts, bool)> + '_ {
        Level::ALL.into_iter().map(|level| (level, self.counts(Some(level)), self.gate.gates(level)))
    }

    /// Whether a failure of this result decides the exit code: its level gates, and its
    /// outcome is not the one the `--expect` file expects.
    pub fn gates(&self, result: &CaseResult) -> bool {
        self.gate.gates(result.case.level) && self.standing(result) != Some(Standing::Held)
    }

    /// How `result` stands against the `--expect` file, if the file has a line for it.
    /// A consequence ([`CaseResult::consequence_of`]) is held when its root is, or has a line (issue 74).
    pub(crate) fn standing(&self, result: &CaseResult) -> Option<Standing> {
        let expectations = self.expectations.as_ref()?;
        if let Some(c) = &result.consequence_of {
            let root = self.results.iter().find(|r| r.case.id == c.root);
            let root_held = root.is_some_and(|r| expectations.standing(r) == Some(Standing::Held));
            if root_held || expectations.get(&result.case.id).is_some() {
                return Some(Standing::Held);
            }
        }
        expectations.standing(result)
    }

    /// The gating cases whose outcome the `--expect` file expects, each with the reason.
    pub(crate) fn expected(&self) -> Vec<(&CaseResult, &str)> {
        let Some(e) = &self.expectations else { return Vec::new() };
        self.results
            .iter()
            .filter(|r| self.gate.gates(r.case.level) && self.standing(r) == Some(Standing::Held))
            .filter_map(|r| Some((r, e.get(&r.case.id)?.reason.as_str())))
            .collect()
    }

    /// The deviations from the `--expect` file, one line each: expectations that no longer
    /// hold (stale) or have expired, at a gating level. Each fails the run.
    pub(crate) fn deviations(&self) -> Vec<(&CaseResult, String)> {
        let Some(e) = &self.expectations else { return Vec::new() };
        self.results
            .iter()
            .filter(|r| self.gate.gates(r.case.level))
            .filter_map(|r| {
                let line = e.get(&r.case.id)?;
                let said = format!("expected {} ({})", line.outcome.as_str(), line.reason);
                let how = match self.standing(r)? {
                    Standing::Held => return None,
                    Standing::NoLongerHolds => format!(
                        "{said}, now {}: the expectation no longer holds; remove its line from {}",
                        r.outcome.label(),
                        e.file
                    ),
                    Standing::Expired => format!(
                        "{said} expired on {}: renew or remove its line in {} (now {})",
                        line.expires.map(|d| d.to_string()).unwrap_or_default(),
                        e.file,
                        r.outcome.label()
                    ),
                };
                Some((r, how))
            })
            .collect()
    }

    /// The process's exit code: 130 or 143 when a signal interrupted the run (as a shell
    /// reports a process the signal ended, whatever was judged), else [`Report::judged_code`].
    pub fn exit_code(&self) -> i32 {
        match self.stopped {
            Some(Cause::Interrupted(signal)) => signal.exit_code(),
            _ => self.judged_code(),
        }
    }

    /// What the results decide: 1 when a gating case failed or deviated from the `--expect` file
    /// (the target's problem, or a stale file); else 2 when the run could not start, or (run
    /// whole) nothing ran or a gating case ended in an error (the setup's); else 3 when the run
    /// was cut short (signal, deadline) or a gating case went unjudged (coverage); else 0.
    pub fn judged_code(&self) -> i32 {
        let counts = self.counts(None);
        let gating = |pred: fn(&Outcome) -> bool| self.results.iter().any(|r| pred(&r.outcome) && self.gates(r));
        if gating(Outcome::is_failed) || !self.deviations().is_empty() {
            EXIT_FAILED
        } else if self.setup_error.is_some() {
            EXIT_NOT_RUN
        } else if self.stopped.is_some() {
            EXIT_INCOMPLETE
        } else if counts.passed + counts.failed == 0 || gating(|o| matches!(o, Outcome::Error { .. })) {
            EXIT_NOT_RUN
        } else if gating(|o| matches!(o, Outcome::Ignored { .. })) {
            EXIT_INCOMPLETE
        } else {
            EXIT_PASSED
        }
    }

    /// The verdict of the run's last line, from [`Report::judged_code`]: `PASSED`, `FAILED`,
    /// `INCOMPLETE`, or for exit code 2 `ERROR` (some cases ended in an error) or `NOT RUN`.
    pub fn verdict(&self) -> &'static str {
        match self.judged_code() {
            EXIT_PASSED => "PASSED",
            EXIT_FAILED => "FAILED",
            EXIT_INCOMPLETE => "INCOMPLETE",
            _ if self.counts(None).errors > 0 => "ERROR",
            _ => "NOT RUN",
        }
    }

    /// The gating cases that went unjudged, grouped by what would complete the run: each group
    /// says how, and names its cases.
    pub fn unjudged(&self) -> Vec<(String, Vec<&str>)> {
        let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for r in self.results.iter().filter(|r| self.gates(r)) {
            let how = match &r.outcome {
                Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason } => reason.clone(),
                Outcome::Ignored { cause: IgnoreCause::RefusedByTarget, .. } => {
                    "the target refused a transition (driver exit 4): drive the connection there, or list the case in an --expect file".into()
                }
                Outcome::Ignored { cause: IgnoreCause::Unsupported, .. } => {
                    "the target cannot do the action (driver exit 3) or offered nothing to judge: see each case's reason".into()
                }
                Outcome::Ignored { cause: IgnoreCause::TimedOut, .. } => {
                    "the case ran out of time: raise --event-timeout or lower --cases".into()
                }
                Outcome::Ignored { cause: IgnoreCause::Transport, .. } => {
                    "the target left requests unanswered (timeouts, dropped connections, 429/503): see the robustness note".into()
                }
                Outcome::Ignored { cause: IgnoreCause::Interrupted, .. } => {
                    "the run was interrupted before these cases finished: run them again".into()
                }
                Outcome::Ignored { cause: IgnoreCause::Deadline, .. } => {
                    "the run's deadline passed before these cases finished: raise --deadline".into()
                }
                // The receiver itself works: the target did not reach it, or it could not be
                // registered. The message says what was proven and what to check.
                Outcome::Error { source: ErrorSource::Receiver, .. } => {
                    "webhook deliveries did not reach the receiver, or it could not be registered (the setup): see each case's message".into()
                }
                Outcome::Error { source, .. } => format!("the {} failed: see each case's message", source.as_str()),
                // Blocked by another case's failure: nothing completes it but fixing that one.
                Outcome::Ignored { cause: IgnoreCause::RestsOnFailure, .. } => continue,
                _ => continue,
            };
            groups.entry(how).or_default().push(&r.case.id);
        }
        groups.into_iter().collect()
    }

    /// How `result` reads as one test of `cargo test`: the same rules as [`Report::exit_code`],
    /// case by case. `what` heads each message (`id (§4.3, must)`).
    pub(crate) fn reading(&self, result: &CaseResult) -> Reading {
        let what = format!("{} ({}, {})", result.case.id, result.case.section, result.case.level);
        if let Some((_, how)) = self.deviations().into_iter().find(|(r, _)| r.case.id == result.case.id) {
            return Reading::Fail(format!("{what}: {how}"));
        }
        if let Some((_, reason)) = self.expected().into_iter().find(|(r, _)| r.case.id == result.case.id) {
            return Reading::Ignore(format!("expected {}: {reason}", result.outcome.label()));
        }
        let gating = self.gate.gates(result.case.level);
        let reproduce = match (&result.reproduction, self.context(result)) {
            (Some(c), _) => format!("\n  reproduce: {c}"),
            (None, Some(context)) => format!("\n  {context}"),
            (None, None) => String::new(),
        };
        match &result.outcome {
            Outcome::Passed => Reading::Pass,
            Outcome::Failed(f) if gating => {
                Reading::Fail(format!("{what}: {}{reproduce}\n  rerun: {}", listed(f), self.rerun(result)))
            }
            Outcome::Failed(f) => Reading::Note(format!("{what}, not gating: {}", listed(f))),
            Outcome::Error { source, message } if gating => {
                Reading::Fail(format!("{what}: ERROR ({}, not the target's fault): {message}", source.as_str()))
            }
            Outcome::Error { source, message } => Reading::Ignore(format!("error ({}): {message}", source.as_str())),
            Outcome::Ignored { reason, .. } => Reading::Ignore(reason.clone()),
        }
    }

    /// What would complete an INCOMPLETE run, one line per group of unjudged gating cases;
    /// `None` when every gating case was judged.
    pub fn coverage_gap(&self) -> Option<String> {
        let groups = self.unjudged();
        (!groups.is_empty()).then(|| {
            let lines: Vec<String> = groups.iter().map(|(how, ids)| format!("  {how}: {}", ids.join(", "))).collect();
            format!("the run is INCOMPLETE: gating cases went unjudged\n{}", lines.join("\n"))
        })
    }
}

/// How one case's result reads as a test ([`Report::reading`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    Pass,
    /// Passes, with a note (a failure at a level that does not gate).
    Note(String),
    /// Not judged, or judged as the `--expect` file expects: reported ignored, with why.
    Ignore(String),
    Fail(String),
}

/// A failure as `cargo test` prints it: its one problem, or how many and each on a line of its
/// own (the lines of a problem's own text indented under it).
fn listed(failure: &Failure) -> String {
    match failure.problems.as_slice() {
        [one] => one.text(),
        many => {
            let each: Vec<String> =
                many.iter().map(|p| format!("\n  - {}", p.text().replace('\n', "\n    "))).collect();
            format!("{} problems:{}", many.len(), each.concat())
        }
    }
}

impl Reading {
    /// The same reading, its text passed through `redactor`.
    pub(crate) fn redacted(self, redactor: &Redactor) -> Self {
        match self {
            Self::Pass => Self::Pass,
            Self::Note(text) => Self::Note(redactor.redact(&text)),
            Self::Ignore(text) => Self::Ignore(redactor.redact(&text)),
            Self::Fail(text) => Self::Fail(redactor.redact(&text)),
        }
    }
}
