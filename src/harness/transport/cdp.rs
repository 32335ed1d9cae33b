//! A small client of the Chrome DevTools Protocol, for the handful of calls the widget cases
//! make ([`crate::harness::transport::browser`]): pages, `Runtime.evaluate`, and the network events of a page. It
//! replaces a generated client of the whole protocol that took minutes to compile.
//!
//! It speaks over `--remote-debugging-pipe`: Chromium reads commands on its fd 3 and writes
//! answers and events on its fd 4, each message a JSON object ended by a NUL byte. No port, no
//! WebSocket: the pipes are this process's alone. A message is a command `{id, method,
//! params, sessionId}` (the session of one page, from `Target.attachToTarget` with `flatten`),
//! its answer `{id, result}` or `{id, error}`, or an event `{method, params, sessionId}`.
//!
//! The browser is trusted no more than a target: every call has a timeout, a message longer
//! than [`MAX_MESSAGE`] is skipped as it arrives (never held), an event nobody reads in time is
//! dropped (each listener's queue is bounded), and a browser that dies or talks nonsense ends
//! the calls waiting on it with a [`CdpError`], never a hang or a panic.

use crate::harness::transport::reach;
use crate::harness::vocab::errors::CdpError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The longest message read: longer ones are skipped (the call they answer fails with
/// [`CdpError::TooLarge`]). The probe's answer is at most 16 MiB of text before JSON escapes.
pub(crate) const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// Events a listener may hold unread; more are dropped.
const MAX_QUEUED_EVENTS: usize = 1024;

/// Characters kept of a text from the browser (an error message, an exception).
const MAX_TEXT: usize = 300;

/// One event of the browser: its method (`Network.loadingFinished`) and parameters.
#[derive(Clone, Debug)]
pub struct Event {
    pub method: String,
    pub params: Value,
}

/// A connection to one browser over its DevTools pipes. Cheap to clone; its reader ends when
/// the browser closes its end, and both its tasks when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Cdp {
    inner: Arc<Inner>,
    _tasks: Arc<Tasks>,
}

/// The tasks that write commands and read messages, aborted with the last [`Cdp`].
struct Tasks([JoinHandle<()>; 2]);

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.iter().for_each(JoinHandle::abort);
    }
}

/// Commands the writer may hold unwritten.
const MAX_QUEUED_COMMANDS: usize = 64;

struct Inner {
    /// To the writer task: whole messages, so that a call given up mid-way never leaves half
    /// a command in the pipe.
    writer: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    /// The bound on each call's answer.
    timeout: Duration,
    /// The longest message read ([`MAX_MESSAGE`]).
    limit: usize,
    state: StdMutex<State>,
}

#[derive(Default)]
struct State {
    /// The reader has ended: every call fails at once.
    closed: bool,
    /// Calls awaiting their answer, by id.
    pending: HashMap<u64, Pending>,
    listeners: Vec<Listener>,
}

struct Pending {
    method: &'static str,
    answer: oneshot::Sender<Result<Value, CdpError>>,
}

/// Who wants which events: of one page's session (or the browser's, `None`), by method.
struct Listener {
    session: Option<String>,
    methods: &'static [&'static str],
    queue: mpsc::Sender<Event>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a message of the browser may hold.
#[derive(Deserialize)]
struct Incoming {
    id: Option<u64>,
    result: Option<Value>,
    error: Option<RemoteError>,
    method: Option<String>,
    params: Option<Value>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

#[derive(Deserialize)]
struct RemoteError {
    #[serde(default)]
    message: String,
}

impl Cdp {
    /// A connection that writes commands on `to_browser` (the browser's fd 3) and reads on
    /// `from_browser` (its fd 4); every call is answered within `timeout` or fails.
    pub(crate) fn new(to_browser: pipe::Sender, from_browser: pipe::Receiver, timeout: Duration) -> Self {
        Self::with_limit(to_browser, from_browser, timeout, MAX_MESSAGE)
    }

