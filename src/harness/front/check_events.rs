//! `bankconf check-events FILE`: judges captured webhook deliveries offline, with the same
//! rules ([`crate::harness::rules::event_rules`]) as the event cases of `bankconf run`, and the same reports and exit
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

use crate::harness::checks::events;
use crate::harness::report::{self, Origin, Report, EXIT_NOT_RUN};
use crate::harness::rules::delivery::{unique, Delivery};
use crate::harness::rules::event_rules;
use crate::harness::setup::config::OutputPaths;
use crate::harness::vocab::catalogue::{self, Case, Level};
use crate::harness::vocab::errors::CaptureError;
use crate::harness::vocab::outcome::{CaseResult, Failure, Gate, Outcome, Stop};
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Clone, Debug)]
pub struct CheckEventsConfig {
    /// The capture: JSON Lines (one delivery body per line) or one JSON array of bodies; `-`
    /// reads standard input.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Levels whose failures decide the exit code.
    #[arg(long, env = "BANKCONF_GATE", value_delimiter = ',', default_value = "must,security")]
    pub gate: Vec<Level>,
    #[command(flatten)]
    pub outputs: OutputPaths,
}

fn catalogue_case(id: &str) -> &'static Case {
    catalogue::find(id).unwrap_or_else(|| panic!("check-events uses case {id}, which is not in cases/"))
}

/// The offline cases of `cases/check-events.toml`, coded here (a capture is their only input).
const CREATED_PRESENT: &str = "capture.created-present";
const CLIENT_ID_PER_CONNECTION: &str = "capture.client-id-per-connection";

/// The case ids `check-events` reports, in order: the run's delivery rules, then the chain
/// rules a capture allows.
pub const CASE_IDS: [&str; 6] = [
    events::SCHEMA,
    events::ENVELOPE_AGREES,
    events::UNIQUE_IDS,
    CREATED_PRESENT,
    events::PREVIOUS_STATUS_CHAIN,
    CLIENT_ID_PER_CONNECTION,
];

/// Reads a capture. Errors mean the check cannot start (exit 2).
pub fn parse(text: &str) -> Result<Vec<Delivery>, CaptureError> {
    // As the receiver keeps them: a body that is not JSON is `null`.
    let delivery = |seq: usize, body: Value| Delivery::new(seq as u64, body);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(CaptureError::Empty);
    }
    let deliveries = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => items.into_iter().enumerate().map(|(i, v)| delivery(i, v)).collect(),
        Ok(v @ Value::Object(_)) => vec![delivery(0, v)],
        Ok(other) => return Err(CaptureError::NotDeliveries { kind: kind(&other) }),
        Err(_) if trimmed.starts_with('[') => return Err(CaptureError::BrokenArray),
        Err(_) => text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| delivery(i, serde_json::from_str(line).unwrap_or(Value::Null)))
            .collect::<Vec<_>>(),
    };
    if deliveries.is_empty() {
        return Err(CaptureError::NoDelivery);
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
    let (groups, orphans) = event_rules::by_connection(deliveries);
    let all: Vec<event_rules::Group<'_>> = groups.iter().map(|(id, ds)| (id.as_str(), ds.as_slice())).collect();
    let partial: Vec<&event_rules::Group<'_>> = all.iter().filter(|(_, ds)| !event_rules::has_created(ds)).collect();

    let clients = event_rules::client_ids(deliveries);
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
        let verdict: Result<(), Stop> = match events::offline(id, deliveries) {
            Some(verdict) => verdict,
            None => match id {
                CREATED_PRESENT => match event_rules::missing_created(&all) {
                    missing if missing.is_empty() => Ok(()),
                    // One problem per connection that starts mid-life.
                    missing => {
                        let problems = missing.into_iter().flat_map(|f| f.problems).collect();
                        let failure = Failure { problems, ..Failure::default() };
                        Err(Stop::Fail(
                            failure.reworded(|d| format!("{d}: it starts mid-life, so it is not chain-checked")),
                        ))
                    }
                },
                CLIENT_ID_PER_CONNECTION => event_rules::one_client_id(&groups),
                other => Err(Stop::fail(format!("no capture rule for {other}"))),
            },
        };
        results.push(CaseResult {
            case: catalogue_case(id),
            outcome: Outcome::from(verdict),
            duration: started_at.elapsed(),
            reproduction: None,
            consequence_of: None,
        });
    }
    (results, notes)
}

/// `bankconf check-events`: returns the exit code (0 pass, 1 a gating failure, 2 could not start).
pub fn check_events(mut config: CheckEventsConfig) -> i32 {
    config.outputs = config.outputs.with_legacy_env();
    // Before reading: a report path that cannot be written, or two reports on standard output.
    if let Err(e) = report::check_writable(&config.outputs, None) {
        eprintln!("bankconf check-events: {e}");
        return EXIT_NOT_RUN;
    }
    let started = Instant::now();
    let file = config.file.display().to_string();
    // `-`: standard input, as a failure's reproduction pipes the deliveries it rests on.
    let read = if config.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(&config.file)
    };
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bankconf check-events: cannot read {file}: {e}");
            return EXIT_NOT_RUN;
        }
    };
    let deliveries = match parse(&text) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bankconf check-events: {file}: {}", crate::harness::vocab::sanitize::visible(&e.to_string()));
            return EXIT_NOT_RUN;
        }
    };
    let target = format!("capture {file}");
    report::say(format_args!("{}\n", report::terminal::header(&target, None, CASE_IDS.len())));
    let (results, notes) = judge_capture(&deliveries);
    let gate = Gate(config.gate);
    let lines = report::terminal::Lines::stdout(report::terminal::full_text(&config.outputs).to_string());
    for r in &results {
        report::say(format_args!("{}\n", lines.case(r, gate.gates(r.case.level), false)));
    }
    let mut report = Report::new(Origin::Capture { file }, target, gate);
    let notes = notes.into_iter().map(crate::harness::vocab::note::Note::Said).collect();
    (report.results, report.duration, report.notes) = (results, started.elapsed(), notes);
    report::finish(&report, &config.outputs, false)
}
