//! The rules of the state cases, one function a case (`state.one-owner`, `state.fixed-fields`,
//! ...): each goes through the [`Model`] and fails the reads that contradict what the target
//! said before, or what its events announced.

use super::model::{finding, same, view, Event, InView, Model, CREATED_AT, LAST_SYNCED_AT};
use crate::harness::checks::Finding;
use crate::harness::transport::answers::Answer;
use crate::harness::vocab::kind::StateKind;
use crate::harness::vocab::outcome::Problem;
use crate::spec;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Where an id was first seen: its owner, and the read that showed it.
type FirstSeen<'a> = HashMap<InView<'a>, (&'a str, &'a Arc<Answer>)>;

/// §2.2, §2.3: an account belongs to one connection and a transaction to one account, in every
/// read of a client's view.
pub(super) fn one_owner(model: &Model) -> (usize, Vec<Finding>) {
    let accounts =
        model.lists.iter().flat_map(|l| l.accounts.iter().map(move |(id, _)| (&l.answer, id, &l.connection)));
    let transactions =
        model.pages.iter().flat_map(|p| p.items.iter().map(move |(id, _, _)| (&p.answer, id, &p.account)));
    let mut findings = owned_once("account", "connection", accounts);
    findings.extend(owned_once("transaction", "account", transactions));
    (model.lists.len() + model.pages.len(), findings)
}

/// The reads that list an id (a `what`) under another owner (an `owner`) than the first read of
/// its view did.
fn owned_once<'a>(
    what: &str,
    owner: &str,
    listed: impl Iterator<Item = (&'a Arc<Answer>, &'a String, &'a String)>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut owners: FirstSeen = HashMap::new();
    for (answer, id, under) in listed {
        let (first_owner, first) = *owners.entry((view(answer), id)).or_insert((under, answer));
        if first_owner != under {
            let detail = format!(
                "{}: lists {what} {id}, which {} listed under {owner} {first_owner}",
                answer.sent.request, first.sent.request
            );
            let problem = Problem::found(StateKind::OneOwner, [id.clone()], detail)
                .expecting(first_owner.to_string(), under.to_string());
            findings.push(finding(problem, answer, false));
        }
    }
    findings
}

/// §6 `transaction.deleted` (a transaction was removed): no read sent after the event arrived
/// lists it. A later `accounts.updated` of its account may bring it back (open; not judged).
/// "Later" is the server's time (`occurredAt`, [`Event::occurred_before`]), never the order the
/// deliveries arrived in (§6.3 leaves it open): an update counts as a resync when it arrived
/// before the read was sent and the server does not date it before the removal. Every removal
/// of the transaction is judged alike, whichever arrived first.
pub(super) fn deletions_hold(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    let mut removed: HashMap<&str, Vec<&Event>> = HashMap::new();
    for e in model.events.iter().filter(|e| e.kind == spec::TRANSACTION_DELETED) {
        if let Some(t) = &e.transaction {
            removed.entry(t).or_default().push(e);
        }
    }
    for page in &model.pages {
        for (id, _, _) in &page.items {
            let Some(removals) = removed.get(id.as_str()) else { continue };
            let before: Vec<&&Event> = removals
                .iter()
                .filter(|e| e.arrived < page.answer.sent_at && e.speaks_for(view(&page.answer)))
                .collect();
            if before.is_empty() {
                continue;
            }
            judged += 1;
            // An update that the server dates before the removal is no resync, however late it
            // arrived (delivery order is open, §6.3; occurredAt is the server's own order).
            let resynced = |event: &Event| {
                model.events.iter().any(|e| {
                    e.kind == spec::ACCOUNTS_UPDATED
                        && e.account.as_deref() == Some(page.account.as_str())
                        && e.arrived < page.answer.sent_at
                        && !e.occurred_before(event)
                        && !std::ptr::eq(e, event)
                })
            };
            if before.iter().any(|event| !resynced(event)) {
                let detail = format!(
                    "{}: lists {id}, which a {} delivery announced removed before this request was sent",
                    page.answer.sent.request,
                    spec::TRANSACTION_DELETED
                );
                let about = [id.clone(), page.account.clone()];
                findings.push(finding(Problem::found(StateKind::DeletedListed, about, detail), &page.answer, false));
            }
        }
    }
    (judged.max(removed.len()), findings)
}

