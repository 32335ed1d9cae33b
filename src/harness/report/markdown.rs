//! The Markdown summary (`--report-md`), written for a CI job summary (`$GITHUB_STEP_SUMMARY`):
//! the verdict, counts by level, every failure with its reproduction, the ignored cases with
//! their reasons, and the clause coverage matrix (every section of the spec, the cases of this
//! report that check it, and the sections no case checks).

use super::verdict::Report;
use crate::harness::catalogue;
use crate::harness::expect::Standing;
use crate::harness::graph::TransitionGraph;
use crate::harness::outcome::{CaseResult, Outcome};
use crate::harness::sanitize;
use crate::spec::{within, Action, SECTIONS};
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

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let c = report.counts(None);
    let _ = writeln!(out, "## bankconf {}: {}\n", report.command(), report.verdict());
    let seed = report.seed().map(|s| format!(", seed `{s}`")).unwrap_or_default();
    let _ = writeln!(
        out,
        "Target: {}{seed}; gating levels: {}. **{} passed, {} failed, {} errors, {} ignored** in {:.2}s (exit code {}).\n",
        cell(&report.server),
        report.gate.names(),
        c.passed,
        c.failed,
        c.errors,
        c.ignored,
        report.duration.as_secs_f64(),
        report.exit_code()
    );
    if let Some(e) = &report.setup_error {
        let _ = writeln!(out, "**The run could not start or judge (exit code 2):** {}\n", cell(e));
    }
    for note in &report.notes {
        let _ = writeln!(out, "- {}", cell(note));
    }
    for line in report.latency_lines() {
        let _ = writeln!(out, "- {}", cell(&line));
    }
    if !report.notes.is_empty() || !report.latency_lines().is_empty() {
        out.push('\n');
    }
    let unjudged = report.unjudged();
    if !unjudged.is_empty() {
        out += "### Not judged: how to complete the run\n\n| what would complete it | gating cases |\n|---|---|\n";
        for (how, cases) in &unjudged {
            let cases: Vec<String> = cases.iter().map(|c| format!("`{c}`")).collect();
            let _ = writeln!(out, "| {} | {} |", cell(how), cases.join(", "));
        }
        out.push('\n');
    }

    if let Some(e) = &report.expectations {
        let deviations = report.deviations();
        if !deviations.is_empty() {
            let _ = writeln!(out, "### Deviations from `{}` (each fails the run)\n", cell(&e.file));
            for (r, how) in &deviations {
                let _ = writeln!(out, "- `{}`: {}", r.case.id, cell(how));
            }
            out.push('\n');
        }
        let expected = report.expected();
        if !expected.is_empty() {
            let _ = writeln!(out, "### Expected in `{}` (not deciding the exit code)\n", cell(&e.file));
            out += "| case | outcome | reason |\n|---|---|---|\n";
            for (r, reason) in &expected {
                let _ = writeln!(out, "| `{}` | {} | {} |", r.case.id, r.outcome.label(), cell(reason));
            }
            out.push('\n');
        }
    }

    out += "### Counts by level\n\n| level | passed | failed | errors | ignored | gates |\n|---|---:|---:|---:|---:|---|\n";
    for (level, c, gates) in report.by_level() {
        let gates = if gates { "yes" } else { "no" };
        let _ = writeln!(out, "| {level} | {} | {} | {} | {} | {gates} |", c.passed, c.failed, c.errors, c.ignored);
    }

    let failures = report.failures();
    let _ = writeln!(out, "\n### Failures\n");
    if failures.is_empty() {
        out += "None.\n\n";
    }
    for r in failures {
        let gating = match (report.gates(r), report.standing(r)) {
            (false, Some(Standing::Held)) => "expected",
            (true, _) => "gating",
            (false, _) => "not gating",
        };
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

    let unjudged: Vec<&CaseResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Ignored { .. } | Outcome::Error { .. }))
        .collect();
    if !unjudged.is_empty() {
        out += "### Not judged\n\n| case | section | outcome | reason |\n|---|---|---|---|\n";
        for r in unjudged {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                r.case.id,
                r.case.section,
                r.outcome.label(),
                cell(r.outcome.message().unwrap_or_default())
            );
        }
        out.push('\n');
    }

    if let Some(graph) = &report.transition_graph {
        out += &transitions(graph);
    }
    out += &coverage(report);
    out
}

/// The explored transition graph: one row per state reached, one column per action.
fn transitions(graph: &TransitionGraph) -> String {
    let mut out = String::from("### Transition graph (as the target revealed it)\n\n| from \\ action |");
    for action in Action::ALL {
        let _ = write!(out, " `{}` |", action.as_str());
    }
    out += "\n|---|";
    out += &"---|".repeat(Action::ALL.len());
    out.push('\n');
    for from in &graph.reached {
        let _ = write!(out, "| {} |", from.lower());
        for action in Action::ALL {
            let cell = graph.edges.iter().find(|(f, a, _)| f == from && *a == action).map(|(_, _, t)| t.label());
            let _ = write!(out, " {} |", cell.unwrap_or_else(|| "—".into()));
        }
        out.push('\n');
    }
    out.push('\n');
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
            .map(|r| format!("`{}` {}", r.case.id, r.outcome.mark(report.gates(r))))
            .collect();
        let through_subsections = report.results.iter().any(|r| within(&r.case.section, section));
        let in_catalogue = catalogue::all().iter().filter(|c| within(&c.section, section)).count();
        let judged = report
            .results
            .iter()
            .filter(|r| within(&r.case.section, section))
            .any(|r| matches!(r.outcome, Outcome::Passed | Outcome::Failed(_)));
        let coverage = if (!direct.is_empty() || through_subsections) && !judged {
            "**not judged in this run**".to_string()
        } else if !direct.is_empty() {
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
