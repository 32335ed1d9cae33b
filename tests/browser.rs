//! The widget cases (§1) in a real headless Chromium: the embedded sandbox's widget passes
//! them, and without a browser they are ignored with a reason naming the package. Loopback only.
//! Where no Chromium is installed, the tests that need one are reported ignored, never ok. The
//! HTML report of a failing run is opened in it too: no script error, no element the target
//! controls, the failing case shown.

use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::process::{Command, ExitCode};

mod common;
#[path = "common/gateway.rs"]
mod gateway;

use common::{bankconf, temp_path, text, BIN};

const BROWSER_CASES: [&str; 3] = ["widget.script-runs", "widget.global-open", "widget.open-accepts-token"];

fn outcomes(report: &std::path::Path) -> Vec<(String, String, String)> {
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let field = |f: &str| c[f].as_str().unwrap_or_default().to_string();
            (field("id"), field("outcome"), field("message"))
        })
        .collect()
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let no_browser = bankconf::internal::browser::find(None).is_none();
    let trials = vec![
        Trial::test("the_sandbox_widget_passes_the_browser_cases", || {
            the_sandbox_widget_passes_the_browser_cases();
            Ok(())
        })
        .with_ignored_flag(no_browser),
        Trial::test("the_html_report_of_a_failing_run_opens_clean", || {
            the_html_report_of_a_failing_run_opens_clean();
            Ok(())
        })
        .with_ignored_flag(no_browser),
        Trial::test("a_key_the_page_received_is_cited_by_where_it_came_from", || {
            a_key_the_page_received_is_cited_by_where_it_came_from();
            Ok(())
        })
        .with_ignored_flag(no_browser),
        Trial::test("behind_a_gateway_that_guards_the_widget_the_browser_sends_the_header", || {
            behind_a_gateway_that_guards_the_widget_the_browser_sends_the_header();
            Ok(())
        })
        .with_ignored_flag(no_browser),
        Trial::test("without_a_browser_the_browser_cases_are_ignored_naming_the_package", || {
            without_a_browser_the_browser_cases_are_ignored_naming_the_package();
            Ok(())
        }),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}

