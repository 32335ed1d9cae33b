//! The composite GitHub Action (`action.yml`): it parses, every input mirrors a `bankconf run`
//! flag (and its `BANKCONF_*` variable), the build cache is keyed on the action's own files and
//! saved whatever the verdict, the artifact name is unique per job, and its run step, run
//! locally as GitHub would run it, judges `bankconf serve`, leaves the three reports, the HAR
//! and the job summary, and sets the outputs `verdict` and `exit-code`. Loopback only.

use serde_json::Value;
use std::process::Command;

mod common;

use common::{temp_path, text, Server, BIN};

const KEY: &str = "bankconf_test_actionprimarykey01";
const SECOND_KEY: &str = "bankconf_test_actionsecondkey02";
/// Inputs that are not flags: the run step handles them (the artifact's name, its own step).
const OWN_INPUTS: [&str; 3] = ["extra-args", "reports-dir", "artifact-name"];

fn action() -> Value {
    let text = std::fs::read_to_string("action.yml").expect("action.yml at the repository root");
    serde_norway::from_str(&text).expect("action.yml is YAML")
}

/// The step named `name`.
fn step(action: &Value, name: &str) -> Value {
    let steps = action["runs"]["steps"].as_array().unwrap();
    steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name:?}")).clone()
}

/// The index of the step named `name`.
fn position(action: &Value, name: &str) -> usize {
    action["runs"]["steps"].as_array().unwrap().iter().position(|s| s["name"] == name).unwrap()
}

