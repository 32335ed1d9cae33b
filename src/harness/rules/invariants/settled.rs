//! A connection's accounts against the state its last driven action announced (§3.1, §3.2,
//! §4.2), by local order alone: once the event of the state an action asked for has arrived,
//! and until the connection's next state action or event, the accounts are served when that
//! state is CONNECTED and refused when it is not. The event arrived before the read was sent,
//! so no clock is weighed. Open: a read sent before the event arrived, a connection that moved
//! on by itself (a later event), and an action the driver reported not done.
//!
//! Why by local order: the timed rule of [`super::available`] sees a state passed through on
//! the way only for as long as it outlasts its slack, which a server's own pace decides
//! (`tests/foreign/node-outbox`'s `accounts-guard-not-created`, 90–210 ms, caught in one run of five);
//! and the tour reads a connect's accounts once, when it reaches it, in or past a window a
//! server leaves between announcing CONNECTED and storing it (`tests/foreign/python-staging`'s
//! `connected-event-early`, 0.4–0.7 s: 2 files in 4 runs). Every read of the run is weighed
//! here, the polls that await a connection's accounts among them.

use super::{finding, Endpoint, Heard, Record, Seen, Verdict, MAX_FINDINGS};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Failure;
use crate::harness::vocab::outcome::Problem;
use crate::spec::{Action, ConnectionState};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// What a read met: the state the last action asked for, announced before it was sent.
struct Settled<'a> {
    action: &'static str,
    state: ConnectionState,
    /// How long before the request was sent its event arrived.
    after_ms: i64,
    event: &'a Heard,
}

/// A refusal that says something about the state: a 4xx other than a timeout or a rate limit
/// (rule 5: neither is evidence), never a request that got no answer.
fn refused(seen: &Seen) -> bool {
    (400..500).contains(&seen.status) && ![408, 429].contains(&seen.status)
}

/// The accounts reads of the run made with the key of the client that created the connection,
/// of a client whose events name its connections coherently ([`misnamed`]).
fn owners_reads(record: &Record) -> impl Iterator<Item = &Seen> {
    let misnamed = misnamed(record);
    let owners: BTreeMap<&str, Option<super::Client>> = record.creations().map(|(c, s)| (c, s.client())).collect();
    record.answers.iter().filter(move |a| {
        a.endpoint == Endpoint::Accounts
            && owners.get(a.id.as_str()).is_some_and(|o| o.is_some() && *o == a.client() && !misnamed.contains(o))
    })
}

/// The first finding per connection of `wrong` reads, at most [`MAX_FINDINGS`].
fn first_per_connection<'a>(
    record: &'a Record,
    mut wrong: impl FnMut(&'a Seen) -> Option<Failure>,
) -> (usize, Vec<Failure>) {
    let mut found = BTreeMap::new();
    let mut judged = 0;
    for seen in owners_reads(record) {
        judged += 1;
        if found.len() < MAX_FINDINGS && !found.contains_key(seen.id.as_str()) {
            if let Some(f) = wrong(seen) {
                found.insert(seen.id.as_str(), f);
            }
        }
    }
    (judged, found.into_values().collect())
}

/// 2xx lists answered after the connection was announced in a state other than CONNECTED that
/// its last action asked for (`accounts.refused-before-connected`'s, beside its timed rule).
pub(crate) fn served_after_leaving(record: &Record) -> Vec<Failure> {
    first_per_connection(record, |seen| {
        let s = settled(record, seen).filter(|s| seen.ok() && s.state != ConnectionState::Connected)?;
        let detail = format!(
            "the accounts of {} were served (status {}) {} ms after {} arrived, the state the {} action asked \
             for, and before any other event of it (§3.2, §4.2: only when CONNECTED): either the target serves \
             accounts in that state, or it announced the state before storing it, or moved back to CONNECTED \
             unannounced (§6)",
            seen.id,
            seen.status,
            s.after_ms,
            s.state.event_type(),
            s.action
        );
        Some(
            finding(
                Problem::found(K::ServedAfterLeaving, [seen.id.clone()], detail)
                    .expecting("a refusal", format!("status {}", seen.status)),
                &[seen.seq],
                &[s.event.delivery.seq],
            )
            .requested(&seen.request),
        )
    })
    .1
}

