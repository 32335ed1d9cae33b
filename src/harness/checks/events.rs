//! §3 States and §6 Events: what the webhook deliveries of the tour's connections say, and
//! §6.3 the reactions they promise. Arrival order and duplicates are never held against a target.
//!
//! The rules over deliveries live in [`crate::harness::judge`], shared with `check-events`.

use super::Problems;
use crate::harness::context::RunContext;
use crate::harness::judge;
use crate::harness::outcome::Stop;
use crate::harness::receiver::Delivery;
use crate::spec::{Action, ACCOUNTS_UPDATED};
use serde_json::Value;
use std::sync::Arc;

/// Every unique delivery of every tour connection, and the connections.
async fn tour_deliveries(ctx: &RunContext) -> Result<Vec<Delivery>, Stop> {
    let tour = ctx.tour().await?;
    Ok(tour.connections()?.into_iter().flat_map(|(_, ds)| ds.iter().cloned()).collect())
}

pub async fn schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    judge::schema(&tour_deliveries(&ctx).await?)
}

pub async fn envelope_agrees(ctx: Arc<RunContext>) -> Result<(), Stop> {
    judge::envelope_agrees(&tour_deliveries(&ctx).await?)
}

/// Every tour connection was created by this run (POST /v1/connections), so each must have
/// its connection.created (§3.2).
pub async fn created_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for missing in judge::missing_created(&tour.connections()?) {
        problems.add(format!("{missing}, though the connection was created by POST /v1/connections"));
    }
    problems.finish()
}

pub async fn previous_status_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    judge::chains(&ctx.tour().await?.connections()?)
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

/// The tour's connections all belong to the client under test: one group.
pub async fn single_client_id(ctx: Arc<RunContext>) -> Result<(), Stop> {
    judge::one_client_id(&[("this client's connections".to_string(), tour_deliveries(&ctx).await?)])
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
        return Err(Stop::ignore(format!(
            "no {ACCOUNTS_UPDATED} arrived (judged by reactions.accounts-updated){}",
            receiver.refusals()
        )));
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
