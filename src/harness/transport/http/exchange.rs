//! One request and its answer: the [`Exchange`] a check reads, and [`Api::exchange`], which
//! sends it, bounded in time and size, paced and retried as the throttle decides.

use super::retry::{closed_unanswered, retry_wait, unanswered, IDLE_RESENDS};
use super::{describe, Api};
use crate::harness::rules::http::Coding;
use crate::harness::transport::har::Exchanged;
use crate::harness::vocab::budget;
use crate::harness::vocab::kind::AnswerKind;
use crate::harness::vocab::outcome::{Failure, IgnoreCause, Problem, Stop};
use crate::harness::vocab::redact;
use reqwest::{Method, Url};
use serde_json::Value;
use std::time::Duration;

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
    /// Every header of the answer, as received (at most [`MAX_HEADERS`], values cut to
    /// [`MAX_HEADER_VALUE`] bytes): secrets and all, so it is never shown, only searched
    /// ([`crate::harness::rules::secrets`]) and redacted into the answer log.
    pub headers: Vec<(String, String)>,
    /// Its `Content-Encoding` and what decoding gave ([`crate::harness::rules::http::decode`]):
    /// `body` is the decoded content.
    pub coding: Coding,
}

/// Most headers kept of one answer, and the longest value kept of each.
pub(crate) const MAX_HEADERS: usize = 64;
pub(crate) const MAX_HEADER_VALUE: usize = 2048;

/// The headers of `response` as [`Exchange::headers`] keeps them.
fn headers_of(response: &reqwest::Response) -> Vec<(String, String)> {
    response
        .headers()
        .iter()
        .take(MAX_HEADERS)
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes());
            (name.as_str().to_string(), redact::shorten(&value, MAX_HEADER_VALUE))
        })
        .collect()
}

impl Exchange {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub(crate) fn is_server_error(&self) -> bool {
        self.status >= 500
    }

    /// Fails with a finding of `kind`, said as `message`, unless `condition` holds ([`Exchange::fails`]).
    pub(crate) fn ensure_found(
        &self,
        kind: impl Into<crate::harness::vocab::kind::Kind>,
        condition: bool,
        message: impl FnOnce() -> String,
    ) -> Result<(), Stop> {
        if condition {
            Ok(())
        } else {
            Err(self.fails(Problem::found(kind, [], message())))
        }
    }

    /// A finding this answer takes part in but does not show alone (compared with another read,
    /// an event, the reference): resting on it, never reproduced by pasting its request.
    pub(crate) fn cites(&self, problem: impl Into<Failure>) -> Stop {
        Stop::Fail(problem.into().on_answer(self.seq).requested(&self.request))
    }

    /// A finding this answer shows by itself, `problem` (its kind, the ids it is about, what it
    /// compared), resting on it; pasting its request asks the same question again
    /// ([`Failure::shown_by`]). A finding that needs more than this answer is [`Exchange::cites`].
    pub(crate) fn fails(&self, problem: Problem) -> Stop {
        Stop::Fail(Failure::from(problem).shown_by(self.seq).requested(&self.request))
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
            let detail = format!("expected 2xx, got {}", self.summary());
            return Err(self.fails(Problem::found(AnswerKind::NotSuccess, [], detail).expecting("2xx", self.summary())));
        }
        if let Some(at) = self.invalid_utf8 {
            let detail = format!(
                "expected a JSON body, which is UTF-8, but byte {at} of the body is not valid UTF-8: {}",
                self.summary()
            );
            return Err(self.fails(Problem::found(AnswerKind::NotUtf8, [], detail)));
        }
        if let Some(why) = budget::too_dense(self.body.as_bytes()) {
            return Err(self.fails(Problem::found(AnswerKind::TooDense, [], format!("not read: {why}"))));
        }
        serde_json::from_str(&self.body).map_err(|e| {
            let detail = format!("expected a JSON body, got {} ({e})", self.summary());
            self.fails(Problem::found(AnswerKind::NotJson, [], detail).expecting("a JSON body", self.summary()))
        })
    }
}

impl Api {
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
    pub(super) async fn exchange(
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
            let mut response = match request_of(client, &method, &url, authorization.as_deref(), accept).send().await {
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
            let headers = headers_of(&response);
            let content_encoding =
                response.headers().get("content-encoding").and_then(|v| v.to_str().ok()).map(str::to_string);
            let read = self.read_body(&mut response, &endpoint, &request).await?;
            drop(permit);
            let body = match read {
                Ok(body) => body,
                Err(e) => {
                    let pause =
                        unanswered(&self.throttle, &endpoint, &request, &e, idempotent, tries, clock.elapsed())?;
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            self.throttle.answered(&endpoint);
            let (body, coding) = crate::harness::rules::http::decode(content_encoding.as_deref(), body);
            let invalid_utf8 = std::str::from_utf8(&body).err().map(|e| e.valid_up_to());
            let body = String::from_utf8_lossy(&body).into_owned();
            let har = record(content_type.as_deref(), &body);
            return Ok(Exchange { request, status, content_type, body, invalid_utf8, seq: None, har, headers, coding });
        }
    }

    /// The body of `response`, whole, or the error that cut it. A body over [`MAX_BODY`] is a
    /// bound of the harness's, not a violation (§8 sets no size): the request's case is ignored
    /// (cause `bound`), since what was not read could hold its violation or its pass.
    async fn read_body(
        &self,
        response: &mut reqwest::Response,
        endpoint: &str,
        request: &str,
    ) -> Result<Result<Vec<u8>, reqwest::Error>, Stop> {
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_BODY {
                        self.throttle.answered(endpoint);
                        return Err(Stop::Ignore(
                            IgnoreCause::Bound,
                            format!(
                                "not judged: {request}: the response body exceeds the {} MiB the harness reads, so \
                                 what it holds was not seen (no size is set by the spec, §8)",
                                MAX_BODY >> 20
                            ),
                        ));
                    }
                }
                Ok(None) => return Ok(Ok(body)),
                Err(e) => return Ok(Err(e)),
            }
        }
    }
}

/// The request of one try: `Accept`, a JSON `Content-Type` for a `POST`, the authorization.
fn request_of(
    client: &reqwest::Client,
    method: &Method,
    url: &Url,
    authorization: Option<&str>,
    accept: &str,
) -> reqwest::RequestBuilder {
    let mut builder = client.request(method.clone(), url.clone()).header("Accept", accept);
    if *method == Method::POST {
        builder = builder.header("Content-Type", "application/json");
    }
    if let Some(h) = authorization {
        builder = builder.header("Authorization", h);
    }
    builder
}
