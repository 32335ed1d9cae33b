//! The terminal report: one line per case as it finishes, then the counts by level, a closing
//! block of every failure and error (with a rerun command to paste), and the verdict line.
//! Colour only at a terminal, as `NO_COLOR`, `CLICOLOR` and `CLICOLOR_FORCE` say (`anstream`).

use super::verdict::{Cited, Report, KNOWN};
use crate::harness::rules::decided::Decided;
use crate::harness::rules::graph::Transition;
use crate::harness::setup::config::OutputPaths;
use crate::harness::vocab::note::Note;
use crate::harness::vocab::outcome::{count, CaseResult, ErrorSource, Outcome};
use crate::harness::vocab::sanitize::visible;
use anstyle::{AnsiColor, Style};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Columns a message is wrapped to (a 120-column terminal keeps a margin).
const WIDTH: usize = 100;
/// Lines of a message shown under a case line; the rest is in the report files.
const MAX_LINES: usize = 8;
/// Lines of the reason of a case in the closing summary: room for the clause a user acts on
/// (the URL to fix, what did arrive), which ends most messages.
const REASON_LINES: usize = 3;
/// Where the whole text of a cut message is: the report file written, or how to get one.
pub(crate) fn full_text(paths: &OutputPaths) -> FullText {
    let written = [&paths.report_json, &paths.report_md, &paths.junit].into_iter().flatten().next();
    match written {
        Some(file) if file.as_os_str() == "-" => FullText::Stdout,
        Some(file) => FullText::File(file.display().to_string()),
        None => FullText::Nowhere,
    }
}

/// Where the whole text of a message the terminal cuts is, as a value: the summary decides by
/// it whether to point at a file or at the case's own lines above (issue 74).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FullText {
    /// In this report file.
    File(String),
    /// In the report written to standard output.
    Stdout,
    /// In no report file (a rerun with `--report-json FILE` writes one).
    Nowhere,
}

impl FullText {
    /// Whether a report file holds it.
    fn written(&self) -> bool {
        !matches!(self, Self::Nowhere)
    }
}

impl std::fmt::Display for FullText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(file) => write!(f, "(full text in {})", visible(file)),
            Self::Stdout => f.write_str("(full text in the report on standard output)"),
            Self::Nowhere => f.write_str("(full text: rerun with --report-json FILE)"),
        }
    }
}

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
/// a longer text ends with "… " and `note` (where the full text is, [`full_text`]).
pub(crate) fn wrap(text: &str, width: usize, max: usize, note: &str) -> Vec<String> {
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
        let cut = format!("… {note}");
        let keep = width.saturating_sub(cut.chars().count() + 1);
        *last = format!("{} {cut}", last.chars().take(keep).collect::<String>().trim_end());
    }
    lines
}

/// The first line of `text` in at most `max` characters, then `note` when anything was left
/// out. What is cut is words from the middle, so that the finding's verb and object, at the
/// end of a message, stay.
pub(crate) fn one_line(text: &str, max: usize, note: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    let more = text.lines().nth(1).is_some();
    if first.chars().count() <= max && !more {
        return first.to_string();
    }
    let budget = max.saturating_sub(note.chars().count() + 1);
    let short = first.trim_end();
    if short.chars().count() <= budget {
        return format!("{short} {note}");
    }
    // The end of the sentence, then as much of its start as fits around "…".
    let words: Vec<&str> = short.split(' ').collect();
    let len = |ws: &[&str]| ws.iter().map(|w| w.chars().count() + 1).sum::<usize>();
    let mut tail = words.len();
    while tail > 1 && len(&words[tail - 1..]) + 2 <= budget / 3 {
        tail -= 1;
    }
    let mut head = 0;
    while head < tail && len(&words[..=head]) + len(&words[tail..]) + 2 <= budget {
        head += 1;
    }
    let (head, tail) = (words[..head].join(" "), words[tail..].join(" "));
    let line = format!("{head} … {tail}");
    // A single word longer than the budget: its characters, cut.
    let line: String = line.trim().chars().take(budget).collect();
    format!("{line} {note}")
}

