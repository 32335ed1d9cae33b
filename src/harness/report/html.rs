//! The HTML report (`--report-html`): one self-contained file, readable offline (inline CSS, no
//! script, no network: a `Content-Security-Policy` forbids both). The verdict and counts, the
//! failures first, each with its evidence inline (the request and answer, the deliveries,
//! expected against received, the reproduction), a timeline per connection (driver calls,
//! requests and deliveries on one time axis, the two clients apart, the failures' steps
//! marked), the transition graph drawn beside its table, and every case.
//!
//! Everything a target or driver sent is hostile: each string is redacted, then [`escape`]d
//! for text or attribute context, and never lands in a URL attribute, a style or a script;
//! anchors are numbered (`#case-3`, `#conn-2`), never named after target text.

use super::verdict::Report;
use crate::harness::rules::graph::{Transition, TransitionGraph};
use crate::harness::rules::trace::{Client, Connection, Exchange, Item, Kind, Posted};
use crate::harness::vocab::outcome::{CaseResult, Outcome};
use crate::harness::vocab::sanitize;
use crate::spec::{Action, ConnectionState};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

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
        out += "</header>\n";
        if let Some(e) = &r.setup_error {
            let _ = writeln!(
                out,
                "<section class=\"setup\"><h2>The run could not start or judge (exit code 2)</h2><pre>{}</pre></section>",
                self.t(&e.to_string())
            );
        }
        let mut notes: Vec<String> = r.notes.clone();
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
        if r.root_causes.is_empty() {
            return String::new();
        }
        let mut out = String::from("<section id=\"causes\">\n<h2>One cause, several failures</h2>\n<ul>\n");
        for cause in &r.root_causes {
            let cases: Vec<String> = cause
                .cases
                .iter()
                .map(|id| match r.results.iter().position(|x| x.case.id == *id) {
                    Some(n) => format!("<a href=\"#case-{n}\">{}</a>", escape(id)),
                    None => format!("<code>{}</code>", self.t(id)),
                })
                .collect();
            let _ = writeln!(out, "<li>{}<br>explains: {}</li>", self.t(&cause.cause), cases.join(", "));
        }
        out += "</ul>\n</section>\n";
        out
    }

    fn failures(&self) -> String {
        let r = self.report;
        let failures = r.failures();
        let mut out = format!("<section id=\"failures\">\n<h2>Failures ({})</h2>\n", failures.len());
        if failures.is_empty() {
            out += "<p>None.</p>\n";
        }
        for result in failures {
            out += &self.failure(result);
        }
        out += "</section>\n";
        out
    }

    /// The number of `result` among the report's results: its anchor.
    fn number(&self, result: &CaseResult) -> usize {
        self.report.results.iter().position(|r| std::ptr::eq(r, result)).unwrap_or_default()
    }

    fn failure(&self, result: &CaseResult) -> String {
        let r = self.report;
        let Outcome::Failed(f) = &result.outcome else { return String::new() };
        let mark = r.mark(result);
        let gating = if r.gates(result) { "gating" } else { "not gating" };
        let mut out = format!(
            "<article class=\"failure {}\" id=\"case-{}\">\n<h3><span class=\"mark\">{mark}</span> <code>{}</code> \
             <span class=\"meta\">{} · {} · {gating}</span></h3>\n<p class=\"title\">{}</p>\n",
            if r.gates(result) { "gating" } else { "note" },
            self.number(result),
            escape(&result.case.id),
            escape(&result.case.section),
            result.case.level,
            escape(&result.case.title)
        );
        let _ = writeln!(out, "<pre class=\"message\">{}</pre>", self.t(&f.message));
        if let Some(c) = &f.contrast {
            let _ = writeln!(
                out,
                "<table class=\"contrast\"><tr><th>expected</th><td>{}</td></tr><tr><th>received</th><td>{}</td></tr></table>",
                self.t(&c.expected),
                self.t(&c.actual)
            );
        }
        if let Some(input) = &f.shrunk_input {
            let _ = writeln!(out, "<p>Smallest failing input: <code>{}</code></p>", self.t(input));
        }
        let trace = &r.trace;
        let exchanges: Vec<(u64, &Exchange)> =
            f.evidence.answers.iter().filter_map(|seq| Some((*seq, trace.exchanges.get(seq)?))).collect();
        // The first request open; the others, and the deliveries, one line each until opened.
        for (n, (seq, x)) in exchanges.iter().take(SHOWN).enumerate() {
            out += &self.exchange(*seq, x, n == 0);
        }
        if exchanges.len() > SHOWN {
            let _ = writeln!(out, "<p class=\"more\">and {} more requests</p>", exchanges.len() - SHOWN);
        }
        let posted: Vec<(u64, &Posted)> =
            f.evidence.deliveries.iter().filter_map(|seq| Some((*seq, trace.deliveries.get(seq)?))).collect();
        for (seq, p) in posted.iter().take(SHOWN) {
            out += &self.posted(*seq, p);
        }
        if posted.len() > SHOWN {
            let _ = writeln!(out, "<p class=\"more\">and {} more deliveries</p>", posted.len() - SHOWN);
        }
        let lanes: Vec<usize> = trace
            .connections
            .iter()
            .enumerate()
            .filter(|(_, c)| c.items.iter().any(|i| self.marks(i).contains(&self.number(result))))
            .map(|(n, _)| n)
            .collect();
        if !lanes.is_empty() {
            out += "<p class=\"see\">Timeline: ";
            let links: Vec<String> = lanes
                .iter()
                .map(|n| format!("<a href=\"#conn-{n}\">{}</a>", self.t(&trace.connections[*n].id)))
                .collect();
            out += &links.join(", ");
            out += "</p>\n";
        }
        if let Some((file, links)) = &r.har {
            if let Some(link) = links.get(&result.case.id) {
                let _ = writeln!(
                    out,
                    "<p class=\"see\">HAR: entry {} (<code>_id</code> {}) of <code>{}</code>, {} entries of this case.</p>",
                    link.entry,
                    link.id,
                    self.t(file),
                    link.entries
                );
            }
        }
        // A reproduction only where pasting it fails the same rule; else the evidence, as context.
        if let Some(curl) = &result.reproduction {
            let _ = writeln!(out, "<p class=\"label\">Reproduce:</p><pre class=\"reproduce\">{}</pre>", self.t(curl));
        }
        if let Some(context) = r.context(result) {
            let _ = writeln!(out, "<p class=\"see\">{}</p>", self.t(&context));
        }
        let _ = writeln!(
            out,
            "<p class=\"label\">Rerun the case:</p><pre class=\"reproduce\">{}</pre>",
            self.t(&r.rerun(result))
        );
        out += "</article>\n";
        out
    }

    fn exchange(&self, seq: u64, x: &Exchange, open: bool) -> String {
        let status = if x.status == 0 { "no answer".to_string() } else { x.status.to_string() };
        let mut out = format!(
            "<details class=\"exchange\"{}><summary><span class=\"kind read\">request</span> <code>{} {}</code> → \
             <b>{status}</b> <span class=\"meta\">{}, {}, {} ms, #{seq}</span></summary>\n",
            if open { " open" } else { "" },
            self.t(&x.method),
            self.t(&x.url),
            x.client.name(),
            secs(x.at),
            x.took.as_millis()
        );
        out += "<table class=\"headers\">";
        for (name, value) in &x.headers {
            let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", self.t(name), self.t(value));
        }
        if let Some(t) = &x.content_type {
            let _ = write!(out, "<tr><th>answer Content-Type</th><td>{}</td></tr>", self.t(t));
        }
        out += "</table>\n";
        match &x.body {
            Some(body) if !body.is_empty() => {
                let _ = writeln!(out, "<pre class=\"body\">{}</pre>", self.t(body));
            }
            Some(_) => out += "<p class=\"meta\">(empty body)</p>\n",
            None => out += "<p class=\"meta\">(body not kept)</p>\n",
        }
        out += "</details>\n";
        out
    }

    fn posted(&self, seq: u64, p: &Posted) -> String {
        format!(
            "<details class=\"posted\"><summary><span class=\"kind delivery\">delivery</span> <code>{}</code> \
             <span class=\"meta\">to the {}'s address, {}, #{seq}</span></summary>\n<pre class=\"body\">{}</pre>\n</details>\n",
            self.t(&p.label),
            p.to.name(),
            secs(p.at),
            self.t(&p.body)
        )
    }

    /// The failed cases (their numbers) that rest on `item`.
    fn marks(&self, item: &Item) -> Vec<usize> {
        let (answers, deliveries) = &self.failing;
        let mut marks: Vec<usize> = item.answer.and_then(|s| answers.get(&s)).cloned().unwrap_or_default();
        marks.extend(item.delivery.and_then(|s| deliveries.get(&s)).cloned().unwrap_or_default());
        marks
    }

    fn timelines(&self) -> String {
        let trace = &self.report.trace;
        if trace.connections.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "<section id=\"timelines\">\n<h2>Timelines</h2>\n<p>Per connection: driver calls, requests and webhook \
             deliveries on one time axis (seconds since the run started), each client on rows of its own. A step a \
             failure rests on is outlined in red. Delivery order is the server's to choose (§6.3): a timeline shows \
             arrival, not a rule.</p>\n",
        );
        out += "<p class=\"legend\"><span class=\"kind call\">driver call</span> <span class=\"kind read\">request</span> \
                <span class=\"kind delivery\">delivery</span> <span class=\"kind marked\">a failure's evidence</span></p>\n";
        for (n, c) in trace.connections.iter().enumerate() {
            out += &self.timeline(n, c);
        }
        if trace.connections_left_out > 0 {
            let _ = writeln!(
                out,
                "<p class=\"more\">{} more connections are not drawn (those the failures name come first).</p>",
                trace.connections_left_out
            );
        }
        out += "</section>\n";
        out
    }

    fn timeline(&self, n: usize, c: &Connection) -> String {
        let marked = c.items.iter().any(|i| !self.marks(i).is_empty());
        let owner = c.owner.map(|o| format!(", created by the {}", o.name())).unwrap_or_default();
        let mut out = format!(
            "<details class=\"connection\" id=\"conn-{n}\"{}><summary>Connection <code>{}</code>{owner}: {} items{}</summary>\n",
            if marked { " open" } else { "" },
            self.t(&c.id),
            c.items.len(),
            if marked { " <span class=\"mark\">failing steps</span>" } else { "" }
        );
        out += &self.svg_timeline(c);
        out += "<table class=\"items\"><thead><tr><th>at</th><th>took</th><th>client</th><th>what</th><th></th>\
                </tr></thead><tbody>\n";
        for item in &c.items {
            let marks = self.marks(item);
            let failing: Vec<String> = marks
                .iter()
                .map(|m| format!("<a href=\"#case-{m}\">{}</a>", escape(&self.report.results[*m].case.id)))
                .collect();
            let took = item.until.saturating_sub(item.at);
            let _ = writeln!(
                out,
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td><span class=\"kind {}\">{}</span> <code>{}</code></td><td>{}</td></tr>",
                if marks.is_empty() { "" } else { "marked" },
                secs(item.at),
                if item.kind == Kind::Delivery { String::new() } else { format!("{} ms", took.as_millis()) },
                item.client.name(),
                kind_class(item.kind),
                item.kind.as_str(),
                self.t(&item.label),
                failing.join(" ")
            );
        }
        out += "</tbody></table>\n";
        if c.left_out > 0 {
            let _ = writeln!(out, "<p class=\"more\">{} more items of this connection are not shown.</p>", c.left_out);
        }
        out += "</details>\n";
        out
    }

    /// The connection's items drawn on one axis: a row per client and kind that has items.
    fn svg_timeline(&self, c: &Connection) -> String {
        const WIDTH: f64 = 960.0;
        const LEFT: f64 = 190.0;
        const ROW: f64 = 24.0;
        let rows: Vec<(Client, Kind)> = [Client::First, Client::Second]
            .into_iter()
            .flat_map(|client| [Kind::Call, Kind::Read, Kind::Delivery].map(|kind| (client, kind)))
            .filter(|(client, kind)| c.items.iter().any(|i| i.client == *client && i.kind == *kind))
            .collect();
        if rows.is_empty() {
            return String::new();
        }
        let start = c.items.iter().map(|i| i.at).min().unwrap_or_default().as_secs_f64();
        let end = c.items.iter().map(|i| i.until.max(i.at)).max().unwrap_or_default().as_secs_f64();
        let span = (end - start).max(0.001);
        let x = |d: Duration| LEFT + (d.as_secs_f64() - start) / span * (WIDTH - LEFT - 20.0);
        let height = ROW * rows.len() as f64 + 30.0;
        let mut out = format!(
            "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" \
             xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n"
        );
        for (row, (client, kind)) in rows.iter().enumerate() {
            let y = ROW * row as f64 + 4.0;
            let _ = writeln!(
                out,
                "<text x=\"4\" y=\"{:.1}\" class=\"row\">{}: {}</text><line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" class=\"lane\"/>",
                y + 15.0,
                client.name(),
                kind.as_str(),
                WIDTH - 20.0,
                y + ROW / 2.0,
                y + ROW / 2.0
            );
            for item in c.items.iter().filter(|i| i.client == *client && i.kind == *kind) {
                let marked = if self.marks(item).is_empty() { "" } else { " marked" };
                let title = format!("{} ({})", self.t(&item.label), secs(item.at));
                let (x0, x1) = (x(item.at), x(item.until.max(item.at)));
                if *kind == Kind::Delivery {
                    let (cy, r) = (y + ROW / 2.0, 6.0);
                    let _ = writeln!(
                        out,
                        "<polygon class=\"delivery{marked}\" points=\"{x0:.1},{:.1} {:.1},{cy:.1} {x0:.1},{:.1} {:.1},{cy:.1}\"><title>{title}</title></polygon>",
                        cy - r,
                        x0 + r,
                        cy + r,
                        x0 - r
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "<rect class=\"{}{marked}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"2\"><title>{title}</title></rect>",
                        kind_class(*kind),
                        y + 5.0,
                        (x1 - x0).max(3.0),
                        ROW - 10.0
                    );
                }
            }
        }
        let axis = ROW * rows.len() as f64 + 18.0;
        for tick in 0..=4 {
            let at = start + span * f64::from(tick) / 4.0;
            let tx = LEFT + (WIDTH - LEFT - 20.0) * f64::from(tick) / 4.0;
            let anchor = ["start", "middle", "middle", "middle", "end"][tick as usize];
            let _ = writeln!(
                out,
                "<text x=\"{tx:.1}\" y=\"{axis:.1}\" class=\"tick\" text-anchor=\"{anchor}\">+{at:.2} s</text>"
            );
        }
        out += "</svg>\n";
        out
    }

    fn graph(&self) -> String {
        let r = self.report;
        let Some(graph) = &r.transition_graph else {
            return match r.results.iter().find(|r| r.case.id == "lifecycle.transition-graph") {
                Some(result) => format!(
                    "<section id=\"graph\"><h2>Transition graph</h2><p>Not recorded in this run: <code>{}</code> ended \
                     {} before its exploration finished.</p></section>\n",
                    escape(&result.case.id),
                    result.outcome.label()
                ),
                None => String::new(),
            };
        };
        let mut out = String::from(
            "<section id=\"graph\">\n<h2>Transition graph (as the target revealed it)</h2>\n<div class=\"side\">\n",
        );
        out += &graph_svg(graph);
        out += "<table class=\"graph\"><thead><tr><th>from \\ action</th>";
        for action in Action::ALL {
            let _ = write!(out, "<th><code>{}</code></th>", action.as_str());
        }
        out += "</tr></thead><tbody>\n";
        for from in &graph.reached {
            let _ = write!(out, "<tr><th>{}</th>", from.lower());
            for action in Action::ALL {
                let t = graph.edges.iter().find(|(f, a, _)| f == from && *a == action).map(|(_, _, t)| *t);
                let class = match t {
                    Some(Transition::Accepted(_)) => "accepted",
                    Some(Transition::Refused) => "refused",
                    _ => "other",
                };
                let _ =
                    write!(out, "<td class=\"{class}\">{}</td>", t.map(|t| escape(&t.label())).unwrap_or("—".into()));
            }
            out += "</tr>\n";
        }
        out += "</tbody></table>\n</div>\n</section>\n";
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
                format!("<a href=\"#case-{n}\">{}</a>", escape(&result.case.id))
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
                self.line(result.outcome.message().unwrap_or_default())
            );
        }
        out += "</tbody></table>\n</details>\n</section>\n";
        out
    }
}

