//! What the target's answers imply over time: a model of its observable state, built from every
//! 2xx read of the run (either client, any case or fixture) and every delivery, and judged
//! after the last flow. Each read must agree with what the target said before: an object has
//! one owner (§2.2, §2.3), a removed transaction stays removed (§6), nothing goes missing
//! without the event that removes it (§4.2, §6), and nothing changes without an event that
//! announces it (§1 step 5). Each client's reads form a view of their own; reads with a
//! malformed or missing key, and with query parameters other than a page size and a cursor, are
//! left out (bad input may be answered in any way, §7).
//!
//! The cases' flow re-reads what the fixtures and the tour read earlier (`reread`), so that
//! every rule has a later read to judge, whatever else the run selected.

use super::Finding;
use crate::harness::delivery;
use crate::harness::fixtures::RunContext;
use crate::harness::http::{Answer, Auth};
use crate::harness::outcome::Stop;
use crate::harness::pagination;
use crate::spec::{self, Action};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

crate::cases! {
    ONE_OWNER = "state.one-owner" => reread, models [one_owner];
    FIXED_FIELDS = "state.fixed-fields" => reread, models [fixed_fields];
    SYNC_MOVES_FORWARD = "state.sync-moves-forward" => reread, models [sync_moves_forward];
    DELETIONS_HOLD = "state.deletions-hold" => reread, models [deletions_hold];
    NOTHING_VANISHES = "state.nothing-vanishes" => reread, models [nothing_vanishes];
    CHANGES_ANNOUNCED = "state.changes-announced" => reread, models [changes_announced];
}

/// The account fields a read of §4.2 shows that change only with an announcement (§1 step 5).
/// `lastSyncedAt` is left out: a sync that found nothing new changes it and nothing else.
const ACCOUNT_FIELDS: [&str; 8] =
    ["connectionId", "name", "type", "currency", "balance", "availableBalance", "accountNumber", "createdAt"];

/// What each field's meaning allows over time (the rulings of `cases/README.md`): ids and owners
/// never change (the owners are `state.one-owner`'s), `createdAt` (when the object was created,
/// §2.2, §2.3) is fixed for the object's life even across an announced update, and `lastSyncedAt`
/// (when the account was last synced, §2.2) never goes back. Every other field may change with
/// an announcement (`state.changes-announced`).
const CREATED_AT: &str = "createdAt";
const LAST_SYNCED_AT: &str = "lastSyncedAt";

/// The reads the model judges, with the deliveries of the run.
pub struct Model {
    lists: Vec<ListRead>,
    pages: Vec<PageRead>,
    /// `GET /v1/accounts/{id}` answers with a numeric `balance` (§4.4; its shape is not shown).
    balances: Vec<(Arc<Answer>, String, f64)>,
    events: Vec<Event>,
    /// Each connection created with a client's key (§4.1), with the creation's answers: whose
    /// connection it is (ids may repeat across clients, §2: then it is not known).
    created: HashMap<String, Vec<Arc<Answer>>>,
    /// Every event at each address it was posted to (the same event at two addresses is two).
    posted: Vec<Posted>,
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
struct ListRead {
    answer: Arc<Answer>,
    connection: String,
    /// Each account's id and the fields of [`ACCOUNT_FIELDS`] it has.
    accounts: Vec<(String, Value)>,
}

/// A 2xx `GET /v1/accounts/{id}/transactions`.
struct PageRead {
    answer: Arc<Answer>,
    account: String,
    limit: Option<u64>,
    cursor: Option<String>,
    /// Each transaction's id, [`fingerprint`] (a page may hold thousands: no copy is kept) and
    /// `createdAt`, when it is a string.
    items: Vec<(String, u64, Option<String>)>,
    has_more: bool,
    next_cursor: Option<String>,
}

/// A delivery the rules read: when it arrived, its type and the ids it names.
struct Event {
    arrived: Instant,
    /// `data.occurredAt` (§6.2): the server's order of its events, whatever order they arrive in.
    occurred: Option<chrono::DateTime<chrono::FixedOffset>>,
    /// The view (whose key) of the connection it names, when the run created it: ids may
    /// repeat across clients (§2), so an event speaks for its own client's reads only.
    view: Option<u8>,
    kind: String,
    connection: Option<String>,
    account: Option<String>,
    transaction: Option<String>,
}

impl Event {
    /// Whether the event concerns reads of `reader`'s view: its connection's client's, or
    /// anyone's when the run did not create its connection.
    fn speaks_for(&self, reader: Option<u8>) -> bool {
        self.view.is_none() || self.view == reader
    }

