//! The HTML report (`--report-html`): one self-contained file, readable offline (inline CSS, no
//! script, no network: a `Content-Security-Policy` forbids both). The verdict and counts, the
//! failures first, each with its evidence inline (the request and answer, the deliveries,
//! expected against received, the reproduction), a timeline per connection (driver calls,
//! requests and deliveries on one time axis, the two clients apart, the failures' steps
//! marked), the transition graph drawn beside its table, and every case.
//!
//! Everything a target or driver sent is hostile: each string is redacted, then [`escape`]d
//! for text or attribute context, and never lands in a URL attribute, a style or a script;
//! a case's anchor is its catalogue id (`#case-auth.no-key`, any other character than a letter,
//! digit, `.`, `-` or `_` made `_`), a connection's is numbered (`#conn-2`): never target text.
//!
//! This module holds the page (its head, header, the index of its failures, causes, unjudged
//! cases, every case, the style); `failure`, `timeline` and `graph` its other sections.

use super::verdict::Report;
use crate::harness::rules::verdict::RootCause;
use crate::harness::vocab::outcome::Outcome;
use crate::harness::vocab::sanitize;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

mod failure;
mod graph;
mod timeline;

/// The policy of the page: no script, no request of any kind; inline styles and `data:`
/// images only. A defence in depth: the escaping alone keeps target text inert.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// Most exchanges, and most deliveries, shown inline under one failure (the rest are counted).
const SHOWN: usize = 6;

/// Text made safe for HTML text and for a quoted attribute value: the characters that start
/// markup or end a value as entities, and the characters that reorder or hide text (bidi
/// overrides, NUL, ESC, zero-width) made visible (`sanitize::visible`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in sanitize::visible(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The HTML report, every string passed through the run's redactor before it is escaped (and
/// the whole page once more).
pub fn render(report: &Report) -> String {
    let page = Page { report, failing: failing_steps(report) };
    report.redactor.redact(&page.render())
}

/// Whether `html` keeps the shape this module writes: the policy in place, no script, no
/// element that loads or links anything, and every element closed in order (target text, once
/// escaped, has no `<`, so injected markup would break the nesting). For the self-test and the
/// tests; `Err` says what is wrong.
pub fn well_formed(html: &str) -> Result<(), String> {
    if !html.contains(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">")) {
        return Err("no Content-Security-Policy meta tag".into());
    }
    const VOID: [&str; 3] = ["meta", "br", "hr"];
    const NEVER: [&str; 9] = ["script", "iframe", "object", "embed", "img", "link", "form", "base", "a"];
    let mut open: Vec<&str> = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let end = rest.find('>').ok_or("a '<' that no '>' closes")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        let closing = tag.strip_prefix('/');
        let name = closing.unwrap_or(tag).split([' ', '\n']).next().unwrap_or_default();
        let name = name.trim_end_matches('/');
        if !name.chars().all(|c| c.is_ascii_alphanumeric()) || name.is_empty() {
            return Err(format!("a tag that is not one of this report's: <{}>", sanitize::visible(tag)));
        }
        let anchor = name == "a" && (closing.is_some() || tag.starts_with("a href=\"#"));
        if NEVER.contains(&name.to_ascii_lowercase().as_str()) && !anchor {
            return Err(format!("a <{name}> element"));
        }
        if tag.contains("javascript:") || has_handler(tag) {
            return Err(format!("a script in a tag: <{}>", sanitize::visible(tag)));
        }
        match closing {
            Some(_) if open.pop() != Some(name) => return Err(format!("</{name}> closes what it did not open")),
            Some(_) => {}
            None if VOID.contains(&name) || tag.ends_with('/') => {}
            None => open.push(name),
        }
    }
    match open.last() {
        Some(name) => Err(format!("<{name}> is never closed")),
        None => Ok(()),
    }
}

/// Whether a tag has an event-handler attribute (`onload=`).
fn has_handler(tag: &str) -> bool {
    tag.split_whitespace().skip(1).any(|attr| attr.to_ascii_lowercase().starts_with("on") && attr.contains('='))
}

/// For each answer and delivery a failure rests on, the failed cases (their numbers and ids).
type Failing = (HashMap<u64, Vec<usize>>, HashMap<u64, Vec<usize>>);

fn failing_steps(report: &Report) -> Failing {
    let (mut answers, mut deliveries): Failing = Default::default();
    for (n, r) in report.results.iter().enumerate() {
        if let Outcome::Failed(f) = &r.outcome {
            for seq in &f.evidence.answers {
                answers.entry(*seq).or_default().push(n);
            }
            for seq in &f.evidence.deliveries {
                deliveries.entry(*seq).or_default().push(n);
            }
        }
    }
    (answers, deliveries)
}

