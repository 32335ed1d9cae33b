//! The event rules (§3, §6) as pure functions over recorded deliveries: one piece of code per
//! rule, used alike by the event cases of `bankconf run` (over the tour's deliveries) and by
//! `bankconf check-events` (over a capture file). Duplicates (the same event id twice) are
//! counted once and arrival order is never trusted (§6.3).

use crate::harness::rules::chain;
use crate::harness::rules::delivery::{distinct, labels, Delivery, Recipient};
use crate::harness::vocab::kind::EventKind;
use crate::harness::vocab::outcome::{validate, Problems};
use crate::harness::vocab::outcome::{Failure, Problem, Stop};
use crate::schemas::Schema;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The deliveries of one connection, named by its id.
pub(crate) type Group<'a> = (&'a str, &'a [Delivery]);

/// `delivery evt_… (connection.verifying)`, for messages.
pub(crate) fn what(d: &Delivery) -> String {
    match d.body.get("id").and_then(Value::as_str) {
        Some(id) => format!("delivery {id} ({})", d.event_type().unwrap_or("no type")),
        None => format!("delivery #{} ({})", d.seq + 1, d.event_type().unwrap_or("no type")),
    }
}

/// The finding `problem`, resting on `deliveries` (by their `seq`): what the reports link and
/// replay.
pub(crate) fn on<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>, problem: Problem) -> Failure {
    deliveries.into_iter().fold(Failure::from(problem), |f, d| f.on_delivery(d.seq))
}

/// The id of the event `d` carries, if it names one (the ids a finding about it is about).
pub(crate) fn event_id(d: &Delivery) -> Option<String> {
    d.body.get("id").and_then(Value::as_str).map(str::to_string)
}

fn show(v: Option<&Value>) -> String {
    v.map_or("absent".to_string(), ToString::to_string)
}

/// §6.1, §6.2: every delivery is JSON and validates against `webhook-event.json`.
pub(crate) fn schema(deliveries: &[Delivery]) -> Result<(), Stop> {
    let mut problems = Problems::default();
    for d in distinct(deliveries) {
        if d.body.is_null() {
            let detail = format!("{}: body is not JSON", what(&d));
            problems.add(on([&d], Problem::found(EventKind::NotJson, d.connection_id().map(str::to_string), detail)));
        } else if let Some(batch) = d.body.as_array() {
            let message = format!(
                "{}: body is a JSON array of {} (a batch); §6.1 shows one event object per delivery",
                what(&d),
                batch.len()
            );
            problems.add(on([&d], Problem::found(EventKind::Batch, d.connection_id().map(str::to_string), message)));
        } else if let Err(e) = validate(Schema::WebhookEvent, &d.body, &what(&d)) {
            // The delivery is the evidence: its body, cut, in the message (which the run redacts).
            let body = crate::harness::vocab::redact::shorten(&d.body.to_string(), 240);
            let detail = format!("{e}; the delivery's body: {body}");
            problems.add(on([&d], Problem::found(EventKind::Schema, event_id(&d), detail)));
        }
    }
    problems.finish()
}

/// §6.1: whatever a target posts to a client's address is an event. Those that are no event at
/// all (not JSON, an array, an object that names no type: [`Delivery::is_event`]) fail, one
/// problem per kind with how many and the first few as evidence; an event about none of
/// `judged` (the connections `events.schema` judges) is validated here. A copy counts once.
pub(crate) fn deliveries_are_events(all: &[Delivery], judged: &HashSet<String>) -> Result<(), Stop> {
    let mut kinds: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
    for d in all.iter().filter(|d| !d.is_event()) {
        let kind = match &d.body {
            Value::Null => "the body is not JSON",
            Value::Array(_) => "the body is a JSON array, not one event object",
            Value::Object(_) => "the body is a JSON object that names no event type (no `type`, no `event`)",
            _ => "the body is a JSON scalar, not an event object",
        };
        kinds.entry(kind).or_default().push(d);
    }
    let mut problems = Problems::default();
    // The message names the kind alone: how many arrived by the end of the tour, and which,
    // depends on timing; the deliveries are the evidence (the first three of each kind).
    for (kind, ds) in &kinds {
        let message = format!("a delivery posted to a client's webhook address is no event (§6.1): {kind}");
        problems.add(on(ds.iter().take(3).copied(), Problem::found(EventKind::NoEvent, [], message)));
    }
    let others: Vec<Delivery> =
        all.iter().filter(|d| d.is_event() && d.connection_id().is_none() && !judged.is_empty()).cloned().collect();
    problems.keep(schema(&others))?;
    problems.finish()
}

