//! The webhook receiver: listens for the whole run, answers every POST at once, keeps every
//! delivery, and lets cases wait (bounded) for the deliveries they expect. Delivery order,
//! duplicates and retries are not specified (§6.3), so nothing here depends on them.
//!
//! It serves one address per client ([`Recipient`]): the second client's is the first's with
//! [`SECOND_CLIENT_PATH`] appended, so a delivery says whose server the target sent it to.
//! Both carry a path segment drawn for the run ([`run_segment`]): a delivery posted elsewhere on
//! the port (an earlier run's late webhooks, or another process that had the port before) is a
//! stray, counted and never judged: it proves nothing of this run's deliveries.

use crate::harness::rules::delivery::{Delivery, Recipient};
use crate::harness::transport::har::Recorder;
use crate::harness::transport::patience::Patience;
use crate::harness::vocab::budget;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Most deliveries kept, and most memory they take (see [`budget::weight`]); past that, a
/// flooding target's deliveries are refused (and the cases waiting for them fail for want of
/// them, saying so, never for want of memory).
const MAX_DELIVERIES: usize = 100_000;
const MAX_BYTES: usize = budget::MAX_HELD;
/// Largest delivery body accepted.
const MAX_DELIVERY: usize = 1024 * 1024;
/// What the second client's address appends to the first's.
pub(crate) const SECOND_CLIENT_PATH: &str = "/second-client";

struct Store {
    /// The run's evidence: each delivery, and how late it came.
    recorder: Arc<Recorder>,
    /// The URL the target delivers to, for the HAR (the first client's).
    url: Mutex<String>,
    deliveries: Mutex<Vec<Delivery>>,
    /// When each delivery arrived, by `seq`.
    arrivals: Mutex<Vec<std::time::Instant>>,
    bytes: std::sync::atomic::AtomicUsize,
    /// Deliveries refused for their size, or for the receiver's budget.
    refused: std::sync::atomic::AtomicUsize,
    /// The path segment of this run's addresses ([`run_segment`]).
    segment: String,
    /// Deliveries posted to another path than this run's addresses ([`Receiver::strays`]).
    strays: std::sync::atomic::AtomicUsize,
    /// The deliveries a case answers only once it has read ([`Receiver::hold`]).
    holds: Mutex<Vec<HoldSpec>>,
    /// How many deliveries name each connection: a wait looks at its connection's deliveries
    /// again only when this count moved, not on every arrival of the run.
    counts: Mutex<std::collections::HashMap<String, u64>>,
    /// Each client's API key, to search every delivery for the other's ([`Receiver::know_keys`]).
    keys: Mutex<Vec<(Recipient, String)>>,
}

/// Longest a held delivery waits for its answer: below the usual delivery timeouts (the
/// sandbox's is 2 s), so that holding never makes a target give up.
const HOLD_CAP: Duration = Duration::from_millis(1500);

/// A delivery to hold: the first of `kind` for `connection` that arrives after the hold.
struct HoldSpec {
    id: u64,
    connection: String,
    kind: String,
    released: watch::Receiver<bool>,
}

/// Holds the answer to a delivery until dropped ([`Receiver::hold`]).
pub(crate) struct Hold {
    store: Arc<Store>,
    id: u64,
    release: watch::Sender<bool>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.release.send(true);
        self.store.holds.lock().unwrap_or_else(|e| e.into_inner()).retain(|h| h.id != self.id);
    }
}

/// A running receiver.
pub(crate) struct Receiver {
    url: String,
    /// The address it listens on, port bound (not the configured `:0`).
    addr: SocketAddr,
    store: Arc<Store>,
    arrivals: watch::Receiver<u64>,
    /// How long waits last (see [`Patience`]).
    pub patience: Patience,
    /// The waits under way: what each waits for and since when, for the progress line.
    waits: Arc<Mutex<Vec<Wait>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

struct Wait {
    what: String,
    started: Instant,
    /// The longest it may last ([`Patience`]'s cap).
    bound: Duration,
}

/// Removes its wait from the list however the wait ends (a case may be cancelled mid-wait).
struct Waiting {
    waits: Arc<Mutex<Vec<Wait>>>,
    started: Instant,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = waits.iter().position(|w| w.started == self.started) {
            waits.remove(i);
        }
    }
}

