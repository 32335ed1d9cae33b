//! The Markdown summary (`--report-md`), written for a CI job summary (`$GITHUB_STEP_SUMMARY`):
//! the verdict, counts by level, every failure with its reproduction, the ignored cases with
//! their reasons, and the clause coverage matrix (every section of the spec, the cases of this
//! report that check it, and the sections no case checks).

use super::verdict::Report;
use crate::harness::rules::expect::Standing;
use crate::harness::rules::graph::TransitionGraph;
use crate::harness::vocab::catalogue;
use crate::harness::vocab::outcome::{CaseResult, Failure, Outcome};
use crate::harness::vocab::sanitize;
use crate::spec::{within, Action, REFERS_TO, SECTIONS, STATES_NOTHING};
use std::fmt::Write;

/// A fenced block whose fence is longer than any backtick run inside `text` (neutralised).
fn fenced(lang: &str, text: &str) -> String {
    let text = &sanitize::markdown_code(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{}\n{fence}\n", text.trim_end())
}

/// Columns of a line in a code block: no command hides off to the right of a job page.
const CODE_WIDTH: usize = 80;

/// A failure's message, problem first: what was expected and what came back as wrapped text,
/// then the request it names (`GET …: problem` puts the request last), then any further lines.
/// Most problems of one failure listed one by one; the JSON report holds them all.
const LISTED_PROBLEMS: usize = 12;

/// A failure's problems, each what is wrong first and then the request that shows it, from the
/// typed [`Problem`](crate::harness::vocab::outcome::Problem)s (never by taking the message apart).
fn problem(failure: &Failure) -> String {
    let mut out = String::new();
    match failure.problems.as_slice() {
        [one] => {
            let _ = writeln!(out, "**Problem:** {}\n", cell(&one.detail));
            if let Some(request) = &one.request {
                let _ = writeln!(out, "**Request:** {}\n", cell(request));
            }
        }
        [] => {}
        many => {
            let _ = writeln!(out, "**Problems ({}):**\n", many.len());
            for p in many.iter().take(LISTED_PROBLEMS) {
                match &p.request {
                    Some(request) => writeln!(out, "- {} (request: {})", cell(&p.detail), cell(request)),
                    None => writeln!(out, "- {}", cell(&p.detail)),
                }
                .unwrap_or_default();
            }
            if many.len() > LISTED_PROBLEMS {
                let _ =
                    writeln!(out, "- and {} more (the JSON report's problems hold them)", many.len() - LISTED_PROBLEMS);
            }
            out.push('\n');
        }
    }
    out
}

/// A shell command laid out over lines of at most `width` columns where it can be (a flag stays
/// with its value; quoted words are never split), joined by ` \` so that it still pastes as one.
fn shell_lines(command: &str, width: usize) -> String {
    let mut words: Vec<String> = Vec::new();
    let (mut word, mut quote, mut escaped) = (String::new(), None, false);
    for c in command.chars() {
        match (c, quote) {
            _ if escaped => escaped = false,
            ('\\', q) if q != Some('\'') => escaped = true,
            ('\'' | '"', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            (' ', None) => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                continue;
            }
            _ => {}
        }
        word.push(c);
    }
    if !word.is_empty() {
        words.push(word);
    }
    // A flag and the value that follows it form one unit.
    let mut units: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut unit = words[i].clone();
        if words[i].starts_with('-') && words.get(i + 1).is_some_and(|next| !next.starts_with('-')) {
            unit = format!("{unit} {}", words[i + 1]);
            i += 1;
        }
        units.push(unit);
        i += 1;
    }
    let mut lines: Vec<String> = Vec::new();
    for unit in units {
        let first = lines.is_empty();
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + unit.chars().count() + 2 <= width => {
                line.push(' ');
                line.push_str(&unit);
            }
            _ if first => lines.push(unit),
            _ => lines.push(format!("    {unit}")),
        }
    }
    lines.join(" \\\n")
}

/// Text safe inside a table cell or a list item: one line, no HTML, pipes escaped.
fn cell(text: &str) -> String {
    sanitize::markdown_inline(text)
}

/// The Markdown summary, every string passed through the run's redactor.
pub fn render(report: &Report) -> String {
    report.redactor.redact(&render_raw(report))
}

