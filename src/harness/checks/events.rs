//! §3 States and §6 Events: what the webhook deliveries of the tour's connections say, and
//! §6.3 the reactions they promise. Arrival order and duplicates are never held against a target.

use super::{validate, Problems};
use crate::harness::chain;
use crate::harness::context::RunContext;
use crate::harness::outcome::Stop;
use crate::harness::receiver::{unique, Delivery};
use crate::schemas::Schema;
use crate::spec::{Action, ACCOUNTS_UPDATED};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// `delivery evt_… (connection.verifying)`, for messages.
fn what(d: &Delivery) -> String {
    match d.body.get("id").and_then(Value::as_str) {
        Some(id) => format!("delivery {id} ({})", d.event_type().unwrap_or("no type")),
        None => format!("delivery #{} ({})", d.seq, d.event_type().unwrap_or("no type")),
    }
}

/// Applies `judge` to every unique delivery of every tour connection.
async fn each_delivery(ctx: &RunContext, mut judge: impl FnMut(&Delivery, &mut Problems)) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for (_, deliveries) in tour.connections()? {
        for d in unique(deliveries) {
            judge(&d, &mut problems);
        }
    }
    problems.finish()
}

pub async fn schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    each_delivery(&ctx, |d, problems| {
        if d.body.is_null() {
            problems.add(format!("{}: body is not JSON", what(d)));
        } else if let Err(e) = validate(Schema::WebhookEvent, &d.body, &what(d)) {
            problems.add(e.to_string());
        }
    })
    .await
}

pub async fn envelope_agrees(ctx: Arc<RunContext>) -> Result<(), Stop> {
    each_delivery(&ctx, |d, problems| {
        if d.is_short_form() {
            return;
        }
        for (outer, inner) in [("type", "type"), ("id", "eventId")] {
            let (a, b) = (d.body.get(outer), d.body.pointer(&format!("/data/{inner}")));
            if a != b {
                problems.add(format!("{}: {outer} is {} but data.{inner} is {}", what(d), show(a), show(b)));
            }
        }
    })
    .await
}

fn show(v: Option<&Value>) -> String {
    v.map_or("absent".to_string(), ToString::to_string)
}

pub async fn created_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for (id, deliveries) in tour.connections()? {
        if !deliveries.iter().any(|d| d.event_type() == Some("connection.created")) {
            problems.add(format!(
                "connection {id} was created (POST /v1/connections) but no connection.created arrived; received {}",
                crate::harness::receiver::labels(deliveries)
            ));
        }
    }
    problems.finish()
}

pub async fn previous_status_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for (id, deliveries) in tour.connections()? {
        if let Err(e) = chain::check(deliveries) {
            problems.add(format!("connection {id}: {e}"));
        }
    }
    problems.finish()
}

pub async fn connected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Connect)
}

pub async fn failed_auth_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::FailAuth)
}

pub async fn mfa_required_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::RequireMfa)
}

pub async fn error_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Error)
}

pub async fn disconnected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Disconnect)
}

pub async fn single_client_id(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut ids = BTreeSet::new();
    for (_, deliveries) in tour.connections()? {
        for d in deliveries.iter().filter(|d| !d.is_short_form()) {
            ids.insert(show(d.body.pointer("/data/clientId")));
        }
    }
    match ids.len() {
        0 | 1 => Ok(()),
        _ => Err(Stop::fail(format!(
            "events of one client's connections carry {} different data.clientId values: {}",
            ids.len(),
            ids.into_iter().collect::<Vec<_>>().join(", ")
        ))),
    }
}

pub async fn accounts_updated_reaction(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::UpdateAccounts)
}

/// §4.4 returns "the updated balance", and §6.3 sends the client there on accounts.updated; the
/// connection's account list (§4.2) shows the current balance too. After the update both must
/// agree. The shape of §4.4 is not shown: without a numeric `balance` there, nothing is judged.
pub async fn account_balance_reaction(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let receiver = ctx.receiver()?;
    let created = ctx.connect_new().await?;
    let id = created.connection_id.clone();
    let accounts = ctx.accounts_when_ready(&id).await?;
    let account = accounts
        .iter()
        .find_map(|a| a.get("id").and_then(Value::as_str))
        .ok_or_else(|| Stop::ignore("the connection has no account"))?
        .to_string();
    ctx.drive(Action::UpdateAccounts, &created, Some(&account), None).await?;
    let (arrived, seen) = receiver.wait_for_type(&id, ACCOUNTS_UPDATED, ctx.config.event_wait()).await;
    if !arrived {
        return Err(Stop::ignore(format!("no {ACCOUNTS_UPDATED} arrived (judged by reactions.accounts-updated)")));
    }
    let account = seen
        .iter()
        .filter(|d| d.event_type() == Some(ACCOUNTS_UPDATED))
        .find_map(|d| d.body.pointer("/data/accountId").and_then(Value::as_str))
        .unwrap_or(&account)
        .to_string();
    let one = ctx.api.get(&["v1", "accounts", &account], &[]).await?;
    let single = one.success_json()?;
    let listed = ctx.accounts_when_ready(&id).await?;
    let in_list = listed.iter().find(|a| a.get("id").and_then(Value::as_str) == Some(account.as_str()));
    let (Some(got), Some(want)) =
        (single.get("balance").and_then(Value::as_f64), in_list.and_then(|a| a.get("balance")).and_then(Value::as_f64))
    else {
        return Err(Stop::ignore("no numeric balance in both GET /v1/accounts/{accountId} and the account list"));
    };
    if (got - want).abs() > 1e-9 {
        return Err(Stop::fail(format!(
            "after {ACCOUNTS_UPDATED} for {account}: {} shows balance {got}, GET /v1/connections/{id}/accounts shows {want}",
            one.request
        )));
    }
    Ok(())
}

pub async fn transaction_deleted_reaction(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::DeleteTransaction)
}
