//! The `bankconf` binary end to end: `serve` in one process, `run` against it in another, the
//! way a user's CI does it. Loopback only.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

mod common;

use common::{bankconf, temp_path, text, BIN};
const KEY: &str = "bankconf_test_clitestprimarykey0001";
const SECOND_KEY: &str = "bankconf_test_clitestsecondkey0002";

/// A `bankconf serve` process, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--api-key", KEY, "--api-key", SECOND_KEY])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bankconf serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read the serve banner");
        // Keep draining, so that the server never writes to a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = first.trim().rsplit(' ').next().expect("URL in the banner").to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "banner: {first}");
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(args: &[&str]) -> Output {
    bankconf(&[&["run"], args].concat())
}

fn catalogue_len() -> usize {
    bankconf::harness::catalogue::all().iter().filter(|c| !c.offline).count()
}

#[test]
fn an_external_run_with_the_example_driver_passes_every_case() {
    let server = Server::start();
    let report = temp_path("external.json");
    let output = run(&[
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--second-api-key",
        SECOND_KEY,
        "--service",
        "bankconf",
        "--driver",
        "./examples/sandbox-driver.sh",
        "--report-json",
        report.to_str().unwrap(),
    ]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(KEY) && !out.contains(SECOND_KEY), "a key was printed:\n{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["summary"]["passed"], catalogue_len(), "{report:#}");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["ignored"], 0);
}

#[test]
fn missing_prerequisites_are_ignored_with_their_reason() {
    let server = Server::start();
    let report = temp_path("no-driver.json");
    let output = run(&["--base-url", &server.url, "--api-key", KEY, "--report-json", report.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
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

#[test]
fn list_prints_the_catalogue() {
    let output = run(&["--list"]);
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(out.lines().count(), catalogue_len());
    assert!(out.contains("transactions.walk-exactly-once"));
}

#[test]
fn failures_carry_their_reproduction_in_every_report_and_keys_never_appear() {
    let server = Server::start();
    let (json, xml, md) = (temp_path("fail.json"), temp_path("fail.xml"), temp_path("fail.md"));
    let output = run(&[
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--connection-id",
        "conn_NOSUCHCONNECTION",
        "accounts.",
        "--report-json",
        json.to_str().unwrap(),
        "--junit",
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
        assert!(t.contains("conn_NOSUCHCONNECTION/accounts"), "{t}");
        assert!(t.contains("bankconf run --seed "), "no rerun command:\n{t}");
    }
    let report: Value = serde_json::from_str(&texts[0]).unwrap();
    if let Err(v) = bankconf::schemas::validate(bankconf::schemas::Schema::Report, &report) {
        panic!("{v:?}");
    }
}
