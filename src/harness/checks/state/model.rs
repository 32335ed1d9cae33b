//! The model of the target's observable state: every 2xx read of the run (`checks::reads_of`:
//! parsed once, as the response checks see it) and every delivery,
//! each read in its client's view and each event once, from its first arrival. It judges
//! nothing; the rules that read it are [`super::rules`].

use super::reading::fingerprint;
pub(super) use super::reading::same;
use crate::harness::checks::Finding;
use crate::harness::rules::delivery;
use crate::harness::rules::invariants::clock;
use crate::harness::transport::answers::{Answer, Auth};
use crate::harness::transport::parsed::{Endpoint, Read};
use crate::harness::vocab::outcome::Problem;
use crate::spec;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// The account fields a read of §4.2 shows that change only with an announcement (§1 step 5),
/// every field of §2.2 but its id (the classes of docs/checks.md, "Every field classified"):
/// the optional ones too, as whole values (`institution`, whose `logo` may change with the
/// rest; `creditLimit`, `currencyBalances`, `positions`, whose shapes are not shown).
/// `lastSyncedAt` is left out: a sync that found nothing new changes it and nothing else.
const ACCOUNT_FIELDS: [&str; 12] = [
    "connectionId",
    "name",
    "type",
    "currency",
    "balance",
    "availableBalance",
    "accountNumber",
    "createdAt",
    "institution",
    "creditLimit",
    "currencyBalances",
    "positions",
];

/// What each field's meaning allows over time (the rulings of `cases/README.md`): ids and owners
/// never change (the owners are `state.one-owner`'s), `createdAt` (when the object was created,
/// §2.2, §2.3) is fixed for the object's life even across an announced update, and `lastSyncedAt`
/// (when the account was last synced, §2.2) never goes back. Every other field may change with
/// an announcement (`state.changes-announced`).
pub(super) const CREATED_AT: &str = "createdAt";
pub(super) const LAST_SYNCED_AT: &str = "lastSyncedAt";

/// What the model keeps of the run's reads: the few fields its rules compare, taken from each
/// read once (`Observed::add`), so that the bodies need not be held.
#[derive(Clone, Default)]
pub(crate) struct Observed {
    pub(super) lists: Vec<ListRead>,
    pub(super) pages: Vec<PageRead>,
    /// `GET /v1/accounts/{id}` answers with a numeric `balance` (§4.4; its shape is not shown).
    pub(super) balances: Vec<(Arc<Answer>, String, f64)>,
    /// `GET /v1/accounts/{id}` answers that are an object of the asked id (or of none), with
    /// the fields of [`ACCOUNT_FIELDS`] it shows (`state.account-read-agrees`).
    pub(super) singles: Vec<(Arc<Answer>, String, Value)>,
    /// Each connection created with a client's key (§4.1), with the creation's answers: whose
    /// connection it is (ids may repeat across clients, §2: then it is not known).
    created: HashMap<String, Vec<Arc<Answer>>>,
}

/// The reads the model judges, with the deliveries of the run (read again as more arrive; the
/// reads are shared, not taken again).
pub(crate) struct Model {
    reads: Arc<Observed>,
    pub(super) events: Vec<Event>,
    /// Events the first reading takes for copies of earlier ones, under ids of their own on a
    /// whole-second stamp (`Delivery::second_identity`): another event there is as likely as a
    /// retry, so they count where an event excuses a change ([`Model::announced`]), never where
    /// one is a fault (two syncs of one account within a second, `variant whole-second-clock`).
    second_reading: Vec<Event>,
    /// Every event at each address it was posted to (the same event at two addresses is two).
    posted: Vec<Posted>,
    /// The connections whose connection events do not link into one chain from
    /// `connection.created` (§3.1, §6.2; `events.previous-status-chain`'s finding): when they
    /// changed state cannot be told from them.
    unlinked: std::collections::HashSet<String>,
    /// One moment in both clocks, to read an [`Instant`] as the wall time it was.
    wall: (Instant, chrono::DateTime<chrono::Utc>),
}

impl std::ops::Deref for Model {
    type Target = Observed;

    fn deref(&self) -> &Observed {
        &self.reads
    }
}

/// An event as posted to one of the receiver's addresses (for isolation between clients).
pub(crate) struct Posted {
    pub to: delivery::Recipient,
    pub kind: String,
    pub connection: Option<String>,
    /// `data.clientId` (§6.2).
    pub client_id: Option<String>,
}

