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
    out.push(terminal::render_summary(&report, Paint(false), &terminal::FullText::File("report.json".into())));
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
    let coloured = terminal::render_summary(&report, Paint(true), &terminal::FullText::File("report.json".into()));
    assert!(coloured.contains('\u{1b}'));
    assert_eq!(
        anstream::adapter::strip_str(&coloured).to_string(),
        terminal::render_summary(&report, Paint(false), &terminal::FullText::File("report.json".into()))
    );
}

#[test]
fn a_setup_error_has_no_table_and_is_not_repeated() {
    use bankconf::internal::report::terminal::{render_summary, FullText, Paint};
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
    let out = render_summary(&report, Paint(false), &FullText::File("report.json".into()));
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
    report.notes = vec![format!("a driver said {hostile}").into()];
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

#[path = "outputs/more_outputs.rs"]
mod more_outputs;
