//! The `bankconf` binary end to end: `serve` in one process, `run` against it in another, the
//! way a user's CI does it. Loopback only.

use serde_json::Value;
use std::process::{Command, Output};

mod common;
#[path = "common/gateway.rs"]
mod gateway;

use common::{bankconf, external, temp_path, text, Server, BIN};
use gateway::{private_ca, tls_front};
const KEY: &str = "bankconf_test_clitestprimarykey0001";
const SECOND_KEY: &str = "bankconf_test_clitestsecondkey0002";

/// `bankconf serve` with the two clients of these tests.
fn serve(extra: &[&str]) -> Server {
    Server::start(&[KEY, SECOND_KEY], extra)
}

fn run(args: &[&str]) -> Output {
    bankconf(&[&["run"], args].concat())
}

fn catalogue_len() -> usize {
    bankconf::internal::catalogue::all().iter().filter(|c| !c.offline).count()
}

#[test]
fn an_external_run_with_the_example_driver_passes_every_case() {
    let server = serve(&[]);
    let report = temp_path("external.json");
    let output =
        run(&[&external(&server.url, KEY, SECOND_KEY)[..], &["--report-json", report.to_str().unwrap()]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(KEY) && !out.contains(SECOND_KEY), "a key was printed:\n{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["summary"]["passed"], catalogue_len(), "{report:#}");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["ignored"], 0);
}

/// A wrong `--service`, and a target that serves no widget script (they look alike from
/// outside), are one diagnosis naming both causes: the widget cases end in it (error, exit 2),
/// and every other case is judged, none blamed on the target.
/// A widget script that answers 401 to a caller without a key is there, and refuses the
/// frontend that loads it (§1 item 2, §5.2): the target's failure (exit 1), not "no widget".
/// From outside it looks like a mistyped `--service` against a target that answers 401 to any
/// path it does not know: the failure names both causes.
#[test]
fn a_widget_script_that_wants_a_key_fails_the_target() {
    let server = serve(&["--mutant", "widget-needs-key"]);
    let args = external(&server.url, KEY, SECOND_KEY);
    let (code, out, report) = run_with_report("widget-needs-key", &args);
    assert_eq!(code, Some(1), "{out}");
    assert!(!out.contains("serves no widget"), "{out}");
    let report = report.expect("a report");
    let served = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == "widget.served").cloned();
    assert_eq!(served.as_ref().map(|c| c["outcome"].clone()), Some("failed".into()), "{out}");
    let message = served.map(|c| c["message"].as_str().unwrap_or_default().to_string()).unwrap_or_default();
    for cause in ["--service \"bankconf\"", "/widget/bankconf-connect.js", "behind authentication", "no API key"] {
        assert!(message.contains(cause), "{cause:?} in {message}");
    }
}

#[test]
fn a_wrong_service_or_a_missing_widget_is_one_diagnosis_and_the_rest_is_judged() {
    for (name, serve_args, service) in
        [("wrong-service", &[][..], "acme"), ("no-widget", &["--mutant", "widget-missing"][..], "bankconf")]
    {
        let server = serve(serve_args);
        let mut args = external(&server.url, KEY, SECOND_KEY);
        let at = args.iter().position(|a| *a == "--service").unwrap();
        args[at + 1] = service;
        let (code, out, report) = run_with_report(name, &args);
        assert_eq!(code, Some(2), "{name}: {out}");
        let first = out.lines().find(|l| l.starts_with("setup: ")).unwrap_or_default();
        assert!(first.contains(&format!("--service \"{service}\"")), "{name}: said at once: {out}");
        assert!(out.contains(&format!("/widget/{service}-connect.js")) && out.contains("serves no widget"), "{out}");
        assert!(!out.contains("FAIL "), "{name}: {out}");
        let report = report.expect("a report");
        let not_passed: Vec<(&str, &str)> = report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["outcome"] != "passed")
            .map(|c| (c["id"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
            .collect();
        assert!(!not_passed.is_empty(), "{name}");
        assert!(
            not_passed.iter().all(|(id, outcome)| id.starts_with("widget.") && *outcome == "error"),
            "{name}: only the widget cases end in the diagnosis, the rest is judged: {not_passed:?}"
        );
    }
}

#[test]
fn missing_prerequisites_are_ignored_with_their_reason_and_the_run_is_incomplete() {
    let server = serve(&[]);
    let report = temp_path("no-driver.json");
    let output = run(&["--base-url", &server.url, "--api-key", KEY, "--report-json", report.to_str().unwrap()]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(3), "INCOMPLETE, never PASSED: {out}");
    assert!(out.contains("INCOMPLETE:") && !out.contains("PASSED"), "{out}");
    assert!(
        out.contains("needs a driver (--driver / BANKCONF_DRIVER, or --driver-url / BANKCONF_DRIVER_URL): "),
        "grouped with how to complete: {out}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let case = |id: &str| report["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(case("isolation.account")["outcome"], "ignored");
    assert!(case("events.schema")["message"].as_str().unwrap().contains("driver"));
    assert!(case("widget.served")["message"].as_str().unwrap().contains("--service"));
    assert_eq!(case("create.status-created")["outcome"], "passed");
}

#[test]
fn an_unreachable_target_or_an_empty_selection_exits_2() {
    let output = run(&["--base-url", "http://127.0.0.1:1", "--api-key", KEY]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("unreachable"));
    let output = run(&["no-such-case"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let output = run(&["--base-url", "http://127.0.0.1:1"]);
    assert_eq!(output.status.code(), Some(2), "an --api-key is required: {}", text(&output));
}

/// One rule for selection mistakes: an unknown id, prefix or section is exit 2 with a "did you
/// mean", in `run` and in `run --list` alike, before anything starts.
#[test]
fn selection_mistakes_exit_2_with_a_suggestion_in_run_and_list() {
    for (args, diagnosis) in [
        (&["transaction."][..], "no case \"transaction.\"; did you mean \"transactions.\"?"),
        (&["transactions.walk-exactly-one"][..], "did you mean \"transactions.walk-exactly-once\""),
        (&["--section", "4.9"][..], "--section 4.9: no section §4.9 in the spec; did you mean §4."),
        (&["--section", "§9"][..], "no case of `bankconf run` checks §9"),
    ] {
        for list in [false, true] {
            let all = [&["run"][..], if list { &["--list"][..] } else { &[][..] }, args].concat();
            let output = bankconf(&all);
            let out = text(&output);
            assert_eq!(output.status.code(), Some(2), "{all:?}: {out}");
            assert!(out.contains(diagnosis), "{all:?}: {out}");
            assert!(output.stdout.is_empty() || !list, "{all:?}: --list prints nothing: {out}");
            assert!(!out.contains("preflight"), "{all:?}: nothing started: {out}");
        }
    }
}

/// Issue 48: the shell completes case ids, levels, mutants and variants, and `--help` stays
/// short (the lists are not printed there).
#[test]
fn completions_complete_case_ids_levels_and_mutants() {
    let output = bankconf(&["completions", "bash"]);
    let script = String::from_utf8_lossy(&output.stdout);
    for word in ["transactions.walk-exactly-once", "invariants.clock", "advisory", "id-prefix-ignored", "clock-ahead"] {
        assert!(script.contains(word), "{word} is not completed");
    }
    let help = String::from_utf8_lossy(&run(&["--help"]).stdout).to_string();
    assert!(!help.contains("invariants.clock") && !help.contains("possible values"), "{help}");
}

#[test]
fn list_prints_the_catalogue() {
    let output = run(&["--list"]);
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(out.lines().count(), catalogue_len());
    assert!(out.contains("transactions.walk-exactly-once"));
}

#[test]
fn failures_carry_their_reproduction_in_every_report_and_keys_never_appear() {
    let server = serve(&["--mutant", "balance-as-string"]);
    let (json, xml, md) = (temp_path("fail.json"), temp_path("fail.xml"), temp_path("fail.md"));
    let output = run(&[
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--driver",
        "./examples/sandbox-driver.sh",
        "accounts.response-schema",
        "--report-json",
        json.to_str().unwrap(),
        "--report-junit",
        xml.to_str().unwrap(),
        "--report-md",
        md.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let texts: Vec<String> = [&json, &xml, &md].iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    for t in texts.iter().chain([&text(&output)]) {
        assert!(!t.contains(KEY), "a key was written:\n{t}");
    }
    for t in &texts {
        assert!(t.contains("Authorization: Bearer $BANKCONF_API_KEY"), "no curl reproduction:\n{t}");
        assert!(t.contains("/accounts"), "{t}");
        // Markdown wraps long commands (` \` and an indent): read as one line.
        let joined = t.replace(" \\\n    ", " ");
        let rerun = format!("bankconf run --base-url {} --api-key ", server.url);
        assert!(joined.contains(&rerun), "the rerun command names the target:\n{t}");
    }
    let report: Value = serde_json::from_str(&texts[0]).unwrap();
    if let Err(v) = bankconf::internal::schemas::validate(bankconf::internal::schemas::Schema::Report, &report) {
        panic!("{v:?}");
    }
}

// ------------------------------------------------- setup mistakes are the setup's, not the target's

/// Runs `bankconf run ARGS`; returns the exit code, the output, and the JSON report.
fn run_with_report(name: &str, args: &[&str]) -> (Option<i32>, String, Option<Value>) {
    let path = temp_path(name);
    let _ = std::fs::remove_file(&path);
    let output = run(&[args, &["--report-json", path.to_str().unwrap()]].concat());
    let report = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok());
    (output.status.code(), text(&output), report)
}

/// Exit 2, the diagnosis on the first line of stderr, no case blamed on the target, a report
/// stating the reason.
fn assert_setup_error(name: &str, args: &[&str], diagnosis: &str) {
    let (code, out, report) = run_with_report(name, args);
    assert_eq!(code, Some(2), "{name}: {out}");
    let first = out.lines().find(|l| l.starts_with("bankconf: ")).unwrap_or_default();
    assert!(first.contains(diagnosis), "{name}: the diagnosis comes first: {out}");
    assert!(!out.contains("FAIL ") && !out.contains("PASSED"), "{name}: {out}");
    let report = report.unwrap_or_else(|| panic!("{name}: a report is written on exit 2"));
    assert!(report["setup_error"].as_str().is_some_and(|e| e.contains(diagnosis)), "{name}: {report:#}");
    assert_eq!(report["exit_code"], 2);
}

#[test]
fn setup_mistakes_exit_2_with_a_diagnosis_and_blame_no_target() {
    let server = serve(&[]);
    let url = server.url.as_str();
    let driver = "./examples/sandbox-driver.sh";
    assert_setup_error("wrong-key", &["--base-url", url, "--api-key", "bankconf_test_wrong"], "refuses --api-key");
    assert_setup_error(
        "unknown-second",
        &["--base-url", url, "--api-key", KEY, "--second-api-key", "bankconf_test_nobody"],
        "refuses --second-api-key",
    );
    assert_setup_error(
        "same-second",
        &["--base-url", url, "--api-key", KEY, "--second-api-key", KEY],
        "same key as --api-key",
    );
    assert_setup_error("no-base-url", &["--api-key", KEY, "--driver", driver], "without --base-url");
    // A network error names its likely cause, and never kills the harness (https:// to a
    // plain-HTTP port once ended in SIGPIPE, with no output).
    let https = url.replacen("http://", "https://", 1);
    assert_setup_error("https-to-http", &["--base-url", &https, "--api-key", KEY], "TLS failed");
    assert_setup_error(
        "driver-url-refused",
        &["--base-url", url, "--api-key", KEY, "--driver-url", "http://127.0.0.1:9/driver"],
        "is --driver-url right",
    );
    assert_setup_error(
        "missing-driver",
        &["--base-url", url, "--api-key", KEY, "--driver", "./no/such/driver.sh"],
        "the driver failed on register_webhook",
    );
    assert_setup_error(
        "no-connection",
        &["--base-url", url, "--api-key", KEY, "--connection-id", "conn_NOSUCHCONNECTION"],
        "--connection-id conn_NOSUCHCONNECTION",
    );
    assert_setup_error("typo", &["transactions.walk-exactly-one"], "did you mean \"transactions.walk-exactly-once\"");
    assert_setup_error(
        "typo-beside-valid",
        &["create.status-created", "create.nonsense"],
        "no case \"create.nonsense\"",
    );
}

#[test]
fn an_unwritable_report_path_stops_the_run_before_it_starts() {
    for (flag, path) in [("--report-junit", "/nonexistent-dir/junit.xml"), ("--report-html", "/nonexistent-dir/r.html")]
    {
        let output = run(&[flag, path, "create."]);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(2), "{out}");
        assert!(out.contains(&format!("cannot write {path}")), "{out}");
        assert!(!out.contains("PASS "), "no case ran: {out}");
    }
}

#[test]
fn webhooks_that_never_arrive_are_diagnosed_not_judged() {
    let server = serve(&[]);
    let (code, out, report) = run_with_report(
        "silent-webhooks",
        &[
            "--base-url",
            &server.url,
            "--api-key",
            KEY,
            "--driver",
            "./examples/sandbox-driver.sh",
            "--webhook-public-url",
            "http://127.0.0.1:9/nobody-listens",
            "--event-timeout",
            "1",
        ],
    );
    assert_eq!(code, Some(2), "errors are the setup's: {out}");
    // Said at once on stderr, before the closing block.
    assert!(out.contains("setup: no webhook delivery reached the receiver"), "{out}");
    assert!(out.contains("no webhook delivery reached the receiver"), "{out}");
    assert!(out.contains("--webhook-public-url") && out.contains("--webhook-listen 0.0.0.0:PORT"), "{out}");
    assert!(
        out.contains("(listening on 127.0.0.1:") && !out.contains("(listening on 127.0.0.1:0)"),
        "the bound port: {out}"
    );
    // Shown whole once (the run's first note), then named, not repeated, for each case.
    assert!(out.contains("(the same message as "), "{out}");
    assert!(out.contains("cases, one diagnosis:"), "one entry with the case list: {out}");
    let report = report.expect("a report");
    let outcomes: Vec<&str> =
        report["cases"].as_array().unwrap().iter().map(|c| c["outcome"].as_str().unwrap()).collect();
    assert!(!outcomes.contains(&"failed"), "nothing fails on zero deliveries: {outcomes:?}");
    let events: Vec<&str> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("events."))
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert!(
        events.iter().all(|o| *o == "error" || *o == "ignored"),
        "no event case passes on zero deliveries: {events:?}"
    );
}

#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let output = Command::new("sh")
        .args(["-c", &format!("'{BIN}' run | head -n 1")])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run through a pipe");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("bankconf: "));
}

// ------------------------------------------------- the reproduction is the evidence

/// For every failed case of a run against a mutant with an API failure and one with a webhook
/// payload failure: every failure has a reproduction; a curl replays the request the message
/// names (and only such a request); a failure that rests on deliveries pipes them into
/// `bankconf check-events -`, which fails again; a payload failure points at the delivery in the
/// HAR; and the rerun command, pasted into a shell, fails the same case.
#[test]
fn the_reproduction_is_the_request_or_delivery_the_message_names_and_the_rerun_fails_the_same_case() {
    for mutant in ["transaction-prefix", "event-prefix"] {
        let (json, har) = (temp_path(&format!("{mutant}.json")), temp_path(&format!("{mutant}.har")));
        let output = run(&[
            "--sandbox-mutant",
            mutant,
            "--report-json",
            json.to_str().unwrap(),
            "--report-har",
            har.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(1), "{mutant}: {}", text(&output));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let har: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
        let failed: Vec<&Value> =
            report["cases"].as_array().unwrap().iter().filter(|c| c["outcome"] == "failed").collect();
        assert!(!failed.is_empty(), "{mutant}");
        for case in &failed {
            let message = case["message"].as_str().unwrap();
            let evidence = &case["evidence"];
            let (requests, deliveries) =
                (evidence["requests"].as_array().unwrap(), evidence["deliveries"].as_array().unwrap());
            assert!(!requests.is_empty() || !deliveries.is_empty(), "{mutant}: no evidence\n{case:#}");
            // No reproduction: the evidence is named as context (printed_reproductions_fail_when_pasted).
            let Some(reproduction) = case["reproduction"].as_str() else { continue };
            if reproduction.starts_with("curl ") {
                let method = reproduction.split(" -X ").nth(1).and_then(|r| r.split(' ').next()).unwrap();
                let url = reproduction.rsplit('\'').nth(1).unwrap();
                let path = &url[url.find("/v1").unwrap_or(0)..];
                assert!(message.contains(&format!("{method} {path}")), "{mutant}: {reproduction}\n{message}");
            } else {
                // The deliveries it rests on, judged again offline: the same case fails.
                // Pasted as printed, in the same directory: it names the binary as it was run.
                assert!(reproduction.ends_with("/bankconf check-events -"), "{mutant}: {reproduction}");
                let pasted = reproduction;
                let output = Command::new("sh").arg("-c").arg(pasted).env_clear().output().unwrap();
                let out = text(&output);
                assert_eq!(output.status.code(), Some(1), "{mutant}: {pasted}\n{out}");
                // The offline cases fail as they did; a run-only case (a lifecycle) by the rule it broke.
                let id = case["id"].as_str().unwrap();
                if bankconf::internal::check_events::CASE_IDS.contains(&id) {
                    let line = out.lines().find(|l| l.contains(id)).unwrap_or_default();
                    assert!(line.contains("FAIL"), "{mutant}: {id} fails again offline:\n{out}");
                }
            }
            // The failure carries its evidence by reference: a curl replays its first request,
            // a replay pipes its deliveries, and the HAR link is the first one's entry.
            assert_eq!(reproduction.starts_with("curl "), !requests.is_empty(), "{mutant}: {case:#}");
            let entry = &har["log"]["entries"][case["har"]["entry"].as_u64().unwrap() as usize];
            assert_eq!(entry["_id"], case["har"]["id"], "{mutant}");
            let kind = if requests.is_empty() { Some("webhook") } else { None };
            if kind.is_some() {
                assert_eq!(entry["_kind"], "webhook", "{mutant}: a delivery is the evidence\n{case:#}");
            } else {
                let url = entry["request"]["url"].as_str().unwrap();
                let path = &url[url.find("/v1").unwrap_or(0)..];
                assert!(
                    reproduction.contains(path),
                    "{mutant}: the HAR entry is the curl's request\n{url}\n{reproduction}"
                );
            }
            if case["id"] == "events.schema" {
                assert_eq!(entry["_kind"], "webhook", "{mutant}: the delivery is the evidence\n{case:#}");
            }
        }
        // The rerun of one failed case, pasted as printed into a fresh shell in the same
        // directory (bankconf is not on PATH: it names the binary by its path): it fails that
        // case again.
        let case = failed[0];
        let rerun = case["rerun"].as_str().unwrap();
        let program = rerun.split(" run ").next().unwrap();
        let resolved = std::fs::canonicalize(program).unwrap_or_else(|e| panic!("{mutant}: {rerun}: {e}"));
        assert_eq!(resolved, std::fs::canonicalize(BIN).unwrap(), "{mutant}: {rerun}");
        let again = temp_path(&format!("{mutant}-again.json"));
        // Its output captured, as every child's of this suite (an inherited stdout printed the
        // rerun's `FAILED: 1 gating failure` into a `cargo test` that passes).
        let rerun_output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{rerun} --report-json {}", again.display()))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap();
        assert_eq!(rerun_output.status.code(), Some(1), "{mutant}: {rerun}\n{}", text(&rerun_output));
        let again: Value = serde_json::from_str(&std::fs::read_to_string(&again).unwrap()).unwrap();
        let outcome = again["cases"].as_array().unwrap().iter().find(|c| c["id"] == case["id"]).unwrap();
        assert_eq!(outcome["outcome"], "failed", "{mutant}: {rerun}");
    }
}

/// A probe that sends a near miss of the key shows it as a shell expression over
/// `$BANKCONF_API_KEY`, never the key nor `[redacted]`: pasted into `sh` with the key exported,
/// the reproduction gets the status the failure reports (a key with a character more, and keys
/// of the right shape).
#[test]
fn a_near_miss_reproduction_pasted_into_sh_gets_the_status_the_failure_reports() {
    for mutant in ["key-prefix-match", "key-shape-match"] {
        let server = serve(&["--mutant", mutant]);
        let json = temp_path(&format!("near-{mutant}.json"));
        let args = [&external(&server.url, KEY, SECOND_KEY)[..], &["--report-json", json.to_str().unwrap()]].concat();
        let output = run(&[&args[..], &["auth.near-miss-key"]].concat());
        assert_eq!(output.status.code(), Some(1), "{mutant}: {}", text(&output));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let case = &report["cases"][0];
        let (message, curl) = (case["message"].as_str().unwrap(), case["reproduction"].as_str().unwrap());
        assert!(curl.contains("${BANKCONF_API_KEY") && !curl.contains("redacted") && !curl.contains(KEY), "{curl}");
        let pasted = Command::new("sh")
            .arg("-c")
            .arg(curl)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BANKCONF_API_KEY", KEY)
            .output()
            .unwrap();
        let answer = String::from_utf8_lossy(&pasted.stdout);
        let status = answer.split_whitespace().nth(1).unwrap_or_default();
        assert!(status.starts_with('2'), "{mutant}: {curl}\n{answer}");
        assert!(message.contains(&format!("status {status}")), "{mutant}: {status} in {message}");
    }
}

/// The reports are named `--report-*`; the former `--junit` and `--har`, and their variables
/// `BANKCONF_JUNIT` and `BANKCONF_HAR`, still write them (hidden from `--help`).
#[test]
fn former_report_names_still_write_the_reports() {
    let (junit, har) = (temp_path("former.xml"), temp_path("former.har"));
    let output = run(&["--junit", junit.to_str().unwrap(), "--har", har.to_str().unwrap(), "create.status-created"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(junit.exists() && har.exists());
    let (junit, har) = (temp_path("former-env.xml"), temp_path("former-env.har"));
    let output = Command::new(BIN)
        .args(["run", "create.status-created"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BANKCONF_JUNIT", &junit)
        .env("BANKCONF_HAR", &har)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(junit.exists() && har.exists());
    let help = text(&bankconf(&["run", "--help"]));
    for flag in ["--report-json", "--report-junit", "--report-md", "--report-html", "--report-har"] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    assert!(!help.contains("--junit") && !help.contains("--har "), "{help}");
}

#[path = "cli/reproductions.rs"]
mod reproductions;

#[path = "cli/options.rs"]
mod options;