/// A 2xx `GET /v1/connections/{id}/accounts`.
#[derive(Clone)]
pub(super) struct ListRead {
    pub(super) answer: Arc<Answer>,
    pub(super) connection: String,
    /// Each account's id and the fields of [`ACCOUNT_FIELDS`] it has.
    pub(super) accounts: Vec<(String, Value)>,
    /// Each account's id and the [`fingerprint`] of its whole object, every field it shows.
    pub(super) whole: Vec<(String, u64)>,
}

/// A 2xx `GET /v1/accounts/{id}/transactions`.
#[derive(Clone)]
pub(super) struct PageRead {
    pub(super) answer: Arc<Answer>,
    pub(super) account: String,
    limit: Option<u64>,
    cursor: Option<String>,
    /// Each transaction's id, [`fingerprint`] (a page may hold thousands: no copy is kept) and
    /// `createdAt`, when it is a string.
    pub(super) items: Vec<(String, u64, Option<String>)>,
    has_more: bool,
    next_cursor: Option<String>,
}

/// A delivery the rules read: when it arrived, its type and the ids it names.
pub(super) struct Event {
    pub(super) arrived: Instant,
    /// `data.occurredAt` (§6.2): the server's order of its events, whatever order they arrive in.
    occurred: Option<chrono::DateTime<chrono::Utc>>,
    /// The unit `occurred` is written in ([`crate::harness::rules::delivery::Delivery::occurred_unit`]).
    unit: chrono::Duration,
    /// The view (whose key) of the connection it names, when the run created it: ids may
    /// repeat across clients (§2), so an event speaks for its own client's reads only.
    view: Option<u8>,
    pub(super) kind: String,
    /// `data.previousStatus` of a connection event: the chain (§3.1, §6.2) orders the events of
    /// one connection where their times tie.
    previous: Option<String>,
    pub(super) connection: Option<String>,
    pub(super) account: Option<String>,
    pub(super) transaction: Option<String>,
}

impl Event {
    /// Whether the event concerns reads of `reader`'s view: its connection's client's, or
    /// anyone's when the run did not create its connection.
    pub(super) fn speaks_for(&self, reader: Option<u8>) -> bool {
        self.view.is_none() || self.view == reader
    }

    /// Whether the server dates this event strictly before `other` (both with `occurredAt`).
    pub(super) fn occurred_before(&self, other: &Event) -> bool {
        matches!((self.occurred, other.occurred), (Some(a), Some(b)) if a < b)
    }
}

/// A complete listing of an account: a first page and the pages its cursors lead to, up to one
/// whose `has_more` is false.
pub(super) struct Listing<'a> {
    pub(super) first: &'a PageRead,
    pub(super) last: &'a PageRead,
    pub(super) ids: BTreeSet<&'a str>,
    /// The ids it lists more than once: two items under one id, which names no one object
    /// (§2; `invariants.identity` and `transactions.walk-exactly-once` judge that).
    pub(super) twice: BTreeSet<&'a str>,
    /// Each item's id and [`fingerprint`], in the order listed.
    pub(super) items: Vec<(&'a str, u64)>,
}

/// An id within one client's view ([`view`]).
pub(super) type InView<'a> = (Option<u8>, &'a str);

/// Whose view a read belongs to: only reads with either client's own key count.
pub(super) fn view(answer: &Answer) -> Option<u8> {
    view_of(&answer.sent.auth)
}

/// The view of the reads made with `auth`: one per client's key, none for any other.
pub(super) fn view_of(auth: &Auth) -> Option<u8> {
    match auth {
        Auth::Primary => Some(0),
        Auth::Second => Some(1),
        _ => None,
    }
}

fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A field's value as kept: itself when its JSON is at most [`KEPT_BYTES`], else its size and
/// [`fingerprint`] (a hostile account may carry thousands of positions in every read), which
/// compare as the value would, by value.
fn compact(v: &Value) -> Value {
    let size = v.to_string().len();
    match size <= KEPT_BYTES {
        true => v.clone(),
        false => Value::String(format!("(a value of {size} bytes, fingerprint {:016x})", fingerprint(v))),
    }
}

/// The longest value of a field the model keeps as read ([`compact`]).
const KEPT_BYTES: usize = 2048;

/// A string field short enough to be a timestamp (a hostile page may hold thousands of items
/// with huge strings: only what can be a time is kept; the schema judges the rest).
fn timestamp(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).filter(|s| s.len() <= 64).map(str::to_string)
}

