//! §3, §6 over random paths: the lifecycle property (see `harness::lifecycle`).

use crate::harness::context::RunContext;
use crate::harness::lifecycle::{play, sequences};
use crate::harness::outcome::Stop;
use crate::harness::property;
use std::sync::Arc;

pub async fn random_sequences(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let run = ctx.clone();
    property::check(&ctx, "lifecycle.random-sequences", sequences(), move |actions| {
        let ctx = run.clone();
        async move { play(&ctx, &actions).await }
    })
    .await
}
