//! §3.2 and §4.2, over the whole record: the accounts of a connection are served only once it is
//! CONNECTED. A connection the run created is not CONNECTED from its creation until its first
//! `connection.connected` occurred (§3.1: the event announces entering the state), so a 2xx
//! accounts list answered, in the server's clock, before that moment fails, whichever flow read
//! it (`accounts.refused-before-connected` reads as each earlier event arrives).
//!
//! "Answered before" is judged with the server's offset bounded from above: a `connection.created`
//! is stamped after its POST was sent, so the answer's moment in the server's clock is at most
//! `answered + min(occurredAt − sent)` (1 s more when that stamp is cut to the whole second).
//! [`SLACK`] is left open: a server may store the new state a moment before it stamps the event
//! announcing it, and its instances' clocks may differ a little. A connection some event shows
//! was CONNECTED before (`previousStatus: connected`, an event since lost) is not judged, nor
//! are the connections of a client whose events name connections incoherently (one of its
//! connections announced created twice): their moments cannot be told from the events
//! (`events.created-announced` judges the naming).
//!
//! And after CONNECTED was left ([`super::settled`]): a 2xx list sent after the event of the
//! state the connection's last driven action asked for had arrived.

use super::{finding, Endpoint, Record, Verdict, MAX_FINDINGS};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use crate::spec::ConnectionState;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

/// How long before its `connection.connected` occurred a connection's accounts may already be
/// served: the state stored, the event not yet stamped.
pub(crate) const SLACK: Duration = Duration::milliseconds(250);

/// The tightest upper bound of how far the server's clock is ahead of the harness's, from the
/// run's creations and their `connection.created` ([`super::clock::offset_interval`]: a stamp
/// cut to its unit reads up to one unit early, so it bounds one unit later).
fn offset_ceiling(record: &Record) -> Option<Duration> {
    let created = ConnectionState::Created.event_type();
    record
        .creations()
        .filter_map(|(connection, seen)| {
            let heard = record
                .deliveries
                .iter()
                .find(|h| h.delivery.connection_id() == Some(connection) && h.delivery.event_type() == Some(created))?;
            let occurred = heard.delivery.occurred_at()?;
            Some(super::clock::offset_interval(occurred, heard.delivery.occurred_unit(), seen.sent, heard.arrived).1)
        })
        .min()
}

/// For each connection the run created: when its first `connection.connected` occurred, with
/// the delivery; `None` when an event shows it was CONNECTED before that one, or when its
/// client's events are [`super::settled::misnamed`].
fn first_connected(record: &Record) -> BTreeMap<&str, Option<(DateTime<Utc>, u64)>> {
    let connected = ConnectionState::Connected.event_type();
    let mut first: BTreeMap<&str, Option<(DateTime<Utc>, u64)>> = record.creations().map(|(c, _)| (c, None)).collect();
    for h in &record.deliveries {
        let d = &h.delivery;
        let (Some(c), Some(at)) = (d.connection_id(), d.occurred_at()) else { continue };
        let Some(slot) = first.get_mut(c) else { continue };
        if d.event_type() == Some(connected) && slot.is_none_or(|(t, _)| at < t) {
            *slot = Some((at, d.seq));
        }
    }
    // An event that leaves CONNECTED before the first one seen: a connected period was not seen.
    for h in &record.deliveries {
        let d = &h.delivery;
        let (Some(c), Some(at)) = (d.connection_id(), d.occurred_at()) else { continue };
        let left = d.data_str("previousStatus") == Some(ConnectionState::Connected.lower());
        if let Some(slot) = first.get_mut(c).filter(|s| left && s.is_some_and(|(t, _)| at <= t)) {
            *slot = None;
        }
    }
    let misnamed = super::settled::misnamed(record);
    for (connection, seen) in record.creations() {
        if let Some(slot) = first.get_mut(connection).filter(|_| misnamed.contains(&seen.client())) {
            *slot = None;
        }
    }
    first
}

pub(crate) fn judge(record: &Record) -> Verdict {
    let first = first_connected(record);
    let Some(ceiling) = offset_ceiling(record) else {
        // No clock to compare a 2xx answer with (no creation announced): only the refusals
        // count, which keep the rule whatever the clock.
        let refused = record.answers.iter().filter(|a| a.endpoint == Endpoint::Accounts && !a.ok());
        return (refused.filter(|a| first.contains_key(a.id.as_str())).count(), Vec::new()).into();
    };
    let mut judged = 0;
    // Per connection: its early answers, the earliest first.
    let mut early: BTreeMap<&str, Vec<(&super::Seen, Duration, u64)>> = BTreeMap::new();
    // Every accounts answer about a connection of the run counts as judged (a refusal keeps the
    // rule); a 2xx one is compared with the connection's first `connection.connected`.
    for seen in record.answers.iter().filter(|a| a.endpoint == Endpoint::Accounts && first.contains_key(a.id.as_str()))
    {
        judged += 1;
        let Some(Some((connected, event))) = first.get(seen.id.as_str()).filter(|_| seen.ok()) else { continue };
        let by = *connected - (seen.answered + ceiling);
        if by > SLACK {
            early.entry(seen.id.as_str()).or_default().push((seen, by, *event));
        }
    }
    let found: Vec<_> = early
        .into_values()
        .take(MAX_FINDINGS)
        .filter_map(|reads| {
            let (seen, by, event) = *reads.iter().min_by_key(|(s, _, _)| s.answered)?;
            let more = match reads.len() - 1 {
                0 => String::new(),
                n => format!(" (and {n} later reads of them, still before it)"),
            };
            let detail = format!(
                "the accounts of {} were served (status {}) at least {} ms before its first connection.connected \
                 occurred{more} (§3.2, §4.2: only when CONNECTED; §3.1: the event announces entering the state), in \
                 the server's clock (taken as at most {} ms ahead of this machine's, from the run's own \
                 connection.created events; {} ms left open)",
                seen.id,
                seen.status,
                by.num_milliseconds(),
                ceiling.num_milliseconds(),
                SLACK.num_milliseconds()
            );
            Some(
                finding(
                    Problem::found(K::ServedBeforeConnected, [seen.id.clone()], detail)
                        .expecting("a refusal before connection.connected occurred", format!("status {}", seen.status)),
                    &[seen.seq],
                    &[event],
                )
                .requested(&seen.request),
            )
        })
        .collect();
    let after: Vec<_> =
        super::settled::served_after_leaving(record).into_iter().take(MAX_FINDINGS - found.len()).collect();
    (judged, found.into_iter().chain(after).collect()).into()
}
