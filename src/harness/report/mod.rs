//! Reports of a run, side by side: the terminal summary and the JSON report (more formats
//! join here). All of them read one [`Report`].

pub mod json;
pub mod terminal;

use super::catalogue::Level;
use super::outcome::Outcome;
use super::runner::CaseResult;
use std::time::Duration;

/// Exit code: every gating case passed.
pub const EXIT_PASSED: i32 = 0;
/// Exit code: a gating case failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the run could not start, or no case ran.
pub const EXIT_NOT_RUN: i32 = 2;

/// A finished run.
pub struct Report {
    pub target: String,
    pub seed: u64,
    pub gate: Vec<Level>,
    pub results: Vec<CaseResult>,
    pub duration: Duration,
}

/// Counts of outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
}

impl Counts {
    fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Failed(_) => self.failed += 1,
            Outcome::Ignored(_) => self.ignored += 1,
        }
    }
}

impl Report {
    pub fn counts(&self) -> Counts {
        self.counts_where(|_| true)
    }

    pub fn counts_at(&self, level: Level) -> Counts {
        self.counts_where(|r| r.case.level == level)
    }

    fn counts_where(&self, keep: impl Fn(&CaseResult) -> bool) -> Counts {
        let mut counts = Counts::default();
        for r in self.results.iter().filter(|r| keep(r)) {
            counts.add(&r.outcome);
        }
        counts
    }

    /// Whether a failure of this result decides the exit code.
    pub fn gates(&self, result: &CaseResult) -> bool {
        self.gate.contains(&result.case.level)
    }

    pub fn exit_code(&self) -> i32 {
        let counts = self.counts();
        if counts.passed + counts.failed == 0 {
            EXIT_NOT_RUN
        } else if self.results.iter().any(|r| matches!(r.outcome, Outcome::Failed(_)) && self.gates(r)) {
            EXIT_FAILED
        } else {
            EXIT_PASSED
        }
    }

    pub fn verdict(&self) -> &'static str {
        match self.exit_code() {
            EXIT_PASSED => "PASSED",
            EXIT_FAILED => "FAILED",
            _ => "NOT RUN",
        }
    }
}
