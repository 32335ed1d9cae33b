//! Conditions of a real deployment the sandbox can imitate (none of them a violation: the spec
//! fixes no timing, delivery policy or rate limit, §6.3, §8): added API latency, late webhook
//! deliveries (in parallel, or one at a time through one queue), a per-key rate limit, a small
//! accept queue (listen backlog) and answers with `Connection: close` (no keep-alive, as
//! Python's `http.server` does). `bankconf serve --latency-ms/--delivery-delay-ms/
//! --delivery-serial-ms/--rate-limit/--backlog/--connection-close`, and the hidden
//! `bankconf run --sandbox-*` flags of the same names for the embedded sandbox.

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// The conditions; all zero (the default) is a local, unlimited sandbox.
/// Each is a `bankconf serve` flag of its name (`--latency-ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Conditions {
    /// Milliseconds added to every API answer.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Every webhook delivery goes out this many milliseconds after its event, in parallel.
    #[arg(long, default_value_t = 0)]
    pub delivery_delay_ms: u64,
    /// Deliveries go out one at a time through one queue, each taking this many milliseconds.
    #[arg(long, default_value_t = 0, conflicts_with = "delivery_delay_ms")]
    pub delivery_serial_ms: u64,
    /// Requests per second per API key (each second counted on its own); more are answered 429
    /// with `Retry-After: 1`. Zero: no limit.
    #[arg(long, default_value_t = 0)]
    pub rate_limit: u32,
    /// The listen backlog (accept queue) of the API socket; zero: the usual 1024.
    #[arg(long, default_value_t = 0)]
    pub backlog: u32,
    /// Every answer says `Connection: close`, and the connection closes after it.
    #[arg(long)]
    pub connection_close: bool,
    /// Every event is delivered this many times in all (same `id`), the copies alongside.
    #[arg(long, default_value_t = 0)]
    pub delivery_copies: u32,
    /// Every event is delivered once more, this many milliseconds later (after later events).
    #[arg(long, default_value_t = 0)]
    pub delivery_copy_late_ms: u64,
    /// Every delivery is held a random 0 to this many milliseconds: the order changes.
    #[arg(long, default_value_t = 0)]
    pub delivery_shuffle_ms: u64,
    /// Deliveries never arrive: the registered address cannot be reached from here.
    #[arg(long)]
    pub delivery_unreachable: bool,
    /// The transactions endpoint accepts a request and never answers.
    #[arg(long)]
    pub stall_transactions: bool,
    /// The transactions endpoint sends its headers, then its body one byte every 2 s.
    #[arg(long)]
    pub trickle_transactions: bool,
    /// A keep-alive connection idle this many milliseconds after an answer is closed (RFC 9112
    /// §9.3 allows it; gunicorn does after 2 s), even when a request is on its way. Zero: never.
    #[arg(long, default_value_t = 0)]
    pub idle_close_ms: u64,
}

impl Conditions {
    /// Whether none is set: the sandbox answers as fast as it can.
    pub fn is_local(&self) -> bool {
        *self == Self::default()
    }

    /// How the sandbox describes itself in its banner, e.g. `latency 100ms, rate limit 10/s`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.latency_ms > 0 {
            parts.push(format!("API latency {}ms", self.latency_ms));
        }
        if self.delivery_delay_ms > 0 {
            parts.push(format!("deliveries {}ms late", self.delivery_delay_ms));
        }
        if self.delivery_serial_ms > 0 {
            parts.push(format!("deliveries one at a time, {}ms each", self.delivery_serial_ms));
        }
        if self.rate_limit > 0 {
            parts.push(format!("rate limit {}/s per key", self.rate_limit));
        }
        if self.backlog > 0 {
            parts.push(format!("accept queue of {}", self.backlog));
        }
        if self.connection_close {
            parts.push("Connection: close".to_string());
        }
        if self.delivery_copies > 1 {
            parts.push(format!("each event delivered {} times", self.delivery_copies));
        }
        if self.delivery_copy_late_ms > 0 {
            parts.push(format!("each event delivered again {}ms later", self.delivery_copy_late_ms));
        }
        if self.delivery_shuffle_ms > 0 {
            parts.push(format!("deliveries shuffled within {}ms", self.delivery_shuffle_ms));
        }
        if self.delivery_unreachable {
            parts.push("deliveries never arrive (an unreachable address)".to_string());
        }
        if self.stall_transactions {
            parts.push("the transactions endpoint never answers".to_string());
        }
        if self.trickle_transactions {
            parts.push("the transactions endpoint trickles its body, a byte every 2 s".to_string());
        }
        if self.idle_close_ms > 0 {
            parts.push(format!("keep-alive connections closed after {}ms idle", self.idle_close_ms));
        }
        parts.join(", ")
    }

    /// The listen backlog of the sandbox's socket.
    pub fn listen_backlog(&self) -> u32 {
        if self.backlog > 0 {
            self.backlog
        } else {
            1024
        }
    }
}

