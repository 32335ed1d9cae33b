//! The reports (JSON against `schemas/report.json`, JUnit XML, Markdown), `check-events` over
//! hand-made captures in `tests/fixtures/events/`, `openapi`, and `run --list` selection.

use bankconf::internal::catalogue;
use bankconf::internal::report::{json, junit, markdown};
use bankconf::internal::schemas::{self, Schema};
use bankconf::internal::spec::SECTIONS;
use bankconf::{CaseResult, ErrorSource, Gate, IgnoreCause, Level, Origin, Outcome, Report, SetupError};
use quick_xml::events::Event;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

mod common;

use common::{bankconf, temp_path, text};

// ---------------------------------------------------------------- a minimal XML tree

#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Element>,
    text: String,
}

impl Element {
    fn all<'a>(&'a self, name: &str, out: &mut Vec<&'a Element>) {
        if self.name == name {
            out.push(self);
        }
        self.children.iter().for_each(|c| c.all(name, out));
    }

    fn find(&self, name: &str) -> Vec<&Element> {
        let mut out = Vec::new();
        self.all(name, &mut out);
        out
    }

    fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).map_or("", String::as_str)
    }

    fn property(&self, name: &str) -> Option<&str> {
        self.child("properties")?.children.iter().find(|p| p.attr("name") == name).map(|p| p.attr("value"))
    }
}

fn parse_xml(text: &str) -> Element {
    fn open(e: &quick_xml::events::BytesStart<'_>) -> Element {
        let mut el = Element { name: String::from_utf8_lossy(e.name().as_ref()).into_owned(), ..Default::default() };
        for a in e.attributes() {
            let a = a.expect("well-formed attribute");
            el.attrs.insert(
                String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                a.unescape_value().expect("attribute value").into_owned(),
            );
        }
        el
    }
    let mut reader = quick_xml::Reader::from_str(text);
    let mut stack = vec![Element { name: "#document".into(), ..Default::default() }];
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => stack.push(open(&e)),
            Event::Empty(e) => {
                let el = open(&e);
                stack.last_mut().unwrap().children.push(el);
            }
            Event::End(_) => {
                let el = stack.pop().unwrap();
                stack.last_mut().expect("balanced tags").children.push(el);
            }
            Event::Text(t) => {
                let raw = t.decode().expect("UTF-8");
                stack.last_mut().unwrap().text += &quick_xml::escape::unescape(&raw).expect("text");
            }
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().expect("char ref") {
                    Some(c) => c.to_string(),
                    None => match &*r.decode().expect("UTF-8") {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => panic!("unknown entity {other}"),
                    },
                };
                stack.last_mut().unwrap().text += &c;
            }
            Event::CData(t) => stack.last_mut().unwrap().text += &String::from_utf8_lossy(&t),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "unclosed elements");
    stack.pop().unwrap()
}

// ---------------------------------------------------------------- helpers

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events").join(name).display().to_string()
}

fn assert_valid_report(report: &Value) {
    if let Err(violations) = schemas::validate(Schema::Report, report) {
        panic!("report breaks schemas/report.json: {violations:?}\n{report:#}");
    }
}

/// The three report files of one invocation.
struct Written {
    json: Value,
    junit: Element,
    junit_text: String,
    markdown: String,
}

fn with_reports(name: &str, args: &[&str]) -> (Output, Written) {
    let (j, x, m) =
        (temp_path(&format!("{name}.json")), temp_path(&format!("{name}.xml")), temp_path(&format!("{name}.md")));
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--report-json",
        j.to_str().unwrap(),
        "--report-junit",
        x.to_str().unwrap(),
        "--report-md",
        m.to_str().unwrap(),
    ]);
    let output = bankconf(&all);
    let junit_text = std::fs::read_to_string(&x).unwrap_or_else(|e| panic!("no JUnit file: {e}\n{}", text(&output)));
    let written = Written {
        json: serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap(),
        junit: parse_xml(&junit_text),
        junit_text,
        markdown: std::fs::read_to_string(&m).unwrap(),
    };
    (output, written)
}