/// §4.2 (all accounts linked to the connection) and §6 (a removed transaction is announced): an
/// account listed for a connection stays listed in its later lists while no event of the
/// connection came between, and a transaction a page listed is in every later complete listing
/// of its account unless a `transaction.deleted` names it.
pub(super) fn nothing_vanishes(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    for (i, later) in model.lists.iter().enumerate() {
        let earlier = model.lists[..i].iter().rev().find(|l| {
            view(&l.answer) == view(&later.answer)
                && l.connection == later.connection
                && l.answer.answered_at <= later.answer.sent_at
        });
        let Some(earlier) = earlier else { continue };
        judged += 1;
        let reconnected = model.events.iter().any(|e| {
            e.kind.starts_with("connection.")
                && e.connection.as_deref() == Some(later.connection.as_str())
                && model.may_follow(e, earlier.answer.sent_at)
                && !model.old_news(e, &earlier.answer)
        });
        if reconnected {
            continue;
        }
        for (id, _) in &earlier.accounts {
            if !later.accounts.iter().any(|(a, _)| a == id) {
                let detail = format!(
                    "{}: no longer lists account {id}, which {} listed (§4.2: all accounts linked to the connection)",
                    later.answer.sent.request, earlier.answer.sent.request
                );
                let about = [id.clone(), later.connection.clone()];
                findings.push(finding(Problem::found(StateKind::AccountGone, about, detail), &later.answer, false));
            }
        }
    }
    let deleted: BTreeSet<&str> = model
        .events
        .iter()
        .filter(|e| e.kind == spec::TRANSACTION_DELETED)
        .filter_map(|e| e.transaction.as_deref())
        .collect();
    for listing in model.listings() {
        let account = listing.first.account.as_str();
        judged += 1;
        let mut missing: Vec<(&str, &Arc<Answer>)> = Vec::new();
        for page in model.pages.iter().filter(|p| {
            p.account == account
                && view(&p.answer) == view(&listing.first.answer)
                && p.answer.answered_at <= listing.first.answer.sent_at
        }) {
            for (id, _, _) in &page.items {
                let gone = !listing.ids.contains(id.as_str()) && !deleted.contains(id.as_str());
                if gone && !missing.iter().any(|(m, _)| m == id) {
                    missing.push((id, &page.answer));
                }
            }
        }
        if let Some((id, seen)) = missing.first() {
            let detail = format!(
                "{} and following next_cursor to the end: {id} is not listed, though {} listed it and no {} names it ({} such)",
                listing.first.answer.sent.request,
                seen.sent.request,
                spec::TRANSACTION_DELETED,
                missing.len()
            );
            let about = [id.to_string(), account.to_string()];
            findings.push(finding(
                Problem::found(StateKind::TransactionGone, about, detail),
                &listing.last.answer,
                true,
            ));
        }
    }
    (judged, findings)
}

/// Each view's reads of each account, in the order they were sent, with the fields kept.
fn reads_of_accounts(model: &Model) -> HashMap<InView<'_>, Vec<(&Arc<Answer>, &Value)>> {
    let mut reads: HashMap<InView, Vec<(&Arc<Answer>, &Value)>> = HashMap::new();
    for list in &model.lists {
        for (id, fields) in &list.accounts {
            reads.entry((view(&list.answer), id)).or_default().push((&list.answer, fields));
        }
    }
    for seen in reads.values_mut() {
        seen.sort_by_key(|(a, _)| (a.sent_at, a.seq));
    }
    reads
}

