//! Webhook delivery (§6; registration, retries and ordering are left open by §6.3, these are the
//! sandbox's choices):
//!
//! - an address registered for a client (with its key) receives that client's events emitted
//!   after its registration; one registered without a key receives every client's (events carry
//!   `clientId`, §6.2); earlier events are not replayed;
//! - a delivery is a JSON `POST` of the §6.1 envelope; any 2xx answer counts as delivered;
//! - up to 3 attempts per event and address, 100 ms then 400 ms apart, each with a 2 s timeout;
//!   proxies from the environment are not used;
//! - each address has its own worker, with a lane per connection that delivers the
//!   connection's events one at a time in emission order, so a slow or dead address delays only
//!   itself, and a slow delivery only its connection's; API requests never wait for deliveries (events
//!   go through an unbounded queue to a background task);
//! - [`Conditions`] can make every delivery late, or each one slow in that one-at-a-time queue.

use super::conditions::Conditions;
use super::faults::{Mutant, Variant};
use super::flavor::Flavor;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

/// Pauses before the 2nd and 3rd attempt.
const BACKOFF: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(400)];
const TIMEOUT: Duration = Duration::from_secs(2);

enum Msg {
    /// An address, and the client whose events it takes (`None`: every client's).
    Register(String, Option<String>),
    Unregister(String),
    /// An event and its client.
    Deliver(Arc<Value>, String),
}

/// When each event was first posted, and first acknowledged (a 2xx answer), by event id: for
/// [`Mutant::EventBeforeData`] and [`Mutant::ChangeAfterAck`], whose change becomes readable
/// only a while after that.
#[derive(Default)]
pub(crate) struct Times {
    posted: HashMap<String, std::time::Instant>,
    acked: HashMap<String, std::time::Instant>,
}

pub(crate) type Acked = Arc<std::sync::Mutex<Times>>;

/// The sending end of the delivery queue, kept in the store.
pub(crate) struct Outbox {
    tx: UnboundedSender<Msg>,
    /// Each address and the client it was registered for (`None`: every client).
    urls: HashMap<String, Option<String>>,
    acked: Acked,
}

/// The HTTP client of the deliveries, and where they note what was acknowledged.
#[derive(Clone)]
struct Poster {
    http: reqwest::Client,
    acked: Acked,
}

impl Outbox {
    /// When the event `id` was first acknowledged, if it was.
    pub(super) fn acked(&self, id: &str) -> Option<std::time::Instant> {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).acked.get(id).copied()
    }

    /// When the event `id` was first posted, if it was.
    pub(super) fn posted(&self, id: &str) -> Option<std::time::Instant> {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).posted.get(id).copied()
    }

    /// Adds a delivery address for `client`'s events (`None`: every client's); `false` if it
    /// was already registered so (registering it for another client moves it).
    pub(super) fn register(&mut self, url: &str, client: Option<String>) -> bool {
        if self.urls.get(url) == Some(&client) {
            return false;
        }
        if self.urls.insert(url.to_string(), client.clone()).is_some() {
            let _ = self.tx.send(Msg::Unregister(url.to_string()));
        }
        let _ = self.tx.send(Msg::Register(url.to_string(), client));
        true
    }

    /// Removes a delivery address: nothing more is sent there, retries included (a finished
    /// run's receiver is gone); `false` if it was not registered.
    pub(super) fn unregister(&mut self, url: &str) -> bool {
        if self.urls.remove(url).is_none() {
            return false;
        }
        let _ = self.tx.send(Msg::Unregister(url.to_string()));
        true
    }

    /// Queues `client`'s event for the addresses that take it; never waits.
    pub(super) fn deliver(&self, event: Arc<Value>, client: String) {
        if !self.urls.is_empty() {
            let _ = self.tx.send(Msg::Deliver(event, client));
        }
    }

    pub(super) fn urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = self.urls.keys().cloned().collect();
        urls.sort();
        urls
    }
}

/// Starts the dispatcher task; returns the outbox feeding it.
pub(crate) fn start(flavor: Flavor, conditions: Conditions) -> (Outbox, JoinHandle<()>) {
    let (tx, rx) = unbounded_channel();
    let acked = Acked::default();
    let task = tokio::spawn(dispatch(rx, flavor, conditions, acked.clone()));
    (Outbox { tx, urls: HashMap::new(), acked }, task)
}