/// A report with one result of every kind, built in-process.
fn synthetic() -> Report {
    let case = |id: &str| catalogue::find(id).unwrap_or_else(|| panic!("{id} is in the catalogue"));
    let result = |id: &str, outcome: Outcome, reproduction: Option<&str>| {
        let mut result = CaseResult::new(case(id), outcome, Duration::from_millis(12));
        result.reproduction = reproduction.map(str::to_string);
        result
    };
    let mut report = Report::new(
        Origin::Run { seed: 42, settings: String::new() },
        "http://127.0.0.1:9",
        Gate(vec![Level::Must, Level::Security]),
    );
    report.results = vec![
            result("create.status-created", Outcome::Passed, None),
            result(
                "transactions.walk-exactly-once",
                Outcome::Failed("property failed (seed 7): shrunk input limit=2 <&> | pipe".into()),
                Some("curl -sS -i -X GET -H \"Authorization: Bearer $BANKCONF_API_KEY\" 'http://127.0.0.1:9/v1/accounts/acc_1/transactions?limit=2'"),
            ),
            result("create.id-shape", Outcome::Failed("ids are 10 characters long".into()), None),
            result(
                "isolation.accounts",
                Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason: "needs --second-api-key".into() },
                None,
            ),
            result(
                "events.connected-announced",
                Outcome::Error { source: ErrorSource::Driver, message: "the driver exited 127".into() },
                None,
            ),
        ];
    report.duration = Duration::from_millis(100);
    report.notes = vec!["a note".into()];
    report
}

/// A report a person must act on: an external target (rerun settings), a seed above 2^53, a
/// long schema failure naming its request, one diagnosis shared by two errors, an expected
/// failure, a transition graph.
fn with_failures() -> Report {
    let case = |id: &str| catalogue::find(id).unwrap_or_else(|| panic!("{id} is in the catalogue"));
    let result = |id: &str, outcome: Outcome, reproduction: Option<&str>| {
        let mut result = CaseResult::new(case(id), outcome, Duration::from_millis(12));
        result.reproduction = reproduction.map(str::to_string);
        result
    };
    let long = format!(
        "does not validate against \
         transaction-page.json: /data/0/id: \"tx_01\" does not match \"^txn_\" [§2]; /data/1/id: \"tx_02\" does \
         not match \"^txn_\" [§2]; {}",
        "/data/2/amount: \"12.50\" is not of type \"number\" [§4.3] ".repeat(12)
    );
    let silent = "no webhook delivery reached the receiver within 20s of creating (and driving) a connection: \
                  the target was given http://127.0.0.1:40001/webhooks (listening on 127.0.0.1:40001)";
    let expectations = bankconf::internal::expect::Expectations::parse(
        "expect.toml",
        "[[expect]]\ncase = \"widget.served\"\noutcome = \"failed\"\nreason = \"widget ships in March\"\n",
    )
    .unwrap();
    let curl = "curl -sS -i -X GET -H \"Authorization: Bearer $BANKCONF_API_KEY\" \
                'http://staging.example:8080/v1/accounts/acc_1/transactions?limit=100'";
    let origin = Origin::Run {
        seed: 18_446_744_073_709_551_557,
        settings: "--base-url http://staging.example:8080 --api-key \"$BANKCONF_API_KEY\" --driver ./driver.sh".into(),
    };
    let mut report = Report::new(origin, "http://staging.example:8080", Gate(vec![Level::Must, Level::Security]));
    report.results = vec![
        result("create.status-created", Outcome::Passed, None),
        result(
            "transactions.page-schema",
            Outcome::Failed(
                bankconf::Failure::from(long)
                    .requested("GET http://staging.example:8080/v1/accounts/acc_1/transactions?limit=100"),
            ),
            Some(curl),
        ),
        result("create.id-shape", Outcome::Failed("ids are 10 characters long".into()), None),
        result(
            "widget.served",
            Outcome::Failed("GET http://staging.example:8080/widget/x-connect.js: 404".into()),
            None,
        ),
        result("events.schema", Outcome::Error { source: ErrorSource::Receiver, message: silent.into() }, None),
        result(
            "events.connected-announced",
            Outcome::Error { source: ErrorSource::Receiver, message: silent.into() },
            None,
        ),
    ];
    report.duration = Duration::from_millis(100);
    report.expectations = Some(expectations);
    report
}

/// Snapshots in `snapshots/outputs/`. The count of the catalogue's cases a report does not hold
/// grows with the catalogue: pinned as a placeholder (`[N] cases not selected`).
macro_rules! pinned {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => "../snapshots/outputs",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, not_selected_pinned(&$value));
        })
    };
}

