//! The timelines of the HTML report: per connection, driver calls, requests and deliveries on
//! one time axis, the two clients apart, the failures' steps marked.

use super::{escape, secs, Page};
use crate::harness::rules::trace::{Client, Connection, Item, Kind};
use std::fmt::Write;
use std::time::Duration;

impl Page<'_> {
    /// The failed cases (their numbers) that rest on `item`.
    pub(super) fn marks(&self, item: &Item) -> Vec<usize> {
        let (answers, deliveries) = &self.failing;
        let mut marks: Vec<usize> = item.answer.and_then(|s| answers.get(&s)).cloned().unwrap_or_default();
        marks.extend(item.delivery.and_then(|s| deliveries.get(&s)).cloned().unwrap_or_default());
        marks
    }

    pub(super) fn timelines(&self) -> String {
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

    pub(super) fn timeline(&self, n: usize, c: &Connection) -> String {
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
                .map(|m| format!("<a href=\"#{}\">{}</a>", self.anchor(*m), escape(&self.report.results[*m].case.id)))
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
    pub(super) fn svg_timeline(&self, c: &Connection) -> String {
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
}

fn kind_class(kind: Kind) -> &'static str {
    match kind {
        Kind::Call => "call",
        Kind::Read => "read",
        Kind::Delivery => "delivery",
    }
}
