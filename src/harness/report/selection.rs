//! What a run left out, and how, as every report records it (issue 76): a gate cannot be
//! weakened without trace.
//!
//! - **Left out on purpose**: the cases `--exclude` and `--skip-browser` leave out. They are
//!   results, ignored with the flag that left them out ([`catalogue::left_out`]): a gating one
//!   makes the run INCOMPLETE (exit 3) unless an expectations file expects it ignored.
//! - **Not selected**: the cases of `bankconf run` that the filter (CASE, `--section`,
//!   `--level`) did not choose: a rerun, or a run of one area. The verdict covers the cases
//!   chosen, and the exit code is theirs (as with nextest's and hurl's filters); the reports
//!   count the others.
//! - **Expected**: the gating cases whose outcome the `--expect` file expects, which do not
//!   decide the exit code.

use super::verdict::{Origin, Report};
use crate::harness::vocab::catalogue;
use crate::harness::vocab::outcome::{count, CaseResult, Outcome};
use serde_json::{json, Value};

/// What a run left out, read from its report.
pub(crate) struct LeftOut<'a> {
    /// The cases left out on purpose, by flag (`--exclude isolation.`, `--skip-browser`), in the
    /// order first met.
    pub on_purpose: Vec<(&'a str, Vec<&'a CaseResult>)>,
    /// The ids of the cases of `bankconf run` the filter did not select.
    pub not_selected: Vec<&'static str>,
    /// The gating cases whose outcome the `--expect` file expects.
    pub expected: Vec<&'a CaseResult>,
    /// The `--expect` file, as given.
    pub file: Option<&'a str>,
}

impl<'a> LeftOut<'a> {
    /// What `report` left out. A run that judged nothing (it could not start) and a capture
    /// check (`check-events`, whose cases are its own) select nothing, so leave out nothing.
    pub(crate) fn of(report: &'a Report) -> Self {
        let mut on_purpose: Vec<(&str, Vec<&CaseResult>)> = Vec::new();
        for r in &report.results {
            let Outcome::Ignored { reason, .. } = &r.outcome else { continue };
            let Some(how) = catalogue::left_out_by(reason) else { continue };
            match on_purpose.iter_mut().find(|(h, _)| *h == how) {
                Some((_, cases)) => cases.push(r),
                None => on_purpose.push((how, vec![r])),
            }
        }
        let run = matches!(report.origin, Origin::Run { .. }) && !report.results.is_empty();
        let not_selected = match run {
            true => catalogue::all()
                .iter()
                .filter(|c| !c.offline && !report.results.iter().any(|r| r.case.id == c.id))
                .map(|c| c.id.as_str())
                .collect(),
            false => Vec::new(),
        };
        let expected = report.expected().into_iter().map(|(r, _)| r).collect();
        let file = report.expectations.as_ref().map(|e| e.file.as_str());
        Self { on_purpose, not_selected, expected, file }
    }

    /// Whether the run left nothing out: every case of `bankconf run` was selected, none left
    /// out on purpose, none expected.
    pub(crate) fn is_none(&self) -> bool {
        self.on_purpose.is_empty() && self.not_selected.is_empty() && self.expected.is_empty()
    }

    /// How many of `cases` gate (their outcome decides the exit code).
    fn gating(report: &Report, cases: &[&CaseResult]) -> usize {
        cases.iter().filter(|r| report.gates(r)).count()
    }

    /// Each part of what was left out, in a few words: `17 left out by --exclude isolation. (5
    /// gating)`, `74 not selected`, `1 expected in expect.toml`.
    pub(crate) fn parts(&self, report: &Report) -> Vec<String> {
        let mut parts: Vec<String> = self
            .on_purpose
            .iter()
            .map(|(how, cases)| {
                let gating = match Self::gating(report, cases) {
                    0 => String::new(),
                    n => format!(" ({n} gating)"),
                };
                format!("{} left out by {how}{gating}", count(cases.len(), "case", "cases"))
            })
            .collect();
        if !self.not_selected.is_empty() {
            parts.push(format!("{} not selected", count(self.not_selected.len(), "case", "cases")));
        }
        if let (false, Some(file)) = (self.expected.is_empty(), self.file) {
            parts.push(format!("{} expected in {file}", count(self.expected.len(), "case", "cases")));
        }
        parts
    }

    /// The end of the verdict line: `; 17 cases left out by --exclude isolation. (5 gating)`;
    /// empty when nothing was left out.
    pub(crate) fn suffix(&self, report: &Report) -> String {
        match self.parts(report) {
            parts if parts.is_empty() => String::new(),
            parts => format!("; {}", parts.join(", ")),
        }
    }

    /// The `selection` object of the JSON report (`schemas/report.json`).
    pub(crate) fn json(&self, report: &Report) -> Value {
        let ids = |cases: &[&CaseResult]| cases.iter().map(|r| r.case.id.clone()).collect::<Vec<_>>();
        json!({
            "whole": self.is_none(),
            "left_out": self.on_purpose.iter().map(|(how, cases)| json!({
                "by": how,
                "cases": ids(cases),
                "gating": cases.iter().filter(|r| report.gates(r)).map(|r| r.case.id.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "not_selected": self.not_selected,
            "expected": ids(&self.expected),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::vocab::catalogue::Level;
    use crate::harness::vocab::outcome::{Gate, IgnoreCause};
    use std::time::Duration;

    fn report(results: Vec<CaseResult>) -> Report {
        let origin = Origin::Run { seed: 1, settings: String::new() };
        let mut report = Report::new(origin, "sandbox", Gate(vec![Level::Must, Level::Security]));
        report.results = results;
        report
    }

    fn ignored(id: &str, reason: &str) -> CaseResult {
        let case = catalogue::find(id).unwrap();
        let outcome = Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason: reason.into() };
        CaseResult::new(case, outcome, Duration::ZERO)
    }

    /// `--skip-browser` and `--exclude` are read back from the reasons; the cases the run did
    /// not hold are not selected; a whole run leaves nothing out.
    #[test]
    fn what_was_left_out_is_read_from_the_results() {
        let runnable: Vec<&'static str> =
            catalogue::all().iter().filter(|c| !c.offline).map(|c| c.id.as_str()).collect();
        let skipped = ignored("widget.script-runs", crate::harness::transport::browser::SKIPPED);
        let excluded = ignored("isolation.account", &catalogue::left_out("--exclude isolation."));
        let report = report(vec![skipped, excluded]);
        let left = LeftOut::of(&report);
        assert_eq!(left.on_purpose.len(), 2);
        assert_eq!(left.on_purpose[0].0, "--skip-browser");
        assert_eq!(left.on_purpose[1].0, "--exclude isolation.");
        assert_eq!(left.not_selected.len(), runnable.len() - 2);
        let suffix = left.suffix(&report);
        assert!(
            suffix.starts_with(
                "; 1 case left out by --skip-browser (1 gating), 1 case left out by --exclude isolation. (1 gating), "
            ),
            "{suffix}"
        );
        assert!(suffix.ends_with(" not selected"), "{suffix}");
        let whole = self::report(
            catalogue::all()
                .iter()
                .filter(|c| !c.offline)
                .map(|c| CaseResult::new(c, Outcome::Passed, Duration::ZERO))
                .collect(),
        );
        assert!(LeftOut::of(&whole).is_none() && LeftOut::of(&whole).suffix(&whole).is_empty());
        assert!(LeftOut::of(&self::report(Vec::new())).is_none(), "a run that never started selects nothing");
    }
}