/// The state of the API middleware: the conditions and, per key, the current second's count.
#[derive(Clone)]
pub(crate) struct Gate {
    conditions: Conditions,
    windows: Arc<Mutex<HashMap<String, (Instant, u32)>>>,
}

impl Gate {
    pub(super) fn new(conditions: Conditions) -> Self {
        Self { conditions, windows: Arc::default() }
    }

    /// Whether a request with this `Authorization` value is over the limit (counted if not).
    fn over_limit(&self, authorization: &str) -> bool {
        let limit = self.conditions.rate_limit;
        if limit == 0 {
            return false;
        }
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let window = windows.entry(authorization.to_string()).or_insert((now, 0));
        if now.duration_since(window.0) >= Duration::from_secs(1) {
            *window = (now, 0);
        }
        window.1 += 1;
        window.1 > limit
    }
}

/// Applied to the API routes: the rate limit first (a refused request costs no latency), then
/// the latency.
pub(crate) async fn api_gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let key = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if gate.over_limit(&key) {
        let body = axum::Json(super::render::error("rate_limited", "too many requests; retry after 1 s"));
        return (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, "1")], body).into_response();
    }
    if gate.conditions.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(gate.conditions.latency_ms)).await;
    }
    let transactions = request.uri().path().ends_with("/transactions");
    if transactions && gate.conditions.stall_transactions {
        // Accepted, never answered: the client must bound its wait.
        std::future::pending::<()>().await;
    }
    let response = next.run(request).await;
    if transactions && gate.conditions.trickle_transactions {
        return trickle(response).await;
    }
    response
}

/// The answer with its headers at once and its body a byte every 2 s.
async fn trickle(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let stream = futures::stream::unfold(0, move |at| {
        let bytes = bytes.clone();
        async move {
            if at >= bytes.len() {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            Some((Ok::<_, std::io::Error>(bytes.slice(at..at + 1)), at + 1))
        }
    });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// Applied to every route with `--connection-close`: each answer closes its connection (hyper
/// ends a connection whose answer says `Connection: close`).
pub(crate) async fn close_connections(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// The API's listener with `--idle-close-ms`: each connection it accepts closes once idle
/// ([`IdleClose`]).
pub(crate) struct IdleCloseListener {
    pub listener: tokio::net::TcpListener,
    pub idle: Duration,
}

impl axum::serve::Listener for IdleCloseListener {
    type Io = IdleClose;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        (IdleClose::new(stream, self.idle), addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A connection the server closes when it has been idle `idle` since its last write (an
/// answer), with no byte of a new request read: the server reads nothing more (hyper sees the
/// end of the stream and closes it), whatever the client sent meanwhile. A new connection
/// waits for its first request (a keep-alive timeout runs between requests), and a request
/// being handled (read, not yet answered) is never cut.
pub(crate) struct IdleClose {
    inner: tokio::net::TcpStream,
    idle: Duration,
    /// When the connection closes, while idle; `None` while a request is handled.
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl IdleClose {
    fn new(inner: tokio::net::TcpStream, idle: Duration) -> Self {
        Self { inner, idle, deadline: None }
    }
}

impl AsyncRead for IdleClose {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        if let Some(deadline) = self.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                // Idle too long: the end of the stream, as if the client had gone.
                return Poll::Ready(Ok(()));
            }
        }
        let before = buf.filled().len();
        let read = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.deadline = None;
        }
        read
    }
}

impl AsyncWrite for IdleClose {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(written, std::task::Poll::Ready(Ok(n)) if n > 0) {
            let idle = self.idle;
            self.deadline = Some(Box::pin(tokio::time::sleep(idle)));
        }
        written
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
