//! §1 step 4 and §4.3, over the whole record, for both clients alike: a client reads the
//! transactions of each account of its CONNECTED connection (response 200, §4.3). A plain read
//! of them (no `limit`, no cursor: those may be bad input, refused at will) with the key of the client that was listed the account, refused (a 4xx other than 408
//! and 429), fails, where the connection never left CONNECTED: every connection event of it
//! that arrived, by the end of the run, announces a state on the way to CONNECTED, CONNECTED
//! itself, or another state as occurring before its first `connection.connected` (a step such
//! as `mfa_required` on the way), and none left it (`previousStatus: connected`), and a 2xx accounts list of it was sent
//! before the read. A connection that left CONNECTED at some point is not judged: §3.2 leaves
//! the transactions of one that is not CONNECTED open, and when it left cannot be told from a
//! late event. Answers of 5xx, 408 and 429 are never evidence (rule 5).

use super::{finding, Client, Endpoint, Record, Verdict, MAX_FINDINGS};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use crate::spec::ConnectionState;
use std::collections::{BTreeMap, BTreeSet};

/// The states a connection passes on its way to CONNECTED (§3.1): announcing one of them is no
/// sign that it left CONNECTED.
const ON_THE_WAY: [ConnectionState; 4] = [
    ConnectionState::Created,
    ConnectionState::CredentialsSubmitted,
    ConnectionState::Verifying,
    ConnectionState::Connected,
];

/// The connections whose events never show them leaving CONNECTED (see the module). A state
/// off the way to CONNECTED (`mfa_required`, say) announced as occurring before the connection's
/// first `connection.connected` is a step of its way there (§3.2 leaves the path open), not a
/// departure; one with no time, or at or after it, counts as leaving.
fn never_left(record: &Record) -> BTreeSet<&str> {
    let mut left = BTreeSet::new();
    let mut named = BTreeSet::new();
    let mut connected: BTreeMap<&str, chrono::DateTime<chrono::Utc>> = BTreeMap::new();
    let mut off_the_way: Vec<(&str, Option<chrono::DateTime<chrono::Utc>>)> = Vec::new();
    for h in &record.deliveries {
        let d = &h.delivery;
        let Some(connection) = d.connection_id() else { continue };
        named.insert(connection);
        let state = d.event_type().and_then(ConnectionState::from_event_type);
        if d.data_str("previousStatus") == Some(ConnectionState::Connected.lower()) {
            left.insert(connection);
        }
        match state {
            Some(ConnectionState::Connected) => {
                if let Some(at) = d.occurred_at() {
                    let first = connected.entry(connection).or_insert(at);
                    *first = (*first).min(at);
                }
            }
            Some(s) if !ON_THE_WAY.contains(&s) => off_the_way.push((connection, d.occurred_at())),
            _ => {}
        }
    }
    for (connection, at) in off_the_way {
        let before = matches!((at, connected.get(connection)), (Some(at), Some(first)) if at < *first);
        if !before {
            left.insert(connection);
        }
    }
    named.difference(&left).copied().collect()
}

/// See the module.
pub(crate) fn judge(record: &Record) -> Verdict {
    let stable = never_left(record);
    // Each account a client was listed, with its connection and when the first list was sent.
    let mut listed: BTreeMap<(&str, Client), (&str, chrono::DateTime<chrono::Utc>)> = BTreeMap::new();
    for seen in record.answers.iter().filter(|s| s.ok() && s.endpoint == Endpoint::Accounts) {
        let Some(client) = seen.client() else { continue };
        for account in &seen.objects {
            let at = listed.entry((account.id.as_str(), client)).or_insert((seen.id.as_str(), seen.sent));
            at.1 = at.1.min(seen.sent);
        }
    }
    let mut verdict = Verdict::default();
    for seen in record.answers.iter().filter(|s| s.endpoint == Endpoint::Transactions) {
        let Some(client) = seen.client() else { continue };
        let Some((connection, first_listed)) = listed.get(&(seen.id.as_str(), client)) else { continue };
        // Only the plain first page: a `limit` or a cursor may be bad input, refused at will (§7).
        if !stable.contains(connection) || seen.sent < *first_listed || seen.request.contains('?') {
            continue;
        }
        verdict.judged += 1;
        let refused = (400..500).contains(&seen.status) && ![408, 429].contains(&seen.status);
        if refused && verdict.found.len() < MAX_FINDINGS {
            let detail = format!(
                "{} ({}): the transactions of an account its own client was listed, on connection {connection}, which \
                 no event showed leaving CONNECTED, were refused to that client (§4.3: response 200; §1 step 4: the \
                 client reads the transactions of each account)",
                seen.request, seen.status
            );
            verdict.found.push(finding(
                Problem::found(K::TransactionsRefused, [seen.id.clone(), connection.to_string()], detail)
                    .expecting("200", format!("status {}", seen.status)),
                &[seen.seq],
                &[],
            ));
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::rules::delivery::Delivery;
    use serde_json::json;

    fn event(seq: u64, kind: &str, previous: &str, ms: i64) -> Delivery {
        let at = chrono::DateTime::from_timestamp_millis(1_700_000_000_000 + ms).expect("a time");
        let stamp = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        Delivery::new(
            seq,
            json!({"id": format!("evt_{seq}"), "type": kind, "created_at": stamp,
                   "data": {"eventId": format!("evt_{seq}"), "type": kind, "occurredAt": stamp, "clientId": "cli_1",
                            "connectionId": "conn_1", "previousStatus": previous, "error": null}}),
        )
    }

    /// python-artisan's legal `connect-via-mfa`: a multi-factor step on the way to CONNECTED is
    /// no departure from it; the same state after CONNECTED is.
    #[test]
    fn a_step_before_connected_is_on_the_way_one_after_it_leaves() {
        let now = chrono::DateTime::from_timestamp_millis(1_700_000_010_000).expect("a time");
        let mut record = Record::default();
        record.delivery(now, event(1, "connection.mfa_required", "verifying", 100));
        record.delivery(now, event(2, "connection.verifying", "mfa_required", 200));
        record.delivery(now, event(3, "connection.connected", "verifying", 300));
        assert!(never_left(&record).contains("conn_1"));
        record.delivery(now, event(4, "connection.error", "verifying", 400));
        assert!(!never_left(&record).contains("conn_1"));
    }
}
