//! Runs without a browser, exclusions, --quiet, settings files and empty variables (split from
//! cli.rs to keep files under 600 lines).

use super::*;

/// The README's sandbox command on a machine without a browser ends INCOMPLETE (exit 3) with the
/// way to get one on the line before the verdict; `--skip-browser` leaves the browser cases
/// out on purpose (still exit 3, named once), and an expectations file that expects them
/// ignored makes it exit 0.
#[test]
fn without_a_browser_the_run_says_how_to_get_one_and_skip_browser_is_on_purpose() {
    let no_browser = |args: &[&str]| {
        // No PATH: no browser is found (the embedded sandbox needs no other program).
        Command::new(BIN).arg("run").args(args).env_clear().output().expect("run bankconf")
    };
    let output = no_browser(&["widget."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(3), "{out}");
    let lines: Vec<&str> = out.trim_end().lines().collect();
    assert!(lines[lines.len() - 1].starts_with("INCOMPLETE"), "{out}");
    assert!(lines[lines.len() - 2].contains("apt-get install chromium-headless-shell"), "{out}");
    let output = run(&["--skip-browser", "widget."]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(3), "{out}");
    // The verdict's block names the cases left out once, together.
    let block: Vec<&str> = out.lines().filter(|l| l.starts_with("  - left out on purpose (--skip-browser)")).collect();
    assert!(block.len() == 1 && block[0].contains("widget.script-runs, widget.global-open"), "{out}");
    let expect = temp_path("skip-browser.toml");
    let browser_cases = bankconf::internal::catalogue::all()
        .iter()
        .filter(|c| c.needs.contains(&bankconf::Need::Browser))
        .map(|c| {
            format!("[[expect]]\ncase = \"{}\"\noutcome = \"ignored\"\nreason = \"no browser in this CI\"\n", c.id)
        })
        .collect::<String>();
    std::fs::write(&expect, browser_cases).unwrap();
    let output = run(&["--skip-browser", "--expect", expect.to_str().unwrap(), "widget."]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

/// An exclusion is part of the verdict (issue 76): `--exclude isolation` leaves the isolation
/// cases out as `--skip-browser` leaves the browser cases (INCOMPLETE, exit 3, never a bare
/// PASSED), every report names it, and an expectations file that expects them ignored makes the
/// gate pass again, saying so. A narrowing filter (a rerun) keeps its exit code, the cases it
/// did not choose counted.
#[test]
fn an_exclusion_ends_as_a_skipped_browser_does_and_every_report_names_it() {
    let (json, md) = (temp_path("excluded.json"), temp_path("excluded.md"));
    let args = ["auth.", "isolation.", "--exclude", "isolation", "--report-json", json.to_str().unwrap()];
    let output = run(&[&args[..], &["--report-md", md.to_str().unwrap()]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(3), "{out}");
    let last = String::from_utf8_lossy(&output.stdout).trim_end().lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("INCOMPLETE: ") && last.contains("left out by --exclude isolation ("), "{last}");
    assert!(out.contains("  - left out on purpose (--exclude isolation): "), "how to complete the run: {out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let left_out = &report["selection"]["left_out"][0];
    assert_eq!(left_out["by"], "--exclude isolation", "{report:#}");
    assert!(left_out["gating"].as_array().is_some_and(|g| !g.is_empty()), "{report:#}");
    assert_eq!(report["selection"]["whole"], false);
    let isolation = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == "isolation.account").unwrap();
    assert_eq!(isolation["outcome"], "ignored", "{isolation:#}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("**Not the whole catalogue:**") && md.contains("left out by --exclude isolation"), "{md}");
    // Expected ignored, the exclusion passes the gate, and the line still says what was left out.
    let expect = temp_path("excluded.toml");
    let lines: String = bankconf::internal::catalogue::all()
        .iter()
        .filter(|c| c.id.starts_with("isolation."))
        .map(|c| {
            format!("[[expect]]\ncase = \"{}\"\noutcome = \"ignored\"\nreason = \"one client in staging\"\n", c.id)
        })
        .collect();
    std::fs::write(&expect, lines).unwrap();
    let output = run(&["auth.", "isolation.", "--exclude", "isolation", "--expect", expect.to_str().unwrap()]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("PASSED with ") && out.contains("expected in "), "{out}");
    // A rerun of one case: its own exit code, the others counted as not selected.
    let output = run(&["auth.missing-key"]);
    let last = String::from_utf8_lossy(&output.stdout).trim_end().lines().last().unwrap_or_default().to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let others = catalogue_len() - 1;
    assert!(last.starts_with("PASSED (") && last.ends_with(&format!("; {others} cases not selected)")), "{last}");
}

/// `-q` prints the failed cases and the closing block alone (a passing run: its verdict line);
/// `--report-json -` writes the report to standard output and the terminal's lines to standard
/// error; two reports cannot both go there.
#[test]
fn quiet_prints_failures_and_the_closing_block_and_a_report_can_go_to_standard_output() {
    let output = run(&["-q", "--sandbox-mutant", "transaction-prefix", "transactions."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    for noise in ["PASS ", "bankconf: ", "note: ", "latency of", "level  "] {
        assert!(!out.contains(noise), "{noise:?} in a quiet run:\n{out}");
    }
    assert!(out.starts_with("FAIL  transactions."), "{out}");
    assert!(out.contains("to act on, gating first:") && out.contains("rerun: "), "{out}");
    assert!(out.trim_end().lines().last().unwrap_or_default().starts_with("FAILED: "), "{out}");
    let output = run(&["--quiet", "auth."]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(out.trim().lines().count() == 1 && out.starts_with("PASSED ("), "{out}");
    let output = run(&["auth.", "--report-json", "-"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    assert_eq!(report["verdict"], "PASSED");
    assert!(String::from_utf8_lossy(&output.stderr).contains("PASSED ("), "the terminal's lines on stderr");
    assert!(!std::path::Path::new("-").exists(), "a file named - was written");
    let output = run(&["auth.", "--report-json", "-", "--report-md", "-"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("two reports cannot both go to standard output"), "{}", text(&output));
}

/// `bankconf.toml` (found in the working directory, or `--config FILE`) and its profiles set
/// `run`'s options; variables and flags override them; `--print-config` says where each setting
/// came from and never shows a key; keys stay out of the file (it names their variables).
#[test]
fn a_settings_file_and_its_profiles_set_run_options_and_flags_and_variables_override_them() {
    let dir = temp_path("settings");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bankconf.toml");
    std::fs::write(
        &file,
        "gate = [\"must\"]\ncase = [\"auth.\"]\nexclude = [\"auth.widget-token\"]\n\n\
         [profile.ci]\nquiet = true\nreport-json = \"ci.json\"\n\n\
         [profile.staging]\nbase-url = \"http://127.0.0.1:9\"\napi-key-env = \"STAGING_KEY\"\n",
    )
    .unwrap();
    let in_dir = |args: &[&str], env: &[(&str, &str)]| {
        Command::new(BIN)
            .arg("run")
            .args(args)
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().copied())
            .output()
            .expect("run bankconf")
    };
    // Found in the working directory: the profile's quiet run of the file's cases, gated by
    // `must` alone (the security case excluded does not gate, and is still named).
    let output = in_dir(&["--profile", "ci"], &[]);
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(out.trim().lines().count() <= 3 && out.contains("left out by --exclude auth.widget-token"), "{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("ci.json")).unwrap()).unwrap();
    assert!(report["cases"].as_array().unwrap().iter().all(|c| c["id"].as_str().unwrap().starts_with("auth.")));
    // Where each setting came from: file, profile, variable, flag; the key never shown.
    const SECRET: &str = "bankconf_test_staging0000000000000001";
    let env = [("STAGING_KEY", SECRET), ("BANKCONF_CASES", "9")];
    let output = in_dir(&["--profile", "staging", "--print-config", "--gate", "must,security"], &env);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains(SECRET), "a key was printed: {out}");
    let line = |key: &str| out.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap_or_default().to_string();
    assert!(line("base-url").ends_with("# profile staging (bankconf.toml)"), "{out}");
    assert!(line("api-key").contains("[redacted]") && line("api-key").contains("STAGING_KEY"), "{out}");
    assert!(line("case").ends_with("# file bankconf.toml"), "{out}");
    assert!(line("cases").ends_with("# env BANKCONF_CASES"), "{out}");
    assert!(line("gate").ends_with("# flag"), "{out}");
    assert!(line("quiet").ends_with("# default"), "{out}");
    // Mistakes stop the run before it starts (exit 2), naming the file.
    let bad = dir.join("bad.toml");
    for (text_of_file, said) in [
        ("api-key = \"k\"\n", "keys stay out of the file"),
        ("base-ulr = \"http://x\"\n", "did you mean \"base-url\""),
        ("driver = [\"a\", \"b\"]\n", "one value"),
        ("skip-browser = \"yes\"\n", "true or false"),
        ("api-key-env = \"NOT_SET_ANYWHERE\"\n", "NOT_SET_ANYWHERE, which is not set"),
    ] {
        std::fs::write(&bad, text_of_file).unwrap();
        let output = run(&["--config", bad.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{text_of_file}: {}", text(&output));
        assert!(text(&output).contains(said), "{text_of_file}: {}", text(&output));
    }
    let output = in_dir(&["--profile", "nightly"], &[]);
    assert!(text(&output).contains("no profile \"nightly\" (its profiles: ci, staging)"), "{}", text(&output));
    let output = run(&["--profile", "ci"]);
    assert_eq!(output.status.code(), Some(2), "no file, a profile: {}", text(&output));
}

/// An empty `BANKCONF_*` variable is unset, for every variable `run --help` names: CI templates
/// write `BANKCONF_BROWSER=` for "none".
#[test]
fn every_empty_variable_is_unset() {
    let help = String::from_utf8_lossy(&Command::new(BIN).args(["run", "--help"]).output().unwrap().stdout).to_string();
    let names: Vec<&str> =
        help.split("[env: ").skip(1).filter_map(|rest| rest.split(['=', ']']).next()).collect::<Vec<_>>();
    assert!(names.len() > 20 && names.contains(&"BANKCONF_BROWSER"), "{names:?}");
    let mut command = Command::new(BIN);
    command.args(["run", "--list"]);
    for name in &names {
        command.env(name, "");
    }
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), catalogue_len(), "{}", text(&output));
}

// ------------------------------------------- every printed reproduction fails when pasted
