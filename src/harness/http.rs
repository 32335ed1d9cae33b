//! The harness's HTTP client for the target's `/v1` API: every request bounded in time and in
//! body size, every exchange described as `METHOD /path?query` for failure messages.

use super::outcome::Stop;
use reqwest::{Method, Url};
use serde_json::Value;
use std::cell::RefCell;
use std::time::Duration;

tokio::task_local! {
    /// The requests the running case has sent, for its reproduction.
    static SENT: RefCell<Vec<Sent>>;
}

/// A request as sent, without its secrets: enough to replay it with `curl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub method: String,
    pub url: String,
    pub auth: Auth,
    /// `GET /v1/accounts/acc_1/transactions?limit=3`, as failure messages name it.
    pub request: String,
}

impl Sent {
    /// A `curl` command that replays the request, keys written as environment variables.
    pub fn curl(&self) -> String {
        let auth = match &self.auth {
            Auth::Primary => " -H \"Authorization: Bearer $BANKCONF_API_KEY\"".to_string(),
            Auth::Second => " -H \"Authorization: Bearer $BANKCONF_SECOND_API_KEY\"".to_string(),
            Auth::Missing => String::new(),
            Auth::Header(h) => format!(" -H 'Authorization: {}'", h.replace('\'', "'\\''")),
        };
        let body = if self.method == "POST" { " -H 'Content-Type: application/json'" } else { "" };
        format!("curl -sS -i -X {}{auth}{body} '{}'", self.method, self.url.replace('\'', "%27"))
    }
}

/// Most requests a case's log keeps (the latest); a failure names one of its last requests.
const MAX_LOGGED: usize = 2048;

/// Records `sent` as the last request of the running case (a property records the request of
/// its shrunk failing input, sent from its own thread).
pub fn record(sent: Sent) {
    let _ = SENT.try_with(|log| {
        let mut log = log.borrow_mut();
        if log.len() >= MAX_LOGGED {
            log.drain(..MAX_LOGGED / 2);
        }
        log.push(sent);
    });
}

/// Runs `case` while recording the requests it sends; returns its output and the latest ones.
pub async fn recording<F: std::future::Future>(case: F) -> (F::Output, Vec<Sent>) {
    SENT.scope(RefCell::new(Vec::new()), async {
        let out = case.await;
        let log = SENT.with(|sent| std::mem::take(&mut *sent.borrow_mut()));
        (out, log)
    })
    .await
}

/// The request that shows a failure: the latest one its message names, else the latest sent.
pub fn evidence<'a>(message: &str, log: &'a [Sent]) -> Option<&'a Sent> {
    log.iter().rev().find(|s| message.contains(&s.request)).or(log.last())
}

/// Largest response body read; a target that sends more is cut off (and fails the case).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// Which credentials a request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Bearer <key of the client under test>`.
    Primary,
    /// `Bearer <key of the second client>`.
    Second,
    /// No `Authorization` header.
    Missing,
    /// This exact header value.
    Header(String),
}

/// One request and its answer.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// `GET /v1/accounts/acc_1/transactions?limit=3`.
    pub request: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: String,
}

impl Exchange {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn is_server_error(&self) -> bool {
        self.status >= 500
    }

    /// The start of the body, for messages, without control characters (a hostile body must
    /// not drive the terminal).
    pub fn snippet(&self) -> String {
        const MAX: usize = 160;
        let cleaned: String = self.body.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let body = cleaned.trim();
        if body.chars().count() <= MAX {
            body.to_string()
        } else {
            format!("{}…", body.chars().take(MAX).collect::<String>())
        }
    }

    /// `status 500: {"error":…}`, for messages.
    pub fn summary(&self) -> String {
        if self.body.trim().is_empty() {
            format!("status {} (empty body)", self.status)
        } else {
            format!("status {}: {}", self.status, self.snippet())
        }
    }

    /// The JSON body of a 2xx answer, or a failure naming the request and what came back.
    pub fn success_json(&self) -> Result<Value, Stop> {
        if !self.is_success() {
            return Err(Stop::fail(format!("{}: expected 2xx, got {}", self.request, self.summary())));
        }
        serde_json::from_str(&self.body)
            .map_err(|e| Stop::fail(format!("{}: expected a JSON body, got {} ({e})", self.request, self.summary())))
    }
}

/// Client of the target's API.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    browser: reqwest::Client,
    base: Url,
    key: Option<String>,
    second_key: Option<String>,
    throttle: std::sync::Arc<super::throttle::Throttle>,
}