/// §2.2, §2.3 `createdAt` says when the object was created: it reads the same in every read of a
/// view, announced update or not (a re-stamp on sync is not a change any event can announce),
/// reconnection or not (an id names one object, §2: a new account takes a new id).
pub(super) fn fixed_fields(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    for ((_, id), reads) in reads_of_accounts(model) {
        let mut before: Option<(&Arc<Answer>, &Value)> = None;
        for (answer, fields) in reads {
            let Some(value) = fields.get(CREATED_AT) else { continue };
            let Some((earlier, old)) = before.replace((answer, value)) else { continue };
            judged += 1;
            if !same_moment(old, value) {
                let detail = format!(
                    "{}: account {id} has {CREATED_AT} {value}, but {} showed {old}: when an account was created \
                     does not change (§2.2)",
                    answer.sent.request, earlier.sent.request
                );
                let problem = Problem::found(StateKind::FixedField, [id.to_string()], detail)
                    .expecting(old.to_string(), value.to_string());
                findings.push(finding(problem, answer, false));
            }
        }
    }
    let mut created: HashMap<InView, (&Arc<Answer>, &str)> = HashMap::new();
    for page in &model.pages {
        for (id, _, at) in &page.items {
            let Some(at) = at else { continue };
            let Some((earlier, old)) = created.get(&(view(&page.answer), id.as_str())).copied() else {
                created.insert((view(&page.answer), id), (&page.answer, at));
                continue;
            };
            judged += 1;
            if !same_moment(&Value::from(old), &Value::from(at.as_str())) {
                let detail = format!(
                    "{}: transaction {id} has {CREATED_AT} {at:?}, but {} showed {old:?}: when a transaction was \
                     created does not change (§2.3)",
                    page.answer.sent.request, earlier.sent.request
                );
                let problem = Problem::found(StateKind::FixedField, [id.clone(), page.account.clone()], detail)
                    .expecting(format!("{old:?}"), format!("{at:?}"));
                findings.push(finding(problem, &page.answer, false));
            }
        }
    }
    (judged, findings)
}

/// Two readings of a timestamp name the same moment (`…00Z` and `…00.000Z` do); values that
/// are not timestamps compare as read.
fn same_moment(a: &Value, b: &Value) -> bool {
    let time = |v: &Value| {
        v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(&crate::spec::extended_timestamp(s)).ok())
    };
    match (time(a), time(b)) {
        (Some(x), Some(y)) => x == y,
        _ => same(a, b),
    }
}

/// §2.2 `lastSyncedAt` says when the account was last synced: a later read never shows an
/// earlier time than a read answered before it was sent (a sync may come or not; time does not
/// run back). Values that are not timestamps are the schema's to judge.
///
/// A value later than the server's clock when it was shown ([`Model::stamped_ahead`]) is no
/// sync's time: the fault is that stamp, `invariants.clock`'s (up to its tolerance, clock slop
/// that is open), and a later true time before it is no move back. Compared, it failed this
/// case or not by whether the run's next sync came before the stamped moment (`tests/foreign/node-projected`'s
/// `account-createdat-future`, 3 runs of 5).
pub(super) fn sync_moves_forward(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    let offset = model.clock_offset();
    let time = |v: &Value| {
        v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(&crate::spec::extended_timestamp(s)).ok())
    };
    for ((_, id), reads) in reads_of_accounts(model) {
        // The latest time a read showed, with the read (answered before the later ones were sent).
        let mut latest: Option<(&Arc<Answer>, chrono::DateTime<chrono::FixedOffset>, &Value)> = None;
        for (i, (answer, fields)) in reads.iter().enumerate() {
            // Every later read is judged: an account without the optional field keeps the rule.
            judged += usize::from(i > 0);
            let Some((at, value)) = fields.get(LAST_SYNCED_AT).and_then(|v| Some((time(v)?, v))) else { continue };
            if model.stamped_ahead(offset, at.with_timezone(&chrono::Utc), answer) {
                continue;
            }
            match latest {
                Some((earlier, before, old)) if at < before && earlier.answered_at <= answer.sent_at => {
                    let detail = format!(
                        "{}: account {id} has {LAST_SYNCED_AT} {value}, earlier than {old}, which {} showed \
                         before: the last sync cannot move back in time (§2.2)",
                        answer.sent.request, earlier.sent.request
                    );
                    let problem = Problem::found(StateKind::SyncBack, [id.to_string()], detail)
                        .expecting(format!("{old} or later"), value.to_string());
                    findings.push(finding(problem, answer, false));
                    continue;
                }
                // Reads in flight together: either may show the later sync.
                Some((_, before, _)) if at < before => continue,
                _ => {}
            }
            latest = Some((*answer, at, value));
        }
    }
    (judged, findings)
}

