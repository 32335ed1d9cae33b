//! The harness's HTTP client for the target's `/v1` API: every request bounded in time and in
//! body size, every exchange described as `METHOD /path?query` for failure messages.

use crate::harness::transport::answers::{Answer, AnswerLog, Auth, Sent, EXCERPT};
use crate::harness::transport::har::{Exchanged, Recorder};
use crate::harness::transport::reach::Transport;
use crate::harness::vocab::budget;
use crate::harness::vocab::errors::{SetupError, UrlProblem};
use crate::harness::vocab::outcome::{Failure, Stop};
use crate::harness::vocab::redact;
use reqwest::{Method, Url};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest response body read; a target that sends more is cut off (and fails the case).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One request and its answer.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    /// `GET /v1/accounts/acc_1/transactions?limit=3`.
    pub request: String,
    pub status: u16,
    pub content_type: Option<String>,
    /// The body as text; bytes that are not UTF-8 read as U+FFFD (see `invalid_utf8`).
    pub body: String,
    /// Byte offset of the first byte of the body that is not UTF-8, if any.
    pub invalid_utf8: Option<usize>,
    /// Its place in the run's answer log ([`Answer::seq`]): what a failure it shows rests on.
    pub seq: Option<u64>,
    /// The id of its HAR entry, when one is recorded.
    pub har: Option<u64>,
}

impl Exchange {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub(crate) fn is_server_error(&self) -> bool {
        self.status >= 500
    }

    /// A finding this answer shows by itself: `message` (which names the request), resting on
    /// it; pasting its request asks the same question again ([`Failure::shown_by`]). A finding
    /// that needs more than this answer is [`Exchange::cites`].
    pub(crate) fn fail(&self, message: impl Into<String>) -> Stop {
        Stop::Fail(self.failure(message))
    }

    /// Fails with `message` unless `condition` holds: [`crate::harness::vocab::outcome::ensure`] on this answer.
    pub(crate) fn ensure(&self, condition: bool, message: impl FnOnce() -> String) -> Result<(), Stop> {
        if condition {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    /// A finding this answer takes part in but does not show alone (compared with another read,
    /// an event, the reference): resting on it, never reproduced by pasting its request.
    pub(crate) fn cites(&self, message: impl Into<String>) -> Stop {
        Stop::Fail(Failure::from(message.into()).on_answer(self.seq).requested(&self.request))
    }

    /// [`Exchange::fail`] as a [`Failure`], to collect among [`crate::harness::vocab::outcome::Problems`].
    pub(crate) fn failure(&self, message: impl Into<String>) -> Failure {
        Failure::from(message.into()).shown_by(self.seq).requested(&self.request)
    }

    /// The start of the body, for messages: without control characters (a hostile body must
    /// not drive the terminal), redacted before it is cut (no piece of a key survives the cut).
    pub(crate) fn snippet(&self) -> String {
        const MAX: usize = 160;
        let cleaned: String = self.body.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        redact::shorten(cleaned.trim(), MAX)
    }

    /// `status 500: {"error":…}`, for messages.
    pub(crate) fn summary(&self) -> String {
        if self.body.trim().is_empty() {
            format!("status {} (empty body)", self.status)
        } else {
            format!("status {}: {}", self.status, self.snippet())
        }
    }

    /// The JSON body of a 2xx answer, or a failure naming the request and what came back.
    pub(crate) fn success_json(&self) -> Result<Value, Stop> {
        if !self.is_success() {
            let failure = self.failure(format!("{}: expected 2xx, got {}", self.request, self.summary()));
            return Err(Stop::Fail(failure.expected("2xx", self.summary())));
        }
        if let Some(at) = self.invalid_utf8 {
            return Err(self.fail(format!(
                "{}: expected a JSON body, which is UTF-8, but byte {at} of the body is not valid UTF-8: {}",
                self.request,
                self.summary()
            )));
        }
        if let Some(why) = budget::too_dense(self.body.as_bytes()) {
            return Err(self.fail(format!("{}: not read: {why}", self.request)));
        }
        serde_json::from_str(&self.body)
            .map_err(|e| self.fail(format!("{}: expected a JSON body, got {} ({e})", self.request, self.summary())))
    }
}

/// Client of the target's API.
#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
    /// For the requests that are not idempotent (`POST`): a new connection each, never one
    /// the server may have closed while idle ([`Api::exchange`]).
    fresh: reqwest::Client,
    browser: reqwest::Client,
    base: Url,
    key: Option<String>,
    second_key: Option<String>,
    /// Every exchange, for the response checks and for evidence.
    answers: Arc<AnswerLog>,
    throttle: Arc<crate::harness::transport::throttle::Throttle>,
    recorder: Arc<Recorder>,
    /// The key [`Api::get`] sends: the client under test's, or the second client's for the
    /// reads that judge its answers too.
    reader: Auth,
    /// Bytes of ids and fields that this run's live walks hold (see [`crate::harness::vocab::budget::MAX_HELD`]):
    /// the run's own, shared by its clones, so that two runs in one process never limit each
    /// other.
    held: Arc<std::sync::atomic::AtomicUsize>,
    /// The pages this run's cases share (`pagination`), shared by its clones.
    pages: Arc<crate::harness::transport::reads::PageCache>,
}

/// `--base-url` as a URL, if it is an http(s) one: checked with the other flags
/// ([`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate)) and again by [`Api::with_transport`].
pub(crate) fn parse_base_url(text: &str) -> Result<Url, SetupError> {
    let bad = |problem| SetupError::BadBaseUrl { url: text.to_string(), problem };
    let url = Url::parse(text).map_err(|e| bad(UrlProblem::Unparsable(e.to_string())))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(UrlProblem::NotHttp));
    }
    Ok(url)
}

