//! Markdown sections, the three reports of one run, check-events, list, the OpenAPI document and
//! how failures read everywhere (split from outputs.rs to keep files under 600 lines).

use super::*;

#[test]
fn markdown_has_verdict_counts_failures_and_every_section() {
    let md = markdown::render(&synthetic());
    assert!(md.starts_with("## bankconf run: FAILED\n"), "{md}");
    assert!(md.contains("| must | 1 | 1 | 1 | 0 | yes |"), "{md}");
    assert!(md.contains("| advisory | 0 | 1 | 0 | 0 | no |"), "{md}");
    assert!(md.contains("#### `transactions.walk-exactly-once` (§4.3, must, gating)"));
    assert!(md.contains("#### `create.id-shape` (§2, advisory, not gating)"));
    assert!(md.contains("curl -sS -i -X GET -H \"Authorization: Bearer $BANKCONF_API_KEY\""), "{md}");
    assert!(md.contains("bankconf run --seed 42 transactions.walk-exactly-once"));
    assert!(md.contains("| `isolation.accounts` | §5 | ignored | needs --second-api-key |"), "{md}");
    assert!(md.contains("| `events.connected-announced` | §3.1 | error | the driver exited 127 |"), "{md}");
    for (section, title) in SECTIONS {
        assert!(md.contains(&format!("| {section} | {title} |")), "no coverage row for {section}");
    }
    assert!(
        md.contains("| §4.3 | Get account transactions | `transactions.walk-exactly-once` FAIL | checked |"),
        "{md}"
    );
    assert!(md.contains("| §9 | Versioning | — | **no case checks this section** |"), "{md}");
    assert!(md.contains("No case of the catalogue checks: "), "{md}");
}

// ---------------------------------------------------------------- end to end