/// How many cases of `bankconf run` the six of [`with_failures`] leave out.
fn not_selected() -> usize {
    catalogue::all().iter().filter(|c| !c.offline).count() - 6
}

fn not_selected_pinned(text: &str) -> String {
    text.replace(&format!("{} cases not selected", not_selected()), "[N] cases not selected")
}

#[test]
fn the_terminal_closes_with_every_failure_and_its_rerun() {
    use bankconf::internal::report::terminal::{self, Lines, Paint};
    let report = with_failures();
    let lines = Lines::new(Paint(false), "(full text in report.json)".into());
    let mut out: Vec<String> = report
        .results
        .iter()
        .map(|r| lines.case(r, report.gates(r) || report.mark(r) == "KNOWN", report.mark(r) == "KNOWN"))
        .collect();
    out.push(terminal::render_summary(&report, Paint(false), "(full text in report.json)"));
    let out = out.join("\n");
    assert!(out.lines().all(|l| l.chars().count() <= 240), "a line longer than a rerun: {out}");
    assert!(out.contains("(the same message as events.schema)"), "a diagnosis is shown once while running");
    assert!(out.contains("KNOWN widget.served"), "an expected failure has its own tag");
    let closing = out.split("to act on, gating first:").nth(1).expect("a closing block");
    assert!(closing.contains("FAIL  transactions.page-schema  §4.3 must"), "{closing}");
    assert!(
        closing.contains(
            "rerun: bankconf run --base-url http://staging.example:8080 --api-key \"$BANKCONF_API_KEY\" --driver \
             ./driver.sh --seed 18446744073709551557 transactions.page-schema"
        ),
        "{closing}"
    );
    assert!(
        closing.contains("2 cases, one diagnosis:\n      events.schema (§6.1), events.connected-announced"),
        "{closing}"
    );
    assert!(closing.contains("(full text in report.json)"), "{closing}");
    // Six cases of the catalogue: the others are counted as not selected, the expected one named.
    assert!(
        out.ends_with(&format!(
            "FAILED: 1 gating failure (1 passed, 3 failed, 2 errors, 0 ignored in 0.10s; {} cases not selected, \
             1 case expected in expect.toml)",
            not_selected()
        )),
        "{out}"
    );
    pinned!("terminal", out);
    // At a terminal that allows it, marks are coloured; the text is the same without the codes.
    let coloured = terminal::render_summary(&report, Paint(true), "(full text in report.json)");
    assert!(coloured.contains('\u{1b}'));
    assert_eq!(
        anstream::adapter::strip_str(&coloured).to_string(),
        terminal::render_summary(&report, Paint(false), "(full text in report.json)")
    );
}

#[test]
fn a_setup_error_has_no_table_and_is_not_repeated() {
    use bankconf::internal::report::terminal::{render_summary, Paint};
    let mut report = with_failures();
    report.results = Vec::new();
    report.setup_error = Some(SetupError::KeyRefused {
        flag: "--api-key",
        request: "POST http://127.0.0.1:40001/v1/connections".into(),
        status: 401,
        body: "{}".into(),
        other: "",
    });
    report.expectations = None;
    let out = render_summary(&report, Paint(false), "(full text in report.json)");
    assert_eq!(out, "NOT RUN: the run could not start (setup error above)");
}

#[test]
fn markdown_puts_the_problem_first_and_wraps_commands() {
    let md = markdown::render(&with_failures());
    let failure = md.split("#### `transactions.page-schema`").nth(1).expect("the failure's heading");
    let (problem, request) = (failure.find("**Problem:**").unwrap(), failure.find("**Request:**").unwrap());
    assert!(problem < request && request < failure.find("Reproduce:").unwrap(), "{failure}");
    let mut in_code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if in_code {
            assert!(line.chars().count() <= 100, "a long line in a code block: {line}");
        }
    }
    assert!(md.contains("`widget.served` KNOWN"), "{md}");
    pinned!("markdown", md);
}

