//! §3 States and §6 Events: what the webhook deliveries of the tour's connections say, and
//! §6.3 the reactions they promise. Arrival order and duplicates are never held against a target.
//!
//! The rules over deliveries live in [`crate::harness::judge`], shared with `check-events`.

use super::Problems;
use crate::harness::context::RunContext;
use crate::harness::judge;
use crate::harness::outcome::Stop;
use crate::harness::receiver::Delivery;
use crate::spec::Action;
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

pub async fn transaction_deleted_reaction(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::DeleteTransaction)
}
