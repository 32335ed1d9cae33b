//! §5 Isolation between clients: one client never reads, pages into or receives another's
//! data (the authentication cases are in mod.rs).

use super::super::{state, Finding};
use crate::harness::fixtures::context::{Connected, RunContext};
use crate::harness::rules::delivery::{Delivery, Recipient};
use crate::harness::rules::invariants::IDENTIFYING;
use crate::harness::transport::answers::{Answer, Auth};
use crate::harness::transport::http::Exchange;
use crate::harness::vocab::kind::IsolationKind;
use crate::harness::vocab::outcome::{Problem, Problems, Stop};
use reqwest::Method;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
/// A 2xx answer to the second client leaks the first client's data (see [`leaks_to`]).
fn leaks(ctx: &RunContext, exchange: &Exchange, ids: &[String]) -> Option<Problem> {
    leaks_to(ctx, exchange, ids, Auth::Second)
}

/// A 2xx answer read with `reader`'s key leaks the other client's data when it carries an
/// object that client read, by content: the same id, and every [`IDENTIFYING`] field both show
/// equal (at least one). Ids are opaque (§2) and need not be unique across clients, so an
/// answer that names one of `ids` (the other client's) with other content is the reader's own
/// object under an equal id, or unknown: an advisory note at most, never a failure.
fn leaks_to(ctx: &RunContext, exchange: &Exchange, ids: &[String], reader: Auth) -> Option<Problem> {
    if !exchange.is_success() {
        return None;
    }
    let named: Vec<&String> = ids.iter().filter(|id| exchange.body.contains(id.as_str())).collect();
    if named.is_empty() {
        return None;
    }
    let (owner, whose) = match reader {
        Auth::Primary => (Auth::Second, "the first client's key, of the second client's data"),
        _ => (Auth::Primary, "the second client's key"),
    };
    let named: HashSet<&str> = named.iter().map(|s| s.as_str()).collect();
    let theirs = objects_read_by(ctx, &owner, &named);
    let answered = exchange.success_json().ok().map(|body| identified(&body, &named)).unwrap_or_default();
    for (id, got) in &answered {
        let Some(versions) = theirs.get(id) else { continue };
        if let Some(agree) = versions.iter().find_map(|v| same_object(v, got)) {
            let detail = format!(
                "{} with {whose}: expected a refusal, got status {} serving {id} as the other client read it \
                 ({} agree)",
                exchange.request,
                exchange.status,
                agree.join(", ")
            );
            let served = format!("status {} serving {id}", exchange.status);
            return Some(Problem::found(IsolationKind::Leak, [id.clone()], detail).expecting("a refusal", served));
        }
    }
    // One short item per request: the ids themselves would fill the line.
    ctx.note(
        "advisory: an answer named an id of the other client's, with content unlike what that client read \
         (ids may repeat across clients, §2: the reader's own object or unknown content is no leak)",
        format!("{} with {whose}: {}", exchange.request, exchange.status),
    );
    None
}

/// The objects of `body` (itself, its array's items, its `data` items) that `ids` name (as
/// their `id`, or as the connection or account they belong to), each by its own id with its
/// [`IDENTIFYING`] fields.
fn identified(body: &serde_json::Value, ids: &HashSet<&str>) -> Vec<(String, serde_json::Value)> {
    use serde_json::Value;
    let items: Vec<&Value> = match body {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => {
            let data = map.get("data").and_then(Value::as_array).into_iter().flatten();
            std::iter::once(body).chain(data).collect()
        }
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| {
            let id = item.get("id")?.as_str()?;
            let named = |f: &str| item.get(f).and_then(Value::as_str).is_some_and(|v| ids.contains(v));
            if !(ids.contains(id) || named("connectionId") || named("accountId")) {
                return None;
            }
            let kept = IDENTIFYING.iter().filter_map(|f| Some((f.to_string(), item.get(*f)?.clone())));
            Some((id.to_string(), Value::Object(kept.collect())))
        })
        .collect()
}

/// The fields two readings of one object agree on, when they agree on every field both show
/// and there is at least one; `None` when they differ (another object under the same id).
fn same_object(theirs: &serde_json::Value, got: &serde_json::Value) -> Option<Vec<&'static str>> {
    let mut agree = Vec::new();
    for field in IDENTIFYING {
        match (theirs.get(field), got.get(field)) {
            (Some(a), Some(b)) if a == b || (a.as_f64().is_some() && a.as_f64() == b.as_f64()) => agree.push(field),
            (Some(_), Some(_)) => return None,
            _ => {}
        }
    }
    (!agree.is_empty()).then_some(agree)
}

