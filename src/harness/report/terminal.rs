//! The terminal report: one line per case as it finishes, then the counts by level, a closing
//! block of every failure and error (with a rerun command to paste), and the verdict line.
//! Colour only at a terminal, as `NO_COLOR`, `CLICOLOR` and `CLICOLOR_FORCE` say (`anstream`).

use super::verdict::{Report, KNOWN};
use crate::harness::graph::Transition;
use crate::harness::outcome::CaseResult;
use crate::harness::sanitize::visible;
use anstyle::{AnsiColor, Style};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Columns a message is wrapped to (a 120-column terminal keeps a margin).
const WIDTH: usize = 100;
/// Lines of a message shown under a case line; the rest is in the report files.
const MAX_LINES: usize = 8;
/// Characters of the one-line reason of the closing summary.
const REASON: usize = 110;
/// Said where a message is cut.
const CUT: &str = "… (full text in the report)";

/// Whether text is coloured: decided once for stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paint(pub bool);

impl Paint {
    /// Colour when stdout is a terminal, unless `NO_COLOR` is set or `CLICOLOR=0`
    /// (`CLICOLOR_FORCE` forces it): never in a log or a pipe.
    pub fn stdout() -> Self {
        Self(anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never)
    }

    fn style(self, style: Style, text: &str) -> String {
        if self.0 {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    /// A mark padded to its column, coloured by what it means.
    fn mark(self, mark: &str) -> String {
        let colour = match mark {
            "PASS" | "PASSED" => AnsiColor::Green,
            "FAIL" | "FAILED" => AnsiColor::Red,
            "ERROR" | "NOT RUN" => AnsiColor::Magenta,
            KNOWN => AnsiColor::Cyan,
            _ => AnsiColor::Yellow,
        };
        let style = Style::new().fg_color(Some(colour.into()));
        let style = if matches!(mark, "FAIL" | "ERROR" | "FAILED") { style.bold() } else { style };
        let padded = format!("{mark:<5}");
        self.style(style, &padded)
    }

    fn dim(self, text: &str) -> String {
        self.style(Style::new().dimmed(), text)
    }

    fn bold(self, text: &str) -> String {
        self.style(Style::new().bold(), text)
    }
}

/// `text` wrapped to `width` columns (words longer than a line are split), at most `max` lines;
/// a longer text ends with "… (full text in the report)".
pub fn wrap(text: &str, width: usize, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split(' ') {
            let mut word: &str = word;
            loop {
                let (have, need) = (line.chars().count(), word.chars().count());
                if have > 0 && have + 1 + need <= width {
                    line.push(' ');
                    line.push_str(word);
                    break;
                }
                if have == 0 && need <= width {
                    line.push_str(word);
                    break;
                }
                if have > 0 {
                    lines.push(std::mem::take(&mut line));
                    continue;
                }
                let split = word.char_indices().nth(width).map_or(word.len(), |(i, _)| i);
                lines.push(word[..split].to_string());
                word = &word[split..];
            }
        }
        lines.push(line);
    }
    if lines.len() > max {
        lines.truncate(max);
        let last = lines.last_mut().expect("max is above 0");
        let keep = width.saturating_sub(CUT.chars().count() + 1);
        *last = format!("{} {CUT}", last.chars().take(keep).collect::<String>().trim_end());
    }
    lines
}

/// The first line of `text`, cut to `max` characters with "… (full text in the report)".
pub fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let more = text.lines().nth(1).is_some();
    if first.chars().count() <= max && !more {
        return first.to_string();
    }
    let keep = max.saturating_sub(CUT.chars().count());
    let head: String = first.chars().take(keep).collect();
    format!("{}{CUT}", head.trim_end())
}

/// The case lines of a run, printed as cases finish. A message already shown for an earlier
/// case is not repeated (a setup diagnosis shared by many cases): the line names that case.
pub struct Lines {
    shown: Mutex<HashMap<String, String>>,
    paint: Paint,
}

impl Lines {
    pub fn new(paint: Paint) -> Self {
        Self { shown: Mutex::default(), paint }
    }

    /// Lines coloured as stdout allows.
    pub fn stdout() -> Self {
        Self::new(Paint::stdout())
    }

    /// The line of `result`: `gating` when its failure decides the exit code, `expected` when
    /// the `--expect` file expects its outcome.
    pub fn case(&self, result: &CaseResult, gating: bool, expected: bool) -> String {
        let mark = if expected { KNOWN } else { result.outcome.mark(gating) };
        let earlier = result.outcome.message().and_then(|m| {
            let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
            let first = shown.entry(m.to_string()).or_insert_with(|| result.case.id.clone());
            (*first != result.case.id).then(|| first.clone())
        });
        case_line(result, mark, self.paint, earlier.as_deref())
    }
}

