//! §6 `accounts.updated` (account data changed; fetch the latest data and transactions): an
//! update announces a change. Where the run read an account and its transactions before an
//! `accounts.updated` of it happened and again after it arrived, with no other event that could
//! stand between the two (of the account, or of its connection), the later reads show
//! something changed: the account's object (any field: a balance, `lastSyncedAt`, the optional
//! fields), its connection's accounts (one added or removed), or its transactions (one added,
//! removed or changed). An update after which everything reads as before announced nothing
//! (`tests/foreign/python-wire`'s `read-echo-updated`: a refresh on read that notifies on every
//! refresh; mutant `read-echoes-update`).
//!
//! Ruled (docs/checks.md, "An update shows a change"): a change made and reverted between two
//! reads is not shown by the spec, so a pair of reads with another event between them is not
//! judged (a second update may have reverted the first); with one event between them, a change
//! reverted unannounced is `state.changes-announced`'s, and no change at all is this case's.
//! "Before the event" is the server's clock: the earlier reads were answered before the event's
//! `occurredAt` less the clock's offset at most, one unit of the stamp and
//! [`COMMIT_SLACK`] (a server may commit a moment before it stamps its event); without a
//! creation event to bound the offset, nothing is judged. "After" is the event's arrival: the
//! later reads were sent after it, and they are the last reads of the window, so data that shows
//! late (the event before its data, `reactions.accounts-updated`'s) still counts as a change.

use super::model::{finding, view, Event, ListRead, Listing, Model};
use crate::harness::checks::Finding;
use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::answers::Auth;
use crate::harness::transport::pagination;
use crate::harness::vocab::kind::StateKind;
use crate::harness::vocab::outcome::{Problem, Stop};
use crate::spec;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long before its event's stamp a change may already be readable (as the slack of
/// `accounts.refused-before-connected`).
const COMMIT_SLACK: chrono::Duration = chrono::Duration::milliseconds(250);

/// How long the flow waits between its earlier reads and the read of the account alone, so that
/// an event the read may cause is stamped after them by more than [`COMMIT_SLACK`] and the
/// clock's uncertainty.
const GAP: Duration = Duration::from_millis(500);

/// How long the quiet connection's deliveries stay silent after the read alone before the later
/// reads, and the longest wait.
const QUIET: Duration = Duration::from_millis(600);
const QUIET_CAP: Duration = Duration::from_secs(3);

/// §6: every `accounts.updated` the record has reads around (see the module's doc).
pub(super) fn updates_show_a_change(model: &Model) -> (usize, Vec<Finding>) {
    let Some(offset) = model.clock_offset() else { return (0, Vec::new()) };
    let listings = model.listings();
    let (mut judged, mut findings) = (0, Vec::new());
    for e in model.events.iter().filter(|e| e.kind == spec::ACCOUNTS_UPDATED) {
        let Some(account) = e.account.as_deref() else { continue };
        let Some(from) = model.occurred_from(e, offset) else { continue };
        for v in [Some(0), Some(1)].into_iter().filter(|v| e.speaks_for(*v)) {
            let Some(connection) = model.connection_of(v, account) else { continue };
            let around = Around { model, listings: &listings, e, v, account, connection, offset };
            if let Some(found) = around.judge(from - COMMIT_SLACK) {
                judged += 1;
                findings.extend(found);
            }
        }
    }
    (judged + read_twice(model, &listings), findings)
}

/// The accounts of each view read twice whole (a list that shows it and a complete listing of
/// its transactions, each twice): where an update of no change would have been judged. A target
/// that sent none there passes on them (the flow's quiet connection is one).
fn read_twice(model: &Model, listings: &[Listing]) -> usize {
    let mut shown: HashMap<(Option<u8>, &str), (usize, usize)> = HashMap::new();
    for list in &model.lists {
        for (id, _) in &list.whole {
            shown.entry((view(&list.answer), id)).or_default().0 += 1;
        }
    }
    for listing in listings {
        if let Some(counts) = shown.get_mut(&(view(&listing.first.answer), listing.first.account.as_str())) {
            counts.1 += 1;
        }
    }
    shown.values().filter(|(lists, walks)| *lists >= 2 && *walks >= 2).count()
}

/// One `accounts.updated` and the reads of one view around it.
struct Around<'a> {
    model: &'a Model,
    listings: &'a [Listing<'a>],
    e: &'a Event,
    v: Option<u8>,
    account: &'a str,
    connection: &'a str,
    offset: chrono::Duration,
}