/// Every object with one of `ids` that `owner`'s own 2xx reads of §4.2, §4.3 and §4.4 showed,
/// by id, each as [`identified`] keeps it. Only the owner's reads: a probe's answer never
/// stands for what the owner holds.
fn objects_read_by(ctx: &RunContext, owner: &Auth, ids: &HashSet<&str>) -> HashMap<String, Vec<serde_json::Value>> {
    let mut out: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    let reads = ctx.api.answers().all();
    let owners = reads.iter().filter(|a| {
        a.sent.auth == *owner
            && (200..300).contains(&a.status)
            && a.segments.first().map(String::as_str) == Some("v1")
            && a.segments.len() >= 3
    });
    for answer in owners {
        // Each body parsed on its own and dropped (a hostile target's fat pages: never two).
        let Some(text) = answer.body.as_deref() else { continue };
        if !ids.iter().any(|id| text.contains(id))
            || crate::harness::vocab::budget::too_dense(text.as_bytes()).is_some()
        {
            continue;
        }
        let Ok(body) = serde_json::from_str::<serde_json::Value>(text) else { continue };
        for (id, fields) in identified(&body, ids) {
            out.entry(id).or_default().push(fields);
        }
    }
    out
}

/// The other direction: the second client's CONNECTED connection from the tour (§5: each
/// client sees only its own data) and its accounts, read with its own key. `None` when the tour
/// did not connect one (no webhooks, or the target refused): then only one direction is checked.
async fn second_client_data(ctx: &RunContext) -> Result<Option<(String, Vec<String>)>, Stop> {
    let Ok(tour) = ctx.tour().await else { return Ok(None) };
    let Some(created) = tour.legs.iter().filter(|l| l.client == Auth::Second).find_map(|l| l.created.as_ref().ok())
    else {
        return Ok(None);
    };
    let id = created.connection_id.clone();
    let own = ctx.api.send(Method::GET, &["v1", "connections", &id, "accounts"], &[], Auth::Second).await?;
    let accounts = match own.success_json() {
        Ok(serde_json::Value::Array(items)) => {
            items.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_string)).collect()
        }
        _ => return Ok(None),
    };
    Ok(Some((id, accounts)))
}

/// Reads the second client's data with the first client's key: each read must be refused or
/// name none of it. `read` gives the paths to try.
async fn first_reads_second(
    ctx: &RunContext,
    problems: &mut Problems,
    read: impl Fn(&str, &[String]) -> Vec<(Vec<String>, Vec<String>)>,
) -> Result<(), Stop> {
    let Some((connection, accounts)) = second_client_data(ctx).await? else { return Ok(()) };
    for (path, ids) in read(&connection, &accounts) {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        // What the second client itself reads there is what a leak would carry: read once
        // with its own key when the run has not yet.
        let read_by_owner = ctx
            .api
            .answers()
            .all()
            .iter()
            .any(|a| a.sent.auth == Auth::Second && a.segments == path && a.query.is_empty());
        if !read_by_owner {
            ctx.api.send(Method::GET, &path, &[], Auth::Second).await?;
        }
        let exchange = ctx.api.send(Method::GET, &path, &[], Auth::Primary).await?;
        if let Some(m) = leaks_to(ctx, &exchange, &ids, Auth::Primary) {
            problems.add_at(exchange.seq, m);
        }
    }
    Ok(())
}

pub(super) async fn isolation_accounts(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let exchange = ctx
        .api
        .send(Method::GET, &["v1", "connections", &fixture.connection_id, "accounts"], &[], Auth::Second)
        .await?;
    let mut ids = fixture.account_ids();
    ids.push(fixture.connection_id.clone());
    let mut problems = Problems::default();
    if let Some(m) = leaks(&ctx, &exchange, &ids) {
        problems.add_at(exchange.seq, m);
    }
    first_reads_second(&ctx, &mut problems, |connection, accounts| {
        let path = ["v1", "connections", connection, "accounts"].map(str::to_string).to_vec();
        vec![(path, [accounts, &[connection.to_string()][..]].concat())]
    })
    .await?;
    problems.finish()
}

