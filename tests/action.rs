//! The composite GitHub Action (`action.yml`): it parses, every input mirrors a `bankconf run`
//! flag (and its `BANKCONF_*` variable), the build cache is keyed on the action's own files and
//! saved whatever the verdict, the artifact name is unique per job, and its run step, run
//! locally as GitHub would run it, judges `bankconf serve`, leaves the three reports, the HAR
//! and the job summary, and sets the outputs `verdict` and `exit-code`. Loopback only.
//!
//! The release artifacts too: `scripts/package.sh` packs the debug binary cargo built for the
//! tests (no release build here) into the archive the docs promise, the binstall metadata
//! resolves to its names, the action's release step takes it only when its sources are the
//! release's, and the release workflow and the Dockerfile parse.

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
        let flag = [format!("--{name} "), format!("--{name}\n")];
        assert!(flag.iter().any(|f| help.contains(f)), "{name}: no flag --{name} in `bankconf run --help`");
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
    for file in
        ["bankconf-report.json", "bankconf-junit.xml", "bankconf-report.md", "bankconf.har", "bankconf-report.html"]
    {
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

/// The target the tests name their archive after (only a name here: the binary is the host's).
const TARGET: &str = "x86_64-unknown-linux-musl";

/// `scripts/package.sh` run once for this process, on the debug binary: its output folder.
fn packaged() -> &'static std::path::Path {
    static DIST: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIST.get_or_init(|| {
        let out = temp_path("dist");
        let _ = std::fs::remove_dir_all(&out);
        let output = Command::new("bash")
            .args(["scripts/package.sh", "--target", TARGET, "--bin", BIN, "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        out
    })
}

fn archive_name() -> String {
    format!("bankconf-v{}-{TARGET}", env!("CARGO_PKG_VERSION"))
}

#[test]
fn the_release_archive_holds_what_the_docs_promise_and_binstall_resolves_to_it() {
    let dist = packaged();
    let name = archive_name();
    let archive = dist.join(format!("{name}.tar.gz"));
    let listing = Command::new("tar").arg("-tzf").arg(&archive).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    let entries: Vec<&str> = listing.lines().map(|l| l.trim_end_matches('/')).collect();
    let mut promised: Vec<String> = ["bankconf", "LICENSE-MIT", "LICENSE-APACHE", "README.md"]
        .iter()
        .chain(&["bankconf.bash", "_bankconf", "bankconf.fish", "bankconf.elv", "_bankconf.ps1"].map(|c| {
            // The completions folder, one script per shell clap_complete knows.
            Box::leak(format!("completions/{c}").into_boxed_str()) as &str
        }))
        .map(|f| f.to_string())
        .collect();
    // Every man page of docs/man (the same generator).
    for page in std::fs::read_dir("docs/man").unwrap() {
        promised.push(format!("man/{}", page.unwrap().file_name().to_string_lossy()));
    }
    for file in &promised {
        assert!(entries.contains(&format!("{name}/{file}").as_str()), "{file} missing from the archive:\n{listing}");
    }
    // Its SHA-256 sum checks.
    let sum = Command::new("sha256sum").args(["-c", &format!("{name}.tar.gz.sha256")]).current_dir(dist).output();
    assert!(sum.unwrap().status.success(), "the .sha256 does not match");
    // Unpacked, it runs and names its commit; the completions are scripts for their shell.
    let unpacked = temp_path("unpacked");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    assert!(Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&unpacked).status().unwrap().success());
    let version = Command::new(unpacked.join(&name).join("bankconf")).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(version.starts_with(&format!("bankconf {} (commit ", env!("CARGO_PKG_VERSION"))), "{version}");
    let bash = std::fs::read_to_string(unpacked.join(&name).join("completions/bankconf.bash")).unwrap();
    assert!(bash.contains("complete -F _bankconf") && bash.contains("--ca-cert"), "{bash}");

    // `cargo binstall` resolves Cargo.toml's templates to these names.
    let manifest: toml::Value = toml::from_str(&std::fs::read_to_string("Cargo.toml").unwrap()).unwrap();
    let package = &manifest["package"];
    let binstall = &package["metadata"]["binstall"];
    let repo = package["repository"].as_str().unwrap();
    let fill = |template: &str| {
        [
            ("{ repo }", repo),
            ("{ name }", "bankconf"),
            ("{ version }", env!("CARGO_PKG_VERSION")),
            ("{ target }", TARGET),
            ("{ archive-suffix }", ".tar.gz"),
            ("{ bin }", "bankconf"),
            ("{ binary-ext }", ""),
        ]
        .iter()
        .fold(template.to_string(), |t, (k, v)| t.replace(k, v))
    };
    assert_eq!(binstall["pkg-fmt"].as_str(), Some("tgz"));
    let url = fill(binstall["pkg-url"].as_str().unwrap());
    assert!(!url.contains('{'), "{url}");
    assert_eq!(
        url,
        format!("{repo}/releases/download/v{}/{name}.tar.gz", env!("CARGO_PKG_VERSION")),
        "the release workflow publishes under the tag v<version>"
    );
    let bin_dir = fill(binstall["bin-dir"].as_str().unwrap());
    assert!(entries.contains(&bin_dir.as_str()), "{bin_dir} is not in the archive:\n{listing}");
}

/// The action's release step, run as GitHub would against a release folder (file://): it takes
/// the release binary when the action's sources are the release's, and falls back to building
/// from source when they differ, or when the archive does not match its sum.
#[test]
fn the_action_uses_the_release_binary_only_when_its_sources_are_the_release() {
    let dist = packaged();
    let prepared = Command::new("bash").arg(".github/action/prepare.sh").env_remove("GITHUB_OUTPUT").output().unwrap();
    let prepared = String::from_utf8_lossy(&prepared.stdout).to_string();
    let value = |k: &str| prepared.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_string();
    let (version, sources) = (value("version"), value("sources"));
    let release = temp_path("release");
    let _ = std::fs::remove_dir_all(&release);
    std::fs::create_dir_all(&release).unwrap();
    let name = archive_name();
    for file in [format!("{name}.tar.gz"), format!("{name}.tar.gz.sha256")] {
        std::fs::copy(dist.join(&file), release.join(&file)).unwrap();
    }
    std::fs::write(release.join(format!("bankconf-v{version}-sources.txt")), format!("{sources}\n")).unwrap();
    let step = |sources: &str| {
        let (output, runner) = (temp_path("release-output"), temp_path("runner"));
        let _ = std::fs::remove_file(&output);
        std::fs::create_dir_all(&runner).unwrap();
        let ran = Command::new("bash")
            .arg(".github/action/release.sh")
            .env("VERSION", &version)
            .env("SOURCES", sources)
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("RUNNER_TEMP", &runner)
            .env("GITHUB_OUTPUT", &output)
            .env("BANKCONF_RELEASE_URL", format!("file://{}", release.display()))
            .output()
            .unwrap();
        assert!(ran.status.success(), "the step never fails the job: {}", text(&ran));
        (outputs(&output), text(&ran))
    };
    let (set, said) = step(&sources);
    assert!(set.contains(&("installed".into(), "true".into())), "{set:?}\n{said}");
    let bin = &set.iter().find(|(k, _)| k == "bin").unwrap().1;
    assert!(Command::new(bin).arg("--version").output().unwrap().status.success());
    let (set, said) = step("0000-other-sources");
    assert_eq!(set, [("installed".to_string(), "false".to_string())], "{said}");
    assert!(said.contains("not those of release"), "{said}");
    // A tampered archive is refused.
    std::fs::write(release.join(format!("{name}.tar.gz.sha256")), format!("{}  {name}.tar.gz\n", "0".repeat(64)))
        .unwrap();
    let (set, said) = step(&sources);
    assert_eq!(set, [("installed".to_string(), "false".to_string())], "{said}");
    // The action skips the build when the release step installed bankconf.
    let action = action();
    for name in ["Restore the bankconf build", "Install bankconf"] {
        assert_eq!(step_if(&action, name), "steps.release.outputs.installed != 'true'", "{name}");
    }
    assert!(position(&action, "Use the release binary") < position(&action, "Restore the bankconf build"));
}

fn step_if(action: &Value, name: &str) -> String {
    step(action, name)["if"].as_str().unwrap_or_default().to_string()
}

#[test]
fn the_release_workflow_and_the_dockerfile_parse() {
    let text = std::fs::read_to_string(".github/workflows/release.yml").unwrap();
    let workflow: Value = serde_norway::from_str(&text).expect("release.yml is YAML");
    // YAML reads the key `on` as is (serde_norway: YAML 1.2, no boolean `on`).
    let tags = &workflow["on"]["push"]["tags"];
    assert!(tags[0].as_str().is_some_and(|t| t.starts_with('v')), "{tags}");
    let matrix = workflow["jobs"]["build"]["strategy"]["matrix"]["include"].as_array().unwrap();
    let targets: Vec<&str> = matrix.iter().map(|m| m["target"].as_str().unwrap()).collect();
    for target in ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl", "aarch64-apple-darwin"] {
        assert!(targets.contains(&target), "{targets:?}");
    }
    let runs = |job: &str| -> String {
        let steps = workflow["jobs"][job]["steps"].as_array().unwrap();
        steps.iter().filter_map(|s| s["run"].as_str()).collect::<Vec<_>>().join("\n")
    };
    assert!(runs("build").contains("scripts/package.sh"), "the archive is package.sh's");
    the_release_publishes_all_or_nothing_on_current_runners(&workflow);
    assert!(runs("publish").contains("-sources.txt") && runs("publish").contains("prepare.sh"), "{}", runs("publish"));
    assert!(runs("publish").contains("SHA256SUMS"));
    for job in workflow["jobs"].as_object().unwrap().values() {
        for step in job["steps"].as_array().unwrap().iter().filter(|s| s.get("run").is_some()) {
            assert_eq!(step["shell"], "bash", "{step:?}");
        }
    }

    // The Dockerfile: every instruction known, stages named before use, the entrypoint `bankconf run`.
    let docker = std::fs::read_to_string("Dockerfile").unwrap();
    let joined = docker.replace("\\\n", " ");
    let instructions: Vec<(&str, &str)> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once(' ').unwrap_or((l, "")))
        .collect();
    const KNOWN: [&str; 11] =
        ["FROM", "RUN", "COPY", "ARG", "ENV", "WORKDIR", "USER", "ENTRYPOINT", "CMD", "LABEL", "EXPOSE"];
    let mut stages = Vec::new();
    for (instruction, rest) in &instructions {
        assert!(KNOWN.contains(instruction), "unknown instruction {instruction}");
        if *instruction == "FROM" {
            stages.extend(rest.split(" AS ").nth(1).map(str::trim));
        }
        if let Some(from) = rest.strip_prefix("--from=") {
            let stage = from.split_whitespace().next().unwrap();
            assert!(stages.contains(&stage), "COPY --from={stage}: no such stage");
        }
    }
    assert_eq!(instructions[0].0, "FROM");
    let entrypoint = instructions.iter().rev().find(|(i, _)| *i == "ENTRYPOINT").unwrap().1;
    let entrypoint: Vec<String> = serde_json::from_str(entrypoint).expect("ENTRYPOINT in exec form");
    assert_eq!(entrypoint, ["bankconf", "run"]);
    let browser = instructions.iter().find(|(i, r)| *i == "ENV" && r.starts_with("BANKCONF_BROWSER=")).unwrap().1;
    let wrapper = browser.trim_start_matches("BANKCONF_BROWSER=");
    assert!(docker.contains(&format!("> {wrapper}")), "the browser wrapper is written: {wrapper}");
}