impl Receiver {
    /// The clients' API keys, which every delivery is searched for: a delivery to one client's
    /// address that carries the other's key is kept as such ([`Delivery::other_clients_key`]).
    pub(crate) fn know_keys(&self, first: Option<&str>, second: Option<&str>) {
        let mut keys = self.store.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.clear();
        keys.extend(first.map(|k| (Recipient::First, k.to_string())));
        keys.extend(second.map(|k| (Recipient::Second, k.to_string())));
    }

    /// Starts listening on `listen`. The URL given to the target is `public_url` when set (a
    /// target in a container or on another host), else this address (loopback for `0.0.0.0`).
    pub(crate) async fn start(
        listen: SocketAddr,
        public_url: Option<String>,
        recorder: Arc<Recorder>,
    ) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("webhook receiver cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        let store = Arc::new(Store {
            recorder,
            url: Mutex::default(),
            deliveries: Mutex::default(),
            arrivals: Mutex::default(),
            bytes: Default::default(),
            refused: Default::default(),
            segment: run_segment(),
            strays: Default::default(),
            holds: Mutex::default(),
            counts: Mutex::default(),
            keys: Mutex::default(),
        });
        let (tx, arrivals) = watch::channel(0u64);
        let app = Router::new()
            .route("/", post(receive))
            .route("/{*path}", post(receive))
            .layer(DefaultBodyLimit::max(MAX_DELIVERY))
            .with_state((store.clone(), Arc::new(tx)));
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        let base = public_url.unwrap_or_else(|| {
            let host = if addr.ip().is_unspecified() { SocketAddr::from(([127, 0, 0, 1], addr.port())) } else { addr };
            format!("http://{host}/webhooks")
        });
        let url = format!("{}/{}", base.trim_end_matches('/'), store.segment);
        *store.url.lock().unwrap_or_else(|e| e.into_inner()) = url.clone();
        Ok(Self {
            url,
            addr,
            store,
            arrivals,
            patience: Patience::default(),
            waits: Arc::default(),
            shutdown: Some(shutdown),
        })
    }

    /// The address to register with the target for the client under test.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The address to register for the second client: deliveries there are [`Recipient::Second`].
    pub(crate) fn second_url(&self) -> String {
        second_url(&self.url)
    }

    /// Answers the next delivery of `kind` for `connection` only once the returned [`Hold`] is
    /// dropped (at most [`HOLD_CAP`]): a client's handler reads what an event announces before
    /// it answers the delivery (§6.3), so a target that makes its change readable only once the
    /// delivery is acknowledged is caught whatever the timing. The delivery is kept (and the
    /// waits see it) at once.
    pub(crate) fn hold(&self, connection: &str, kind: &str) -> Hold {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (release, released) = watch::channel(false);
        let spec = HoldSpec { id, connection: connection.to_string(), kind: kind.to_string(), released };
        self.store.holds.lock().unwrap_or_else(|e| e.into_inner()).push(spec);
        Hold { store: self.store.clone(), id, release }
    }

    /// The address it listens on, with the port the system bound.
    pub(crate) fn listening(&self) -> SocketAddr {
        self.addr
    }

    /// How many deliveries have arrived so far: a delivery with `seq` at or above it is newer
    /// than this moment. (A short-form event has no id, so "new" is judged by arrival.)
    pub(crate) fn arrived_so_far(&self) -> u64 {
        self.store.deliveries.lock().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    /// Why an expected event may be missing although deliveries came: a note when some bodies
    /// were JSON arrays (batched events; §6.1 shows one event object per delivery), else empty.
    pub(crate) fn batch_hint(&self) -> String {
        let all = self.store.deliveries.lock().unwrap_or_else(|e| e.into_inner());
        match all.iter().filter(|d| d.body.is_array()).count() {
            0 => String::new(),
            n => format!(
                " ({n} deliveries were JSON arrays, batches of events: §6.1 shows one event object per delivery)"
            ),
        }
    }

    /// Every delivery so far that concerns `connection_id`, duplicates included.
    /// Every delivery so far with when it arrived.
    pub(crate) fn timeline(&self) -> Vec<(std::time::Instant, Delivery)> {
        let all = self.store.deliveries.lock().unwrap_or_else(|e| e.into_inner());
        let arrivals = self.store.arrivals.lock().unwrap_or_else(|e| e.into_inner());
        arrivals.iter().copied().zip(all.iter().cloned()).collect()
    }

    /// The most the server's clock is known to be ahead of this machine's (negative: behind):
    /// an event occurred before it arrived, so the offset is at least its `occurredAt` minus its
    /// arrival (less the unit it is written in: a rounded stamp may read late), for every
    /// delivery so far. `None` before any delivery says when it occurred.
    pub(crate) fn clock_floor(&self) -> Option<chrono::Duration> {
        let (now, wall) = (std::time::Instant::now(), chrono::Utc::now());
        let arrived = |at: std::time::Instant| wall - chrono::Duration::from_std(now - at).unwrap_or_default();
        self.timeline().into_iter().filter_map(|(at, d)| Some(d.occurred_at()? - d.occurred_unit() - arrived(at))).max()
    }

    /// How many deliveries so far name `connection_id`.
    fn count_for(&self, connection_id: &str) -> u64 {
        self.store.counts.lock().unwrap_or_else(|e| e.into_inner()).get(connection_id).copied().unwrap_or(0)
    }

    pub(crate) fn for_connection(&self, connection_id: &str) -> Vec<Delivery> {
        let all = self.store.deliveries.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().filter(|d| d.connection_id() == Some(connection_id)).cloned().collect()
    }

    /// The waits that have lasted over `after`: `waiting for connection.connected for conn_1
    /// (4s, at most 120s)` for the longest, and how many more; for a terminal's progress line.
    pub(crate) fn waiting(&self, after: Duration) -> Option<String> {
        let waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        let longest = waits.iter().filter(|w| w.started.elapsed() > after).min_by_key(|w| w.started)?;
        let more = waits.iter().filter(|w| w.started.elapsed() > after).count() - 1;
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        Some(format!(
            "waiting for {} ({}s, at most {}s){more}",
            longest.what,
            longest.started.elapsed().as_secs(),
            longest.bound.as_secs()
        ))
    }

    /// Waits until `done` holds for the deliveries concerning `connection_id`, at least
    /// `timeout` (`--event-timeout`) and longer as [`Patience`] decides. Returns whether it held,
    /// and the deliveries seen. The progress line says `what` it waits for
    /// (`connection.connected for conn_1`): a person watching a slow run sees which event is
    /// missing.
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        connection_id: &str,
        timeout: Duration,
        done: impl Fn(&[Delivery]) -> bool,
    ) -> (bool, Vec<Delivery>) {
        let started = Instant::now();
        // Shown live, in the progress line: redacted here, by the run's redactor.
        let what = self.store.recorder.redactor().cut(what, 120);
        let bound = crate::harness::transport::patience::MAX_WAIT.max(timeout);
        self.waits.lock().unwrap_or_else(|e| e.into_inner()).push(Wait { what, started, bound });
        let _waiting = Waiting { waits: self.waits.clone(), started };
        let mut arrivals = self.arrivals.clone();
        // Every wait wakes on every arrival: its connection's deliveries are copied and judged
        // again only when some named that connection (with dozens of waits at once and a burst
        // of late deliveries, doing it on each arrival kept the CPU busy for seconds).
        let (mut seen, mut looked) = (Vec::new(), None);
        loop {
            arrivals.mark_unchanged();
            let count = self.count_for(connection_id);
            if looked != Some(count) {
                looked = Some(count);
                seen = self.for_connection(connection_id);
                if done(&seen) {
                    self.patience.succeeded(started.elapsed());
                    return (true, seen);
                }
            }
            let quiet = self.arrived_so_far() + self.refused() == 0;
            let left = self.patience.deadline(started, timeout, quiet).saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.patience.ran_out(connection_id, seen.len());
                return (false, seen);
            }
            match tokio::time::timeout(left, arrivals.changed()).await {
                Ok(Ok(())) => self.patience.arrival(),
                // The deadline may have moved meanwhile: the loop computes it again.
                Err(_) => {}
                Ok(Err(_)) => return (false, seen),
            }
        }
    }

    /// Waits until another delivery arrives, or until `until`: whether one did.
    pub(crate) async fn next_arrival(&self, until: Instant) -> bool {
        let mut arrivals = self.arrivals.clone();
        arrivals.mark_unchanged();
        let left = until.saturating_duration_since(Instant::now());
        matches!(tokio::time::timeout(left, arrivals.changed()).await, Ok(Ok(())))
    }

    /// Waits until a delivery of `event_type` concerning `connection_id` has arrived.
    pub(crate) async fn wait_for_type(
        &self,
        connection_id: &str,
        event_type: &str,
        timeout: Duration,
    ) -> (bool, Vec<Delivery>) {
        let what = format!("{event_type} for {connection_id}");
        self.wait_until(&what, connection_id, timeout, |ds| ds.iter().any(|d| d.event_type() == Some(event_type))).await
    }

    /// How many deliveries came to another path than this run's addresses: not kept, not
    /// judged, and no proof that this run's deliveries arrive.
    pub(crate) fn strays(&self) -> u64 {
        self.store.strays.load(std::sync::atomic::Ordering::Relaxed) as u64
    }

    /// How many deliveries the receiver refused (too large): they prove the path works.
    pub(crate) fn refused(&self) -> u64 {
        self.store.refused.load(std::sync::atomic::Ordering::Relaxed) as u64
    }

    /// `; the receiver refused N …` when the receiver refused any for their size, for the
    /// message of a case that waited in vain; empty otherwise.
    pub(crate) fn refusals(&self) -> String {
        match self.store.refused.load(std::sync::atomic::Ordering::Relaxed) {
            0 => String::new(),
            n => format!(
                "; the receiver refused {n} webhook {} for {} size (over {} KiB, or too dense to parse, or past \
                 the receiver's {} MiB budget)",
                if n == 1 { "delivery" } else { "deliveries" },
                if n == 1 { "its" } else { "their" },
                MAX_DELIVERY >> 10,
                MAX_BYTES >> 20
            ),
        }
    }

    pub(crate) fn stop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A path segment drawn afresh for each run (not from the seed: two runs of one seed may share
/// a port's history), which this run's addresses carry and no other run's do.
fn run_segment() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let tail: String =
        (0..12).map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])).collect();
    format!("run-{tail}")
}

