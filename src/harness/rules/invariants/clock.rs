//! Clock: every timestamp that records something that happened (§2.2 `createdAt` and
//! `lastSyncedAt`, §2.3 `createdAt`, §6.1 `created_at`, §6.2 `occurredAt` and the short form's
//! `timestamp`) is at most the moment the harness observed it, in the server's own clock.
//!
//! The server's clock may be off from the harness's by any amount (a legal server's clock may be
//! minutes off; its HTTP `Date` need not agree), so the offset is estimated from what the run
//! itself caused: a connection the run created is announced by a `connection.created` (§3.2)
//! stamped between the POST's sending and the event's arrival, so `occurredAt − sent` bounds the
//! server's offset from above. The largest such bound of the run is taken (the lenient reading:
//! a server that stamps its creation events late only widens it), and [`TOLERANCE`] is added.
//! Without a creation event of the run no offset is known, and nothing is judged.
//!
//! Orders between two timestamps of one object or event are not judged here: the spec orders
//! none of them (`cases/clauses.toml`: createdAt against occurredAt, created_at against
//! occurredAt, lastSyncedAt against createdAt are all open); only `events.time-follows-chain`'s
//! order of one connection's events is stated, and judged there.

use super::{finding, Record, Verdict, MAX_FINDINGS};
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use std::collections::BTreeSet;

/// How far past the observation (plus the estimated offset) a timestamp may be: clock steps,
/// servers whose instances' clocks differ a little, and the harness's own scheduling.
pub(crate) const TOLERANCE: Duration = Duration::seconds(60);

/// The largest `occurredAt − sent` of the run's creations and their `connection.created`: an
/// upper bound of how far the server's clock is ahead of the harness's (negative: behind).
pub(crate) fn offset_bound(record: &Record) -> Option<Duration> {
    offsets(record).map(|(_, hi)| hi).max()
}

/// For each of the run's creations announced: the server's offset lies between
/// `occurredAt − arrived` and `occurredAt − sent`.
pub(crate) fn offsets(record: &Record) -> impl Iterator<Item = (Duration, Duration)> + '_ {
    record.creations().filter_map(|(connection, seen)| {
        let heard = record.deliveries.iter().find(|h| {
            h.delivery.connection_id() == Some(connection)
                && h.delivery.event_type() == Some(crate::spec::ConnectionState::Created.event_type())
        })?;
        let occurred = heard.delivery.occurred_at()?;
        Some((occurred - heard.arrived, occurred - seen.sent))
    })
}

fn parsed(v: Option<&Value>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v?.as_str()?).ok().map(|t| t.with_timezone(&Utc))
}

pub(crate) fn judge(record: &Record) -> Verdict {
    let Some(offset) = offset_bound(record) else { return (0, Vec::new()) };
    let ahead = |at: DateTime<Utc>, observed: DateTime<Utc>| at - (observed + offset);
    let (mut judged, mut found) = (0, Vec::new());
    let say = |d: Duration| {
        format!(
            "{} s after it was observed (the server's clock taken as at most {} s ahead of the harness's, from the \
             run's own connection.created events, with {} s of tolerance)",
            d.num_seconds(),
            offset.num_seconds(),
            TOLERANCE.num_seconds()
        )
    };
    let mut told = BTreeSet::new();
    for heard in &record.deliveries {
        let d = &heard.delivery;
        let stamps = [
            ("data.occurredAt", d.body.pointer("/data/occurredAt")),
            ("created_at", d.body.get("created_at")),
            ("timestamp", d.body.get("timestamp")),
        ];
        for (field, at) in stamps.iter().filter_map(|(f, v)| Some((*f, parsed(*v)?))) {
            judged += 1;
            let by = ahead(at, heard.arrived);
            if by > TOLERANCE && told.insert(d.dedup_key()) {
                let detail = format!("{}: its {field} is {}", event_rules_what(d), say(by));
                found.push(finding(detail, &[], &[d.seq]));
            }
        }
    }
    for seen in record.answers.iter().filter(|a| a.ok()) {
        for object in &seen.objects {
            for field in ["createdAt", "lastSyncedAt"] {
                let Some(at) = parsed(object.fields.get(field)) else { continue };
                judged += 1;
                let by = ahead(at, seen.answered);
                if by > TOLERANCE && told.insert(format!("{}/{field}", object.id)) {
                    let detail = format!("{} {}'s {field} is {}", object.kind.name(), object.id, say(by));
                    found.push(finding(detail, &[seen.seq], &[]).requested(&seen.request));
                }
            }
        }
    }
    found.truncate(MAX_FINDINGS);
    (judged, found)
}

fn event_rules_what(d: &crate::harness::rules::delivery::Delivery) -> String {
    crate::harness::rules::event_rules::what(d)
}
