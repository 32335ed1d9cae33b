//! The printed reproductions, pasted, fail as the run did; the root cause before its symptoms; a
//! target behind a private CA; the rerun's name (split from cli.rs to keep files under 600 lines).

use super::*;

/// Each mutant of `bankconf serve --list-mutants`, with the cases that catch it and those whose
/// reads show it.
fn mutants_and_cases() -> Vec<(String, Vec<String>)> {
    let list = String::from_utf8(Command::new(BIN).args(["serve", "--list-mutants"]).output().unwrap().stdout).unwrap();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in list.lines() {
        let trimmed = line.trim_start();
        let ids = |after: &str| trimmed.strip_prefix(after).map(|rest| rest.split(", ").map(str::to_string));
        if !line.starts_with(' ') {
            out.push((line.split_whitespace().next().unwrap().to_string(), Vec::new()));
        } else if let (Some(ids), Some(last)) = (ids("caught by: ").or(ids("with the reads of: ")), out.last_mut()) {
            last.1.extend(ids);
        }
    }
    out
}

/// Runs the cases of `mutant` against a `bankconf serve --mutant` that outlives the run, and
/// pastes every `reproduce:` line the JSON report prints: a curl gets the status the evidence
/// recorded, and an answer the case's response rules (if it has some for that endpoint) fail
/// again; a `check-events` replay fails the same case again. A failure without a reproduction
/// names its evidence as context instead.
fn reproductions_fail_when_pasted(mutant: &str, cases: &[String]) {
    let server = serve(&["--mutant", mutant]);
    let (json, har) = (temp_path(&format!("paste-{mutant}.json")), temp_path(&format!("paste-{mutant}.har")));
    let mut args = external(&server.url, KEY, SECOND_KEY);
    args.extend(["--report-json", json.to_str().unwrap(), "--report-har", har.to_str().unwrap()]);
    args.extend(cases.iter().map(String::as_str));
    // Exit 1; 0 for a mutant caught at a level that does not gate; 2 for one the setup stops.
    let output = run(&args);
    assert!(matches!(output.status.code(), Some(0..=3)), "{mutant}: {}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    let recorded = |id: &Value| {
        let entry = har["log"]["entries"].as_array()?.iter().find(|e| e["_id"] == *id)?;
        serde_json::from_str::<Value>(entry["response"]["content"]["text"].as_str()?).ok()
    };
    let sh = |script: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BANKCONF_API_KEY", KEY)
            .env("BANKCONF_SECOND_API_KEY", SECOND_KEY)
            .output()
            .unwrap()
    };
    for case in report["cases"].as_array().unwrap().iter().filter(|c| c["outcome"] == "failed") {
        let id = case["id"].as_str().unwrap();
        let Some(reproduction) = case["reproduction"].as_str() else {
            let evidence = &case["evidence"];
            let named =
                evidence["requests"].as_array().unwrap().len() + evidence["deliveries"].as_array().unwrap().len();
            // A browser's finding, or an absence (an event, a chain's start, that never came for
            // its connection), may rest on nothing the files hold.
            let absence = id.starts_with("widget.") || id.starts_with("events.");
            assert!(named > 0 || absence, "{mutant}: {id} has neither reproduction nor evidence\n{case:#}");
            continue;
        };
        if reproduction.starts_with("curl ") {
            let cited = &case["evidence"]["requests"][0];
            let pasted = sh(reproduction);
            let answer = String::from_utf8_lossy(&pasted.stdout).replace("\r\n", "\n");
            let status: u64 = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            assert_eq!(status, cited["status"].as_u64().unwrap(), "{mutant}: {id}: {reproduction}\n{answer}");
            // The answer pasted is judged again by the case's response rules, when it has some for
            // that endpoint: it must break one of them again (its state may have moved on since).
            let method = reproduction.split(" -X ").nth(1).and_then(|r| r.split(' ').next()).unwrap();
            let url = reproduction.rsplit('\'').nth(1).unwrap();
            let path = url.split("/v1/").nth(1).unwrap_or_default().split('?').next().unwrap();
            let segments: Vec<String> = ["v1"].into_iter().chain(path.split('/')).map(str::to_string).collect();
            let limit = url.split("limit=").nth(1).and_then(|l| l.split('&').next()?.parse().ok());
            let body = answer.split_once("\n\n").and_then(|(_, b)| serde_json::from_str::<Value>(b).ok());
            let judged =
                body.as_ref().and_then(|b| bankconf::internal::checks::judge_one(id, method, &segments, limit, b));
            if let (Some(problems), Some(body)) = (&judged, &body) {
                // Unless the data changed since the read (a later update): then the answer judged
                // is the one the HAR holds, and it failed.
                let moved_on = recorded(&cited["har_id"]).is_some_and(|then| then != *body);
                assert!(
                    !problems.is_empty() || moved_on,
                    "{mutant}: {id}: the pasted curl's answer passes\n{reproduction}\n{answer}"
                );
                continue;
            }
            // No response rule of the case judges that endpoint: the answer must show the
            // finding by itself, by its status (which the finding names as what came) or by a
            // secret it holds. A valid answer printed as a reproduction (a creation before
            // events went astray, a last page after a has_more) is evidence, not this.
            let message = case["message"].as_str().unwrap_or_default();
            let named = [format!("got {status}"), format!("got status {status}"), format!("answered {status}")];
            let by_status = named.iter().any(|w| message.contains(w.as_str()));
            // Or by the value it names as received (`got "text/plain"`), in the answer's headers.
            let received = message.split("got \"").nth(1).and_then(|r| r.split('"').next()).filter(|r| !r.is_empty());
            let by_value = received.is_some_and(|r| answer.contains(r));
            // A secret shows plain or hex-encoded (a widget token made of the key's bytes).
            let hex = |text: &str| text.bytes().map(|b| format!("{b:02x}")).collect::<String>();
            let by_secret = [KEY, SECOND_KEY].iter().any(|k| {
                let tail = &k[k.len() - 8..];
                answer.contains(tail) || answer.to_ascii_lowercase().contains(&hex(tail))
            });
            assert!(
                by_status || by_value || by_secret,
                "{mutant}: {id}: the pasted answer shows nothing by itself (evidence, not a reproduction)\n\
                 {message}\n{reproduction}\n{answer}"
            );
        } else {
            // Pasted as printed, in the same directory: it names the binary as it was run.
            assert!(reproduction.ends_with("bankconf check-events -"), "{mutant}: {id}: {reproduction}");
            let pasted = sh(reproduction);
            let out = text(&pasted);
            assert_eq!(pasted.status.code(), Some(1), "{mutant}: {id}: {reproduction}\n{out}");
            let line = out.lines().find(|l| l.contains(id)).unwrap_or_default();
            assert!(line.contains("FAIL"), "{mutant}: {id} fails again offline:\n{out}");
        }
    }
}

