//! The failures of the HTML report: each with its evidence inline (the request and answer, the
//! deliveries, expected against received, the reproduction).

use super::{escape, secs, Page, SHOWN};
use crate::harness::rules::trace::{Exchange, Posted};
use crate::harness::vocab::outcome::{CaseResult, Outcome, Problem};
use std::fmt::Write;

impl Page<'_> {
    pub(super) fn failures(&self) -> String {
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
    pub(super) fn number(&self, result: &CaseResult) -> usize {
        self.report.results.iter().position(|r| std::ptr::eq(r, result)).unwrap_or_default()
    }

    /// One problem of a failure: its text in a block of its own, then what was expected
    /// against what was received when the rule states them apart.
    fn problem(&self, p: &Problem) -> String {
        let mut out = format!("<pre class=\"message\">{}</pre>\n", self.t(&p.text()));
        if let Some(c) = &p.contrast {
            let _ = writeln!(
                out,
                "<table class=\"contrast\"><tr><th>expected</th><td>{}</td></tr><tr><th>received</th><td>{}</td></tr></table>",
                self.t(&c.expected),
                self.t(&c.actual)
            );
        }
        out
    }

    /// Under the first of `group`'s near-identical problems, their count and the others, one
    /// line each and closed: twenty alike take two lines, not a screen each.
    fn fold(&self, group: &[&Problem]) -> String {
        let mut out = format!(
            "<details class=\"folded\"><summary><span class=\"count\">×{}</span> near-identical problems: \
             the {} others</summary>\n<ul>\n",
            group.len(),
            group.len() - 1
        );
        for p in &group[1..] {
            let _ = writeln!(out, "<li><code>{}</code></li>", self.line(&p.text()));
        }
        out += "</ul>\n</details>\n";
        out
    }

    pub(super) fn failure(&self, result: &CaseResult) -> String {
        let r = self.report;
        let Outcome::Failed(f) = &result.outcome else { return String::new() };
        let mark = r.mark(result);
        let gating = if r.gates(result) { "gating" } else { "not gating" };
        let mut out = format!(
            "<article class=\"failure {}\" id=\"{}\">\n<h3><span class=\"mark\">{mark}</span> <code>{}</code> \
             <span class=\"meta\">{} · {} · {gating}</span></h3>\n<p class=\"title\">{}</p>\n",
            if r.gates(result) { "gating" } else { "note" },
            self.anchor(self.number(result)),
            escape(&result.case.id),
            escape(&result.case.section),
            result.case.level,
            escape(&result.case.title)
        );
        if f.problems.len() > 1 {
            let _ = writeln!(out, "<p class=\"problems\">{} problems:</p>", f.problems.len());
        }
        for group in folded(&f.problems) {
            out += &self.problem(group[0]);
            if group.len() > 1 {
                out += &self.fold(&group);
            }
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

    pub(super) fn exchange(&self, seq: u64, x: &Exchange, open: bool) -> String {
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

    pub(super) fn posted(&self, seq: u64, p: &Posted) -> String {
        format!(
            "<details class=\"posted\"><summary><span class=\"kind delivery\">delivery</span> <code>{}</code> \
             <span class=\"meta\">to the {}'s address, {}, #{seq}</span></summary>\n<pre class=\"body\">{}</pre>\n</details>\n",
            self.t(&p.label),
            p.to.name(),
            secs(p.at),
            self.t(&p.body)
        )
    }
}

/// `problems` in groups of near-identical ones (the same text and contrast once every run of
/// digits is one `#`), each group in the order of its first, its members in theirs.
fn folded(problems: &[Problem]) -> Vec<Vec<&Problem>> {
    let mut groups: Vec<(String, Vec<&Problem>)> = Vec::new();
    for p in problems {
        let contrast = p.contrast.as_ref().map(|c| format!("{}\n{}", c.expected, c.actual)).unwrap_or_default();
        let shape = shape(&format!("{}\n{contrast}", p.text()));
        match groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, group)) => group.push(p),
            None => groups.push((shape, vec![p])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// `text` with every run of digits made one `#`: `acc_12 at 3` and `acc_7 at 41` alike.
fn shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c.is_ascii_digit() {
            true if out.ends_with('#') => {}
            true => out.push('#'),
            false => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_that_differ_only_in_numbers_fold_together() {
        let p = |detail: &str| Problem { detail: detail.into(), ..Problem::default() };
        let problems =
            [p("acc_1: no balance"), p("acc_22: no balance"), p("acc_3: bad currency"), p("acc_4: no balance")];
        let groups = folded(&problems);
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups[0].iter().map(|p| p.detail.as_str()).collect::<Vec<_>>(),
            ["acc_1: no balance", "acc_22: no balance", "acc_4: no balance"]
        );
        assert_eq!(groups[1].len(), 1);
    }
}