#[test]
fn json_seed_survives_a_reader_that_rounds_numbers() {
    let report = json::render(&with_failures());
    assert_valid_report(&report);
    assert_eq!(report["seed"], "18446744073709551557");
    assert_eq!(report["format_version"], 3);
    // `jq -r .seed` prints it as written.
    let path = common::temp_path("seed.json");
    std::fs::write(&path, serde_json::to_string(&report).unwrap()).unwrap();
    if let Ok(out) = std::process::Command::new("jq").args(["-r", ".seed", path.to_str().unwrap()]).output() {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "18446744073709551557");
    }
    // The commit it was built from changes with every commit: pinned as a placeholder.
    let mut report = report;
    assert!(report["tool"]["commit"].as_str().is_some_and(|c| !c.is_empty()), "{}", report["tool"]);
    report["tool"]["commit"] = "[commit]".into();
    // The cases it does not hold, the rest of the catalogue: pinned as a placeholder.
    let listed = report["selection"]["not_selected"].as_array().map(Vec::len);
    assert_eq!(listed, Some(not_selected()), "{}", report["selection"]);
    report["selection"]["not_selected"] = "[the other cases of the catalogue]".into();
    pinned!("json", serde_json::to_string_pretty(&report).unwrap());
}

// ---------------------------------------------------------------- the renderers

#[test]
fn json_report_follows_its_schema() {
    let report = json::render(&synthetic());
    assert_valid_report(&report);
    let failed = &report["cases"][1];
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["reproduction"].as_str().unwrap().contains("$BANKCONF_API_KEY"));
    assert_eq!(failed["rerun"], "bankconf run --seed 42 transactions.walk-exactly-once");
    assert_eq!(failed["duration_ms"], 12.0);
    assert_eq!(report["summary"]["by_level"]["advisory"]["failed"], 1);
    // The schema has teeth.
    let mut broken = report.clone();
    broken["cases"][0]["duration_ms"] = Value::from("12ms");
    assert!(schemas::validate(Schema::Report, &broken).is_err());
    let mut broken = report.clone();
    broken["cases"][1]["message"] = Value::Null;
    assert!(schemas::validate(Schema::Report, &broken).is_err(), "a failure needs its message");
}

#[test]
fn junit_fails_only_gating_cases_and_carries_the_reproduction() {
    let report = synthetic();
    let xml = parse_xml(&junit::render(&report));
    let root = &xml.find("testsuites")[0];
    assert_eq!(root.attr("tests"), "5");
    assert_eq!(root.attr("failures"), "1", "only the gating failure is a JUnit failure");
    assert_eq!(root.attr("errors"), "1", "a driver error is a JUnit error, not a failure");
    assert_eq!(xml.find("testcase").len(), 5);
    // One testcase per case, in the report's order, named by id, classed by area.
    let cases: Vec<&Element> = report
        .results
        .iter()
        .map(|r| *xml.find("testcase").iter().find(|tc| tc.attr("name") == r.case.id).expect("a testcase per case"))
        .collect();
    for (tc, r) in cases.iter().zip(&report.results) {
        assert_eq!(tc.attr("classname"), r.case.area);
        assert_eq!(tc.property("section"), Some(r.case.section.as_str()));
        assert_eq!(tc.property("level"), Some(r.case.level.as_str()));
    }
    let failure = cases[1].child("failure").expect("gating failure");
    assert_eq!(failure.attr("type"), "must");
    assert!(failure.attr("message").contains("<&> | pipe"), "escaped and restored: {:?}", failure.attr("message"));
    assert!(failure.text.contains("reproduce: curl") && failure.text.contains("$BANKCONF_API_KEY"), "{}", failure.text);
    assert!(failure.text.contains("rerun: bankconf run --seed 42 transactions.walk-exactly-once"));
    // Advisory failure: a passing testcase with a NOTE in system-out.
    assert!(cases[2].child("failure").is_none());
    assert_eq!(cases[2].property("outcome"), Some("failed"));
    assert_eq!(cases[2].property("gating"), Some("false"));
    assert!(cases[2].child("system-out").unwrap().text.starts_with("NOTE"));
    // Ignored: skipped, with the reason.
    assert_eq!(cases[3].child("skipped").unwrap().attr("message"), "needs --second-api-key");
    // Error: the harness could not judge; `<error>` typed by its source.
    assert_eq!(cases[4].child("error").expect("an <error>").attr("type"), "driver");
}