fn render_raw(report: &Report) -> String {
    let mut out = header(report);
    out += &expectations(report);
    out += &levels(report);
    out += &failures(report);
    out += &not_judged(report);
    out += &graph(report);
    out += &coverage(report);
    out += &statements(report);
    out
}

/// The verdict, the counts, the setup error, the notes, and how to complete the run.
fn header(report: &Report) -> String {
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
    let left_out = super::selection::LeftOut::of(report).parts(report);
    if !left_out.is_empty() {
        let _ = writeln!(out, "**Not the whole catalogue:** {}.\n", cell(&left_out.join("; ")));
    }
    if let Some(e) = &report.setup_error {
        let _ = writeln!(out, "**The run could not start or judge (exit code 2):** {}\n", cell(&e.to_string()));
    }
    for note in &report.notes {
        let _ = writeln!(out, "- {}", cell(&note.to_string()));
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
    out
}

/// The deviations from the expectations file, and what it expected.
fn expectations(report: &Report) -> String {
    let mut out = String::new();
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
    out
}

/// The counts by level and the root causes.
fn levels(report: &Report) -> String {
    let mut out = String::new();
    out += "### Counts by level\n\n| level | passed | failed | errors | ignored | gates |\n|---|---:|---:|---:|---:|---|\n";
    for (level, c, gates) in report.by_level() {
        let gates = if gates { "yes" } else { "no" };
        let _ = writeln!(out, "| {level} | {} | {} | {} | {} | {gates} |", c.passed, c.failed, c.errors, c.ignored);
    }

    if report.root_causes.iter().any(|c| c.explains()) {
        let _ = writeln!(out, "\n### Root causes\n");
        for c in report.root_causes.iter().filter(|c| c.explains()) {
            let cases: Vec<String> = c.cases.iter().map(|id| format!("`{id}`")).collect();
            let _ = writeln!(out, "- {} It may explain: {}.", cell(&c.cause), cases.join(", "));
        }
    }
    out
}

/// Each failure: its problems, its context, how to reproduce it.
fn failures(report: &Report) -> String {
    let mut out = String::new();
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
        if let Outcome::Failed(f) = &r.outcome {
            out += &problem(f);
        }
        if let Some(context) = report.context(r) {
            let _ = writeln!(out, "{}\n", cell(&context));
        }
        out += "Reproduce:\n\n";
        let mut steps = String::new();
        if let Some(curl) = &r.reproduction {
            steps += &format!("{}\n", shell_lines(curl, CODE_WIDTH));
        }
        steps += &shell_lines(&report.rerun(r), CODE_WIDTH);
        out += &fenced("sh", &steps);
        out.push('\n');
    }
    out
}

/// The cases not judged, one row per reason.
fn not_judged(report: &Report) -> String {
    let mut out = String::new();
    let unjudged: Vec<&CaseResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Ignored { .. } | Outcome::Error { .. }))
        .collect();
    if !unjudged.is_empty() {
        // One row per reason: a diagnosis many cases share is written once, with their list.
        let mut rows: Vec<(&str, &str, Vec<&CaseResult>)> = Vec::new();
        for r in unjudged {
            let (label, reason) = (r.outcome.kind(), r.outcome.message().unwrap_or_default());
            match rows.iter_mut().find(|(l, m, _)| *l == label && *m == reason) {
                Some((_, _, cases)) => cases.push(r),
                None => rows.push((label, reason, vec![r])),
            }
        }
        out += "### Not judged\n\n| case | section | outcome | reason |\n|---|---|---|---|\n";
        for (label, reason, cases) in rows {
            let ids: Vec<String> = cases.iter().map(|r| format!("`{}`", r.case.id)).collect();
            let mut sections: Vec<&str> = cases.iter().map(|r| r.case.section.as_str()).collect();
            sections.dedup();
            let _ = writeln!(out, "| {} | {} | {label} | {} |", ids.join(", "), sections.join(", "), cell(reason));
        }
        out.push('\n');
    }
    out
}