/// GitHub's retired hosted images: a job on one never starts (macos-13 ended in December 2025).
const RETIRED_RUNNERS: [&str; 9] = [
    "macos-10.15",
    "macos-11",
    "macos-12",
    "macos-13",
    "ubuntu-16.04",
    "ubuntu-18.04",
    "ubuntu-20.04",
    "windows-2016",
    "windows-2019",
];

/// The images a release job may run on: current ones only.
const CURRENT_RUNNERS: [&str; 8] = [
    "ubuntu-latest",
    "ubuntu-24.04",
    "ubuntu-22.04",
    "ubuntu-24.04-arm",
    "macos-14",
    "macos-15",
    "macos-15-intel",
    "macos-latest",
];

/// Every job runs on a current image, and the release is all or nothing: `publish` waits for
/// every build leg (no leg may fail quietly), and the crate and the image only for `publish`.
fn the_release_publishes_all_or_nothing_on_current_runners(workflow: &Value) {
    let jobs = workflow["jobs"].as_object().unwrap();
    let build = &jobs["build"];
    let legs = build["strategy"]["matrix"]["include"].as_array().unwrap();
    let mut runners: Vec<String> = legs.iter().map(|l| l["os"].as_str().unwrap().to_string()).collect();
    assert_eq!(build["runs-on"], "${{ matrix.os }}");
    for (name, job) in jobs {
        if let Some(runner) = job["runs-on"].as_str().filter(|r| !r.contains("${{")) {
            runners.push(runner.to_string());
        }
        assert!(job.get("continue-on-error").is_none(), "{name}: a leg that may fail publishes a partial release");
    }
    for runner in &runners {
        assert!(!RETIRED_RUNNERS.contains(&runner.as_str()), "{runner}: a retired GitHub image");
        assert!(CURRENT_RUNNERS.contains(&runner.as_str()), "{runner}: not a known current GitHub image");
    }
    let targets: Vec<&str> = legs.iter().map(|l| l["target"].as_str().unwrap()).collect();
    assert!(targets.contains(&"x86_64-apple-darwin"), "the docs promise an Intel macOS archive: {targets:?}");
    let needs = |job: &str| -> Vec<String> {
        match &jobs[job]["needs"] {
            Value::String(one) => vec![one.clone()],
            Value::Array(all) => all.iter().filter_map(|n| n.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        }
    };
    // A matrix job is needed as a whole: `publish` starts only when every leg succeeded.
    assert_eq!(needs("publish"), ["build"]);
    assert_eq!(build["strategy"]["fail-fast"], false, "every leg runs to its end, so a failure names its leg");
    assert!(jobs["publish"].get("if").is_none(), "an `if` (always()) would publish without every leg");
    for job in ["image", "crate"] {
        assert_eq!(needs(job), ["publish"], "{job} comes after the release");
        assert!(jobs[job].get("if").is_none(), "{job}");
    }
    // The crate, which `cargo binstall bankconf` looks up, is published with a token secret.
    let steps = jobs["crate"]["steps"].as_array().unwrap();
    let publish = steps.iter().find(|s| s["run"].as_str().is_some_and(|r| r.contains("cargo publish"))).unwrap();
    assert_eq!(publish["env"]["CARGO_REGISTRY_TOKEN"], "${{ secrets.CARGO_REGISTRY_TOKEN }}");
}

/// Two runs of `scripts/package.sh` on the same binary give the same archive, byte for byte, at
/// different times and from different umasks; the binary in it is stripped.
#[test]
fn the_release_archive_is_reproducible_and_stripped() {
    let pack = |out: &str, umask: &str| {
        let out = temp_path(out);
        let _ = std::fs::remove_dir_all(&out);
        let script =
            format!("umask {umask} && bash scripts/package.sh --target {TARGET} --bin {BIN} --out {}", out.display());
        let output = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert!(output.status.success(), "{}", text(&output));
        std::fs::read(out.join(format!("{}.tar.gz", archive_name()))).unwrap()
    };
    let first = pack("dist-reproducible-1", "022");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = pack("dist-reproducible-2", "077");
    assert!(first == second, "two runs on the same binary gave different archives");
    // Stripped: no symbol table and no debug sections in the packed binary.
    let unpacked = temp_path("unpacked-stripped");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    let archive = temp_path("dist-reproducible-1").join(format!("{}.tar.gz", archive_name()));
    assert!(Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&unpacked).status().unwrap().success());
    let bin = unpacked.join(archive_name()).join("bankconf");
    let Ok(sections) = Command::new("readelf").arg("-S").arg(&bin).output() else {
        eprintln!("skipped the strip check: no readelf");
        return;
    };
    let sections = String::from_utf8_lossy(&sections.stdout).to_string();
    // (`.debug_gdb_scripts` is loaded with the program, not debug information: strip keeps it.)
    let debug = [".symtab", ".debug_info", ".debug_line", ".debug_str"];
    assert!(debug.iter().all(|s| !sections.contains(s)), "not stripped:\n{sections}");
    assert!(std::fs::metadata(&bin).unwrap().len() < std::fs::metadata(BIN).unwrap().len());
}

