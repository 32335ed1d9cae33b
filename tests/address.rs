//! Where a user's flag and the target's fault look alike, both are named (issue 76, point 6):
//! a refused key (a wrong `--api-key`, or a target that refuses the keys it issued) and a
//! `--base-url` that is not this service (404 or an HTML page on every path, a proxy's page,
//! nothing listening, a certificate for another name). A setup error (exit 2) only where it
//! cannot be the target's violation: nothing answers, TLS fails, or no key is taken (no case
//! can be judged through it); answers that a target serving nothing would give too stay its
//! failures (exit 1), their root cause naming both. Loopback only.

use serde_json::Value;
use std::process::Command;

mod common;
#[path = "common/gateway.rs"]
mod gateway;

use common::{temp_path, text, Server, BIN};

const KEY: &str = "bankconf_test_addressprimarykey01";
const SECOND_KEY: &str = "bankconf_test_addresssecondkey02";

/// `bankconf run ARGS --report-json FILE` with an empty environment: exit code, output, report.
fn run(args: &[&str]) -> (Option<i32>, String, Value) {
    let json = temp_path(&format!("address-{}.json", args.join("-").replace(['/', ':'], "_")));
    let output = Command::new(BIN)
        .arg("run")
        .args(args)
        .args(["--report-json", json.to_str().unwrap()])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default()).unwrap_or(Value::Null);
    (output.status.code(), text(&output).split_whitespace().collect::<Vec<_>>().join(" "), report)
}

fn assert_names(out: &str, words: &[&str]) {
    for w in words {
        assert!(out.contains(w), "{w:?} not in:\n{out}");
    }
}

/// A wrong key and a target that refuses its own keys are both named; what the other key got
/// says which is likelier. Exit 2 either way: nothing can be judged through a refused key. With
/// a driver, whose registration fails with the same wrong key, the key is still the cause named.
#[test]
fn a_refused_key_names_both_causes_and_what_the_other_key_got() {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let url = server.url.as_str();
    let both = ["Either the key is wrong", "or the target refuses a key it issued", "§5 item 1"];
    let (code, out, report) =
        run(&["--base-url", url, "--api-key", "bankconf_test_wrong", "--second-api-key", SECOND_KEY]);
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &both);
    assert_names(&out, &["refuses --api-key", "other key is accepted", "most likely wrong"]);
    assert!(report["setup_error"].as_str().unwrap().contains("refuses --api-key"), "{report:#}");

    let (code, out, _) = run(&["--base-url", url, "--api-key", KEY, "--second-api-key", "bankconf_test_nobody"]);
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &both);
    assert_names(&out, &["refuses --second-api-key", "other key is accepted"]);

    let (code, out, _) =
        run(&["--base-url", url, "--api-key", "bankconf_test_wrong1", "--second-api-key", "bankconf_test_wrong2"]);
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &both);
    assert_names(&out, &["refuses --api-key", "other key is refused too"]);

    let driver = ["--driver", "./examples/sandbox-driver.sh"];
    let (code, out, _) = run(&[&["--base-url", url, "--api-key", "bankconf_test_wrong"][..], &driver].concat());
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &["refuses --api-key", "Either the key is wrong"]);
    assert!(!out.contains("driver failed"), "the driver is not blamed for the key:\n{out}");
}

/// A server on 127.0.0.1 that answers every request with `status`, `content_type` and `body`:
/// another web server, or a proxy's page, where the service was expected.
fn elsewhere(status: u16, content_type: &'static str, body: &'static str) -> (String, tokio::runtime::Runtime) {
    use axum::response::IntoResponse;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let status = axum::http::StatusCode::from_u16(status).unwrap();
    let app = axum::Router::new().fallback(move || async move {
        (status, [(axum::http::header::CONTENT_TYPE, content_type)], body).into_response()
    });
    runtime.spawn(async move { axum::serve(listener, app).await });
    (url, runtime)
}

/// 404 pages on every path, a proxy's 502 page, or a frontend's page for any path: the same from outside as a target that
/// serves none of §4's endpoints, so its failures stand (exit 1) and the root cause, said
/// first, names both.
#[test]
fn an_address_that_answers_pages_everywhere_names_both_causes() {
    let not_found = "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>nginx</body></html>";
    let proxy = "<html><body><h1>502 Bad Gateway</h1><p>The proxy could not reach the upstream.</p></body></html>";
    // A frontend's dev server answers its page to any path, with 200.
    let spa = "<!doctype html><html><head><title>Acme</title></head><body><div id=\"root\"></div></body></html>";
    for (status, body) in [(404, not_found), (502, proxy), (200, spa)] {
        let (url, _server) = elsewhere(status, "text/html", body);
        let (code, out, report) = run(&["--base-url", &url, "--api-key", KEY, "--second-api-key", SECOND_KEY]);
        assert_eq!(code, Some(1), "{status}: {out}");
        let cause = report["root_causes"][0]["cause"].as_str().unwrap_or_default().to_string();
        assert_names(&cause, &[&format!("is status {status}, each an HTML page"), "either --base-url is not"]);
        assert_names(&cause, &["or the target serves none of §4's endpoints"]);
        assert_names(&out, &["either --base-url is not this service's address"]);
    }
}

/// Nothing listening, or a certificate for another name: nothing of the service was reached,
/// so no violation can be shown (exit 2), and the message names both sides.
#[test]
fn an_address_that_reaches_nothing_of_the_service_is_a_setup_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (code, out, _) = run(&["--base-url", &format!("http://127.0.0.1:{port}"), "--api-key", KEY]);
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &["nothing listens on that port", "is the server up, and the port right?"]);

    let dir = temp_path("address-ca");
    let Some((ca, _, key)) = gateway::private_ca(&dir) else { return };
    // The same key, certified for another name only.
    std::fs::write(dir.join("other.cnf"), "subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n").unwrap();
    let signed = Command::new("openssl")
        .args(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"])
        .args(["-out", "other.pem", "-days", "2", "-extfile", "other.cnf"])
        .current_dir(&dir)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(signed.success());
    let server = Server::start(&[KEY], &[]);
    let front = gateway::tls_front(&server.url, &dir.join("other.pem"), &key);
    let (code, out, _) = run(&["--base-url", &front.url, "--api-key", KEY, "--ca-cert", ca.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}");
    assert_names(&out, &["the certificate names another host", "either the URL names the server otherwise"]);
    assert_names(&out, &["or the server presents another host's certificate"]);
}
