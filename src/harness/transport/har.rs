//! The run's evidence: what went over the wire, for "what exactly did it send?". With `--report-har
//! FILE` every request to the target and its answer, every webhook delivery the receiver got
//! and every driver call become HAR 1.2 entries (readable by browser devtools and HAR viewers),
//! each naming the case that caused it (`_case`). Latencies ([`Latency`]) are kept always.
//!
//! Bounded: a body is kept up to [`MAX_BODY`] bytes (cut, with a `comment` saying so), and the
//! whole log up to [`MAX_LOG`] bytes (later entries are counted, not kept). Secrets are redacted
//! when an entry is kept, and the whole file again when written (a widget token is learnt from
//! the response that carries it).

use crate::harness::rules::latency::Latency;
use crate::harness::rules::verdict::Link;
use crate::harness::transport::driver::{DriveArgs, DriveError, DriverAction};
use crate::harness::vocab::errors::ReportWriteError;
use crate::harness::vocab::redact::{self, Redactor};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Most bytes of one body kept in the HAR.
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// Most bytes of entries kept in memory for the HAR: with its serialisation and redacted copy
/// at the end (about three times this), a run stays within the memory budget
/// ([`crate::harness::vocab::budget`]). A full sandbox run writes under 4 MB.
pub(crate) const MAX_LOG: usize = 32 * 1024 * 1024;

tokio::task_local! {
    /// The case the running task works for, for `_case`.
    static CASE: Option<&'static str>;
}

/// The case the current task works for, if any (fixtures run inside the case that first needs
/// them; the preflight and the setup outside any case).
pub(crate) fn current_case() -> Option<&'static str> {
    CASE.try_with(|c| *c).ok().flatten()
}

/// Runs `f` as work for `case` (a spawned task does not inherit its parent's case: wrap it).
pub(crate) async fn in_case<F: std::future::Future>(case: Option<&'static str>, f: F) -> F::Output {
    CASE.scope(case, f).await
}

/// One request to the target and its answer, as [`Recorder::exchange`] takes it.
pub(crate) struct Exchanged<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// `Bearer …`, kept as `Bearer [redacted]`.
    pub authorized: bool,
    pub accept: &'a str,
    pub status: u16,
    pub content_type: Option<&'a str>,
    pub body: &'a str,
    pub started: SystemTime,
    pub took: Duration,
    /// `GET /v1/…`: how failure messages name it.
    pub request: &'a str,
}

#[derive(Default)]
struct Log {
    entries: Vec<Value>,
    bytes: usize,
    dropped: usize,
    /// Per case, the ids of its entries, for the report's links.
    by_case: HashMap<&'static str, Vec<u64>>,
    /// Each kept delivery's entry id, by the delivery's `seq`.
    by_delivery: HashMap<u64, u64>,
    /// Each entry's position in the written file's `log.entries`, once written.
    index: HashMap<u64, usize>,
}

/// Where the run's evidence goes: one per run, shared by the HTTP client, the receiver and
/// the driver calls.
#[derive(Default)]
pub(crate) struct Recorder {
    pub latency: Latency,
    har: Option<Mutex<Log>>,
    next: AtomicU64,
    /// The run's secrets: the file is redacted with them, and so is what is shown live.
    redactor: Redactor,
    /// The driver calls, for the HTML report's timeline (kept with or without a HAR).
    calls: Mutex<Vec<Called>>,
    /// The names of the `--header`s every request carries: listed, their values redacted.
    sent_headers: Vec<String>,
}

/// Most driver calls kept for the timeline.
pub(crate) const MAX_CALLS: usize = 10_000;

/// A driver call, as the HTML report's timeline draws it.
#[derive(Clone, Debug)]
pub(crate) struct Called {
    pub action: &'static str,
    pub connection: Option<String>,
    pub started: Instant,
    pub ended: Instant,
    /// `exit 0`, `exit 4 (refused)`, `failed`.
    pub exit: &'static str,
}

impl Recorder {
    /// A recorder; with `har`, entries are kept for [`Recorder::write`].
    pub(crate) fn new(har: bool, redactor: Redactor) -> Self {
        Self { har: har.then(Mutex::default), redactor, ..Self::default() }
    }

    /// This recorder, listing `names` (the run's `--header`s) on every request it records,
    /// each value `[redacted]`.
    pub(crate) fn sending(mut self, names: Vec<String>) -> Self {
        self.sent_headers = names;
        self
    }

    /// The names of the `--header`s every request carries (their values are never kept here).
    pub(crate) fn sent_headers(&self) -> &[String] {
        &self.sent_headers
    }

    /// The driver calls so far, in the order they ended.
    pub(crate) fn calls(&self) -> Vec<Called> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The run's redactor.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Keeps `entry`; its id, unless the log's budget is spent.
    fn keep(&self, mut entry: Value) -> Option<u64> {
        let log = self.har.as_ref()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let case = current_case();
        entry["_id"] = json!(id);
        entry["_case"] = json!(case);
        let size = entry.to_string().len();
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        if log.bytes + size > MAX_LOG {
            log.dropped += 1;
            return None;
        }
        log.bytes += size;
        log.entries.push(entry);
        if let Some(case) = case {
            log.by_case.entry(case).or_default().push(id);
        }
        Some(id)
    }