    /// [`Cdp::new`] reading messages of at most `limit` bytes.
    fn with_limit(to_browser: pipe::Sender, from_browser: pipe::Receiver, timeout: Duration, limit: usize) -> Self {
        let (writer, commands) = mpsc::channel(MAX_QUEUED_COMMANDS);
        let inner = Arc::new(Inner { writer, next_id: AtomicU64::new(1), timeout, limit, state: StdMutex::default() });
        let writer = tokio::spawn(write(to_browser, commands));
        let reader = tokio::spawn(read(from_browser, inner.clone()));
        Self { inner, _tasks: Arc::new(Tasks([writer, reader])) }
    }

    /// Calls `method` of the browser (or of the page whose session is `session`) and returns
    /// its `result`. Dropped before the answer (a caller's own timeout), it forgets the call.
    pub(crate) async fn call(
        &self,
        method: &'static str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CdpError> {
        self.call_within(method, params, session, self.inner.timeout).await
    }

    /// [`Cdp::call`] with a bound of its own.
    pub(crate) async fn call_within(
        &self,
        method: &'static str,
        params: Value,
        session: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        {
            let mut state = self.inner.state();
            if state.closed {
                return Err(CdpError::Closed);
            }
            state.pending.insert(id, Pending { method, answer });
        }
        // Forgets the call however this future ends (answered, timed out, dropped).
        struct Forget<'a>(&'a Inner, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.state().pending.remove(&self.1);
            }
        }
        let _forget = Forget(&self.inner, id);
        let mut message = serde_json::json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        // JSON escapes a NUL inside a string: the only NUL written is the terminator.
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        let exchange = async {
            self.inner.writer.send(bytes).await.map_err(|_| CdpError::Closed)?;
            answered.await.map_err(|_| CdpError::Closed)?
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| CdpError::Timeout { method, waited: timeout })?
    }

    /// From now on, the events named in `methods` of `session` (a page's; `None`: the
    /// browser's own), in the order the browser sent them; at most [`MAX_QUEUED_EVENTS`] wait
    /// unread (more are dropped). The queue ends when the browser does.
    pub(crate) fn events(&self, session: Option<&str>, methods: &'static [&'static str]) -> mpsc::Receiver<Event> {
        let (queue, events) = mpsc::channel(MAX_QUEUED_EVENTS);
        let mut state = self.inner.state();
        if !state.closed {
            state.listeners.push(Listener { session: session.map(str::to_string), methods, queue });
        }
        events
    }

    /// Opens a blank page, attached, with the domains the widget cases use enabled (`Page`
    /// with its lifecycle events, `Network`, `Runtime`).
    pub(crate) async fn open_page(&self) -> Result<Page, CdpError> {
        let created = self.call("Target.createTarget", serde_json::json!({ "url": "about:blank" }), None).await?;
        let target = string_at(&created, "targetId", "Target.createTarget")?;
        // Closed again if anything below fails.
        let mut page = Page { cdp: self.clone(), target, session: String::new(), helpers: Vec::new() };
        let attach = serde_json::json!({ "targetId": page.target, "flatten": true });
        let attached = self.call("Target.attachToTarget", attach, None).await?;
        page.session = string_at(&attached, "sessionId", "Target.attachToTarget")?;
        page.call("Page.enable", Value::Object(Default::default())).await?;
        page.call("Page.setLifecycleEventsEnabled", serde_json::json!({ "enabled": true })).await?;
        page.call("Network.enable", Value::Object(Default::default())).await?;
        page.call("Runtime.enable", Value::Object(Default::default())).await?;
        Ok(page)
    }
}

/// `value[key]` as a string, or an odd answer of `method`.
fn string_at(value: &Value, key: &str, method: &'static str) -> Result<String, CdpError> {
    value[key].as_str().map(str::to_string).ok_or_else(|| CdpError::Odd { method, reason: format!("no {key}") })
}

/// At most [`MAX_TEXT`] characters of `text`.
fn cut(text: &str) -> String {
    text.chars().take(MAX_TEXT).collect()
}