    /// Whether the server dates this event strictly before `other` (both with `occurredAt`).
    fn occurred_before(&self, other: &Event) -> bool {
        matches!((self.occurred, other.occurred), (Some(a), Some(b)) if a < b)
    }
}

/// A complete listing of an account: a first page and the pages its cursors lead to, up to one
/// whose `has_more` is false.
struct Listing<'a> {
    first: &'a PageRead,
    last: &'a PageRead,
    ids: BTreeSet<&'a str>,
}

/// An id within one client's view ([`view`]).
type InView<'a> = (Option<u8>, &'a str);
/// Where an id was first seen: its owner, and the read that showed it.
type FirstSeen<'a> = HashMap<InView<'a>, (&'a str, &'a Arc<Answer>)>;

/// Whose view a read belongs to: only reads with either client's own key count.
fn view(answer: &Answer) -> Option<u8> {
    match answer.sent.auth {
        Auth::Primary => Some(0),
        Auth::Second => Some(1),
        _ => None,
    }
}

fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A string field short enough to be a timestamp (a hostile page may hold thousands of items
/// with huge strings: only what can be a time is kept; the schema judges the rest).
fn timestamp(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).filter(|s| s.len() <= 64).map(str::to_string)
}

impl Model {
    /// The model of `answers` and `deliveries` (each with its arrival, in arrival order).
    pub fn of(answers: &[Arc<Answer>], deliveries: &[(Instant, crate::harness::delivery::Delivery)]) -> Self {
        let mut model = Model {
            lists: Vec::new(),
            pages: Vec::new(),
            balances: Vec::new(),
            events: Vec::new(),
            created: HashMap::new(),
            posted: Vec::new(),
        };
        for answer in answers {
            let (Some(text), Some(_)) = (answer.body.as_deref(), view(answer)) else { continue };
            // Only a page size and a cursor, each well-formed: other input may be answered anyhow.
            let plain = answer.query.iter().all(|(k, _)| k == "limit" || k == "starting_after")
                && answer.query.iter().all(|(k, _)| k != "limit" || answer.limit().is_some());
            if !plain || crate::harness::budget::too_dense(text.as_bytes()).is_some() {
                continue;
            }
            let Ok(body) = serde_json::from_str::<Value>(text) else { continue };
            let path: Vec<&str> = answer.segments.iter().map(String::as_str).collect();
            match (answer.sent.method.as_str(), path.as_slice()) {
                ("POST", ["v1", "connections"]) => {
                    if let Some(connection) = string(&body, "connectionId") {
                        model.created.entry(connection).or_default().push(answer.clone());
                    }
                }
                ("GET", ["v1", "connections", connection, "accounts"]) => {
                    let Value::Array(items) = body else { continue };
                    let fields = |a: &Value| -> Value {
                        let kept = ACCOUNT_FIELDS.iter().chain([&LAST_SYNCED_AT]);
                        Value::Object(kept.filter_map(|f| Some((f.to_string(), a.get(*f)?.clone()))).collect())
                    };
                    let accounts = items.iter().filter_map(|a| Some((string(a, "id")?, fields(a)))).collect();
                    model.lists.push(ListRead { answer: answer.clone(), connection: connection.to_string(), accounts });
                }
                ("GET", ["v1", "accounts", account]) => {
                    if let Some(balance) = body.get("balance").and_then(Value::as_f64) {
                        model.balances.push((answer.clone(), account.to_string(), balance));
                    }
                }
                ("GET", ["v1", "accounts", account, "transactions"]) => {
                    let Some(Value::Array(items)) = body.get("data") else { continue };
                    let Some(has_more) = body.get("has_more").and_then(Value::as_bool) else { continue };
                    model.pages.push(PageRead {
                        answer: answer.clone(),
                        account: account.to_string(),
                        limit: answer.limit(),
                        cursor: answer.query.iter().find(|(k, _)| k == "starting_after").map(|(_, v)| v.clone()),
                        items: items
                            .iter()
                            .filter_map(|t| Some((string(t, "id")?, fingerprint(t), timestamp(t, CREATED_AT))))
                            .collect(),
                        has_more,
                        next_cursor: string(&body, "next_cursor"),
                    });
                }
                _ => {}
            }
        }
        // Events are a set: each one counts from its first arrival, so a late copy of an earlier
        // event never stands in for an announcement that did not come.
        let mut seen = std::collections::HashSet::new();
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
            if !seen.insert(d.identity()) {
                continue;
            }
            let owner = d.connection_id().and_then(|c| model.creation(c)).and_then(|a| view(a));
            model.events.push(Event {
                arrived: *arrived,
                view: owner,
                occurred: data
                    .get("occurredAt")
                    .and_then(Value::as_str)
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()),
                kind: kind.to_string(),
                connection: d.connection_id().map(str::to_string),
                account: string(data, "accountId"),
                transaction: string(data, "transactionId"),
            });
        }
        model
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
    /// `since`: its `accounts.updated`, or any event of its connection (a new connection or
    /// reconnection brings fresh data).
    fn announced(&self, account: &str, connection: Option<&str>, since: Instant) -> bool {
        self.events.iter().any(|e| {
            e.arrived >= since
                && ((e.kind == spec::ACCOUNTS_UPDATED && e.account.as_deref() == Some(account))
                    || (e.kind.starts_with("connection.")
                        && connection.is_some()
                        && e.connection.as_deref() == connection))
        })
    }

    /// The connection a view's reads list `account` under, if any.
    fn connection_of(&self, view_of: Option<u8>, account: &str) -> Option<&str> {
        self.lists
            .iter()
            .filter(|l| view(&l.answer) == view_of)
            .find(|l| l.accounts.iter().any(|(id, _)| id == account))
            .map(|l| l.connection.as_str())
    }

    /// The complete listings the pages form, each from a first page (no cursor) along its
    /// cursors: the next page is the first read after it with the same view, account, limit
    /// and that cursor.
    fn listings(&self) -> Vec<Listing<'_>> {
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
            let (mut last, mut ids) = (first, BTreeSet::new());
            // Bounded by the pages read: each step moves to a later read.
            for _ in 0..=self.pages.len() {
                ids.extend(last.items.iter().map(|(id, _, _)| id.as_str()));
                if !last.has_more {
                    listings.push(Listing { first, last, ids });
                    continue 'first;
                }
                let Some(cursor) = &last.next_cursor else { continue 'first };
                let key = (view(&first.answer), first.account.as_str(), first.limit, cursor.as_str());
                let after = next.get(&key).and_then(|ps| ps.iter().find(|p| p.answer.seq > last.answer.seq));
                let Some(page) = after else { continue 'first };
                last = page;
            }
        }
        listings
    }
}

