//! Reconstructs a connection's state chain from its connection events without trusting
//! arrival order (§3.1, §6.2): each event announces a state and names the one before it
//! (`previousStatus`), so the events must admit an order that links them all, starting at
//! `connection.created`.

use super::delivery::{unique, Delivery};
use crate::spec::ConnectionState;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// One link: from `previous` (None: not said, as in the short form) into `state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Link {
    previous: Option<ConnectionState>,
    state: ConnectionState,
}

/// Search budget; a consistent chain is found long before it.
const BUDGET: usize = 200_000;
/// Most links ordered; the search's depth grows with them.
const MAX_LINKS: usize = 1_000;

/// Checks that the connection events among `deliveries` form one chain from
/// `connection.created`. Returns the final state of the chain.
pub fn resolve(deliveries: &[Delivery]) -> Result<ConnectionState, String> {
    let events = unique(deliveries);
    let mut created = 0;
    let mut links: BTreeMap<Link, usize> = BTreeMap::new();
    for d in &events {
        let Some(state) = d.event_type().and_then(ConnectionState::from_event_type) else { continue };
        if state == ConnectionState::Created && created == 0 {
            created += 1;
            continue;
        }
        let previous = if d.is_short_form() {
            None
        } else {
            match d.body.pointer("/data/previousStatus") {
                Some(Value::String(p)) => Some(ConnectionState::from_lower(p).ok_or_else(|| {
                    format!("{}: previousStatus {p:?} is not a lower-case state name of §3.1", d.label())
                })?),
                other => {
                    return Err(format!(
                        "{}: previousStatus must be a lower-case state name, got {}",
                        d.label(),
                        other.map_or("nothing".to_string(), Value::to_string)
                    ))
                }
            }
        };
        if previous.is_none() {
            // The short form has no id, so its deliveries cannot be told apart from retries:
            // all of them make one link, which may also be taken again (see `search`).
            links.insert(Link { previous, state }, 1);
        } else {
            *links.entry(Link { previous, state }).or_default() += 1;
        }
    }
    if created == 0 {
        return Err("no connection.created event: the chain has no start".to_string());
    }
    if links.values().sum::<usize>() > MAX_LINKS {
        // Too many to order within bounds (the search recurses per link): undecided, so the
        // state of the last arrived connection event is taken, and nothing is failed.
        let last = events.iter().rev().find_map(|d| d.event_type().and_then(ConnectionState::from_event_type));
        return Ok(last.unwrap_or(ConnectionState::Created));
    }
    let kinds: Vec<Link> = links.keys().copied().collect();
    let mut counts: Vec<usize> = links.values().copied().collect();
    let mut dead_ends = HashSet::new();
    let mut budget = BUDGET;
    match search(ConnectionState::Created, &kinds, &mut counts, &mut dead_ends, &mut budget) {
        // Same-looking short forms collapse into one link, so the chain may also end with
        // that link taken again: it does when the last connection event to arrive is one.
        Some(end) => match last_short_form(deliveries) {
            Some(state) if kinds.iter().any(|k| k.previous.is_none() && k.state == state) => Ok(state),
            _ => Ok(end),
        },
        None if budget == 0 => Ok(ConnectionState::Created), // undecided: never fail on a guess
        None => Err(format!(
            "no order of these events links each previousStatus to the state announced before it, from connection.created: {}",
            super::delivery::labels(deliveries)
        )),
    }
}

/// The state a short-form delivery announces, when it is the last connection event to arrive.
fn last_short_form(deliveries: &[Delivery]) -> Option<ConnectionState> {
    let last = deliveries
        .iter()
        .filter(|d| d.event_type().and_then(ConnectionState::from_event_type).is_some())
        .max_by_key(|d| d.seq)?;
    last.is_short_form().then(|| last.event_type().and_then(ConnectionState::from_event_type)).flatten()
}