impl Observed {
    /// Keeps what the rules compare of `read` (reads with a client's own key and plain input
    /// only).
    pub(crate) fn add(&mut self, read: &Read) {
        let (answer, body) = (&read.answer, &read.body);
        if view(answer).is_none() {
            return;
        }
        // Only a page size and a cursor, each well-formed: other input may be answered anyhow.
        let plain = answer.query.iter().all(|(k, _)| k == "limit" || k == "starting_after")
            && answer.query.iter().all(|(k, _)| k != "limit" || answer.limit().is_some());
        if !plain {
            return;
        }
        match read.endpoint {
            Endpoint::CreateConnection => {
                if let Some(connection) = string(body, "connectionId") {
                    self.created.entry(connection).or_default().push(answer.clone());
                }
            }
            Endpoint::ConnectionAccounts => {
                let Value::Array(items) = body else { return };
                let fields = |a: &Value| -> Value {
                    let kept = ACCOUNT_FIELDS.iter().chain([&LAST_SYNCED_AT]);
                    Value::Object(kept.filter_map(|f| Some((f.to_string(), compact(a.get(*f)?)))).collect())
                };
                let accounts = items.iter().filter_map(|a| Some((string(a, "id")?, fields(a)))).collect();
                let whole = items.iter().filter_map(|a| Some((string(a, "id")?, fingerprint(a)))).collect();
                self.lists.push(ListRead { answer: answer.clone(), connection: read.id.clone(), accounts, whole });
            }
            Endpoint::Account => {
                let Some(map) = crate::spec::single_account(body) else { return };
                if let Some(balance) = map.get("balance").and_then(Value::as_f64) {
                    self.balances.push((answer.clone(), read.id.clone(), balance));
                }
                if map.get("id").is_none_or(|id| id.as_str() == Some(read.id.as_str())) {
                    let kept = ACCOUNT_FIELDS.iter().filter_map(|f| Some((f.to_string(), compact(map.get(*f)?))));
                    self.singles.push((answer.clone(), read.id.clone(), Value::Object(kept.collect())));
                }
            }
            Endpoint::AccountTransactions => {
                let Some(Value::Array(items)) = body.get("data") else { return };
                let Some(has_more) = body.get("has_more").and_then(Value::as_bool) else { return };
                self.pages.push(PageRead {
                    answer: answer.clone(),
                    account: read.id.clone(),
                    limit: answer.limit(),
                    cursor: answer.query.iter().find(|(k, _)| k == "starting_after").map(|(_, v)| v.clone()),
                    items: items
                        .iter()
                        .filter_map(|t| Some((string(t, "id")?, fingerprint(t), timestamp(t, CREATED_AT))))
                        .collect(),
                    has_more,
                    // The page after follows its `next_cursor`, or its last item where it sent none.
                    next_cursor: string(body, "next_cursor").or_else(|| {
                        crate::harness::transport::reads::after_last(items.last().and_then(|t| t.get("id")?.as_str()))
                    }),
                });
            }
        }
    }
}

impl Observed {
    /// Drops the pages read with a cursor that no other kept page of the same view and account
    /// listed (another account's transaction, as `isolation.foreign-cursor` sends): what
    /// answers such a cursor is not shown (§4.3), and it is no page of that account's list.
    /// Kept, its items would count as listed or not by whether the rest of the run read the
    /// account before or after it (mutant `other-connection-cursor`).
    pub(crate) fn keep_own_cursors(&mut self) {
        let mut listed: std::collections::HashSet<(Option<u8>, String, String)> = Default::default();
        let mut kept = vec![false; self.pages.len()];
        // The pages reached from first pages, one cursor at a time, whatever the reading order.
        let mut grew = true;
        while grew {
            grew = false;
            for (page, kept) in self.pages.iter().zip(kept.iter_mut()).filter(|(_, k)| !**k) {
                let (v, account) = (view(&page.answer), &page.account);
                if page.cursor.as_ref().is_none_or(|c| listed.contains(&(v, account.clone(), c.clone()))) {
                    (*kept, grew) = (true, true);
                    listed.extend(page.items.iter().map(|(id, _, _)| (v, account.clone(), id.clone())));
                }
            }
        }
        let mut kept = kept.into_iter();
        self.pages.retain(|_| kept.next().unwrap_or(false));
    }
}

