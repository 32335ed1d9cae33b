//! Cause over refused reads (§5; §4.4, §6): a read refused for its credential acts on nothing.
//! A server that refreshes an account when it is read (§4.4 returns the updated balance) before
//! it checks the key syncs the account for anyone; the sync's `accounts.updated` (§6), or the
//! `transaction.deleted` of a correction it made, is the effect. Judged as [`super::cause`] judges creations: one for one, each inside its refusal's
//! window, against the background rate, since an account that syncs on its own is legal (§1).
//!
//! - **The refusals:** reads of an account, its transactions or a connection's accounts
//!   answered 4xx, with no key, a near-miss key, a header that holds no key of the run, or one
//!   client's key on an object only the other client was shown (a refusal with the owner's own
//!   key, of a connection not yet CONNECTED, is the service's state, not a credential's).
//! - **Clear:** no 2xx read of the same account or connection (a sync on a read is legal) and no
//!   driver call on its connection within [`DRIVER_LAG`] before, or the offset's uncertainty after.
//! - **The effects:** each `accounts.updated` and `transaction.deleted` once, naming the account read (or an account of
//!   the connection read), left out when a 2xx read of it could explain it, or when it is the
//!   first of its account after a driver call on its connection (however late it came).
//! - **Settled:** an unmatched clear refusal counts against the finding once a delivery arrived
//!   [`LATE`] after it, or a creation of the run sent after it had its `connection.created`
//!   arrive (as [`super::cause`] settles; the experiment's flow makes one last).
//! - **The window's slack** is the clock's grain: a second when every stamp the run was sent
//!   falls on a whole second, else [`SLACK`].
//!
//! A refused read whose effect is silent (a sync never announced, a `lastSyncedAt` moved) is not
//! judged: a later read shows only the latest sync, never one per refusal, and a server may
//! sync on its own at any time (`docs/checks.md`).

use super::cause::{offset_bounds, overlaps, reach_of, refused, settled_after, weigh, Effect, Experiment, LATE};
use super::clock::whole_second;
use super::{finding, Client, Credential, Endpoint, Record, Seen, Verdict};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use chrono::Duration;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The window's slack around a refused read on a millisecond clock: the harness's scheduling
/// and a server that stamps its sync just after it answered.
const SLACK: Duration = Duration::milliseconds(200);
/// How long before a refused read a driver call on its connection keeps it from being clear.
const DRIVER_LAG: Duration = Duration::seconds(1);

/// What the record tells of each account and connection: the account's connection, and the
/// clients that were shown each id in a 2xx answer.
#[derive(Default)]
struct Owners {
    connection_of: BTreeMap<String, String>,
    shown_to: BTreeMap<String, BTreeSet<Client>>,
}

impl Owners {
    fn of(record: &Record) -> Self {
        let mut o = Self::default();
        for a in record.answers.iter().filter(|a| a.ok()) {
            let Some(client) = a.client() else { continue };
            if !a.id.is_empty() {
                o.shown_to.entry(a.id.clone()).or_default().insert(client);
            }
            if let Some((c, _)) = &a.created {
                o.shown_to.entry(c.clone()).or_default().insert(client);
            }
            for obj in a.objects.iter().filter(|o| o.kind == super::Kind::Account) {
                o.shown_to.entry(obj.id.clone()).or_default().insert(client);
                if let Some(c) = obj.str("connectionId").or(obj.listed_under.as_deref()) {
                    o.connection_of.insert(obj.id.clone(), c.to_string());
                }
            }
        }
        o
    }

    /// The account and connection a read names.
    fn subject(&self, r: &Seen) -> (Option<String>, Option<String>) {
        match r.endpoint {
            Endpoint::Account | Endpoint::Transactions => (Some(r.id.clone()), self.connection_of.get(&r.id).cloned()),
            _ => (None, Some(r.id.clone())),
        }
    }