/// `PASS  create.status-created  §2.1 must  3ms`, and below a failure its message (wrapped,
/// or "same as CASE" when an earlier case had it) and its reproduction.
pub fn case_line(result: &CaseResult, mark: &str, paint: Paint, same_as: Option<&str>) -> String {
    let case = result.case;
    let mut line = format!(
        "{} {:<36} {:<5} {:<10} {:>6}ms",
        paint.mark(mark),
        case.id,
        case.section,
        case.level,
        result.duration.as_millis()
    );
    match (result.outcome.message(), same_as) {
        (Some(_), Some(earlier)) => {
            let _ = write!(line, "\n      {}", paint.dim(&format!("(the same message as {earlier})")));
        }
        (Some(m), None) => {
            for l in wrap(&visible(m), WIDTH - 6, MAX_LINES) {
                let _ = write!(line, "\n      {l}");
            }
        }
        _ => {}
    }
    if let Some(r) = &result.reproduction {
        let _ = write!(line, "\n      {} {}", paint.dim("reproduce:"), visible(r));
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

/// The summary, coloured as stdout allows.
pub fn summary(report: &Report) -> String {
    render_summary(report, Paint::stdout())
}

/// The summary: counts by level, notes, what would complete the run, expectations, the
/// closing block of failures and errors, and the verdict line, which says what decided it. A
/// run that could not start shows no table: its setup error was printed once, above.
pub fn render_summary(report: &Report, paint: Paint) -> String {
    let mut out = String::new();
    if report.setup_error.is_none() || !report.results.is_empty() {
        table(&mut out, report);
    }
    // A note that is also the diagnosis of failed cases (a silent webhook path) is shown once,
    // in the closing block, with the cases it concerns.
    let diagnoses: Vec<&str> = report.to_act_on().into_iter().map(|(_, message, _)| message).collect();
    for note in report.notes.iter().filter(|n| !diagnoses.contains(&n.as_str())) {
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
                let _ =
                    writeln!(out, "  {} {} {}: {}", paint.mark(KNOWN), r.case.id, r.outcome.label(), visible(reason));
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
    closing(&mut out, report, paint);
    let c = report.counts(None);
    let decided = report.decided();
    let verdict = paint.mark(report.verdict());
    let (sep, decided) = match decided.strip_prefix("with ") {
        Some(with) => (" with ", with.to_string()),
        None if decided.is_empty() => ("", String::new()),
        None => (": ", decided),
    };
    if report.setup_error.is_some() && report.results.is_empty() {
        let _ = write!(out, "{verdict}{sep}{decided}");
        return out;
    }
    let _ = write!(
        out,
        "{verdict}{sep}{decided} ({} passed, {} failed, {} errors, {} ignored in {:.2}s)",
        c.passed,
        c.failed,
        c.errors,
        c.ignored,
        report.duration.as_secs_f64()
    );
    out
}

fn table(out: &mut String, report: &Report) {
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
}

/// Every failed and errored case, gating first: its id, section, a one-line reason and the
/// command that reruns it. Cases that share a diagnosis are one entry naming them all.
fn closing(out: &mut String, report: &Report, paint: Paint) {
    let groups = report.to_act_on();
    if groups.is_empty() {
        return;
    }
    let cases: usize = groups.iter().map(|(_, _, cases)| cases.len()).sum();
    let what = if cases == 1 { "case" } else { "cases" };
    let _ = writeln!(out, "\n{}", paint.bold(&format!("{cases} {what} to act on, gating first:")));
    for (mark, message, cases) in groups {
        let ids: Vec<&str> = cases.iter().map(|r| r.case.id.as_str()).collect();
        if let [one] = cases.as_slice() {
            let _ = writeln!(out, "{} {}  {} {}", paint.mark(mark), one.case.id, one.case.section, one.case.level);
        } else {
            let named: Vec<String> = cases.iter().map(|r| format!("{} ({})", r.case.id, r.case.section)).collect();
            let list = wrap(&named.join(", "), WIDTH - 6, MAX_LINES).join("\n      ");
            let _ = writeln!(out, "{} {} cases, one diagnosis:\n      {list}", paint.mark(mark), cases.len());
        }
        // The problem, not the request it names (the rerun replays that).
        let (_, problem) = super::request_and_problem(message.lines().next().unwrap_or_default());
        let more = if message.lines().nth(1).is_some() { "\n…" } else { "" };
        let _ = writeln!(out, "      {}", one_line(&visible(&format!("{problem}{more}")), REASON));
        let _ = writeln!(out, "      {} {}", paint.dim("rerun:"), visible(&report.rerun_cases(&ids)));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_aligned() {
        assert_eq!(progress(3, 42), "[ 3/42] ");
        assert_eq!(progress(42, 42), "[42/42] ");
    }

    #[test]
    fn long_text_is_wrapped_then_cut() {
        assert_eq!(wrap("a bb ccc", 4, 5), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4, 5), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("one\ntwo", 10, 5), ["one", "two"]);
        let cut = wrap(&"word ".repeat(200), 60, 2);
        assert_eq!(cut.len(), 2);
        assert!(cut[1].ends_with(CUT) && cut.iter().all(|l| l.chars().count() <= 60), "{cut:?}");
        assert_eq!(one_line("short", 40), "short");
        let line = one_line(&"x".repeat(200), 60);
        assert!(line.ends_with(CUT) && line.chars().count() <= 60, "{line}");
        assert!(one_line("first\nsecond", 60).starts_with("first…"));
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint(false).mark("FAIL"), "FAIL ");
        let red = Paint(true).mark("FAIL");
        assert!(red.starts_with('\u{1b}') && red.contains("FAIL "), "{red:?}");
        assert_eq!(anstream::adapter::strip_str(&red).to_string(), "FAIL ");
    }
}
