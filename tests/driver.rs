//! Drivers end to end, over loopback only:
//! - the Python example driver (an HTTP admin API) passes the whole catalogue, gets both keys
//!   although they were given as flags, and the run unregisters its receiver at the end;
//! - a driver over HTTP (`--driver-url`) to an admin endpoint started here, in-process, that
//!   moves the embedded sandbox's state: a complete, passing verdict; 409 is refused, 404 and
//!   501 not supported, anything else a broken driver;
//! - a driver that breaks is the driver's fault: exit 2 and errors, never a failed case;
//! - the example endpoints of `docs/driver-over-http.md`, in Python and Node.
//!
//! A trial that needs a tool this machine lacks (python3, node, a browser) is reported ignored,
//! never ok (`harness = false`, libtest-mimic).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use bankconf::internal::catalogue;
use bankconf::internal::driver::HttpDriver;
use bankconf::sandbox::{ActionArgs, ControlError, Sandbox, SandboxConfig};
use bankconf::{Action, Answer, DriveArgs, Driver, DriverAction, Need};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{bankconf, temp_path, text, Server};

const KEY: &str = "bankconf_test_driverprimarykey001";
const SECOND_KEY: &str = "bankconf_test_driversecondkey002";

fn main() {
    let args = Arguments::from_args();
    let python = has("python3");
    let node = has("node");
    let trials = vec![
        Trial::test("the_python_driver_gets_the_keys_and_leaves_no_receiver_behind", python_driver)
            .with_ignored_flag(!python),
        Trial::test("a_driver_that_cannot_unregister_is_fine", cannot_unregister),
        Trial::test("a_driver_that_fails_on_connect_stops_the_run_with_exit_2", fails_on_connect),
        Trial::test("a_driver_that_breaks_mid_run_gives_errors_never_failures", breaks_mid_run),
        Trial::test("http_answers_are_done_refused_not_supported_or_broken", http_answers),
        Trial::test("driver_url_passes_the_catalogue", driver_url_passes),
        Trial::test("driver_url_refused_and_not_supported_leave_cases_unjudged", driver_url_refuses),
        Trial::test("driver_url_failing_connect_stops_the_run_with_exit_2", driver_url_fails_on_connect),
        Trial::test("driver_url_setup_mistakes_exit_2", driver_url_setup_mistakes),
        Trial::test("the_documented_python_endpoint_drives_bankconf_serve", || documented_endpoint("python"))
            .with_ignored_flag(!python),
        Trial::test("the_documented_node_endpoint_drives_bankconf_serve", || documented_endpoint("js"))
            .with_ignored_flag(!node),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// Whether `tool --version` runs.
fn has(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

fn check(ok: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(message().into())
    }
}

fn registered(url: &str) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let url = format!("{url}/sandbox/webhooks");
    runtime.block_on(async { reqwest::get(url).await.unwrap().json::<Value>().await.unwrap() })["urls"].clone()
}

/// The JSON report of a run written to `path`.
fn report(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the JSON report")).expect("JSON")
}

/// The ids of the cases whose outcome is `outcome`.
fn with_outcome(report: &Value, outcome: &str) -> Vec<String> {
    report["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["outcome"] == outcome)
        .map(|c| format!("{}: {}", c["id"].as_str().unwrap_or("?"), c["message"].as_str().unwrap_or("")))
        .collect()
}

fn python_driver() -> Result<(), Failed> {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    // The keys are given as flags, never in the environment: the driver still gets both.
    let driver = format!(
        "test \"$BANKCONF_API_KEY\" = {KEY} && test \"$BANKCONF_SECOND_API_KEY\" = {SECOND_KEY} && \
         exec python3 examples/http-admin-driver.py"
    );
    let output = bankconf(&[
        "run",
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--second-api-key",
        SECOND_KEY,
        "--service",
        "bankconf",
        "--driver",
        &driver,
    ]);
    let out = text(&output);
    // Without a browser the widget cases are unjudged: INCOMPLETE, and nothing else amiss.
    let expected = if browser() { 0 } else { 3 };
    check(output.status.code() == Some(expected), || out.clone())?;
    check(!out.contains(KEY) && !out.contains(SECOND_KEY), || "a key was printed".into())?;
    check(registered(&server.url) == serde_json::json!([]), || "the run's receiver is still registered".into())
}

fn cannot_unregister() -> Result<(), Failed> {
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
    check(!out.contains("unregister"), || format!("exit 3 is silent: {out}"))?;
    check(matches!(output.status.code(), Some(0 | 3)), || out.clone())?;
    let left = registered(&server.url);
    check(left.as_array().map(Vec::len) == Some(1), || format!("left registered, as the driver could not: {left}"))
}

/// Issue 20: a driver whose `connect` exits 1 is one diagnosis, exit 2, and no failed case.
fn fails_on_connect() -> Result<(), Failed> {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let driver = "[ \"$BANKCONF_ACTION\" = connect ] && { echo 'no such admin route' >&2; exit 1; }; \
                  exec ./examples/sandbox-driver.sh";
    let json = temp_path("connect-fails.json");
    let output = bankconf(&[
        "run",
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--second-api-key",
        SECOND_KEY,
        "--service",
        "bankconf",
        "--driver",
        driver,
        "--report-json",
        json.to_str().unwrap(),
    ]);
    let out = text(&output);
    check(output.status.code() == Some(2), || format!("a setup problem: {out}"))?;
    check(out.contains("the driver failed on connect") && out.contains("no such admin route"), || out.clone())?;
    let report = report(&json);
    check(with_outcome(&report, "failed").is_empty(), || format!("no failed case: {report}"))
}

/// A driver that breaks after the preflight (here on `update_accounts`): the cases that needed
/// it, and the steps after it, end in errors from the driver; no case fails.
fn breaks_mid_run() -> Result<(), Failed> {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let driver = "[ \"$BANKCONF_ACTION\" = update_accounts ] && exit 1; exec ./examples/sandbox-driver.sh";
    let json = temp_path("breaks-mid-run.json");
    let output = bankconf(&[
        "run",
        "events.",
        "reactions.",
        "isolation.deliveries",
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--service",
        "bankconf",
        "--driver",
        driver,
        "--report-json",
        json.to_str().unwrap(),
    ]);
    let out = text(&output);
    let report = report(&json);
    check(with_outcome(&report, "failed").is_empty(), || format!("the driver's fault, not the target's: {out}"))?;
    let errors = with_outcome(&report, "error");
    check(errors.iter().any(|e| e.starts_with("reactions.accounts-updated: ")), || format!("{errors:?}"))?;
    check(output.status.code() == Some(2), || out)
}

/// An admin endpoint in this process: each action moves the state of an embedded sandbox, but
/// for the actions `answers` gives a fixed status. It keeps every body it got.
struct Admin {
    sandbox: Sandbox,
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    _runtime: tokio::runtime::Runtime,
}

struct AdminState {
    control: bankconf::sandbox::Control,
    answers: Vec<(&'static str, u16)>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Admin {
    fn start(answers: &[(&'static str, u16)]) -> Admin {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (sandbox, url) = runtime.block_on(async {
            let config =
                SandboxConfig { api_keys: vec![KEY.to_string(), SECOND_KEY.to_string()], ..SandboxConfig::default() };
            let sandbox = Sandbox::start(config).await.expect("the sandbox starts");
            let state = Arc::new(AdminState {
                control: sandbox.control.clone(),
                answers: answers.to_vec(),
                bodies: bodies.clone(),
            });
            let router = axum::Router::new().route("/admin", axum::routing::post(admin)).with_state(state);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/admin", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, router).await });
            (sandbox, url)
        });
        Admin { sandbox, url, bodies, _runtime: runtime }
    }

    /// `bankconf run` against the sandbox, driven through this endpoint (`--driver-url`, or
    /// `BANKCONF_DRIVER_URL` with `by_env`).
    fn run(&self, by_env: bool, more: &[&str]) -> Output {
        let mut command = Command::new(common::BIN);
        command
            .args(["run", "--base-url", &self.sandbox.base_url, "--api-key", KEY, "--second-api-key", SECOND_KEY])
            .args(["--service", "bankconf"])
            .args(more)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        if by_env {
            command.env("BANKCONF_DRIVER_URL", &self.url);
        } else {
            command.args(["--driver-url", &self.url]);
        }
        command.output().expect("run bankconf")
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

async fn admin(State(state): State<Arc<AdminState>>, body: Bytes) -> StatusCode {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else { return StatusCode::BAD_REQUEST };
    state.bodies.lock().unwrap().push(body.clone());
    let text = |field: &str| body[field].as_str().map(str::to_string);
    let action = text("action").unwrap_or_default();
    if let Some((_, status)) = state.answers.iter().find(|(a, _)| *a == action) {
        return StatusCode::from_u16(*status).unwrap();
    }
    let control = &state.control;
    match (action.as_str(), text("webhookUrl"), text("connectionId")) {
        // Each client's address for its own events (the second's is given with a second key).
        ("register_webhook", Some(url), _) => match text("secondWebhookUrl") {
            None => control.register_webhook(&url).await,
            Some(second) => {
                for (url, key) in [(url, KEY), (second, SECOND_KEY)] {
                    if control.register_client_webhook(&url, Some(key)).await.is_err() {
                        return StatusCode::UNPROCESSABLE_ENTITY;
                    }
                }
            }
        },
        ("unregister_webhook", Some(url), _) => {
            for url in std::iter::once(url).chain(text("secondWebhookUrl")) {
                control.unregister_webhook(&url).await;
            }
        }
        (name, _, Some(connection)) => {
            let Some(action) = Action::parse(name) else { return StatusCode::NOT_IMPLEMENTED };
            let target = ActionArgs { account_id: text("accountId"), transaction_id: text("transactionId") };
            return match control.apply(&connection, action, target).await {
                Ok(()) => StatusCode::NO_CONTENT,
                Err(ControlError::NotPossible(_)) => StatusCode::CONFLICT,
                Err(ControlError::NotFound(_)) => StatusCode::UNPROCESSABLE_ENTITY,
            };
        }
        _ => return StatusCode::BAD_REQUEST,
    }
    StatusCode::OK
}

/// Whether this machine has a browser for the widget cases.
fn browser() -> bool {
    bankconf::internal::browser::find(None).is_some()
}

/// Every case this machine can judge: all of them with a browser, else all but the widget
/// cases that run the script in one.
fn judgeable() -> Vec<String> {
    let runnable = |c: &&bankconf::Case| !c.offline && (browser() || !c.needs.contains(&Need::Browser));
    catalogue::all().iter().filter(runnable).map(|c| c.id.clone()).collect()
}

fn driver_url_passes() -> Result<(), Failed> {
    let admin = Admin::start(&[]);
    let json = temp_path("driver-url.json");
    let ids = judgeable();
    let mut more: Vec<&str> = ids.iter().map(String::as_str).collect();
    more.extend(["--report-json", json.to_str().unwrap()]);
    let output = admin.run(false, &more);
    let out = text(&output);
    check(output.status.code() == Some(0), || out.clone())?;
    let report = report(&json);
    check(report["verdict"] == "PASSED", || format!("{}", report["verdict"]))?;
    let judged = report["cases"].as_array().map_or(0, Vec::len);
    check(judged == ids.len(), || format!("{judged} cases in the report, {} selected", ids.len()))?;
    for outcome in ["failed", "error"] {
        let cases = with_outcome(&report, outcome);
        check(cases.is_empty(), || format!("{outcome}: {cases:?}"))?;
    }
    // Every action went over HTTP, keys by reference only.
    let bodies = admin.bodies();
    let actions: std::collections::BTreeSet<&str> = bodies.iter().filter_map(|b| b["action"].as_str()).collect();
    for action in ["register_webhook", "connect", "update_accounts", "delete_transaction", "unregister_webhook"] {
        check(actions.contains(action), || format!("no {action} in {actions:?}"))?;
    }
    let sent = serde_json::to_string(&bodies).unwrap();
    check(!sent.contains(KEY) && !sent.contains(SECOND_KEY), || "a key's value was sent".into())?;
    check(bodies.iter().all(|b| b["apiKey"] == "primary" && b["secondApiKey"] == "second"), || {
        format!("keys by reference: {:?}", bodies.first())
    })?;
    let urls = admin.sandbox.control.webhook_urls();
    check(urls.is_empty(), || format!("the receiver is still registered: {urls:?}"))
}

/// 409 to `disconnect` (refused) and 501 / 404 to `require_mfa` / `fail_auth` (not
/// supported): the cases that need them are not judged, none fails, and the run is INCOMPLETE.
fn driver_url_refuses() -> Result<(), Failed> {
    let admin = Admin::start(&[("disconnect", 409), ("require_mfa", 501), ("fail_auth", 404)]);
    let json = temp_path("driver-url-refuses.json");
    let output = admin.run(true, &["events.", "reactions.", "--report-json", json.to_str().unwrap()]);
    let out = text(&output);
    let report = report(&json);
    check(with_outcome(&report, "failed").is_empty(), || format!("refused is never failed: {out}"))?;
    check(with_outcome(&report, "error").is_empty(), || format!("refused is not broken: {out}"))?;
    let ignored = with_outcome(&report, "ignored").join("\n");
    check(ignored.contains("target refused disconnect (HTTP 409)"), || ignored.clone())?;
    check(ignored.contains("driver cannot require_mfa (HTTP 501)"), || ignored.clone())?;
    check(ignored.contains("driver cannot fail_auth (HTTP 404)"), || ignored.clone())?;
    check(output.status.code() == Some(3), || format!("INCOMPLETE: {out}"))
}

fn driver_url_fails_on_connect() -> Result<(), Failed> {
    let admin = Admin::start(&[("connect", 500)]);
    let output = admin.run(false, &["events.", "reactions."]);
    let out = text(&output);
    check(output.status.code() == Some(2), || out.clone())?;
    check(out.contains("the driver failed on connect") && out.contains("HTTP 500"), || out.clone())?;
    check(!out.contains("FAIL"), || out)
}

/// Two drivers at once, a URL that is not HTTP: one diagnosis each, exit 2, before any case.
fn driver_url_setup_mistakes() -> Result<(), Failed> {
    let server = Server::start(&[KEY], &[]);
    let target = ["run", "--base-url", &server.url, "--api-key", KEY];
    let both = bankconf(&[&target[..], &["--driver", "true", "--driver-url", "http://127.0.0.1:9/"]].concat());
    check(both.status.code() == Some(2) && text(&both).contains("give one driver"), || text(&both))?;
    let ftp = bankconf(&[&target[..], &["--driver-url", "ftp://127.0.0.1/"]].concat());
    check(ftp.status.code() == Some(2) && text(&ftp).contains("--driver-url must be an http(s) URL"), || text(&ftp))?;
    let alone = bankconf(&["run", "--driver-url", "http://127.0.0.1:9/"]);
    check(alone.status.code() == Some(2) && text(&alone).contains("--driver-url given without --base-url"), || {
        text(&alone)
    })
}

/// Each answer of an endpoint, read by the HTTP driver directly.
fn http_answers() -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        // Answers with the status its path names; /slow never answers in time.
        let router = axum::Router::new()
            .route("/slow", axum::routing::post(|| async { tokio::time::sleep(Duration::from_secs(5)).await }))
            .route("/shared", axum::routing::post(|| async { r#"{"webhooks": "shared"}"# }))
            .route(
                "/{status}",
                axum::routing::post(|axum::extract::Path(status): axum::extract::Path<u16>| async move {
                    (StatusCode::from_u16(status).unwrap(), "said by the endpoint")
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        let args = DriveArgs { connection_id: Some("conn_1".into()), ..Default::default() };
        let answer = |path: &str| {
            let driver = HttpDriver::new(&format!("{base}/{path}"), Duration::from_millis(500), false).unwrap();
            let args = args.clone();
            async move {
                let driver: Arc<dyn Driver> = Arc::new(driver);
                driver.act(DriverAction::Act(Action::Connect), &args).await
            }
        };
        let kind = |a: &Answer| match a {
            Answer::Done => "done",
            Answer::Refused(_) => "refused",
            Answer::NotSupported(_) => "not supported",
            Answer::Error(_) => "error",
        };
        let expected = [
            ("200", "done"),
            ("204", "done"),
            ("409", "refused"),
            ("404", "not supported"),
            ("501", "not supported"),
            ("500", "error"),
            ("400", "error"),
            ("302", "error"),
            ("slow", "error"),
        ];
        for (path, meaning) in expected {
            let got = answer(path).await;
            check(kind(&got) == meaning, || format!("{path}: {got:?}, expected {meaning}"))?;
            if meaning != "done" {
                check(format!("{got:?}").contains("said by the endpoint") || path == "slow", || format!("{got:?}"))?;
            }
        }
        // register_webhook's answer may say what was registered (docs/driver-over-http.md).
        let said = HttpDriver::new(&format!("{base}/shared"), Duration::from_millis(500), true).unwrap();
        let hook = DriveArgs { webhook_url: Some("http://127.0.0.1:9/hook".into()), ..Default::default() };
        let got = (&said as &dyn Driver).act(DriverAction::RegisterWebhook, &hook).await;
        check(got == Answer::Done && said.per_client_addresses() == Some(false), || format!("shared: {got:?}"))?;
        let silent = HttpDriver::new(&format!("{base}/204"), Duration::from_millis(500), true).unwrap();
        let _ = (&silent as &dyn Driver).act(DriverAction::RegisterWebhook, &hook).await;
        check(silent.per_client_addresses().is_none(), || "an answer that says nothing".to_string())?;
        let gone = HttpDriver::new("http://127.0.0.1:9/", Duration::from_millis(500), false).unwrap();
        let got = (&gone as &dyn Driver).act(DriverAction::Act(Action::Connect), &args).await;
        check(matches!(got, Answer::Error(_)), || format!("no endpoint: {got:?}"))
    })
}

/// The code block of `docs/driver-over-http.md` in `language`, run against `bankconf serve`:
/// the event and reaction cases pass through it, and each client's events reach its own
/// address only (`isolation.deliveries` judged, not ignored).
fn documented_endpoint(language: &str) -> Result<(), Failed> {
    let docs = std::fs::read_to_string("docs/driver-over-http.md").unwrap();
    let fence = format!("```{language}\n");
    let start = docs.find(&fence).ok_or("no such code block")? + fence.len();
    let code = &docs[start..start + docs[start..].find("```").ok_or("unclosed block")?];
    let (tool, file) = if language == "python" { ("python3", "driver.py") } else { ("node", "driver.mjs") };
    let path = temp_path(file);
    std::fs::write(&path, code).unwrap();
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let mut endpoint = Command::new(tool)
        .arg(&path)
        .arg(&server.url)
        .env("PORT", "0")
        .env("API_KEY", KEY)
        .env("SECOND_API_KEY", SECOND_KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{tool}: {e}"))?;
    let mut banner = String::new();
    BufReader::new(endpoint.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    let output = bankconf(&[
        "run",
        "events.",
        "reactions.",
        "--base-url",
        &server.url,
        "--api-key",
        KEY,
        "--second-api-key",
        SECOND_KEY,
        "--service",
        "bankconf",
        "--driver-url",
        banner.trim(),
    ]);
    let _ = endpoint.kill();
    let _ = endpoint.wait();
    let out = text(&output);
    check(output.status.code() == Some(0), || format!("{banner}{out}"))
}