pub(super) async fn isolation_account(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for id in fixture.account_ids() {
        let exchange = ctx.api.send(Method::GET, &["v1", "accounts", &id], &[], Auth::Second).await?;
        if let Some(m) = leaks(&ctx, &exchange, std::slice::from_ref(&id)) {
            problems.add_at(exchange.seq, m);
        }
    }
    first_reads_second(&ctx, &mut problems, |_, accounts| {
        accounts.iter().map(|a| (["v1", "accounts", a].map(str::to_string).to_vec(), vec![a.clone()])).collect()
    })
    .await?;
    problems.finish()
}

pub(super) async fn isolation_transactions(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    fixture.walks_read()?;
    for (account, walk) in judged_walks(&fixture) {
        let mut ids: Vec<String> = walk.ids();
        ids.push(account.to_string());
        let exchange =
            ctx.api.send(Method::GET, &["v1", "accounts", account, "transactions"], &[], Auth::Second).await?;
        if let Some(m) = leaks(&ctx, &exchange, &ids) {
            problems.add_at(exchange.seq, m);
        }
    }
    first_reads_second(&ctx, &mut problems, |_, accounts| {
        let path = |a: &String| ["v1", "accounts", a, "transactions"].map(str::to_string).to_vec();
        accounts.iter().map(|a| (path(a), vec![a.clone()])).collect()
    })
    .await?;
    problems.finish()
}

/// The reference walks that went through: a walk that failed is its own cases' failure, and
/// the probes take their ids from the others.
fn judged_walks(fixture: &Connected) -> Vec<(&str, &crate::harness::transport::pagination::Walk)> {
    fixture.walks.iter().filter_map(|(id, walk)| Some((id.as_str(), walk.as_ref().ok()?))).collect()
}

/// The transaction ids of the first page of `account`'s transactions read with `auth`
/// (nothing when refused or unreadable).
async fn first_page_ids(ctx: &RunContext, account: &str, auth: Auth) -> Result<Vec<String>, Stop> {
    let exchange = ctx.api.send(Method::GET, &["v1", "accounts", account, "transactions"], &[], auth).await?;
    let Ok(body) = exchange.success_json() else { return Ok(Vec::new()) };
    let items = body.get("data").and_then(serde_json::Value::as_array).map(Vec::as_slice).unwrap_or_default();
    Ok(items.iter().filter_map(|i| i.get("id")?.as_str().map(str::to_string)).collect())
}

/// A cursor from another scope, sent with the first client's key on `asked` with `limit`: the
/// answer is a refusal, or a page that names nothing of the scope the cursor came from
/// (`foreign`: its account id and transaction ids).
async fn probe_cursor(
    ctx: &RunContext,
    (asked, limit): (&str, Option<u64>),
    cursor: &str,
    foreign: &[String],
    whose: &str,
    problems: &mut Problems,
) -> Result<(), Stop> {
    let query = crate::harness::transport::pagination::query(limit, Some(cursor));
    let exchange = ctx.api.get(&["v1", "accounts", asked, "transactions"], &query).await?;
    let named = foreign.iter().find(|id| exchange.is_success() && exchange.body.contains(id.as_str()));
    if let Some(id) = named {
        let detail = format!(
            "{} (a starting_after taken from {whose}): expected a refusal, an empty page or transactions of {asked}, got status {} naming {id}",
            exchange.request, exchange.status
        );
        let expected = format!("a refusal, an empty page or transactions of {asked}");
        let named = format!("status {} naming {id}", exchange.status);
        let problem = Problem::found(IsolationKind::ForeignCursor, [asked.to_string(), id.clone()], detail);
        problems.add_at(exchange.seq, problem.expecting(expected, named));
    }
    Ok(())
}

/// An account of another scope, with the transaction ids read from it (the cursors it lends).
type Lender = (String, Vec<String>);

/// The accounts of another CONNECTED connection of the first client (the tour's, which stays
/// connected), with the ids of their first page.
async fn other_connection_lenders(ctx: &RunContext) -> Result<Vec<Lender>, Stop> {
    let Ok(tour) = ctx.tour().await else { return Ok(Vec::new()) };
    let Some(created) = tour.stays_connected() else { return Ok(Vec::new()) };
    let listed = ctx.api.get(&["v1", "connections", &created.connection_id, "accounts"], &[]).await?;
    let accounts: Vec<String> = match listed.success_json() {
        Ok(serde_json::Value::Array(items)) => {
            items.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_string)).collect()
        }
        _ => return Ok(Vec::new()),
    };
    let mut lenders = Vec::new();
    for account in accounts {
        let ids = first_page_ids(ctx, &account, Auth::Primary).await?;
        if !ids.is_empty() {
            lenders.push((account, ids));
            break;
        }
    }
    Ok(lenders)
}

