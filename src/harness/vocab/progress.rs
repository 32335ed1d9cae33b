//! What a run tells as it goes: the one interface between the runner, which calls it, and the
//! terminal's progress lines (`report::progress`), which implement it. It sits below both, so
//! that reports never import the runner.

use crate::harness::vocab::outcome::CaseResult;

/// What a run tells as it goes (the terminal's progress lines). The runner only calls it.
pub trait Progress: Send + Sync {
    /// The run started: `cases` cases against `server`.
    fn started(&self, server: &str, seed: u64, cases: usize);
    /// A case's result is final; `gating` says whether its level gates, `expected` whether the
    /// `--expect` file expects its outcome.
    fn finished(&self, result: &CaseResult, gating: bool, expected: bool);
    /// Every second: what the run waits for, when it has waited over 2 s.
    fn waiting(&self, status: &str);
    /// The setup is wrong in a way found only while cases run (no webhook delivery reaches the
    /// receiver): said at once, before the cases it turns into errors end.
    fn diagnosis(&self, _message: &str) {}
    /// The last case is done.
    fn done(&self);
}