/// Writes each command whole, until the browser's pipe breaks (its calls then fail as closed).
async fn write(mut to_browser: pipe::Sender, mut commands: mpsc::Receiver<Vec<u8>>) {
    while let Some(command) = commands.recv().await {
        if to_browser.write_all(&command).await.is_err() {
            return;
        }
    }
}

/// Reads the browser's messages until its pipe ends, then fails what still waits.
async fn read(mut from_browser: pipe::Receiver, inner: Arc<Inner>) {
    let mut message = Vec::new();
    // While a message over the bound is skipped: the id it answers, if it said one.
    let mut skipping: Option<Option<u64>> = None;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from_browser.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for (i, part) in chunk[..n].split(|b| *b == 0).enumerate() {
            // Every part but the first starts a new message.
            if i > 0 {
                match skipping.take() {
                    Some(id) => too_large(&inner, id),
                    None => dispatch(&inner, &message),
                }
                message.clear();
            }
            if skipping.is_some() {
                continue;
            }
            if message.len() + part.len() > inner.limit {
                message.extend_from_slice(&part[..part.len().min(64)]);
                skipping = Some(id_of(&message));
                message = Vec::new();
            } else {
                message.extend_from_slice(part);
            }
        }
        // A message is kept whole until its NUL; a long buffer is given back once used.
        if message.is_empty() && message.capacity() > 1024 * 1024 {
            message = Vec::new();
        }
    }
    let mut state = inner.state();
    state.closed = true;
    state.listeners.clear();
    for (_, pending) in state.pending.drain() {
        let _ = pending.answer.send(Err(CdpError::Closed));
    }
}