    /// A request the harness sent and the target's answer; the id of its HAR entry.
    pub(crate) fn exchange(&self, x: Exchanged) -> Option<u64> {
        self.latency.answered(x.took);
        self.har.as_ref()?;
        let mut headers = vec![json!({"name": "Accept", "value": x.accept})];
        if x.authorized {
            headers.push(json!({"name": "Authorization", "value": "Bearer [redacted]"}));
        }
        if x.method == "POST" {
            headers.push(json!({"name": "Content-Type", "value": "application/json"}));
        }
        headers.extend(self.sent_headers.iter().map(|name| json!({"name": name, "value": "[redacted]"})));
        let mut request = json!({
            "method": x.method,
            "url": clean(x.url, MAX_BODY),
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": headers,
            "queryString": query(x.url),
            "headersSize": -1,
            "bodySize": 0,
        });
        if x.method == "POST" {
            request["postData"] = json!({"mimeType": "application/json", "text": ""});
        }
        let mime = x.content_type.unwrap_or("");
        let response = json!({
            "status": x.status,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": if mime.is_empty() { json!([]) } else { json!([{"name": "Content-Type", "value": clean(mime, 200)}]) },
            "content": content(mime, x.body.as_bytes()),
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": x.body.len(),
        });
        let millis = x.took.as_secs_f64() * 1000.0;
        let mut entry = json!({
            "startedDateTime": date(x.started),
            "time": millis,
            "request": request,
            "response": response,
            "cache": {},
            "timings": {"send": 0, "wait": millis, "receive": 0},
            "comment": x.request,
            "_kind": "api",
        });
        if x.body.len() > MAX_BODY {
            entry["response"]["content"]["comment"] =
                json!(format!("cut at {} KiB of {} bytes", MAX_BODY >> 10, x.body.len()));
        }
        self.keep(entry)
    }