/// The second client's accounts with their transactions, as its own walks read them.
async fn second_client_lenders(ctx: &RunContext) -> Result<Vec<Lender>, Stop> {
    let Some(second) = ctx.connected_second().await? else { return Ok(Vec::new()) };
    Ok(judged_walks(&second)
        .into_iter()
        .map(|(id, w)| (id.to_string(), w.ids()))
        .filter(|(_, ids)| !ids.is_empty())
        .collect())
}

/// §4.3 (a cursor names an item of the list asked for) and §5: a transaction id of another
/// account of this connection, of another connection of this client, and of the other client,
/// sent as `starting_after` never leads into that account's data. A refusal, an empty page or
/// the asked account's own items pass. Every scope is tried without and with `limit`.
/// The accounts asked for are those of [`RunContext::paged_connections`].
pub(super) async fn foreign_cursor(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixtures = ctx.paged_connections().await?;
    let mut walks = Vec::new();
    let mut problems = Problems::default();
    let mut probed = false;
    for fixture in &fixtures {
        let own = judged_walks(fixture);
        probed |= same_connection_cursors(&ctx, &own, &mut problems).await?;
        walks.extend(own);
    }
    let scopes = [
        ("another connection of this client", other_connection_lenders(&ctx).await?),
        ("the second client's account", second_client_lenders(&ctx).await?),
    ];
    for (whose, lenders) in scopes {
        if lenders.is_empty() || walks.is_empty() {
            continue;
        }
        // Each lender once, on the asked accounts in turn, and both shapes at least once.
        for k in 0..lenders.len().max(2) {
            let (account, ids) = &lenders[k % lenders.len()];
            let (asked, own) = &walks[k % walks.len()];
            let limit = (k % 2 == 1).then_some(2);
            // Ids may repeat across clients (§2): one the asked account itself has is its own.
            let own = own.ids();
            let foreign: Vec<String> = [ids.clone(), vec![account.clone()]]
                .concat()
                .into_iter()
                .filter(|id| id != asked && !own.contains(id))
                .collect();
            probed = true;
            probe_cursor(&ctx, (asked, limit), &ids[0], &foreign, whose, &mut problems).await?;
        }
    }
    if !probed {
        return Err(Stop::ignore("no account of another scope has transactions to take a cursor from"));
    }
    problems.finish()
}

/// [`foreign_cursor`] within one connection: each account asked after the first and the last
/// transaction of the next other account with transactions; whether any was asked.
async fn same_connection_cursors(
    ctx: &RunContext,
    walks: &[(&str, &crate::harness::transport::pagination::Walk)],
    problems: &mut Problems,
) -> Result<bool, Stop> {
    let mut probed = false;
    for (i, (asked, _)) in walks.iter().enumerate() {
        // The next other account with transactions lends its first and last as cursors.
        let lender =
            walks.iter().cycle().skip(i + 1).take(walks.len().saturating_sub(1)).find(|(_, w)| w.ids().len() > 1);
        let Some((other, walk)) = lender else { continue };
        let ids = walk.ids();
        let foreign = [ids.clone(), vec![other.to_string()]].concat();
        for (cursor, limit) in [(&ids[0], None), (&ids[ids.len() - 1], Some(2))] {
            probed = true;
            let whose = "another account of this connection";
            probe_cursor(ctx, (asked, limit), cursor, &foreign, whose, problems).await?;
        }
    }
    Ok(probed)
}

/// §5: the second client's key on the first client's account ids, in every request shape the
/// harness itself sends (`limit`, `starting_after`, both): refused, or naming none of the first
/// client's data. (`isolation.transactions` sends the bare shape.)
pub(super) async fn request_shapes(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixtures = ctx.paged_connections().await?;
    let mut problems = Problems::default();
    let mut probed = false;
    for (account, walk) in fixtures.iter().flat_map(|f| judged_walks(f)) {
        let ids = walk.ids();
        let Some(cursor) = ids.first() else { continue };
        let secret = [ids.clone(), vec![account.to_string()]].concat();
        for (limit, after) in [(Some(1), None), (None, Some(cursor.as_str())), (Some(2), Some(cursor.as_str()))] {
            probed = true;
            let query = crate::harness::transport::pagination::query(limit, after);
            let exchange =
                ctx.api.send(Method::GET, &["v1", "accounts", account, "transactions"], &query, Auth::Second).await?;
            if let Some(m) = leaks(&ctx, &exchange, &secret) {
                problems.add_at(exchange.seq, m);
            }
        }
    }
    if !probed {
        return Err(Stop::ignore("no account of the connection has a transaction to take a cursor from"));
    }
    problems.finish()
}

