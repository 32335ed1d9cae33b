//! `bankconf check-events FILE`: judges captured webhook deliveries offline, with the same
//! rules ([`super::judge`]) as the event cases of `bankconf run`, and the same reports and exit
//! codes.
//!
//! A capture is one JSON document per line (JSON Lines), or one JSON array of deliveries, or a
//! single delivery object; each document is a delivery body as POSTed by the target. A line that
//! is not JSON is kept as a delivery whose body is not JSON (and fails `events.schema`).
//!
//! Rulings for captures, which may start mid-life and may hold several clients:
//! - a connection whose capture has no `connection.created` is not chain-checked (the capture may
//!   have begun after it was created); the advisory case `capture.created-present` names them;
//! - several `clientId`s in one capture are fine; each connection's events must carry one.

use super::catalogue::{Case, Level};
use super::judge;
use super::outcome::{Outcome, Stop};
use super::receiver::{unique, Delivery};
use super::redact::Redactor;
use super::report::{self, Origin, Outputs, Report, EXIT_NOT_RUN};
use super::runner::CaseResult;
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Instant;

#[derive(Args, Clone, Debug)]
pub struct CheckEventsConfig {
    /// The capture: JSON Lines (one delivery body per line) or one JSON array of bodies.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Levels whose failures decide the exit code.
    #[arg(long, env = "BANKCONF_GATE", value_delimiter = ',', default_value = "must,security")]
    pub gate: Vec<Level>,
    #[command(flatten)]
    pub outputs: Outputs,
}

fn case(id: &str, title: &str, section: &str, level: Level) -> Case {
    Case { id: id.into(), title: title.into(), section: section.into(), level, needs: Vec::new() }
}

/// The cases that only make sense for a capture; the others are the catalogue's own.
static CAPTURE_CASES: LazyLock<Vec<Case>> = LazyLock::new(|| {
    vec![
        case(
            "capture.created-present",
            "Every connection in the capture has its connection.created (else its chain is not checked)",
            "§3.2",
            Level::Advisory,
        ),
        case(
            "capture.client-id-per-connection",
            "All events of one connection carry one clientId (a capture may hold several clients)",
            "§6.2",
            Level::Must,
        ),
    ]
});

fn catalogue_case(id: &str) -> &'static Case {
    super::catalogue::find(id)
        .or_else(|| CAPTURE_CASES.iter().find(|c| c.id == id))
        .unwrap_or_else(|| panic!("check-events uses case {id}, which is not defined"))
}

/// The case ids `check-events` reports, in order.
pub const CASE_IDS: [&str; 5] = [
    "events.schema",
    "events.envelope-agrees",
    "capture.created-present",
    "events.previous-status-chain",
    "capture.client-id-per-connection",
];

/// Reads a capture. Errors mean the check cannot start (exit 2).
pub fn parse(text: &str) -> Result<Vec<Delivery>, String> {
    // As the receiver keeps them: `raw` only for a body that is not JSON, cut to 1024 chars.
    let delivery = |seq: usize, body: Value, raw: &str| Delivery {
        seq: seq as u64,
        received_at: chrono::Utc::now(),
        raw: if body.is_null() { raw.chars().take(1024).collect() } else { String::new() },
        body,
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the capture is empty".into());
    }
    let deliveries = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => items.into_iter().enumerate().map(|(i, v)| delivery(i, v, "")).collect(),
        Ok(v @ Value::Object(_)) => vec![delivery(0, v, trimmed)],
        Ok(other) => return Err(format!("the capture is a JSON {}, not deliveries", kind(&other))),
        Err(_) if trimmed.starts_with('[') => {
            return Err("the capture starts with [ but is not a JSON array".into());
        }
        Err(_) => text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| delivery(i, serde_json::from_str(line).unwrap_or(Value::Null), line))
            .collect::<Vec<_>>(),
    };
    if deliveries.is_empty() {
        return Err("the capture holds no delivery".into());
    }
    Ok(deliveries)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Judges a capture: the results of [`CASE_IDS`] and the notes of the report.