#[cfg(test)]
mod tests {
    use super::super::testlog::{event, txn, Log};
    use super::*;
    use crate::harness::rules::delivery::Delivery;
    use serde_json::json;

    #[test]
    fn a_transaction_under_two_accounts_fails_one_owner() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.page("acc_2", json!([txn("txn_1", 1.0)]));
        let (_, findings) = one_owner(&log.model(&[]));
        assert_eq!(findings.len(), 1);
        assert!(findings[0].problem.detail.contains("listed under account acc_1"), "{}", findings[0].problem.detail);
    }

    /// Reads of an account a case found stale (its event before its data) are that case's
    /// finding: set aside, they fail no state rule, whichever of them fell in the window.
    #[test]
    fn reads_a_case_found_stale_are_set_aside() {
        use crate::harness::setup::session::StaleReads;
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0), txn("txn_2", 2.0)]));
        // Sent at 10 ms, after the deletion arrived (5 ms): the data of before.
        log.page("acc_1", json!([txn("txn_1", 1.0), txn("txn_2", 2.0)]));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let deleted = event("transaction.deleted", json!({"accountId": "acc_1", "transactionId": "txn_2"}));
        let deliveries = [(log.at(5), Delivery::new(0, deleted))];
        let mut observed = crate::harness::checks::state::Observed::default();
        crate::harness::transport::parsed::reads_of(&log.answers).for_each(|read| observed.add(&read));
        assert_eq!(deletions_hold(&Model::of(&Arc::new(observed.clone()), &deliveries)).1.len(), 1);
        let window = |account: &str, from: u64| StaleReads {
            account: account.into(),
            from: log.at(from),
            until: log.at(from + 10),
            case: "reactions.accounts-updated",
        };
        // Another account's window covers none of acc_1's reads.
        let (kept, _) = super::super::set_aside(&observed, &[window("acc_2", 5)], &deliveries).expect("a window");
        assert_eq!(deletions_hold(&Model::of(&Arc::new(kept), &deliveries)).1.len(), 1);
        let (kept, said) = super::super::set_aside(&observed, &[window("acc_1", 5)], &deliveries).expect("a window");
        assert!(deletions_hold(&Model::of(&Arc::new(kept), &deliveries)).1.is_empty());
        assert!(said[0].starts_with("1 read ") && said[0].contains("reactions.accounts-updated"), "{said:?}");
        // A window the case measured elsewhere stands for every accounts.updated of acc_1: the
        // flow that drove this one judged no reaction.
        let updated = event("accounts.updated", json!({"accountId": "acc_1"}));
        let deliveries = [deliveries[0].clone(), (log.at(4), Delivery::new(1, updated))];
        let (kept, _) = super::super::set_aside(&observed, &[window("acc_2", 50)], &deliveries).expect("a window");
        assert!(deletions_hold(&Model::of(&Arc::new(kept), &deliveries)).1.is_empty());
    }

    #[test]
    fn a_vanished_transaction_fails_unless_a_deletion_names_it() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0), txn("txn_2", 2.0)]));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        assert_eq!(nothing_vanishes(&log.model(&[])).1.len(), 1);
        // The deletion may arrive after the read (late deliveries).
        let deleted = event("transaction.deleted", json!({"accountId": "acc_1", "transactionId": "txn_2"}));
        assert!(nothing_vanishes(&log.model(&[(500, deleted)])).1.is_empty());
    }

    #[test]
    fn a_page_from_a_cursor_the_account_never_listed_is_no_page_of_it() {
        let mut log = Log::new();
        // A cursor of another account (isolation.foreign-cursor) answered with that account's
        // items, then the account walked in full: nothing vanished from acc_1.
        let foreign = json!({"data": [txn("txn_9", 9.0)], "has_more": false});
        log.read("v1/accounts/acc_1/transactions", &[("starting_after", "txn_8")], foreign);
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        // A page from a cursor the account listed stays one (txn_1 listed, then txn_2 gone).
        let own = json!({"data": [txn("txn_2", 2.0)], "has_more": false});
        log.read("v1/accounts/acc_1/transactions", &[("starting_after", "txn_1")], own);
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let mut observed = crate::harness::checks::state::Observed::default();
        crate::harness::transport::parsed::reads_of(&log.answers).for_each(|read| observed.add(&read));
        observed.keep_own_cursors();
        let (_, found) = nothing_vanishes(&Model::of(&Arc::new(observed), &[]));
        assert_eq!(found.len(), 1, "{:?}", found.iter().map(|f| &f.problem).collect::<Vec<_>>());
        assert!(found[0].problem.detail.contains("txn_2"), "{}", found[0].problem.detail);
    }

    #[test]
    fn a_late_connection_connected_excuses_no_drop_after_a_served_list() {
        let mut log = Log::new();
        let list = |ids: &[&str]| json!(ids.iter().map(|id| json!({"id": id})).collect::<Vec<_>>());
        log.read("v1/connections/conn_1/accounts", &[], list(&["acc_1", "acc_2"]));
        log.read("v1/connections/conn_1/accounts", &[], list(&["acc_1"]));
        let connection = |id: &str, kind: &str, previous: Value, at: &str| {
            let data = json!({"connectionId": "conn_1", "previousStatus": previous, "occurredAt": at});
            json!({"id": id, "type": kind, "data": data})
        };
        let created = connection("evt_1", "connection.created", Value::Null, "2026-01-01T00:00:00.000Z");
        let connected = connection("evt_2", "connection.connected", json!("created"), "2026-01-01T00:00:00.001Z");
        // The connecting arrived after the first list, which shows it done: old news, no excuse.
        assert_eq!(nothing_vanishes(&log.model(&[(0, created.clone()), (5, connected)])).1.len(), 1);
        // A disconnection and a new connection between the lists may relink: excused.
        let disconnected = connection("evt_3", "connection.disconnected", json!("connected"), "2026-01-01T00:00:01Z");
        let again = connection("evt_4", "connection.connected", json!("disconnected"), "2026-01-01T00:00:02Z");
        let first = connection("evt_2", "connection.connected", json!("created"), "2026-01-01T00:00:00.001Z");
        let events = [(0, created), (1, first), (5, disconnected), (6, again)];
        assert!(nothing_vanishes(&log.model(&events)).1.is_empty());
    }

    #[test]
    fn a_deleted_transaction_listed_after_its_event_fails_unless_a_later_sync_came() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let deleted = event("transaction.deleted", json!({"accountId": "acc_1", "transactionId": "txn_1"}));
        // Arrived between the two reads: only the second is judged.
        assert_eq!(deletions_hold(&log.model(&[(5, deleted.clone())])).1.len(), 1);
        let synced = event("accounts.updated", json!({"accountId": "acc_1"}));
        assert!(deletions_hold(&log.model(&[(5, deleted), (7, synced)])).1.is_empty());
    }

    #[test]
    fn a_resync_is_later_by_the_server_time_never_by_arrival() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let at = |kind: &str, id: &str, time: &str| {
            let data = json!({"accountId": "acc_1", "transactionId": "txn_1", "occurredAt": time});
            json!({"id": id, "type": kind, "data": data})
        };
        let deleted = at("transaction.deleted", "evt_1", "2026-01-01T00:00:00.500Z");
        // Dated after the removal (an offset form, and whole seconds): a resync, though it arrived first.
        let resync = at("accounts.updated", "evt_2", "2026-01-01T01:00:01+01:00");
        assert!(deletions_hold(&log.model(&[(3, resync), (5, deleted.clone())])).1.is_empty());
        // Dated before the removal: no resync, though it arrived after it.
        let stale = at("accounts.updated", "evt_3", "2026-01-01T00:00:00Z");
        assert_eq!(deletions_hold(&log.model(&[(5, deleted.clone()), (7, stale.clone())])).1.len(), 1);
        // Two removals of one transaction, in either arrival order: the same verdict.
        let again = at("transaction.deleted", "evt_4", "2026-01-01T00:00:02.000Z");
        let resync = at("accounts.updated", "evt_2", "2026-01-01T00:00:01.000Z");
        for events in [
            [(4, deleted.clone()), (5, resync.clone()), (6, again.clone())],
            [(4, again.clone()), (5, resync.clone()), (6, deleted.clone())],
        ] {
            assert_eq!(deletions_hold(&log.model(&events)).1.len(), 1, "removed again after the resync");
        }
    }

    fn accounts(log: &mut Log, created: &str, synced: &str) {
        let account = json!({"id": "acc_1", "connectionId": "conn_1", "createdAt": created, "lastSyncedAt": synced});
        log.read("v1/connections/conn_1/accounts", &[], json!([account]));
    }

    #[test]
    fn created_at_is_fixed_even_when_an_update_is_announced() {
        let mut log = Log::new();
        accounts(&mut log, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
        accounts(&mut log, "2026-01-01T00:00:00.000Z", "2026-01-03T00:00:00Z");
        let updated = event("accounts.updated", json!({"accountId": "acc_1", "connectionId": "conn_1"}));
        assert!(fixed_fields(&log.model(&[(5, updated.clone())])).1.is_empty(), "the same moment, written otherwise");
        accounts(&mut log, "2026-05-05T00:00:00Z", "2026-01-03T00:00:00Z");
        assert_eq!(fixed_fields(&log.model(&[(5, updated.clone()), (15, updated)])).1.len(), 1);
        log.page("acc_1", json!([{"id": "txn_1", "createdAt": "2026-01-01T00:00:00Z"}]));
        log.page("acc_1", json!([{"id": "txn_1", "createdAt": "2026-02-01T00:00:00Z"}]));
        assert_eq!(fixed_fields(&log.model(&[])).1.len(), 2, "and a transaction's");
    }

    #[test]
    fn the_last_sync_never_moves_back() {
        let mut log = Log::new();
        accounts(&mut log, "2026-01-01T00:00:00Z", "2026-01-02T06:00:00Z");
        accounts(&mut log, "2026-01-01T00:00:00Z", "2026-01-02T07:00:00Z");
        assert!(sync_moves_forward(&log.model(&[])).1.is_empty());
        accounts(&mut log, "2026-01-01T00:00:00Z", "2026-01-02T01:00:00Z");
        let (judged, found) = sync_moves_forward(&log.model(&[]));
        assert_eq!((judged, found.len()), (2, 1));
        assert!(found[0].problem.detail.contains("cannot move back"), "{}", found[0].problem.detail);
    }

    #[test]
    fn a_last_sync_from_the_future_is_the_clocks_not_a_move_back() {
        let mut log = Log::new();
        log.read("v1/connections", &[], json!({"connectionId": "conn_1"}));
        if let Some(post) = Arc::get_mut(&mut log.answers[0]) {
            post.sent.method = "POST".into();
        }
        let now = chrono::Utc::now();
        let stamp = |d: chrono::Duration| (now + d).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let created = event(
            "connection.created",
            json!({"connectionId": "conn_1", "occurredAt": stamp(chrono::Duration::zero())}),
        );
        accounts(&mut log, &stamp(chrono::Duration::zero()), &stamp(chrono::Duration::hours(1)));
        accounts(&mut log, &stamp(chrono::Duration::zero()), &stamp(chrono::Duration::zero()));
        let model = log.model(&[(5, created.clone())]);
        assert!(sync_moves_forward(&model).1.is_empty(), "the hour ahead was never a sync's time");
        assert_eq!(sync_moves_forward(&log.model(&[])).1.len(), 1, "no creation announced: no clock to read");
        accounts(&mut log, &stamp(chrono::Duration::zero()), &stamp(chrono::Duration::hours(-1)));
        assert_eq!(sync_moves_forward(&log.model(&[(5, created)])).1.len(), 1, "a true time, then an earlier one");
    }

    #[test]
    fn reads_with_bad_input_or_another_key_are_left_out() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.read("v1/accounts/acc_1/transactions", &[("limit", "0")], json!({"data": [], "has_more": false}));
        assert!(nothing_vanishes(&log.model(&[])).1.is_empty());
    }
}