/// §1 step 3, §6: each client's events go to its own server. The tour drives a connection of
/// each client; the receiver has an address per client. The rule is judged over every delivery
/// of the run ([`deliveries_isolated`]) once the separation is evidenced: some of the second
/// client's events reached its own address. When none did, what the driver said it registered
/// decides ([`Driver::per_client_addresses`](crate::harness::transport::driver::Driver)): an address per
/// client makes it a leak (failed); one address for all clients is the target's set-up (passed,
/// with a note saying what that leaves unjudged); nothing said leaves both causes open
/// (ignored, naming both).
pub(super) async fn separate_addresses(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    // The tour only connects the second client's connection: a data event of it too (a
    // transaction the target picks, removed), which the model rule judges like every delivery.
    let second = tour.legs.iter().filter(|l| l.client == Auth::Second).find_map(|l| l.created.as_ref().ok());
    if let Some(created) = second {
        if let Err(stop) = ctx.drive_and_await(created, crate::spec::Action::DeleteTransaction, None, None).await {
            ctx.note("not judged", format!("a data event of the second client's connection: {stop}"));
        }
    }
    let groups = tour.by_client()?;
    let second: Vec<&Delivery> = groups.iter().skip(1).flat_map(|(_, ds)| ds).collect();
    if second.is_empty() {
        return Err(Stop::ignore("no event of the second client's connection arrived: delivery isolation not judged"));
    }
    if second.iter().any(|d| d.to == Recipient::Second) {
        return Ok(());
    }
    match ctx.driver.as_ref().and_then(|d| d.per_client_addresses()) {
        Some(true) => {
            let mut problems = Problems::default();
            let legs = tour.legs.iter().filter(|l| l.client == Auth::Second);
            for (leg, created) in legs.filter_map(|l| Some((l, l.created.as_ref().ok()?))) {
                let mut kinds: Vec<&str> = leg.deliveries.iter().filter_map(|d| d.event_type()).collect();
                if kinds.is_empty() {
                    continue;
                }
                let count = kinds.len();
                kinds.sort_unstable();
                kinds.dedup();
                // Evidence, not a reproduction: the creation answered as it should; the
                // deliveries that followed went to the wrong address.
                let detail = format!(
                    "the client under test's webhook address got {count} event{} of the second client's connection {} \
                     ({}), and none arrived at the second client's own address, which the driver registered for it \
                     (it says each client's address is its own): each client's events go to its own server",
                    if count == 1 { "" } else { "s" },
                    created.connection_id,
                    kinds.join(", ")
                );
                let problem = Problem::found(IsolationKind::Deliveries, [created.connection_id.clone()], detail)
                    .expecting("the second client's webhook address", "the client under test's webhook address");
                problems.add_citing(created.answer, problem);
            }
            problems.finish()
        }
        Some(false) => {
            ctx.note(
                "not judged",
                "the target keeps one webhook address for all clients (the driver says it registered one, shared): \
                 every client's events arrive there, so which client an event was meant for is not judged by \
                 isolation.deliveries"
                    .to_string(),
            );
            Ok(())
        }
        None => Err(Stop::ignore(
            "the second client's events all arrived at the client under test's address: either the driver \
             registered one address for both clients, or the target sent the second client's events to the first \
             client's address (a leak). The driver did not say which: a driver that registers each address for its \
             own client says `webhooks=per-client` (a leak then fails this case), one that registers one address \
             because the target keeps one for all clients says `webhooks=shared` (docs/driver.md)",
        )),
    }
}