/// §6.1: an event id identifies one event: deliveries that share an id carry the same content
/// (a retry); the same id on different content is two events under one id. Both are shown.
///
/// Two freedoms, ruled in `docs/checks.md` ("The scope of an identifier"): the scope of an id is
/// one client's address (§6.1 gives none, as §2 gives none for the other ids), so ids are
/// compared among the deliveries to one address; and a retry copy may carry a new envelope
/// `created_at` (§6.3 leaves retries open, §6.1 does not say whether `created_at` stamps the
/// event or its sending), so that field is left out of the comparison. Everything else, the
/// data's `occurredAt` included, is the event's and must be the same.
pub(crate) fn ids_identify_events(deliveries: &[Delivery]) -> Result<(), Stop> {
    let mut first: BTreeMap<(Recipient, &str), (&Delivery, Value)> = BTreeMap::new();
    let mut problems = Problems::default();
    for d in deliveries {
        let Some(id) = d.body.get("id").and_then(Value::as_str) else { continue };
        let content = without_sending_stamp(&d.body);
        match first.get(&(d.to, id)) {
            None => {
                first.insert((d.to, id), (d, content));
            }
            Some((earlier, was)) if *was != content => {
                let detail = format!("event id {id} names two different events: {} and {}", earlier.label(), d.label());
                let problem =
                    Problem::found(EventKind::IdReused, [id.to_string()], detail).expecting(earlier.label(), d.label());
                problems.add(on(&[(*earlier).clone(), d.clone()], problem))
            }
            Some(_) => {}
        }
    }
    problems.finish()
}

/// An event's body without its envelope `created_at`, which a retry copy may stamp anew.
fn without_sending_stamp(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(o) = body.as_object_mut() {
        o.remove("created_at");
    }
    body
}

/// §6.2: the envelope and its data agree (`type` = `data.type`, `id` = `data.eventId`). The
/// short form has no envelope and is not judged here.
pub(crate) fn envelope_agrees(deliveries: &[Delivery]) -> Result<(), Stop> {
    let mut problems = Problems::default();
    for d in distinct(deliveries).iter().filter(|d| !d.is_short_form() && !d.body.is_null()) {
        for (outer, inner) in [("type", "type"), ("id", "eventId")] {
            let (a, b) = (d.body.get(outer), d.body.pointer(&format!("/data/{inner}")));
            if a != b {
                let detail = format!("{}: {outer} is {} but data.{inner} is {}", what(d), show(a), show(b));
                let problem = Problem::found(EventKind::EnvelopeDisagrees, event_id(d), detail)
                    .expecting(format!("data.{inner} {}", show(a)), format!("data.{inner} {}", show(b)));
                problems.add(on([d], problem));
            }
        }
    }
    problems.finish()
}

/// Whether a connection's deliveries include its `connection.created`.
pub(crate) fn has_created(deliveries: &[Delivery]) -> bool {
    deliveries.iter().any(|d| d.event_type() == Some("connection.created"))
}

