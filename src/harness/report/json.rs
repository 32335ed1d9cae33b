//! The JSON report (`--report-json`). Its shape is `schemas/report.json` (draft 2020-12);
//! tests validate generated reports against it.

use super::verdict::{Cited, Report};
use crate::harness::rules::expect::Standing;
use crate::harness::rules::graph::Transition;
use crate::harness::rules::latency::Stats;
use crate::harness::vocab::outcome::{Counts, Failure, Outcome, Problem};
use crate::harness::vocab::redact::Redactor;
use serde_json::{json, Map, Value};

/// Version of the report's shape; bumped when `schemas/report.json` changes incompatibly.
/// Version 2: `seed` is a string (a 64-bit seed loses digits as a JSON number in `jq` or
/// JavaScript). Version 3: a failure's `evidence` names its requests and deliveries as the
/// written files do (the request, its status and HAR `_id`; the event's `id`, `type` and HAR
/// `_id`), no longer by places in a log the user never sees.
pub(crate) const FORMAT_VERSION: u32 = 3;

/// Which part of a failure's evidence [`cited`] lists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Requests,
    Deliveries,
    Received,
}

/// The requests, the deliveries or the received items of a failure's evidence, as the files
/// (or, for what the widget's page received, its origin) name them.
fn cited(report: &Report, result: &crate::harness::vocab::outcome::CaseResult, part: Part) -> Vec<Value> {
    let cited = report.cited.get(&result.case.id).map(Vec::as_slice).unwrap_or_default();
    cited
        .iter()
        .filter_map(|c| match c {
            Cited::Request { request, status, har } if part == Part::Requests => {
                Some(json!({"request": request, "status": status, "har_id": har}))
            }
            Cited::Delivery { event, kind, har } if part == Part::Deliveries => {
                Some(json!({"event_id": event, "type": kind, "har_id": har}))
            }
            Cited::Received { what } if part == Part::Received => Some(json!({"what": what})),
            _ => None,
        })
        .collect()
}

/// A failure's `message`: its one problem, or how many and the first (`problems` holds each).
fn headline(failure: &Failure) -> String {
    match failure.problems.as_slice() {
        [first, _, ..] => format!("{} problems, the first: {}", failure.problems.len(), first.text()),
        [one] => one.text(),
        [] => String::new(),
    }
}

/// One problem: the request that shows it, what is wrong, and what was expected against what
/// was received when the rule states them apart; its kind, the section that states its rule and
/// the ids it is about when its rule gives them as values (issue 74).
fn problem(p: &Problem) -> Value {
    json!({
        "request": p.request,
        "detail": p.detail,
        "expected": p.contrast.as_ref().map(|c| &c.expected),
        "received": p.contrast.as_ref().map(|c| &c.actual),
        "kind": p.kind.map(|k| k.name()),
        "section": p.kind.map(|k| k.section()),
        "about": p.about,
    })
}

fn counts(c: Counts) -> Value {
    json!({"passed": c.passed, "failed": c.failed, "errors": c.errors, "ignored": c.ignored})
}

fn stats(s: Stats) -> Value {
    json!({"count": s.count, "median_ms": s.median_ms, "p95_ms": s.p95_ms, "max_ms": s.max_ms})
}

fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// The report as a JSON value, every string in it passed through the run's redactor.
pub fn render(report: &Report) -> Value {
    let mut value = render_raw(report);
    redact_strings(&mut value, &report.redactor);
    value
}