impl Api {
    /// A client with no TLS settings or extra headers (the tests').
    #[cfg(test)]
    pub(crate) fn new(
        base_url: &str,
        key: Option<String>,
        second_key: Option<String>,
        timeout: Duration,
    ) -> Result<Self, SetupError> {
        Self::with_transport(base_url, key, second_key, timeout, &Transport::default())
    }

    /// `Api::new` (the tests'), its clients built with the run's TLS settings and extra headers.
    pub(crate) fn with_transport(
        base_url: &str,
        key: Option<String>,
        second_key: Option<String>,
        timeout: Duration,
        transport: &Transport,
    ) -> Result<Self, SetupError> {
        let mut base = parse_base_url(base_url)?;
        // Paths are appended below whatever path the base URL has.
        let trimmed = base.path().trim_end_matches('/').to_string();
        base.set_path(&trimmed);
        let builder = || {
            let builder =
                reqwest::Client::builder().timeout(timeout).connect_timeout(timeout.min(Duration::from_secs(5)));
            transport.apply(builder, true)
        };
        let client = builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SetupError::HttpClient(SetupError::cause(&e)))?;
        let fresh = builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| SetupError::HttpClient(SetupError::cause(&e)))?;
        // Assets are fetched as a browser would: following a few redirects.
        let browser = builder()
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| SetupError::HttpClient(SetupError::cause(&e)))?;
        Ok(Self {
            client,
            fresh,
            browser,
            base,
            key,
            second_key,
            answers: Arc::default(),
            reader: Auth::Primary,
            throttle: Default::default(),
            recorder: Default::default(),
            held: Arc::default(),
            pages: Arc::default(),
        })
    }

    /// The pages this run has read and its cases share.
    pub(crate) fn pages(&self) -> &crate::harness::transport::reads::PageCache {
        &self.pages
    }

    /// The run's count of bytes its live walks hold (`pagination`).
    pub(crate) fn held(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.held.clone()
    }

    /// Paces this client's requests (and its clones') with `throttle`.
    pub(crate) fn with_throttle(mut self, throttle: Arc<crate::harness::transport::throttle::Throttle>) -> Self {
        self.throttle = throttle;
        self
    }

    /// Records this client's exchanges (and its clones') with `recorder`.
    pub(crate) fn with_recorder(mut self, recorder: Arc<Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The recorder, to share with the webhook receiver.
    pub(crate) fn recorder_handle(&self) -> Arc<Recorder> {
        self.recorder.clone()
    }

    pub(crate) fn base_url(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// The run's pacing (for the report's count of 429s).
    pub(crate) fn throttle(&self) -> &crate::harness::transport::throttle::Throttle {
        &self.throttle
    }

    pub(crate) fn has_second_key(&self) -> bool {
        self.second_key.is_some()
    }

    /// The keys this run holds (for checks that a key is not exposed; never print them).
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.key.iter().chain(self.second_key.iter()).map(String::as_str)
    }

    /// The URL of `segments` below the base, each segment percent-encoded (ids are opaque).
    pub(crate) fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    /// [`Api::url`], refusing a segment that URL normalisation would remove (`.` and `..`,
    /// also percent-encoded): the request would silently go elsewhere.
    fn checked_url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, Stop> {
        let dots = |s: &str| matches!(s.to_ascii_lowercase().replace("%2e", ".").as_str(), "." | "..");
        if let Some(bad) = segments.iter().find(|s| dots(s)) {
            return Err(Stop::fail(format!(
                "cannot request /{}: the id {bad:?} is a dot segment, which URLs remove, so no request can name it",
                segments.join("/")
            )));
        }
        Ok(self.url(segments, query))
    }

    /// Whether anything answers HTTP at the base URL (the answer itself is not read).
    pub(crate) async fn reachable(&self) -> Result<(), SetupError> {
        let url = self.url(&["v1", "connections"], &[]);
        match self.client.get(url).send().await {
            Ok(_) => Ok(()),
            Err(e) => {
                Err(SetupError::TargetUnreachable { base_url: self.base_url().to_string(), cause: transport_error(&e) })
            }
        }
    }

    /// `GET` with this client's key (the primary key, unless [`Api::reading_as`] chose another).
    pub(crate) async fn get(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Exchange, Stop> {
        self.send(Method::GET, segments, query, self.reader.clone()).await
    }

    /// The key [`Api::get`] sends.
    pub(crate) fn reader(&self) -> &Auth {
        &self.reader
    }

    /// This client, its [`Api::get`] reading with `auth` (walks and reads of the second client).
    pub(crate) fn reading_as(&self, auth: Auth) -> Self {
        Self { reader: auth, ..self.clone() }
    }

    pub(crate) async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        auth: Auth,
    ) -> Result<Exchange, Stop> {
        let authorization = match &auth {
            Auth::Primary => self.key.as_ref().map(|k| format!("Bearer {k}")),
            Auth::Second => self.second_key.as_ref().map(|k| format!("Bearer {k}")),
            Auth::Missing => None,
            Auth::Header(h) => Some(h.clone()),
            Auth::NearKey(edit) => self.key.as_ref().map(|k| format!("Bearer {}", edit.apply(k))),
        };
        let url = self.checked_url(segments, query)?;
        let sent = Sent { method: method.to_string(), url: url.to_string(), auth, request: describe(&method, &url) };
        let sent_at = Instant::now();
        let mut result = self.exchange(&self.client, method, url, authorization, "application/json").await;
        let (status, body, har) = match &result {
            Ok(x) => (x.status, x.is_success().then(|| x.body.clone()), x.har),
            Err(_) => (0, None, None),
        };
        let (content_type, excerpt) = match &result {
            Ok(x) => (
                x.content_type.as_deref().map(|t| redact::shorten(t, 200)),
                (!x.is_success()).then(|| self.recorder.redactor().cut(&x.body, EXCERPT)),
            ),
            Err(_) => (None, None),
        };
        let seq = self.answers.push(Answer {
            seq: 0,
            sent,
            segments: segments.iter().map(|s| s.to_string()).collect(),
            query: query.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            status,
            body,
            content_type,
            excerpt,
            sent_at,
            answered_at: Instant::now(),
            har,
        });
        match &mut result {
            Ok(x) => x.seq = seq,
            // A finding about the answer itself (too large): it rests on it.
            Err(Stop::Fail(f)) => *f = std::mem::take(f).shown_by(seq),
            Err(_) => {}
        }
        result
    }

    /// The run's exchanges so far (this client's and its clones').
    pub(crate) fn answers(&self) -> &AnswerLog {
        &self.answers
    }

    /// `GET` of a static asset (the widget script, §1) as a browser loads it: no key, any
    /// content type accepted, redirects followed.
    pub(crate) async fn fetch_asset(&self, segments: &[&str]) -> Result<Exchange, Stop> {
        let url = self.checked_url(segments, &[])?;
        let sent = Sent {
            method: "GET".into(),
            url: url.to_string(),
            auth: Auth::Missing,
            request: describe(&Method::GET, &url),
        };
        let sent_at = Instant::now();
        let mut result = self.exchange(&self.browser, Method::GET, url, None, "*/*").await;
        let status = result.as_ref().map_or(0, |x| x.status);
        let har = result.as_ref().ok().and_then(|x| x.har);
        let (segments, query) = (segments.iter().map(|s| s.to_string()).collect(), Vec::new());
        let answered_at = Instant::now();
        let content_type =
            result.as_ref().ok().and_then(|x| x.content_type.as_deref()).map(|t| redact::shorten(t, 200));
        let (body, excerpt) = (None, None);
        let answer =
            Answer { seq: 0, sent, segments, query, status, body, content_type, excerpt, sent_at, answered_at, har };
        let seq = self.answers.push(answer);
        match &mut result {
            Ok(x) => x.seq = seq,
            // A finding about the answer itself (too large): it rests on it.
            Err(Stop::Fail(f)) => *f = std::mem::take(f).shown_by(seq),
            Err(_) => {}
        }
        result
    }

    /// Sends one request and reads its answer, bounded in size. Slow, refused or dropped is
    /// never evidence (§8 leaves timing and rate limits open): a 429 or a 503 is retried as
    /// [`crate::harness::transport::throttle`] decides; a timeout or a refused or reset connection is retried with
    /// backoff for an idempotent read (`GET`) within the run's budget, never for a creation
    /// (`POST` is not idempotent). What stays unanswered is [`Stop::transport`]: its case is
    /// ignored, never failed.
    ///
    /// Idle closes (RFC 9112 §9.3) are not unanswered requests: a server may close a pooled
    /// connection just as a request goes out on it. A `POST` therefore goes on a new connection
    /// of its own (never sent twice); a read whose connection closed before any byte of an answer
    /// is sent again at once on a new one ([`closed_unanswered`]), without counting as a failure.
    async fn exchange(
        &self,
        client: &reqwest::Client,
        method: Method,
        url: Url,
        authorization: Option<String>,
        accept: &str,
    ) -> Result<Exchange, Stop> {
        use crate::harness::transport::throttle::Refusal;
        let request = describe(&method, &url);
        let segments: Vec<&str> = url.path_segments().map(Iterator::collect).unwrap_or_default();
        let endpoint = crate::harness::transport::throttle::endpoint(method.as_str(), &segments);
        let idempotent = matches!(method, Method::GET | Method::HEAD);
        let mut client = if idempotent { client } else { &self.fresh };
        let (mut spent, mut tries, mut resent) = (Duration::ZERO, 0u32, 0u32);
        let mut kept = None;
        loop {
            if let Some(why) = self.throttle.given_up(&endpoint) {
                return Err(Stop::transport(format!("{request}: {why}")));
            }
            // A refused request keeps its place in the window: it goes first after the pause.
            let permit = match kept.take() {
                Some(permit) => {
                    self.throttle.turn().await;
                    permit
                }
                None => self.throttle.acquire().await,
            };
            tries += 1;
            let (started, clock) = (std::time::SystemTime::now(), std::time::Instant::now());
            let mut builder = client.request(method.clone(), url.clone()).header("Accept", accept);
            if method == Method::POST {
                builder = builder.header("Content-Type", "application/json");
            }
            if let Some(h) = &authorization {
                builder = builder.header("Authorization", h);
            }
            let mut response = match builder.send().await {
                Ok(response) => response,
                Err(e) => {
                    drop(permit);
                    if idempotent && resent < IDLE_RESENDS && closed_unanswered(&e) {
                        // Sent again on a new connection: the pool may hold more that the
                        // server closed at the same moment.
                        (resent, tries, client) = (resent + 1, tries - 1, &self.fresh);
                        continue;
                    }
                    let pause =
                        unanswered(&self.throttle, &endpoint, &request, &e, idempotent, tries, clock.elapsed())?;
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            let status = response.status().as_u16();
            let record = |content_type: Option<&str>, body: &str| {
                self.recorder.exchange(Exchanged {
                    method: method.as_str(),
                    url: url.as_str(),
                    authorized: authorization.is_some(),
                    accept,
                    status,
                    content_type,
                    body,
                    started,
                    took: clock.elapsed(),
                    request: &request,
                })
            };
            if matches!(status, 429 | 503) {
                let retry_after =
                    response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(retry_wait);
                // Refused for going too fast: in the HAR too (its body unread).
                record(None, "");
                match self.throttle.refused(&endpoint, status, retry_after, &mut spent) {
                    Refusal::Retry(_) => {
                        kept = Some(permit);
                        continue;
                    }
                    Refusal::GiveUp(why) => return Err(Stop::transport(format!("{request}: {why}"))),
                }
            }
            let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
            let mut body = Vec::new();
            let read = loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        body.extend_from_slice(&chunk);
                        if body.len() > MAX_BODY {
                            self.throttle.answered(&endpoint);
                            return Err(Stop::fail(format!("{request}: response body exceeds {} MiB", MAX_BODY >> 20)));
                        }
                    }
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                }
            };
            drop(permit);
            if let Err(e) = read {
                let pause = unanswered(&self.throttle, &endpoint, &request, &e, idempotent, tries, clock.elapsed())?;
                tokio::time::sleep(pause).await;
                continue;
            }
            self.throttle.answered(&endpoint);
            let invalid_utf8 = std::str::from_utf8(&body).err().map(|e| e.valid_up_to());
            let body = String::from_utf8_lossy(&body).into_owned();
            let har = record(content_type.as_deref(), &body);
            return Ok(Exchange { request, status, content_type, body, invalid_utf8, seq: None, har });
        }
    }
}

