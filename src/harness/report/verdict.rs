//! The data every report renders: a finished run's results, its gate, and the verdict and
//! exit code they lead to.

use crate::harness::catalogue::Level;
use crate::harness::expect::{Expectations, Standing};
use crate::harness::graph::TransitionGraph;
use crate::harness::har::Link;
use crate::harness::latency;
use crate::harness::outcome::{CaseResult, Counts, Gate, IgnoreCause, Outcome};
use crate::harness::sanitize::shell_word;
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

/// What made a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `bankconf run`, with the seed of its property-based cases and the target settings of its
    /// rerun commands (`--base-url … --api-key "$BANKCONF_API_KEY"`; empty for the sandbox).
    Run { seed: u64, settings: String },
    /// `bankconf check-events FILE`.
    Capture { file: String },
}

/// A finished run.
pub struct Report {
    pub origin: Origin,
    /// What was judged: `embedded sandbox at …`, the base URL, or `capture FILE`.
    pub server: String,
    pub gate: Gate,
    pub results: Vec<CaseResult>,
    pub duration: Duration,
    /// Facts about the run worth a line in every report (never secrets).
    pub notes: Vec<String>,
    /// Why the run could not start or judge (preflight, configuration): exit 2.
    pub setup_error: Option<String>,
    /// The transition graph the target revealed, when `lifecycle.transition-graph` ran.
    pub transition_graph: Option<TransitionGraph>,
    /// The `--expect` file the run was judged with.
    pub expectations: Option<Expectations>,
    /// How fast the target answered and how late its webhooks came (not judged).
    pub latency: latency::Summary,
    /// The `--har` file, and where each failed case's evidence is in it.
    pub har: Option<(String, BTreeMap<String, Link>)>,
}

impl Report {
    /// `API answers: 412 samples, median …; webhook deliveries: …`, one line per kind seen.
    pub fn latency_lines(&self) -> Vec<String> {
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
        match &self.origin {
            Origin::Run { seed, settings } if settings.is_empty() => {
                format!("bankconf run --seed {seed} {}", result.case.id)
            }
            Origin::Run { seed, settings } => format!("bankconf run {settings} --seed {seed} {}", result.case.id),
            Origin::Capture { file } => format!("bankconf check-events {}", shell_word(file)),
        }
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
    pub fn standing(&self, result: &CaseResult) -> Option<Standing> {
        self.expectations.as_ref()?.standing(result)
    }

    /// The gating cases whose outcome the `--expect` file expects, each with the reason.
    pub fn expected(&self) -> Vec<(&CaseResult, &str)> {
        let Some(e) = &self.expectations else { return Vec::new() };
        self.results
            .iter()
            .filter(|r| self.gate.gates(r.case.level) && self.standing(r) == Some(Standing::Held))
            .filter_map(|r| Some((r, e.get(&r.case.id)?.reason.as_str())))
            .collect()
    }

    /// The deviations from the `--expect` file, one line each: expectations that no longer
    /// hold (stale) or have expired, at a gating level. Each fails the run.
    pub fn deviations(&self) -> Vec<(&CaseResult, String)> {
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

    /// 1 when a gating case failed or deviated from the `--expect` file (the target's
    /// problem, or a stale file); else 2 when the run could not start,
    /// nothing ran, or a gating case ended in an error (the setup's); else 3 when a gating case
    /// went unjudged (coverage); else 0.
    pub fn exit_code(&self) -> i32 {
        let counts = self.counts(None);
        let gating = |pred: fn(&Outcome) -> bool| self.results.iter().any(|r| pred(&r.outcome) && self.gates(r));
        if gating(Outcome::is_failed) || !self.deviations().is_empty() {
            EXIT_FAILED
        } else if self.setup_error.is_some()
            || counts.passed + counts.failed == 0
            || gating(|o| matches!(o, Outcome::Error { .. }))
        {
            EXIT_NOT_RUN
        } else if gating(|o| matches!(o, Outcome::Ignored { .. })) {
            EXIT_INCOMPLETE
        } else {
            EXIT_PASSED
        }
    }

    pub fn verdict(&self) -> &'static str {
        match self.exit_code() {
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
                Outcome::Error { source, .. } => format!("the {} failed: see each case's message", source.as_str()),
                _ => continue,
            };
            groups.entry(how).or_default().push(&r.case.id);
        }
        groups.into_iter().collect()
    }
}
