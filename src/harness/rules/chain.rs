//! Reconstructs a connection's state chain from its connection events without trusting
//! arrival order (§3.1, §6.2): each event announces a state and names the one before it
//! (`previousStatus`), so the events must admit an order that links them all, starting at
//! `connection.created`.

use crate::harness::rules::delivery::{unique, unique_by_id, Delivery};
use crate::harness::vocab::errors::ChainError;
use crate::spec::ConnectionState;
use serde_json::Value;

/// Checks that the connection events among `deliveries` form one chain from
/// `connection.created`. Returns the state the chain ends in: the first of [`ends`].
pub(crate) fn resolve(deliveries: &[Delivery]) -> Result<ConnectionState, ChainError> {
    ends(deliveries).map(|ends| ends[0])
}

/// Every state the chain of the connection events among `deliveries` can end in (never empty),
/// or why no order links them from `connection.created`. Arrival order plays no part: one end
/// is forced by the events alone, except where short forms (which may be taken again) leave a
/// choice; a read is then judged against any of them.
///
/// The question is order-free, so it is one of degrees: each event is an edge (previousStatus →
/// announced state) of a multigraph on the eight states, and an order links them all exactly
/// when the graph has an Eulerian trail from `created` (the first `connection.created` starts
/// it; its own previousStatus is not judged). A short-form `connection.connected` has no
/// previousStatus and no id, so its deliveries cannot be told from retries: they make one edge
/// into its state that may be taken any number of times (at least once), from any other state.
/// Linear in the events, so it decides for any flood.
pub(crate) fn ends(deliveries: &[Delivery]) -> Result<Vec<ConnectionState>, ChainError> {
    // Events stamped on a whole second have a second reading (`Delivery::second_identity`): the
    // chain links when either reading links it.
    ends_of(&unique(deliveries), deliveries).or_else(|first| {
        let by_id = unique_by_id(deliveries);
        match by_id.len() > unique(deliveries).len() {
            true => ends_of(&by_id, deliveries).map_err(|_| first),
            false => Err(first),
        }
    })
}

/// [`ends`] of `events`, taken as one event each.
fn ends_of(events: &[Delivery], deliveries: &[Delivery]) -> Result<Vec<ConnectionState>, ChainError> {
    let mut created = false;
    let mut graph = Graph::default();
    for d in events {
        let Some(state) = d.event_type().and_then(ConnectionState::from_event_type) else { continue };
        if state == ConnectionState::Created && !created {
            created = true;
            continue;
        }
        if d.is_short_form() {
            graph.short[index(state)] = true;
            // One that is a copy of none of the full forms must be taken at least once.
            if !copies_a_full_form(d, events) {
                graph.standalone[index(state)] = true;
            }
            continue;
        }
        let previous = match d.body.pointer("/data/previousStatus") {
            Some(Value::String(p)) => ConnectionState::from_lower(p)
                .ok_or_else(|| ChainError::UnknownPreviousStatus { event: d.label(), value: p.clone() })?,
            other => {
                let got = other.map_or("nothing".to_string(), Value::to_string);
                return Err(ChainError::BadPreviousStatus { event: d.label(), got });
            }
        };
        // A state re-entered (`previousStatus` the state announced) is an edge into itself: it
        // links where the state was entered before (whether an action of the run explains it
        // is [`reentries`]'s question, over the driver's calls).
        graph.edge(index(previous), index(state));
    }
    if !created {
        return Err(ChainError::NoStart);
    }
    let ends: Vec<ConnectionState> = ConnectionState::ALL.into_iter().filter(|end| graph.trail_ends_at(*end)).collect();
    if ends.is_empty() {
        return Err(ChainError::NoOrder { events: crate::harness::rules::delivery::labels(deliveries) });
    }
    Ok(ends)
}