async fn dispatch(mut rx: UnboundedReceiver<Msg>, flavor: Flavor, conditions: Conditions, acked: Acked) {
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .no_proxy()
        .user_agent(concat!("bankconf-sandbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("reqwest client");
    let client = Poster { http, acked };
    let mut workers: Vec<Worker> = Vec::new();
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Register(url, only) => {
                let (tx, rx) = unbounded_channel();
                let task = tokio::spawn(worker(client.clone(), url.clone(), rx, flavor, conditions));
                workers.push(Worker { url, only, tx, task });
            }
            Msg::Unregister(url) => {
                // The worker stops at once: no queued event, no retry goes out to the address.
                for w in workers.iter().filter(|w| w.url == url) {
                    w.task.abort();
                }
                workers.retain(|w| w.url != url);
            }
            Msg::Deliver(event, of) => {
                // The mutant sends every event to every address, whoever registered it.
                let anywhere = flavor.is(Mutant::EventsToOtherClient);
                // This one sends every event to the address registered first, and only there.
                let first = flavor.is(Mutant::EventsToFirstAddress)
                    // This one too, but only the account and transaction events.
                    || (flavor.is(Mutant::DataEventsToFirstAddress)
                        && !event["type"].as_str().is_some_and(|t| t.starts_with("connection.")));
                let takes = |(i, w): &(usize, &Worker)| match first {
                    true => *i == 0,
                    false => anywhere || w.only.as_ref().is_none_or(|c| *c == of),
                };
                for (_, w) in workers.iter().enumerate().filter(takes) {
                    let _ = w.tx.send(event.clone());
                }
            }
        }
    }
}

/// How late [`Mutant::AccountsWhileVerifying`] stamps and sends `connection.connected`.
pub(crate) const ANNOUNCED_LATE_MS: u64 = 1500;

/// One address's delivery queue.
struct Worker {
    url: String,
    /// The client whose events it takes (`None`: every client's).
    only: Option<String>,
    tx: UnboundedSender<Arc<Value>>,
    task: JoinHandle<()>,
}

/// One address's deliveries: a lane per connection, each delivering its connection's events one
/// at a time in emission order, the lanes side by side (a connection's slow or held delivery
/// delays only its own: issue 72, a one-queue sandbox held every event behind the reaction
/// reads of another connection's, up to 0.8 s late on a plain run). Under
/// `--delivery-serial-ms`, one queue for all, as that condition says.
async fn worker(
    client: Poster,
    url: String,
    mut rx: UnboundedReceiver<Arc<Value>>,
    flavor: Flavor,
    conditions: Conditions,
) {
    let junk = Arc::new(AtomicUsize::new(0));
    if conditions.delivery_serial_ms > 0 {
        lane(client, url, rx, flavor, conditions, junk).await;
        return;
    }
    let mut lanes: HashMap<String, UnboundedSender<Arc<Value>>> = HashMap::new();
    // Dropped with the worker (an address unregistered): every lane stops at once.
    let mut running = tokio::task::JoinSet::new();
    while let Some(event) = rx.recv().await {
        let connection = event
            .pointer("/data/connectionId")
            .or_else(|| event.get("connectionId"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let tx = lanes.entry(connection).or_insert_with(|| {
            let (tx, rx) = unbounded_channel();
            running.spawn(lane(client.clone(), url.clone(), rx, flavor, conditions, junk.clone()));
            tx
        });
        let _ = tx.send(event);
    }
    // The queue closed: the lanes deliver what they hold, then end.
    lanes.clear();
    while running.join_next().await.is_some() {}
}

/// One lane of [`worker`]: its events one at a time, in the order they came.
async fn lane(
    client: Poster,
    url: String,
    mut rx: UnboundedReceiver<Arc<Value>>,
    flavor: Flavor,
    conditions: Conditions,
    junk: Arc<AtomicUsize>,
) {
    while let Some(event) = rx.recv().await {
        if conditions.delivery_unreachable {
            // The address cannot be reached from here: nothing arrives.
            continue;
        }
        if flavor.is(Mutant::AccountsWhileVerifying) && event["type"] == "connection.connected" {
            // Sent when it is stamped: [`ANNOUNCED_LATE_MS`] after the state was stored.
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ANNOUNCED_LATE_MS)).await;
                deliver(&client, &url, &event).await;
            });
            continue;
        }
        if flavor.is(Mutant::NonEventDeliveries) {
            // Something that is no event goes out first, each kind in turn.
            let body = non_event(junk.fetch_add(1, Ordering::Relaxed));
            let post = client.http.post(&url).header("content-type", "application/json").body(body);
            let _ = post.send().await;
        }
        if flavor.is(Mutant::RetryKeepsEventId) {
            // The retry goes out whatever the delivery conditions: its `data.eventId` is the
            // first's, not its envelope's id (§6.2).
            let (client, url, copy) = (client.clone(), url.clone(), retry_copy(&event, false));
            tokio::spawn(async move { deliver(&client, &url, &copy).await });
        }
        // Copies (same id), a late copy, a shuffled order: every delivery on its own, held as
        // the conditions say.
        let copies = conditions.delivery_copies.max(1);
        if copies > 1 || conditions.delivery_copy_late_ms > 0 || conditions.delivery_shuffle_ms > 0 {
            let mut holds: Vec<u64> = (0..copies).map(|_| shuffled(conditions.delivery_shuffle_ms)).collect();
            if conditions.delivery_copy_late_ms > 0 {
                holds.push(conditions.delivery_copy_late_ms + shuffled(conditions.delivery_shuffle_ms));
            }
            for hold in holds {
                let (client, url, event) = (client.clone(), url.clone(), event.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    deliver(&client, &url, &event).await;
                });
            }
            continue;
        }
        if conditions.delivery_delay_ms > 0 {
            // Late, in parallel: each event its delay after its emission.
            let (client, url) = (client.clone(), url.clone());
            let delay = Duration::from_millis(conditions.delivery_delay_ms);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                deliver(&client, &url, &event).await;
            });
            continue;
        }
        if conditions.delivery_serial_ms > 0 {
            // One queue: the next event waits for this one's slow delivery.
            tokio::time::sleep(Duration::from_millis(conditions.delivery_serial_ms)).await;
        }
        // Under `late-events` each event 300 ms after its emission (not one after the other).
        if let Some(ms) = flavor.has(Variant::LateEvents).then_some(300) {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                deliver(&client, &url, &event).await;
            });
            continue;
        }
        if flavor.has(Variant::RetryNewId) {
            // §6.3 allows retries; whether a retry keeps its id is not shown (§6.1).
            let (client, url, copy) = (client.clone(), url.clone(), retry_copy(&event, true));
            tokio::spawn(async move { deliver(&client, &url, &copy).await });
        }
        if flavor.has(Variant::RetryNewStamp) {
            // §6.1 does not say whether `created_at` stamps the event or its sending.
            let (client, url, copy) = (client.clone(), url.clone(), restamped(&event));
            tokio::spawn(async move { deliver(&client, &url, &copy).await });
        }
        if flavor.has(Variant::DuplicateEvents) {
            // The copy goes out alongside, so duplicates do not slow the queue down.
            let (client, url, event) = (client.clone(), url.clone(), event.clone());
            tokio::spawn(async move { deliver(&client, &url, &event).await });
        }
        deliver(&client, &url, &event).await;
    }
}

