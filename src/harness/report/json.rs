//! The JSON report (`--report-json`).

use super::Report;
use serde_json::{json, Value};

pub fn render(report: &Report) -> Value {
    let cases: Vec<Value> = report
        .results
        .iter()
        .map(|r| {
            json!({
                "id": r.case.id,
                "title": r.case.title,
                "section": r.case.section,
                "level": r.case.level.as_str(),
                "outcome": r.outcome.label(),
                "message": r.outcome.message(),
                "reproduction": r.reproduction,
                "gating": report.gates(r),
                "duration_ms": r.duration.as_secs_f64() * 1000.0,
            })
        })
        .collect();
    let c = report.counts();
    json!({
        "target": report.target,
        "seed": report.seed,
        "gate": report.gate.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        "verdict": report.verdict(),
        "exit_code": report.exit_code(),
        "duration_ms": report.duration.as_secs_f64() * 1000.0,
        "cases": cases,
        "summary": {"passed": c.passed, "failed": c.failed, "ignored": c.ignored},
    })
}