impl Model {
    /// The model of the run's reads (`Observed`) and `deliveries` (each with its arrival, in
    /// arrival order).
    pub(crate) fn of(
        reads: &Arc<Observed>,
        deliveries: &[(Instant, crate::harness::rules::delivery::Delivery)],
    ) -> Self {
        let mut model = Model {
            reads: reads.clone(),
            events: Vec::new(),
            second_reading: Vec::new(),
            posted: Vec::new(),
            unlinked: Default::default(),
            wall: (Instant::now(), chrono::Utc::now()),
        };
        let mut by_connection: HashMap<&str, Vec<crate::harness::rules::delivery::Delivery>> = HashMap::new();
        for (_, d) in deliveries {
            if let Some(connection) = d.connection_id() {
                by_connection.entry(connection).or_default().push(d.clone());
            }
        }
        model.unlinked = by_connection
            .into_iter()
            .filter(|(_, ds)| crate::harness::rules::chain::ends(ds).is_err())
            .map(|(connection, _)| connection.to_string())
            .collect();
        // Events are a set: each one counts from its first arrival, so a late copy of an earlier
        // event never stands in for an announcement that did not come.
        let mut seen = std::collections::HashSet::new();
        let mut seen_second = std::collections::HashSet::new();
        let mut posted = std::collections::HashSet::new();
        for (arrived, d) in deliveries {
            let Some(kind) = d.event_type() else { continue };
            let data = d.body.get("data").unwrap_or(&d.body);
            if posted.insert((d.identity(), d.to)) {
                model.posted.push(Posted {
                    to: d.to,
                    kind: kind.to_string(),
                    connection: d.connection_id().map(str::to_string),
                    client_id: string(data, "clientId"),
                });
            }
            let (first, second) = (seen.insert(d.identity()), seen_second.insert(d.second_identity()));
            if !first && !second {
                continue;
            }
            let owner = d.connection_id().and_then(|c| model.creation(c)).and_then(|a| view(a));
            let events = if first { &mut model.events } else { &mut model.second_reading };
            events.push(Event {
                arrived: *arrived,
                view: owner,
                occurred: d.occurred_at(),
                unit: d.occurred_unit(),
                kind: kind.to_string(),
                previous: string(data, "previousStatus"),
                connection: d.connection_id().map(str::to_string),
                account: string(data, "accountId"),
                transaction: string(data, "transactionId"),
            });
        }
        model
    }

    /// Every event under either reading of a whole-second stamp ([`Model::second_reading`]).
    pub(super) fn every_reading(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().chain(&self.second_reading)
    }

    /// Whether the connection events of `connection` do not link into one chain (see
    /// [`Model::unlinked`]).
    pub(super) fn unlinked(&self, connection: &str) -> bool {
        self.unlinked.contains(connection)
    }

    /// The server's clock's offset at most ([`clock::offset_at_most`]): each of the run's
    /// creations against its `connection.created`, capped at [`clock::MAX_SKEW`]; `None` while
    /// no creation was announced.
    pub(super) fn clock_offset(&self) -> Option<chrono::Duration> {
        let created = spec::ConnectionState::Created.event_type();
        let mut intervals = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for e in self.events.iter().filter(|e| e.kind == created) {
            let (Some(occurred), Some(connection)) = (e.occurred, e.connection.as_deref()) else { continue };
            let Some(creation) = self.creation(connection).filter(|_| seen.insert(connection)) else { continue };
            intervals.push(clock::offset_interval(
                occurred,
                e.unit,
                self.on_wall(creation.sent_at),
                self.on_wall(e.arrived),
            ));
        }
        clock::offset_at_most(&intervals).map(|bound| bound.min(clock::MAX_SKEW))
    }

    /// Whether the server dates `e` after `at` in the harness's clock, whatever its clock's
    /// offset within [`Model::clock_offset`] (`offset`) and its stamp's unit.
    pub(super) fn happened_after(&self, e: &Event, offset: Option<chrono::Duration>, at: Instant) -> bool {
        matches!((e.occurred, offset), (Some(s), Some(o)) if s - o - e.unit > self.on_wall(at))
    }

    /// The earliest moment, in this machine's clock, at which the server can have stamped `e`,
    /// its clock at most `offset` ahead ([`Model::clock_offset`]): its `occurredAt` less the
    /// offset and one unit of the stamp (a stamp cut reads up to a unit early). `None` without
    /// a readable `occurredAt`.
    pub(super) fn occurred_from(&self, e: &Event, offset: chrono::Duration) -> Option<chrono::DateTime<chrono::Utc>> {
        Some(e.occurred? - offset - e.unit)
    }