    /// Whether `r`'s credential is one the service must refuse for what it names.
    fn foreign(&self, r: &Seen) -> bool {
        match r.credential {
            Credential::Key(c) => self.shown_to.get(&r.id).is_some_and(|s| !s.contains(&c) && s.contains(&c.other())),
            _ => true,
        }
    }
}

/// Whether two subjects share the account, or failing that the connection.
fn same(a: &(Option<String>, Option<String>), b: &(Option<String>, Option<String>)) -> bool {
    match (&a.0, &b.0) {
        (Some(x), Some(y)) => x == y,
        _ => a.1.is_some() && a.1 == b.1,
    }
}

pub(crate) fn judge(record: &Record) -> Verdict {
    let owners = Owners::of(record);
    let reads = [Endpoint::Account, Endpoint::Transactions, Endpoint::Accounts];
    let refused: Vec<&Seen> = record
        .answers
        .iter()
        .filter(|a| reads.contains(&a.endpoint) && !a.id.is_empty() && refused(a) && owners.foreign(a))
        .collect();
    if refused.is_empty() {
        return Verdict::default();
    }
    let bounds = offset_bounds(record);
    let reach = reach_of(bounds);
    // The run's own 2xx reads and driver calls, by what they name.
    let own: Vec<_> = record
        .answers
        .iter()
        .filter(|a| a.ok() && reads.contains(&a.endpoint) && a.client().is_some())
        .map(|a| (owners.subject(a), a.sent, a.answered))
        .collect();
    let driven = |connection: &Option<String>, from, to| {
        record
            .calls
            .iter()
            .any(|c| c.connection.is_some() && c.connection == *connection && c.started >= from && c.started <= to)
    };
    let clear = |r: &Seen| {
        let s = owners.subject(r);
        !own.iter().any(|(o, f, t)| same(o, &s) && *f <= r.answered + reach && *t >= r.sent - reach)
            && !driven(&s.1, r.sent - DRIVER_LAG, r.answered + reach)
    };
    let grain = match record.deliveries.iter().filter_map(|h| h.delivery.occurred_at()).collect::<Vec<_>>() {
        stamps if !stamps.is_empty() && stamps.iter().all(|at| whole_second(*at)) => Duration::seconds(1) + SLACK,
        _ => SLACK,
    };
    let last = record.deliveries.iter().map(|h| h.arrived).max();
    let settled = |r: &Seen| last.is_some_and(|l| l >= r.answered + LATE) || settled_after(record, r.answered);
    let may_cause = |r: &Seen, e: &Effect| same(&owners.subject(r), &e.subject);
    // Two experiments, each weighed against its own background: the data events, and the
    // connection events that leave CONNECTED (a read refused for its key that re-verifies or
    // drops the connection it names).
    let (mut found, mut unweighed) = (Vec::new(), Vec::new());
    for (all, what, effect) in [
        (announced(record, &owners, bounds), "the refused reads (§5)", "an accounts.updated or transaction.deleted"),
        (left_connected(record, bounds), "the refused reads, against connection events (§5)", LEFT),
    ] {
        let explained = explained(record, &all);
        let effects: Vec<Effect> = all
            .into_iter()
            .filter(|e| !explained.contains(&e.seq))
            .filter(|e| !own.iter().any(|(o, f, t)| same(o, &e.subject) && overlaps(e, *f, *t, grain)))
            .collect();
        let x = Experiment {
            refused: refused.clone(),
            clear: &clear,
            effects,
            may_cause: &may_cause,
            settled: &settled,
            slack: grain,
        };
        let weighing = weigh(record, &x);
        unweighed.extend(weighing.unweighed(what, reach));
        let Some(f) = weighing.followed else { continue };
        let detail = format!(
            "refused reads (GET of an account, its transactions or a connection's accounts, answered 4xx) with {} were \
             each followed, inside its own time window, by {effect} of what it read, in {} of the {} whose \
             effect could be told apart from the run's own reads and actions ({} such events in the whole run that no \
             refusal could take, one each): a refused request has an effect (§5, §6)",
            f.labels.join(" or "),
            f.matched,
            f.weighed,
            f.background
        );
        found.push(finding(Problem::found(K::RefusedReadActs, [], detail), &f.answers, &f.deliveries));
    }
    // One experiment weighing nothing is said only when the other weighed nothing either.
    unweighed.truncate(1);
    Verdict { judged: refused.len(), found, unweighed }
}

