//! What decided a run's verdict, as a value the terminal renders (issue 74: no report reads
//! back the words it wrote to place them).

use super::expect::Standing;
use super::verdict::{Report, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_NOT_RUN, EXIT_PASSED};
use crate::harness::vocab::outcome::{count, Outcome};
use std::fmt;

/// What decided the verdict of a run ([`Report::decided`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Nothing to add to the verdict (a plain PASSED).
    Nothing,
    /// Why it failed, stopped, or could not judge, one clause each: `2 gating failures`,
    /// `3 consequences of them`.
    Because(Vec<String>),
    /// It passed, the `--expect` file's outcomes held: `3 expected failures`.
    With(String),
}

impl fmt::Display for Decided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nothing => Ok(()),
            Self::Because(reasons) => f.write_str(&reasons.join(" and ")),
            Self::With(held) => write!(f, "with {held}"),
        }
    }
}

impl Report {
    /// What decided the verdict, for the last line of the terminal: `2 gating failures` (the
    /// roots), `3 consequences of them`, `1 expectation no longer holds`, `with 3 expected
    /// failures`.
    pub fn decided(&self) -> Decided {
        let gating =
            |pred: fn(&Outcome) -> bool| self.results.iter().filter(|r| pred(&r.outcome) && self.gates(r)).count();
        let mut reasons = Vec::new();
        match self.judged_code() {
            EXIT_FAILED => {
                let failed = gating(Outcome::is_failed);
                let following = gating_consequences(self);
                if failed > following {
                    reasons.push(count(failed - following, "gating failure", "gating failures"));
                }
                if following > 0 {
                    reasons.push(count(following, "consequence", "consequences") + " of them");
                }
                let deviations = self.deviations();
                let stale =
                    deviations.iter().filter(|(r, _)| self.standing(r) == Some(Standing::NoLongerHolds)).count();
                if stale > 0 {
                    reasons.push(count(stale, "expectation no longer holds", "expectations no longer hold"));
                }
                if deviations.len() > stale {
                    reasons.push(count(deviations.len() - stale, "expectation expired", "expectations expired"));
                }
            }
            EXIT_INCOMPLETE => {
                if let Some(cause) = self.stopped {
                    reasons.push(cause.describe());
                }
                let ignored = gating(|o| matches!(o, Outcome::Ignored { .. }));
                reasons.push(count(ignored, "gating case", "gating cases") + " not judged");
            }
            EXIT_NOT_RUN if self.setup_error.is_some() => {
                reasons.push("the run could not start (setup error above)".into())
            }
            EXIT_NOT_RUN if self.counts(None).errors > 0 => {
                reasons.push(count(gating(|o| matches!(o, Outcome::Error { .. })), "gating case", "gating cases"));
                reasons[0] += " could not be judged (errors)";
            }
            EXIT_NOT_RUN => reasons.push("no case was judged".into()),
            _ => {}
        }
        let held = self.expected();
        if !held.is_empty() && self.judged_code() == EXIT_PASSED {
            let all_failed = held.iter().all(|(r, _)| r.outcome.is_failed());
            let (one, many) = if all_failed {
                ("expected failure", "expected failures")
            } else {
                ("expected outcome", "expected outcomes")
            };
            return Decided::With(count(held.len(), one, many));
        }
        match reasons.is_empty() {
            true => Decided::Nothing,
            false => Decided::Because(reasons),
        }
    }
}

/// The gating failures that are consequences of a root ([`CaseResult::consequence_of`]).
fn gating_consequences(report: &Report) -> usize {
    report.results.iter().filter(|r| r.outcome.is_failed() && report.gates(r) && r.consequence_of.is_some()).count()
}