/// Most tries of an idempotent read that gets no answer.
const MAX_TRIES: u32 = 3;

/// Most times a read is sent again at once, on a new connection, because its connection closed
/// before any byte of an answer (an idle close, [`closed_unanswered`]); past them it counts as
/// unanswered.
const IDLE_RESENDS: u32 = 2;

/// Whether `error` says the connection closed (or was reset) before any byte of an answer came:
/// what a server's idle close looks like to a request sent on it. Not a timeout, not a refused
/// connection.
fn closed_unanswered(error: &reqwest::Error) -> bool {
    if error.is_timeout() || error.is_connect() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
            if matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof) {
                return true;
            }
        }
        // hyper's IncompleteMessage: the connection ended before a response began.
        if e.to_string().contains("connection closed before message completed") {
            return true;
        }
        cause = e.source();
    }
    false
}

/// After try number `tries` of `request` got no (whole) answer (`error`, after `took`): the
/// pause before the next try, or why the request stays unanswered (its case is ignored). Only an
/// idempotent read is tried again, within the run's budget ([`crate::harness::transport::throttle::RUN_RETRIES`]).
fn unanswered(
    throttle: &crate::harness::transport::throttle::Throttle,
    endpoint: &str,
    request: &str,
    error: &reqwest::Error,
    idempotent: bool,
    tries: u32,
    took: Duration,
) -> Result<Duration, Stop> {
    use crate::harness::transport::throttle::Failure;
    let failure = if error.is_timeout() { Failure::Timeout } else { Failure::Connection };
    let budget = throttle.failed(endpoint, failure);
    if idempotent && tries < MAX_TRIES && budget {
        return Ok(Duration::from_millis(500) * 2u32.pow(tries - 1));
    }
    throttle.unanswered();
    let why = if let Some(tripped) = throttle.tripped(endpoint) {
        tripped
    } else if !idempotent {
        "not retried: it is not idempotent".to_string()
    } else if tries < MAX_TRIES {
        "not retried: the run's retry budget is spent".to_string()
    } else {
        format!("{tries} tries")
    };
    Err(Stop::transport(format!(
        "not judged: the target did not answer {request} in {:.1} s ({}; {why}); transport trouble is not a \
         violation (§8), see the robustness note",
        took.as_secs_f64().max(0.0),
        transport_error(error)
    )))
}

