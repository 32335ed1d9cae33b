//! The harness's HTTP client for the target's `/v1` API: every request bounded in time and in
//! body size, every exchange described as `METHOD /path?query` for failure messages.
//! `exchange` sends one request and reads its answer; `retry` decides what an unanswered one
//! is worth.

use crate::harness::rules::http::Coding;
use crate::harness::rules::invariants::Client;
use crate::harness::rules::secrets;
use crate::harness::transport::answers::{Answer, AnswerLog, Auth, Sent, EXCERPT};
use crate::harness::transport::har::Recorder;
use crate::harness::transport::reach::Transport;
use crate::harness::vocab::errors::{SetupError, UrlProblem};
use crate::harness::vocab::outcome::Stop;
use crate::harness::vocab::redact;
use reqwest::{Method, Url};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod exchange;
mod retry;

use retry::transport_error;

pub(crate) use exchange::Exchange;

/// Most widget tokens searched for in each answer: a run makes some 60 connections.
const MAX_TOKENS: usize = 500;

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
    /// Creations under a key hold it shared; [`Api::quiet`] holds it alone, so that no creation
    /// of the run runs next to an experiment that must be told apart from them
    /// (`invariants.cause`).
    creations: Arc<tokio::sync::RwLock<()>>,
    /// The widget tokens the run's creations were answered with, and whose (the client whose
    /// key created the connection), shared by its clones: each answer is searched for them too.
    tokens: Arc<std::sync::Mutex<secrets::TokenSearch<Client>>>,
}

/// `--base-url` as a URL, if it is an http(s) one: parsed once, with the other flags
/// ([`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate)), into the plan.
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
        Self::with_transport(parse_base_url(base_url)?, key, second_key, timeout, &Transport::default())
    }

    /// `Api::new` (the tests'), its clients built with the run's TLS settings and extra headers.
    pub(crate) fn with_transport(
        mut base: Url,
        key: Option<String>,
        second_key: Option<String>,
        timeout: Duration,
        transport: &Transport,
    ) -> Result<Self, SetupError> {
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
            creations: Arc::default(),
            tokens: Arc::default(),
        })
    }

    /// No creation of the run (under a key, this client's or its clones') is in flight or starts
    /// while the guard lives.
    pub(crate) async fn quiet(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.creations.clone().write_owned().await
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

    /// The base URL, parsed (its path without a trailing `/`).
    pub(crate) fn base(&self) -> &Url {
        &self.base
    }

    /// The run's pacing (for the report's count of 429s).
    pub(crate) fn throttle(&self) -> &crate::harness::transport::throttle::Throttle {
        &self.throttle
    }

    pub(crate) fn has_second_key(&self) -> bool {
        self.second_key.is_some()
    }

    /// The keys this run holds (for checks that a key is not exposed; never print them).
    /// The API key of `client`, if the run has it.
    pub(crate) fn client_key(&self, client: Client) -> Option<&str> {
        match client {
            Client::First => self.key.as_deref(),
            Client::Second => self.second_key.as_deref(),
        }
    }

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
            return Err(Stop::found(
                crate::harness::vocab::kind::AnswerKind::DotSegment,
                format!(
                    "cannot request /{}: the id {bad:?} is a dot segment, which URLs remove, so no request can name it",
                    segments.join("/")
                ),
            ));
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
        let creation = method == Method::POST && segments == ["v1", "connections"];
        let _creating = match (&auth, creation) {
            (Auth::Primary | Auth::Second, true) => Some(self.creations.read().await),
            _ => None,
        };
        let sent = Sent { method: method.to_string(), url: url.to_string(), auth, request: describe(&method, &url) };
        let sent_at = Instant::now();
        let sent_authorization = authorization.clone();
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
        let sender = match &sent.auth {
            Auth::Primary => Some(Client::First),
            Auth::Second => Some(Client::Second),
            _ => None,
        };
        let (coding, revealed, tokens) = self.whole(&result, sent_authorization.as_deref(), (sender, segments));
        if creation {
            self.learn_token(&result, sender);
        }
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
            coding,
            revealed,
            tokens,
        });
        match &mut result {
            Ok(x) => x.seq = seq,
            // A finding about the answer itself (too large): it rests on it.
            Err(Stop::Fail(f)) => *f = std::mem::take(f).shown_by(seq),
            Err(_) => {}
        }
        result
    }

    /// What the answer log keeps of an answer beyond its body: its coding, whose keys it
    /// carried besides what `sent` (the request's credential) sent, and whose widget tokens it
    /// carried though `sender` (the client whose key the request sent, if any) does not own them,
    /// searched in its headers and whole body before any redaction (the text is not kept). The
    /// request's own path segments are taken out before the tokens are searched: an echo of the
    /// id asked for is the sender's own, even where a server made its tokens of the same letters.
    fn whole(
        &self,
        result: &Result<Exchange, Stop>,
        sent: Option<&str>,
        (sender, path): (Option<Client>, &[&str]),
    ) -> (Coding, Vec<Client>, Vec<Client>) {
        let Ok(x) = result else { return (Coding::Identity, Vec::new(), Vec::new()) };
        let keys: Vec<(Client, &str)> = [(Client::First, &self.key), (Client::Second, &self.second_key)]
            .into_iter()
            .filter_map(|(c, k)| Some((c, k.as_deref()?)))
            .collect();
        let text = secrets::searched(x.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), &x.body);
        let sent_token = sent.map(|s| s.strip_prefix("Bearer ").unwrap_or(s).trim()).filter(|s| s.len() >= 8);
        let echo_free = path
            .iter()
            .copied()
            .chain(sent_token)
            .filter(|p| p.len() >= 8)
            .fold(text.clone(), |t, p| t.replace(p, " "));
        let shown = self.tokens.lock().unwrap_or_else(|e| e.into_inner()).shown(&echo_free, sender);
        (x.coding.clone(), secrets::revealed(&text, sent, &keys), shown)
    }

    /// Keeps the widget token a creation's 2xx answer gave (§2.1), as `sender`'s.
    fn learn_token(&self, result: &Result<Exchange, Stop>, sender: Option<Client>) {
        let (Ok(x), Some(owner)) = (result, sender) else { return };
        let token = serde_json::from_str::<serde_json::Value>(&x.body)
            .ok()
            .and_then(|v| v.get("widgetToken").and_then(|t| t.as_str()).map(str::to_string));
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(token) = token.filter(|t| x.is_success() && t.len() >= 8 && tokens.len() < MAX_TOKENS) {
            tokens.add(owner, token);
        }
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
        let (coding, revealed, tokens) = self.whole(&result, None, (None, segments));
        let (segments, query) = (segments.iter().map(|s| s.to_string()).collect(), Vec::new());
        let answered_at = Instant::now();
        let content_type =
            result.as_ref().ok().and_then(|x| x.content_type.as_deref()).map(|t| redact::shorten(t, 200));
        let (body, excerpt) = (None, None);
        let answer = Answer {
            seq: 0,
            sent,
            segments,
            query,
            status,
            body,
            content_type,
            excerpt,
            sent_at,
            answered_at,
            har,
            coding,
            revealed,
            tokens,
        };
        let seq = self.answers.push(answer);
        match &mut result {
            Ok(x) => x.seq = seq,
            // A finding about the answer itself (too large): it rests on it.
            Err(Stop::Fail(f)) => *f = std::mem::take(f).shown_by(seq),
            Err(_) => {}
        }
        result
    }
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
}
