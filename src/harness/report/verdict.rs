//! The data every report renders: a finished run's results, its gate, and the verdict and
//! exit code they lead to.

use crate::harness::catalogue::Level;
use crate::harness::outcome::{CaseResult, Counts, Gate, Outcome};
use std::time::Duration;

/// Exit code: every gating case passed.
pub const EXIT_PASSED: i32 = 0;
/// Exit code: a gating case failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the run could not start, or no case ran.
pub const EXIT_NOT_RUN: i32 = 2;

/// What made a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `bankconf run`, with the seed of its property-based cases.
    Run { seed: u64 },
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
}

impl Report {
    /// The seed of a conformance run (none for a capture check).
    pub fn seed(&self) -> Option<u64> {
        match self.origin {
            Origin::Run { seed } => Some(seed),
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

    /// The command that replays one case (with the same target settings, flags or
    /// `BANKCONF_*` environment, as the original run).
    pub fn rerun(&self, result: &CaseResult) -> String {
        match &self.origin {
            Origin::Run { seed } => format!("bankconf run --seed {seed} {}", result.case.id),
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

    /// Whether a failure of this result decides the exit code.
    pub fn gates(&self, result: &CaseResult) -> bool {
        self.gate.gates(result.case.level)
    }

    /// 1 when a gating case failed; else 2 when a gating case could not be judged for an error
    /// (the setup's problem, never the target's) or nothing ran; else 0.
    pub fn exit_code(&self) -> i32 {
        let counts = self.counts(None);
        let gating = |pred: fn(&Outcome) -> bool| self.results.iter().any(|r| pred(&r.outcome) && self.gates(r));
        if gating(Outcome::is_failed) {
            EXIT_FAILED
        } else if counts.passed + counts.failed == 0 || gating(|o| matches!(o, Outcome::Error { .. })) {
            EXIT_NOT_RUN
        } else {
            EXIT_PASSED
        }
    }

    pub fn verdict(&self) -> &'static str {
        match self.exit_code() {
            EXIT_PASSED => "PASSED",
            EXIT_FAILED => "FAILED",
            _ if self.counts(None).errors > 0 => "ERROR",
            _ => "NOT RUN",
        }
    }
}

/// `word`, single-quoted for a POSIX shell when it needs it.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
