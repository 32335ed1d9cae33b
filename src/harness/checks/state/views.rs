//! Rules that hold one statement against another view of the same object (issue 39, the clause
//! matrix `cases/clauses.toml`): what an event names against what the reads list, and the
//! single account read (§4.4) against the connection's list (§4.2). Like [`super::rules`], each
//! reads the [`Model`] and fails the reads that contradict another view.

use super::model::{same, view, Event, ListRead, Model};
use crate::harness::checks::Finding;
use crate::harness::transport::answers::Answer;
use crate::harness::vocab::kind::{InvariantKind, StateKind};
use crate::harness::vocab::outcome::Problem;
use crate::spec;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

fn finding(problem: Problem, answer: &Arc<Answer>) -> Finding {
    super::model::finding(problem, answer, false)
}

/// §6 (a transaction removed during deduplication or correction) and §2.3: a
/// `transaction.deleted` removes a transaction that existed, so one naming a transaction that
/// no read of its view ever showed, although a complete listing of its account ended before the
/// server dates the deletion, with no change of the account or its connection announced from
/// that listing's start up to a second after the deletion (what could have brought the
/// transaction in between), is about an object nobody created (`invariants.cause`; mutant
/// `phantom-deletion`). Open: a deletion of a transaction added and removed between two
/// listings with its addition announced, any deletion no complete listing precedes (a
/// deduplication before the first read), and events without `occurredAt` or a clock offset.
pub(crate) fn deletions_caused(model: &Model) -> (usize, Vec<Finding>) {
    let (mut judged, mut findings) = (0, Vec::new());
    let offset = model.clock_offset();
    let listings = model.listings();
    for e in model.events.iter().filter(|e| e.kind == spec::TRANSACTION_DELETED) {
        let (Some(account), Some(txn)) = (&e.account, &e.transaction) else { continue };
        let before = listings
            .iter()
            .filter(|l| l.first.account == *account && e.speaks_for(view(&l.first.answer)))
            .filter(|l| model.happened_after(e, offset, l.last.answer.answered_at))
            .max_by_key(|l| l.last.answer.seq);
        let Some(listing) = before else { continue };
        judged += 1;
        let reader = view(&listing.first.answer);
        let shown =
            |p: &&super::model::PageRead| view(&p.answer) == reader && p.items.iter().any(|(id, _, _)| id == txn);
        if model.pages.iter().any(|p| shown(&p)) {
            continue;
        }
        let connection = e.connection.as_deref().or_else(|| model.connection_of(reader, account));
        if model.announced_by(account, connection, &listing.first.answer, Some(e)) {
            continue;
        }
        let detail = format!(
            "a {} names transaction {txn} of account {account}, which no read showed: {} and following \
             next_cursor listed the account to its end before the server dates the deletion, and no change of it \
             was announced between (§6: a removal of a transaction that existed; §2.3): an event about an object \
             nobody created",
            spec::TRANSACTION_DELETED,
            listing.first.answer.sent.request
        );
        let problem = Problem::found(InvariantKind::PhantomDeletion, [txn.clone(), account.clone()], detail);
        findings.push(finding(problem, &listing.last.answer));
    }
    (judged, findings)
}

/// §6.2 `accountId` of `transaction.deleted` is the account concerned, and §2.3 a
/// transaction's owning account: the account the event names is the one whose list showed the
/// removed transaction. Judged where a read of the event's view listed it under some account.
pub(super) fn deleted_owner(model: &Model) -> (usize, Vec<Finding>) {
    let mut judged = 0;
    let mut findings = Vec::new();
    for e in model.events.iter().filter(|e| e.kind == spec::TRANSACTION_DELETED) {
        let (Some(account), Some(txn)) = (&e.account, &e.transaction) else { continue };
        let listing =
            model.pages.iter().filter(|p| e.speaks_for(view(&p.answer)) && p.items.iter().any(|(id, _, _)| id == txn));
        let owners: Vec<_> = listing.collect();
        if owners.is_empty() {
            continue;
        }
        judged += 1;
        if owners.iter().any(|p| p.account == *account) {
            continue;
        }
        let page = owners[0];
        let detail = format!(
            "{} names account {account} for the removed transaction {txn}, which {} lists under account {} \
             (§6.2: the account concerned; §2.3: the owning account)",
            spec::TRANSACTION_DELETED,
            page.answer.sent.request,
            page.account
        );
        let problem = Problem::found(StateKind::DeletedOwner, [txn.clone(), account.clone()], detail)
            .expecting(page.account.clone(), account.clone());
        findings.push(finding(problem, &page.answer));
    }
    (judged, findings)
}

