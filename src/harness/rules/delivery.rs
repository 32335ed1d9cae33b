//! A webhook delivery as the harness keeps it, and the small helpers over a list of them.
//! Pure data: the receiver fills it, the event rules and `check-events` read it.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// One POST the receiver got.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// Arrival order at the receiver (informative only: delivery order is not specified).
    pub seq: u64,
    /// The body, or `Value::Null` when it was not JSON.
    pub body: Value,
    /// Which client's address it was posted to (§6: events go to the client's server).
    pub to: Recipient,
    /// `occurredAt`, read once ([`Delivery::occurred_at`]).
    occurred: Option<DateTime<Utc>>,
    /// The unit `occurredAt` is written in ([`Delivery::occurred_unit`]).
    unit: chrono::Duration,
    /// It carried the other client's API key, whole or a piece, in a header or its body, as
    /// the receiver searched it on arrival (§5 item 2; the text itself is never kept).
    pub other_clients_key: bool,
    /// [`Delivery::identity`], made once on first use: the rules ask it of every delivery many
    /// times over (`unique`), and making it serialises the body (issue 72: a tenth of a run's
    /// processor time).
    identity: std::sync::OnceLock<String>,
}

/// The receiver serves one address per client: the one registered for the client under test,
/// and the second client's. Where a delivery was posted says whose server the target sent it
/// to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recipient {
    /// The client under test's address (`--api-key`), and any path the receiver does not know.
    #[default]
    First,
    /// The second client's address (`--second-api-key`).
    Second,
}

impl Delivery {
    /// A delivery posted to the first client's address (captures, tests).
    pub fn new(seq: u64, body: Value) -> Self {
        Self::posted(seq, body, Recipient::First)
    }

    /// A delivery posted to `to`'s address.
    pub fn posted(seq: u64, body: Value, to: Recipient) -> Self {
        let text = body.get("data").unwrap_or(&body).get("occurredAt").and_then(Value::as_str);
        let occurred = text.and_then(event_moment);
        // A clock that reads whole seconds may still write `.000`: a whole second is a second's
        // worth, whatever the digits (variant `whole-second-clock`).
        let unit = match (text, occurred) {
            (_, Some(at)) if at.timestamp_subsec_nanos() == 0 => chrono::Duration::seconds(1),
            (Some(text), _) => stamp_unit(&crate::spec::extended_timestamp(text)),
            (None, _) => chrono::Duration::zero(),
        };
        Self { seq, body, to, occurred, unit, other_clients_key: false, identity: std::sync::OnceLock::new() }
    }

    /// `data.occurredAt` (§6.2), the server's own time of the event, as an instant: the one
    /// reading of that field in the harness, so that every rule orders events alike (an offset
    /// form, or `…:00Z` against `…:00.001Z`, compares by time, never by its text). `None` when
    /// absent or no RFC 3339 date-time (`events.schema` judges the form).
    pub fn occurred_at(&self) -> Option<DateTime<Utc>> {
        self.occurred
    }

    /// The last digit's worth of `occurredAt` (1 ms for `.123Z`, 1 s with no fraction or on a
    /// whole second): the
    /// moment the server meant lies within one unit of the text either way, whether it cut or
    /// rounded, so a bound drawn from the stamp is widened by it (a stamp cut to the
    /// millisecond reads up to 1 ms before the request that caused it).
    pub fn occurred_unit(&self) -> chrono::Duration {
        self.unit
    }

    /// The connection the event concerns: `data.connectionId`, or the short form's `connectionId`.
    pub fn connection_id(&self) -> Option<&str> {
        self.body.pointer("/data/connectionId").or_else(|| self.body.get("connectionId")).and_then(Value::as_str)
    }

    /// `type` of the envelope, or `event` of the short `connection.connected` form (§6.2).
    pub fn event_type(&self) -> Option<&str> {
        self.body.get("type").or_else(|| self.body.get("event")).and_then(Value::as_str)
    }

    /// Whether this is the short flat form of §6.2.
    pub fn is_short_form(&self) -> bool {
        self.body.get("event").is_some() && self.body.get("data").is_none()
    }