/// The connection events among `deliveries` that announce re-entering the state they name
/// (`previousStatus` the state announced), one each (copies count once), by state. §3.2 shows no
/// transition but creation, so an action that leads to the state a connection is in may be
/// accepted and re-enter it, announced (§6.2: `previousStatus` is the status it was in) or not;
/// but §6 emits a connection event when the status changes, so each such event needs an action
/// of the run that leads to its state ([`unexplained_reentries`]).
pub(crate) fn reentries(deliveries: &[Delivery]) -> Vec<(ConnectionState, Vec<Delivery>)> {
    let mut by_state: Vec<(ConnectionState, Vec<Delivery>)> = Vec::new();
    for d in unique(deliveries) {
        let Some(state) = d.event_type().and_then(ConnectionState::from_event_type) else { continue };
        let previous = d.data_str("previousStatus").and_then(ConnectionState::from_lower);
        if d.is_short_form() || previous != Some(state) {
            continue;
        }
        match by_state.iter_mut().find(|(s, _)| *s == state) {
            Some((_, ds)) => ds.push(d),
            None => by_state.push((state, vec![d])),
        }
    }
    by_state
}

/// The re-entries among `deliveries` ([`reentries`]) that outnumber the accepted actions
/// `accepted(state)` counts as leading to their state: each action re-enters its state at most
/// once, so the surplus announces a change that did not happen (§6, §3.1). A generous count (an
/// action that changed the state counts too): a server is never failed for a re-entry some
/// action of the run could have caused, whatever order its events arrived in.
pub(crate) fn unexplained_reentries(
    deliveries: &[Delivery],
    accepted: impl Fn(ConnectionState) -> usize,
) -> Vec<(ChainError, Vec<Delivery>)> {
    // The creation's own `connection.created` may name `created` as its previous status: there
    // is none (§6.2 leaves its value open, and the chain does not judge it), so one is no re-entry.
    let allowed = |state: ConnectionState| accepted(state) + usize::from(state == ConnectionState::Created);
    reentries(deliveries)
        .into_iter()
        .filter(|(state, events)| events.len() > allowed(*state))
        .map(|(state, events)| {
            let error = ChainError::NoChange {
                event: events[0].label(),
                count: events.len(),
                actions: accepted(state),
                state: state.lower(),
            };
            (error, events)
        })
        .collect()
}

/// §6.2 `occurredAt` says when an event occurred, and the chain orders the events (§3.1): an
/// event that leaves a state cannot have occurred before the event that entered it. Judged only
/// where every reading of the chain forces that order, without trusting arrival order: a state
/// entered by exactly one event (and by no short form, which may be taken again). Equal times
/// pass. Returns each contradiction, for messages.
pub(crate) fn time_contradictions(deliveries: &[Delivery]) -> Vec<Contradiction> {
    let events = unique(deliveries);
    let state_of = |d: &Delivery| d.event_type().and_then(ConnectionState::from_event_type);
    let occurred = |d: &Delivery| {
        let at = d.occurred_at()?;
        Some((at, d.data_str("occurredAt").unwrap_or_default().to_string()))
    };
    let mut entering: [Vec<&Delivery>; STATES] = Default::default();
    let mut short = [false; STATES];
    for d in &events {
        let Some(state) = state_of(d) else { continue };
        if d.is_short_form() {
            short[index(state)] = true;
        } else {
            entering[index(state)].push(d);
        }
    }
    let mut out = Vec::new();
    for d in events.iter().filter(|d| !d.is_short_form() && state_of(d).is_some()) {
        let Some(left) = d.body.pointer("/data/previousStatus").and_then(Value::as_str) else { continue };
        let Some(left) = ConnectionState::from_lower(left).map(index) else { continue };
        let [entered] = entering[left].as_slice() else { continue };
        if short[left] {
            continue;
        }
        if let (Some((at, text)), Some((before, before_text))) = (occurred(d), occurred(entered)) {
            if at < before {
                out.push(Contradiction {
                    said: format!(
                        "{} occurred at {text}, before {} (at {before_text}) entered the state it leaves",
                        d.label(),
                        entered.label()
                    ),
                    expected: format!("occurredAt {before_text} or later"),
                    actual: format!("occurredAt {text}"),
                });
            }
        }
    }
    out
}