    /// A webhook delivery the receiver got at `url` (answered `status`); `seq` is its place
    /// among the deliveries kept (`None`: refused).
    pub(crate) fn delivery(&self, url: &str, body: &[u8], status: u16, connection: Option<&str>, seq: Option<u64>) {
        self.latency.arrived(connection, Instant::now());
        if self.har.is_none() {
            return;
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(MAX_BODY)]).into_owned();
        let entry = json!({
            "startedDateTime": date(SystemTime::now()),
            "time": 0,
            "request": {
                "method": "POST",
                "url": clean(url, 2048),
                "httpVersion": "HTTP/1.1",
                "cookies": [],
                "headers": [{"name": "Content-Type", "value": "application/json"}],
                "queryString": [],
                "postData": {"mimeType": "application/json", "text": clean(&text, MAX_BODY)},
                "headersSize": -1,
                "bodySize": body.len(),
            },
            "response": {
                "status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
                "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1, "bodySize": 0,
            },
            "cache": {},
            "timings": {"send": 0, "wait": 0, "receive": 0},
            "comment": format!("webhook delivery received (the receiver is the server){}", if body.len() > MAX_BODY { ", body cut" } else { "" }),
            "_kind": "webhook",
            "_connection": connection.map(|c| clean(c, 300)),
        });
        // A delivery arrives outside any case: it names none (`_case` null).
        if let (Some(id), Some(seq), Some(log)) = (self.keep(entry), seq, &self.har) {
            log.lock().unwrap_or_else(|e| e.into_inner()).by_delivery.insert(seq, id);
        }
    }

    /// Runs a driver call, recording it (action, exit, duration, stderr) as an entry whose URL
    /// is `driver:<action>`, and its start as the trigger of the connection's next events.
    pub(crate) async fn driven<F>(&self, action: DriverAction, args: &DriveArgs, call: F) -> Result<(), DriveError>
    where
        F: std::future::Future<Output = Result<(), DriveError>>,
    {
        if let Some(c) = &args.connection_id {
            self.latency.triggered(c, Instant::now());
        }
        let (started, clock) = (SystemTime::now(), Instant::now());
        let result = call.await;
        {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            if calls.len() < MAX_CALLS {
                let exit = match &result {
                    Ok(()) => "exit 0",
                    Err(DriveError::Unsupported(_)) => "exit 3 (cannot)",
                    Err(DriveError::Refused(_)) => "exit 4 (refused)",
                    Err(DriveError::Failed(_)) => "failed",
                };
                let (connection, ended) = (args.connection_id.clone(), Instant::now());
                calls.push(Called { action: action.as_str(), connection, started: clock, ended, exit });
            }
        }
        if self.har.is_some() {
            let millis = clock.elapsed().as_secs_f64() * 1000.0;
            let (exit, said) = match &result {
                Ok(()) => ("exit 0".to_string(), String::new()),
                Err(DriveError::Unsupported(m)) => ("exit 3 (cannot)".to_string(), m.clone()),
                Err(DriveError::Refused(m)) => ("exit 4 (refused)".to_string(), m.clone()),
                Err(DriveError::Failed(m)) => ("failed".to_string(), m.clone()),
            };
            let mut query = vec![];
            for (name, value) in [
                ("connection", &args.connection_id),
                ("account", &args.account_id),
                ("transaction", &args.transaction_id),
            ] {
                if let Some(v) = value {
                    query.push(format!("{name}={}", url_escape(v)));
                }
            }
            let url =
                format!("driver:{}{}{}", action.as_str(), if query.is_empty() { "" } else { "?" }, query.join("&"));
            let entry = json!({
                "startedDateTime": date(started),
                "time": millis,
                "request": {"method": "DRIVER", "url": clean(&url, 2048), "httpVersion": "", "cookies": [], "headers": [],
                            "queryString": [], "headersSize": -1, "bodySize": 0},
                "response": {"status": 0, "statusText": exit, "httpVersion": "", "cookies": [], "headers": [],
                             "content": {"size": said.len(), "mimeType": "text/plain", "text": clean(&said, MAX_BODY)},
                             "redirectURL": "", "headersSize": -1, "bodySize": -1},
                "cache": {},
                "timings": {"send": 0, "wait": millis, "receive": 0},
                "comment": format!("driver call {}", action.as_str()),
                "_kind": "driver",
            });
            self.keep(entry);
        }
        result
    }

    /// Where the written HAR has a failure of `case`: the entry of the first request its
    /// evidence names (`requests`: their entries, `http::Answer::har`), else of the first of its
    /// `deliveries` (by `seq`), else the case's latest entry.
    pub(crate) fn link(&self, case: &str, requests: &[u64], deliveries: &[u64]) -> Option<Link> {
        let log = self.har.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
        let own = log.by_case.get(case).map(Vec::as_slice).unwrap_or_default();
        let delivery = || deliveries.iter().find_map(|seq| log.by_delivery.get(seq).copied());
        let id = requests.first().copied().or_else(delivery).or(own.last().copied())?;
        Some(Link { entry: *log.index.get(&id)?, id, entries: own.len() })
    }

    /// The `_id` of entry `id` if the written file holds it (it may have gone past the budget).
    pub(crate) fn written(&self, id: u64) -> Option<u64> {
        let log = self.har.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
        log.index.contains_key(&id).then_some(id)
    }

    /// The `_id` of the written entry of the delivery `seq`.
    pub(crate) fn delivery_entry(&self, seq: u64) -> Option<u64> {
        let log = self.har.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
        log.by_delivery.get(&seq).copied().filter(|id| log.index.contains_key(id))
    }

    /// Writes the HAR to `path`, every secret `redactor` knows redacted.
    pub(crate) fn write(&self, path: &Path, redactor: &Redactor) -> Result<(), ReportWriteError> {
        let Some(log) = &self.har else { return Ok(()) };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        let mut comment = "bankconf run: every request to the target, every webhook delivery (the receiver as server) and every driver call (URL driver:<action>); `_case` names the case that caused an entry".to_string();
        if log.dropped > 0 {
            comment +=
                &format!("; {} later entries were not kept (the log's {} MiB budget)", log.dropped, MAX_LOG >> 20);
        }
        // Kept as they finished; a HAR lists them as they started.
        let mut entries: Vec<&Value> = log.entries.iter().collect();
        entries.sort_by(|a, b| a["startedDateTime"].as_str().cmp(&b["startedDateTime"].as_str()));
        let index = entries.iter().enumerate().filter_map(|(i, e)| Some((e["_id"].as_u64()?, i))).collect();
        // Written entry by entry, each redacted on its own: the log may hold tens of MiB, and a
        // whole copy of it as one value, then as text, then redacted, broke the run's memory
        // budget (a secret never spans two entries).
        let creator = json!({"name": "bankconf", "version": env!("CARGO_PKG_VERSION")});
        let mut text = String::with_capacity(log.bytes + comment.len() + 256);
        text.push_str(&format!("{{\"log\":{{\"version\":\"1.2\",\"creator\":{creator},\"entries\":["));
        for (i, entry) in entries.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&redactor.redact(&serde_json::to_string(entry).unwrap_or_default()));
        }
        let comment = redactor.redact(&serde_json::to_string(&comment).unwrap_or_default());
        text.push_str(&format!("],\"comment\":{comment}}}}}"));
        drop(entries);
        log.index = index;
        crate::harness::transport::files::write_atomically(path, text.as_bytes())
    }
}

/// Text a target chose, for the file: cut at `max` characters (the file is redacted whole when
/// written, with what a cut left of a secret).
fn clean(text: &str, max: usize) -> String {
    redact::shorten(text, max)
}

fn content(mime: &str, body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_BODY)]).into_owned();
    json!({"size": body.len(), "mimeType": clean(mime, 200), "text": clean(&text, MAX_BODY)})
}

fn query(url: &str) -> Value {
    let Ok(url) = reqwest::Url::parse(url) else { return json!([]) };
    url.query_pairs().take(100).map(|(k, v)| json!({"name": clean(&k, 2048), "value": clean(&v, 2048)})).collect()
}

fn date(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn url_escape(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
