//! The seam of deliveries (§6): what is sent to a webhook address, to which, when, and how many
//! copies. The queue (`webhooks.rs`) makes one [`Delivery`] per event and address, conforming
//! (the event, once, at once, to the addresses of its client); the fault registered here edits
//! it, each row's code the function named on it, below the rows.

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The rows of this seam, handed to `$then` (`seam!` here, `collect!` in `faults/mod.rs`).
macro_rules! deliveries {
    ($then:ident $($args:tt)*) => { $then! { $($args)*
    mutants {
        #[seed]
        EventsToOtherClient = "events-to-other-client", "§6", ["isolation.deliveries"],
            "every event goes to every registered address, also those registered for another client" => to_every_address;
        #[seed]
        EventsToFirstAddress = "events-to-first-address", "§6", ["isolation.deliveries"],
            "every client's events go to the address registered first (the first client's), although each client registered its own" => to_first_address;
        DataEventsToFirstAddress = "data-events-to-first-address", "§6", ["isolation.deliveries"],
            "every client's accounts.updated and transaction.deleted go to the address registered first (connection events go right)" => data_to_first_address;
        AccountsWhileVerifying = "accounts-while-verifying", "§3.2", ["accounts.refused-before-connected"],
            "`connect` serves the accounts from `verifying` on; `connection.connected` is stamped and sent 1.5 s later" => connected_late;
        #[seed]
        NonEventDeliveries = "non-event-deliveries", "§6.1", ["events.deliveries-are-events"],
            "before each event, the webhook address also gets a delivery that is no event (not JSON, an array, 64 nested objects, an array over 1 MiB)" => non_events_first;
        RetryKeepsEventId = "retry-keeps-event-id", "§6.2", ["events.envelope-agrees"],
            "every event is delivered twice, the copy under a new envelope `id` whose `data.eventId` keeps the first's" => retry_keeps_event_id;
    }
    variants {
        LateEvents = "late-events", "§6.3", [],
            "every event is delivered 300 ms late" => late;
        RetryNewId = "retry-new-id", "§6.3", [],
            "every event is delivered twice, the copy under a new event id (a retry that re-stamps)" => retry_new_id;
        RetryNewStamp = "retry-new-stamp", "§6.3", [],
            "every event is delivered twice, the copy under the same id with a new envelope created_at (a retry stamped when sent)" => retry_new_stamp;
        DuplicateEvents = "duplicate-events", "§6.3", [],
            "every event is delivered twice" => twice;
    }
    } };
}

deliveries!(seam DELIVERIES: DeliveryFault;);

/// How late `accounts-while-verifying` stamps and sends `connection.connected`.
pub(in crate::sandbox) const ANNOUNCED_LATE_MS: u64 = 1500;

/// One event on its way to one address, as the queue will send it.
pub(in crate::sandbox) struct Delivery {
    pub event: Arc<Value>,
    /// Whether the address was registered first (of those registered now).
    pub first_address: bool,
    /// How many events this address was sent before.
    pub sent_before: usize,
    /// Whether it goes to this address at all (conforming: whether the address takes the
    /// event's client's events, its own or every client's).
    pub to: bool,
    /// Bodies posted before it, one after another (no event: not even JSON).
    pub first: Vec<String>,
    /// Copies sent on their own at once, whatever the delivery conditions.
    pub beside: Vec<Value>,
    /// The event sent on its own this long after, whatever the delivery conditions.
    pub held: Option<Duration>,
    /// The event sent on its own this long after the delivery conditions let it go.
    pub late: Option<Duration>,
    /// Copies sent alongside it once the delivery conditions let it go.
    pub copies: Vec<Value>,
}

impl Delivery {
    /// The conforming delivery of `event`.
    pub(in crate::sandbox) fn new(
        event: Arc<Value>,
        first_address: bool,
        for_its_client: bool,
        sent_before: usize,
    ) -> Self {
        let (first, beside, copies) = (Vec::new(), Vec::new(), Vec::new());
        Self { event, first_address, sent_before, to: for_its_client, first, beside, held: None, late: None, copies }
    }
}

/// The seam's interface: an edit of the delivery.
pub(in crate::sandbox) type DeliveryFault = fn(&mut Delivery);

fn to_every_address(d: &mut Delivery) {
    d.to = true;
}

/// `events-to-first-address`: every event to the address registered first, and only there.
fn to_first_address(d: &mut Delivery) {
    d.to = d.first_address;
}

/// `data-events-to-first-address`: so, but only the account and transaction events.
fn data_to_first_address(d: &mut Delivery) {
    if !d.event["type"].as_str().is_some_and(|t| t.starts_with("connection.")) {
        d.to = d.first_address;
    }
}

/// `accounts-while-verifying`: `connection.connected` sent when it is stamped,
/// [`ANNOUNCED_LATE_MS`] after the state was stored (the store stamps it so).
fn connected_late(d: &mut Delivery) {
    if d.event["type"] == "connection.connected" {
        d.held = Some(Duration::from_millis(ANNOUNCED_LATE_MS));
    }
}

/// `non-event-deliveries`: something that is no event goes out first, each kind in turn: not
/// JSON, an array, 64 nested objects, an array over the receiver's 1 MiB (refused unread, and
/// counted so).
fn non_events_first(d: &mut Delivery) {
    d.first.push(match d.sent_before % 4 {
        0 => "{\"id\": \"evt_".to_string(),
        1 => format!("[{}0]", "0,".repeat(999)),
        2 => format!("{}{{}}{}", "{\"a\":".repeat(64), "}".repeat(64)),
        _ => format!("[{}0]", "0,".repeat(1_000_000)),
    });
}

/// `retry-keeps-event-id`: a retry, whatever the delivery conditions, whose `data.eventId` is
/// the first's, not its envelope's id (§6.2).
fn retry_keeps_event_id(d: &mut Delivery) {
    d.beside.push(retry_copy(&d.event, false));
}

/// `late-events` (legal): each event 300 ms after its emission (not one after the other).
fn late(d: &mut Delivery) {
    d.late = Some(Duration::from_millis(300));
}

/// `retry-new-id` (legal): §6.3 allows retries; whether a retry keeps its id is not shown (§6.1).
fn retry_new_id(d: &mut Delivery) {
    d.copies.push(retry_copy(&d.event, true));
}

/// `retry-new-stamp` (legal): §6.1 does not say whether `created_at` stamps the event or its
/// sending.
fn retry_new_stamp(d: &mut Delivery) {
    d.copies.push(restamped(&d.event));
}

/// `duplicate-events` (legal): the copy goes out alongside, so duplicates do not slow the queue.
fn twice(d: &mut Delivery) {
    d.copies.push(Value::clone(&d.event));
}

/// `event` sent again under a new id, as a retry that re-stamps it; its `data.eventId` follows
/// the new id when `renumber_data` (else it keeps the first's).
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
/// retry that stamps the moment it is sent.
fn restamped(event: &Value) -> Value {
    let mut copy = event.clone();
    let later =
        copy.get("created_at").and_then(Value::as_str).and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(
            |t| crate::sandbox::render::timestamp_millis(t.with_timezone(&chrono::Utc) + chrono::Duration::seconds(1)),
        );
    if let Some(later) = later {
        copy["created_at"] = Value::String(later);
    }
    copy
}