/// Longest wait a `Retry-After` buys.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// The wait a `Retry-After` value asks for, in seconds (the HTTP-date form is not honoured):
/// anything that is not a finite number (`NaN`, `inf`) is ignored, and the wait is kept
/// between 50 ms and [`MAX_RETRY_WAIT`].
fn retry_wait(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite())?;
    let seconds = seconds.clamp(0.05, MAX_RETRY_WAIT.as_secs_f64());
    Duration::try_from_secs_f64(seconds).ok()
}

/// `METHOD /path?query`, relative to the host (the base URL is in the report header). Path and
/// query are cut at a few hundred characters each: a target chooses cursors and ids.
pub(crate) fn describe(method: &Method, url: &Url) -> String {
    const MAX: usize = 300;
    let path = redact::shorten(url.path(), MAX);
    match url.query() {
        Some(q) => format!("{method} {path}?{}", redact::shorten(q, MAX)),
        None => format!("{method} {path}"),
    }
}

fn transport_error(e: &reqwest::Error) -> String {
    crate::harness::transport::reach::network_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that trickles (headers at once, then a byte a second) ends at the request's
    /// total deadline, not when some chunk takes too long.
    #[tokio::test]
    async fn a_trickling_body_ends_at_the_request_deadline() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = [0u8; 1024];
                    let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await;
                    let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n").await;
                    for _ in 0..100 {
                        if socket.write_all(b" ").await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                });
            }
        });
        let api = Api::new(&format!("http://{addr}"), None, None, Duration::from_secs(1)).unwrap();
        let started = std::time::Instant::now();
        let result = api.get(&["v1", "accounts", "acc_1"], &[]).await;
        assert!(result.is_err_and(|e| e.is_transport()), "unjudged, not failed");
        // Three tries of about a second each, and the pauses between them: far below 100 × 0.3 s.
        assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    }

    /// A server that reads each request and closes without a byte of an answer: a read is sent
    /// again (it may have been an idle close), a `POST` exactly once (it may have been done).
    #[tokio::test]
    async fn a_post_is_never_sent_twice_and_a_read_is_sent_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heard = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let log = heard.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = [0u8; 1024];
                let n = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&head[..n]).lines().next().unwrap_or("").to_string();
                log.lock().unwrap().push(line);
                drop(socket);
            }
        });
        let api = Api::new(&format!("http://{addr}"), Some("k".into()), None, Duration::from_secs(2)).unwrap();
        let created = api.send(Method::POST, &["v1", "connections"], &[], Auth::Primary).await;
        assert!(created.is_err_and(|e| e.is_transport()));
        let posts = heard.lock().unwrap().iter().filter(|l| l.starts_with("POST")).count();
        assert_eq!(posts, 1, "{:?}", heard.lock().unwrap());
        let read = api.get(&["v1", "accounts", "acc_1"], &[]).await;
        assert!(read.is_err_and(|e| e.is_transport()));
        let gets = heard.lock().unwrap().iter().filter(|l| l.starts_with("GET")).count();
        assert!(gets > 1, "{:?}", heard.lock().unwrap());
    }

    #[test]
    fn retry_after_is_read_defensively() {
        for hostile in ["NaN", "inf", "-inf", "1e400", "abc", ""] {
            assert!(retry_wait(hostile).is_none_or(|w| w <= MAX_RETRY_WAIT), "{hostile}");
        }
        assert_eq!(retry_wait("-5"), Some(Duration::from_millis(50)));
        assert_eq!(retry_wait("99999999999"), Some(MAX_RETRY_WAIT));
    }
}
