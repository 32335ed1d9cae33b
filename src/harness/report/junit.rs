//! The JUnit XML report (`--report-junit`), for CI test tabs and test reporters.
//!
//! - One `<testsuite>` per spec area, one `<testcase>` per case: `classname` is the area
//!   (`transactions`), `name` the case id; `section`, `level` and `gating` are properties.
//! - A gating failure is a `<failure>` (`type` = the level) whose body holds the message, the
//!   `curl` reproduction (keys as `$BANKCONF_API_KEY`) and the `bankconf` command that replays it.
//! - An ignored case is `<skipped>` with its reason, counted in the `skipped` attribute of its
//!   `<testsuite>` and of `<testsuites>` (never as `disabled`, which JUnit reserves for tests
//!   turned off in the code).
//! - A failure at a level outside the gate (advisory, robustness by default) is **not** a JUnit
//!   failure, since test reporters turn any `<failure>` red: the testcase passes, with property
//!   `outcome` = `failed`, and the same details in its `<system-out>`, which starts with `NOTE`.
//!   The failure count of the XML therefore agrees with the exit code.

use super::verdict::Report;
use crate::harness::vocab::outcome::{CaseResult, Failure, Outcome};
use crate::harness::vocab::sanitize::xml;
use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

/// A failure's `message` attribute: its one problem, or how many and the first (the body lists
/// each).
fn headline(failure: &Failure) -> String {
    match failure.problems.as_slice() {
        [one] => one.text(),
        many => match many.first() {
            Some(first) => format!("{} problems, the first: {}", many.len(), first.text()),
            None => String::new(),
        },
    }
}

/// A failure's problems for the body: its one problem whole, or each on a line of its own
/// (`- `), the lines of a problem's own text indented under it.
fn problems(failure: &Failure) -> String {
    match failure.problems.as_slice() {
        [one] => one.text(),
        many => {
            let mut out = format!("{} problems:", many.len());
            for p in many {
                out += &format!("\n- {}", p.text().replace('\n', "\n  "));
            }
            out
        }
    }
}

/// The details of a failure: message, reproduction, replay command.
fn details(report: &Report, result: &CaseResult, message: &str) -> String {
    let mut body = message.to_string();
    if let Some(curl) = &result.reproduction {
        body += &format!("\nreproduce: {curl}");
    }
    if let Some(context) = report.context(result) {
        body += &format!("\n{context}");
    }
    body += &format!("\nrerun: {}", report.rerun(result));
    xml(&body)
}

fn test_case(report: &Report, result: &CaseResult) -> TestCase {
    let case = result.case;
    let gating = report.gates(result);
    let deviation = report.deviations().into_iter().find(|(r, _)| r.case.id == case.id).map(|(_, how)| how);
    let expected = report.expected().into_iter().find(|(r, _)| r.case.id == case.id).map(|(_, why)| why);
    let status = match (&result.outcome, deviation, expected) {
        // A deviation from the --expect file fails the run: a JUnit failure, whatever the outcome.
        (_, Some(how), _) => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_message(xml(&how)).set_type("expectation").set_description(details(report, result, &how));
            status
        }
        // As pytest's xfail: an expected outcome is skipped, with the file's reason.
        (outcome, None, Some(why)) => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(xml(&format!("expected {}: {why}", outcome.label())));
            status
        }
        (outcome, None, None) => match outcome {
            Outcome::Passed => TestCaseStatus::success(),
            Outcome::Failed(_) if !gating => TestCaseStatus::success(),
            Outcome::Failed(f) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(xml(&headline(f))).set_type(case.level.as_str()).set_description(details(
                    report,
                    result,
                    &problems(f),
                ));
                status
            }
            Outcome::Error { source, message } => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
                status
                    .set_message(xml(message))
                    .set_type(source.as_str())
                    .set_description(details(report, result, message));
                status
            }
            Outcome::Ignored { reason, .. } => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(xml(reason));
                status
            }
        },
    };
    let mut tc = TestCase::new(case.id.as_str(), status);
    tc.set_classname(case.area).set_time(result.duration);
    tc.add_property(Property::new("section", case.section.as_str()));
    tc.add_property(Property::new("level", case.level.as_str()));
    tc.add_property(Property::new("gating", gating.to_string()));
    tc.add_property(Property::new("outcome", result.outcome.label()));
    tc.add_property(Property::new("title", case.title.as_str()));
    if let (Outcome::Failed(f), false, None) = (&result.outcome, gating, expected) {
        tc.set_system_out(format!(
            "NOTE: failed at level {}, which does not gate this run\n{}",
            case.level,
            details(report, result, &problems(f))
        ));
    }
    tc
}

/// The report as JUnit XML, every string passed through the run's redactor.
pub fn render(report: &Report) -> String {
    report.redactor.redact(&render_raw(report))
}

fn render_raw(report: &Report) -> String {
    let mut junit = quick_junit::Report::new(format!("bankconf {}", report.command()));
    junit.set_time(report.duration);
    let mut suites: Vec<TestSuite> = Vec::new();
    // What the run left out, and how, on every suite (its cases left out on purpose are also
    // skipped testcases, with the flag as the reason).
    let left_out = super::selection::LeftOut::of(report).parts(report);
    for result in &report.results {
        let area = result.case.area;
        let at = match suites.iter().position(|s| s.name.as_str() == area) {
            Some(at) => at,
            None => {
                let mut suite = TestSuite::new(area);
                suite.add_property(Property::new("target", xml(&report.server)));
                if let Some(seed) = report.seed() {
                    suite.add_property(Property::new("seed", seed.to_string()));
                }
                let gate: Vec<&str> = report.gate.0.iter().map(|l| l.as_str()).collect();
                suite.add_property(Property::new("gate", gate.join(",")));
                if !left_out.is_empty() {
                    suite.add_property(Property::new("left-out", xml(&left_out.join("; "))));
                }
                suites.push(suite);
                suites.len() - 1
            }
        };
        suites[at].add_test_case(test_case(report, result));
    }
    for suite in &mut suites {
        // The cases run side by side from the run's start: a suite took as long as its longest
        // case, not the sum of them (which could exceed the whole run).
        let cases = report.results.iter().filter(|r| r.case.area == suite.name.as_str());
        suite.set_time(cases.map(|r| r.duration).max().unwrap_or_default());
        // quick-junit counts a skipped case as `disabled`; JUnit readers count `skipped`.
        suite.extra.insert("skipped".into(), suite.disabled.to_string().into());
        suite.disabled = 0;
    }
    let skipped: usize = suites.iter().filter_map(|s| s.extra.get("skipped")?.as_str().parse::<usize>().ok()).sum();
    if let Some(first) = suites.first_mut() {
        if !report.notes.is_empty() {
            let notes: Vec<String> = report.notes.iter().map(ToString::to_string).collect();
            first.set_system_out(xml(&notes.join("\n")));
        }
    }
    junit.add_test_suites(suites);
    match junit.to_string() {
        // The root element has no attribute of its own for it in quick-junit.
        Ok(xml) => xml.replacen("<testsuites ", &format!("<testsuites skipped=\"{skipped}\" "), 1),
        Err(e) => format!("<!-- bankconf: cannot render JUnit XML: {e} -->\n"),
    }
}