/// The transition graph, or why the run has none.
fn graph(report: &Report) -> String {
    let mut out = String::new();
    match &report.transition_graph {
        Some(graph) => out += &transitions(graph),
        None => {
            // The graph is recorded when its exploration finishes; say why there is none.
            if let Some(r) = report.results.iter().find(|r| r.case.id == "lifecycle.transition-graph") {
                let _ = writeln!(
                    out,
                    "### Transition graph\n\nNot recorded in this run: `{}` ended {} before its exploration \
                     finished (see above).\n",
                    r.case.id,
                    r.outcome.label()
                );
            }
        }
    }
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

/// How a report covers a section of the spec: a value, decided once, that the coverage
/// matrix both writes and sorts by (issue 74: it never reads back its own sentence).
enum Coverage {
    NotJudged,
    Checked,
    ThroughSubsections,
    /// Cases of the catalogue check it, none of this report: how many.
    NotInReport(usize),
    NoCase,
    /// The section states nothing to check.
    Nothing,
    /// Its cases are those of the section it refers to, covered so.
    As(&'static str, Box<Coverage>),
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotJudged => f.write_str("**not judged in this run**"),
            Self::Checked => f.write_str("checked"),
            Self::ThroughSubsections => f.write_str("through its subsections"),
            Self::NotInReport(n) => {
                write!(f, "not in this report ({n} {} in the catalogue)", if *n == 1 { "case" } else { "cases" })
            }
            Self::NoCase => f.write_str("**no case checks this section**"),
            Self::Nothing => f.write_str("nothing to check: everything it names is not shown"),
            Self::As(to, how) => write!(f, "as {to}, to which it refers: {how}"),
        }
    }
}

/// The cases of this report that check `section` itself, and how the report covers it.
fn section_coverage(report: &Report, section: &str) -> (Vec<String>, Coverage) {
    let direct: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.case.section == section)
        .map(|r| format!("`{}` {}", r.case.id, report.mark(r)))
        .collect();
    let through_subsections = report.results.iter().any(|r| within(&r.case.section, section));
    let in_catalogue = catalogue::all().iter().filter(|c| within(&c.section, section)).count();
    let judged = report
        .results
        .iter()
        .filter(|r| within(&r.case.section, section))
        .any(|r| matches!(r.outcome, Outcome::Passed | Outcome::Failed(_)));
    let coverage = if (!direct.is_empty() || through_subsections) && !judged {
        Coverage::NotJudged
    } else if !direct.is_empty() {
        Coverage::Checked
    } else if through_subsections {
        Coverage::ThroughSubsections
    } else if in_catalogue > 0 {
        Coverage::NotInReport(in_catalogue)
    } else {
        Coverage::NoCase
    };
    (direct, coverage)
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
        let referred = REFERS_TO.iter().find(|(from, _)| *from == section).map(|(_, to)| *to);
        let (direct, coverage) = match referred {
            // Its cases are the referred section's, shown on that row.
            Some(to) => (Vec::new(), Coverage::As(to, Box::new(section_coverage(report, to).1))),
            None if STATES_NOTHING.contains(&section) => (Vec::new(), Coverage::Nothing),
            None => section_coverage(report, section),
        };
        match coverage {
            Coverage::NoCase => unchecked.push(format!("{section} {title}")),
            Coverage::NotInReport(_) => unselected.push(section),
            _ => {}
        }
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

/// The clause matrix (`cases/clauses.toml`) against this report: how many of the judged cells
/// (statement × view) its cases judged, and each statement a failed case judges, with the views
/// that showed it.
fn statements(report: &Report) -> String {
    use crate::harness::vocab::clauses::{matrix, Cell};
    let m = matrix();
    let (mut judged, mut cells, mut failing, mut consequences_only) = (0, 0, Vec::new(), false);
    for clause in &m.clause {
        let mut views = Vec::new();
        for view in &m.views {
            let Some(Cell::Judged(cases)) = m.cell(clause, view) else { continue };
            cells += 1;
            let results: Vec<&CaseResult> = report.results.iter().filter(|r| cases.contains(&r.case.id)).collect();
            if results.iter().any(|r| matches!(r.outcome, Outcome::Passed | Outcome::Failed(_))) {
                judged += 1;
            }
            // An advisory note is no broken statement.
            let broken: Vec<&&CaseResult> = results
                .iter()
                .filter(|r| r.case.level != catalogue::Level::Advisory && r.outcome.is_failed())
                .collect();
            if let Some((shown, through)) = broken_in(view.as_str(), &broken) {
                views.push(shown);
                consequences_only |= through;
            }
        }
        if !views.is_empty() {
            // bankconf's own words are escaped like a target's: `<API_KEY>` is no HTML tag.
            let views: Vec<String> = views.iter().map(|v| cell(v)).collect();
            failing.push(format!(
                "| {} | {} | {} | {} |",
                cell(&clause.id),
                cell(&clause.section),
                cell(&clause.says),
                views.join(", ")
            ));
        }
    }
    let mut out = format!(
        "\n### Statements by view\n\n{} statements of the spec against {} views (`cases/clauses.toml`): this report \
         judged {judged} of the {cells} cells a case judges.\n",
        m.clause.len(),
        m.views.len()
    );
    if !failing.is_empty() {
        if consequences_only {
            out += "\nA view broken *only as a consequence of* a case fails there only on reads that rest on that \
                    case's failure (issue 74): fix that case first.\n";
        }
        out += "\n| statement | section | says | broken in the views |\n|---|---|---|---|\n";
        out += &failing.join("\n");
        out.push('\n');
    }
    out
}