    /// What identifies the event across retries: the envelope `id`, or the short form's
    /// `event`+`timestamp` (which has no id).
    pub fn dedup_key(&self) -> String {
        match self.body.get("id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => format!(
                "{}@{}",
                self.event_type().unwrap_or("?"),
                self.body.get("timestamp").and_then(Value::as_str).unwrap_or("?")
            ),
        }
    }

    /// The delivery without what a re-stamped retry changes (`id`, `created_at`,
    /// `data.eventId`), when it says when the event occurred (`data.occurredAt`): equal for a
    /// retry, whatever id it was sent under. Without `occurredAt`, two events of equal content
    /// may be a real revisit of a state, so there is no such key.
    fn content_key(&self) -> Option<String> {
        // Only a moment to the millisecond (§6.2) tells a retry from another event of the same
        // content: cut to the second, two changes within one second would read as one.
        let occurred = self.body.pointer("/data/occurredAt").and_then(Value::as_str).filter(|s| to_the_millisecond(s));
        occurred?;
        let mut body = self.body.clone();
        if let Some(o) = body.as_object_mut() {
            o.remove("id");
            o.remove("created_at");
            if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
                data.remove("eventId");
            }
        }
        Some(body.to_string())
    }

    /// `connection.verifying(prev=created)`, for messages.
    pub fn label(&self) -> String {
        let ty = self.event_type().unwrap_or("<no type>");
        match self.body.pointer("/data/previousStatus") {
            Some(Value::String(p)) => format!("{ty}(prev={p})"),
            Some(Value::Null) | None => ty.to_string(),
            Some(other) => format!("{ty}(prev={other})"),
        }
    }

    /// What makes two deliveries one event (see [`unique`]): copies share it.
    pub fn identity(&self) -> String {
        self.identity.get_or_init(|| self.content_key().unwrap_or_else(|| self.id_identity())).clone()
    }

    /// The identity by id and body alone, for an event whose `occurredAt` falls on a whole
    /// second (`.000`): a server that cuts its stamps to the second writes two events of one
    /// content within a second alike but for their ids, so the same content there is either a
    /// retry under a new id or another event. The rules that find no reading with the first
    /// take the second ([`unique_by_id`], [`step_event`]). Other events: [`Self::identity`].
    pub fn second_identity(&self) -> String {
        match self.body.pointer("/data/occurredAt").and_then(Value::as_str) {
            Some(at) if at.ends_with(".000Z") => self.id_identity(),
            _ => self.identity(),
        }
    }

    /// The identity by id and body: two events of one content under two ids are two (a wait
    /// for the events of steps driven back to back, whose stamps may share a millisecond).
    pub(crate) fn id_identity(&self) -> String {
        format!("{}{}", self.dedup_key(), self.body)
    }

    /// Whether the delivery is an event at all (§6.1): a JSON object that names its type, as
    /// the envelope (`type`) or the short form (`event`) does. Anything else posted to a
    /// client's address (not JSON, an array, an object of no event's shape) is no event, and
    /// never a copy of one.
    pub fn is_event(&self) -> bool {
        self.body.is_object() && self.event_type().is_some()
    }

    /// A string field of `data` (or of the short form's flat object).
    pub fn data_str(&self, field: &str) -> Option<&str> {
        self.body.get("data").unwrap_or(&self.body).get(field).and_then(Value::as_str)
    }
}

/// The moment an event's timestamp names (§6.1 `created_at`, §6.2 `occurredAt`, both written
/// "with milliseconds"), or `None` when there is none to trust: no RFC 3339 text, or a fraction
/// of one or two digits. Such a text fails `events.schema` in every run; read as a moment (`.5`
/// written for 5 ms reads 500 ms late) it would contradict other events only where the server's
/// clock happened to put it, failing other cases in some runs only (the Node target's
/// `ms-unpadded`), so no time rule reads it.
pub(crate) fn event_moment(text: &str) -> Option<DateTime<Utc>> {
    let text = crate::spec::extended_timestamp(text);
    let at = DateTime::parse_from_rfc3339(&text).ok()?.with_timezone(&Utc);
    match fraction_digits(&text) {
        Some(1 | 2) => None,
        _ => Some(at),
    }
}

/// How many digits the fraction of a second of RFC 3339 `text` has (`None`: no fraction). RFC
/// 3339 puts the seconds at bytes 17..19 and any fraction right after them.
fn fraction_digits(text: &str) -> Option<usize> {
    let fraction = text.get(19..)?.strip_prefix('.')?;
    Some(fraction.bytes().take_while(u8::is_ascii_digit).count())
}