/// A failing report with a trace and a transition graph, hostile text in every field a target
/// or driver fills: what the HTML report draws.
fn with_trace() -> Report {
    use bankconf::internal::graph::{Transition, TransitionGraph};
    use bankconf::internal::trace::{Client, Connection, Exchange, Item, Kind, Posted, Trace};
    use bankconf::{Action, ConnectionState, Failure};
    let hostile = "<script>alert(1)</script></textarea><img src=x onerror=alert(2)> javascript:alert(3) \u{202e}gnp.exe\u{0}\u{1b}[2J";
    let mut report = with_failures();
    let mut failure = Failure::from(format!(
        "after connection.connected: GET /v1/connections/conn_1/accounts still showed none; body {hostile}"
    ))
    .expected("the accounts of a CONNECTED connection", format!("status 500: {hostile}"));
    failure.evidence.answers = vec![3];
    failure.evidence.deliveries = vec![7];
    // Twenty near-identical problems (one per account) and one of another kind: folded in two.
    for n in 1..=20 {
        let more = Failure::from(format!("GET /v1/accounts/acc_{n}: no `balance` in the account"));
        failure.problems.extend(more.problems);
    }
    report.results[2].outcome = Outcome::Failed(failure);
    let ms = Duration::from_millis;
    let item = |kind, client, at: u64, until: u64, label: &str, answer, delivery| Item {
        kind,
        client,
        at: ms(at),
        until: ms(until),
        label: label.into(),
        answer,
        delivery,
    };
    report.trace = Trace {
        connections: vec![Connection {
            id: format!("conn_1{hostile}"),
            owner: Some(Client::First),
            items: vec![
                item(Kind::Read, Client::First, 100, 130, "POST /v1/connections → 201", Some(1), None),
                item(Kind::Delivery, Client::First, 140, 140, "connection.created", None, Some(5)),
                item(Kind::Call, Client::First, 150, 400, "connect: exit 0", None, None),
                item(Kind::Read, Client::First, 420, 450, "GET /v1/connections/conn_1/accounts → 500", Some(3), None),
                item(
                    Kind::Delivery,
                    Client::First,
                    470,
                    470,
                    &format!("connection.connected {hostile}"),
                    None,
                    Some(7),
                ),
                item(Kind::Read, Client::Second, 500, 520, "GET /v1/connections/conn_1/accounts → 404", Some(4), None),
            ],
            left_out: 0,
        }],
        connections_left_out: 3,
        exchanges: [(
            3,
            Exchange {
                method: "GET".into(),
                url: format!("http://staging.example:8080/v1/connections/conn_1/accounts?x={hostile}"),
                headers: vec![
                    ("Accept".into(), "application/json".into()),
                    ("Authorization".into(), "Bearer [redacted]".into()),
                    ("X-Gateway-Token".into(), "[redacted]".into()),
                ],
                status: 500,
                content_type: Some(format!("text/html; {hostile}")),
                body: Some(hostile.into()),
                client: Client::First,
                at: ms(420),
                took: ms(30),
            },
        )]
        .into(),
        deliveries: [(
            7,
            Posted { label: "connection.connected".into(), to: Client::First, at: ms(470), body: hostile.into() },
        )]
        .into(),
    };
    report.transition_graph = Some(TransitionGraph {
        reached: vec![ConnectionState::Created, ConnectionState::Connected, ConnectionState::Disconnected],
        edges: vec![
            (ConnectionState::Created, Action::Connect, Transition::Accepted(ConnectionState::Connected)),
            (ConnectionState::Connected, Action::Disconnect, Transition::Accepted(ConnectionState::Disconnected)),
            (ConnectionState::Connected, Action::UpdateAccounts, Transition::Accepted(ConnectionState::Connected)),
            (ConnectionState::Disconnected, Action::Connect, Transition::Refused),
        ],
    });
    report.notes = vec![format!("a driver said {hostile}")];
    report.root_causes = vec![bankconf::internal::verdict::RootCause {
        case: None,
        cause: format!("every 2xx body starts with a byte-order mark {hostile}"),
        cases: vec!["create.id-shape".into()],
    }];
    report
}