/// The flow of the state cases, run once for all four: the fixtures' and the tour's reads, then
/// the same reads again, so that each rule has an earlier and a later read (within a few
/// requests: each listed account's first walk at the default page size).
async fn reread(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let once = ctx.api.throttle().shared("state-reread", tokio::sync::OnceCell::<Result<(), Stop>>::new);
    match once {
        Some(cell) => cell.get_or_init(|| reread_once(&ctx)).await.clone(),
        None => reread_once(&ctx).await,
    }
}

async fn reread_once(ctx: &RunContext) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut connections = vec![(fixture.connection_id.clone(), Auth::Primary)];
    if let Some(second) = ctx.connected_second().await? {
        connections.push((second.connection_id.clone(), Auth::Second));
    }
    // The tour's connection that stays connected holds the run's deletion (§6).
    if let Ok(tour) = ctx.tour().await {
        let kept = tour.legs.iter().filter(|l| {
            l.client == Auth::Primary
                && l.path.contains(&spec::Action::DeleteTransaction)
                && !l.path.contains(&spec::Action::Disconnect)
        });
        connections
            .extend(kept.filter_map(|l| l.created.as_ref().ok()).map(|c| (c.connection_id.clone(), Auth::Primary)));
    }
    neighbours(ctx).await?;
    for (connection, auth) in connections {
        let api = ctx.api.reading_as(auth.clone());
        let path = ["v1", "connections", connection.as_str(), "accounts"];
        let listed = api.send(reqwest::Method::GET, &path, &[], auth.clone()).await?;
        // Read again at once: by now every event the run caused has arrived, so no late
        // delivery can stand for a change between these two (`state.changes-announced`).
        api.send(reqwest::Method::GET, &path, &[], auth).await?;
        let Ok(Value::Array(accounts)) = listed.success_json() else { continue };
        for id in accounts.iter().filter_map(|a| a.get("id").and_then(Value::as_str)) {
            pagination::walk_again(&api, id).await?;
        }
    }
    Ok(())
}