/// One unit of the last digit of RFC 3339 `text`'s time: a second without a fraction, else
/// 10^-digits s (at least a nanosecond).
fn stamp_unit(text: &str) -> chrono::Duration {
    match fraction_digits(text) {
        None | Some(0) => chrono::Duration::seconds(1),
        Some(n) => chrono::Duration::nanoseconds(10i64.pow(9u32.saturating_sub(n.min(9) as u32))),
    }
}

/// Whether `text` is a moment written to the millisecond or finer, as §6.2 writes `occurredAt`.
fn to_the_millisecond(text: &str) -> bool {
    event_moment(text).is_some() && fraction_digits(text).is_some_and(|n| n >= 3)
}

/// Deliveries counted once per event: a duplicate (a retry, allowed by §6.3) has the same
/// event id and content, or (a retry re-stamped with a new id: §6.1 does not say a retry keeps
/// its id) the same content and the same `data.occurredAt`, the millisecond the event occurred
/// (§6.2). The same id with other content is another event, kept here and judged by
/// `events.unique-ids` (§6.1: the id identifies the event).
pub(crate) fn unique(deliveries: &[Delivery]) -> Vec<Delivery> {
    let mut seen = std::collections::HashSet::new();
    deliveries.iter().filter(|d| seen.insert(d.identity())).cloned().collect()
}

/// Each delivery whose body differs from every earlier one's. What holds of every delivery (its
/// schema, its envelope against its data) is judged on each copy as it was sent: a retry may
/// change its `id`, `created_at` and `data.eventId` ([`unique`] counts it once), and those must
/// still be right (`tests/foreign/python-worker`'s `retry-eventid-mismatch`, missed while only the first
/// copy was judged). A byte-equal copy is judged once.
pub(crate) fn distinct(deliveries: &[Delivery]) -> Vec<Delivery> {
    let mut seen = std::collections::HashSet::new();
    deliveries.iter().filter(|d| seen.insert(d.body.to_string())).cloned().collect()
}

/// How many events of `event_type` the deliveries hold, each counted once however many copies
/// arrived (§6.3 leaves retries open: a copy is never a second event).
pub(crate) fn count(deliveries: &[Delivery], event_type: &str) -> usize {
    unique(deliveries).iter().filter(|d| d.event_type() == Some(event_type)).count()
}

/// Whether the deliveries hold `want` events of `event_type`, each counted once ([`count`]),
/// under either reading ([`unique_by_id`]: events stamped on a whole second, alike but for their
/// ids, may be as many events). A short form (§6.2) has no id and a timestamp of whole seconds:
/// two events of one second cannot be told from a copy, so once one arrived it stands for any
/// number.
pub(crate) fn holds(deliveries: &[Delivery], event_type: &str, want: usize) -> bool {
    count(deliveries, event_type) >= want
        || unique_by_id(deliveries).iter().filter(|d| d.event_type() == Some(event_type)).count() >= want
        || deliveries.iter().any(|d| d.is_short_form() && d.event_type() == Some(event_type))
}

/// The identities of the events among `deliveries` (see [`Delivery::identity`]): what was
/// known at some moment, so that a later copy of one of them is never taken for a new event.
pub(crate) fn identities(deliveries: &[Delivery]) -> std::collections::HashSet<String> {
    deliveries.iter().flat_map(|d| [d.identity(), d.second_identity()]).collect()
}

/// [`unique`] under the second reading ([`Delivery::second_identity`]): events stamped on a
/// whole second are one only when their ids and bodies are.
pub(crate) fn unique_by_id(deliveries: &[Delivery]) -> Vec<Delivery> {
    let mut seen = std::collections::HashSet::new();
    deliveries.iter().filter(|d| seen.insert(d.second_identity())).cloned().collect()
}

/// The one helper that answers "which event belongs to this step": an event of `event_type`
/// that was not known when the step began (`known`, see [`identities`]), preferring one that
/// `names` what the step was driven on. Arrival order plays no part: among several candidates
/// the one that occurred first ([`Delivery::occurred_at`], then id) is taken, so copies, retries and late
/// deliveries of earlier events never stand in for this step's.
pub(crate) fn step_event<'a>(
    deliveries: &'a [Delivery],
    known: &std::collections::HashSet<String>,
    event_type: &str,
    names: impl Fn(&Delivery) -> bool,
) -> Option<&'a Delivery> {
    let order = |d: &&Delivery| (d.occurred_at(), d.dedup_key());
    let of_type = |d: &&Delivery| d.event_type() == Some(event_type);
    let mut candidates: Vec<&Delivery> =
        deliveries.iter().filter(of_type).filter(|d| !known.contains(&d.identity())).collect();
    if candidates.is_empty() {
        // None new under the first reading: an event stamped on a whole second like a known
        // one, under another id, may be this step's (the second reading).
        candidates = deliveries.iter().filter(of_type).filter(|d| !known.contains(&d.second_identity())).collect();
    }
    candidates.sort_by_key(order);
    candidates.iter().find(|d| names(d)).or(candidates.first()).copied()
}

