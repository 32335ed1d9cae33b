//! The composite GitHub Action (`action.yml`): it parses, every input mirrors a `bankconf run`
//! flag (and its `BANKCONF_*` variable), and its run step, run locally as GitHub would run it,
//! judges `bankconf serve` and leaves the three reports, the HAR and the job summary. Loopback only.

use serde_json::Value;
use std::process::Command;

mod common;

use common::{temp_path, text, Server, BIN};

const KEY: &str = "bankconf_test_actionprimarykey01";
const SECOND_KEY: &str = "bankconf_test_actionsecondkey02";
/// Inputs that are not flags: the run step handles them.
const OWN_INPUTS: [&str; 2] = ["extra-args", "reports-dir"];

fn action() -> Value {
    let text = std::fs::read_to_string("action.yml").expect("action.yml at the repository root");
    serde_norway::from_str(&text).expect("action.yml is YAML")
}

#[test]
fn every_input_mirrors_a_flag() {
    let action = action();
    assert_eq!(action["runs"]["using"], "composite");
    let help = text(&Command::new(BIN).args(["run", "--help"]).output().unwrap());
    let run_sh = std::fs::read_to_string(".github/action/run.sh").unwrap();
    let steps = action["runs"]["steps"].as_array().unwrap();
    let run_step = steps.iter().find(|s| s["name"] == "Conformance run").expect("a run step");
    let inputs = action["inputs"].as_object().unwrap();
    assert!(inputs.len() >= 10);
    for (name, input) in inputs {
        assert!(input["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}: no description");
        let upper = name.to_uppercase().replace('-', "_");
        assert_eq!(
            run_step["env"][format!("INPUT_{upper}")],
            format!("${{{{ inputs.{name} }}}}"),
            "{name}: not passed to the run step"
        );
        if OWN_INPUTS.contains(&name.as_str()) {
            continue;
        }
        assert!(help.contains(&format!("--{name} ")), "{name}: no flag --{name} in `bankconf run --help`");
        assert!(help.contains(&format!("BANKCONF_{upper}")), "{name}: no BANKCONF_{upper}");
        let words = run_sh.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        assert!(words.into_iter().any(|w| w == upper), "{name}: run.sh does not export BANKCONF_{upper}");
    }
    for step in steps.iter().filter(|s| s.get("run").is_some()) {
        assert_eq!(step["shell"], "bash", "a composite step needs its shell: {step:?}");
    }
}

#[test]
fn the_run_step_judges_a_server_and_leaves_its_reports() {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let dir = temp_path("action-reports");
    let _ = std::fs::remove_dir_all(&dir);
    let summary = temp_path("action-summary.md");
    let _ = std::fs::remove_file(&summary);
    let output = Command::new("bash")
        .arg(".github/action/run.sh")
        .env("BANKCONF_BIN", BIN)
        .env("INPUT_BASE_URL", &server.url)
        .env("INPUT_API_KEY", KEY)
        .env("INPUT_SECOND_API_KEY", SECOND_KEY)
        .env("INPUT_SERVICE", "bankconf")
        .env("INPUT_DRIVER", "./examples/sandbox-driver.sh")
        .env("INPUT_EXPECT", "examples/expectations.toml")
        .env("INPUT_EXTRA_ARGS", "create. widget.served")
        .env("INPUT_REPORTS_DIR", &dir)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .expect("bash");
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(KEY), "a key was printed");
    for file in ["bankconf-report.json", "bankconf-junit.xml", "bankconf-report.md", "bankconf.har"] {
        let path = dir.join(file);
        let content = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}\n{out}"));
        assert!(!content.contains(KEY) && !content.contains(SECOND_KEY), "a key in {file}");
    }
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.starts_with("## bankconf run: PASSED"), "{summary}");
}
