//! Reports of a run, side by side: the terminal lines and summary, the JSON report
//! (`schemas/report.json`), JUnit XML and a Markdown summary. All of them read one [`Report`],
//! made by `bankconf run` or by `bankconf check-events`.

pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;

use super::catalogue::Level;
use super::outcome::Outcome;
use super::runner::CaseResult;
use clap::Args;
use std::path::PathBuf;
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
    /// `embedded sandbox`, the base URL, or `capture FILE`.
    pub target: String,
    pub gate: Vec<Level>,
    pub results: Vec<CaseResult>,
    pub duration: Duration,
    /// Facts about the run worth a line in every report (never secrets).
    pub notes: Vec<String>,
}

/// Where the report files go: the flags shared by `run` and `check-events`.
#[derive(Args, Clone, Debug, Default)]
pub struct Outputs {
    /// Write the JSON report (`schemas/report.json`) to this file.
    #[arg(long, env = "BANKCONF_REPORT_JSON")]
    pub report_json: Option<PathBuf>,
    /// Write a JUnit XML report to this file (non-gating failures are not JUnit failures).
    #[arg(long, env = "BANKCONF_JUNIT")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary (for a CI job summary) to this file.
    #[arg(long, env = "BANKCONF_REPORT_MD")]
    pub report_md: Option<PathBuf>,
}

impl Outputs {
    /// Writes every report asked for; an error names the file that could not be written.
    pub fn write(&self, report: &Report) -> Result<(), String> {
        let files = [
            (&self.report_json, json::render_text(report)),
            (&self.junit, junit::render(report)),
            (&self.report_md, markdown::render(report)),
        ];
        for (path, text) in files {
            if let Some(path) = path {
                std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
        }
        Ok(())
    }
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
        let mut failed: Vec<&CaseResult> =
            self.results.iter().filter(|r| matches!(r.outcome, Outcome::Failed(_))).collect();
        failed.sort_by_key(|r| !self.gates(r));
        failed
    }

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

/// `word`, single-quoted for a POSIX shell when it needs it.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