fn kind_class(kind: Kind) -> &'static str {
    match kind {
        Kind::Call => "call",
        Kind::Read => "read",
        Kind::Delivery => "delivery",
    }
}

/// The graph drawn: the states reached on a circle, an arrow per accepted action (labelled with
/// the actions that take it), a loop for an action that leaves the state as it was.
fn graph_svg(graph: &TransitionGraph) -> String {
    const SIZE: f64 = 700.0;
    let (cx, cy, radius) = (SIZE / 2.0, SIZE / 2.0, SIZE / 2.0 - 150.0);
    let states: &[ConnectionState] = &graph.reached;
    let place = |s: ConnectionState| {
        let i = states.iter().position(|r| *r == s).unwrap_or_default() as f64;
        let angle = std::f64::consts::TAU * i / states.len().max(1) as f64 - std::f64::consts::FRAC_PI_2;
        (cx + radius * angle.cos(), cy + radius * angle.sin())
    };
    let mut out = format!(
        "<svg class=\"graph\" viewBox=\"0 0 {SIZE} {SIZE}\" width=\"{SIZE}\" height=\"{SIZE}\" \
         xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" \
         refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" \
         class=\"head\"/></marker></defs>\n"
    );
    // One arrow per pair of states, labelled with every action that takes it.
    let mut arrows: Vec<((ConnectionState, ConnectionState), Vec<&str>)> = Vec::new();
    for (from, action, t) in &graph.edges {
        if let Transition::Accepted(to) = t {
            if states.contains(from) && states.contains(to) {
                match arrows.iter_mut().find(|(pair, _)| *pair == (*from, *to)) {
                    Some((_, actions)) => actions.push(action.as_str()),
                    None => arrows.push(((*from, *to), vec![action.as_str()])),
                }
            }
        }
    }
    for ((from, to), actions) in &arrows {
        let (x0, y0) = place(*from);
        let label_text = actions.join(", ");
        if from == to {
            // A loop outside the circle of states: out of the state on one side, back on the other.
            let (ox, oy) = ((x0 - cx) / radius, (y0 - cy) / radius);
            let turn = |a: f64| (ox * a.cos() - oy * a.sin(), ox * a.sin() + oy * a.cos());
            let ((ax, ay), (bx, by)) = (turn(0.45), turn(-0.45));
            let (a, b) = (rim(x0, y0, ax, ay), rim(x0, y0, bx, by));
            let (c1, c2) = ((a.0 + ax * 55.0, a.1 + ay * 55.0), (b.0 + bx * 55.0, b.1 + by * 55.0));
            let label = rim(x0, y0, ox, oy);
            let _ = writeln!(
                out,
                "<path class=\"edge\" d=\"M {:.1} {:.1} C {:.1} {:.1} {:.1} {:.1} {:.1} {:.1}\" marker-end=\"url(#arrow)\"/>\
                 <text class=\"edge\" x=\"{:.1}\" y=\"{:.1}\">{label_text}</text>",
                a.0,
                a.1,
                c1.0,
                c1.1,
                c2.0,
                c2.1,
                b.0,
                b.1,
                label.0 + ox * 52.0,
                label.1 + oy * 52.0 + 4.0,

            );
            continue;
        }
        let (x1, y1) = place(*to);
        let (dx, dy) = (x1 - x0, y1 - y0);
        let length = (dx * dx + dy * dy).sqrt().max(1.0);
        let (ux, uy) = (dx / length, dy / length);
        // Start and end at the states' rims; bend to the left, so that a→b and b→a part.
        let ((sx, sy), (ex, ey)) = (rim(x0, y0, ux, uy), rim(x1, y1, -ux, -uy));
        let (mx, my) = ((sx + ex) / 2.0 - uy * 28.0, (sy + ey) / 2.0 + ux * 28.0);
        let _ = writeln!(
            out,
            "<path class=\"edge\" d=\"M {sx:.1} {sy:.1} Q {mx:.1} {my:.1} {ex:.1} {ey:.1}\" marker-end=\"url(#arrow)\"/>\
             <text class=\"edge\" x=\"{:.1}\" y=\"{:.1}\">{label_text}</text>",
            (sx + ex) / 4.0 + mx / 2.0,
            (sy + ey) / 4.0 + my / 2.0
        );
    }
    for state in states {
        let (x, y) = place(*state);
        let _ = writeln!(
            out,
            "<ellipse class=\"state\" cx=\"{x:.1}\" cy=\"{y:.1}\" rx=\"{STATE_RX}\" ry=\"{STATE_RY}\"/><text class=\"state\" x=\"{x:.1}\" \
             y=\"{:.1}\">{}</text>",
            y + 4.0,
            state.lower()
        );
    }
    out += "</svg>\n";
    out
}

/// Half-axes of a state's ellipse in the drawn graph.
const STATE_RX: f64 = 62.0;
const STATE_RY: f64 = 22.0;

/// The point just outside the rim of the state drawn at `(x, y)`, in the direction `(ux, uy)`
/// (a unit vector): where an arrow starts or ends, its head visible.
fn rim(x: f64, y: f64, ux: f64, uy: f64) -> (f64, f64) {
    let t = 1.0 / ((ux / STATE_RX).powi(2) + (uy / STATE_RY).powi(2)).sqrt().max(1e-9) + 3.0;
    (x + ux * t, y + uy * t)
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