/// Where an update could hide an unannounced change, change one object and re-read its
/// neighbours: on a connection of its own, a transaction is deleted from account A, account B
/// of the same connection is updated, and A is read whole. A removed transaction listed again
/// is legal only after an `accounts.updated` of its own account (`cases/README.md`); the model
/// judges the reads (`state.deletions-hold`, and every other rule). A connection with fewer than
/// two accounts cannot show it: a note says so.
async fn neighbours(ctx: &RunContext) -> Result<(), Stop> {
    if ctx.driver.is_none() || ctx.receiver.is_none() {
        return Ok(());
    }
    let receiver = ctx.receiver()?;
    let created = ctx.connect_new().await?;
    let id = created.connection_id.clone();
    let accounts: Vec<String> = ctx
        .accounts_when_ready(&id)
        .await?
        .iter()
        .filter_map(|a| a.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut removed = None;
    for account in &accounts {
        if let Some(first) = pagination::walk(&ctx.api, account, None, None).await?.ids().first() {
            removed = Some((account.clone(), first.clone()));
            break;
        }
    }
    let Some((a, txn)) = removed else {
        ctx.note("not judged", format!("the neighbour scenario: no account of {id} lists a transaction"));
        return Ok(());
    };
    let Some(b) = accounts.iter().find(|b| **b != a).cloned() else {
        ctx.note("not judged", format!("the neighbour scenario needs a connection with two accounts; {id} has one"));
        return Ok(());
    };
    // Each step's event is awaited before the next, so the reads fall after both.
    for (action, account, transaction, kind) in [
        (Action::DeleteTransaction, &a, Some(txn.as_str()), spec::TRANSACTION_DELETED),
        (Action::UpdateAccounts, &b, None, spec::ACCOUNTS_UPDATED),
    ] {
        let known = delivery::identities(&receiver.for_connection(&id));
        let names = |d: &delivery::Delivery| d.data_str("accountId") == Some(account.as_str());
        pagination::forget(&ctx.api, account);
        ctx.drive(action, &created, Some(account), transaction).await?;
        let what = format!("{kind} for {account}");
        receiver
            .wait_until(&what, &id, ctx.config.event_wait(), |ds| {
                delivery::step_event(ds, &known, kind, names).is_some_and(names)
            })
            .await;
    }
    pagination::forget(&ctx.api, &a);
    pagination::walk(&ctx.api, &a, None, None).await?;
    Ok(())
}

fn finding(problem: String, answer: &Arc<Answer>, awaits_event: bool) -> Finding {
    Finding { problem: format!("{problem}{}", answer.whose()), answer: answer.clone(), awaits_event }
}

/// §2.2, §2.3: an account belongs to one connection and a transaction to one account, in every
/// read of a client's view.
fn one_owner(model: &Model) -> (usize, Vec<Finding>) {
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
            findings.push(finding(
                format!(
                    "{}: lists {what} {id}, which {} listed under {owner} {first_owner}",
                    answer.sent.request, first.sent.request
                ),
                answer,
                false,
            ));
        }
    }
    findings
}