/// `[connection.created, connection.verifying(prev=…)]`, for messages.
pub(crate) fn labels(deliveries: &[Delivery]) -> String {
    let labels: Vec<String> = unique(deliveries).iter().map(Delivery::label).collect();
    format!("[{}]", labels.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(id: &str, occurred: &str) -> Delivery {
        let data =
            json!({"eventId": id, "type": "connection.connected", "connectionId": "conn_1", "occurredAt": occurred});
        Delivery::new(0, json!({"id": id, "type": "connection.connected", "created_at": id, "data": data}))
    }

    #[test]
    fn a_retry_counts_once_under_its_id_or_a_new_one() {
        let first = delivery("evt_1", "2026-01-01T00:00:00.001Z");
        let restamped = delivery("evt_2", "2026-01-01T00:00:00.001Z");
        let revisit = delivery("evt_3", "2026-01-01T00:00:00.002Z");
        assert_eq!(unique(&[first.clone(), first.clone(), restamped]).len(), 1);
        assert_eq!(unique(&[first, revisit]).len(), 2, "another moment is another event");
    }

    #[test]
    fn a_step_takes_its_own_event_never_a_late_copy_of_an_earlier_one() {
        let earlier = delivery("evt_1", "2026-01-01T00:00:00.001Z");
        let own = delivery("evt_2", "2026-01-01T00:00:00.005Z");
        let known = identities(std::slice::from_ref(&earlier));
        // The earlier event's copy arrives after the step began, and after the step's own event.
        let arrived = [own.clone(), earlier.clone(), earlier];
        let found = step_event(&arrived, &known, "connection.connected", |_| true);
        assert_eq!(found.map(|d| d.dedup_key()), Some("evt_2".to_string()));
        assert_eq!(count(&arrived, "connection.connected"), 2, "three deliveries, two events");
        assert!(holds(&arrived, "connection.connected", 2) && !holds(&arrived, "connection.connected", 3));
        let short = Delivery::new(
            3,
            json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:00Z"}),
        );
        assert!(holds(&[short.clone(), short], "connection.connected", 2), "two reconnects in one second, or a copy");
    }

    #[test]
    fn the_server_time_orders_by_instant_never_by_text() {
        // As text, `…:00Z` sorts after `…:00.001Z`, and an offset form by its digits.
        let whole = delivery("evt_1", "2026-01-01T00:00:00Z");
        let later = delivery("evt_2", "2026-01-01T00:00:00.001Z");
        let offset = delivery("evt_3", "2026-01-01T01:00:00.002+01:00");
        assert!(whole.occurred_at() < later.occurred_at() && later.occurred_at() < offset.occurred_at());
        let none = std::collections::HashSet::new();
        let arrived = [offset.clone(), later.clone(), whole.clone()];
        let found = step_event(&arrived, &none, "connection.connected", |_| true);
        assert_eq!(found.map(|d| d.dedup_key()), Some("evt_1".to_string()));
        assert_eq!(delivery("evt_4", "yesterday").occurred_at(), None);
    }

    /// A fraction of one or two digits is no moment (§6.2 "with milliseconds"): `.5` may have
    /// been written for 5 ms. Three or more digits, or none, are read as written.
    #[test]
    fn an_unpadded_fraction_is_no_moment() {
        assert_eq!(event_moment("2026-01-01T00:00:07.5Z"), None);
        assert_eq!(event_moment("2026-01-01T00:00:07.45Z"), None);
        let padded = event_moment("2026-01-01T00:00:07.005Z").unwrap();
        assert_eq!(padded.timestamp_subsec_millis(), 5);
        assert!(event_moment("2026-01-01T00:00:07.123456+00:00").is_some());
        assert!(event_moment("2026-01-01T00:00:07Z").is_some());
        assert_eq!(event_moment("yesterday"), None);
        assert!(to_the_millisecond("2026-01-01T00:00:07.005Z") && !to_the_millisecond("2026-01-01T00:00:07Z"));
    }
}
