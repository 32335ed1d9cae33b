//! `--report-har FILE`, end to end against `bankconf serve` driven by the example driver: the file is
//! HAR 1.2 (the schemas npm's har-validator uses, `tests/har-1.2.schema.json`), holds every
//! request of the run, every event the server emitted for the run's client as a delivery, and
//! every driver call, names the case of each entry, and carries no secret. Loopback only.

use serde_json::Value;

mod common;

use common::{bankconf, external, temp_path, text, Server};

const KEY: &str = "bankconf_test_harprimarykey000001";
const SECOND_KEY: &str = "bankconf_test_harsecondkey000002";

fn get(url: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async { reqwest::get(url).await.unwrap().json().await.unwrap() })
}

#[test]
fn a_har_of_the_whole_run() {
    let server = Server::start(&[KEY, SECOND_KEY], &["--mutant", "no-error-event"]);
    let (har, report) = (temp_path("run.har"), temp_path("har-report.json"));
    let settings = external(&server.url, KEY, SECOND_KEY);
    let files = ["--report-har", har.to_str().unwrap(), "--report-json", report.to_str().unwrap()];
    let output = bankconf(&[&["run", "--event-timeout", "2"], &settings[..], &files].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "the mutant is caught: {out}");
    assert!(!out.contains("waiting for"), "progress lines only at a terminal: {out}");
    assert!(out.contains("latency of webhook deliveries"), "{out}");
    let text_har = std::fs::read_to_string(&har).unwrap();
    for secret in [KEY, SECOND_KEY, &KEY[..12]] {
        assert!(!text_har.contains(secret) && !text_har.contains(&KEY[20..]), "a key in the HAR");
    }
    let har: Value = serde_json::from_str(&text_har).unwrap();
    let schema: Value = serde_json::from_str(include_str!("har-1.2.schema.json")).unwrap();
    let validator = jsonschema::options().should_validate_formats(true).build(&schema).unwrap();
    let errors: Vec<String> =
        validator.iter_errors(&har).take(5).map(|e| format!("{e} at {}", e.instance_path.as_str())).collect();
    assert!(errors.is_empty(), "not HAR 1.2: {errors:?}");

    let entries = har["log"]["entries"].as_array().unwrap();
    let kind = |k: &'static str| entries.iter().filter(move |e| e["_kind"] == k);
    assert!(kind("api").all(|e| e["request"]["url"].as_str().unwrap().starts_with(&server.url)));
    assert!(kind("driver").any(|e| e["request"]["url"] == "driver:register_webhook"));
    assert!(!regex_like_token(&text_har), "a widget token in the HAR");
    // Every event the server emitted reached the receiver and is in the HAR.
    let delivered: String = kind("webhook").map(|e| e["request"]["postData"]["text"].as_str().unwrap()).collect();
    let emitted = get(&format!("{}/sandbox/events", server.url));
    let ids: Vec<&str> = emitted.as_array().unwrap().iter().filter_map(|e| e["id"].as_str()).collect();
    assert!(!ids.is_empty());
    for id in &ids {
        assert!(delivered.contains(id), "event {id} is not among the HAR's deliveries");
    }
    // Each case that ran names its requests, and a failure points at an entry of its own.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let failed: Vec<&Value> = report["cases"].as_array().unwrap().iter().filter(|c| c["outcome"] == "failed").collect();
    assert!(!failed.is_empty());
    for case in failed {
        let link = &case["har"];
        // `entry` is the index in `log.entries`, `id` its `_id`.
        let entry = link["entry"].as_u64().and_then(|i| entries.get(i as usize)).unwrap_or_else(|| panic!("{case:#}"));
        assert_eq!(entry["_id"], link["id"], "{case:#}");
        // The entry the message names: the case's own, or one whose URL (a request) or body (a
        // delivery) holds an id the message names.
        let names = |text: Option<&str>| {
            text.is_some_and(|t| {
                case["message"].as_str().unwrap().split([' ', ',', ';', '(', ')']).any(|w| {
                    let w = w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_');
                    w.len() > 8 && w.contains('_') && t.contains(w)
                })
            })
        };
        assert!(
            entry["_case"] == case["id"]
                || names(entry["request"]["url"].as_str())
                || names(entry["request"]["postData"]["text"].as_str()),
            "{case:#}\n{entry:#}"
        );
    }
    assert!(report["latency"]["api"]["count"].as_u64().unwrap() >= kind("api").count() as u64);
    assert!(report["latency"]["webhooks"]["count"].as_u64().unwrap() > 0, "{:#}", report["latency"]);
}

/// Whether `sess_` is followed by a token's characters anywhere (redacted ones read `sess_[`).
fn regex_like_token(text: &str) -> bool {
    text.match_indices("sess_").any(|(at, _)| text[at + 5..].starts_with(|c: char| c.is_ascii_alphanumeric()))
}