impl Around<'_> {
    /// The finding, if the reads around the event show no change; `None` when the record has no
    /// pair of reads to judge it on.
    fn judge(&self, before: DateTime<Utc>) -> Option<Option<Finding>> {
        let m = self.model;
        let lists: Vec<&ListRead> =
            m.lists.iter().filter(|l| view(&l.answer) == self.v && l.connection == self.connection).collect();
        let listings: Vec<&Listing> = self
            .listings
            .iter()
            .filter(|l| l.first.account == self.account && view(&l.first.answer) == self.v && l.twice.is_empty())
            .collect();
        let shows = |l: &&&ListRead| l.whole.iter().any(|(id, _)| id == self.account);
        // Answered before the event happened, so before it arrived too.
        let earlier = |at: Instant| at < self.e.arrived && m.on_wall(at) < before;
        let r1 = lists.iter().filter(shows).rfind(|l| earlier(l.answer.answered_at))?;
        let l1 = listings.iter().rfind(|l| earlier(l.last.answer.answered_at))?;
        let start = r1.answer.sent_at.min(l1.first.answer.sent_at);
        let cap = self.cap(start, r1)?;
        let until = |at: Instant| cap.is_none_or(|cap| m.on_wall(at) < cap);
        let after = |sent: Instant| sent >= self.e.arrived;
        let r2 = lists.iter().rfind(|l| after(l.answer.sent_at) && until(l.answer.answered_at))?;
        let l2 = listings.iter().rfind(|l| after(l.first.answer.sent_at) && until(l.last.answer.answered_at))?;
        let whole = |l: &ListRead| l.whole.iter().find(|(id, _)| id == self.account).map(|(_, p)| *p);
        let ids = |l: &ListRead| l.whole.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>();
        let changed = whole(r1) != whole(r2) || ids(r1) != ids(r2) || l1.items != l2.items;
        if changed {
            return Some(None);
        }
        let later = if r2.answer.seq > l2.last.answer.seq { &r2.answer } else { &l2.last.answer };
        let problem = format!(
            "{} and {} (walked to the end) show account {} and its {} transactions as {} and {} did, though an {} of \
             the account happened after those and arrived before these, with no other event of the account or its \
             connection between them: the event announced no change (§6: account data changed)",
            r2.answer.sent.request,
            l2.first.answer.sent.request,
            self.account,
            l2.items.len(),
            r1.answer.sent.request,
            l1.first.answer.sent.request,
            spec::ACCOUNTS_UPDATED,
        );
        let about = [self.account.to_string()];
        Some(Some(finding(Problem::found(StateKind::NoChange, about, problem), later, true)))
    }

    /// The latest moment (this machine's clock) the later reads may be answered by, so that no
    /// other event of the account or its connection can fall between the earlier reads (sent
    /// from `start`) and them: each such event that did not arrive before `start` must be
    /// stamped after them by the slack. `Some(None)`: no such event; `None`: one has no stamp.
    fn cap(&self, start: Instant, r1: &ListRead) -> Option<Option<DateTime<Utc>>> {
        let m = self.model;
        let mut cap: Option<DateTime<Utc>> = None;
        for f in m.every_reading().filter(|f| !std::ptr::eq(*f, self.e) && f.arrived >= start) {
            let of_account = f.account.as_deref() == Some(self.account);
            let of_connection = f.kind.starts_with("connection.")
                && f.connection.as_deref() == Some(self.connection)
                && !m.old_news(f, &r1.answer);
            if !(of_account || of_connection) || !f.speaks_for(self.v) {
                continue;
            }
            let at = m.occurred_from(f, self.offset)? - COMMIT_SLACK;
            cap = Some(cap.map_or(at, |c| c.min(at)));
        }
        Some(cap)
    }
}

