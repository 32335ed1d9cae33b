//! A hostile or broken target gets failing cases with clear messages: never a crash, a hang, an
//! unbounded memory, injected text, a leftover process or a piece of a key. Each test is one row
//! of the table: a kind of bad behaviour, served on 127.0.0.1 (or by a driver, or in a capture),
//! and the `bankconf` binary run against it. Every row asserts every property ([`Row::holds`]):
//!
//! - the exit code, and the words that name the cause;
//! - no panic text, and a bounded wall time (a hang detector, not a speed measurement);
//! - the reports parse: `--report-json` as JSON, `--report-junit` as XML;
//! - no raw ESC byte in stdout, stderr or a report; no raw HTML in `--report-md`; the
//!   `--report-html` page keeps its shape (`html::well_formed`: no script, no loading element);
//! - no piece of the API key of [`FRAGMENT`] characters or more in any output;
//! - no process the run started is left (drivers write the pids of their children to a file);
//! - the peak resident size of the run stays within [`MEMORY_BUDGET_MIB`].
//!
//! Rows that take over about 10 s are `#[ignore]`d, so that a plain `cargo test` stays fast;
//! `.ci/run` runs them with `--include-ignored`.

mod common;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use common::{temp_path, Server, BIN};
use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The memory budget of a whole run, whatever the target sends: the peak resident size of the
/// `bankconf` process (see src/harness/vocab/budget.rs for what holds target data, and its bounds).
/// The fat-pages row peaks anywhere from 286 to 440 MiB from run to run, on this round's tree
/// and on the last round's alike (measured side by side): how many ~1 MB pages are parsed at
/// once depends on timing. 384 MiB failed CI once in that spread; the bound stays a bound.
const MEMORY_BUDGET_MIB: u64 = 512;
/// Longest a row's run may take before it counts as hung.
const MAX_WALL: Duration = Duration::from_secs(240);
/// Shortest piece of a key that must not appear in any output.
const FRAGMENT: usize = 8;

/// The keys: a short public prefix (§5.2; the harness forges keys with it), then the secret.
const KEY: &str = "hk_hostileSecret0123456789";
const SECOND_KEY: &str = "hk_otherSecret9876543210";

/// Runs `serve` on a free loopback port in a background thread; returns its base URL.
fn background<F, Fut>(serve: F) -> String
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// Serves `app` on a free loopback port.
fn serve(app: Router) -> String {
    background(|listener| async move {
        let _ = axum::serve(listener, app).await;
    })
}

/// A target that creates connections and lists one account `account`; `transactions` answers
/// every page request.
fn one_account(account: &'static str, transactions: Router) -> Router {
    Router::new()
        .route(
            "/v1/connections",
            any(|| async {
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"connectionId": "conn_1", "status": "CREATED", "widgetToken": "sess_1"})),
                )
            }),
        )
        .route(
            "/v1/connections/{id}/accounts",
            any(move || async move {
                axum::Json(json!([{"id": account, "connectionId": "conn_1", "type": "checking"}]))
            }),
        )
        .merge(transactions)
        .fallback(any(|| async { StatusCode::NOT_FOUND.into_response() }))
}

/// One row: how to run bankconf, and what it must show.
struct Row {
    /// Arguments after `bankconf` (the report flags are added).
    args: Vec<String>,
    code: i32,
    /// Words that name the cause, in stdout or stderr.
    expect: Vec<&'static str>,
    /// Words that must not appear there.
    forbid: Vec<&'static str>,
    /// File the row's drivers append the pids of the processes they start to.
    pids: Option<PathBuf>,
}

/// `run` against `url` (or, without, a `bankconf serve` of the hostile keys that lives as long
/// as the test's thread) with the hostile keys, `driver`, and short waits for events and drivers.
fn run_args(url: Option<&str>, driver: &str) -> Vec<String> {
    let mut args: Vec<String> = vec!["run".into()];
    let sandbox = match url {
        Some(url) => url.to_string(),
        None => {
            let server = Server::start(&[KEY, SECOND_KEY], &[]);
            let url = server.url.clone();
            // Ended with this test's thread (the server's parent-death signal).
            std::mem::forget(server);
            url
        }
    };
    args.extend(["--base-url".into(), sandbox]);
    args.extend(["--api-key", KEY, "--second-api-key", SECOND_KEY].map(String::from));
    // A hostile target serves no widget script: with --service, the preflight would stop there.
    if url.is_none() {
        args.extend(["--service", "bankconf"].map(String::from));
    }
    args.extend(["--driver".into(), driver.into(), "--cases".into(), "4".into()]);
    let event_wait = if url.is_some() { "0.3" } else { "2" };
    args.extend(["--request-timeout", "3", "--event-timeout", event_wait, "--driver-timeout", "5"].map(String::from));
    args
}

