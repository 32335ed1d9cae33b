//! The terminal report: one line per case as it finishes, then a summary by level.

use super::Report;
use crate::harness::catalogue::Level;
use crate::harness::outcome::Outcome;
use crate::harness::runner::CaseResult;
use crate::harness::sanitize::visible;
use std::fmt::Write;

/// `PASS  create.status-created  §2.1 must  3ms`, and the message below a failure.
pub fn case_line(result: &CaseResult, gating: bool) -> String {
    let mark = match (&result.outcome, gating) {
        (Outcome::Passed, _) => "PASS",
        (Outcome::Failed(_), true) => "FAIL",
        (Outcome::Failed(_), false) => "NOTE",
        (Outcome::Ignored(_), _) => "SKIP",
    };
    let case = result.case;
    let mut line =
        format!("{mark}  {:<36} {:<5} {:<10} {:>6}ms", case.id, case.section, case.level, result.duration.as_millis());
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
    let _ = writeln!(out, "\n{:<12} {:>7} {:>7} {:>8}  gates", "level", "passed", "failed", "ignored");
    for level in Level::ALL {
        let c = report.counts_at(level);
        let gates = if report.gate.contains(&level) { "yes" } else { "no" };
        let _ = writeln!(out, "{:<12} {:>7} {:>7} {:>8}  {gates}", level.as_str(), c.passed, c.failed, c.ignored);
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {}", visible(note));
    }
    let c = report.counts();
    let _ = write!(
        out,
        "{}: {} passed, {} failed, {} ignored in {:.2}s",
        report.verdict(),
        c.passed,
        c.failed,
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