/// A few mutants in a plain `cargo test`, one per kind of finding: a response rule, a delivery
/// rule, the state model, and the findings whose one request is evidence but shows nothing
/// alone (a page after a `has_more`, a read against another after an event, a creation whose
/// events went to the wrong address): those print no curl.
#[test]
fn printed_reproductions_fail_when_pasted() {
    let all = mutants_and_cases();
    let kinds = [
        "transaction-prefix",
        "event-prefix",
        "account-drops-after-update",
        "has-more-true-at-end",
        "account-balance-stale",
        "events-to-first-address",
    ];
    for name in kinds {
        let (mutant, cases) = all.iter().find(|(m, _)| m == name).unwrap_or_else(|| panic!("no mutant {name}"));
        reproductions_fail_when_pasted(mutant, cases);
    }
}

/// Every mutant (the full matrix, `.ci/run`), two at a time.
#[test]
#[ignore = "every mutant: run by .ci/run"]
fn printed_reproductions_of_every_mutant_fail_when_pasted() {
    let all = mutants_and_cases();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((mutant, cases)) = all.get(at) else { break };
                reproductions_fail_when_pasted(mutant, cases);
            });
        }
    });
}

/// One observable cause under many failures is said once, before them, with the cases it may
/// explain: every JSON body behind a byte-order mark, every connection.created event naming
/// one connection.
#[test]
fn a_root_cause_comes_before_its_symptoms() {
    for (mutant, words) in
        [("json-bom", "byte-order mark"), ("wrong-connection", "rest on which connection an event names")]
    {
        if !String::from_utf8_lossy(&Command::new(BIN).args(["serve", "--list-mutants"]).output().unwrap().stdout)
            .contains(mutant)
        {
            continue;
        }
        let json = temp_path(&format!("root-{mutant}.json"));
        let output = run(&["--sandbox-mutant", mutant, "--report-json", json.to_str().unwrap()]);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(1), "{mutant}: {out}");
        let closing = out.split("to act on, gating first").next().unwrap_or_default();
        // Said first: the fact of the run comes before the roots that are cases (issue 74).
        let root = closing.find("root cause, first:").unwrap_or_else(|| panic!("{mutant}: no root cause:\n{out}"));
        assert!(closing[root..].split_whitespace().collect::<Vec<_>>().join(" ").contains(words), "{mutant}: {out}");
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let causes = report["root_causes"].as_array().unwrap();
        // The fact first (a case of its own where a case fails on it, as the events naming
        // another connection), then every other failed case that is no consequence.
        let said = causes[0]["cause"].as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(said.contains(words), "{mutant}: {causes:#?}");
        assert!(causes[0]["cases"].as_array().unwrap().len() >= 2, "{mutant}: {causes:#?}");
    }
}

