//! The widget cases (§1) in a real headless Chromium: the embedded sandbox's widget passes
//! them, and without a browser they are ignored with a reason naming the package. Loopback only.
//! Where no Chromium is installed, the test that needs one is reported ignored, never ok.

use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::process::{Command, ExitCode};

mod common;

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
        Trial::test("without_a_browser_the_browser_cases_are_ignored_naming_the_package", || {
            without_a_browser_the_browser_cases_are_ignored_naming_the_package();
            Ok(())
        }),
    ];
    libtest_mimic::run(&args, trials).exit_code()
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
