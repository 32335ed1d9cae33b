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

/// The README's sandbox command on a machine without a browser ends INCOMPLETE (exit 3) with the
/// way to get one on the line before the verdict; `--skip-browser` leaves the browser cases
/// out on purpose (still exit 3, named once), and an expectations file that expects them
/// ignored makes it exit 0.
#[test]
fn without_a_browser_the_run_says_how_to_get_one_and_skip_browser_is_on_purpose() {
    let no_browser = |args: &[&str]| {
        // No PATH: no browser is found (the embedded sandbox needs no other program).
        Command::new(BIN).arg("run").args(args).env_clear().output().expect("run bankconf")
    };
    let output = no_browser(&["widget."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(3), "{out}");
    let lines: Vec<&str> = out.trim_end().lines().collect();
    assert!(lines[lines.len() - 1].starts_with("INCOMPLETE"), "{out}");
    assert!(lines[lines.len() - 2].contains("apt-get install chromium-headless-shell"), "{out}");
    let output = run(&["--skip-browser", "widget."]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(3), "{out}");
    // The verdict's block names the cases left out once, together.
    let block: Vec<&str> = out.lines().filter(|l| l.starts_with("  - left out on purpose (--skip-browser)")).collect();
    assert!(block.len() == 1 && block[0].contains("widget.script-runs, widget.global-open"), "{out}");
    let expect = temp_path("skip-browser.toml");
    let browser_cases = bankconf::internal::catalogue::all()
        .iter()
        .filter(|c| c.needs.contains(&bankconf::Need::Browser))
        .map(|c| {
            format!("[[expect]]\ncase = \"{}\"\noutcome = \"ignored\"\nreason = \"no browser in this CI\"\n", c.id)
        })
        .collect::<String>();
    std::fs::write(&expect, browser_cases).unwrap();
    let output = run(&["--skip-browser", "--expect", expect.to_str().unwrap(), "widget."]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

/// An exclusion is part of the verdict (issue 76): `--exclude isolation` leaves the isolation
/// cases out as `--skip-browser` leaves the browser cases (INCOMPLETE, exit 3, never a bare
/// PASSED), every report names it, and an expectations file that expects them ignored makes the
/// gate pass again, saying so. A narrowing filter (a rerun) keeps its exit code, the cases it
/// did not choose counted.
#[test]
fn an_exclusion_ends_as_a_skipped_browser_does_and_every_report_names_it() {
    let (json, md) = (temp_path("excluded.json"), temp_path("excluded.md"));
    let args = ["auth.", "isolation.", "--exclude", "isolation", "--report-json", json.to_str().unwrap()];
    let output = run(&[&args[..], &["--report-md", md.to_str().unwrap()]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(3), "{out}");
    let last = String::from_utf8_lossy(&output.stdout).trim_end().lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("INCOMPLETE: ") && last.contains("left out by --exclude isolation ("), "{last}");
    assert!(out.contains("  - left out on purpose (--exclude isolation): "), "how to complete the run: {out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let left_out = &report["selection"]["left_out"][0];
    assert_eq!(left_out["by"], "--exclude isolation", "{report:#}");
    assert!(left_out["gating"].as_array().is_some_and(|g| !g.is_empty()), "{report:#}");
    assert_eq!(report["selection"]["whole"], false);
    let isolation = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == "isolation.account").unwrap();
    assert_eq!(isolation["outcome"], "ignored", "{isolation:#}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("**Not the whole catalogue:**") && md.contains("left out by --exclude isolation"), "{md}");
    // Expected ignored, the exclusion passes the gate, and the line still says what was left out.
    let expect = temp_path("excluded.toml");
    let lines: String = bankconf::internal::catalogue::all()
        .iter()
        .filter(|c| c.id.starts_with("isolation."))
        .map(|c| {
            format!("[[expect]]\ncase = \"{}\"\noutcome = \"ignored\"\nreason = \"one client in staging\"\n", c.id)
        })
        .collect();
    std::fs::write(&expect, lines).unwrap();
    let output = run(&["auth.", "isolation.", "--exclude", "isolation", "--expect", expect.to_str().unwrap()]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("PASSED with ") && out.contains("expected in "), "{out}");
    // A rerun of one case: its own exit code, the others counted as not selected.
    let output = run(&["auth.missing-key"]);
    let last = String::from_utf8_lossy(&output.stdout).trim_end().lines().last().unwrap_or_default().to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let others = catalogue_len() - 1;
    assert!(last.starts_with("PASSED (") && last.ends_with(&format!("; {others} cases not selected)")), "{last}");
}

/// `-q` prints the failed cases and the closing block alone (a passing run: its verdict line);
/// `--report-json -` writes the report to standard output and the terminal's lines to standard
/// error; two reports cannot both go there.
#[test]
fn quiet_prints_failures_and_the_closing_block_and_a_report_can_go_to_standard_output() {
    let output = run(&["-q", "--sandbox-mutant", "transaction-prefix", "transactions."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    for noise in ["PASS ", "bankconf: ", "note: ", "latency of", "level  "] {
        assert!(!out.contains(noise), "{noise:?} in a quiet run:\n{out}");
    }
    assert!(out.starts_with("FAIL  transactions."), "{out}");
    assert!(out.contains("to act on, gating first:") && out.contains("rerun: "), "{out}");
    assert!(out.trim_end().lines().last().unwrap_or_default().starts_with("FAILED: "), "{out}");
    let output = run(&["--quiet", "auth."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(out.trim().lines().count() == 1 && out.starts_with("PASSED ("), "{out}");
    let output = run(&["auth.", "--report-json", "-"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    assert_eq!(report["verdict"], "PASSED");
    assert!(String::from_utf8_lossy(&output.stderr).contains("PASSED ("), "the terminal's lines on stderr");
    assert!(!std::path::Path::new("-").exists(), "a file named - was written");
    let output = run(&["auth.", "--report-json", "-", "--report-md", "-"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("two reports cannot both go to standard output"), "{}", text(&output));
}

/// `bankconf.toml` (found in the working directory, or `--config FILE`) and its profiles set
/// `run`'s options; variables and flags override them; `--print-config` says where each setting
/// came from and never shows a key; keys stay out of the file (it names their variables).
#[test]
fn a_settings_file_and_its_profiles_set_run_options_and_flags_and_variables_override_them() {
    let dir = temp_path("settings");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bankconf.toml");
    std::fs::write(
        &file,
        "gate = [\"must\"]\ncase = [\"auth.\"]\nexclude = [\"auth.widget-token\"]\n\n\
         [profile.ci]\nquiet = true\nreport-json = \"ci.json\"\n\n\
         [profile.staging]\nbase-url = \"http://127.0.0.1:9\"\napi-key-env = \"STAGING_KEY\"\n",
    )
    .unwrap();
    let in_dir = |args: &[&str], env: &[(&str, &str)]| {
        Command::new(BIN)
            .arg("run")
            .args(args)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().copied())
            .output()
            .expect("run bankconf")
    };
    // Found in the working directory: the profile's quiet run of the file's cases, gated by
    // `must` alone (the security case excluded does not gate, and is still named).
    let output = in_dir(&["--profile", "ci"], &[]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(out.trim().lines().count() <= 3 && out.contains("left out by --exclude auth.widget-token"), "{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("ci.json")).unwrap()).unwrap();
    assert!(report["cases"].as_array().unwrap().iter().all(|c| c["id"].as_str().unwrap().starts_with("auth.")));
    // Where each setting came from: file, profile, variable, flag; the key never shown.
    const SECRET: &str = "bankconf_test_staging0000000000000001";
    let env = [("STAGING_KEY", SECRET), ("BANKCONF_CASES", "9")];
    let output = in_dir(&["--profile", "staging", "--print-config", "--gate", "must,security"], &env);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(SECRET), "a key was printed: {out}");
    let line = |key: &str| out.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_default().to_string();
    assert!(line("base-url").ends_with("# profile staging (bankconf.toml)"), "{out}");
    assert!(line("api-key").contains("[redacted]") && line("api-key").contains("STAGING_KEY"), "{out}");
    assert!(line("case").ends_with("# file bankconf.toml"), "{out}");
    assert!(line("cases").ends_with("# env BANKCONF_CASES"), "{out}");
    assert!(line("gate").ends_with("# flag"), "{out}");
    assert!(line("quiet").ends_with("# default"), "{out}");
    // Mistakes stop the run before it starts (exit 2), naming the file.
    let bad = dir.join("bad.toml");
    for (text_of_file, said) in [
        ("api-key = \"k\"\n", "keys stay out of the file"),
        ("base-ulr = \"http://x\"\n", "did you mean \"base-url\""),
        ("driver = [\"a\", \"b\"]\n", "one value"),
        ("skip-browser = \"yes\"\n", "true or false"),
        ("api-key-env = \"NOT_SET_ANYWHERE\"\n", "NOT_SET_ANYWHERE, which is not set"),
    ] {
        std::fs::write(&bad, text_of_file).unwrap();
        let output = run(&["--config", bad.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{text_of_file}: {}", text(&output));
        assert!(text(&output).contains(said), "{text_of_file}: {}", text(&output));
    }
    let output = in_dir(&["--profile", "nightly"], &[]);
    assert!(text(&output).contains("no profile \"nightly\" (its profiles: ci, staging)"), "{}", text(&output));
    let output = run(&["--profile", "ci"]);
    assert_eq!(output.status.code(), Some(2), "no file, a profile: {}", text(&output));
}

/// An empty `BANKCONF_*` variable is unset, for every variable `run --help` names: CI templates
/// write `BANKCONF_BROWSER=` for "none".
#[test]
fn every_empty_variable_is_unset() {
    let help = String::from_utf8_lossy(&Command::new(BIN).args(["run", "--help"]).output().unwrap().stdout).to_string();
    let names: Vec<&str> =
        help.split("[env: ").skip(1).filter_map(|rest| rest.split(['=', ']']).next()).collect::<Vec<_>>();
    assert!(names.len() > 20 && names.contains(&"BANKCONF_BROWSER"), "{names:?}");
    let mut command = Command::new(BIN);
    command.args(["run", "--list"]);
    for name in &names {
        command.env(name, "");
    }
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), catalogue_len(), "{}", text(&output));
}

// ------------------------------------------- every printed reproduction fails when pasted

/// Each mutant of `bankconf serve --list-mutants`, with the cases that catch it and those whose
/// reads show it.
fn mutants_and_cases() -> Vec<(String, Vec<String>)> {
    let list = String::from_utf8(Command::new(BIN).args(["serve", "--list-mutants"]).output().unwrap().stdout).unwrap();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in list.lines() {
        let trimmed = line.trim_start();
        let ids = |after: &str| trimmed.strip_prefix(after).map(|rest| rest.split(", ").map(str::to_string));
        if !line.starts_with(' ') {
            out.push((line.split_whitespace().next().unwrap().to_string(), Vec::new()));
        } else if let (Some(ids), Some(last)) = (ids("caught by: ").or(ids("with the reads of: ")), out.last_mut()) {
            last.1.extend(ids);
        }
    }
    out
}

/// Runs the cases of `mutant` against a `bankconf serve --mutant` that outlives the run, and
/// pastes every `reproduce:` line the JSON report prints: a curl gets the status the evidence
/// recorded, and an answer the case's response rules (if it has some for that endpoint) fail
/// again; a `check-events` replay fails the same case again. A failure without a reproduction
/// names its evidence as context instead.
fn reproductions_fail_when_pasted(mutant: &str, cases: &[String]) {
    let server = serve(&["--mutant", mutant]);
    let (json, har) = (temp_path(&format!("paste-{mutant}.json")), temp_path(&format!("paste-{mutant}.har")));
    let mut args = external(&server.url, KEY, SECOND_KEY);
    args.extend(["--report-json", json.to_str().unwrap(), "--report-har", har.to_str().unwrap()]);
    args.extend(cases.iter().map(String::as_str));
    // Exit 1; 0 for a mutant caught at a level that does not gate; 2 for one the setup stops.
    let output = run(&args);
    assert!(matches!(output.status.code(), Some(0..=3)), "{mutant}: {}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    let recorded = |id: &Value| {
        let entry = har["log"]["entries"].as_array()?.iter().find(|e| e["_id"] == *id)?;
        serde_json::from_str::<Value>(entry["response"]["content"]["text"].as_str()?).ok()
    };
    let sh = |script: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BANKCONF_API_KEY", KEY)
            .env("BANKCONF_SECOND_API_KEY", SECOND_KEY)
            .output()
            .unwrap()
    };
    for case in report["cases"].as_array().unwrap().iter().filter(|c| c["outcome"] == "failed") {
        let id = case["id"].as_str().unwrap();
        let Some(reproduction) = case["reproduction"].as_str() else {
            let evidence = &case["evidence"];
            let named =
                evidence["requests"].as_array().unwrap().len() + evidence["deliveries"].as_array().unwrap().len();
            // A browser's finding, or an absence (an event, a chain's start, that never came for
            // its connection), may rest on nothing the files hold.
            let absence = id.starts_with("widget.") || id.starts_with("events.");
            assert!(named > 0 || absence, "{mutant}: {id} has neither reproduction nor evidence\n{case:#}");
            continue;
        };
        if reproduction.starts_with("curl ") {
            let cited = &case["evidence"]["requests"][0];
            let pasted = sh(reproduction);
            let answer = String::from_utf8_lossy(&pasted.stdout).replace("\r\n", "\n");
            let status: u64 = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            assert_eq!(status, cited["status"].as_u64().unwrap(), "{mutant}: {id}: {reproduction}\n{answer}");
            // The answer pasted is judged again by the case's response rules, when it has some for
            // that endpoint: it must break one of them again (its state may have moved on since).
            let method = reproduction.split(" -X ").nth(1).and_then(|r| r.split(' ').next()).unwrap();
            let url = reproduction.rsplit('\'').nth(1).unwrap();
            let path = url.split("/v1/").nth(1).unwrap_or_default().split('?').next().unwrap();
            let segments: Vec<String> = ["v1"].into_iter().chain(path.split('/')).map(str::to_string).collect();
            let limit = url.split("limit=").nth(1).and_then(|l| l.split('&').next()?.parse().ok());
            let body = answer.split_once("\n\n").and_then(|(_, b)| serde_json::from_str::<Value>(b).ok());
            let judged =
                body.as_ref().and_then(|b| bankconf::internal::checks::judge_one(id, method, &segments, limit, b));
            if let (Some(problems), Some(body)) = (&judged, &body) {
                // Unless the data changed since the read (a later update): then the answer judged
                // is the one the HAR holds, and it failed.
                let moved_on = recorded(&cited["har_id"]).is_some_and(|then| then != *body);
                assert!(
                    !problems.is_empty() || moved_on,
                    "{mutant}: {id}: the pasted curl's answer passes\n{reproduction}\n{answer}"
                );
                continue;
            }
            // No response rule of the case judges that endpoint: the answer must show the
            // finding by itself, by its status (which the finding names as what came) or by a
            // secret it holds. A valid answer printed as a reproduction (a creation before
            // events went astray, a last page after a has_more) is evidence, not this.
            let message = case["message"].as_str().unwrap_or_default();
            let named = [format!("got {status}"), format!("got status {status}"), format!("answered {status}")];
            let by_status = named.iter().any(|w| message.contains(w.as_str()));
            // Or by the value it names as received (`got "text/plain"`), in the answer's headers.
            let received = message.split("got \"").nth(1).and_then(|r| r.split('"').next()).filter(|r| !r.is_empty());
            let by_value = received.is_some_and(|r| answer.contains(r));
            // A secret shows plain or hex-encoded (a widget token made of the key's bytes).
            let hex = |text: &str| text.bytes().map(|b| format!("{b:02x}")).collect::<String>();
            let by_secret = [KEY, SECOND_KEY].iter().any(|k| {
                let tail = &k[k.len() - 8..];
                answer.contains(tail) || answer.to_ascii_lowercase().contains(&hex(tail))
            });
            assert!(
                by_status || by_value || by_secret,
                "{mutant}: {id}: the pasted answer shows nothing by itself (evidence, not a reproduction)\n\
                 {message}\n{reproduction}\n{answer}"
            );
        } else {
            // Pasted as printed, in the same directory: it names the binary as it was run.
            assert!(reproduction.ends_with("bankconf check-events -"), "{mutant}: {id}: {reproduction}");
            let pasted = sh(reproduction);
            let out = text(&pasted);
            assert_eq!(pasted.status.code(), Some(1), "{mutant}: {id}: {reproduction}\n{out}");
            let line = out.lines().find(|l| l.contains(id)).unwrap_or_default();
            assert!(line.contains("FAIL"), "{mutant}: {id} fails again offline:\n{out}");
        }
    }
}

/// A few mutants in a plain `cargo test`, one per kind of finding: a response rule, a delivery
/// rule, the state model, and the findings whose one request is evidence but shows nothing
/// alone (a page after a `has_more`, a read against another after an event, a creation whose
/// events went to the wrong address): those print no curl.
#[test]
fn printed_reproductions_fail_when_pasted() {
    let all = mutants_and_cases();
    let kinds = [
        "transaction-prefix",
        "event-prefix",
        "account-drops-after-update",
        "has-more-true-at-end",
        "account-balance-stale",
        "events-to-first-address",
    ];
    for name in kinds {
        let (mutant, cases) = all.iter().find(|(m, _)| m == name).unwrap_or_else(|| panic!("no mutant {name}"));
        reproductions_fail_when_pasted(mutant, cases);
    }
}

/// Every mutant (the full matrix, `.ci/run`), two at a time.
#[test]
#[ignore = "every mutant: run by .ci/run"]
fn printed_reproductions_of_every_mutant_fail_when_pasted() {
    let all = mutants_and_cases();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((mutant, cases)) = all.get(at) else { break };
                reproductions_fail_when_pasted(mutant, cases);
            });
        }
    });
}

/// One observable cause under many failures is said once, before them, with the cases it may
/// explain: every JSON body behind a byte-order mark, every connection.created event naming
/// one connection.
#[test]
fn a_root_cause_comes_before_its_symptoms() {
    for (mutant, words) in
        [("json-bom", "byte-order mark"), ("wrong-connection", "name another connection than the one concerned")]
    {
        if !String::from_utf8_lossy(&Command::new(BIN).args(["serve", "--list-mutants"]).output().unwrap().stdout)
            .contains(mutant)
        {
            continue;
        }
        let json = temp_path(&format!("root-{mutant}.json"));
        let output = run(&["--sandbox-mutant", mutant, "--report-json", json.to_str().unwrap()]);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(1), "{mutant}: {out}");
        let closing = out.split("to act on, gating first").next().unwrap_or_default();
        let root = closing.rfind("root cause, first:").unwrap_or_else(|| panic!("{mutant}: no root cause:\n{out}"));
        assert!(closing[root..].split_whitespace().collect::<Vec<_>>().join(" ").contains(words), "{mutant}: {out}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let causes = report["root_causes"].as_array().unwrap();
        assert_eq!(causes.len(), 1, "{mutant}: {causes:#?}");
        assert!(causes[0]["cases"].as_array().unwrap().len() >= 2, "{mutant}: {causes:#?}");
    }
}

/// A target behind a private CA: without `--ca-cert` the run stops at its preflight (exit 2)
/// naming `--ca-cert`; with it the run passes, the browser loading the widget too. `--header`
/// values reach the server on every request and appear in no output: terminal, reports, HAR,
/// rerun lines (`--header "Name: $BANKCONF_HEADER_1"`). HTTPS_PROXY and NO_PROXY are honoured.
/// `--insecure` passes too, and says so.
#[test]
fn a_target_behind_a_private_ca_passes_with_ca_cert_and_headers_stay_secret() {
    let dir = temp_path("private-ca");
    let Some((ca, cert, key)) = private_ca(&dir) else { return };
    let server = serve(&[]);
    let front = tls_front(&server.url, &cert, &key);
    // The example driver reaches the sandbox with curl, and inherits the run's trust: with
    // --ca-cert, its CURL_CA_BUNDLE (and the other trust variables) name the CA.
    let args = external(&front.url, KEY, SECOND_KEY);
    let mut cases = vec!["create.", "auth.", "widget.served"];
    if bankconf::internal::browser::find(None).is_some() {
        cases.push("widget.script-runs");
    }

    let output = run(&[&args[..], &["create.status-created"]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(out.contains("--ca-cert") && out.contains("certificate"), "the preflight names --ca-cert:\n{out}");

    const SECRET: &str = "gw-token-7f3a9c1e5b";
    let header = format!("X-Gateway-Token: {SECRET}");
    let files: Vec<(&str, std::path::PathBuf)> = ["json", "md", "junit", "har"]
        .into_iter()
        .map(|kind| (kind, temp_path(&format!("private-ca.{kind}"))))
        .collect();
    let paths: Vec<String> = files.iter().map(|(_, p)| p.display().to_string()).collect();
    let ca_arg = ca.display().to_string();
    let reports =
        ["--report-json", &paths[0], "--report-md", &paths[1], "--report-junit", &paths[2], "--report-har", &paths[3]];
    let flags = ["--ca-cert", &ca_arg, "--header", &header, "--header", "X-Tenant: acme-tenant-0042"];
    let output = run(&[&args[..], &flags[..], &reports[..], &cases[..]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    let sent = String::from_utf8_lossy(&front.seen.lock().unwrap()).to_lowercase();
    let requests = sent.matches("authorization:").count();
    assert!(requests > 5, "requests went through the TLS front: {requests}");
    // Every request of the harness (the driver's curl and the browser name themselves) has it.
    let heads: Vec<&str> = sent.split("\r\n\r\n").filter(|h| h.contains("\r\nhost:")).collect();
    let harness: Vec<&&str> = heads.iter().filter(|h| !h.contains("user-agent:")).collect();
    assert!(harness.len() > 5 && harness.iter().all(|h| h.contains(&header.to_lowercase())), "{harness:#?}");
    assert!(sent.contains("x-tenant: acme-tenant-0042"));
    let mut everything = out.clone();
    for (kind, path) in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(!text.contains(SECRET) && !text.contains("acme-tenant-0042"), "{kind} shows a header value");
        everything += &text;
    }
    assert!(!everything.contains(SECRET) && !everything.contains(&SECRET[..9]), "a header value was shown:\n{out}");
    // The HAR lists the gateway header each request carried, its value redacted.
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&files[3].1).unwrap()).unwrap();
    let listed = har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["url"].as_str().is_some_and(|u| u.starts_with(&front.url)))
        .all(|e| {
            e["request"]["headers"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["name"] == "X-Gateway-Token" && h["value"] == "[redacted]"))
        });
    assert!(listed, "the HAR omits the --header");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&files[0].1).unwrap()).unwrap();
    let rerun = report["cases"][0]["rerun"].as_str().unwrap();
    assert!(
        rerun.contains("--header \"X-Gateway-Token: $BANKCONF_HEADER_1\"") && rerun.contains("--ca-cert "),
        "{rerun}"
    );

    // HTTPS_PROXY is honoured (a proxy where nothing listens: the target is unreachable), and
    // NO_PROXY too.
    let proxied = |no_proxy: &str| {
        Command::new(BIN)
            .arg("run")
            .args([&args[..], &["--ca-cert", &ca_arg, "create.status-created"]].concat())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", no_proxy)
            .output()
            .unwrap()
    };
    let output = proxied("");
    assert_eq!(output.status.code(), Some(2), "through the proxy: {}", text(&output));
    let output = proxied("127.0.0.1,localhost");
    assert_eq!(output.status.code(), Some(0), "NO_PROXY: {}", text(&output));

    // --insecure gives the driver nothing to trust: it is told of the CA its own way.
    let driver = format!("CURL_CA_BUNDLE={} ./examples/sandbox-driver.sh", ca.display());
    let mut insecure = args.clone();
    let at = insecure.iter().position(|a| *a == "--driver").unwrap();
    insecure[at + 1] = &driver;
    let page = dir.join("insecure.html");
    let html_flags = ["--insecure", "--report-json", &paths[0], "--report-html", page.to_str().unwrap()];
    let output = run(&[&insecure[..], &html_flags, &["create.status-created"]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("--insecure"), "the terminal says verification was off:\n{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&files[0].1).unwrap()).unwrap();
    assert!(report["notes"].to_string().contains("--insecure"), "{}", report["notes"]);
    // The HTML page says it in its banner, beside the verdict.
    let html = std::fs::read_to_string(&page).unwrap();
    let banner = &html[..html.find("</header>").unwrap()];
    assert!(banner.contains("--insecure"), "{banner}");
}

/// Installed (`bankconf` on PATH is this binary, here through a symlink), the rerun says
/// `bankconf run …`, and pasted into a fresh shell it fails the same case again.
#[test]
fn an_installed_bankconf_is_named_bankconf_in_the_rerun() {
    let bin = temp_path("installed");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::fs::remove_file(bin.join("bankconf"));
    std::os::unix::fs::symlink(BIN, bin.join("bankconf")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let report = temp_path("installed.json");
    let run = |command: &str| {
        Command::new("sh").args(["-c", command]).env_clear().env("PATH", &path).output().expect("run sh")
    };
    let command = format!(
        "bankconf run --sandbox-mutant transaction-prefix --report-json {} transactions.id-prefix",
        report.display()
    );
    let output = run(&command);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rerun = report["cases"][0]["rerun"].as_str().unwrap();
    assert!(rerun.starts_with("bankconf run --sandbox-mutant transaction-prefix --seed "), "{rerun}");
    let output = run(rerun);
    assert_eq!(output.status.code(), Some(1), "{rerun}: {}", text(&output));
    assert!(text(&output).contains("FAIL") && text(&output).contains("transactions.id-prefix"), "{}", text(&output));
}