/// Until a release exists (no version tag in this checkout), the README promises no install
/// without Rust as if it were there: each such line says "from the first release on", and the
/// command that works today (`cargo install --locked --git …`) is given.
#[test]
fn the_readme_offers_only_installs_that_exist() {
    let tags = Command::new("git").args(["tag", "--list", "v[0-9]*"]).output().unwrap();
    if !String::from_utf8_lossy(&tags.stdout).trim().is_empty() {
        return;
    }
    let readme = std::fs::read_to_string("README.md").unwrap();
    let install = readme.split("## Install").nth(1).unwrap().split("\n## ").next().unwrap();
    let items: Vec<String> =
        install.split("\n- ").skip(1).map(|i| i.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    for item in &items {
        let promises = ["binstall", "release archive", "container image"].iter().any(|w| item.contains(w));
        assert!(!promises || item.contains("from the first release on"), "an install that does not exist yet: {item}");
    }
    let repo = toml::from_str::<toml::Value>(&std::fs::read_to_string("Cargo.toml").unwrap()).unwrap()["package"]
        ["repository"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(install.contains(&format!("cargo install --locked --git {repo} bankconf")), "{install}");
    let ci = std::fs::read_to_string("docs/ci.md").unwrap();
    let installing = ci.split("## Installing").nth(1).unwrap();
    assert!(installing.contains("No release is published yet"), "docs/ci.md reads as if a release existed");
}