/// The reason a closing block gives for a case: of a failure, its one problem without the request
/// that shows it (the rerun replays that), or the count of its problems and the first; of an
/// error, its message. From the typed problems, never by taking a text apart.
fn reason(result: &CaseResult) -> String {
    match &result.outcome {
        Outcome::Failed(f) => match f.problems.as_slice() {
            [one] => one.detail.clone(),
            [first, ..] => format!("{} problems, the first: {}", f.problems.len(), first.detail),
            [] => String::new(),
        },
        other => other.message().unwrap_or_default().to_string(),
    }
}

/// What the lines under a case say: a failure's one problem, or how many and each on a line
/// of its own (a problem's own lines indented under it); an error's or a skip's message.
fn said(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Failed(f) => match f.problems.as_slice() {
            [one] => Some(one.text()),
            many => {
                let each: Vec<String> = many.iter().map(|p| format!("- {}", p.text().replace('\n', "\n  "))).collect();
                Some(format!("{} problems:\n{}", many.len(), each.join("\n")))
            }
        },
        other => other.message().map(str::to_string),
    }
}

/// The case lines of a run, printed as cases finish. A message already shown for an earlier
/// case is not repeated (a setup diagnosis shared by many cases): the line names that case.
pub struct Lines {
    shown: Mutex<HashMap<String, String>>,
    paint: Paint,
    /// Said where a message is cut ([`full_text`]).
    note: String,
}

impl Lines {
    pub fn new(paint: Paint, note: String) -> Self {
        Self { shown: Mutex::default(), paint, note }
    }

    /// Lines coloured as stdout allows.
    pub fn stdout(note: String) -> Self {
        Self::new(Paint::stdout(), note)
    }

    /// The line of `result`: `gating` when its failure decides the exit code, `expected` when
    /// the `--expect` file expects its outcome.
    pub fn case(&self, result: &CaseResult, gating: bool, expected: bool) -> String {
        let mark = if expected { KNOWN } else { result.outcome.mark(gating) };
        let earlier = said(&result.outcome).and_then(|m| {
            let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
            let first = shown.entry(m).or_insert_with(|| result.case.id.clone());
            (*first != result.case.id).then(|| first.clone())
        });
        case_line(result, mark, self.paint, earlier.as_deref(), &self.note)
    }
}