/// A target behind a private CA: without `--ca-cert` the run stops at its preflight (exit 2)
/// naming `--ca-cert`; with it the run passes, the browser loading the widget too. `--header`
/// values reach the server on every request and appear in no output: terminal, reports, HAR,
/// rerun lines (`--header "Name: $BANKCONF_HEADER_1"`). HTTPS_PROXY and NO_PROXY are honoured.
/// `--insecure` passes too, and says so.
#[test]
fn a_target_behind_a_private_ca_passes_with_ca_cert_and_headers_stay_secret() {
    let dir = temp_path("private-ca");
    let Some((ca, cert, key)) = private_ca(&dir) else { return };
    let server = serve(&[]);
    let front = tls_front(&server.url, &cert, &key);
    // The example driver reaches the sandbox with curl, and inherits the run's trust: with
    // --ca-cert, its CURL_CA_BUNDLE (and the other trust variables) name the CA.
    let args = external(&front.url, KEY, SECOND_KEY);
    let mut cases = vec!["create.", "auth.", "widget.served"];
    if bankconf::internal::browser::find(None).is_some() {
        cases.push("widget.script-runs");
    }

    let output = run(&[&args[..], &["create.status-created"]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(out.contains("--ca-cert") && out.contains("certificate"), "the preflight names --ca-cert:\n{out}");

    const SECRET: &str = "gw-token-7f3a9c1e5b";
    let header = format!("X-Gateway-Token: {SECRET}");
    let files: Vec<(&str, std::path::PathBuf)> = ["json", "md", "junit", "har"]
        .into_iter()
        .map(|kind| (kind, temp_path(&format!("private-ca.{kind}"))))
        .collect();
    let paths: Vec<String> = files.iter().map(|(_, p)| p.display().to_string()).collect();
    let ca_arg = ca.display().to_string();
    let reports =
        ["--report-json", &paths[0], "--report-md", &paths[1], "--report-junit", &paths[2], "--report-har", &paths[3]];
    let flags = ["--ca-cert", &ca_arg, "--header", &header, "--header", "X-Tenant: acme-tenant-0042"];
    let output = run(&[&args[..], &flags[..], &reports[..], &cases[..]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    let sent = String::from_utf8_lossy(&front.seen.lock().unwrap()).to_lowercase();
    let requests = sent.matches("authorization:").count();
    assert!(requests > 5, "requests went through the TLS front: {requests}");
    // Every request of the harness (the driver's curl and the browser name themselves) has it.
    let heads: Vec<&str> = sent.split("\r\n\r\n").filter(|h| h.contains("\r\nhost:")).collect();
    let harness: Vec<&&str> = heads.iter().filter(|h| !h.contains("user-agent:")).collect();
    assert!(harness.len() > 5 && harness.iter().all(|h| h.contains(&header.to_lowercase())), "{harness:#?}");
    assert!(sent.contains("x-tenant: acme-tenant-0042"));
    let mut everything = out.clone();
    for (kind, path) in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(!text.contains(SECRET) && !text.contains("acme-tenant-0042"), "{kind} shows a header value");
        everything += &text;
    }
    assert!(!everything.contains(SECRET) && !everything.contains(&SECRET[..9]), "a header value was shown:\n{out}");
    // The HAR lists the gateway header each request carried, its value redacted.
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&files[3].1).unwrap()).unwrap();
    let listed = har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["url"].as_str().is_some_and(|u| u.starts_with(&front.url)))
        .all(|e| {
            e["request"]["headers"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["name"] == "X-Gateway-Token" && h["value"] == "[redacted]"))
        });
    assert!(listed, "the HAR omits the --header");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&files[0].1).unwrap()).unwrap();
    let rerun = report["cases"][0]["rerun"].as_str().unwrap();
    assert!(
        rerun.contains("--header \"X-Gateway-Token: $BANKCONF_HEADER_1\"") && rerun.contains("--ca-cert "),
        "{rerun}"
    );

    // HTTPS_PROXY is honoured (a proxy where nothing listens: the target is unreachable), and
    // NO_PROXY too.
    let proxied = |no_proxy: &str| {
        Command::new(BIN)
            .arg("run")
            .args([&args[..], &["--ca-cert", &ca_arg, "create.status-created"]].concat())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", no_proxy)
            .output()
            .unwrap()
    };
    let output = proxied("");
    assert_eq!(output.status.code(), Some(2), "through the proxy: {}", text(&output));
    let output = proxied("127.0.0.1,localhost");
    assert_eq!(output.status.code(), Some(0), "NO_PROXY: {}", text(&output));

    // --insecure gives the driver nothing to trust: it is told of the CA its own way.
    let driver = format!("CURL_CA_BUNDLE={} ./examples/sandbox-driver.sh", ca.display());
    let mut insecure = args.clone();
    let at = insecure.iter().position(|a| *a == "--driver").unwrap();
    insecure[at + 1] = &driver;
    let page = dir.join("insecure.html");
    let html_flags = ["--insecure", "--report-json", &paths[0], "--report-html", page.to_str().unwrap()];
    let output = run(&[&insecure[..], &html_flags, &["create.status-created"]].concat());
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("--insecure"), "the terminal says verification was off:\n{out}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&files[0].1).unwrap()).unwrap();
    assert!(report["notes"].to_string().contains("--insecure"), "{}", report["notes"]);
    // The HTML page says it in its banner, beside the verdict.
    let html = std::fs::read_to_string(&page).unwrap();
    let banner = &html[..html.find("</header>").unwrap()];
    assert!(banner.contains("--insecure"), "{banner}");
}

/// Installed (`bankconf` on PATH is this binary, here through a symlink), the rerun says
/// `bankconf run …`, and pasted into a fresh shell it fails the same case again.
#[test]
fn an_installed_bankconf_is_named_bankconf_in_the_rerun() {
    let bin = temp_path("installed");
    std::fs::create_dir_all(&bin).unwrap();
    let _ = std::fs::remove_file(bin.join("bankconf"));
    std::os::unix::fs::symlink(BIN, bin.join("bankconf")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let report = temp_path("installed.json");
    let run = |command: &str| {
        Command::new("sh").args(["-c", command]).env_clear().env("PATH", &path).output().expect("run sh")
    };
    let command = format!(
        "bankconf run --sandbox-mutant transaction-prefix --report-json {} transactions.id-prefix",
        report.display()
    );
    let output = run(&command);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rerun = report["cases"][0]["rerun"].as_str().unwrap();
    assert!(rerun.starts_with("bankconf run --sandbox-mutant transaction-prefix --seed "), "{rerun}");
    let output = run(rerun);
    assert_eq!(output.status.code(), Some(1), "{rerun}: {}", text(&output));
    assert!(text(&output).contains("FAIL") && text(&output).contains("transactions.id-prefix"), "{}", text(&output));
}