/// §6 `transaction.deleted` (a transaction was removed): no read sent after the event arrived
/// lists it. A later `accounts.updated` of its account may bring it back (open; not judged).
fn deletions_hold(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    let mut removed: HashMap<&str, &Event> = HashMap::new();
    for e in model.events.iter().filter(|e| e.kind == spec::TRANSACTION_DELETED) {
        if let Some(t) = &e.transaction {
            let first = removed.entry(t).or_insert(e);
            if e.arrived < first.arrived {
                *first = e;
            }
        }
    }
    for page in &model.pages {
        for (id, _, _) in &page.items {
            let Some(event) = removed.get(id.as_str()) else { continue };
            if page.answer.sent_at <= event.arrived || !event.speaks_for(view(&page.answer)) {
                continue;
            }
            judged += 1;
            // An update that the server dates before the removal is no resync, however late it
            // arrived (delivery order is open, §6.3; occurredAt is the server's own order).
            let resynced = model.events.iter().any(|e| {
                e.kind == spec::ACCOUNTS_UPDATED
                    && e.account.as_deref() == Some(page.account.as_str())
                    && e.arrived > event.arrived
                    && e.arrived < page.answer.sent_at
                    && !e.occurred_before(event)
            });
            if !resynced {
                findings.push(finding(
                    format!(
                        "{}: lists {id}, which a {} delivery announced removed before this request was sent",
                        page.answer.sent.request,
                        spec::TRANSACTION_DELETED
                    ),
                    &page.answer,
                    false,
                ));
            }
        }
    }
    (judged.max(removed.len()), findings)
}

/// §4.2 (all accounts linked to the connection) and §6 (a removed transaction is announced): an
/// account listed for a connection stays listed in its later lists while no event of the
/// connection came between, and a transaction a page listed is in every later complete listing
/// of its account unless a `transaction.deleted` names it.
fn nothing_vanishes(model: &Model) -> (usize, Vec<Finding>) {
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
                && e.arrived >= earlier.answer.sent_at
        });
        if reconnected {
            continue;
        }
        for (id, _) in &earlier.accounts {
            if !later.accounts.iter().any(|(a, _)| a == id) {
                findings.push(finding(
                    format!(
                        "{}: no longer lists account {id}, which {} listed (§4.2: all accounts linked to the connection)",
                        later.answer.sent.request, earlier.answer.sent.request
                    ),
                    &later.answer,
                    false,
                ));
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
            findings.push(finding(
                format!(
                    "{} and following next_cursor to the end: {id} is not listed, though {} listed it and no {} names it ({} such)",
                    listing.first.answer.sent.request,
                    seen.sent.request,
                    spec::TRANSACTION_DELETED,
                    missing.len()
                ),
                &listing.last.answer,
                true,
            ));
        }
    }
    (judged, findings)
}