/// A row against `url`, with a driver that accepts everything and leaves a sleeping child.
fn row(url: &str, code: i32, expect: &[&'static str]) -> Row {
    let name = url.rsplit(':').next().unwrap_or("row");
    let (script, pids) = driver(name, "sleep 300 >/dev/null 2>&1 & echo $! >> PIDS; exit 0");
    Row { args: run_args(Some(url), &script), code, expect: expect.to_vec(), forbid: Vec::new(), pids: Some(pids) }
}

/// What a finished run left: exit code, outputs and its peak resident size.
struct Ran {
    code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    peak_kib: u64,
    wall: Duration,
}

/// Runs bankconf with `args`, reading its outputs aside, and reaps it with `wait4`, which gives
/// the peak resident size of that one process.
fn run(args: &[String]) -> Ran {
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bankconf");
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.read_to_end(&mut out);
            out
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for this test's own child; `child` is not waited for again.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 failed");
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    Ran {
        code,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        peak_kib: usage.ru_maxrss as u64,
        wall: started.elapsed(),
    }
}

/// Whether process `pid` still runs (a zombie no longer does).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S …`: the state follows the last `)`.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

impl Row {
    fn holds(self, name: &str) {
        let reports = [
            ("json", "--report-json", temp_path(&format!("{name}.json"))),
            ("junit", "--report-junit", temp_path(&format!("{name}.xml"))),
            ("md", "--report-md", temp_path(&format!("{name}.md"))),
            ("html", "--report-html", temp_path(&format!("{name}.html"))),
            ("har", "--report-har", temp_path(&format!("{name}.har"))),
        ];
        let mut args = self.args.clone();
        for (kind, flag, path) in &reports {
            let _ = std::fs::remove_file(path);
            // `check-events` sends no request: it has no HAR.
            if *kind != "har" || args[0] == "run" {
                args.extend([flag.to_string(), path.display().to_string()]);
            }
        }
        let ran = run(&args);
        let text = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
        eprintln!("row {name}: exit {}, peak resident size {} MiB, {:?}", ran.code, ran.peak_kib >> 10, ran.wall);

        assert_eq!(ran.code, self.code, "exit code of {name}:\n{text}");
        // Messages are wrapped at the terminal: a phrase may span a line break.
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for word in &self.expect {
            assert!(joined.contains(word), "expected {word:?} in:\n{text}");
        }
        for word in &self.forbid {
            assert!(!text.contains(word), "unexpected {word:?} in:\n{text}");
        }
        let lower = text.to_lowercase();
        assert!(!lower.contains("panicked") && !lower.contains("backtrace"), "panic text:\n{text}");
        assert!(ran.wall < MAX_WALL, "{name} took {:?}", ran.wall);
        assert!(
            ran.peak_kib < MEMORY_BUDGET_MIB << 10,
            "{name}: peak resident size {} MiB exceeds the budget of {MEMORY_BUDGET_MIB} MiB",
            ran.peak_kib >> 10
        );

        let mut outputs = vec![("stdout", ran.stdout.clone()), ("stderr", ran.stderr.clone())];
        // A run that cannot start writes its reports too (the HAR only once requests were sent).
        for (kind, _, path) in &reports {
            match std::fs::read(path) {
                Ok(bytes) => outputs.push((kind, bytes)),
                Err(e) => assert!(*kind == "har" || ran.code == 2, "{name}: no {kind} report: {e}"),
            }
        }
        for (kind, bytes) in &outputs {
            assert!(!bytes.contains(&0x1b), "{name}: a raw ESC in {kind}:\n{}", String::from_utf8_lossy(bytes));
            let out = String::from_utf8_lossy(bytes);
            for fragment in fragments(KEY).iter().chain(fragments(SECOND_KEY).iter()) {
                assert!(!out.contains(fragment.as_str()), "{name}: {fragment:?} of a key in {kind}:\n{out}");
            }
            match *kind {
                "json" | "har" => {
                    let value = serde_json::from_slice::<serde_json::Value>(bytes)
                        .unwrap_or_else(|e| panic!("{name}: the {kind} report does not parse: {e}"));
                    // Every string as decoded: JSON escapes must not hide a piece of a key.
                    for text in strings(&value) {
                        for fragment in fragments(KEY).iter().chain(fragments(SECOND_KEY).iter()) {
                            assert!(
                                !text.contains(fragment.as_str()),
                                "{name}: {fragment:?} of a key in {kind}: {text}"
                            );
                        }
                    }
                }
                "junit" => parses_as_xml(name, bytes),
                // Target text is inert: the page keeps its shape (no script, no element that
                // loads or links out, every element closed in order: an injected tag breaks it).
                "html" => {
                    if let Err(e) = bankconf::internal::report::html::well_formed(&out) {
                        panic!("{name}: the HTML report lost its shape: {e}\n{out}");
                    }
                    for raw in ["<script", "<img", "<iframe", "\u{202e}"] {
                        assert!(!out.contains(raw), "{name}: raw {raw:?} in the HTML report");
                    }
                }
                "md" => {
                    for html in ["<img", "</details>", "<script"] {
                        assert!(!out.contains(html), "{name}: raw HTML {html:?} in the Markdown:\n{out}");
                    }
                }
                _ => {}
            }
        }

        if let Some(pids) = self.pids {
            let pids = std::fs::read_to_string(&pids).unwrap_or_default();
            // A run that cannot start (exit 2) may end before any driver call.
            assert!(self.code == 2 || !pids.trim().is_empty(), "{name}: the driver wrote no pid");
            for pid in pids.split_whitespace() {
                assert!(!running(pid), "{name}: process {pid}, started by a driver, outlived the run");
            }
        }
    }
}

/// Every string of `value`, object keys included.
fn strings(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(items) => items.iter().flat_map(strings).collect(),
        serde_json::Value::Object(map) => {
            map.iter().flat_map(|(k, v)| [k.as_str()].into_iter().chain(strings(v))).collect()
        }
        _ => Vec::new(),
    }
}

