//! Events that name another connection than the one concerned (§3.2, §6.2 `connectionId`): one
//! fact of the whole run, found the same way in every run, that the cases resting on which
//! connection an event names are derived from ([`Misnamed`]), and what arrived for a driven
//! step under another id ([`elsewhere`]), for the message of a wait that ended without its
//! event. Pure: the tour, the event cases and the root causes pass what the run recorded.

use crate::harness::rules::delivery::{unique, Delivery};
use crate::spec::ConnectionState;
use std::time::Instant;

/// A connection this run created once, announced as created by two or more distinct
/// `connection.created` events, each a creation (no previous status): a connection is created
/// once (§3.2), so all but one of them concern another connection (§6.2 `connectionId`). Seen
/// in every run of such a target: the run's first connection is made before any case runs, and
/// the next one's creation lands on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Misnamed {
    /// The connection named more than once.
    pub connection: String,
    /// The creation announcements naming it, by `seq`.
    pub deliveries: Vec<u64>,
}

/// What every message of the finding says, and what a case it blocked is known by.
pub(crate) const SAID: &str = "the events name another connection than the one concerned";

impl std::fmt::Display for Misnamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} distinct connection.created events, each announcing a creation (no previousStatus), name {}, \
             which this run created once: a connection is created once (§3.2), so {SAID} (§6.2 connectionId)",
            self.deliveries.len(),
            self.connection
        )
    }
}

/// Whether `d` announces a creation: `connection.created` with no previous status (null, absent
/// or empty; §6.2 leaves the created event's `previousStatus` open).
fn creation(d: &Delivery) -> bool {
    d.event_type() == Some(ConnectionState::Created.event_type())
        && d.body.pointer("/data/previousStatus").is_none_or(|p| p.is_null() || p.as_str() == Some(""))
}

/// The connections of `created` (those this run created, in creation order) announced as
/// created more often than this run created them among `deliveries` (each event counted once,
/// copies and retries aside), the first created first.
pub(crate) fn announced_twice(created: &[String], deliveries: &[Delivery]) -> Vec<Misnamed> {
    let creations: Vec<Delivery> = unique(deliveries).into_iter().filter(creation).collect();
    let mut said = std::collections::HashSet::new();
    created
        .iter()
        .filter(|id| said.insert(id.as_str()))
        .filter_map(|id| {
            // A target that gave one id to several creations announces each (create.fresh-ids).
            let times = created.iter().filter(|c| *c == id).count();
            let mut named: Vec<u64> =
                creations.iter().filter(|d| d.connection_id() == Some(id.as_str())).map(|d| d.seq).collect();
            named.sort_unstable();
            (named.len() > times).then(|| Misnamed { connection: id.clone(), deliveries: named })
        })
        .collect()
}

/// What arrived for a step driven on `own` at `driven` under another id: the first delivery
/// (by arrival) after the drive of `event_type`, not `known` before it, that names another
/// connection or none, and that `names` accepts (what a data step was driven on). `describe`
/// says what the run knows of the other connection (`created by this run, driven to connect`).
/// `None` when nothing of the kind arrived.
pub(crate) fn elsewhere(
    timeline: &[(Instant, Delivery)],
    driven: Instant,
    own: &str,
    event_type: &str,
    known: &std::collections::HashSet<String>,
    names: impl Fn(&Delivery) -> bool,
    describe: impl Fn(&str) -> String,
) -> Option<String> {
    let (at, d) = timeline.iter().find(|(at, d)| {
        *at >= driven
            && d.event_type() == Some(event_type)
            && d.connection_id() != Some(own)
            && !known.contains(&d.identity())
            && names(d)
    })?;
    let after = at.saturating_duration_since(driven).as_secs_f64();
    Some(match d.connection_id() {
        Some(other) => {
            format!("a {event_type} naming {other} ({}) arrived {after:.1} s after the drive", describe(other))
        }
        None => format!("a {event_type} naming no connection (no connectionId) arrived {after:.1} s after the drive"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn created(seq: u64, id: &str, connection: &str, previous: serde_json::Value) -> Delivery {
        let data = json!({"eventId": id, "type": "connection.created", "connectionId": connection,
            "occurredAt": format!("2026-01-01T00:00:0{seq}.000Z"), "previousStatus": previous});
        Delivery::new(seq, json!({"id": id, "type": "connection.created", "data": data}))
    }

    #[test]
    fn two_creations_of_one_connection_are_misnamed_events_never_a_copy_or_a_reentry() {
        let run = ["conn_A".to_string(), "conn_B".to_string()];
        let own = created(0, "evt_1", "conn_A", serde_json::Value::Null);
        let copy = own.clone();
        assert!(announced_twice(&run, &[own.clone(), copy]).is_empty(), "a copy is one event");
        let reentry = created(1, "evt_2", "conn_A", json!("error"));
        assert!(announced_twice(&run, &[own.clone(), reentry]).is_empty(), "a re-entry names its previous state");
        let next = created(2, "evt_3", "conn_A", serde_json::Value::Null);
        let found = announced_twice(&run, &[own, next]);
        assert_eq!(found, [Misnamed { connection: "conn_A".into(), deliveries: vec![0, 2] }]);
        assert!(found[0].to_string().contains("2 distinct connection.created events"));
        let foreign = created(3, "evt_4", "conn_X", serde_json::Value::Null);
        assert!(announced_twice(&run, &[foreign.clone(), foreign]).is_empty(), "not a connection of this run");
        let twice = ["conn_A".to_string(), "conn_A".to_string()];
        let (a, b) = (
            created(0, "evt_1", "conn_A", serde_json::Value::Null),
            created(1, "evt_2", "conn_A", serde_json::Value::Null),
        );
        assert!(announced_twice(&twice, &[a, b]).is_empty(), "an id the target gave twice is announced twice");
    }

    #[test]
    fn what_arrived_under_another_id_is_named() {
        let t0 = Instant::now();
        let other = created(0, "evt_1", "conn_B", serde_json::Value::Null);
        let mut bare = created(1, "evt_2", "conn_B", serde_json::Value::Null);
        bare.body["data"].as_object_mut().unwrap().remove("connectionId");
        let bare = Delivery::new(1, bare.body);
        let none = std::collections::HashSet::new();
        let at = t0 + std::time::Duration::from_millis(200);
        let said = elsewhere(&[(at, other)], t0, "conn_A", "connection.created", &none, |_| true, |_| "made".into());
        assert_eq!(said.as_deref(), Some("a connection.created naming conn_B (made) arrived 0.2 s after the drive"));
        let said = elsewhere(&[(at, bare)], t0, "conn_A", "connection.created", &none, |_| true, |_| "made".into());
        assert!(said.unwrap().contains("naming no connection"));
        assert_eq!(elsewhere(&[], t0, "conn_A", "connection.created", &none, |_| true, |_| String::new()), None);
    }
}