/// Refusals answered after `connection.connected` of a `connect` arrived, and before any other
/// event of the connection (`events.connected-announced`'s: the event announces entering the
/// state, in which the accounts are available, §3.1, §4.2, §6.3).
pub(crate) fn judge_connected(record: &Record) -> Verdict {
    first_per_connection(record, |seen| {
        let s = settled(record, seen).filter(|s| refused(seen) && s.state == ConnectionState::Connected)?;
        let detail = format!(
            "the accounts of {} were refused (status {}) {} ms after connection.connected arrived, following the \
             connect action, and before any other event of it (§3.1: the event announces entering CONNECTED, \
             §4.2: accounts available then): either the event was sent before the state was stored, or the \
             target left CONNECTED unannounced (§6)",
            seen.id, seen.status, s.after_ms
        );
        Some(
            finding(
                Problem::found(K::RefusedWhenConnected, [seen.id.clone()], detail)
                    .expecting("accounts served", format!("status {}", seen.status)),
                &[seen.seq],
                &[s.event.delivery.seq],
            )
            .requested(&seen.request),
        )
    })
    .into()
}

/// What `seen` met, if the connection's last state action before its answer (done by the
/// target) was announced before it was sent: the action's state's event arrived after the
/// action began and before the request, was not heard before the action (an older copy), and
/// no other event of the connection occurred at or after it, of those arriving before the next
/// state action began (the connection moved on, by itself or late).
fn settled<'a>(record: &'a Record, seen: &Seen) -> Option<Settled<'a>> {
    let connection = seen.id.as_str();
    let state_calls = || {
        record.calls.iter().filter_map(move |c| {
            let state = Action::parse(c.action)?.target_state()?;
            (c.connection.as_deref() == Some(connection)).then_some((c, state))
        })
    };
    let (last, state) = state_calls().filter(|(c, _)| c.started < seen.answered).max_by_key(|(c, _)| c.started)?;
    if !last.done {
        return None;
    }
    let next = state_calls().map(|(c, _)| c.started).filter(|s| *s >= seen.answered).min();
    // Each event of the connection heard before the next action: (heard, occurred, state,
    // identity); the moment unknown for a short form (§6.2) or a stamp of no moment.
    let events: Vec<(&Heard, Option<DateTime<Utc>>, ConnectionState, String)> = record
        .deliveries
        .iter()
        .filter(|h| h.delivery.connection_id() == Some(connection) && next.is_none_or(|n| h.arrived < n))
        .filter_map(|h| {
            let announced = ConnectionState::from_event_type(h.delivery.event_type()?)?;
            Some((h, h.delivery.occurred_at(), announced, h.delivery.identity()))
        })
        .collect();
    let older = |identity: &String| {
        record.deliveries.iter().any(|h| h.arrived <= last.started && h.delivery.identity() == *identity)
    };
    let (heard, occurred, _, identity) = events
        .iter()
        .filter(|(h, at, s, _)| *s == state && at.is_some() && h.arrived > last.started && h.arrived < seen.sent)
        .filter(|e| !older(&e.3))
        .min_by_key(|e| e.0.arrived)?;
    // Later: of a later or equal moment, or of none known and heard after it.
    let later = |(h, at, _, other): &(&Heard, Option<DateTime<Utc>>, ConnectionState, String)| {
        other != identity && at.map_or(h.arrived > heard.arrived, |at| Some(at) >= *occurred)
    };
    if events.iter().any(later) {
        return None;
    }
    Some(Settled { action: last.action, state, after_ms: (seen.sent - heard.arrived).num_milliseconds(), event: heard })
}

/// The clients one of whose connections was announced created by two distinct events: their
/// events' names are shifted, so no connection of theirs can be timed by its own events.
pub(super) fn misnamed(record: &Record) -> BTreeSet<Option<super::Client>> {
    let created = ConnectionState::Created.event_type();
    record
        .creations()
        .filter(|(connection, _)| {
            let heard = record.deliveries.iter().map(|h| &h.delivery);
            let announced = heard.filter(|d| d.connection_id() == Some(connection) && d.event_type() == Some(created));
            announced.map(|d| d.identity()).collect::<BTreeSet<_>>().len() > 1
        })
        .map(|(_, seen)| seen.client())
        .collect()
}
