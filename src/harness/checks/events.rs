//! §3 States and §6 Events: what the webhook deliveries of the tour's connections say. Arrival
//! order and duplicates are never held against a target.
//!
//! The rules over deliveries live in [`crate::harness::event_rules`], shared with `check-events`.

use crate::harness::chain;
use crate::harness::delivery::Delivery;
use crate::harness::event_rules;
use crate::harness::fixtures::RunContext;
use crate::harness::outcome::{Problems, Stop};
use crate::spec::Action;
use std::sync::Arc;

crate::cases! {
    "events.schema" => schema,
    "events.envelope-agrees" => envelope_agrees,
    "events.unique-ids" => unique_ids,
    "events.created-announced" => created_announced,
    "events.previous-status-chain" => previous_status_chain,
    "events.time-follows-chain" => time_follows_chain,
    "events.connected-announced" => connected_announced,
    "events.failed-auth-announced" => failed_auth_announced,
    "events.mfa-required-announced" => mfa_required_announced,
    "events.error-announced" => error_announced,
    "events.disconnected-announced" => disconnected_announced,
    "events.single-client-id" => single_client_id,
    "events.distinct-client-ids" => distinct_client_ids,
}

/// Every unique delivery of every tour connection, and the connections.
async fn tour_deliveries(ctx: &RunContext) -> Result<Vec<Delivery>, Stop> {
    let tour = ctx.tour().await?;
    Ok(tour.connections()?.into_iter().flat_map(|(_, ds)| ds.iter().cloned()).collect())
}

async fn unique_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::ids_identify_events(&tour_deliveries(&ctx).await?)
}

async fn schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::schema(&tour_deliveries(&ctx).await?)
}

async fn envelope_agrees(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::envelope_agrees(&tour_deliveries(&ctx).await?)
}

/// Every tour connection was created by this run (POST /v1/connections), so each must have
/// its connection.created (§3.2).
async fn created_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for missing in event_rules::missing_created(&tour.connections()?) {
        problems.add(format!("{missing}, though the connection was created by POST /v1/connections"));
    }
    problems.finish()
}

async fn previous_status_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::chains(&ctx.tour().await?.connections()?)
}

/// Each tour connection's `occurredAt` times agree with its state chain (read order-free,
/// [`chain::time_contradictions`]).
async fn time_follows_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for (connection, deliveries) in tour.connections()? {
        for contradiction in chain::time_contradictions(deliveries) {
            problems.add(format!("{connection}: {contradiction}"));
        }
    }
    problems.finish()
}

async fn connected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Connect)
}

async fn failed_auth_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::FailAuth)
}

async fn mfa_required_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::RequireMfa)
}

async fn error_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Error)
}

async fn disconnected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Disconnect)
}

/// The tour's connections all belong to the client under test: one group.
/// Each client's connections (the tour drives both when the second key is given) carry one
/// `clientId`.
async fn single_client_id(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::one_client_id(&ctx.tour().await?.by_client()?)
}

async fn distinct_client_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::distinct_client_ids(&ctx.tour().await?.by_client()?)
}