impl Api {
    pub fn new(
        base_url: &str,
        key: Option<String>,
        second_key: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let mut base = Url::parse(base_url).map_err(|e| anyhow::anyhow!("base URL {base_url:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            anyhow::bail!("base URL {base_url:?}: only http and https are supported");
        }
        // Paths are appended below whatever path the base URL has.
        let trimmed = base.path().trim_end_matches('/').to_string();
        base.set_path(&trimmed);
        let builder =
            || reqwest::Client::builder().timeout(timeout).connect_timeout(timeout.min(Duration::from_secs(5)));
        let client = builder().redirect(reqwest::redirect::Policy::none()).build()?;
        // Assets are fetched as a browser would: following a few redirects.
        let browser = builder().redirect(reqwest::redirect::Policy::limited(5)).build()?;
        Ok(Self { client, browser, base, key, second_key, throttle: Default::default() })
    }

    /// Paces this client's requests (and its clones') with `throttle`.
    pub fn with_throttle(mut self, throttle: std::sync::Arc<super::throttle::Throttle>) -> Self {
        self.throttle = throttle;
        self
    }

    pub fn base_url(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// The run's pacing (for the report's count of 429s).
    pub fn throttle(&self) -> &super::throttle::Throttle {
        &self.throttle
    }

    pub fn has_second_key(&self) -> bool {
        self.second_key.is_some()
    }

    /// The keys this run holds (for checks that a key is not exposed; never print them).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.key.iter().chain(self.second_key.iter()).map(String::as_str)
    }

    /// The URL of `segments` below the base, each segment percent-encoded (ids are opaque).
    pub fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
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

    /// Whether anything answers HTTP at the base URL (the answer itself is not read).
    pub async fn reachable(&self) -> Result<(), String> {
        let url = self.url(&["v1", "connections"], &[]);
        match self.client.get(url).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("no answer at {}: {}", self.base_url(), transport_error(&e))),
        }
    }

    /// `GET` with the primary key.
    pub async fn get(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Exchange, Stop> {
        self.send(Method::GET, segments, query, Auth::Primary).await
    }

    pub async fn send(
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
        };
        let url = self.url(segments, query);
        record(Sent { method: method.to_string(), url: url.to_string(), auth, request: describe(&method, &url) });
        self.exchange(&self.client, method, url, authorization, "application/json").await
    }

    /// `GET` of a static asset (the widget script, §1) as a browser loads it: no key, any
    /// content type accepted, redirects followed.
    pub async fn fetch_asset(&self, segments: &[&str]) -> Result<Exchange, Stop> {
        let url = self.url(segments, &[]);
        record(Sent {
            method: "GET".into(),
            url: url.to_string(),
            auth: Auth::Missing,
            request: describe(&Method::GET, &url),
        });
        self.exchange(&self.browser, Method::GET, url, None, "*/*").await
    }

    /// Sends one request and reads its answer, bounded in size. Rate limiting is not a
    /// violation (§8 leaves rate limits open): a 429, or a 503 with `Retry-After`, is retried as
    /// [`super::throttle`] decides.
    async fn exchange(
        &self,
        client: &reqwest::Client,
        method: Method,
        url: Url,
        authorization: Option<String>,
        accept: &str,
    ) -> Result<Exchange, Stop> {
        let request = describe(&method, &url);
        let mut spent = Duration::ZERO;
        loop {
            self.throttle.acquire().await;
            let mut builder = client.request(method.clone(), url.clone()).header("Accept", accept);
            if method == Method::POST {
                builder = builder.header("Content-Type", "application/json");
            }
            if let Some(h) = &authorization {
                builder = builder.header("Authorization", h);
            }
            let mut response = builder
                .send()
                .await
                .map_err(|e| Stop::fail(format!("{request}: no answer: {}", transport_error(&e))))?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok());
            if status == 429 || (status == 503 && retry_after.is_some()) {
                if let Some(pause) = self.throttle.refused(status, retry_after, &mut spent) {
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
            let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
            let mut body = Vec::new();
            loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        body.extend_from_slice(&chunk);
                        if body.len() > MAX_BODY {
                            return Err(Stop::fail(format!("{request}: response body exceeds {} MiB", MAX_BODY >> 20)));
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        return Err(Stop::fail(format!("{request}: reading the body failed: {}", transport_error(&e))))
                    }
                }
            }
            return Ok(Exchange { request, status, content_type, body: String::from_utf8_lossy(&body).into_owned() });
        }
    }
}

/// `METHOD /path?query`, relative to the host (the base URL is in the report header).
pub fn describe(method: &Method, url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{method} {}?{q}", url.path()),
        None => format!("{method} {}", url.path()),
    }
}

fn transport_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_string();
    }
    // The innermost cause says what happened ("Connection refused"); the outer ones repeat the URL.
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}