/// Every event at one client's address names that client's connection or `clientId` (§6.2),
/// never the other client's: a connection's owner is the key that created it (§4.1), a
/// `clientId`'s owner the client whose connections carry it. Judged only once some of the
/// second client's events arrived at its own address (else nothing is separated to judge).
pub(super) fn deliveries_isolated(model: &state::Model) -> (usize, Vec<Finding>) {
    let owner = |connection: Option<&str>| connection.and_then(|c| model.creation(c));
    // Each clientId with the creation answers of the connections whose events carry it.
    let mut client_ids: HashMap<&str, Vec<&Arc<Answer>>> = HashMap::new();
    for p in model.posted() {
        if let (Some(id), Some(created)) = (p.client_id.as_deref(), owner(p.connection.as_deref())) {
            client_ids.entry(id).or_default().push(created);
        }
    }
    // A clientId speaks for one client only when every connection carrying it is that client's.
    let by_client_id = |id: Option<&str>| {
        let created = client_ids.get(id?)?;
        let first = created.first()?;
        created.iter().all(|a| a.sent.auth == first.sent.auth).then_some(*first)
    };
    let whose = |p: &state::Posted| owner(p.connection.as_deref()).or_else(|| by_client_id(p.client_id.as_deref()));
    let address_of = |to: Recipient| match to {
        Recipient::First => Auth::Primary,
        Recipient::Second => Auth::Second,
    };
    let separated = model
        .posted()
        .iter()
        .any(|p| p.to == Recipient::Second && whose(p).is_some_and(|a| a.sent.auth == Auth::Second));
    if !separated {
        // Nothing separated to judge here: the flow ([`separate_addresses`]) reads what the
        // driver said it registered (a leak, the target's one address, or either); the
        // deliveries it rests on are these.
        return (model.posted().iter().filter(|p| whose(p).is_some()).count(), Vec::new());
    }
    let mut judged = 0;
    // One finding per connection and address: the connection's creation, its events there.
    type Leak<'a> = (Arc<Answer>, Vec<&'a str>);
    let mut leaks: BTreeMap<(String, &str), Leak> = BTreeMap::new();
    for p in model.posted() {
        let Some(created) = whose(p) else { continue };
        judged += 1;
        if created.sent.auth == address_of(p.to) {
            continue;
        }
        let address = match p.to {
            Recipient::First => "the client under test's",
            Recipient::Second => "the second client's",
        };
        let connection =
            p.connection.clone().unwrap_or_else(|| format!("clientId {}", p.client_id.as_deref().unwrap_or("?")));
        leaks.entry((connection, address)).or_insert_with(|| (created.clone(), Vec::new())).1.push(&p.kind);
    }
    let findings = leaks
        .into_iter()
        .map(|((connection, address), (created, mut kinds))| {
            let count = kinds.len();
            kinds.sort_unstable();
            kinds.dedup();
            let owner = match created.sent.auth {
                Auth::Second => "the second client's",
                _ => "the client under test's",
            };
            let detail = format!(
                "{address} webhook address got {count} event{} of {owner} connection {connection} ({}): each \
                 client's events go to its own server",
                if count == 1 { "" } else { "s" },
                kinds.join(", ")
            );
            let problem = Problem::found(IsolationKind::Deliveries, [connection], detail)
                .expecting(format!("{owner} webhook address"), format!("{address} webhook address"));
            Finding { problem, answer: created, awaits_event: false }
        })
        .collect();
    (judged, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leak_is_the_other_clients_object_by_content_not_its_id() {
        use serde_json::json;
        let ids: HashSet<&str> = ["acc_1", "conn_A"].into_iter().collect();
        let theirs = json!([{"id": "acc_1", "connectionId": "conn_A", "name": "Everyday", "createdAt": "2026-01-01T00:00:00Z", "balance": 5}]);
        let theirs = identified(&theirs, &ids);
        // The same account, its balance changed since: a leak.
        let same =
            identified(&json!({"id": "acc_1", "connectionId": "conn_A", "name": "Everyday", "balance": 9}), &ids);
        assert_eq!(same_object(&theirs[0].1, &same[0].1), Some(vec!["connectionId", "name"]));
        // The reader's own account under an equal id: no leak.
        let own = identified(&json!({"id": "acc_1", "connectionId": "conn_B", "name": "Everyday"}), &ids);
        assert_eq!(same_object(&theirs[0].1, &own[0].1), None);
        // Nothing to compare but the id: unknown content, no leak.
        let bare = identified(&json!({"id": "acc_1"}), &ids);
        assert_eq!(same_object(&theirs[0].1, &bare[0].1), None);
        // A page's items belong to the account named: each is compared by its own id.
        let page = identified(&json!({"data": [{"id": "txn_9", "accountId": "acc_1", "amount": -3}]}), &ids);
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].0, "txn_9");
    }
}
