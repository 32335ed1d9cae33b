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
//!
//! The seam runs between the [`model`] (the reads and deliveries, kept as the rules need them)
//! and its [`rules`] (one function a case, failing the reads that contradict an earlier one);
//! this file holds the cases' table and their flow.

mod announced;
mod echo;
mod model;
mod reading;
mod rules;
mod stale;
#[cfg(test)]
mod testlog;
mod views;

use crate::harness::fixtures::context::{RunContext, Step, Updated};
use crate::harness::transport::answers::Auth;
use crate::harness::transport::pagination;
use crate::harness::vocab::outcome::Stop;
use crate::spec::{self, Action};
pub(super) use announced::data_after_event;
pub(crate) use model::Posted;
pub(super) use model::{Model, Observed};
use serde_json::Value;
pub(super) use stale::set_aside;
use std::sync::Arc;
pub(super) use views::deletions_caused;

super::cases! {
    ONE_OWNER = "state.one-owner" => reread, models [rules::one_owner];
    FIXED_FIELDS = "state.fixed-fields" => reread, models [rules::fixed_fields];
    SYNC_MOVES_FORWARD = "state.sync-moves-forward" => reread, models [rules::sync_moves_forward];
    DELETIONS_HOLD = "state.deletions-hold" => reread, models [rules::deletions_hold];
    NOTHING_VANISHES = "state.nothing-vanishes" => reread, models [rules::nothing_vanishes];
    CHANGES_ANNOUNCED = "state.changes-announced" => reread, models [announced::changes_announced];
    DELETED_OWNER = "state.deleted-owner" => reread, models [views::deleted_owner];
    LIST_COMPLETE = "state.list-complete" => reread, models [views::list_complete];
    ACCOUNT_READ_AGREES = "state.account-read-agrees" => single_reads, models [views::account_read_agrees];
    UPDATES_SHOW_A_CHANGE = "state.updates-show-a-change" => echo::quiet, models [echo::updates_show_a_change];
}

/// The flow of the state cases, run once for all four: the fixtures' and the tour's reads, then
/// the same reads again, so that each rule has an earlier and a later read (within a few
/// requests: each listed account's first walk at the default page size).
pub(super) async fn reread(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.reread.get_or_init(|| reread_once(&ctx)).await.clone()
}

/// The flow of `state.account-read-agrees`: the state cases' reads, then the shared
/// connection's accounts listed and each read singly (§4.4), back to back. The rule compares a
/// pair only if no event of the account or its connection arrived between its two reads; the
/// reads made as the run starts all have the connection's own events (created, connected)
/// arriving around them, late and in any order (§6.3). These come after the reread, when those
/// have arrived, so that a run under late deliveries still has a pair to judge.
async fn single_reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    reread(ctx.clone()).await?;
    let fixture = ctx.connected().await?;
    ctx.api.get(&["v1", "connections", &fixture.connection_id, "accounts"], &[]).await?;
    for id in fixture.account_ids() {
        ctx.api.get(&["v1", "accounts", &id], &[]).await?;
    }
    Ok(())
}

async fn reread_once(ctx: &RunContext) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut connections = vec![(fixture.connection_id.clone(), Auth::Primary)];
    if let Some(second) = ctx.connected_second().await? {
        connections.push((second.connection_id.clone(), Auth::Second));
    }
    // The neighbour scenario waits for its events while the tour waits for its own: one late
    // wait for both, not one after the other.
    let (tour, neighboured) = tokio::join!(ctx.tour(), updated(ctx));
    match neighboured {
        Ok(_) | Err(Stop::Ignore(..)) => {}
        Err(other) => return Err(other),
    }
    // The tour's connection that stays connected holds the run's deletion (§6).
    if let Ok(tour) = tour {
        let kept = tour.legs.iter().filter(|l| {
            l.client == Auth::Primary
                && l.path.contains(&spec::Action::DeleteTransaction)
                && !l.path.contains(&spec::Action::Disconnect)
        });
        connections
            .extend(kept.filter_map(|l| l.created.as_ref().ok()).map(|c| (c.connection_id.clone(), Auth::Primary)));
    }
    for (connection, auth) in connections {
        let api = ctx.api.reading_as(auth.clone());
        let path = ["v1", "connections", connection.as_str(), "accounts"];
        let listed = api.send(reqwest::Method::GET, &path, &[], auth.clone()).await?;
        // Read again at once: by now every event the run caused has arrived, so no late
        // delivery can stand for a change between these two (`state.changes-announced`).
        api.send(reqwest::Method::GET, &path, &[], auth.clone()).await?;
        let Ok(Value::Array(accounts)) = listed.success_json() else { continue };
        let ids: Vec<&str> = accounts.iter().filter_map(|a| a.get("id").and_then(Value::as_str)).collect();
        for id in &ids {
            along(pagination::walk_again(&api, id).await)?;
        }
        // The first account alone (§4.4), twice at once: what only it shows is compared too.
        for id in ids.first().into_iter().flat_map(|id| [id, id]) {
            api.send(reqwest::Method::GET, &["v1", "accounts", id], &[], auth.clone()).await?;
        }
    }
    Ok(())
}