/// Every piece of `key` of [`FRAGMENT`] characters.
fn fragments(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    chars.windows(FRAGMENT).map(|w| w.iter().collect()).collect()
}

fn parses_as_xml(name: &str, bytes: &[u8]) {
    let mut reader = quick_xml::Reader::from_reader(bytes);
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Text(t)) => {
                t.decode().unwrap_or_else(|e| panic!("{name}: the JUnit text does not decode: {e}"));
            }
            Ok(_) => {}
            Err(e) => panic!("{name}: the JUnit report does not parse at {}: {e}", reader.buffer_position()),
        }
        buf.clear();
    }
    // quick-xml does not check characters: XML 1.0 forbids C0 controls but tab, LF, CR, and
    // U+FFFE/U+FFFF.
    let text = String::from_utf8_lossy(bytes);
    let illegal = text
        .chars()
        .find(|c| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'));
    assert!(illegal.is_none(), "{name}: an XML-illegal character {illegal:?} in the JUnit report");
}

/// A driver (a `sh -c` command) with `PIDS` replaced by the row's pid file.
fn driver(name: &str, script: &str) -> (String, PathBuf) {
    let pids = temp_path(&format!("{name}.pids"));
    let _ = std::fs::remove_file(&pids);
    (script.replace("PIDS", &pids.display().to_string()), pids)
}

// The rows.

#[test]
fn html_everywhere() {
    let app = Router::new().fallback(any(|| async { ([(header::CONTENT_TYPE, "text/html")], "<html>oops</html>") }));
    row(&serve(app), 1, &["expected a JSON body"]).holds("html_everywhere");
}

#[test]
fn json_null_everywhere() {
    let app = Router::new().fallback(any(|| async { axum::Json(serde_json::Value::Null) }));
    row(&serve(app), 1, &["no connectionId"]).holds("json_null_everywhere");
}

#[test]
fn a_server_that_never_answers() {
    let app = Router::new().fallback(any(|| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        StatusCode::OK
    }));
    // The first request (the reachability probe) times out: the run cannot start.
    row(&serve(app), 2, &["timed out"]).holds("a_server_that_never_answers");
}

#[test]
fn an_endless_body() {
    // A raw server: answers every request with a JSON content type and a body that never ends.
    let url = background(|listener| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let mut request = [0u8; 8192];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b'['; 64 * 1024];
                while socket.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    // A body past the 4 MiB the harness reads is a bound of the harness's, not a violation:
    // the cases that needed it are ignored (cause `bound`) and say so, none fails.
    let mut endless = row(&url, 3, &["the response body exceeds the 4 MiB the harness reads"]);
    endless.forbid = vec!["FAIL "];
    endless.holds("an_endless_body");
}

#[test]
fn a_cursor_that_loops() {
    let pages = Router::new().route(
        "/v1/accounts/{id}/transactions",
        any(|| async { axum::Json(json!({"data": [{"id": "txn_1"}], "has_more": true, "next_cursor": "txn_1"})) }),
    );
    row(&serve(one_account("acc_1", pages)), 1, &["the walk loops"]).holds("a_cursor_that_loops");
}

