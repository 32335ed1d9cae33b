//! The expectations file of a release gate (`--expect`, `--write-expectations`), end to end
//! against the embedded sandbox: an expected failure passes the gate, a new failure fails it, a
//! stale or expired line fails it and is named, a broken file is a setup error. Loopback only.

use serde_json::Value;
use std::process::Output;

mod common;

use common::{bankconf, temp_path, text};

/// Two gating cases the `widget-missing` mutant fails (§1 served, §5 no key: its 404 body).
const CASES: [&str; 2] = ["widget.served", "widget.no-api-key"];

fn line(case: &str, extra: &str) -> String {
    format!("[[expect]]\ncase = \"{case}\"\noutcome = \"failed\"\nreason = \"widget not shipped yet\"\n{extra}\n")
}

/// `bankconf run widget.served widget.no-api-key`, against the mutant or not, with `file` as
/// the expectations; the exit code, the output and the JSON report.
fn gate(name: &str, mutant: bool, file: &str) -> (Option<i32>, String, Value) {
    let expect = temp_path(&format!("{name}.toml"));
    std::fs::write(&expect, file).unwrap();
    let report = temp_path(&format!("{name}.json"));
    let mut args = vec!["run", CASES[0], CASES[1], "--expect", expect.to_str().unwrap()];
    args.extend(["--report-json", report.to_str().unwrap()]);
    if mutant {
        args.extend(["--sandbox-mutant", "widget-missing"]);
    }
    let output: Output = bankconf(&args);
    let json = std::fs::read_to_string(&report).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    (output.status.code(), text(&output), json)
}

#[test]
fn expected_failures_do_not_decide_the_exit_code() {
    let file = line(CASES[0], "expires = 2999-12-31") + &line(CASES[1], "");
    let (code, out, json) = gate("expected", true, &file);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.trim_end().lines().last().unwrap().starts_with("PASSED with 2 expected failures ("), "{out}");
    assert!(out.contains("KNOWN widget.served"), "an expected outcome has its own tag: {out}");
    assert!(out.contains("expected in") && out.contains("widget not shipped yet"), "{out}");
    assert_eq!(json["cases"][0]["expected"]["standing"], "held", "{json:#}");
    assert_eq!(json["cases"][0]["gating"], false);
}

#[test]
fn a_new_failure_fails_the_gate() {
    let (code, out, _) = gate("new-failure", true, &line(CASES[0], ""));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL  widget.no-api-key"), "{out}");
    assert!(!out.contains("FAIL  widget.served"), "an expected failure is not a FAIL: {out}");
}

#[test]
fn a_stale_expectation_is_named_and_fails_the_gate() {
    let (code, out, json) = gate("stale", false, &line(CASES[0], ""));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.trim_end().lines().last().unwrap().starts_with("FAILED: 1 expectation no longer holds ("), "{out}");
    assert!(out.contains("deviations from") && out.contains("widget.served: expected failed"), "{out}");
    assert!(out.contains("no longer holds; remove its line"), "{out}");
    assert_eq!(json["expectations"]["deviations"][0]["case"], "widget.served", "{json:#}");
    assert_eq!(json["verdict"], "FAILED");
}

#[test]
fn an_expired_expectation_fails_the_gate() {
    let file = line(CASES[0], "expires = 2000-01-01") + &line(CASES[1], "");
    let (code, out, json) = gate("expired", true, &file);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("expired on 2000-01-01: renew or remove"), "{out}");
    assert_eq!(json["cases"][0]["expected"]["standing"], "expired", "{json:#}");
}

#[test]
fn a_broken_file_is_a_setup_error() {
    for (name, file, diagnosis) in [
        ("typo", line("widget.servd", ""), "did you mean \"widget.served\""),
        ("passed", line(CASES[0], "").replace("\"failed\"", "\"passed\""), "unknown variant"),
        ("no-reason", line(CASES[0], "").replace("widget not shipped yet", ""), "give a reason"),
    ] {
        let (code, out, json) = gate(name, false, &file);
        assert_eq!(code, Some(2), "{name}: {out}");
        assert!(out.contains(diagnosis), "{name}: {out}");
        assert_eq!(json["verdict"], "NOT RUN", "{name}: {json:#}");
    }
}

#[test]
fn a_written_file_gates_the_next_run_on_regressions() {
    let written = temp_path("written.toml");
    let output = bankconf(&[
        "run",
        CASES[0],
        CASES[1],
        "--sandbox-mutant",
        "widget-missing",
        "--write-expectations",
        written.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let file = std::fs::read_to_string(&written).unwrap();
    assert!(file.starts_with("# bankconf expectations") && file.matches("[[expect]]").count() == 2, "{file}");
    let (code, out, _) = gate("rewritten", true, &file);
    assert_eq!(code, Some(0), "{out}");
}

/// The same failures write the same bytes: reasons say what the case checks and how it ended,
/// without the run's ids, ports, seed or explored sequences (the reports keep those).
#[test]
fn writing_expectations_twice_gives_identical_files() {
    let write = |name: &str| {
        let path = temp_path(name);
        let output = bankconf(&[
            "run",
            "accounts.response-schema",
            CASES[0],
            "--sandbox-mutant",
            "balance-as-string",
            "--write-expectations",
            path.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        std::fs::read(&path).unwrap()
    };
    let (first, second) = (write("first.toml"), write("second.toml"));
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("case = \"accounts.response-schema\""), "{text}");
    assert!(!text.contains("conn_") && !text.contains("acc_"), "no ids in what a run writes: {text}");
    assert!(!text.contains("127.0.0.1:") || text.contains("127.0.0.1:PORT"), "{text}");
    assert_eq!(String::from_utf8_lossy(&first), String::from_utf8_lossy(&second));
}

/// A walk under changes meets a fault of the pagination itself or not depending on how many
/// items are there at each page read (issue 51): where a walk of an unchanging account failed,
/// the walks under changes are not judged, and say which finding blocked them, in every run.
#[test]
fn walks_under_changes_derive_from_a_still_walks_failure() {
    let report = temp_path("still-walk.json");
    let cases =
        ["transactions.has-more-honest", "transactions.walk-under-insertions", "transactions.walk-under-deletions"];
    let mut args = vec!["run", "--sandbox-mutant", "has-more-false-early", "--skip-browser"];
    args.extend(cases);
    args.extend(["--report-json", report.to_str().unwrap()]);
    let output = bankconf(&args);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let case = |id: &str| json["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(case(cases[0])["outcome"], "failed");
    for id in &cases[1..] {
        assert_eq!(case(id)["outcome"], "ignored", "{id}");
        let message = case(id)["message"].as_str().unwrap().to_string();
        assert!(message.contains("transactions.has-more-honest found it broken"), "{id}: {message}");
    }
}