#[test]
fn html_puts_failures_first_with_their_evidence_and_escapes_every_target_text() {
    use bankconf::internal::report::html;
    let page = html::render(&with_trace());
    assert_eq!(html::well_formed(&page), Ok(()), "{page}");
    assert!(page.contains(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">", html::CSP)));
    for raw in ["<script", "<img", "</textarea>", "\u{202e}", "\u{0}", "\u{1b}"] {
        assert!(!page.contains(raw), "raw {raw:?} in the page");
    }
    // Target text is inert: a link only to an anchor of the page, a tag only of the report's.
    assert!(page.matches("href=\"").count() == page.matches("href=\"#").count(), "a link out");
    assert!(page.contains("&lt;img src=x onerror=alert(2)&gt;"), "shown, escaped");
    // Failures first, each with its evidence: the request and its answer, the delivery, the contrast.
    let failures = page.find("<section id=\"failures\">").unwrap();
    assert!(failures < page.find("<section id=\"timelines\">").unwrap());
    // A cause that explains several failures comes before them, linking to each.
    let causes = page.find("<section id=\"causes\">").expect("the root causes");
    assert!(
        causes < failures && page[causes..failures].contains("<a href=\"#case-create.id-shape\">create.id-shape</a>")
    );
    // An index of the failures at the top, each linking to its section, anchored by case id.
    let index = page.find("<nav id=\"index\">").expect("the index of the failures");
    assert!(index < causes && page.find("</header>").unwrap() < index);
    for id in ["transactions.page-schema", "create.id-shape", "widget.served"] {
        assert!(page[index..causes].contains(&format!("<a href=\"#case-{id}\">{id}</a>")), "{id} in the index");
        assert!(page.contains(&format!("id=\"case-{id}\"")), "{id}'s section");
    }
    assert!(page.find("id=\"timelines\"").unwrap() < page.find("id=\"graph\"").unwrap());
    let failure = &page[page.find("id=\"case-create.id-shape\"").expect("the failure's anchor")..];
    let failure = &failure[..failure.find("</article>").unwrap()];
    for shown in [
        "<b>500</b>",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "answer Content-Type",
        "Bearer [redacted]",
        "<tr><th>X-Gateway-Token</th><td>[redacted]</td></tr>",
        "<span class=\"count\">×20</span>",
        "<th>expected</th>",
        "<th>received</th>",
        "connection.connected",
        "<a href=\"#conn-0\">",
        "Rerun the case:",
    ] {
        assert!(failure.contains(shown), "{shown:?} in the failure:\n{failure}");
    }
    // The timeline marks the steps the failure rests on, and links back to it.
    let timeline = &page[page.find("id=\"conn-0\"").unwrap()..];
    assert_eq!(timeline.matches("class=\"read marked\"").count(), 1, "{timeline}");
    assert_eq!(timeline.matches("class=\"delivery marked\"").count(), 1, "{timeline}");
    assert!(timeline.contains("second client: request"), "the second client has a row of its own");
    assert!(timeline.contains("<a href=\"#case-create.id-shape\">create.id-shape</a>"));
    // The twenty alike take one box: the first open, the nineteen others closed, one line each.
    assert_eq!(failure.matches("acc_").count(), 20, "{failure}");
    assert_eq!(failure.matches("<pre class=\"message\">").count(), 2, "{failure}");
    assert!(page.contains("3 more connections are not drawn"));
    // The graph drawn, beside its table.
    assert!(page.contains("<svg class=\"graph\"") && page.contains(">update_accounts</text>"), "a loop, labelled");
    pinned!("html", page);
}

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
    assert!(deadline.decided().starts_with("the run's deadline (--deadline 300 s) passed"), "{}", deadline.decided());
    let json = bankconf::internal::report::json::render(&deadline);
    assert_eq!(json["stopped"]["cause"], "deadline");
    assert_eq!(json["cases"][1]["cause"], "deadline");
    bankconf::internal::schemas::validate(bankconf::internal::schemas::Schema::Report, &json).unwrap();
    for (signal, code) in [(Signal::Interrupt, 130), (Signal::Terminate, 143)] {
        let report = stopped(Cause::Interrupted(signal));
        assert_eq!((report.verdict(), report.exit_code()), ("INCOMPLETE", code));
        assert!(report.decided().contains(&format!("interrupted by {}", signal.name())));
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
    let summary = terminal::render_summary(&report, terminal::Paint(false), "(full text in r.json)");
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
    let summary = terminal::render_summary(&report, terminal::Paint(false), "");
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
    let summary = terminal::render_summary(&report, terminal::Paint(false), "");
    assert!(summary.contains("      evidence (context, not a reproduction):\n"), "{summary}");
    assert!(summary.contains("\n        GET /v1/accounts/acc_1 → 200 (HAR _id 3)\n"), "{summary}");
    let cut = summary.lines().find(|l| l.contains("/v1/connections/conn_1/accounts?cursor=ccc")).expect("the long one");
    assert!(cut.trim().chars().count() <= 100 && !summary.contains("http://127.0.0.1:9/v1/"), "{summary}");
}