/// `PASS  create.status-created  §2.1 must  3ms`, and below a failure its message (wrapped,
/// or "same as CASE" when an earlier case had it) and its reproduction.
pub(crate) fn case_line(result: &CaseResult, mark: &str, paint: Paint, same_as: Option<&str>, note: &str) -> String {
    let case = result.case;
    let mut line = format!(
        "{} {:<36} {:<5} {:<10} {:>6}ms",
        paint.mark(mark),
        case.id,
        case.section,
        case.level,
        result.duration.as_millis()
    );
    match (said(&result.outcome), same_as) {
        (Some(_), Some(earlier)) => {
            let _ = write!(line, "\n      {}", paint.dim(&format!("(the same message as {earlier})")));
        }
        (Some(m), None) => {
            for l in wrap(&visible(&m), WIDTH - 6, MAX_LINES, note) {
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

pub(crate) fn header(target: &str, seed: Option<u64>, cases: usize) -> String {
    let target = visible(target);
    match seed {
        Some(seed) => format!("bankconf: {} against {target} (seed {seed})", count(cases, "case", "cases")),
        None => format!("bankconf: {} against {target}", count(cases, "case", "cases")),
    }
}

/// `[12/42] `: the progress prefix of a case line, used only when stdout is a terminal.
pub(crate) fn progress(done: usize, total: usize) -> String {
    let width = total.to_string().len();
    format!("[{done:>width$}/{total}] ")
}

/// The summary, coloured as stdout allows; `note` says where a cut text is whole ([`full_text`]).
pub(crate) fn summary(report: &Report, note: &FullText) -> String {
    render_summary(report, Paint::stdout(), note)
}

/// The summary: counts by level, notes, what would complete the run, expectations, the
/// closing block of failures and errors, and the verdict line, which says what decided it. A
/// run that could not start shows no table: its setup error was printed once, above.
pub fn render_summary(report: &Report, paint: Paint, note: &FullText) -> String {
    report.redactor.redact(&render_summary_raw(report, paint, note, false))
}

/// `--quiet`: the closing block alone (what to act on, the deviations from the `--expect` file,
/// what would complete the run) and the verdict line; no table, no notes.
pub fn render_quiet_summary(report: &Report, paint: Paint, note: &FullText) -> String {
    report.redactor.redact(&render_summary_raw(report, paint, note, true))
}

fn render_summary_raw(report: &Report, paint: Paint, note: &FullText, quiet: bool) -> String {
    let mut out = String::new();
    if quiet {
        deviations(&mut out, report);
    } else {
        context(&mut out, report, paint);
    }
    closing(&mut out, report, paint, note);
    // Last before the verdict: what would complete an INCOMPLETE run (a browser to install…).
    let unjudged = report.unjudged();
    if !unjudged.is_empty() {
        let _ = writeln!(out, "not judged (gating), and how to complete the run:");
        for (how, cases) in &unjudged {
            let _ = writeln!(out, "  - {}: {}", visible(how), cases.join(", "));
        }
    }
    verdict(&mut out, report, paint);
    out
}

/// The deviations from the `--expect` file (each fails the run), under its name.
fn deviations(out: &mut String, report: &Report) {
    let (Some(e), deviations) = (&report.expectations, report.deviations()) else { return };
    if !deviations.is_empty() {
        let _ = writeln!(out, "deviations from {} (each fails the run):", visible(&e.file));
        for (r, how) in &deviations {
            let _ = writeln!(out, "  - {}: {}", r.case.id, visible(how));
        }
    }
}

/// What comes before the closing block: counts by level, notes, latency, the HAR, the
/// expectations, the transition graph.
fn context(out: &mut String, report: &Report, paint: Paint) {
    if report.setup_error.is_none() || !report.results.is_empty() {
        table(out, report);
    }
    // The diagnosis of a silent webhook path, when cases ended in it (a receiver's error), is
    // shown once, in the closing block, with the cases it concerns.
    let ended_in_it = report
        .to_act_on()
        .into_iter()
        .any(|(_, cases)| matches!(cases[0].outcome, Outcome::Error { source: ErrorSource::Receiver, .. }));
    for note in report.notes.iter().filter(|n| !(ended_in_it && matches!(n, Note::Silent(_)))) {
        let _ = writeln!(out, "note: {}", visible(&note.to_string()));
    }
    for line in report.latency_lines() {
        let _ = writeln!(out, "{line}");
    }
    if let Some((file, _)) = &report.har {
        let _ = writeln!(out, "HAR written to {}", visible(file));
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
        deviations(out, report);
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
}

/// The verdict line: the verdict, what decided it, the counts, and what the run left out.
fn verdict(out: &mut String, report: &Report, paint: Paint) {
    let c = report.counts(None);
    let verdict = paint.mark(report.verdict());
    let (sep, decided) = match report.decided() {
        Decided::With(held) => (" with ", held),
        Decided::Nothing => ("", String::new()),
        Decided::Because(reasons) => (": ", reasons.join(" and ")),
    };
    if report.setup_error.is_some() && report.results.is_empty() {
        let _ = write!(out, "{verdict}{sep}{decided}");
        return;
    }
    // What the run left out, and how, closes the line: never a bare PASSED for a part.
    let left_out = super::selection::LeftOut::of(report).suffix(report);
    let _ = write!(
        out,
        "{verdict}{sep}{decided} ({} passed, {} failed, {} errors, {} ignored in {:.2}s{})",
        c.passed,
        c.failed,
        c.errors,
        c.ignored,
        report.duration.as_secs_f64(),
        visible(&left_out)
    );
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
fn closing(out: &mut String, report: &Report, paint: Paint, full: &FullText) {
    let groups = report.to_act_on();
    if groups.is_empty() {
        return;
    }
    let note = &full.to_string();
    // One fact that may explain many failures, before them.
    for c in report.root_causes.iter().filter(|c| c.explains()) {
        let cause = wrap(&visible(&c.cause), WIDTH - 6, MAX_LINES, note).join("\n      ");
        let _ = writeln!(out, "\n{}\n      {cause}", paint.bold("root cause, first:"));
        let list = wrap(&c.cases.join(", "), WIDTH - 6, MAX_LINES, note).join("\n      ");
        let how = match c.case {
            Some(_) => "its consequences, each judged on what it rests on",
            None => "it may explain these failures",
        };
        let _ = writeln!(out, "      {how} ({}):\n      {list}", c.cases.len());
    }
    let cases: usize = groups.iter().map(|(_, cases)| cases.len()).sum();
    let what = if cases == 1 { "case" } else { "cases" };
    let _ = writeln!(out, "\n{}", paint.bold(&format!("{cases} {what} to act on, gating first:")));
    for (mark, cases) in groups {
        let ids: Vec<&str> = cases.iter().map(|r| r.case.id.as_str()).collect();
        if let [one] = cases.as_slice() {
            let _ = writeln!(out, "{} {}  {} {}", paint.mark(mark), one.case.id, one.case.section, one.case.level);
        } else {
            let named: Vec<String> = cases.iter().map(|r| format!("{} ({})", r.case.id, r.case.section)).collect();
            let list = wrap(&named.join(", "), WIDTH - 6, MAX_LINES, note).join("\n      ");
            let _ = writeln!(out, "{} {} cases, one diagnosis:\n      {list}", paint.mark(mark), cases.len());
        }
        let reason = reason(cases[0]);
        let problem = reason.lines().next().unwrap_or_default();
        let more = if reason.lines().nth(1).is_some() { "\n…" } else { "" };
        // The whole text is in a report file, else in the case's own lines above when it fit.
        let message = said(&cases[0].outcome).unwrap_or_default();
        let above = wrap(&visible(&message), WIDTH - 6, MAX_LINES + 1, "").len() <= MAX_LINES;
        let whole = if above && !full.written() { "(whole text above)" } else { note };
        let reason = one_line(&visible(&format!("{problem}{more}")), REASON_LINES * (WIDTH - 6), whole);
        for line in wrap(&reason, WIDTH - 6, REASON_LINES + 1, whole) {
            let _ = writeln!(out, "      {line}");
        }
        if let [one] = cases.as_slice() {
            if report.context(one).is_some() {
                let _ = writeln!(out, "      {}", paint.dim("evidence (context, not a reproduction):"));
                for line in evidence(report, one) {
                    let _ = writeln!(out, "        {}", paint.dim(&line));
                }
            }
        }
        let _ = writeln!(out, "      {} {}", paint.dim("rerun:"), visible(&report.rerun_cases(&ids)));
        consequences(out, report, &ids, paint, note);
    }
    out.push('\n');
}

/// The cases whose outcome follows from one of `roots`' failures, under it: what they rest on
/// and their ids (each case's own lines above say what it saw).
fn consequences(out: &mut String, report: &Report, roots: &[&str], paint: Paint, note: &str) {
    let under: Vec<&CaseResult> = report
        .results
        .iter()
        .filter(|r| r.consequence_of.as_ref().is_some_and(|c| roots.contains(&c.root.as_str())))
        .collect();
    let Some(first) = under.first().and_then(|r| r.consequence_of.as_ref()) else { return };
    let ids: Vec<&str> = under.iter().map(|r| r.case.id.as_str()).collect();
    let list = wrap(&ids.join(", "), WIDTH - 8, MAX_LINES, note).join("\n        ");
    let head = format!("consequences ({}), resting on {}:", under.len(), first.foundation.what());
    let _ = writeln!(out, "      {}\n        {list}", paint.dim(&head));
}

/// Most items of a failure's evidence listed under it, and the widest line of one.
const EVIDENCE_ITEMS: usize = 4;
const EVIDENCE_WIDTH: usize = 100;

/// What `result`'s failure rests on, one item a line: a request as its request line (method and
/// path, the target's scheme and host left out), each cut at [`EVIDENCE_WIDTH`] characters and
/// redacted (what a cut leaves of a secret goes too), never elided in its middle.
fn evidence(report: &Report, result: &CaseResult) -> Vec<String> {
    let cited = report.cited.get(&result.case.id).map(Vec::as_slice).unwrap_or_default();
    let mut lines: Vec<String> = cited
        .iter()
        .take(EVIDENCE_ITEMS)
        .map(|c| {
            let text = match c {
                Cited::Request { request, .. } => c.describe().replacen(request.as_str(), &request_line(request), 1),
                other => other.describe(),
            };
            visible(&report.redactor.cut(&text, EVIDENCE_WIDTH))
        })
        .collect();
    if cited.len() > EVIDENCE_ITEMS {
        lines.push(format!("and {} more (the JSON report lists them)", cited.len() - EVIDENCE_ITEMS));
    }
    lines
}

/// `GET /v1/accounts/acc_1`, of `GET http://host:8080/v1/accounts/acc_1` or of itself.
fn request_line(request: &str) -> String {
    let Some((method, target)) = request.split_once(' ') else { return request.to_string() };
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |at| &rest[at..]),
        None => target,
    };
    format!("{method} {path}")
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
        const NOTE: &str = "(full text in r.json)";
        assert_eq!(wrap("a bb ccc", 4, 5, NOTE), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4, 5, NOTE), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("one\ntwo", 10, 5, NOTE), ["one", "two"]);
        let cut = wrap(&"word ".repeat(200), 60, 2, NOTE);
        assert_eq!(cut.len(), 2);
        assert!(cut[1].ends_with(NOTE) && cut.iter().all(|l| l.chars().count() <= 60), "{cut:?}");
        assert_eq!(one_line("short", 40, NOTE), "short");
        let line = one_line(&"x".repeat(200), 60, NOTE);
        assert!(line.ends_with(NOTE) && line.chars().count() <= 60, "{line}");
        assert_eq!(one_line("first\nsecond", 60, NOTE), "first (full text in r.json)");
    }

    /// The finding's verb and object stay: words go from the middle.
    #[test]
    fn a_one_line_reason_keeps_its_point() {
        let note = "(full text in report.json)";
        let long = format!("{} still lists it", "word ".repeat(60));
        let line = one_line(&long, 80, note);
        assert!(line.contains("… ") && line.contains("still lists it") && line.chars().count() <= 80, "{line}");
        let mut problems = crate::harness::vocab::outcome::Problems::default();
        for p in ["first; with a semicolon", "second", "third"] {
            problems.add(p);
        }
        let Err(crate::harness::vocab::outcome::Stop::Fail(f)) = problems.finish() else { panic!("three problems") };
        let result = CaseResult {
            case: &crate::harness::vocab::catalogue::all()[0],
            outcome: Outcome::Failed(f),
            duration: std::time::Duration::ZERO,
            reproduction: None,
            consequence_of: None,
        };
        assert_eq!(reason(&result), "3 problems, the first: first; with a semicolon");
        assert_eq!(full_text(&OutputPaths::default()).to_string(), "(full text: rerun with --report-json FILE)");
        let paths = OutputPaths { report_md: Some("r.md".into()), ..Default::default() };
        assert_eq!(full_text(&paths).to_string(), "(full text in r.md)");
    }

    #[test]
    fn a_request_line_keeps_its_method_and_path() {
        assert_eq!(request_line("GET http://127.0.0.1:9/v1/accounts/acc_1?limit=2"), "GET /v1/accounts/acc_1?limit=2");
        assert_eq!(request_line("GET https://host"), "GET /");
        assert_eq!(request_line("POST /v1/connections"), "POST /v1/connections");
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint(false).mark("FAIL"), "FAIL ");
        let red = Paint(true).mark("FAIL");
        assert!(red.starts_with('\u{1b}') && red.contains("FAIL "), "{red:?}");
        assert_eq!(anstream::adapter::strip_str(&red).to_string(), "FAIL ");
    }
}