/// An event whose `occurredAt` is before the event that entered the state it leaves: the
/// sentence, and the times compared.
#[derive(Debug)]
pub(crate) struct Contradiction {
    pub said: String,
    pub expected: String,
    pub actual: String,
}

fn index(state: ConnectionState) -> usize {
    ConnectionState::ALL.iter().position(|s| *s == state).unwrap_or(0)
}

const STATES: usize = ConnectionState::ALL.len();

/// The events as a multigraph on the states: counted edges, and the states that short forms
/// enter (edges usable any number of times, at least once, from any other state).
#[derive(Default)]
struct Graph {
    /// Out-degree minus in-degree of each state, over counted edges.
    balance: [i64; STATES],
    /// States that some counted edge touches.
    touched: [bool; STATES],
    /// Pairs of states joined by a counted edge.
    joined: Vec<(usize, usize)>,
    short: [bool; STATES],
    /// Short-form states with a short form that is a copy of no full form ([`copies_a_full_form`]).
    standalone: [bool; STATES],
}

/// Whether the short form `short` may be another form of a full-form event of its type among
/// `events`: §6.2 shows the short form as a form of the `connection.connected` delivery, so a
/// server may send both for one change. Its `timestamp` has no milliseconds (cut or rounded:
/// not shown), so a full form whose `occurredAt` is within a second of it may be the same event.
fn copies_a_full_form(short: &Delivery, events: &[Delivery]) -> bool {
    let Some(at) = short
        .data_str("timestamp")
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&crate::spec::extended_timestamp(t)).ok())
    else {
        return false;
    };
    events.iter().any(|d| {
        !d.is_short_form()
            && d.event_type() == short.event_type()
            && d.occurred_at().is_some_and(|o| (o - at.to_utc()).num_milliseconds().abs() < 1000)
    })
}

impl Graph {
    fn edge(&mut self, from: usize, to: usize) {
        self.balance[from] += 1;
        self.balance[to] -= 1;
        self.touched[from] = true;
        self.touched[to] = true;
        if !self.joined.contains(&(from, to)) {
            self.joined.push((from, to));
        }
    }

    /// Whether some use of the short-form edges gives a trail from `created` through every
    /// edge that ends at `end`: degrees balance (Euler) and every edge is reachable.
    fn trail_ends_at(&self, end: ConnectionState) -> bool {
        let start = index(ConnectionState::Created);
        // What each state must still send (> 0) or receive (< 0) over short-form edges.
        let mut need = [0i64; STATES];
        for (v, n) in need.iter_mut().enumerate() {
            *n = i64::from(v == start) - i64::from(v == index(end)) - self.balance[v];
        }
        let shorts: Vec<usize> = (0..STATES).filter(|v| self.short[*v]).collect();
        // Only a short-form state can receive over short-form edges.
        if (0..STATES).any(|v| !self.short[v] && need[v] < 0) {
            return false;
        }
        let mut groups = Groups::new();
        let mut used = self.touched;
        for (a, b) in &self.joined {
            groups.join(*a, *b);
        }
        match shorts.as_slice() {
            [] if need.iter().any(|n| *n != 0) => return false,
            [] => {}
            // One short-form state: it cannot send (never into itself), and must be entered,
            // unless every short form of it may be a copy of a full form (then it need not).
            [s] if need[*s] == 0 && !self.standalone[*s] => used[*s] = true,
            [s] => {
                if need[*s] >= 0 {
                    return false;
                }
                for v in (0..STATES).filter(|v| need[*v] > 0) {
                    groups.join(v, *s);
                    used[v] = true;
                }
                used[*s] = true;
            }
            // Several: they enter each other as often as needed, and take what others send.
            [first, rest @ ..] => {
                for s in rest {
                    groups.join(*first, *s);
                }
                for v in (0..STATES).filter(|v| need[*v] > 0 || self.short[*v]) {
                    groups.join(v, *first);
                    used[v] = true;
                }
            }
        }
        let any_edge = used.iter().any(|u| *u);
        if !any_edge {
            return end == ConnectionState::Created;
        }
        used[start] && (0..STATES).filter(|v| used[*v]).all(|v| groups.root(v) == groups.root(start))
    }
}