pub fn judge_capture(deliveries: &[Delivery]) -> (Vec<CaseResult>, Vec<String>) {
    let (groups, orphans) = judge::by_connection(deliveries);
    let all: Vec<judge::Group<'_>> = groups.iter().map(|(id, ds)| (id.as_str(), ds.as_slice())).collect();
    let (started, partial): (Vec<judge::Group<'_>>, Vec<judge::Group<'_>>) =
        all.iter().partition(|(_, ds)| judge::has_created(ds));

    let clients = judge::client_ids(deliveries);
    let mut notes = vec![format!(
        "the capture holds {} ({} unique), {}, {}{}",
        plural(deliveries.len(), "delivery", "deliveries"),
        unique(deliveries).len(),
        plural(groups.len(), "connection", "connections"),
        plural(clients.len(), "client", "clients"),
        if clients.is_empty() {
            String::new()
        } else {
            format!(" ({})", clients.into_iter().collect::<Vec<_>>().join(", "))
        }
    )];
    if !partial.is_empty() {
        notes.push(format!(
            "chains not checked for {} whose capture has no connection.created: {}",
            plural(partial.len(), "connection", "connections"),
            partial.iter().map(|(id, _)| *id).collect::<Vec<_>>().join(", ")
        ));
    }
    if !orphans.is_empty() {
        notes.push(format!(
            "{} no connection (judged by events.schema only)",
            plural(orphans.len(), "delivery names", "deliveries name")
        ));
    }

    let mut results = Vec::new();
    for id in CASE_IDS {
        let started_at = Instant::now();
        let verdict: Result<(), Stop> = match id {
            "events.schema" => judge::schema(deliveries),
            "events.envelope-agrees" => judge::envelope_agrees(deliveries),
            "capture.created-present" => match judge::missing_created(&all) {
                missing if missing.is_empty() => Ok(()),
                missing => Err(Stop::fail(format!(
                    "{} mid-life, so not chain-checked: {}",
                    plural(missing.len(), "connection starts", "connections start"),
                    missing.join("; ")
                ))),
            },
            "events.previous-status-chain" if started.is_empty() => {
                Err(Stop::ignore("no connection in the capture has its connection.created: no chain to check"))
            }
            "events.previous-status-chain" => judge::chains(&started),
            "capture.client-id-per-connection" => judge::one_client_id(&groups),
            other => Err(Stop::fail(format!("no capture rule for {other}"))),
        };
        let redactor = Redactor::default();
        let outcome = match Outcome::from(verdict) {
            Outcome::Failed(m) => Outcome::Failed(redactor.redact(&m)),
            Outcome::Ignored(m) => Outcome::Ignored(redactor.redact(&m)),
            Outcome::Passed => Outcome::Passed,
        };
        results.push(CaseResult {
            case: catalogue_case(id),
            outcome,
            duration: started_at.elapsed(),
            reproduction: None,
        });
    }
    (results, notes)
}

/// `bankconf check-events`: returns the exit code (0 pass, 1 a gating failure, 2 could not start).
pub fn check_events(config: CheckEventsConfig) -> i32 {
    let started = Instant::now();
    let file = config.file.display().to_string();
    let text = match std::fs::read_to_string(&config.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bankconf check-events: cannot read {file}: {e}");
            return EXIT_NOT_RUN;
        }
    };
    let deliveries = match parse(&text) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bankconf check-events: {file}: {}", super::sanitize::visible(&e.to_string()));
            return EXIT_NOT_RUN;
        }
    };
    let target = format!("capture {file}");
    println!("{}", report::terminal::header(&target, None, CASE_IDS.len()));
    let (results, notes) = judge_capture(&deliveries);
    for r in &results {
        println!("{}", report::terminal::case_line(r, config.gate.contains(&r.case.level)));
    }
    let report = Report {
        origin: Origin::Capture { file },
        target,
        gate: config.gate,
        results,
        duration: started.elapsed(),
        notes,
    };
    super::finish(&report, &config.outputs)
}
