//! The driver protocol end to end against `bankconf serve`: the Python example driver (an HTTP
//! admin API) passes the whole catalogue, the driver gets both keys although they were given as
//! flags, and the run unregisters its receiver at the end, so the server delivers (and retries)
//! nothing to a finished run. Loopback only.

use serde_json::Value;
use std::process::Command;

mod common;

use common::{bankconf, text, Server};

const KEY: &str = "bankconf_test_driverprimarykey001";
const SECOND_KEY: &str = "bankconf_test_driversecondkey002";

fn registered(server: &Server) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let url = format!("{}/sandbox/webhooks", server.url);
    runtime.block_on(async { reqwest::get(url).await.unwrap().json::<Value>().await.unwrap() })["urls"].clone()
}

#[test]
fn the_python_driver_gets_the_keys_and_leaves_no_receiver_behind() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    // The keys are given as flags, never in the environment: the driver still gets both.
    let driver = format!(
        "test \"$BANKCONF_API_KEY\" = {KEY} && test \"$BANKCONF_SECOND_API_KEY\" = {SECOND_KEY} && \
         exec python3 examples/http-admin-driver.py"
    );
    let output = Command::new(common::BIN)
        .args(["run", "--base-url", &server.url, "--api-key", KEY, "--second-api-key", SECOND_KEY])
        .args(["--service", "bankconf", "--driver", &driver])
        .env_remove("BANKCONF_API_KEY")
        .env_remove("BANKCONF_SECOND_API_KEY")
        .output()
        .expect("run bankconf");
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(KEY) && !out.contains(SECOND_KEY), "a key was printed");
    assert_eq!(registered(&server), serde_json::json!([]), "the run's receiver is still registered");
}

#[test]
fn a_driver_that_cannot_unregister_is_fine() {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let driver = "[ \"$BANKCONF_ACTION\" = unregister_webhook ] && exit 3; exec ./examples/sandbox-driver.sh";
    let output = bankconf(&[
        "run",
        "events.",
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--driver",
        driver,
        "--service",
        "bankconf",
    ]);
    let out = text(&output);
    assert!(!out.contains("unregister"), "exit 3 is silent: {out}");
    assert!(matches!(output.status.code(), Some(0 | 3)), "{out}");
    assert_eq!(registered(&server).as_array().map(Vec::len), Some(1), "left registered, as the driver could not");
}