/// How `view` shows its statement broken by the failed cases `failed` of its cell: the view
/// alone when a case fails as a root, `view (only as a consequence of ROOT)` when every one
/// fails only through a root's failure ([`CaseResult::consequence_of`]), nothing when none failed.
/// The second value says which of the two it is.
fn broken_in(view: &str, failed: &[&&CaseResult]) -> Option<(String, bool)> {
    if failed.is_empty() {
        return None;
    }
    let roots: Option<std::collections::BTreeSet<&str>> =
        failed.iter().map(|r| r.consequence_of.as_ref().map(|c| c.root.as_str())).collect();
    Some(match roots {
        Some(roots) => {
            let roots: Vec<&str> = roots.into_iter().collect();
            (format!("{view} (only as a consequence of {})", roots.join(", ")), true)
        }
        None => (view.to_string(), false),
    })
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

    #[test]
    fn commands_wrap_and_still_paste() {
        let curl = "curl -sS -i -X GET -H \"Authorization: Bearer $BANKCONF_API_KEY\" 'http://127.0.0.1:9/v1/accounts/acc_1/transactions?limit=2&x=a b'";
        let laid = shell_lines(curl, 60);
        assert_eq!(
            laid,
            "curl -sS -i -X GET \\\n    -H \"Authorization: Bearer $BANKCONF_API_KEY\" \\\n    \
             'http://127.0.0.1:9/v1/accounts/acc_1/transactions?limit=2&x=a b'"
        );
        assert_eq!(shlex::split(&laid.replace(" \\\n", " ")), shlex::split(curl));
        assert_eq!(shell_lines("bankconf run --seed 1 a.b", 80), "bankconf run --seed 1 a.b");
    }

    #[test]
    fn the_problem_comes_before_the_request() {
        let one = Failure::from("/data/0/id: \"tx_1\" does not match \"^txn_\"").requested("GET http://x/v1/a?limit=2");
        let md = problem(&one);
        assert!(md.starts_with("**Problem:** /data/0/id: \"tx\\_1\" does not match"), "{md}");
        assert!(md.ends_with("**Request:** GET http://x/v1/a?limit=2\n\n"), "{md}");
        // Target text with `; ` stays one problem; three problems are three items.
        let md = problem(&Failure::from("body {\"a\": \"x; y\"}"));
        assert!(!md.contains("- "), "{md}");
        let mut problems = crate::harness::vocab::outcome::Problems::default();
        for p in ["a", "b; c", "d"] {
            problems.add(p);
        }
        let Err(crate::harness::vocab::outcome::Stop::Fail(three)) = problems.finish() else { panic!() };
        assert!(problem(&three).contains("**Problems (3):**\n\n- a\n- b; c\n- d\n"), "{}", problem(&three));
    }

    /// A statement broken only by cases that rest on a root's failure says so, naming the root.
    #[test]
    fn a_view_broken_only_through_a_consequence_says_so() {
        use crate::harness::vocab::outcome::{Consequence, Foundation};
        let case = &catalogue::all()[0];
        let root = CaseResult::new(case, Outcome::Failed("x".into()), std::time::Duration::ZERO);
        let mut following = root.clone();
        following.consequence_of = Some(Consequence { root: "a.root".into(), foundation: Foundation::Pagination });
        let (root, following) = (&root, &following);
        assert_eq!(broken_in("list", &[&following]), Some(("list (only as a consequence of a.root)".into(), true)));
        assert_eq!(broken_in("list", &[&root, &following]), Some(("list".into(), false)));
        assert_eq!(broken_in("list", &[]), None);
    }
}