/// `KEY=VALUE` lines of a `$GITHUB_OUTPUT` file.
fn outputs(path: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

#[test]
fn every_input_mirrors_a_flag() {
    let action = action();
    assert_eq!(action["runs"]["using"], "composite");
    let help = text(&Command::new(BIN).args(["run", "--help"]).output().unwrap());
    let run_sh = std::fs::read_to_string(".github/action/run.sh").unwrap();
    let steps = action["runs"]["steps"].as_array().unwrap();
    let run_step = steps.iter().find(|s| s["name"] == "Conformance run").expect("a run step");
    let artifact_step = step(&action, "Name the reports artifact");
    let inputs = action["inputs"].as_object().unwrap();
    assert!(inputs.len() >= 10);
    for (name, input) in inputs {
        assert!(input["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}: no description");
        let upper = name.to_uppercase().replace('-', "_");
        let passed_to = if name == "artifact-name" { &artifact_step } else { run_step };
        assert_eq!(
            passed_to["env"][format!("INPUT_{upper}")],
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
    let github_output = temp_path("action-output");
    let _ = std::fs::remove_file(&github_output);
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
        .env("GITHUB_OUTPUT", &github_output)
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
    let set = outputs(&github_output);
    assert!(set.contains(&("verdict".into(), "PASSED".into())), "{set:?}");
    assert!(set.contains(&("exit-code".into(), "0".into())), "{set:?}");
}

#[test]
fn the_outputs_are_set_when_the_run_fails() {
    let server = Server::start(&[KEY, SECOND_KEY], &[]);
    let dir = temp_path("action-reports-refused");
    let github_output = temp_path("action-output-refused");
    let _ = std::fs::remove_file(&github_output);
    let output = Command::new("bash")
        .arg(".github/action/run.sh")
        .env("BANKCONF_BIN", BIN)
        .env("INPUT_BASE_URL", &server.url)
        .env("INPUT_API_KEY", "bankconf_test_notakeyofthisserver")
        .env("INPUT_REPORTS_DIR", &dir)
        .env("GITHUB_OUTPUT", &github_output)
        .output()
        .expect("bash");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let set = outputs(&github_output);
    assert_eq!(set, [("verdict".into(), "NOT RUN".into()), ("exit-code".into(), "2".into())], "{set:?}");
    // The action's outputs are the run step's.
    let action = action();
    assert_eq!(step(&action, "Conformance run")["id"], "run");
    for name in ["verdict", "exit-code"] {
        assert_eq!(action["outputs"][name]["value"], format!("${{{{ steps.run.outputs.{name} }}}}"));
    }
}

#[test]
fn the_cache_is_keyed_on_the_action_and_saved_whatever_the_verdict() {
    let action = action();
    let yaml = std::fs::read_to_string("action.yml").unwrap();
    assert!(!yaml.contains("action_ref"), "the key must not use github.action_ref");
    assert!(!yaml.contains("actions/cache@"), "restore and save are separate steps");
    let (restore, save) = (step(&action, "Restore the bankconf build"), step(&action, "Save the bankconf build"));
    assert_eq!(restore["uses"], "actions/cache/restore@v4");
    assert_eq!(save["uses"], "actions/cache/save@v4");
    assert_eq!(restore["with"]["key"], "${{ steps.prepare.outputs.key }}");
    assert_eq!(restore["with"]["key"], save["with"]["key"]);
    assert_eq!(restore["with"]["path"], save["with"]["path"]);
    // Saved after the run, even when the run failed: `always()`, and nothing about the run.
    assert!(position(&action, "Save the bankconf build") > position(&action, "Conformance run"));
    let condition = save["if"].as_str().unwrap();
    assert!(condition.starts_with("always() "), "{condition}");
    for word in ["steps.run", "success()", "failure()", "cancelled()"] {
        assert!(!condition.contains(word), "{condition}");
    }
    // The key is the action's own: its version and the hash of its Cargo.lock.
    let github_output = temp_path("action-prepare-output");
    let _ = std::fs::remove_file(&github_output);
    let prepared = Command::new("bash")
        .arg(".github/action/prepare.sh")
        .env("GITHUB_ACTION_PATH", ".")
        .env("GITHUB_OUTPUT", &github_output)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(prepared.status.success(), "{}", text(&prepared));
    let set = outputs(&github_output);
    let value = |k: &str| set.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
    let lock = Command::new("sha256sum").arg("Cargo.lock").output().unwrap();
    let lock = String::from_utf8_lossy(&lock.stdout)[..16].to_string();
    let key = value("key");
    assert!(key.contains(&format!("-v{}-{lock}-", env!("CARGO_PKG_VERSION"))), "{key}");
    assert!(key.starts_with(&value("restore-prefix")), "{key}");
    // Without cargo on PATH, a stable toolchain is installed (when the build was not restored).
    assert_eq!(value("cargo"), "missing");
    let toolchain = step(&action, "Install a Rust toolchain");
    assert_eq!(toolchain["uses"], "dtolnay/rust-toolchain@stable");
    assert!(toolchain["if"].as_str().unwrap().contains("steps.prepare.outputs.cargo == 'missing'"));
}

#[test]
fn the_artifact_name_is_unique_per_job_by_default() {
    let action = action();
    let (naming, upload) = (step(&action, "Name the reports artifact"), step(&action, "Upload the reports"));
    assert_eq!(upload["with"]["name"], "${{ steps.artifact.outputs.name }}");
    assert_eq!(naming["id"], "artifact");
    assert_eq!(naming["if"], "always()");
    assert_eq!(action["inputs"]["artifact-name"]["default"], "");
    for (var, context) in
        [("JOB", "github.job"), ("JOB_INDEX", "strategy.job-index"), ("ATTEMPT", "github.run_attempt")]
    {
        assert_eq!(naming["env"][var], format!("${{{{ {context} }}}}"));
    }
    // The step's script, run as GitHub would for jobs of a matrix, a re-run, and a given name.
    let name = |vars: &[(&str, &str)]| {
        let github_output = temp_path("action-artifact-output");
        let _ = std::fs::remove_file(&github_output);
        let mut command = Command::new("bash");
        command.args(["-c", naming["run"].as_str().unwrap()]).env("GITHUB_OUTPUT", &github_output);
        for (k, v) in vars {
            command.env(k, v);
        }
        assert!(command.status().unwrap().success());
        outputs(&github_output).into_iter().find(|(k, _)| k == "name").unwrap().1
    };
    let job = |index: &'static str, attempt: &'static str| {
        name(&[("JOB", "conformance"), ("JOB_INDEX", index), ("ATTEMPT", attempt), ("INPUT_ARTIFACT_NAME", "")])
    };
    let names = [job("0", "1"), job("1", "1"), job("0", "2")];
    assert_eq!(names[0], "bankconf-reports-conformance-0-1");
    assert!(names[0] != names[1] && names[0] != names[2] && names[1] != names[2], "{names:?}");
    assert_eq!(name(&[("INPUT_ARTIFACT_NAME", "mine")]), "mine");
}

#[test]
fn the_documented_uses_line_names_a_ref_that_exists() {
    let docs = std::fs::read_to_string("docs/github-action.md").unwrap();
    let refs: Vec<&str> = docs
        .lines()
        .filter_map(|l| {
            l.trim().strip_prefix("- uses: bankconf/bankconf@").or(l.trim().strip_prefix("uses: bankconf/bankconf@"))
        })
        .map(|r| r.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(!refs.is_empty(), "no uses: line");
    for r in refs {
        // A branch of this repository, or a pinned commit (the docs' placeholder SHA shows the form).
        let sha = r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit());
        assert!(r == "main" || sha, "{r}: no such tag or branch");
    }
}