/// §1 step 5 (later account or transaction changes are announced by webhook events): between
/// two reads of the same view, an account's fields, a transaction's fields and the set of
/// transactions of a complete listing change only when an event of the account (or of its
/// connection) arrived after the earlier read was sent (at any time: deliveries may be late).
fn changes_announced(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    // Accounts: from the lists, and the balance of §4.4.
    type Seen<'a> = (Instant, &'a Arc<Answer>, Value);
    let mut accounts: HashMap<(Option<u8>, String), Vec<Seen>> = HashMap::new();
    for list in &model.lists {
        for (id, fields) in &list.accounts {
            accounts.entry((view(&list.answer), id.clone())).or_default().push((
                list.answer.sent_at,
                &list.answer,
                fields.clone(),
            ));
        }
    }
    for (answer, id, balance) in &model.balances {
        accounts.entry((view(answer), id.clone())).or_default().push((
            answer.sent_at,
            answer,
            serde_json::json!({ "balance": balance }),
        ));
    }
    for ((v, id), mut seen) in accounts {
        seen.sort_by_key(|(at, a, _)| (*at, a.seq));
        let connection = model.connection_of(v, &id);
        let mut last: HashMap<String, (&Arc<Answer>, Value)> = HashMap::new();
        for (_, answer, fields) in &seen {
            for (field, value) in fields.as_object().into_iter().flatten().filter(|(f, _)| *f != LAST_SYNCED_AT) {
                if let Some((before, old)) = last.get(field) {
                    judged += 1;
                    if !same(old, value) && !model.announced(&id, connection, before.sent_at) {
                        findings.push(finding(
                            format!(
                                "{}: account {id} has {field} {value}, {} showed {old}, and no event of the account arrived in between",
                                answer.sent.request, before.sent.request
                            ),
                            answer,
                            true,
                        ));
                    }
                }
                last.insert(field.clone(), (answer, value.clone()));
            }
        }
    }
    // Transactions: each one's fields, as its pages show them.
    let mut last: HashMap<InView, (&Arc<Answer>, u64)> = HashMap::new();
    for page in &model.pages {
        let connection = model.connection_of(view(&page.answer), &page.account);
        for (id, item, _) in &page.items {
            let key = (view(&page.answer), id.as_str());
            if let Some((before, old)) = last.get(&key) {
                judged += 1;
                if *old != *item
                    && before.answered_at <= page.answer.sent_at
                    && !model.announced(&page.account, connection, before.sent_at)
                {
                    findings.push(finding(
                        format!(
                            "{}: transaction {id} reads differently than {} showed it, and no event of account {} arrived in between",
                            page.answer.sent.request, before.sent.request, page.account
                        ),
                        &page.answer,
                        true,
                    ));
                }
            }
            last.insert(key, (&page.answer, *item));
        }
    }
    // New transactions: in a complete listing, absent from the one before it.
    let listings = model.listings();
    for (i, later) in listings.iter().enumerate() {
        let account = later.first.account.as_str();
        let earlier = listings[..i].iter().rev().find(|l| {
            l.first.account == account
                && view(&l.first.answer) == view(&later.first.answer)
                && l.last.answer.answered_at <= later.first.answer.sent_at
        });
        let Some(earlier) = earlier else { continue };
        judged += 1;
        let connection = model.connection_of(view(&later.first.answer), account);
        if model.announced(account, connection, earlier.first.answer.sent_at) {
            continue;
        }
        if let Some(new) = later.ids.difference(&earlier.ids).next() {
            findings.push(finding(
                format!(
                    "{} and following next_cursor: {new} is listed, {} did not list it, and no event of the account arrived in between",
                    later.first.answer.sent.request, earlier.first.answer.sent.request
                ),
                &later.last.answer,
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
fn fixed_fields(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    for ((_, id), reads) in reads_of_accounts(model) {
        let mut before: Option<(&Arc<Answer>, &Value)> = None;
        for (answer, fields) in reads {
            let Some(value) = fields.get(CREATED_AT) else { continue };
            let Some((earlier, old)) = before.replace((answer, value)) else { continue };
            judged += 1;
            if !same_moment(old, value) {
                findings.push(finding(
                    format!(
                        "{}: account {id} has {CREATED_AT} {value}, but {} showed {old}: when an account was created \
                         does not change (§2.2)",
                        answer.sent.request, earlier.sent.request
                    ),
                    answer,
                    false,
                ));
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
                findings.push(finding(
                    format!(
                        "{}: transaction {id} has {CREATED_AT} {at:?}, but {} showed {old:?}: when a transaction was \
                         created does not change (§2.3)",
                        page.answer.sent.request, earlier.sent.request
                    ),
                    &page.answer,
                    false,
                ));
            }
        }
    }
    (judged, findings)
}

/// Two readings of a timestamp name the same moment (`…00Z` and `…00.000Z` do); values that
/// are not timestamps compare as read.
fn same_moment(a: &Value, b: &Value) -> bool {
    let time = |v: &Value| v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
    match (time(a), time(b)) {
        (Some(x), Some(y)) => x == y,
        _ => same(a, b),
    }
}

/// §2.2 `lastSyncedAt` says when the account was last synced: a later read never shows an
/// earlier time than a read answered before it was sent (a sync may come or not; time does not
/// run back). Values that are not timestamps are the schema's to judge.
fn sync_moves_forward(model: &Model) -> (usize, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut judged = 0;
    let time = |v: &Value| v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
    for ((_, id), reads) in reads_of_accounts(model) {
        // The latest time a read showed, with the read (answered before the later ones were sent).
        let mut latest: Option<(&Arc<Answer>, chrono::DateTime<chrono::FixedOffset>, &Value)> = None;
        for (i, (answer, fields)) in reads.iter().enumerate() {
            // Every later read is judged: an account without the optional field keeps the rule.
            judged += usize::from(i > 0);
            let Some((at, value)) = fields.get(LAST_SYNCED_AT).and_then(|v| Some((time(v)?, v))) else { continue };
            match latest {
                Some((earlier, before, old)) if at < before && earlier.answered_at <= answer.sent_at => {
                    findings.push(finding(
                        format!(
                            "{}: account {id} has {LAST_SYNCED_AT} {value}, earlier than {old}, which {} showed \
                             before: the last sync cannot move back in time (§2.2)",
                            answer.sent.request, earlier.sent.request
                        ),
                        answer,
                        false,
                    ));
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

/// A hash of a JSON value as read: numbers by value, object keys in any order (see [`same`]).
fn fingerprint(v: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    fn feed(v: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match v {
            Value::Number(n) => n.as_f64().map(f64::to_bits).hash(h),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for k in keys {
                    k.hash(h);
                    feed(&map[k], h);
                }
            }
            Value::Array(items) => {
                items.len().hash(h);
                items.iter().for_each(|i| feed(i, h));
            }
            other => other.to_string().hash(h),
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

/// Two JSON values are the same reading: numbers by value (`5` and `5.0`), the rest as written.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::delivery::Delivery;
    use crate::harness::http::Sent;
    use serde_json::json;
    use std::time::Duration;

    /// Reads one after another, a millisecond apart, each with the first client's key.
    struct Log {
        start: Instant,
        answers: Vec<Arc<Answer>>,
    }

    impl Log {
        fn new() -> Self {
            Self { start: Instant::now(), answers: Vec::new() }
        }

        fn at(&self, ms: u64) -> Instant {
            self.start + Duration::from_millis(ms)
        }

        fn read(&mut self, path: &str, query: &[(&str, &str)], body: Value) {
            let n = self.answers.len() as u64;
            let request = format!("GET /{path}");
            self.answers.push(Arc::new(Answer {
                seq: n,
                case: None,
                sent: Sent { method: "GET".into(), url: request.clone(), auth: Auth::Primary, request },
                segments: path.split('/').map(str::to_string).collect(),
                query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                status: 200,
                body: Some(body.to_string()),
                sent_at: self.at(10 * n),
                answered_at: self.at(10 * n + 1),
            }));
        }

        fn page(&mut self, account: &str, items: Value) {
            self.read(&format!("v1/accounts/{account}/transactions"), &[], json!({"data": items, "has_more": false}));
        }

        fn model(&self, events: &[(u64, Value)]) -> Model {
            let deliveries: Vec<(Instant, Delivery)> = events
                .iter()
                .enumerate()
                .map(|(i, (ms, b))| (self.at(*ms), Delivery::new(i as u64, b.clone())))
                .collect();
            Model::of(&self.answers, &deliveries)
        }
    }

    fn txn(id: &str, amount: f64) -> Value {
        json!({"id": id, "accountId": "acc_1", "amount": amount})
    }

    fn event(kind: &str, data: Value) -> Value {
        json!({"id": "evt_1", "type": kind, "data": data})
    }

    #[test]
    fn a_transaction_under_two_accounts_fails_one_owner() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.page("acc_2", json!([txn("txn_1", 1.0)]));
        let (_, findings) = one_owner(&log.model(&[]));
        assert_eq!(findings.len(), 1);
        assert!(findings[0].problem.contains("listed under account acc_1"), "{}", findings[0].problem);
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
    fn changes_need_an_announcement_that_may_come_late_and_numbers_compare_by_value() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.page("acc_1", json!([{"amount": 1, "accountId": "acc_1", "id": "txn_1"}]));
        assert!(changes_announced(&log.model(&[])).1.is_empty(), "1 and 1.0, keys in any order: one reading");
        log.page("acc_1", json!([txn("txn_1", 2.0), txn("txn_9", 9.0)]));
        let (_, found) = changes_announced(&log.model(&[]));
        assert_eq!(found.len(), 2, "a changed amount and a new transaction");
        assert!(found.iter().all(|f| f.awaits_event));
        let updated = event("accounts.updated", json!({"accountId": "acc_1", "connectionId": "conn_1"}));
        assert!(changes_announced(&log.model(&[(900, updated)])).1.is_empty());
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
        assert!(found[0].problem.contains("cannot move back"), "{}", found[0].problem);
    }

    #[test]
    fn reads_with_bad_input_or_another_key_are_left_out() {
        let mut log = Log::new();
        log.page("acc_1", json!([txn("txn_1", 1.0)]));
        log.read("v1/accounts/acc_1/transactions", &[("limit", "0")], json!({"data": [], "has_more": false}));
        assert!(nothing_vanishes(&log.model(&[])).1.is_empty());
    }
}