/// `event` sent again under a new id, as a retry that re-stamps it; its `data.eventId` follows
/// the new id when `renumber_data` (else it keeps the first's: mutant `retry-keeps-event-id`).
fn retry_copy(event: &Value, renumber_data: bool) -> Value {
    let mut copy = event.clone();
    if let Some(id) = copy.get("id").and_then(Value::as_str).map(|id| format!("{id}r")) {
        if copy.pointer("/data/eventId").is_some() && renumber_data {
            copy["data"]["eventId"] = Value::String(id.clone());
        }
        copy["id"] = Value::String(id);
    }
    copy
}

/// `event` sent again under its own id, its envelope `created_at` stamped a second later, as a
/// retry that stamps the moment it is sent (variant `retry-new-stamp`).
fn restamped(event: &Value) -> Value {
    let mut copy = event.clone();
    let later = copy
        .get("created_at")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| super::render::timestamp_millis(t.with_timezone(&chrono::Utc) + chrono::Duration::seconds(1)));
    if let Some(later) = later {
        copy["created_at"] = Value::String(later);
    }
    copy
}

/// The `n`th delivery of the `non-event-deliveries` mutant: bodies that are no event (§6.1).
fn non_event(n: usize) -> String {
    match n % 4 {
        0 => "{\"id\": \"evt_".to_string(),
        1 => format!("[{}0]", "0,".repeat(999)),
        2 => format!("{}{{}}{}", "{\"a\":".repeat(64), "}".repeat(64)),
        // Over the receiver's 1 MiB: refused unread, and counted so.
        _ => format!("[{}0]", "0,".repeat(1_000_000)),
    }
}

/// A random hold of 0 to `window` milliseconds (0 when there is no window).
fn shuffled(window: u64) -> u64 {
    use rand::Rng;
    if window == 0 {
        0
    } else {
        rand::rng().random_range(0..=window)
    }
}

/// One event to one address, with retries.
async fn deliver(client: &Poster, url: &str, event: &Value) {
    let mut last_error = String::new();
    for attempt in 0..=BACKOFF.len() {
        if attempt > 0 {
            tokio::time::sleep(BACKOFF[attempt - 1]).await;
        }
        let id = event.get("id").and_then(Value::as_str);
        if let Some(id) = id {
            let mut times = client.acked.lock().unwrap_or_else(|e| e.into_inner());
            times.posted.entry(id.to_string()).or_insert_with(std::time::Instant::now);
        }
        match client.http.post(url).json(event).send().await {
            Ok(resp) if resp.status().is_success() => {
                if let Some(id) = id {
                    let mut times = client.acked.lock().unwrap_or_else(|e| e.into_inner());
                    times.acked.entry(id.to_string()).or_insert_with(std::time::Instant::now);
                }
                last_error.clear();
                break;
            }
            Ok(resp) => last_error = format!("HTTP {}", resp.status()),
            Err(e) => last_error = e.to_string(),
        }
    }
    if !last_error.is_empty() {
        eprintln!(
            "bankconf sandbox: webhook {} to {url} not delivered after {} attempts: {last_error}",
            event["id"].as_str().unwrap_or("?"),
            BACKOFF.len() + 1
        );
    }
}