/// §3.2: the connections among `groups` with no `connection.created`, each with what did arrive.
pub(crate) fn missing_created(groups: &[Group<'_>]) -> Vec<Failure> {
    groups
        .iter()
        .filter(|(_, ds)| !has_created(ds))
        .map(|(id, ds)| {
            let detail = format!("connection {id}: no connection.created among {}", labels(ds));
            on(ds.iter(), Problem::found(EventKind::CreatedMissing, [id.to_string()], detail))
        })
        .collect()
}

/// §3.1, §6.2: each connection's events link into one chain from `connection.created`
/// (see [`chain::resolve`]).
pub(crate) fn chains(groups: &[Group<'_>]) -> Result<(), Stop> {
    let mut problems = Problems::default();
    for (id, deliveries) in groups {
        if let Err(e) = chain::resolve(deliveries) {
            let detail = format!("connection {id}: {e}");
            problems.add(on(deliveries.iter(), Problem::found(EventKind::Chain, [id.to_string()], detail)));
        }
    }
    problems.finish()
}

/// §6.2: within each group, every envelope carries the same `data.clientId`. `bankconf run`
/// passes one group (all of one client's connections); a capture, which may hold several
/// clients, passes one group per connection (a connection belongs to one client).
pub(crate) fn one_client_id(groups: &[(String, Vec<Delivery>)]) -> Result<(), Stop> {
    let mut problems = Problems::default();
    for (name, deliveries) in groups {
        let ids: BTreeSet<String> = deliveries
            .iter()
            .filter(|d| !d.is_short_form() && !d.body.is_null())
            .map(|d| show(d.body.pointer("/data/clientId")))
            .collect();
        if ids.len() > 1 {
            let n = ids.len();
            let carried = ids.into_iter().collect::<Vec<_>>().join(", ");
            let message = format!("{name}: events carry {n} different data.clientId values: {carried}");
            let problem = Problem::found(EventKind::ClientIds, [], message).expecting("one data.clientId", carried);
            problems.add(on(deliveries, problem));
        }
    }
    problems.finish()
}

/// §6.2: two clients never share a `clientId`: the `clientId`s of each group (a client's
/// deliveries) are disjoint from every other group's.
pub(crate) fn distinct_client_ids(groups: &[(String, Vec<Delivery>)]) -> Result<(), Stop> {
    let sets: Vec<(&str, &[Delivery], BTreeSet<String>)> = groups
        .iter()
        .map(|(name, ds)| {
            let ids = ds.iter().filter_map(|d| d.body.pointer("/data/clientId")).map(|v| show(Some(v))).collect();
            (name.as_str(), ds.as_slice(), ids)
        })
        .collect();
    let mut problems = Problems::default();
    for (i, (a, ds_a, ids_a)) in sets.iter().enumerate() {
        for (b, ds_b, ids_b) in &sets[i + 1..] {
            if let Some(shared) = ids_a.intersection(ids_b).next() {
                // The first delivery of each that carries the shared id.
                let carrying = |ds: &[Delivery]| {
                    ds.iter()
                        .find(|d| d.body.pointer("/data/clientId").is_some_and(|v| show(Some(v)) == *shared))
                        .cloned()
                };
                let shown: Vec<Delivery> = [carrying(ds_a), carrying(ds_b)].into_iter().flatten().collect();
                let detail = format!("{a} and {b} are both announced with data.clientId {shared}");
                problems.add(on(&shown, Problem::found(EventKind::SharedClientId, [shared.clone()], detail)));
            }
        }
    }
    problems.finish()
}

/// Groups deliveries by the connection they concern, in order of first appearance. Deliveries
/// that name no connection are returned apart.
pub(crate) fn by_connection(deliveries: &[Delivery]) -> (Vec<(String, Vec<Delivery>)>, Vec<Delivery>) {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    let mut orphans = Vec::new();
    for d in deliveries {
        match d.connection_id() {
            Some(id) => {
                if !groups.contains_key(id) {
                    order.push(id.to_string());
                }
                groups.entry(id.to_string()).or_default().push(d.clone());
            }
            None => orphans.push(d.clone()),
        }
    }
    let grouped = order.into_iter().map(|id| (id.clone(), groups.remove(&id).unwrap_or_default())).collect();
    (grouped, orphans)
}

/// The distinct `data.clientId` values of the deliveries.
pub(crate) fn client_ids(deliveries: &[Delivery]) -> BTreeSet<String> {
    deliveries
        .iter()
        .filter_map(|d| d.body.pointer("/data/clientId").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(body: Value) -> Delivery {
        Delivery::new(0, body)
    }

    #[test]
    fn envelope_disagreement_is_named() {
        let bad = d(
            json!({"id": "evt_1", "type": "connection.created", "data": {"eventId": "evt_2", "type": "connection.created"}}),
        );
        let e = envelope_agrees(&[bad]).unwrap_err().to_string();
        assert!(e.contains("data.eventId is \"evt_2\""), "{e}");
    }

    #[test]
    fn a_retry_under_a_new_id_has_its_envelope_judged_too() {
        let data = json!({"eventId": "evt_1", "type": "connection.created", "occurredAt": "2026-01-01T00:00:00.123Z"});
        let first = d(json!({"id": "evt_1", "type": "connection.created", "data": data}));
        assert!(envelope_agrees(&[first.clone(), first.clone()]).is_ok());
        let retry = d(json!({"id": "evt_9", "type": "connection.created", "data": data}));
        let e = envelope_agrees(&[first, retry]).unwrap_err().to_string();
        assert!(e.contains("id is \"evt_9\" but data.eventId is \"evt_1\""), "{e}");
    }

    #[test]
    fn client_ids_are_judged_per_group() {
        let a = d(json!({"id": "evt_1", "data": {"clientId": "cli_A", "connectionId": "conn_1"}}));
        let b = d(json!({"id": "evt_2", "data": {"clientId": "cli_B", "connectionId": "conn_2"}}));
        let (groups, orphans) = by_connection(&[a.clone(), b.clone()]);
        assert!(orphans.is_empty());
        assert!(one_client_id(&groups).is_ok());
        assert!(one_client_id(&[("one client".to_string(), vec![a, b])]).is_err());
    }
}