/// Whether a connection event of `connection` that the server may date after `e` arrived
/// before `before`: a reconnection may link other accounts, so a list read after it is not held
/// against `e`. So may any of a connection whose connection events do not link into one chain
/// (`events.previous-status-chain` fails it): where its reconnections fall cannot be told, and
/// a verdict that rested on which of its events arrived before a read would depend on timing.
fn relinked(model: &Model, e: &Event, connection: &str, before: Instant) -> bool {
    model.unlinked(connection)
        || model.events.iter().any(|f| {
            f.kind.starts_with("connection.")
                && f.connection.as_deref() == Some(connection)
                && f.arrived < before
                && !f.occurred_before(e)
        })
}

/// §4.2: the accounts list holds all accounts linked to the connection. An account that an
/// `accounts.updated` or `transaction.deleted` of the connection names (§6.2: the account
/// concerned) is in every list of that connection read after the event arrived, in the event's
/// view. An account that was listed and then dropped out is `state.nothing-vanishes`'s (one
/// judge per rule): here only accounts the view's lists never showed before.
pub(super) fn list_complete(model: &Model) -> (usize, Vec<Finding>) {
    let mut judged = 0;
    let mut findings = Vec::new();
    let mut reported: HashSet<(u64, &str)> = HashSet::new();
    let naming =
        model.events.iter().filter(|e| e.kind == spec::ACCOUNTS_UPDATED || e.kind == spec::TRANSACTION_DELETED);
    for e in naming {
        let (Some(account), Some(connection)) = (&e.account, &e.connection) else { continue };
        let lists = model
            .lists
            .iter()
            .filter(|l| l.connection == *connection && e.speaks_for(view(&l.answer)) && l.answer.sent_at > e.arrived);
        for list in lists {
            judged += 1;
            if list.accounts.iter().any(|(id, _)| id == account) {
                continue;
            }
            let listed_before = model.lists.iter().any(|l| {
                l.connection == list.connection
                    && view(&l.answer) == view(&list.answer)
                    && l.answer.sent_at < list.answer.sent_at
                    && l.accounts.iter().any(|(id, _)| id == account)
            });
            if listed_before
                || relinked(model, e, connection, list.answer.sent_at)
                || !reported.insert((list.answer.seq, account))
            {
                continue;
            }
            let detail = format!(
                "{} leaves out account {account}, which a {} of connection {connection} named before the read \
                 (§4.2: all accounts linked to the connection)",
                list.answer.sent.request, e.kind
            );
            let about = [account.to_string(), connection.to_string()];
            findings.push(finding(Problem::found(StateKind::ListIncomplete, about, detail), &list.answer));
        }
    }
    (judged, findings)
}

/// The account fields the single read (§4.4) and the list (§4.2) must agree on when no event
/// separates them: what the account is, not its balance (`reactions.account-balance`'s).
const AGREED: [&str; 6] = ["connectionId", "name", "type", "currency", "accountNumber", "createdAt"];