/// What the widget's page received is evidence like an answer or a delivery: a key in the
/// `onSuccess` metadata is cited by where it came from, in every report, and never shown.
fn a_key_the_page_received_is_cited_by_where_it_came_from() {
    let report = temp_path("received.json");
    let md = temp_path("received.md");
    let output = bankconf(&[
        "run",
        "widget.frontend-no-key",
        "--sandbox-mutant",
        "key-in-success-metadata",
        "--report-json",
        report.to_str().unwrap(),
        "--report-md",
        md.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let case = json["cases"].as_array().unwrap().iter().find(|c| c["id"] == "widget.frontend-no-key").unwrap();
    assert_eq!(case["outcome"], "failed", "{case:#}");
    assert_eq!(case["evidence"]["received"], serde_json::json!([{"what": "the onSuccess metadata"}]), "{case:#}");
    assert!(case["reproduction"].is_null(), "{case:#}");
    let context = "evidence (context, not a reproduction): the widget's page received the onSuccess metadata";
    // The terminal lists each item on a line of its own under the heading.
    let listed = "evidence (context, not a reproduction):\n        the widget's page received the onSuccess metadata";
    assert!(text(&output).contains(listed), "{}", text(&output));
    assert!(std::fs::read_to_string(&md).unwrap().contains(context));
}

fn the_sandbox_widget_passes_the_browser_cases() {
    let report = temp_path("browser.json");
    let output = bankconf(&["run", "widget.", "--report-json", report.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let outcomes = outcomes(&report);
    for id in BROWSER_CASES {
        assert!(outcomes.iter().any(|(i, o, _)| i == id && o == "passed"), "{id}: {outcomes:?}");
    }
    let all = text(&output);
    let leaked = all.match_indices("sess_").any(|(at, _)| !all[at + 5..].starts_with("[redacted]"));
    assert!(!leaked, "a widget token in the output: {all}");
}

fn without_a_browser_the_browser_cases_are_ignored_naming_the_package() {
    let report = temp_path("no-browser.json");
    let output = Command::new(BIN)
        .args(["run", "widget.", "--report-json", report.to_str().unwrap()])
        .env_clear()
        .env("PATH", "/nonexistent")
        .output()
        .expect("run bankconf");
    assert!(!text(&output).contains("FAIL"), "{}", text(&output));
    assert_eq!(output.status.code(), Some(3), "gating cases went unjudged: INCOMPLETE\n{}", text(&output));
    let outcomes = outcomes(&report);
    for id in BROWSER_CASES {
        assert!(
            outcomes.iter().any(|(i, o, m)| i == id && o == "ignored" && m.contains("`chromium`")),
            "{id}: {outcomes:?}"
        );
    }
    assert!(outcomes.iter().any(|(i, o, _)| i == "widget.defines-open" && o == "passed"), "{outcomes:?}");
}

/// What the page holds, read in the browser: elements and attributes no report of bankconf
/// writes (a script, a frame, an image, a form, an event handler, a link out of the page), the
/// first failure's heading and whether it is drawn, the policy, the steps marked on timelines.
const INSPECT_JS: &str = r##"(() => {
  const all = Array.from(document.querySelectorAll("*"));
  const banned = ["SCRIPT", "IFRAME", "FRAME", "IMG", "OBJECT", "EMBED", "FORM", "LINK", "BASE", "TEXTAREA", "INPUT"];
  const forbidden = all.filter((e) => banned.includes(e.tagName.toUpperCase())).map((e) => e.tagName);
  const handlers = all.filter((e) => Array.from(e.attributes).some((a) => a.name.toLowerCase().startsWith("on"))).map((e) => e.tagName);
  const links = Array.from(document.querySelectorAll("a")).map((a) => a.getAttribute("href") || "").filter((h) => !h.startsWith("#"));
  const failure = document.querySelector("article.failure");
  const rect = failure ? failure.getBoundingClientRect() : null;
  const meta = document.querySelector('meta[http-equiv="Content-Security-Policy"]');
  return {
    forbidden, handlers, links,
    failure: failure ? failure.querySelector("h3").textContent : null,
    shown: !!rect && rect.width > 0 && rect.height > 0 && getComputedStyle(failure).visibility === "visible",
    csp: meta ? meta.getAttribute("content") : null,
    marked: document.querySelectorAll("svg.timeline .marked").length,
  };
})()"##;

/// Opens `page` in a headless Chromium; what [`INSPECT_JS`] found, and the errors the page
/// raised (exceptions, console and log errors, a policy refusing something).
async fn inspect(page: &std::path::Path) -> (Value, Vec<String>) {
    use bankconf::internal::browser;
    let path = browser::find(None).expect("a browser");
    let session = browser::launch(&path, false).await.expect("the browser starts");
    let tab = session.page("about:blank").await.expect("a page");
    let mut raised = tab.events(&["Runtime.exceptionThrown", "Runtime.consoleAPICalled", "Log.entryAdded"]);
    tab.call("Log.enable", serde_json::json!({})).await.expect("the log");
    tab.navigate(&format!("file://{}", page.display())).await.expect("the report loads");
    let found: Value = tab.evaluate(INSPECT_JS).await.expect("the page is read");
    // Anything the page raised as it settled.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mut errors = Vec::new();
    while let Ok(e) = raised.try_recv() {
        let p = &e.params;
        errors.push(match e.method.as_str() {
            "Runtime.exceptionThrown" => format!("exception: {}", p["exceptionDetails"]["text"]),
            "Runtime.consoleAPICalled" => format!("console {}", p["type"]),
            _ => format!("log {} {}: {}", p["entry"]["source"], p["entry"]["level"], p["entry"]["text"]),
        });
    }
    tab.close().await;
    session.close().await;
    (found, errors)
}

fn the_html_report_of_a_failing_run_opens_clean() {
    let page = temp_path("failing-run.html");
    let _ = std::fs::remove_file(&page);
    let case = "reactions.accounts-updated";
    let output =
        bankconf(&["run", "--sandbox-mutant", "event-before-data", case, "--report-html", page.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "the mutant fails the case\n{}", text(&output));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let bound = std::time::Duration::from_secs(90);
    let (found, errors) =
        runtime.block_on(async { tokio::time::timeout(bound, inspect(&page)).await.expect("the browser answered") });
    assert!(errors.is_empty(), "the page raised errors: {errors:?}");
    assert_eq!(found["forbidden"], serde_json::json!([]), "{found}");
    assert_eq!(found["handlers"], serde_json::json!([]), "{found}");
    assert_eq!(found["links"], serde_json::json!([]), "{found}");
    assert_eq!(found["csp"], bankconf::internal::report::html::CSP, "{found}");
    assert!(found["failure"].as_str().is_some_and(|h| h.contains(case)), "the failing case first: {found}");
    assert_eq!(found["shown"], true, "{found}");
    assert!(found["marked"].as_u64().is_some_and(|n| n > 0), "its steps marked on a timeline: {found}");
}

/// A gateway that guards `/widget/` as well as `/v1/` (403 without its header): the browser
/// sends the `--header` values to the target's origin too, so the widget cases pass as
/// bankconf's own fetch of the script does; none of the browser's requests is refused, the
/// page of another origin that loads the script included.
fn behind_a_gateway_that_guards_the_widget_the_browser_sends_the_header() {
    const KEY: &str = "bankconf_test_browsergatewaykey01";
    const SECOND_KEY: &str = "bankconf_test_browsergatewaykey02";
    const SECRET: &str = "gw-browser-3b9f27d1";
    let server = common::Server::start(&[KEY, SECOND_KEY], &[]);
    let gate = gateway::gateway(&server.url, "x-gateway-token", SECRET);
    let report = temp_path("gateway-widget.json");
    let header = format!("X-Gateway-Token: {SECRET}");
    let mut args = vec!["run"];
    args.extend(common::external(&gate.url, KEY, SECOND_KEY));
    args.extend(["--header", &header, "--report-json", report.to_str().unwrap(), "widget."]);
    let output = bankconf(&args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(SECRET), "{out}");
    let outcomes = outcomes(&report);
    for (id, outcome, message) in &outcomes {
        assert!(outcome != "failed" && outcome != "error", "{id}: {outcome}: {message}\n{out}");
    }
    for id in BROWSER_CASES.iter().chain(&["widget.served", "widget.loads-cross-origin"]) {
        assert!(outcomes.iter().any(|(i, o, _)| i == id && o == "passed"), "{id}: {outcomes:?}");
    }
    assert_eq!(gate.refused.load(std::sync::atomic::Ordering::Relaxed), 0, "the gateway refused a request:\n{out}");
}