#[test]
fn a_run_writes_all_three_reports() {
    let (output, w) = with_reports("run", &["run", "create.", "widget."]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(!out.contains('\u{1b}') && !out.lines().any(|l| l.starts_with('[')), "no progress when not a TTY:\n{out}");
    assert_valid_report(&w.json);
    assert_eq!(w.json["command"], "run");
    let ids: Vec<&str> = w.json["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|id| id.starts_with("create.") || id.starts_with("widget.")));
    assert_eq!(w.junit.find("testcase").len(), ids.len());
    assert_eq!(w.junit.find("failure").len(), 0, "{}", w.junit_text);
    assert!(w.markdown.starts_with("## bankconf run: PASSED"), "{}", w.markdown);
    assert!(
        w.markdown
            .contains("| §2.1 | Connection | `create.status-created` PASS, `create.id-prefixes` PASS | checked |"),
        "{}",
        w.markdown
    );
}

#[test]
fn check_events_passes_a_good_capture() {
    let (output, w) = with_reports("good", &["check-events", &fixture("good.jsonl")]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_valid_report(&w.json);
    assert_eq!(w.json["command"], "check-events");
    assert_eq!(w.json["seed"], Value::Null);
    assert_eq!(w.json["summary"]["failed"], 0, "{:#}", w.json);
    assert!(w.json["notes"][0].as_str().unwrap().contains("11 deliveries (10 unique), 2 connections, 1 client"));
}

/// Each bad capture is flagged by the cases that own the broken rule, and only by them.
#[test]
fn check_events_flags_each_fault() {
    let expectations: [(&str, &[&str], &str); 4] = [
        ("broken-chain.jsonl", &["events.previous-status-chain"], "connection.connected(prev=mfa_required)"),
        ("envelope-disagrees.jsonl", &["events.schema", "events.envelope-agrees"], "data.eventId is"),
        ("no-milliseconds.jsonl", &["events.schema"], "/created_at"),
        ("upper-previous-status.jsonl", &["events.schema", "events.previous-status-chain"], "\"CREATED\""),
    ];
    for (file, failing, evidence) in expectations {
        let (output, w) = with_reports(file, &["check-events", &fixture(file)]);
        assert_eq!(output.status.code(), Some(1), "{file}: {}", text(&output));
        assert_valid_report(&w.json);
        let failed: Vec<&str> = w.json["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["outcome"] == "failed")
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(failed, failing, "{file}");
        assert!(text(&output).contains(evidence), "{file}: {}", text(&output));
        let failures = w.junit.find("failure");
        assert_eq!(failures.len(), failing.len(), "{file}");
        // The binary by its path (bankconf on PATH is not this build), pasteable as is.
        assert!(
            failures[0].text.contains(&format!("/bankconf check-events {}", fixture(file))),
            "{}",
            failures[0].text
        );
        assert!(w.markdown.starts_with("## bankconf check-events: FAILED"));
        // Wrapped text now, not a code block: Markdown's escapes (`mfa\_required`) aside.
        assert!(w.markdown.replace('\\', "").contains(evidence), "{file}: {}", w.markdown);
    }
}

#[test]
fn check_events_on_a_partial_capture_of_two_clients_notes_without_failing() {
    let (output, w) = with_reports("partial", &["check-events", &fixture("partial-two-clients.json")]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let case = |id: &str| w.json["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(case("capture.created-present")["outcome"], "failed");
    assert_eq!(case("capture.created-present")["gating"], false);
    assert_eq!(case("events.previous-status-chain")["outcome"], "passed");
    assert_eq!(case("capture.client-id-per-connection")["outcome"], "passed");
    assert!(w.json["notes"][0].as_str().unwrap().contains("2 clients"));
    assert!(w.json["notes"][1].as_str().unwrap().contains("chains not checked for 1 connection"));
    assert!(w.junit.find("failure").is_empty(), "advisory notes do not turn CI red");
}

#[test]
fn check_events_cannot_start_on_an_unreadable_or_empty_capture() {
    let output = bankconf(&["check-events", "/no/such/capture.jsonl"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let empty = temp_path("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    assert_eq!(bankconf(&["check-events", empty.to_str().unwrap()]).status.code(), Some(2));
    let broken = temp_path("broken.json");
    std::fs::write(&broken, "[{\"id\": 1},").unwrap();
    assert_eq!(bankconf(&["check-events", broken.to_str().unwrap()]).status.code(), Some(2));
}

#[test]
fn check_events_judges_a_non_json_line_as_a_schema_failure() {
    let capture = temp_path("garbage.jsonl");
    let good = std::fs::read_to_string(fixture("good.jsonl")).unwrap();
    std::fs::write(&capture, format!("{good}this is not JSON\n")).unwrap();
    let output = bankconf(&["check-events", capture.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output).contains("body is not JSON"), "{}", text(&output));
}

// ---------------------------------------------------------------- run --list selection

#[test]
fn list_selects_by_section_level_and_id() {
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["run", "--list"];
        all.extend(args);
        let output = bankconf(&all);
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let of = |keep: &dyn Fn(&bankconf::Case) -> bool| -> Vec<String> {
        catalogue::all().iter().filter(|c| !c.offline && keep(c)).map(|c| c.id.clone()).collect()
    };
    let by_section = ids(&["--section", "4.3"]);
    assert!(!by_section.is_empty());
    assert_eq!(by_section, of(&|c| c.section == "§4.3"));
    assert_eq!(ids(&["--section", "§6"]), of(&|c| c.section.starts_with("§6")));
    assert_eq!(ids(&["--level", "advisory"]), of(&|c| c.level == Level::Advisory));
    assert_eq!(
        ids(&["events.", "create.status-created"]),
        of(&|c| c.id.starts_with("events.") || c.id == "create.status-created")
    );
    assert_eq!(ids(&["--level", "must", "--section", "6.2"]), of(&|c| c.level == Level::Must && c.section == "§6.2"));
}

// ---------------------------------------------------------------- openapi

/// No OpenAPI 3.1 meta-schema is available offline, so this is a structural check: the version,
/// info, paths and webhooks, every `$ref` resolving inside the document, and every component
/// schema compiling (draft 2020-12) and judging sample payloads like the schema it came from.
#[test]
fn openapi_is_a_structurally_valid_3_1_document() {
    let output = bankconf(&["openapi"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.starts_with(b"{\n  \"openapi\": \"3.1."), "openapi comes first");
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/v1/connections",
        "/v1/connections/{connectionId}/accounts",
        "/v1/accounts/{accountId}/transactions",
        "/v1/accounts/{accountId}",
    ] {
        assert!(paths.contains_key(p), "missing path {p}");
    }
    for (path, item) in paths {
        assert!(path.starts_with("/v1/"), "{path}");
        for (method, op) in item.as_object().unwrap() {
            assert!(["get", "post"].contains(&method.as_str()), "{path} {method}");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.contains_key("default"), "{path} {method}: errors are `default`");
            for code in responses.keys() {
                assert!(
                    ["200", "2XX", "default"].contains(&code.as_str()),
                    "{path} {method}: status {code} is not shown by the spec"
                );
            }
            // Path templates and path parameters agree.
            for param in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
                assert!(path.contains(&format!("{{{}}}", param["name"].as_str().unwrap())));
                assert_eq!(param["required"], true);
            }
        }
    }
    assert_eq!(doc["components"]["securitySchemes"]["bearerApiKey"]["scheme"], "bearer");
    assert_eq!(doc["security"][0]["bearerApiKey"], serde_json::json!([]));
    let webhooks = doc["webhooks"].as_object().unwrap();
    assert_eq!(webhooks.len(), 10, "the ten event types of §6");
    assert!(webhooks.contains_key("connection.created") && webhooks.contains_key("transaction.deleted"));

    // Every $ref resolves within the document.
    fn refs(node: &Value, out: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 10);
    for r in &all {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("{r} leaves the document"));
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    assert!(!serde_json::to_string(&doc).unwrap().contains("\"$id\""), "an $id would rebase the $refs");

    // Every component compiles with draft 2020-12, resolving its refs in the document, and
    // judges samples as the embedded schema does.
    let validator = |name: &str| {
        let root = serde_json::json!({"$ref": format!("#/components/schemas/{name}"), "components": doc["components"]});
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("component {name} does not compile: {e}"))
    };
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        validator(name);
    }
    let events = validator("WebhookEvent");
    for file in ["good.jsonl", "no-milliseconds.jsonl", "upper-previous-status.jsonl", "envelope-disagrees.jsonl"] {
        for line in std::fs::read_to_string(fixture(file)).unwrap().lines() {
            let body: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                events.is_valid(&body),
                schemas::validate(Schema::WebhookEvent, &body).is_ok(),
                "{file}: the component and webhook-event.json disagree on {line}"
            );
        }
    }
}

/// A run cut short: INCOMPLETE naming the cause, exit 130/143 for a signal and 3 for the
/// deadline; a failure judged before the cut still makes it FAILED (the exit code stays the
/// signal's); the JSON report says why.
#[test]
fn a_run_cut_short_is_incomplete_and_names_its_cause() {
    use bankconf::internal::cancel::{Cause, Signal};
    let case = |id: &str| catalogue::find(id).unwrap();
    let cut = |cause: Cause| {
        let outcome = Outcome::Ignored { cause: cause.ignore_cause(), reason: cause.unfinished() };
        CaseResult::new(case("isolation.accounts"), outcome, Duration::from_millis(12))
    };
    let passed = CaseResult::new(case("create.status-created"), Outcome::Passed, Duration::ZERO);
    let stopped = |cause: Cause| {
        let mut report = synthetic();
        (report.results, report.stopped) = (vec![passed.clone(), cut(cause)], Some(cause));
        report
    };
    let deadline = stopped(Cause::Deadline(Duration::from_secs(300)));
    assert_eq!((deadline.verdict(), deadline.exit_code()), ("INCOMPLETE", 3));
    assert!(
        deadline.decided().to_string().starts_with("the run's deadline (--deadline 300 s) passed"),
        "{}",
        deadline.decided()
    );
    let json = bankconf::internal::report::json::render(&deadline);
    assert_eq!(json["stopped"]["cause"], "deadline");
    assert_eq!(json["cases"][1]["cause"], "deadline");
    bankconf::internal::schemas::validate(bankconf::internal::schemas::Schema::Report, &json).unwrap();
    for (signal, code) in [(Signal::Interrupt, 130), (Signal::Terminate, 143)] {
        let report = stopped(Cause::Interrupted(signal));
        assert_eq!((report.verdict(), report.exit_code()), ("INCOMPLETE", code));
        assert!(report.decided().to_string().contains(&format!("interrupted by {}", signal.name())));
        let json = bankconf::internal::report::json::render(&report);
        assert_eq!((json["exit_code"].as_i64(), &json["stopped"]["cause"]), (Some(code.into()), &"interrupted".into()));
    }
    // A failure judged before the signal is still a failure.
    let mut failed = synthetic();
    failed.stopped = Some(Cause::Interrupted(Signal::Interrupt));
    assert_eq!((failed.verdict(), failed.exit_code()), ("FAILED", 130));
}

/// A target's body with `; `, `: `, `status 500: `, `|`, a newline and backticks stays one
/// problem in all six reports: they render typed problems and never take a text apart.
#[test]
fn target_text_never_splits_a_problem() {
    use bankconf::internal::report::{html, libtest, terminal};
    let body = "{\"error\": \"a; b: c status 500: d | e\nf ``` g\"}";
    let request = "GET http://127.0.0.1:9/v1/accounts/acc_1";
    let failure = bankconf::Failure::from(format!("expected 2xx, got status 500: {body}"))
        .requested(request)
        .expected("2xx", format!("status 500: {body}"));
    assert_eq!(failure.problems.len(), 1);
    let mut report = synthetic();
    report.results[1].outcome = Outcome::Failed(failure);
    let whole = "a; b: c status 500: d | e";
    // Markdown: one problem, not a list.
    let md = markdown::render(&report);
    assert!(md.contains("**Problem:** expected 2xx") && !md.contains("**Problems"), "{md}");
    // JSON: one problem, whole, with what was expected and received; the message is that problem.
    let json = json::render(&report);
    let problems = json["cases"][1]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{json:#}");
    assert_eq!(problems[0]["request"], request);
    assert!(problems[0]["detail"].as_str().unwrap().contains(body), "{json:#}");
    assert_eq!(problems[0]["received"], format!("status 500: {body}"));
    assert_eq!(json["cases"][1]["message"], format!("{request}: expected 2xx, got status 500: {body}"));
    // The terminal: one problem, not counted as several.
    let summary = terminal::render_summary(&report, terminal::Paint(false), &terminal::FullText::File("r.json".into()));
    assert!(!summary.contains("problems"), "{summary}");
    // JUnit: one failure whose message is the one problem.
    let junit = junit::render(&report);
    assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
    let xml = parse_xml(&junit);
    let failed = xml.find("failure");
    assert!(failed[0].attr("message").contains(whole) && !failed[0].attr("message").contains("problems"), "{junit}");
    // HTML: the finding whole, in one block.
    let page = html::render(&report);
    assert_eq!(html::well_formed(&page), Ok(()), "{page}");
    let article =
        page.split("<article").skip(1).find(|a| a.contains("transactions.walk-exactly-once")).unwrap_or_default();
    assert_eq!(article.matches("<pre class=\"message\">").count(), 1, "{article}");
    assert!(!article.contains("problems:"), "{article}");
    let block = article.split("<pre class=\"message\">").nth(1).and_then(|rest| rest.split("</pre>").next());
    assert!(block.is_some_and(|b| b.contains(whole) && b.contains("``` g")), "{page}");
    // `cargo test`'s report: the one problem, not a list.
    let printed = libtest::printed(&report, &report.results[1]).unwrap_or_default();
    assert!(printed.contains(whole) && !printed.contains("problems"), "{printed}");
}

/// Every text of a Markdown report is escaped for Markdown, bankconf's own included (a
/// statement quoting `Bearer <API_KEY>`, a title naming `/widget/<service>-connect.js`): with
/// every case of the catalogue failed, no `<` stands outside code.
#[test]
fn markdown_of_a_failing_run_has_no_raw_angle_bracket_outside_code() {
    let mut report = with_failures();
    report.results = catalogue::all()
        .iter()
        .map(|case| {
            let outcome = Outcome::Failed("target said <b>no</b> <API_KEY>".into());
            let mut result = CaseResult::new(case, outcome, Duration::from_millis(1));
            result.reproduction = Some("curl 'http://x/<y>'".into());
            result
        })
        .collect();
    let md = markdown::render(&report);
    let mut in_fence = false;
    for line in md.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Outside fences, drop inline code spans: what is left is rendered as Markdown.
        let outside: String = line.split('`').step_by(2).collect();
        assert!(!outside.contains('<'), "a raw `<` in the Markdown report: {line}");
    }
}

#[test]
fn a_case_another_failure_blocks_reads_the_same_everywhere_and_is_not_to_complete() {
    use bankconf::internal::report::{html, libtest, terminal};
    let mut report = synthetic();
    let reason = "not judged: rests on transactions.walk-exactly-once, which failed; it rests on the pagination \
                  of an account that does not change";
    let blocked = catalogue::find("transactions.walk-under-insertions").expect("in the catalogue");
    let outcome = Outcome::Ignored { cause: IgnoreCause::RestsOnFailure, reason: reason.into() };
    report.results.push(CaseResult::new(blocked, outcome, Duration::from_millis(3)));
    // The verdict is the failure's, as before: the case is ignored, and counted so.
    assert_eq!((report.verdict(), report.exit_code()), ("FAILED", 1));
    assert_eq!(report.counts(None).ignored, 2);
    // Not listed under what would complete the run: nothing there can be completed.
    assert!(report.unjudged().iter().all(|(_, ids)| !ids.contains(&"transactions.walk-under-insertions")));
    let json = json::render(&report);
    assert_valid_report(&json);
    let case = json["cases"].as_array().unwrap().iter().find(|c| c["id"] == blocked.id).unwrap();
    assert_eq!(
        (&case["outcome"], &case["cause"], &case["message"]),
        (&"ignored".into(), &"rests-on-failure".into(), &reason.into())
    );
    let summary = terminal::render_summary(&report, terminal::Paint(false), &terminal::FullText::Nowhere);
    assert!(!summary.contains("walk-under-insertions"), "{summary}");
    let line =
        terminal::Lines::new(terminal::Paint(false), String::new()).case(report.results.last().unwrap(), true, false);
    let head = "not judged: rests on transactions.walk-exactly-once, which failed";
    assert!(line.starts_with("RESTS transactions.walk-under-insertions") && line.contains(head), "{line}");
    let md = markdown::render(&report);
    assert!(md.contains(&format!("| rests-on-failure | {reason} |")), "{md}");
    assert!(md.contains("`transactions.walk-under-insertions` RESTS"), "{md}");
    let page = html::render(&report);
    assert!(page.contains(reason) && page.contains("<td>RESTS</td>"), "{page}");
    let junit = junit::render(&report);
    assert!(junit.contains(reason), "{junit}");
    let printed = libtest::printed(&report, report.results.last().unwrap()).unwrap_or_default();
    assert_eq!(printed, reason);
}

#[test]
fn the_terminal_names_the_request_a_failure_rests_on() {
    use bankconf::internal::report::terminal;
    use bankconf::internal::verdict::Cited;
    let mut report = synthetic();
    let long = format!("GET http://127.0.0.1:9/v1/connections/conn_1/accounts?cursor={}", "c".repeat(200));
    let cited = vec![
        Cited::Request { request: "GET http://127.0.0.1:9/v1/accounts/acc_1".into(), status: 200, har: Some(3) },
        Cited::Request { request: long, status: 200, har: None },
    ];
    report.cited.insert("create.id-shape".into(), cited);
    let summary = terminal::render_summary(&report, terminal::Paint(false), &terminal::FullText::Nowhere);
    assert!(summary.contains("      evidence (context, not a reproduction):\n"), "{summary}");
    assert!(summary.contains("\n        GET /v1/accounts/acc_1 → 200 (HAR _id 3)\n"), "{summary}");
    let cut = summary.lines().find(|l| l.contains("/v1/connections/conn_1/accounts?cursor=ccc")).expect("the long one");
    assert!(cut.trim().chars().count() <= 100 && !summary.contains("http://127.0.0.1:9/v1/"), "{summary}");
}
