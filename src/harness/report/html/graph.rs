//! The transition graph of the HTML report, drawn beside its table.

use super::{escape, Page};
use crate::harness::rules::graph::{Transition, TransitionGraph};
use crate::spec::{Action, ConnectionState};
use std::fmt::Write;

impl Page<'_> {
    pub(super) fn graph(&self) -> String {
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