/// The id at the start of a message (`{"id":12,…`: Chromium writes it first), if any.
fn id_of(start: &[u8]) -> Option<u64> {
    let rest = start.strip_prefix(b"{\"id\":")?;
    let digits: Vec<u8> = rest.iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Fails the call a skipped message answered.
fn too_large(inner: &Inner, id: Option<u64>) {
    let Some(id) = id else { return };
    if let Some(pending) = inner.state().pending.remove(&id) {
        let _ = pending.answer.send(Err(CdpError::TooLarge { method: pending.method, limit: inner.limit }));
    }
}

/// One whole message: an answer to its call, or an event to its listeners. Anything else
/// (not JSON, an answer nobody waits for) is dropped.
fn dispatch(inner: &Inner, message: &[u8]) {
    let Ok(incoming) = serde_json::from_slice::<Incoming>(message) else { return };
    let mut state = inner.state();
    if let Some(id) = incoming.id {
        let Some(pending) = state.pending.remove(&id) else { return };
        let answer = match incoming.error {
            Some(error) => Err(CdpError::Refused { method: pending.method, message: cut(&error.message) }),
            None => Ok(incoming.result.unwrap_or(Value::Null)),
        };
        let _ = pending.answer.send(answer);
    } else if let Some(method) = incoming.method {
        let params = incoming.params.unwrap_or(Value::Null);
        state.listeners.retain(|listener| {
            if listener.session != incoming.session_id || !listener.methods.contains(&method.as_str()) {
                return !listener.queue.is_closed();
            }
            let event = Event { method: method.clone(), params: params.clone() };
            !matches!(listener.queue.try_send(event), Err(mpsc::error::TrySendError::Closed(_)))
        });
    }
}

/// One page (a target attached in a session of its own), closed when dropped, and the tasks
/// that serve it while it lives ([`Page::send_headers`]), aborted with it.
pub struct Page {
    cdp: Cdp,
    target: String,
    session: String,
    helpers: Vec<JoinHandle<()>>,
}

impl Page {
    /// Calls `method` in this page's session.
    pub async fn call(&self, method: &'static str, params: Value) -> Result<Value, CdpError> {
        self.cdp.call(method, params, Some(&self.session)).await
    }

    /// [`Page::call`] with a bound of its own.
    pub async fn call_within(&self, method: &'static str, params: Value, timeout: Duration) -> Result<Value, CdpError> {
        self.cdp.call_within(method, params, Some(&self.session), timeout).await
    }

    /// This page's events named in `methods`, from now on ([`Cdp::events`]).
    pub fn events(&self, methods: &'static [&'static str]) -> mpsc::Receiver<Event> {
        self.cdp.events(Some(&self.session), methods)
    }

    /// From now on, every request of this page to `origin` (as a browser writes it), and only
    /// there, carries `headers` too (the run's `--header`, which a gateway wants): paused there
    /// (`Fetch.enable`), continued with them added; other origins are never paused. Call it
    /// only with headers to send: it pauses every request to `origin`.
    pub async fn send_headers(&mut self, origin: &str, headers: &[(String, String)]) -> Result<(), CdpError> {
        let mut paused = self.events(&["Fetch.requestPaused"]);
        self.call("Fetch.enable", serde_json::json!({ "patterns": [{ "urlPattern": format!("{origin}/*") }] })).await?;
        let (cdp, session, origin, headers) =
            (self.cdp.clone(), self.session.clone(), reach::origin_of(origin), headers.to_vec());
        self.helpers.push(tokio::spawn(async move {
            while let Some(event) = paused.recv().await {
                let Some(id) = event.params["requestId"].as_str() else { continue };
                let mut params = serde_json::json!({ "requestId": id });
                if origin.is_some() && reach::origin_of(event.params["request"]["url"].as_str().unwrap_or("")) == origin
                {
                    params["headers"] =
                        Value::Array(reach::with_headers(&event.params["request"]["headers"], &headers));
                }
                let (cdp, session) = (cdp.clone(), session.clone());
                tokio::spawn(async move {
                    let _ = cdp.call("Fetch.continueRequest", params, Some(&session)).await;
                });
            }
        }));
        Ok(())
    }

    /// Navigates to `url` and waits for that document's `load` (an error page's included: a
    /// URL that cannot be loaded still gives a page), within the connection's timeout.
    pub async fn navigate(&self, url: &str) -> Result<(), CdpError> {
        const METHOD: &str = "Page.navigate";
        let mut lifecycle = self.events(&["Page.lifecycleEvent"]);
        let navigated = self.call(METHOD, serde_json::json!({ "url": url })).await?;
        // No loader: a navigation within the document, which loads nothing.
        let Some(loader) = navigated["loaderId"].as_str() else { return Ok(()) };
        let loaded = async {
            while let Some(event) = lifecycle.recv().await {
                if event.params["name"] == "load" && event.params["loaderId"] == loader {
                    return Ok(());
                }
            }
            Err(CdpError::Closed)
        };
        let waited = self.cdp.inner.timeout;
        tokio::time::timeout(waited, loaded).await.map_err(|_| CdpError::Timeout { method: METHOD, waited })?
    }

    /// Evaluates `expression` in the page, awaiting it if it is a promise, and reads its value
    /// (by value: JSON) as a `T`.
    pub async fn evaluate<T: DeserializeOwned>(&self, expression: &str) -> Result<T, CdpError> {
        const METHOD: &str = "Runtime.evaluate";
        let params = serde_json::json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let mut answer = self.call(METHOD, params).await?;
        if let Some(details) = answer.get("exceptionDetails") {
            let text = details["exception"]["description"].as_str().or(details["text"].as_str()).unwrap_or("");
            return Err(CdpError::Thrown { method: METHOD, text: cut(text) });
        }
        let value = answer["result"].get_mut("value").map(Value::take).unwrap_or(Value::Null);
        serde_json::from_value(value).map_err(|e| CdpError::Odd { method: METHOD, reason: cut(&e.to_string()) })
    }

    /// Closes the page, within a short bound.
    pub async fn close(mut self) {
        let target = serde_json::json!({ "targetId": std::mem::take(&mut self.target) });
        let _ = self.cdp.call_within("Target.closeTarget", target, None, Duration::from_secs(2)).await;
    }
}