/// The second client's address for a first client's `url`.
fn second_url(url: &str) -> String {
    format!("{}{SECOND_CLIENT_PATH}", url.trim_end_matches('/'))
}

async fn receive(
    State((store, tx)): State<(Arc<Store>, Arc<watch::Sender<u64>>)>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> StatusCode {
    use std::sync::atomic::Ordering;
    if !uri.path().split('/').any(|part| part == store.segment) {
        // Answered as received, so that whoever sent it stops retrying; never kept.
        store.strays.fetch_add(1, Ordering::Relaxed);
        return StatusCode::NO_CONTENT;
    }
    let first = store.url.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let to = if uri.path().trim_end_matches('/').ends_with(SECOND_CLIENT_PATH) {
        Recipient::Second
    } else {
        Recipient::First
    };
    let url = match to {
        Recipient::First => first,
        Recipient::Second => second_url(&first),
    };
    let refuse = |status: StatusCode| {
        store.recorder.delivery(&url, b"", status.as_u16(), None, None);
        store.refused.fetch_add(1, Ordering::Relaxed);
        tx.send_modify(|n| *n += 1);
        status
    };
    let Ok(body) = body else { return refuse(StatusCode::PAYLOAD_TOO_LARGE) };
    if budget::too_dense(&body).is_some() {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let weight = budget::weight(&body);
    if store.bytes.fetch_add(weight, Ordering::Relaxed) + weight > MAX_BYTES {
        store.bytes.fetch_sub(weight, Ordering::Relaxed);
        return refuse(StatusCode::INSUFFICIENT_STORAGE);
    }
    let parsed = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let other_clients_key = carries_other_key(&store, to, &headers, &body);
    let held;
    {
        let mut all = store.deliveries.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() >= MAX_DELIVERIES {
            drop(all);
            return refuse(StatusCode::INSUFFICIENT_STORAGE);
        }
        let seq = all.len() as u64;
        let mut delivery = Delivery::posted(seq, parsed, to);
        delivery.other_clients_key = other_clients_key;
        store.recorder.delivery(&url, &body, StatusCode::NO_CONTENT.as_u16(), delivery.connection_id(), Some(seq));
        store.arrivals.lock().unwrap_or_else(|e| e.into_inner()).push(std::time::Instant::now());
        held = held_by(&store, &delivery);
        if let Some(connection) = delivery.connection_id() {
            *store.counts.lock().unwrap_or_else(|e| e.into_inner()).entry(connection.to_string()).or_default() += 1;
        }
        all.push(delivery);
    }
    tx.send_modify(|n| *n += 1);
    if let Some(mut released) = held {
        let _ = tokio::time::timeout(HOLD_CAP, released.wait_for(|r| *r)).await;
    }
    StatusCode::NO_CONTENT
}

/// Whether a delivery posted to `to`'s address carries the other client's API key, whole or a
/// piece, in a header or its body (§5 item 2: a key stays on its own client's backend). The
/// text is searched as received and never kept.
fn carries_other_key(store: &Store, to: Recipient, headers: &axum::http::HeaderMap, body: &[u8]) -> bool {
    let keys = store.keys.lock().unwrap_or_else(|e| e.into_inner());
    let others: Vec<((), &str)> =
        keys.iter().filter(|(owner, _)| *owner != to).map(|(_, k)| ((), k.as_str())).collect();
    if others.is_empty() {
        return false;
    }
    let headers: Vec<(&str, String)> =
        headers.iter().map(|(n, v)| (n.as_str(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
    let text = crate::harness::rules::secrets::searched(
        headers.iter().map(|(n, v)| (*n, v.as_str())),
        &String::from_utf8_lossy(body),
    );
    !crate::harness::rules::secrets::revealed(&text, None, &others).is_empty()
}

/// The hold `delivery` answers to, if any: taken from the list (it holds one delivery).
fn held_by(store: &Store, delivery: &Delivery) -> Option<watch::Receiver<bool>> {
    let mut holds = store.holds.lock().unwrap_or_else(|e| e.into_inner());
    let at = holds.iter().position(|h| {
        delivery.connection_id() == Some(h.connection.as_str()) && delivery.event_type() == Some(h.kind.as_str())
    })?;
    Some(holds.remove(at).released)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_wait_says_what_it_waits_for() {
        let receiver = Receiver::start(([127, 0, 0, 1], 0).into(), None, Arc::default()).await.unwrap();
        assert_eq!(receiver.waiting(Duration::ZERO), None);
        let waiting = receiver.wait_for_type("conn_1", "connection.connected", Duration::from_millis(300));
        let (_, status) = tokio::join!(waiting, async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            receiver.waiting(Duration::from_millis(50))
        });
        assert_eq!(status.as_deref(), Some("waiting for connection.connected for conn_1 (0s, at most 120s)"));
        assert_eq!(receiver.waiting(Duration::ZERO), None, "an ended wait is gone");
    }

    /// Issue 51: a delivery past the receiver's bound is never judged, and the run says so
    /// (the runner's `bounds:` note is this text).
    #[tokio::test]
    async fn a_delivery_cut_by_the_receivers_bound_is_said() {
        let receiver = Receiver::start(([127, 0, 0, 1], 0).into(), None, Arc::default()).await.unwrap();
        assert_eq!(receiver.refusals(), "");
        let big = format!(r#"{{"type":"connection.created","pad":"{}"}}"#, "x".repeat(MAX_DELIVERY));
        let answer = reqwest::Client::new().post(receiver.url()).body(big).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(receiver.refused(), 1);
        assert!(receiver.refusals().contains("refused 1 webhook delivery"), "{}", receiver.refusals());
    }

    #[tokio::test]
    async fn each_delivery_says_which_client_address_it_was_posted_to() {
        let receiver = Receiver::start(([127, 0, 0, 1], 0).into(), None, Arc::default()).await.unwrap();
        assert_eq!(receiver.second_url(), format!("{}{SECOND_CLIENT_PATH}", receiver.url()));
        let client = reqwest::Client::new();
        for url in [receiver.url().to_string(), receiver.second_url()] {
            client.post(&url).body(r#"{"type":"connection.created"}"#).send().await.unwrap();
        }
        let to: Vec<Recipient> = receiver.timeline().into_iter().map(|(_, d)| d.to).collect();
        assert_eq!(to, [Recipient::First, Recipient::Second]);
    }

    /// A delivery posted to another path of the port (an earlier run's late webhook, or a
    /// process that had the port before) is no delivery of this run's: never kept, and no
    /// proof that deliveries arrive (the sweep's unreachable run, failed by one such stray).
    #[tokio::test]
    async fn a_delivery_to_another_runs_address_is_a_stray() {
        let receiver = Receiver::start(([127, 0, 0, 1], 0).into(), None, Arc::default()).await.unwrap();
        let other = format!("http://{}/webhooks/run-0000000000", receiver.listening());
        let client = reqwest::Client::new();
        for url in [other.clone(), format!("{other}{SECOND_CLIENT_PATH}"), format!("http://{}/", receiver.listening())]
        {
            let answer = client.post(&url).body(r#"{"type":"connection.created"}"#).send().await.unwrap();
            assert!(answer.status().is_success(), "answered, so that its sender stops");
        }
        assert_eq!((receiver.strays(), receiver.arrived_so_far()), (3, 0));
        client.post(format!("{}/", receiver.url())).body("{}").send().await.unwrap();
        assert_eq!((receiver.strays(), receiver.arrived_so_far()), (3, 1), "a trailing slash is this run's address");
    }
}