#[test]
#[ignore = "slow condition: run by .ci/run"]
fn retry_after_that_is_not_a_number() {
    let n = Arc::new(AtomicUsize::new(0));
    let app = Router::new().fallback(any(move || {
        let n = n.fetch_add(1, Ordering::Relaxed);
        async move {
            let wait = ["NaN", "inf", "-inf", "-1", "1e999", "nan(0x1)", "18446744073709551616"][n % 7];
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, wait)], "slow down").into_response()
        }
    }));
    // Refusals are not evidence (§8): the target that refuses everything is given up on, soon,
    // and every case is ignored: nothing was judged (NOT RUN, exit 2).
    row(&serve(app), 2, &["429", "not sent", "NOT RUN"]).holds("retry_after_that_is_not_a_number");
}

/// One endpoint that answers 429 to everything (a proxy in front of a sandbox that refuses the
/// transactions endpoint): its reads stop being sent, its cases are ignored, none fails (exit
/// 3), and the run ends within 90 s.
#[test]
#[ignore = "slow condition: run by .ci/run"]
fn an_endpoint_that_only_refuses() {
    let sandbox = Server::start(&[KEY, SECOND_KEY], &[]);
    let upstream = sandbox.url.clone();
    let client = reqwest::Client::new();
    let app = Router::new().fallback(any(move |request: axum::extract::Request| {
        let (client, upstream) = (client.clone(), upstream.clone());
        async move {
            let path = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
            if path.starts_with("/v1/accounts/") && path.contains("/transactions") {
                return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "NaN")], "slow down").into_response();
            }
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
            let mut forward = client.request(parts.method, format!("{upstream}{path}")).body(body);
            for (name, value) in &parts.headers {
                if name != header::HOST {
                    forward = forward.header(name, value);
                }
            }
            match forward.send().await {
                Ok(answer) => {
                    let status = answer.status();
                    let kind = answer.headers().get(header::CONTENT_TYPE).cloned();
                    let bytes = answer.bytes().await.unwrap_or_default();
                    let mut response = (status, bytes).into_response();
                    if let Some(kind) = kind {
                        response.headers_mut().insert(header::CONTENT_TYPE, kind);
                    }
                    response
                }
                Err(_) => StatusCode::BAD_GATEWAY.into_response(),
            }
        }
    }));
    let url = serve(app);
    let mut args = run_args(Some(&url), "./examples/sandbox-driver.sh");
    // The sandbox behind the proxy delivers webhooks: give them the sandbox's time.
    if let Some(at) = args.iter().position(|a| a == "--event-timeout") {
        args[at + 1] = "2".into();
    }
    let started = Instant::now();
    Row { args, code: 3, expect: vec!["not sent", "answers 429"], forbid: vec!["FAIL "], pids: None }
        .holds("an_endpoint_that_only_refuses");
    assert!(started.elapsed() < Duration::from_secs(90), "took {:?}", started.elapsed());
    drop(sandbox);
}

/// Pages of about 1 MB that never end, each with a new cursor: the memory ceiling.
#[test]
#[ignore = "slow condition: run by .ci/run"]
fn fat_pages_that_never_end() {
    let item = |i: usize| {
        json!({"id": format!("txn_{i:08}"), "accountId": "acc_1", "amount": -1.5, "currency": "EUR",
               "description": "x".repeat(200), "transactionDate": "2026-01-01", "category": "groceries",
               "status": "posted", "createdAt": "2026-01-01T00:00:00Z"})
    };
    let data: Vec<serde_json::Value> = (0..3_500).map(item).collect();
    let data = Arc::new(serde_json::to_string(&data).unwrap());
    let n = Arc::new(AtomicUsize::new(0));
    let pages = Router::new().route(
        "/v1/accounts/{id}/transactions",
        any(move || {
            let (data, n) = (data.clone(), n.fetch_add(1, Ordering::Relaxed));
            async move {
                let body = format!(r#"{{"data":{data},"has_more":true,"next_cursor":"cursor_{n}"}}"#);
                ([(header::CONTENT_TYPE, "application/json")], body).into_response()
            }
        }),
    );
    // The walks stop at their bound of bytes read: ignored, never failed (the exit code is the
    // other cases' failures, this server serving nothing else). The driver registers no webhook
    // (exit 3: unsupported): this server sends none, and a receiver proven unreachable would
    // stop the walks before their bound.
    let url = serve(one_account("acc_1", pages));
    let (script, pids) = driver(
        "fat_pages",
        "[ \"$BANKCONF_ACTION\" = register_webhook ] && exit 3; sleep 300 >/dev/null 2>&1 & echo $! >> PIDS; exit 0",
    );
    let expect = vec!["the walk stopped at its bound"];
    Row { args: run_args(Some(&url), &script), code: 1, expect, forbid: Vec::new(), pids: Some(pids) }
        .holds("fat_pages_that_never_end");
}

#[path = "hostile/limits.rs"]
mod limits;