struct Page<'a> {
    report: &'a Report,
    failing: Failing,
}

/// `+1.234 s`.
fn secs(d: Duration) -> String {
    format!("+{:.3} s", d.as_secs_f64())
}

impl Page<'_> {
    /// Target or driver text, redacted, then escaped.
    fn t(&self, text: &str) -> String {
        escape(&self.report.redactor.redact(text))
    }

    /// A message's first line, redacted and cut (what a cut leaves of a secret goes too), then
    /// escaped: the table of every case stays readable; the failures above hold the whole text.
    fn line(&self, message: &str) -> String {
        escape(&self.report.redactor.cut(message.lines().next().unwrap_or_default(), 300))
    }

    /// An outcome in a table cell: a failure's one problem, or how many and the first (the
    /// failures above show each); an error's or a skip's message.
    fn gist(&self, outcome: &Outcome) -> String {
        match outcome {
            Outcome::Failed(f) => match f.problems.as_slice() {
                [one] => self.line(&one.text()),
                [first, ..] => format!("{} problems, the first: {}", f.problems.len(), self.line(&first.text())),
                [] => String::new(),
            },
            other => self.line(other.message().unwrap_or_default()),
        }
    }

    /// The anchor of the `n`th result's failure: `case-` and its id, made of safe characters
    /// alone, then escaped.
    fn anchor(&self, n: usize) -> String {
        let id = self.report.results.get(n).map(|r| r.case.id.as_str()).unwrap_or_default();
        let safe: String = id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
            .collect();
        format!("case-{}", escape(&safe))
    }

    /// The index of the failures, at the top of the page: each links to its section below, with
    /// its mark and its first problem, gating failures first.
    fn index(&self) -> String {
        let r = self.report;
        let failures = r.failures();
        if failures.is_empty() {
            return String::new();
        }
        let mut out = format!("<nav id=\"index\">\n<h2>Failures at a glance ({})</h2>\n<ol>\n", failures.len());
        for result in failures {
            let _ = writeln!(
                out,
                "<li><span class=\"mark\">{}</span> <a href=\"#{}\">{}</a> <span class=\"meta\">{} · {}</span> {}</li>",
                r.mark(result),
                self.anchor(self.number(result)),
                escape(&result.case.id),
                escape(&result.case.section),
                result.case.level,
                self.gist(&result.outcome)
            );
        }
        out += "</ol>\n</nav>\n";
        out
    }

    fn render(&self) -> String {
        let r = self.report;
        let verdict = r.verdict();
        let mut out = String::new();
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>bankconf {}: {verdict}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            r.command()
        );
        out += &self.header();
        out += &self.index();
        out += &self.root_causes();
        out += &self.failures();
        out += &self.timelines();
        out += &self.graph();
        out += &self.unjudged();
        out += &self.all_cases();
        out += "<footer>Written by bankconf ";
        out += env!("CARGO_PKG_VERSION");
        out += ". Sections (§) are those of the service's interface specification.</footer>\n</body>\n</html>\n";
        out
    }

    fn header(&self) -> String {
        let r = self.report;
        let c = r.counts(None);
        let class = match r.verdict() {
            "PASSED" => "passed",
            "FAILED" => "failed",
            "INCOMPLETE" => "incomplete",
            _ => "error",
        };
        let mut out =
            format!("<header class=\"verdict {class}\">\n<h1>bankconf {}: {}</h1>\n", r.command(), escape(r.verdict()));
        let seed = r.seed().map(|s| format!(", seed <code>{s}</code>")).unwrap_or_default();
        let _ = writeln!(
            out,
            "<p>Target <code>{}</code>{seed}; gating levels: {}. Exit code {} after {:.2} s.</p>",
            self.t(&r.server),
            escape(&r.gate.names()),
            r.exit_code(),
            r.duration.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "<p class=\"counts\"><span class=\"n passed\">{} passed</span> <span class=\"n failed\">{} failed</span> \
             <span class=\"n error\">{} errors</span> <span class=\"n ignored\">{} ignored</span></p>",
            c.passed, c.failed, c.errors, c.ignored
        );
        let left_out = super::selection::LeftOut::of(r).parts(r);
        if !left_out.is_empty() {
            let _ = writeln!(
                out,
                "<p class=\"warning\"><strong>Not the whole catalogue:</strong> {}.</p>",
                self.t(&left_out.join("; "))
            );
        }
        // A run that did not check the target's identity says so where the verdict is, not only
        // in the collapsed notes.
        for tls in r.notes.iter().filter(|n| n.unverified()) {
            let _ = writeln!(out, "<p class=\"warning\"><strong>{}</strong></p>", self.t(&tls.to_string()));
        }
        out += "</header>\n";
        if let Some(e) = &r.setup_error {
            let _ = writeln!(
                out,
                "<section class=\"setup\"><h2>The run could not start or judge (exit code 2)</h2><pre>{}</pre></section>",
                self.t(&e.to_string())
            );
        }
        let mut notes: Vec<String> = r.notes.iter().map(ToString::to_string).collect();
        notes.extend(r.latency_lines());
        if !notes.is_empty() {
            out += "<details class=\"notes\"><summary>Notes on the run</summary>\n<ul>\n";
            for note in &notes {
                let _ = writeln!(out, "<li>{}</li>", self.t(note));
            }
            out += "</ul>\n</details>\n";
        }
        out += "<table class=\"levels\"><thead><tr><th>level</th><th>passed</th><th>failed</th><th>errors</th>\
                <th>ignored</th><th>gates</th></tr></thead><tbody>\n";
        for (level, c, gates) in r.by_level() {
            let _ = writeln!(
                out,
                "<tr><td>{level}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                c.passed,
                c.failed,
                c.errors,
                c.ignored,
                if gates { "yes" } else { "no" }
            );
        }
        out += "</tbody></table>\n";
        out
    }

    /// The facts that may explain several failures at once, said before them, each with the
    /// failures it explains.
    fn root_causes(&self) -> String {
        let r = self.report;
        if !r.root_causes.iter().any(RootCause::explains) {
            return String::new();
        }
        let mut out = String::from("<section id=\"causes\">\n<h2>One cause, several failures</h2>\n<ul>\n");
        for cause in r.root_causes.iter().filter(|c| c.explains()) {
            let cases: Vec<String> = cause
                .cases
                .iter()
                .map(|id| match r.results.iter().position(|x| x.case.id == *id) {
                    Some(n) => format!("<a href=\"#{}\">{}</a>", self.anchor(n), escape(id)),
                    None => format!("<code>{}</code>", self.t(id)),
                })
                .collect();
            let _ = writeln!(out, "<li>{}<br>explains: {}</li>", self.t(&cause.cause), cases.join(", "));
        }
        out += "</ul>\n</section>\n";
        out
    }

    fn unjudged(&self) -> String {
        let r = self.report;
        let unjudged = r.unjudged();
        if unjudged.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "<section id=\"unjudged\">\n<h2>Not judged: how to complete the run</h2>\n<table><thead><tr><th>what would \
             complete it</th><th>gating cases</th></tr></thead><tbody>\n",
        );
        for (how, cases) in &unjudged {
            let cases: Vec<String> = cases.iter().map(|c| format!("<code>{}</code>", escape(c))).collect();
            let _ = writeln!(out, "<tr><td>{}</td><td>{}</td></tr>", self.t(how), cases.join(", "));
        }
        out += "</tbody></table>\n</section>\n";
        out
    }

    fn all_cases(&self) -> String {
        let r = self.report;
        let mut out = format!(
            "<section id=\"cases\">\n<details><summary><h2>Every case ({})</h2></summary>\n<table class=\"cases\"><thead><tr>\
             <th>mark</th><th>case</th><th>section</th><th>level</th><th>ms</th><th>message</th></tr></thead><tbody>\n",
            r.results.len()
        );
        for (n, result) in r.results.iter().enumerate() {
            let mark = r.mark(result);
            let id = if result.outcome.is_failed() {
                format!("<a href=\"#{}\">{}</a>", self.anchor(n), escape(&result.case.id))
            } else {
                escape(&result.case.id)
            };
            let _ = writeln!(
                out,
                "<tr class=\"{}\"><td>{mark}</td><td><code>{id}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                mark.to_ascii_lowercase(),
                escape(&result.case.section),
                result.case.level,
                result.duration.as_millis(),
                self.gist(&result.outcome)
            );
        }
        out += "</tbody></table>\n</details>\n</section>\n";
        out
    }
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:0 20px 40px;color:#1d1d1f;background:#fafafa}
header.verdict{margin:16px 0;padding:12px 18px;border-radius:8px;color:#fff}
header.passed{background:#1e7f3b}header.failed{background:#b3261e}header.incomplete{background:#9a6700}header.error{background:#555}
header h1{margin:0 0 4px;font-size:22px}header p{margin:2px 0}header code{color:#fff}
.counts .n{display:inline-block;margin-right:10px;font-weight:600}
h2{margin:28px 0 8px;font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{margin:0 0 4px;font-size:15px}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f0f0f3;border:1px solid #e0e0e6;border-radius:4px;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f6}
table.levels td:nth-child(n+2){text-align:right}
article.failure{background:#fff;border:1px solid #e4c3c0;border-left:6px solid #b3261e;border-radius:6px;padding:10px 14px;margin:12px 0}
article.failure.note{border-left-color:#9a6700;border-color:#eadbb8}
.mark{display:inline-block;background:#b3261e;color:#fff;border-radius:3px;padding:0 6px;font-size:12px;font-weight:700}
.note .mark{background:#9a6700}
.meta{color:#666;font-weight:normal;font-size:12.5px}.title{margin:2px 0 6px;color:#333}
table.contrast th{width:90px}table.contrast td{font-family:ui-monospace,monospace;font-size:12.5px;word-break:break-all}
details{margin:6px 0}summary{cursor:pointer}
details.exchange,details.posted{border:1px solid #e6e6ea;border-radius:4px;padding:4px 8px;background:#fcfcfd}
.kind{display:inline-block;border-radius:3px;padding:0 5px;font-size:11.5px;color:#fff}
.kind.call{background:#5b4fc4}.kind.read{background:#1e7f6e}.kind.delivery{background:#c2570c}.kind.marked{background:#fff;color:#b3261e;border:2px solid #b3261e}
nav#index ol{margin:4px 0;padding-left:24px}nav#index li{margin:2px 0}
.count{display:inline-block;margin-left:6px;padding:0 6px;border-radius:8px;background:#b3261e;color:#fff;font-weight:600}
details.folded ul{margin:4px 0;padding-left:20px}
.label{margin:8px 0 2px;font-weight:600}.more,.see{color:#555}
svg{display:block;margin:8px 0;background:#fff;border:1px solid #e6e6ea;border-radius:4px;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#333}svg text.tick{fill:#777}
svg .lane{stroke:#e2e2e8}svg rect.call{fill:#5b4fc4}svg rect.read{fill:#1e7f6e}svg polygon.delivery{fill:#c2570c}
svg .marked{stroke:#d00;stroke-width:3}
tr.marked td{background:#fde8e6}table.items td:nth-child(-n+3){white-space:nowrap}
svg.graph ellipse.state{fill:#eef3ff;stroke:#4a63b0;stroke-width:1.5}svg.graph text.state{text-anchor:middle;font-weight:600}
svg.graph path.edge{fill:none;stroke:#4a63b0;stroke-width:1.4}svg.graph text.edge{fill:#4a63b0;text-anchor:middle;font-size:10.5px;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.graph .head{fill:#4a63b0}
.side{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
td.accepted{background:#e8f5ec}td.refused{background:#fbeaea}td.other{color:#888}
table.cases tr.fail td,table.cases tr.note td{background:#fde8e6}table.cases tr.error td{background:#eee}
table.cases tr.skip td{color:#777}
summary h2{display:inline;border:0}
footer{margin-top:30px;color:#777;font-size:12px}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_no_hidden_character() {
        let hostile = "<script>alert(1)</script></textarea>\"' javascript:x \u{202e}evil\u{0}\u{1b}[2J &amp;";
        let out = escape(hostile);
        assert!(!out.contains('<') && !out.contains('>') && !out.contains('"') && !out.contains('\''), "{out}");
        assert!(!out.chars().any(|c| c == '\u{202e}' || c == '\0' || c == '\u{1b}'), "{out}");
        assert!(out.contains("&amp;amp;") && out.contains("\\u{202e}"), "{out}");
    }

    #[test]
    fn the_shape_check_finds_markup_that_escaped() {
        let page = |body: &str| {
            format!("<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\"></head><body>{body}</body></html>")
        };
        assert_eq!(well_formed(&page("<p>a &lt;script&gt;</p>")), Ok(()));
        assert!(well_formed(&page("<p><script>x</script></p>")).is_err());
        assert!(well_formed(&page("<p><img src=x onerror=alert(1)></p>")).is_err());
        assert!(well_formed(&page("<p></textarea></p>")).is_err());
        assert!(well_formed(&page("<p onclick=\"x\">a</p>")).is_err());
        assert!(well_formed("<p>no policy</p>").is_err());
    }
}