/// The connection with an account updated ([`Updated`]), built once for the state cases and
/// `reactions.account-balance`.
pub(super) async fn updated(ctx: &RunContext) -> Result<Arc<Updated>, Stop> {
    ctx.updated.get_or_init(|| neighbours(ctx)).await.clone()
}

/// Where an update could hide an unannounced change, change one object and re-read its
/// neighbours: on a connection of its own, a transaction is deleted from account A, account B
/// of the same connection is updated, and A is read whole. A removed transaction listed again
/// is legal only after an `accounts.updated` of its own account (`cases/README.md`); the model
/// judges the reads (`state.deletions-hold`, and every other rule). A connection with fewer than
/// two accounts cannot show it: a note says so, and its first account is updated alone. B is
/// read singly before the update: `reactions.account-balance` judges its balance after it (a
/// server that keeps an account's first answer for a while, a cache, shows it again after the
/// event: `tests/foreign/node-projected`'s `account-get-stale-cache`, missed while the account
/// was first read after it).
async fn neighbours(ctx: &RunContext) -> Result<Arc<Updated>, Stop> {
    if ctx.driver.is_none() {
        return Err(Stop::ignore(crate::harness::transport::driver::NEEDS_DRIVER));
    }
    if ctx.receiver.is_none() {
        return Err(Stop::ignore("no webhook receiver"));
    }
    // Connected without awaiting its connection.connected: the accounts are read once served,
    // and the one wait below covers every event of the scenario.
    let (created, listed) = ctx.connect_new_as(Auth::Primary).await?;
    let id = created.connection_id.clone();
    let accounts: Vec<String> =
        listed.iter().filter_map(|a| a.get("id").and_then(Value::as_str).map(str::to_string)).collect();
    let removed = removable(ctx, &id, &accounts).await?;
    let b = match &removed {
        Some((a, _)) => accounts.iter().find(|b| *b != a),
        None => accounts.first(),
    };
    let Some(b) = b.cloned() else { return Err(Stop::ignore(format!("{id} lists no account"))) };
    ctx.api.get(&["v1", "accounts", &b], &[]).await?;
    // Both steps driven in turn (the server's order), then both events awaited at once, so
    // that the read falls after both.
    let mut steps: Vec<Step<'_>> = Vec::new();
    if let Some((a, txn)) = &removed {
        pagination::forget(&ctx.api, a);
        steps.push((Action::DeleteTransaction, Some(a.as_str()), Some(txn.as_str())));
    }
    pagination::forget(&ctx.api, &b);
    steps.push((Action::UpdateAccounts, Some(b.as_str()), None));
    let known = ctx.known_events(&created);
    ctx.drive_all_and_await(&created, &steps).await?;
    if let Some((a, _)) = &removed {
        pagination::forget(&ctx.api, a);
        along(pagination::walk(&ctx.api, a, None, None).await)?;
    }
    Ok(Arc::new(Updated { created, account: b, known }))
}

/// The first transaction of `accounts` (of connection `id`) and its account, when another
/// account is there to be updated beside it; else a note says why the neighbour scenario is not
/// judged.
async fn removable(ctx: &RunContext, id: &str, accounts: &[String]) -> Result<Option<(String, String)>, Stop> {
    let mut removed = None;
    for account in accounts {
        let Some(walk) = along(pagination::walk(&ctx.api, account, None, None).await)? else {
            ctx.note("not judged", format!("the neighbour scenario: a walk of {account} failed (its cases judge it)"));
            return Ok(None);
        };
        if let Some(first) = walk.ids().first() {
            removed = Some((account.clone(), first.clone()));
            break;
        }
    }
    let Some((a, txn)) = removed else {
        ctx.note("not judged", format!("the neighbour scenario: no account of {id} lists a transaction"));
        return Ok(None);
    };
    if !accounts.iter().any(|b| *b != a) {
        ctx.note("not judged", format!("the neighbour scenario needs a connection with two accounts; {id} has one"));
        return Ok(None);
    }
    Ok(Some((a, txn)))
}

/// A walk the state flow reads along: one the target answered wrongly is the transactions
/// cases' failure (their walks, and the response checks of every page), and the rules judge
/// the pages it read; one left unanswered stops the flow. Failing the state cases with it named
/// the wrong rule (issue 51: a page answered `{"data": null}`).
fn along(walked: Result<pagination::Walk, Stop>) -> Result<Option<pagination::Walk>, Stop> {
    match walked {
        Ok(walk) => Ok(Some(walk)),
        Err(Stop::Fail(_)) => Ok(None),
        Err(unread) => Err(unread),
    }
}