impl Drop for Page {
    /// A page dropped unclosed (its caller timed out) is closed in the background.
    fn drop(&mut self) {
        self.helpers.iter().for_each(JoinHandle::abort);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.cdp.inner.state().closed || self.target.is_empty() {
            return;
        }
        let cdp = self.cdp.clone();
        let target = serde_json::json!({ "targetId": std::mem::take(&mut self.target) });
        runtime.spawn(async move {
            let _ = cdp.call_within("Target.closeTarget", target, None, Duration::from_secs(2)).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A connection to a fake browser: `answer` gets each command and returns the messages
    /// to write back (each ended by a NUL here); `None` closes the browser's pipes.
    fn fake(
        timeout: Duration,
        limit: usize,
        mut answer: impl FnMut(Value) -> Option<Vec<Vec<u8>>> + Send + 'static,
    ) -> Cdp {
        let (its_commands, to_browser) = std::io::pipe().unwrap();
        let (from_browser, its_answers) = std::io::pipe().unwrap();
        let mut commands = pipe::Receiver::from_owned_fd(its_commands.into()).unwrap();
        let mut answers = pipe::Sender::from_owned_fd(its_answers.into()).unwrap();
        tokio::spawn(async move {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = commands.read(&mut chunk).await {
                buffer.extend_from_slice(&chunk[..n]);
                while let Some(end) = buffer.iter().position(|b| *b == 0) {
                    let command: Value = serde_json::from_slice(&buffer[..end]).unwrap();
                    buffer.drain(..=end);
                    let Some(messages) = answer(command) else { return };
                    for mut message in messages {
                        message.push(0);
                        if answers.write_all(&message).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let to_browser = pipe::Sender::from_owned_fd(to_browser.into()).unwrap();
        let from_browser = pipe::Receiver::from_owned_fd(from_browser.into()).unwrap();
        Cdp::with_limit(to_browser, from_browser, timeout, limit)
    }

    fn message(value: Value) -> Vec<u8> {
        value.to_string().into_bytes()
    }

    fn pending(cdp: &Cdp) -> usize {
        cdp.inner.state().pending.len()
    }

    #[tokio::test]
    async fn answers_reach_their_calls_and_events_their_listeners() {
        let cdp = fake(Duration::from_secs(5), MAX_MESSAGE, |command| {
            let id = command["id"].clone();
            let session = command["sessionId"].clone();
            Some(vec![
                message(
                    json!({ "method": "Network.loadingFinished", "params": { "requestId": "other" }, "sessionId": "S2" }),
                ),
                message(json!({ "method": "Network.dataReceived", "params": {}, "sessionId": session })),
                message(
                    json!({ "method": "Network.loadingFinished", "params": { "requestId": "mine" }, "sessionId": session }),
                ),
                message(json!({ "id": id, "result": { "echo": command["method"] }, "sessionId": session })),
            ])
        });
        let mut events = cdp.events(Some("S1"), &["Network.loadingFinished"]);
        let answer = cdp.call("Page.enable", json!({}), Some("S1")).await.unwrap();
        assert_eq!(answer, json!({ "echo": "Page.enable" }));
        let event = events.recv().await.unwrap();
        assert_eq!(
            (event.method.as_str(), &event.params),
            ("Network.loadingFinished", &json!({ "requestId": "mine" }))
        );
        assert!(events.try_recv().is_err(), "another session's event, or another method, is not this listener's");
        assert_eq!(pending(&cdp), 0);
    }

    #[tokio::test]
    async fn a_protocol_error_is_refused_and_nonsense_is_skipped() {
        let cdp = fake(Duration::from_secs(5), MAX_MESSAGE, |command| {
            let id = command["id"].clone();
            Some(vec![
                b"not json \x1b[31m".to_vec(),
                message(json!({ "id": 999_999, "result": {} })),
                message(json!([1, 2, 3])),
                Vec::new(),
                message(json!({ "id": id, "error": { "code": -32000, "message": "x".repeat(10_000) } })),
            ])
        });
        let refused = cdp.call("Target.createTarget", json!({}), None).await.unwrap_err();
        let CdpError::Refused { method, message } = refused else { panic!("{refused:?}") };
        assert_eq!((method, message.chars().count()), ("Target.createTarget", MAX_TEXT));
    }

    #[tokio::test]
    async fn a_message_over_the_limit_fails_its_call_and_the_next_is_read() {
        let mut first = true;
        let cdp = fake(Duration::from_secs(5), 1000, move |command| {
            let id = command["id"].clone();
            let long = std::mem::take(&mut first);
            let body = if long { "y".repeat(100_000) } else { "short".into() };
            Some(vec![message(json!({ "id": id, "result": { "body": body } }))])
        });
        let skipped = cdp.call("Network.getResponseBody", json!({}), None).await;
        assert_eq!(skipped, Err(CdpError::TooLarge { method: "Network.getResponseBody", limit: 1000 }));
        let next = cdp.call("Network.getResponseBody", json!({}), None).await.unwrap();
        assert_eq!(next["body"], "short");
    }

    #[tokio::test]
    async fn a_browser_that_does_not_answer_times_out_and_the_call_is_forgotten() {
        let cdp = fake(Duration::from_millis(200), MAX_MESSAGE, |_| Some(Vec::new()));
        let silent = cdp.call("Runtime.evaluate", json!({}), None).await;
        assert_eq!(silent, Err(CdpError::Timeout { method: "Runtime.evaluate", waited: Duration::from_millis(200) }));
        assert_eq!(pending(&cdp), 0);
        // A call dropped by its caller is forgotten too.
        let dropped = tokio::time::timeout(Duration::from_millis(50), cdp.call("Page.enable", json!({}), None)).await;
        assert!(dropped.is_err());
        assert_eq!(pending(&cdp), 0);
    }

    #[tokio::test]
    async fn a_browser_that_exits_ends_every_call_and_every_listener() {
        let cdp = fake(Duration::from_secs(30), MAX_MESSAGE, |_| None);
        let mut events = cdp.events(None, &["Target.targetCreated"]);
        assert_eq!(cdp.call("Browser.getVersion", json!({}), None).await, Err(CdpError::Closed));
        assert!(events.recv().await.is_none(), "the listener's queue ends");
        assert_eq!(cdp.call("Browser.getVersion", json!({}), None).await, Err(CdpError::Closed));
    }

    #[tokio::test]
    async fn a_page_waits_for_its_own_load_and_reads_a_thrown_error() {
        let cdp = fake(Duration::from_secs(5), MAX_MESSAGE, |command| {
            let id = command["id"].clone();
            let session = command["sessionId"].clone();
            let lifecycle = |loader: &str, name: &str| {
                message(
                    json!({ "method": "Page.lifecycleEvent", "params": { "name": name, "loaderId": loader }, "sessionId": session }),
                )
            };
            let result = match command["method"].as_str().unwrap() {
                "Target.createTarget" => json!({ "targetId": "T" }),
                "Target.attachToTarget" => json!({ "sessionId": "S" }),
                "Page.navigate" => {
                    return Some(vec![
                        lifecycle("old", "load"),
                        message(json!({ "id": id, "result": { "loaderId": "new" }, "sessionId": session })),
                        lifecycle("new", "DOMContentLoaded"),
                        lifecycle("new", "load"),
                    ])
                }
                "Runtime.evaluate" if command["params"]["expression"] == "throw 1" => {
                    json!({ "result": {}, "exceptionDetails": { "text": "Uncaught", "exception": { "description": "1" } } })
                }
                "Runtime.evaluate" => json!({ "result": { "type": "number", "value": 42 } }),
                _ => json!({}),
            };
            Some(vec![message(json!({ "id": id, "result": result, "sessionId": session }))])
        });
        let page = cdp.open_page().await.unwrap();
        page.navigate("http://127.0.0.1:1/").await.unwrap();
        assert_eq!(page.evaluate::<u32>("6 * 7").await, Ok(42));
        assert_eq!(
            page.evaluate::<u32>("throw 1").await,
            Err(CdpError::Thrown { method: "Runtime.evaluate", text: "1".into() })
        );
        assert!(matches!(page.evaluate::<String>("6 * 7").await, Err(CdpError::Odd { .. })));
        page.close().await;
        assert_eq!(pending(&cdp), 0);
    }
}
