//! The terminal report: one line per case as it finishes, then a summary by level.

use super::verdict::Report;
use crate::harness::graph::Transition;
use crate::harness::outcome::CaseResult;
use crate::harness::sanitize::visible;
use std::fmt::Write;

/// `PASS  create.status-created  §2.1 must  3ms`, and the message below a failure.
pub fn case_line(result: &CaseResult, gating: bool) -> String {
    let mark = result.outcome.mark(gating);
    let case = result.case;
    let mut line = format!(
        "{mark:<5} {:<36} {:<5} {:<10} {:>6}ms",
        case.id,
        case.section,
        case.level,
        result.duration.as_millis()
    );
    if let Some(m) = result.outcome.message() {
        let _ = write!(line, "\n      {}", visible(m));
    }
    if let Some(r) = &result.reproduction {
        let _ = write!(line, "\n      reproduce: {}", visible(r));
    }
    line
}

pub fn header(target: &str, seed: Option<u64>, cases: usize) -> String {
    let target = visible(target);
    match seed {
        Some(seed) => format!("bankconf: {cases} cases against {target} (seed {seed})"),
        None => format!("bankconf: {cases} cases against {target}"),
    }
}

/// `[12/42] `: the progress prefix of a case line, used only when stdout is a terminal.
pub fn progress(done: usize, total: usize) -> String {
    let width = total.to_string().len();
    format!("[{done:>width$}/{total}] ")
}

pub fn summary(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{:<12} {:>7} {:>7} {:>7} {:>8}  gates", "level", "passed", "failed", "errors", "ignored");
    for (level, c, gates) in report.by_level() {
        let gates = if gates { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "{:<12} {:>7} {:>7} {:>7} {:>8}  {gates}",
            level.as_str(),
            c.passed,
            c.failed,
            c.errors,
            c.ignored
        );
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {}", visible(note));
    }
    for line in report.latency_lines() {
        let _ = writeln!(out, "{line}");
    }
    if let Some((file, _)) = &report.har {
        let _ = writeln!(out, "HAR written to {}", visible(file));
    }
    let unjudged = report.unjudged();
    if !unjudged.is_empty() {
        let _ = writeln!(out, "not judged (gating), and how to complete the run:");
        for (how, cases) in &unjudged {
            let _ = writeln!(out, "  - {}: {}", visible(how), cases.join(", "));
        }
    }
    if let Some(e) = &report.expectations {
        let expected = report.expected();
        if !expected.is_empty() {
            let _ = writeln!(out, "expected in {} (not deciding the exit code):", visible(&e.file));
            for (r, reason) in &expected {
                let _ = writeln!(out, "  - {} {}: {}", r.case.id, r.outcome.label(), visible(reason));
            }
        }
        let deviations = report.deviations();
        if !deviations.is_empty() {
            let _ = writeln!(out, "deviations from {} (each fails the run):", visible(&e.file));
            for (r, how) in &deviations {
                let _ = writeln!(out, "  - {}: {}", r.case.id, visible(how));
            }
        }
        let not_run = e.not_run(&report.results);
        if !not_run.is_empty() {
            let _ = writeln!(out, "expectations for cases not run (not judged): {}", not_run.join(", "));
        }
    }
    if let Some(g) = &report.transition_graph {
        let accepted = g.edges.iter().filter(|(_, _, t)| matches!(t, Transition::Accepted(_))).count();
        let states: Vec<&str> = g.reached.iter().map(|s| s.lower()).collect();
        let _ = writeln!(
            out,
            "transition graph: {} states reached ({}), {accepted} of {} actions tried accepted (table in --report-md)",
            states.len(),
            states.join(", "),
            g.edges.len()
        );
    }
    if let Some(e) = &report.setup_error {
        let _ = writeln!(out, "setup error: {}", visible(e));
    }
    let c = report.counts(None);
    let _ = write!(
        out,
        "{}: {} passed, {} failed, {} errors, {} ignored in {:.2}s",
        report.verdict(),
        c.passed,
        c.failed,
        c.errors,
        c.ignored,
        report.duration.as_secs_f64()
    );
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn progress_is_aligned() {
        assert_eq!(super::progress(3, 42), "[ 3/42] ");
        assert_eq!(super::progress(42, 42), "[42/42] ");
    }
}