    /// The wall time an [`Instant`] of this run was.
    pub(super) fn on_wall(&self, at: Instant) -> chrono::DateTime<chrono::Utc> {
        let (now, wall) = self.wall;
        wall - chrono::Duration::from_std(now.saturating_duration_since(at)).unwrap_or_default()
    }

    /// Whether `at`, shown by `read`, is later than the server's clock could have read when it
    /// answered ([`Model::clock_offset`]): a stamp from the future, `invariants.clock`'s to judge.
    pub(super) fn stamped_ahead(
        &self,
        offset: Option<chrono::Duration>,
        at: chrono::DateTime<chrono::Utc>,
        read: &Answer,
    ) -> bool {
        offset.is_some_and(|offset| at > self.on_wall(read.answered_at) + offset)
    }

    /// Every event at each address it was posted to, once per address.
    pub(crate) fn posted(&self) -> &[Posted] {
        &self.posted
    }

    /// The answer that created `connection` (§4.1), whose key says whose connection it is;
    /// `None` when no key or both created a connection of that id.
    pub(crate) fn creation(&self, connection: &str) -> Option<&Arc<Answer>> {
        let answers = self.created.get(connection)?;
        let first = answers.first()?;
        answers.iter().all(|a| a.sent.auth == first.sent.auth).then_some(first)
    }

    /// Whether an event that announces a change of `account` (of `connection`) arrived after
    /// the read `since` was sent, under either reading of a whole-second stamp: its `accounts.updated`, or any event of its connection (a new
    /// connection or reconnection brings fresh data) that is not [`Model::old_news`] to it.
    pub(super) fn announced(&self, account: &str, connection: Option<&str>, since: &Answer) -> bool {
        self.announced_by(account, connection, since, None)
    }

    /// [`Model::announced`], counting only announcements the server dates no later than a
    /// second after `by` (when both carry `occurredAt`): a change announced after a deletion
    /// cannot have brought what it removed.
    pub(super) fn announced_by(
        &self,
        account: &str,
        connection: Option<&str>,
        since: &Answer,
        by: Option<&Event>,
    ) -> bool {
        let in_time = |e: &Event| match (e.occurred, by.and_then(|b| b.occurred)) {
            (Some(a), Some(b)) => a <= b + chrono::Duration::seconds(1),
            _ => true,
        };
        self.events.iter().chain(&self.second_reading).any(|e| {
            e.arrived >= since.sent_at
                && in_time(e)
                && ((e.kind == spec::ACCOUNTS_UPDATED && e.account.as_deref() == Some(account))
                    || (e.kind.starts_with("connection.")
                        && connection.is_some()
                        && e.connection.as_deref() == connection
                        && !self.old_news(e, since)))
        })
    }

    /// Whether connection event `e` happened before what `read` shows, however late it
    /// arrived: its connection's list was served (2xx, which only a CONNECTED connection's is,
    /// §3.2, §4.2) by `read` itself or before `read` was sent, and the chain puts `e` no later
    /// than the connection's first `connection.connected` (by `occurredAt`, ties by the
    /// chain). The connecting of a connection is then no reason for a change after the read:
    /// a verdict that rested on whether `connection.connected` arrived before a read would
    /// depend on its lateness (a run no longer waits for it before reading).
    pub(super) fn old_news(&self, e: &Event, read: &Answer) -> bool {
        let Some(connection) = e.connection.as_deref() else { return false };
        let connected = spec::ConnectionState::Connected.event_type();
        let first = self
            .events
            .iter()
            .filter(|f| f.kind == connected && f.connection.as_deref() == Some(connection) && f.occurred.is_some())
            .min_by_key(|f| f.occurred);
        let Some(first) = first else { return false };
        let up_to_first = std::ptr::eq(e, first)
            || e.occurred_before(first)
            || (e.occurred.is_some() && e.occurred == first.occurred && self.leads_to(e, first));
        let served = self.lists.iter().any(|l| {
            l.connection == connection
                && view(&l.answer) == view(read)
                && (l.answer.seq == read.seq || l.answer.answered_at <= read.sent_at)
        });
        e.kind.starts_with("connection.") && up_to_first && served
    }