/// The flow: a connection of its own that no other flow reads or drives, its accounts and the
/// first account's transactions read, then that account read alone (§4.4, as §6.3's client
/// does), then, once the connection's deliveries are quiet, its accounts and transactions read
/// again, and the account alone once more. A target that announces a change on a read shows
/// nothing changed between the two.
pub(super) async fn quiet(ctx: Arc<RunContext>) -> Result<(), Stop> {
    if ctx.driver.is_none() {
        return Err(Stop::ignore(crate::harness::transport::driver::NEEDS_DRIVER));
    }
    let Some(receiver) = ctx.receiver.as_ref() else { return Err(Stop::ignore("no webhook receiver")) };
    let (created, listed) = ctx.connect_new_as(Auth::Primary).await?;
    let id = created.connection_id.clone();
    let Some(account) = listed.iter().find_map(|a| a.get("id")?.as_str().map(str::to_string)) else {
        return Err(Stop::ignore(format!("{id} lists no account")));
    };
    let path = ["v1", "connections", id.as_str(), "accounts"];
    ctx.api.get(&path, &[]).await?;
    super::along(pagination::walk_again(&ctx.api, &account).await)?;
    tokio::time::sleep(GAP).await;
    ctx.api.get(&["v1", "accounts", &account], &[]).await?;
    let started = Instant::now();
    while started.elapsed() < QUIET_CAP {
        let last = receiver
            .timeline()
            .into_iter()
            .filter(|(_, d)| d.connection_id() == Some(id.as_str()))
            .map(|(at, _)| at)
            .max();
        let quiet_for = last.filter(|at| *at > started).unwrap_or(started).elapsed();
        if quiet_for >= QUIET {
            break;
        }
        tokio::time::sleep(QUIET - quiet_for).await;
    }
    ctx.api.get(&path, &[]).await?;
    super::along(pagination::walk_again(&ctx.api, &account).await)?;
    // The account alone once more: two single reads (§4.4) with nothing driven between, which
    // `state.changes-announced` compares field by field.
    ctx.api.get(&["v1", "accounts", &account], &[]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testlog::{event, txn, Log};
    use super::*;
    use serde_json::{json, Value};

    /// A creation at 0 ms (announced, for the clock), the account and its transactions read at
    /// 10 and 20 ms, then `updates` (each arriving and stamped so many ms after the start), the
    /// account and its transactions read again at 320 and 330 ms, showing `balance` then.
    fn around(balance: f64, updates: &[(u64, i64)]) -> (usize, Vec<Finding>) {
        let mut log = Log::new();
        let start = Utc::now() - chrono::Duration::from_std(log.at(0).elapsed()).unwrap_or_default();
        let stamp =
            |ms: i64| (start + chrono::Duration::milliseconds(ms)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        log.read("v1/connections", &[], json!({"connectionId": "conn_1"}));
        if let Some(post) = Arc::get_mut(&mut log.answers[0]) {
            post.sent.method = "POST".into();
        }
        let accounts = |balance: f64| json!([{"id": "acc_1", "connectionId": "conn_1", "balance": balance}]);
        log.read("v1/connections/conn_1/accounts", &[], accounts(1.0));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        // Other reads until 320 ms.
        for _ in 3..32 {
            log.read("v1/connections/conn_9/accounts", &[], json!([]));
        }
        log.read("v1/connections/conn_1/accounts", &[], accounts(balance));
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        let created = event("connection.created", json!({"connectionId": "conn_1", "occurredAt": stamp(1)}));
        let mut events = vec![(5, created)];
        for (i, (arrived, occurred)) in updates.iter().enumerate() {
            let data = json!({"accountId": "acc_1", "connectionId": "conn_1", "occurredAt": stamp(*occurred)});
            let mut updated: Value = event(spec::ACCOUNTS_UPDATED, data);
            updated["id"] = json!(format!("evt_u{i}"));
            events.push((*arrived, updated));
        }
        // Every instant of the log in the past, as the model reads them.
        std::thread::sleep(Duration::from_millis(400));
        updates_show_a_change(&log.model(&events))
    }

    #[test]
    fn an_update_that_changes_nothing_fails() {
        let (judged, found) = around(1.0, &[(305, 300)]);
        assert_eq!((judged, found.len()), (2, 1), "the update, and the account read twice whole");
        assert!(found[0].problem.detail.contains("announced no change"), "{}", found[0].problem.detail);
        let changed = around(2.0, &[(305, 300)]).1;
        assert!(changed.is_empty(), "a balance changed: {}", changed[0].problem.detail);
    }

    #[test]
    fn an_update_not_provably_after_the_earlier_reads_or_beside_another_is_not_judged() {
        // Stamped 30 ms after the start: within the slack of the earlier reads.
        let (judged, found) = around(1.0, &[(305, 30)]);
        assert_eq!((judged, found.len()), (1, 0), "the account read twice whole only");
        // Another update stamped between the reads: a change and its reversal cannot be told apart.
        assert!(around(1.0, &[(305, 300), (306, 25)]).1.is_empty());
        // Another one stamped long after the later reads leaves the pair judged.
        assert_eq!(around(1.0, &[(305, 300), (5005, 5000)]).1.len(), 1);
    }
}