/// Redacts every string of `value`, keys of objects included.
fn redact_strings(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(s) => *s = redactor.redact(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_strings(v, redactor)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut v) in entries {
                redact_strings(&mut v, redactor);
                map.insert(redactor.redact(&key), v);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Every root of the verdict: the case (none for a fact of the answers), what it says, and the
/// cases it explains (its consequences).
fn roots(report: &Report) -> Vec<Value> {
    report.root_causes.iter().map(|c| json!({"case": c.case, "cause": c.cause, "cases": c.cases})).collect()
}

fn render_raw(report: &Report) -> Value {
    let cases: Vec<Value> = report
        .results
        .iter()
        .map(|r| {
            let failed = r.outcome.is_failed();
            json!({
                "id": r.case.id,
                "title": r.case.title,
                "area": r.case.area,
                "section": r.case.section,
                "level": r.case.level.as_str(),
                "outcome": r.outcome.label(),
                "cause": match &r.outcome {
                    Outcome::Error { source, .. } => Some(source.as_str()),
                    Outcome::Ignored { cause, .. } => Some(cause.as_str()),
                    _ => None,
                },
                "message": match &r.outcome {
                    Outcome::Failed(f) => Some(headline(f)),
                    other => other.message().map(str::to_string),
                },
                "problems": match &r.outcome {
                    Outcome::Failed(f) => json!(f.problems.iter().map(problem).collect::<Vec<_>>()),
                    _ => Value::Null,
                },
                "reproduction": if failed { r.reproduction.clone() } else { None },
                "consequence_of": r.consequence_of.as_ref().map(|c| json!({"root": c.root, "foundation": c.foundation.as_str()})),
                "rerun": report.rerun(r),
                "gating": report.gates(r),
                "expected": report.expectations.as_ref().and_then(|e| e.get(&r.case.id)).map(|line| json!({
                    "outcome": line.outcome.as_str(),
                    "reason": line.reason,
                    "expires": line.expires.map(|d| d.to_string()),
                    "standing": report.standing(r).map(Standing::as_str),
                })),
                "duration_ms": millis(r.duration),
                "evidence": match &r.outcome {
                    Outcome::Failed(f) => json!({
                        "requests": cited(report, r, Part::Requests),
                        "deliveries": cited(report, r, Part::Deliveries),
                        "received": cited(report, r, Part::Received),
                        "expected": f.contrast().map(|c| &c.expected),
                        "actual": f.contrast().map(|c| &c.actual),
                    }),
                    _ => Value::Null,
                },
                "har": report.har.as_ref().and_then(|(file, links)| {
                    links.get(&r.case.id).map(|l| json!({"file": file, "entry": l.entry, "id": l.id, "entries": l.entries}))
                }),
            })
        })
        .collect();
    let by_level: Map<String, Value> = report.by_level().map(|(l, c, _)| (l.as_str().to_string(), counts(c))).collect();
    let mut summary = counts(report.counts(None));
    summary["by_level"] = Value::Object(by_level);
    json!({
        "format_version": FORMAT_VERSION,
        "tool": {"name": "bankconf", "version": env!("CARGO_PKG_VERSION"), "commit": env!("BANKCONF_COMMIT")},
        "command": report.command(),
        "target": report.server,
        "seed": report.seed().map(|s| s.to_string()),
        "gate": report.gate.0.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        "verdict": report.verdict(),
        "exit_code": report.exit_code(),
        "duration_ms": millis(report.duration),
        "setup_error": report.setup_error.as_ref().map(ToString::to_string),
        "stopped": report.stopped.map(|cause| json!({"cause": cause.as_str(), "reason": cause.describe()})),
        "transition_graph": report.transition_graph.as_ref().map(|g| json!({
            "reached": g.reached.iter().map(|s| s.lower()).collect::<Vec<_>>(),
            "transitions": g.edges.iter().map(|(from, action, t)| {
                let (outcome, to) = match t {
                    Transition::Accepted(to) => ("accepted", Some(to.lower())),
                    Transition::Refused => ("refused", None),
                    Transition::Unsupported => ("unsupported", None),
                    Transition::NotSent => ("not-sent", None),
                };
                json!({"from": from.lower(), "action": action.as_str(), "outcome": outcome, "to": to})
            }).collect::<Vec<_>>(),
        })),
        "selection": super::selection::LeftOut::of(report).json(report),
        "unjudged": report.unjudged().iter().map(|(how, cases)| json!({"how": how, "cases": cases})).collect::<Vec<_>>(),
        "expectations": report.expectations.as_ref().map(|e| json!({
            "file": e.file,
            "deviations": report.deviations().iter().map(|(r, how)| json!({"case": r.case.id, "how": how})).collect::<Vec<_>>(),
            "not_run": e.not_run(&report.results),
        })),
        "latency": {
            "api": report.latency.api.map(stats),
            "webhooks": report.latency.webhooks.map(stats),
            "requests": report.latency.requests,
            "deliveries": report.latency.deliveries,
        },
        "har": report.har.as_ref().map(|(file, _)| file),
        "notes": report.notes.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "root_causes": roots(report),
        "cases": cases,
        "summary": summary,
    })
}

/// The report as pretty-printed JSON text, ending with a newline.
pub(crate) fn render_text(report: &Report) -> String {
    let mut text = serde_json::to_string_pretty(&render(report)).unwrap_or_default();
    text.push('\n');
    text
}