/// §4.4 and §2.2: `GET /v1/accounts/{id}` (its shape is not shown) that answers with account
/// fields states them of the account asked for: each one it shows equals what the
/// connection's list showed of that account, in the same view, at the list read nearest in
/// time with no announcement of a change between the two (§1 step 5).
pub(super) fn account_read_agrees(model: &Model) -> (usize, Vec<Finding>) {
    let mut judged = 0;
    let mut findings = Vec::new();
    for (answer, id, fields) in &model.singles {
        let distance = |at: Instant| {
            if at > answer.sent_at {
                at - answer.sent_at
            } else {
                answer.sent_at - at
            }
        };
        // A change announced between the two reads (an event of the account, or of its
        // connection) may explain a difference: such a pair is not compared.
        let unchanged = |list: &&ListRead| {
            let (from, to) = if list.answer.sent_at < answer.sent_at {
                (list.answer.sent_at, answer.answered_at)
            } else {
                (answer.sent_at, list.answer.answered_at)
            };
            !model.events.iter().any(|e| {
                e.arrived >= from
                    && e.arrived <= to
                    && (e.account.as_deref() == Some(id.as_str())
                        || (e.kind.starts_with("connection.")
                            && e.connection.as_deref() == Some(list.connection.as_str())))
            })
        };
        let nearest = model
            .lists
            .iter()
            .filter(|l| view(&l.answer) == view(answer))
            .filter(unchanged)
            .filter_map(|l| Some((l, l.accounts.iter().find(|(a, _)| a == id)?)))
            .min_by_key(|(l, _)| distance(l.answer.sent_at));
        let Some((list, (_, listed))) = nearest else { continue };
        let mut differ = BTreeSet::new();
        let (mut listed_values, mut read_values) = (Vec::new(), Vec::new());
        for field in AGREED {
            if let (Some(a), Some(b)) = (listed.get(field), fields.get(field)) {
                if !same(a, b) {
                    differ.insert(format!("{field} {b} where the list shows {a}"));
                    listed_values.push(format!("{field} {a}"));
                    read_values.push(format!("{field} {b}"));
                }
            }
        }
        if AGREED.iter().any(|f| listed.get(*f).is_some() && fields.get(*f).is_some()) {
            judged += 1;
        }
        if !differ.is_empty() {
            let detail = format!(
                "{} answers account {id} with {} (by {}, §4.4, §2.2: one account, one set of fields)",
                answer.sent.request,
                differ.into_iter().collect::<Vec<_>>().join(", "),
                list.answer.sent.request
            );
            let problem = Problem::found(StateKind::ReadDisagrees, [id.clone()], detail)
                .expecting(listed_values.join(", "), read_values.join(", "));
            findings.push(finding(problem, answer));
        }
    }
    (judged, findings)
}

#[cfg(test)]
mod tests {
    use super::super::testlog::{txn, Log};
    use super::*;
    use serde_json::{json, Value};

    /// A deletion of a transaction no read showed, dated after a complete listing with nothing
    /// announced between, fails; one the listing showed, or one a sync announced between may
    /// have brought, does not.
    #[test]
    fn a_deletion_of_a_transaction_nobody_created_fails() {
        let base = chrono::Utc::now();
        let mut log = Log::new();
        log.create(json!({"connectionId": "conn_1", "status": "CREATED"}));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let at =
            |ms: i64| (base + chrono::Duration::milliseconds(ms)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let event = |id: &str, kind: &str, data: Value| {
            let mut data = data;
            data["connectionId"] = json!("conn_1");
            json!({"id": id, "type": kind, "data": data})
        };
        let created = event("evt_0", "connection.created", json!({"occurredAt": at(0)}));
        let deleted = |t: &str| {
            let data = json!({"accountId": "acc_1", "transactionId": t, "occurredAt": at(500)});
            event("evt_1", spec::TRANSACTION_DELETED, data)
        };
        let found = deletions_caused(&log.model(&[(1, created.clone()), (501, deleted("txn_9"))])).1;
        assert_eq!(found.len(), 1);
        assert!(found[0].problem.detail.contains("nobody created"), "{}", found[0].problem.detail);
        assert!(deletions_caused(&log.model(&[(1, created.clone()), (501, deleted("txn_1"))])).1.is_empty());
        let synced = event("evt_2", spec::ACCOUNTS_UPDATED, json!({"accountId": "acc_1", "occurredAt": at(300)}));
        let events = [(1, created.clone()), (301, synced), (501, deleted("txn_9"))];
        assert!(deletions_caused(&log.model(&events)).1.is_empty());
        // Without a creation's event no clock offset dates the deletion: not judged.
        assert!(deletions_caused(&log.model(&[(501, deleted("txn_9"))])).1.is_empty());
    }
}
