//! `cargo test`'s report of a finished run: one libtest trial per case result, read by
//! [`Report::reading`] (the rules of the exit code, case by case), plus `coverage.complete`,
//! which says what would complete an INCOMPLETE run. Nothing here judges or re-derives.

use super::verdict::{Reading, Report};
use crate::harness::vocab::catalogue;
use crate::harness::vocab::outcome::CaseResult;
use crate::harness::vocab::sanitize;
use libtest_mimic::{Completion, Failed, Trial};

/// The trial that fails when gating cases went unjudged (against the embedded sandbox, where
/// only this machine's tools can be missing, it is ignored instead).
pub(crate) const COVERAGE: &str = "coverage.complete";

/// The trials of `report`. `embedded`: the run judged the embedded sandbox.
pub(crate) fn trials(report: &Report, embedded: bool) -> Vec<Trial> {
    let mut trials: Vec<Trial> = report
        .results
        .iter()
        .map(|r| {
            let reading = report.reading(r).redacted(&report.redactor);
            Trial::ignorable_test(r.case.id.clone(), move || match reading {
                Reading::Pass => Ok(Completion::Completed),
                Reading::Note(note) => {
                    eprintln!("note: {}", sanitize::visible(&note));
                    Ok(Completion::Completed)
                }
                Reading::Ignore(why) => Ok(Completion::ignored_with(sanitize::visible(&why))),
                Reading::Fail(why) => Err(Failed::from(sanitize::visible(&why))),
            })
            .with_kind(r.case.level.as_str())
        })
        .collect();
    let gap = report.coverage_gap().map(|gap| report.redactor.redact(&gap));
    trials.push(
        Trial::ignorable_test(COVERAGE, move || match gap {
            None => Ok(Completion::Completed),
            Some(gap) if embedded => Ok(Completion::ignored_with(sanitize::visible(&gap))),
            Some(gap) => Err(Failed::from(sanitize::visible(&gap))),
        })
        .with_kind("coverage"),
    );
    trials
}

/// What the trial of `result` prints: its failure, its note or why it is ignored, as the
/// trials of `trials` print it (`None` when it passes).
pub fn printed(report: &Report, result: &CaseResult) -> Option<String> {
    match report.reading(result).redacted(&report.redactor) {
        Reading::Pass => None,
        Reading::Note(text) | Reading::Ignore(text) | Reading::Fail(text) => Some(sanitize::visible(&text)),
    }
}

/// The trials a run would have, for `--list` (nothing runs).
pub(crate) fn listed() -> Vec<Trial> {
    let cases = catalogue::all().iter().filter(|c| !c.offline);
    cases
        .map(|c| Trial::test(c.id.clone(), || Ok(())).with_kind(c.level.as_str()))
        .chain([Trial::test(COVERAGE, || Ok(())).with_kind("coverage")])
        .collect()
}