    /// The connection a view's reads list `account` under, if any.
    /// Whether `event` may have happened after a read sent at `read`: it arrived after, and the
    /// server dates it no earlier than every event that arrived before the read (a late copy
    /// of an event the server emitted before the read is not news after it).
    pub(super) fn may_follow(&self, event: &Event, read: Instant) -> bool {
        event.arrived >= read
            && !self.events.iter().any(|f| f.arrived < read && (event.occurred_before(f) || self.leads_to(event, f)))
    }

    /// Whether the chain puts connection event `e` before `f` of the same connection where their
    /// `occurredAt` ties (two steps within a millisecond on a fast server): a path of
    /// `previousStatus` links leads from `e` to `f`, each step at that same time. `created`
    /// starts every chain (§3.1).
    fn leads_to(&self, e: &Event, f: &Event) -> bool {
        let same =
            |g: &Event| g.connection.is_some() && g.connection == e.connection && g.kind.starts_with("connection.");
        if !same(e)
            || !same(f)
            || std::ptr::eq(e, f)
            || !matches!((e.occurred, f.occurred), (Some(a), Some(b)) if a == b)
        {
            return false;
        }
        if e.kind == spec::ConnectionState::Created.event_type() {
            return true;
        }
        let no_later = |a: &Event, b: &Event| matches!((a.occurred, b.occurred), (Some(x), Some(y)) if x <= y);
        let mut frontier = vec![e];
        let mut seen = std::collections::HashSet::new();
        while let Some(g) = frontier.pop() {
            let Some(state) = g.kind.strip_prefix("connection.") else { continue };
            let next = |h: &&Event| same(h) && h.previous.as_deref() == Some(state) && no_later(g, h) && no_later(h, f);
            for h in self.events.iter().filter(next) {
                if std::ptr::eq(h, f) {
                    return true;
                }
                if seen.insert(h as *const Event) {
                    frontier.push(h);
                }
            }
        }
        false
    }

    pub(super) fn connection_of(&self, view_of: Option<u8>, account: &str) -> Option<&str> {
        self.lists
            .iter()
            .filter(|l| view(&l.answer) == view_of)
            .find(|l| l.accounts.iter().any(|(id, _)| id == account))
            .map(|l| l.connection.as_str())
    }

    /// The complete listings the pages form, each from a first page (no cursor) along its
    /// cursors: the next page is the first read after it with the same view, account, limit
    /// and that cursor.
    pub(super) fn listings(&self) -> Vec<Listing<'_>> {
        // The pages read from each cursor, by view, account and limit.
        type Key<'a> = (Option<u8>, &'a str, Option<u64>, &'a str);
        let mut next: HashMap<Key, Vec<&PageRead>> = HashMap::new();
        for page in &self.pages {
            if let Some(cursor) = &page.cursor {
                next.entry((view(&page.answer), &page.account, page.limit, cursor)).or_default().push(page);
            }
        }
        let mut listings = Vec::new();
        'first: for first in self.pages.iter().filter(|p| p.cursor.is_none()) {
            let (mut last, mut ids, mut twice, mut items) = (first, BTreeSet::new(), BTreeSet::new(), Vec::new());
            // Bounded by the pages read: each step moves to a later read.
            for _ in 0..=self.pages.len() {
                for (id, print, _) in &last.items {
                    if !ids.insert(id.as_str()) {
                        twice.insert(id.as_str());
                    }
                    items.push((id.as_str(), *print));
                }
                if !last.has_more {
                    listings.push(Listing { first, last, ids, twice, items });
                    continue 'first;
                }
                let Some(cursor) = &last.next_cursor else { continue 'first };
                let key = (view(&first.answer), first.account.as_str(), first.limit, cursor.as_str());
                let after = next.get(&key).and_then(|ps| ps.iter().find(|p| p.answer.seq > last.answer.seq));
                let Some(page) = after else { continue 'first };
                // An empty last page for a cursor whose transaction a `transaction.deleted` named
                // is open (the ruling "A cursor whose own item was deleted"): it names nothing
                // after an item that is not there, and ends no listing.
                let removed = |e: &Event| e.transaction.as_deref() == Some(cursor.as_str());
                if page.items.is_empty() && !page.has_more && self.events.iter().any(removed) {
                    continue 'first;
                }
                last = page;
            }
        }
        listings
    }
}

/// A model rule's finding on `answer`, naming whose read it was.
pub(super) fn finding(mut problem: Problem, answer: &Arc<Answer>, awaits_event: bool) -> Finding {
    problem.detail += answer.whose();
    Finding { problem, answer: answer.clone(), awaits_event }
}
