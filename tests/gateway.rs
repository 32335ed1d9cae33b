//! A target behind TLS (a private CA) and a gateway that wants a header: what bankconf prints
//! pastes. The curl reproduction carries the CA (`--cacert`) and the header as the variable the
//! user exports (`-H "X-Gateway-Token: $BANKCONF_HEADER_1"`), and so does the rerun line; run
//! through `sh` with the variables exported, both reach the target and show the failure again.
//! A wrong header stops the run at its preflight naming both causes, with the gateway's words.
//! Loopback only.

use serde_json::Value;
use std::process::Command;
use std::sync::atomic::Ordering;

mod common;
#[path = "common/gateway.rs"]
mod gateway;

use common::{external, temp_path, text, Server, BIN};
use gateway::{gateway, private_ca, tls_front};

const KEY: &str = "bankconf_test_gatewayprimarykey01";
const SECOND_KEY: &str = "bankconf_test_gatewaysecondkey02";
const SECRET: &str = "gw-secret-5d1e0a7c93";

/// `script` in `sh`, with only PATH, the keys and the header's variable exported.
fn sh(script: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", script])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BANKCONF_API_KEY", KEY)
        .env("BANKCONF_SECOND_API_KEY", SECOND_KEY)
        .env("BANKCONF_HEADER_1", SECRET)
        .output()
        .unwrap()
}

#[test]
fn behind_tls_and_a_gateway_the_printed_curl_and_rerun_paste() {
    let dir = temp_path("gateway-ca");
    let Some((ca, cert, key)) = private_ca(&dir) else { return };
    let server = Server::start(&[KEY, SECOND_KEY], &["--mutant", "transaction-prefix"]);
    let gate = gateway(&server.url, "x-gateway-token", SECRET);
    let front = tls_front(&gate.url, &cert, &key);
    let driver = format!("CURL_CA_BUNDLE={} ./examples/sandbox-driver.sh", ca.display());
    let mut args: Vec<String> = external(&front.url, KEY, SECOND_KEY).into_iter().map(str::to_string).collect();
    let at = args.iter().position(|a| a == "--driver").unwrap();
    args[at + 1] = driver;
    let json = temp_path("gateway.json");
    let ca_arg = ca.display().to_string();
    let header = format!("X-Gateway-Token: {SECRET}");
    args.extend(
        ["--ca-cert", &ca_arg, "--header", &header, "--report-json", json.to_str().unwrap()].map(str::to_string),
    );
    args.push("transactions.id-prefix".into());
    let output = Command::new(BIN)
        .arg("run")
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(!out.contains(SECRET) && !out.contains("[redacted]'"), "{out}");
    assert!(out.contains("BANKCONF_HEADER_1 (X-Gateway-Token)"), "the run says what to export:\n{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == "transactions.id-prefix").unwrap();
    assert_eq!(case["outcome"], "failed", "{case:#}");

    // The curl: the CA and the header as a variable; pasted, it passes the gateway and the
    // answer fails the case's rule again.
    let curl = case["reproduction"].as_str().expect("a curl reproduction");
    assert!(curl.contains(&format!("--cacert {ca_arg}")) || curl.contains(&format!("--cacert '{ca_arg}'")), "{curl}");
    assert!(curl.contains("-H \"X-Gateway-Token: $BANKCONF_HEADER_1\""), "{curl}");
    let refused = gate.refused.load(Ordering::Relaxed);
    let pasted = sh(curl);
    let answer = String::from_utf8_lossy(&pasted.stdout).replace("\r\n", "\n");
    assert!(answer.starts_with("HTTP/1.1 200"), "{curl}\n{answer}\n{}", text(&pasted));
    assert_eq!(gate.refused.load(Ordering::Relaxed), refused, "the gateway refused the pasted curl");
    let url = curl.rsplit('\'').nth(1).unwrap();
    let path = url.split("/v1/").nth(1).unwrap().split('?').next().unwrap();
    let segments: Vec<String> = ["v1"].into_iter().chain(path.split('/')).map(str::to_string).collect();
    let limit = url.split("limit=").nth(1).and_then(|l| l.split('&').next()?.parse().ok());
    let body: Value = serde_json::from_str(answer.split_once("\n\n").unwrap().1).unwrap();
    let problems = bankconf::internal::checks::judge_one("transactions.id-prefix", "GET", &segments, limit, &body);
    assert!(problems.is_some_and(|p| !p.is_empty()), "the pasted answer passes:\n{answer}");

    // The rerun line: the header as the same variable; pasted, it fails the same case again.
    let rerun = case["rerun"].as_str().unwrap();
    assert!(rerun.contains("--header \"X-Gateway-Token: $BANKCONF_HEADER_1\""), "{rerun}");
    let pasted = sh(rerun);
    let again = text(&pasted);
    assert_eq!(pasted.status.code(), Some(1), "{rerun}\n{again}");
    assert!(again.lines().any(|l| l.contains("transactions.id-prefix") && l.contains("FAIL")), "{again}");
    assert_eq!(gate.refused.load(Ordering::Relaxed), refused, "the gateway refused the pasted rerun");

    // Without the header's value (the literal a redacted rerun used to send), the preflight
    // names both causes and quotes the gateway.
    let wrong: Vec<String> =
        args.iter().map(|a| if *a == header { "X-Gateway-Token: [redacted]".to_string() } else { a.clone() }).collect();
    let output = Command::new(BIN)
        .arg("run")
        .args(&wrong)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let out = text(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    for words in [
        "check the key",
        "a gateway in front of the target wants a header (--header",
        "gateway: a valid X-Gateway-Token header is required",
    ] {
        assert!(out.split_whitespace().collect::<Vec<_>>().join(" ").contains(words), "{words}:\n{out}");
    }
}