/// What the second experiment counts as an effect.
const LEFT: &str = "a connection event leaving CONNECTED (previousStatus `connected`)";

/// Each connection event whose `previousStatus` is `connected` (§6.2: the connection left
/// CONNECTED), once, with its connection and when it happened (as [`announced`] times them).
fn left_connected(record: &Record, bounds: Option<(Duration, Duration)>) -> Vec<Effect> {
    let mut seen = HashSet::new();
    record
        .deliveries
        .iter()
        .filter(|h| h.delivery.event_type().is_some_and(|t| t.starts_with("connection.")))
        .filter(|h| h.delivery.data_str("previousStatus") == Some("connected"))
        .filter(|h| seen.insert(h.delivery.identity()))
        .map(|h| {
            let (from, to) = window(h, bounds);
            let kind = h.delivery.event_type().unwrap_or_default().to_string();
            Effect {
                seq: h.delivery.seq,
                from,
                to,
                subject: (None, h.delivery.connection_id().map(str::to_string)),
                kind,
            }
        })
        .collect()
}

/// When a delivery's event happened in the harness's clock: its `occurredAt` through the
/// offset's bounds, or up to [`LATE`] before it arrived.
fn window(
    h: &super::Heard,
    bounds: Option<(Duration, Duration)>,
) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    match (bounds, h.delivery.occurred_at()) {
        (Some((lo, hi)), Some(at)) => (at - hi, (at - lo).min(h.arrived)),
        _ => (h.arrived - LATE, h.arrived),
    }
}

/// The effects a driver call explains: after each call on a connection, the first event of
/// each type for each of its accounts (a sync or a deletion the action asked for, or the first
/// sync on connecting), however late it came.
fn explained(record: &Record, effects: &[Effect]) -> HashSet<u64> {
    let mut explained = HashSet::new();
    for call in record.calls.iter().filter(|c| c.connection.is_some()) {
        let mut firsts: BTreeMap<(&Option<String>, &str), &Effect> = BTreeMap::new();
        for e in effects.iter().filter(|e| e.subject.1 == call.connection && e.to >= call.started) {
            let first = firsts.entry((&e.subject.0, e.kind.as_str())).or_insert(e);
            if e.from < first.from {
                *first = e;
            }
        }
        explained.extend(firsts.values().map(|e| e.seq));
    }
    explained
}

/// Each `accounts.updated` and `transaction.deleted` once, with the account and connection it names and when it
/// happened in the harness's clock (as [`super::cause`] times a creation's event).
fn announced(record: &Record, owners: &Owners, bounds: Option<(Duration, Duration)>) -> Vec<Effect> {
    let mut seen = HashSet::new();
    record
        .deliveries
        .iter()
        .filter(|h| {
            matches!(h.delivery.event_type(), Some(crate::spec::ACCOUNTS_UPDATED | crate::spec::TRANSACTION_DELETED))
        })
        .filter(|h| seen.insert(h.delivery.identity()))
        .map(|h| {
            let account = h.delivery.data_str("accountId").map(str::to_string);
            let connection = h
                .delivery
                .connection_id()
                .map(str::to_string)
                .or_else(|| account.as_ref().and_then(|a| owners.connection_of.get(a).cloned()));
            let (from, to) = window(h, bounds);
            let kind = h.delivery.event_type().unwrap_or_default().to_string();
            Effect { seq: h.delivery.seq, from, to, subject: (account, connection), kind }
        })
        .collect()
}
