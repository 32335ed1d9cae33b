//! Webhook delivery (§6; registration, retries and ordering are left open by §6.3, these are the
//! sandbox's choices):
//!
//! - an address registered for a client (with its key) receives that client's events emitted
//!   after its registration; one registered without a key receives every client's (events carry
//!   `clientId`, §6.2); earlier events are not replayed;
//! - a delivery is a JSON `POST` of the §6.1 envelope; any 2xx answer counts as delivered;
//! - up to 3 attempts per event and address, 100 ms then 400 ms apart, each with a 2 s timeout;
//!   proxies from the environment are not used;
//! - each address has its own worker that delivers one event at a time in emission order, so a
//!   slow or dead address delays only itself; API requests never wait for deliveries (events
//!   go through an unbounded queue to a background task);
//! - [`Conditions`] can make every delivery late, or each one slow in that one-at-a-time queue.

use super::conditions::Conditions;
use super::faults::deliveries::{Delivery, DELIVERIES};
use super::flavor::Flavor;
use serde_json::Value;
use std::collections::HashMap;
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
/// [`super::Mutant::EventBeforeData`] and [`super::Mutant::ChangeAfterAck`], whose change becomes readable
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
                let task = tokio::spawn(worker(client.clone(), url.clone(), rx, conditions));
                workers.push(Worker { url, only, tx, task, sent: 0 });
            }
            Msg::Unregister(url) => {
                // The worker stops at once: no queued event, no retry goes out to the address.
                for w in workers.iter().filter(|w| w.url == url) {
                    w.task.abort();
                }
                workers.retain(|w| w.url != url);
            }
            Msg::Deliver(event, of) => {
                // One delivery per address, through the seam of deliveries (to whom, what, when).
                for (i, w) in workers.iter_mut().enumerate() {
                    let mine = w.only.as_ref().is_none_or(|c| *c == of);
                    let mut delivery = Delivery::new(event.clone(), i == 0, mine, w.sent);
                    if let Some(fault) = flavor.seam(&DELIVERIES) {
                        fault(&mut delivery);
                    }
                    if delivery.to {
                        w.sent += 1;
                        let _ = w.tx.send(delivery);
                    }
                }
            }
        }
    }
}

/// One address's delivery queue.
struct Worker {
    url: String,
    /// The client whose events it takes (`None`: every client's).
    only: Option<String>,
    tx: UnboundedSender<Delivery>,
    task: JoinHandle<()>,
    /// How many events it was given.
    sent: usize,
}

/// One address's deliveries: a lane per connection, each delivering its connection's events one
/// at a time in emission order, the lanes side by side (a connection's slow or held delivery
/// delays only its own: issue 72, a one-queue sandbox held every event behind the reaction
/// reads of another connection's, up to 0.8 s late on a plain run). Under
/// `--delivery-serial-ms`, one queue for all, as that condition says.
async fn worker(client: Poster, url: String, mut rx: UnboundedReceiver<Delivery>, conditions: Conditions) {
    if conditions.delivery_serial_ms > 0 {
        lane(client, url, rx, conditions).await;
        return;
    }
    let mut lanes: HashMap<String, UnboundedSender<Delivery>> = HashMap::new();
    // Dropped with the worker (an address unregistered): every lane stops at once.
    let mut running = tokio::task::JoinSet::new();
    while let Some(delivery) = rx.recv().await {
        let connection = delivery
            .event
            .pointer("/data/connectionId")
            .or_else(|| delivery.event.get("connectionId"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let tx = lanes.entry(connection).or_insert_with(|| {
            let (tx, rx) = unbounded_channel();
            running.spawn(lane(client.clone(), url.clone(), rx, conditions));
            tx
        });
        let _ = tx.send(delivery);
    }
    // The queue closed: the lanes deliver what they hold, then end.
    lanes.clear();
    while running.join_next().await.is_some() {}
}

/// One lane of [`worker`]: its deliveries one at a time, in the order they came.
async fn lane(client: Poster, url: String, mut rx: UnboundedReceiver<Delivery>, conditions: Conditions) {
    while let Some(delivery) = rx.recv().await {
        if conditions.delivery_unreachable {
            // The address cannot be reached from here: nothing arrives.
            continue;
        }
        let Delivery { event, first, beside, held, late, copies, .. } = delivery;
        for body in first {
            let post = client.http.post(&url).header("content-type", "application/json").body(body);
            let _ = post.send().await;
        }
        for copy in beside {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { deliver(&client, &url, &copy).await });
        }
        if let Some(hold) = held {
            spawn_late(&client, &url, hold, event);
            continue;
        }
        // Copies (same id), a late copy, a shuffled order: every delivery on its own, held as
        // the conditions say.
        let copies_held = conditions.delivery_copies.max(1);
        if copies_held > 1 || conditions.delivery_copy_late_ms > 0 || conditions.delivery_shuffle_ms > 0 {
            let mut holds: Vec<u64> = (0..copies_held).map(|_| shuffled(conditions.delivery_shuffle_ms)).collect();
            if conditions.delivery_copy_late_ms > 0 {
                holds.push(conditions.delivery_copy_late_ms + shuffled(conditions.delivery_shuffle_ms));
            }
            for hold in holds {
                spawn_late(&client, &url, Duration::from_millis(hold), event.clone());
            }
            continue;
        }
        if conditions.delivery_delay_ms > 0 {
            // Late, in parallel: each event its delay after its emission.
            spawn_late(&client, &url, Duration::from_millis(conditions.delivery_delay_ms), event);
            continue;
        }
        if conditions.delivery_serial_ms > 0 {
            // One queue: the next event waits for this one's slow delivery.
            tokio::time::sleep(Duration::from_millis(conditions.delivery_serial_ms)).await;
        }
        if let Some(hold) = late {
            spawn_late(&client, &url, hold, event);
            continue;
        }
        for copy in copies {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { deliver(&client, &url, &copy).await });
        }
        deliver(&client, &url, &event).await;
    }
}

/// `event` delivered on its own, `hold` from now.
fn spawn_late(client: &Poster, url: &str, hold: Duration, event: Arc<Value>) {
    let (client, url) = (client.clone(), url.to_string());
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        deliver(&client, &url, &event).await;
    });
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
