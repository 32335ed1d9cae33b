//! The Markdown summary (`--report-md`), written for a CI job summary (`$GITHUB_STEP_SUMMARY`):
//! the verdict, counts by level, every failure with its reproduction, the ignored cases with
//! their reasons, and the clause coverage matrix (every section of the spec, the cases of this
//! report that check it, and the sections no case checks).

use super::Report;
use crate::harness::catalogue::{self, Level};
use crate::harness::outcome::Outcome;
use crate::harness::runner::CaseResult;
use crate::harness::sanitize;
use crate::spec::{within, SECTIONS};
use std::fmt::Write;

/// A fenced block whose fence is longer than any backtick run inside `text` (neutralised).
fn fenced(lang: &str, text: &str) -> String {
    let text = &sanitize::markdown_code(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{}\n{fence}\n", text.trim_end())
}

/// Text safe inside a table cell or a list item: one line, no HTML, pipes escaped.
fn cell(text: &str) -> String {
    sanitize::markdown_inline(text)
}

/// `pass`, `FAIL`, `note` (a failure that does not gate), `skip`.
fn mark(report: &Report, result: &CaseResult) -> &'static str {
    match (&result.outcome, report.gates(result)) {
        (Outcome::Passed, _) => "pass",
        (Outcome::Failed(_), true) => "FAIL",
        (Outcome::Failed(_), false) => "note",
        (Outcome::Ignored(_), _) => "skip",
    }
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let c = report.counts();
    let _ = writeln!(out, "## bankconf {}: {}\n", report.command(), report.verdict());
    let gate: Vec<&str> = report.gate.iter().map(|l| l.as_str()).collect();
    let seed = report.seed().map(|s| format!(", seed `{s}`")).unwrap_or_default();
    let _ = writeln!(
        out,
        "Target: {}{seed}; gating levels: {}. **{} passed, {} failed, {} ignored** in {:.2}s (exit code {}).\n",
        cell(&report.target),
        if gate.is_empty() { "none".to_string() } else { gate.join(", ") },
        c.passed,
        c.failed,
        c.ignored,
        report.duration.as_secs_f64(),
        report.exit_code()
    );
    for note in &report.notes {
        let _ = writeln!(out, "- {}", cell(note));
    }
    if !report.notes.is_empty() {
        out.push('\n');
    }

    out += "### Counts by level\n\n| level | passed | failed | ignored | gates |\n|---|---:|---:|---:|---|\n";
    for level in Level::ALL {
        let c = report.counts_at(level);
        let gates = if report.gate.contains(&level) { "yes" } else { "no" };
        let _ = writeln!(out, "| {level} | {} | {} | {} | {gates} |", c.passed, c.failed, c.ignored);
    }

    let failures = report.failures();
    let _ = writeln!(out, "\n### Failures\n");
    if failures.is_empty() {
        out += "None.\n\n";
    }
    for r in failures {
        let gating = if report.gates(r) { "gating" } else { "not gating" };
        let _ = writeln!(
            out,
            "#### `{}` ({}, {}, {gating})\n\n{}\n",
            r.case.id,
            r.case.section,
            r.case.level,
            cell(&r.case.title)
        );
        out += &fenced("text", r.outcome.message().unwrap_or_default());
        out += "\nReproduce:\n\n";
        let mut steps = String::new();
        if let Some(curl) = &r.reproduction {
            steps += &format!("{curl}\n");
        }
        steps += &report.rerun(r);
        out += &fenced("sh", &steps);
        out.push('\n');
    }

    let ignored: Vec<&CaseResult> =
        report.results.iter().filter(|r| matches!(r.outcome, Outcome::Ignored(_))).collect();
    if !ignored.is_empty() {
        out += "### Ignored\n\n| case | section | reason |\n|---|---|---|\n";
        for r in ignored {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                r.case.id,
                r.case.section,
                cell(r.outcome.message().unwrap_or_default())
            );
        }
        out.push('\n');
    }

    out += &coverage(report);
    out
}

/// The clause coverage matrix: every section of the spec, the cases of this report that check
/// it with their outcomes, and plainly which sections no case of the catalogue checks.
fn coverage(report: &Report) -> String {
    let mut out = String::from(
        "### Clause coverage\n\n| section | title | cases of this report | coverage |\n|---|---|---|---|\n",
    );
    let mut unchecked = Vec::new();
    let mut unselected = Vec::new();
    for (section, title) in SECTIONS {
        let direct: Vec<String> = report
            .results
            .iter()
            .filter(|r| r.case.section == section)
            .map(|r| format!("`{}` {}", r.case.id, mark(report, r)))
            .collect();
        let through_subsections = report.results.iter().any(|r| within(&r.case.section, section));
        let in_catalogue = catalogue::all().iter().filter(|c| within(&c.section, section)).count();
        let coverage = if !direct.is_empty() {
            "checked".to_string()
        } else if through_subsections {
            "through its subsections".to_string()
        } else if in_catalogue > 0 {
            unselected.push(section);
            format!(
                "not in this report ({in_catalogue} {} in the catalogue)",
                if in_catalogue == 1 { "case" } else { "cases" }
            )
        } else {
            unchecked.push(format!("{section} {title}"));
            "**no case checks this section**".to_string()
        };
        let cases = if direct.is_empty() { "—".to_string() } else { direct.join(", ") };
        let _ = writeln!(out, "| {section} | {title} | {cases} | {coverage} |");
    }
    out.push('\n');
    if unchecked.is_empty() {
        out += "Every section is checked by at least one case of the catalogue.\n";
    } else {
        let _ = writeln!(out, "No case of the catalogue checks: {}.", unchecked.join("; "));
    }
    if !unselected.is_empty() {
        let _ = writeln!(out, "Checked by the catalogue but not by this report: {}.", unselected.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_the_text() {
        assert_eq!(fenced("", "a"), "```\na\n```\n");
        assert!(fenced("", "x ```` y").starts_with("`````\n"));
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