/// Union-find over the states.
struct Groups([usize; STATES]);

impl Groups {
    fn new() -> Self {
        let mut parent = [0; STATES];
        for (i, p) in parent.iter_mut().enumerate() {
            *p = i;
        }
        Self(parent)
    }

    fn root(&self, mut v: usize) -> usize {
        while self.0[v] != v {
            v = self.0[v];
        }
        v
    }

    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        self.0[ra] = rb;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(id: &str, ty: &str, prev: Value) -> Delivery {
        Delivery::new(0, json!({"id": id, "type": ty, "data": {"previousStatus": prev, "connectionId": "conn_1"}}))
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
    fn events_alike_on_a_whole_second_may_be_two_events() {
        // A server that cuts its stamps to the second: a connect after failed_auth announces
        // credentials_submitted and verifying as the first attempt did, within the same second.
        let at = |id: &str, ty: &str, prev: &str, ms: &str| {
            let mut d = event(id, ty, json!(prev));
            d.body["data"]["occurredAt"] = json!(format!("2026-01-01T00:00:01.{ms}Z"));
            Delivery::new(0, d.body)
        };
        let mut events = vec![event("evt_1", "connection.created", Value::Null)];
        for (n, ms) in [(2, "000"), (6, "000")] {
            events.push(at(&format!("evt_{n}"), "connection.verifying", "credentials_submitted", ms));
        }
        events.push(at("evt_3", "connection.credentials_submitted", "created", "000"));
        events.push(at("evt_4", "connection.failed_auth", "verifying", "000"));
        events.push(at("evt_5", "connection.credentials_submitted", "failed_auth", "000"));
        events.push(at("evt_7", "connection.connected", "verifying", "000"));
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
        assert!(crate::harness::rules::delivery::holds(&events, "connection.verifying", 2));
        // With milliseconds, the same content and moment is one event re-sent under a new id.
        for d in events.iter_mut().filter(|d| d.event_type() == Some("connection.verifying")) {
            d.body["data"]["occurredAt"] = json!("2026-01-01T00:00:01.123Z");
        }
        assert!(!crate::harness::rules::delivery::holds(&events, "connection.verifying", 2));
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
        assert!(resolve(&events).unwrap_err().to_string().contains("no order"));
    }

    #[test]
    fn upper_case_previous_status_is_reported() {
        let mut events = happy();
        events[1] = event("evt_2", "connection.credentials_submitted", json!("CREATED"));
        assert!(resolve(&events).unwrap_err().to_string().contains("lower-case"));
    }

    #[test]
    fn a_reentered_state_links_where_it_was_entered_and_needs_an_action() {
        let mut events = happy();
        events.push(event("evt_9", "connection.connected", json!("connected")));
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
        // With no action leading to CONNECTED, nothing re-entered it; one action may have.
        let surplus = unexplained_reentries(&events, |_| 0);
        assert_eq!(surplus.len(), 1);
        assert!(matches!(surplus[0].0, ChainError::NoChange { count: 1, actions: 0, .. }), "{}", surplus[0].0);
        assert!(unexplained_reentries(&events, |s| usize::from(s == ConnectionState::Connected)).is_empty());
        // Two re-entries need two.
        events.push(event("evt_10", "connection.connected", json!("connected")));
        assert_eq!(unexplained_reentries(&events, |_| 1).len(), 1);
        // A creation that names `created` as its previous status re-enters nothing
        // (tests/foreign/node-queued sends it so); a second one does.
        let mut events = happy();
        events[0] = event("evt_1", "connection.created", json!("created"));
        assert!(unexplained_reentries(&events, |_| 0).is_empty());
        events.push(event("evt_0", "connection.created", json!("created")));
        assert_eq!(unexplained_reentries(&events, |_| 0).len(), 1);
        // A re-entry of a state never entered links nowhere.
        let mut events = happy();
        events.push(event("evt_9", "connection.failed_auth", json!("failed_auth")));
        assert!(resolve(&events).unwrap_err().to_string().contains("no order"));
    }

    #[test]
    fn missing_created_is_reported() {
        assert!(resolve(&happy()[1..]).unwrap_err().to_string().contains("no connection.created"));
    }

    #[test]
    fn the_short_connected_form_links_from_anywhere() {
        let mut events = happy();
        events[3] = Delivery::new(
            events[3].seq,
            json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }

    /// §6.2 shows the short form as a form of the `connection.connected` delivery: sent beside
    /// the full form of the same change, it is no second entry into CONNECTED (`tests/foreign/node-finlink`'s
    /// `connected-short-form`, a disconnected connection's chain judged as ending connected).
    #[test]
    fn a_short_form_beside_its_full_form_is_no_second_connect() {
        let mut events = happy();
        events[3] = Delivery::new(
            0,
            json!({"id": "evt_4", "type": "connection.connected", "data": {"previousStatus": "verifying",
                "connectionId": "conn_1", "occurredAt": "2026-01-01T00:00:03.400Z"}}),
        );
        events.push(Delivery::new(
            9,
            json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:03Z"}),
        ));
        events.push(event("evt_8", "connection.disconnected", json!("connected")));
        assert!(ends(&events).unwrap().contains(&ConnectionState::Disconnected));
        // A short form from another second is a reconnect of its own: the chain may not end there.
        events[4] = Delivery::new(
            9,
            json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:09:00Z"}),
        );
        assert_eq!(ends(&events), Ok(vec![ConnectionState::Connected]));
    }

    #[test]
    fn short_connected_forms_in_the_same_second_link_every_reconnect() {
        let short = |seq| {
            Delivery::new(
                seq,
                json!({"event": "connection.connected", "connectionId": "conn_1", "timestamp": "2026-01-01T00:00:00Z"}),
            )
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
        assert!(ends(&events).unwrap().contains(&ConnectionState::Disconnected));
        // Ending on the repeated short form: the chain may end connected, whatever arrived last.
        events.pop();
        assert!(ends(&events).unwrap().contains(&ConnectionState::Connected));
        events.reverse();
        assert!(ends(&events).unwrap().contains(&ConnectionState::Connected));
    }

    #[test]
    fn the_end_follows_the_chain_not_the_last_arrival() {
        let mut events = happy();
        events.push(event("evt_5", "connection.disconnected", json!("connected")));
        // A late copy of connection.connected arrives last.
        events.push(events[3].clone());
        for (seq, d) in events.iter_mut().enumerate() {
            d.seq = seq as u64;
        }
        assert_eq!(ends(&events), Ok(vec![ConnectionState::Disconnected]));
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

    /// `n` rounds of disconnect and reconnect, each event with its own id.
    fn flood(n: usize) -> Vec<Delivery> {
        let mut events = happy();
        let round = [
            ("connection.disconnected", "connected"),
            ("connection.credentials_submitted", "disconnected"),
            ("connection.verifying", "credentials_submitted"),
            ("connection.connected", "verifying"),
        ];
        for i in 0..n {
            for (j, (ty, prev)) in round.iter().enumerate() {
                events.push(event(&format!("evt_f{i}_{j}"), ty, json!(prev)));
            }
        }
        for (seq, d) in events.iter_mut().enumerate() {
            d.seq = seq as u64;
        }
        events
    }

    #[test]
    fn a_flood_of_thousands_of_events_is_decided() {
        let mut events = flood(2_500);
        events.reverse();
        assert_eq!(resolve(&events), Ok(ConnectionState::Connected));
    }

    #[test]
    fn a_contradictory_flood_fails() {
        let mut events = flood(30);
        // One reconnect too many from verifying: 60+ connection events that no order links.
        for i in 0..40 {
            events.push(event(&format!("evt_x{i}"), "connection.error", json!("verifying")));
        }
        assert!(resolve(&events).unwrap_err().to_string().contains("no order"));
    }
}