/// Depth-first search for an order using every remaining link, from `at`.
fn search(
    at: ConnectionState,
    kinds: &[Link],
    counts: &mut Vec<usize>,
    dead_ends: &mut HashSet<(ConnectionState, Vec<usize>)>,
    budget: &mut usize,
) -> Option<ConnectionState> {
    if counts.iter().all(|c| *c == 0) {
        return Some(at);
    }
    if *budget == 0 || dead_ends.contains(&(at, counts.clone())) {
        return None;
    }
    *budget -= 1;
    for i in 0..kinds.len() {
        let link = kinds[i];
        match link.previous {
            Some(p) if p != at => continue,
            Some(_) if counts[i] == 0 => continue,
            // A short-form link, once used, may be taken again into its state from any other
            // state (it counts for every same-looking delivery). Never from the state itself,
            // so every reuse is followed by a counted link: the search cannot cycle.
            None if counts[i] == 0 && at == link.state => continue,
            _ => {}
        }
        let counted = counts[i] > 0;
        if counted {
            counts[i] -= 1;
        }
        let found = search(link.state, kinds, counts, dead_ends, budget);
        if counted {
            counts[i] += 1;
        }
        if found.is_some() {
            return found;
        }
    }
    dead_ends.insert((at, counts.clone()));
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(id: &str, ty: &str, prev: Value) -> Delivery {
        Delivery {
            seq: 0,
            body: json!({"id": id, "type": ty, "data": {"previousStatus": prev, "connectionId": "conn_1"}}),
        }
    }

    fn happy() -> Vec<Delivery> {
        vec![
            event("evt_1", "connection.created", Value::Null),
            event("evt_2", "connection.credentials_submitted", json!("created")),
            event("evt_3", "connection.verifying", json!("credentials_submitted")),
            event("evt_4", "connection.connected", json!("verifying")),
        ]
    }

    #[test]
    fn any_arrival_order_and_duplicates_are_accepted() {
        let mut events = happy();
        events.reverse();
        events.push(events[0].clone());
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }

    #[test]
    fn a_broken_link_is_reported() {
        let mut events = happy();
        events[3] = event("evt_4", "connection.connected", json!("created"));
        assert!(resolve(&events).unwrap_err().contains("no order"));
    }

    #[test]
    fn upper_case_previous_status_is_reported() {
        let mut events = happy();
        events[1] = event("evt_2", "connection.credentials_submitted", json!("CREATED"));
        assert!(resolve(&events).unwrap_err().contains("lower-case"));
    }

    #[test]
    fn missing_created_is_reported() {
        assert!(resolve(&happy()[1..]).unwrap_err().contains("no connection.created"));
    }

    #[test]
    fn the_short_connected_form_links_from_anywhere() {
        let mut events = happy();
        events[3] = Delivery {
            body: json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:00Z"}),
            ..events[3].clone()
        };
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }

    #[test]
    fn short_connected_forms_in_the_same_second_link_every_reconnect() {
        let short = |seq| Delivery {
            seq,
            body: json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:00Z"}),
        };
        let mut events = happy();
        events[3] = short(3);
        events.push(event("evt_5", "connection.error", json!("connected")));
        events.push(event("evt_6", "connection.credentials_submitted", json!("error")));
        events.push(event("evt_7", "connection.verifying", json!("credentials_submitted")));
        events.push(short(7));
        events.push(event("evt_8", "connection.disconnected", json!("connected")));
        for (seq, d) in events.iter_mut().enumerate() {
            d.seq = seq as u64;
        }
        assert_eq!(resolve(&events), Ok(ConnectionState::Disconnected));
        // Ending on the repeated short form: the chain ends connected.
        events.pop();
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }

    #[test]
    fn revisiting_states_is_fine() {
        let mut events = happy();
        events.push(event("evt_5", "connection.disconnected", json!("connected")));
        events.push(event("evt_6", "connection.credentials_submitted", json!("disconnected")));
        events.push(event("evt_7", "connection.verifying", json!("credentials_submitted")));
        events.push(event("evt_8", "connection.connected", json!("verifying")));
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }
}
