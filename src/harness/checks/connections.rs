//! §4.1 Create a connection, §2.1 the connection it returns.

use crate::harness::fixtures::RunContext;
use crate::harness::outcome::{ensure, str_field, validate, Stop};
use crate::schemas::Schema;
use crate::spec::prefix;
use std::collections::HashSet;
use std::sync::Arc;

crate::cases! {
    "create.response-schema" => response_schema,
    "create.status-created" => status_created,
    "create.id-prefixes" => id_prefixes,
    "create.fresh-ids" => fresh_ids,
    "create.id-shape" => id_shape,
}

const REQUEST: &str = "POST /v1/connections";

async fn response_schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    validate(Schema::ConnectionCreated, &created.body, REQUEST)
}

async fn status_created(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    let status = created.body.get("status");
    ensure(str_field(&created.body, "status") == Some("CREATED"), || {
        format!("{REQUEST}: expected status \"CREATED\", got {}", status.map_or("nothing".into(), ToString::to_string))
    })
}

async fn id_prefixes(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    ensure(created.connection_id.starts_with(prefix::CONNECTION), || {
        format!(
            "{REQUEST}: expected connectionId to start with {}, got {:?}",
            prefix::CONNECTION,
            created.connection_id
        )
    })?;
    // The token's value is a secret: the message never shows it.
    ensure(created.widget_token.as_deref().is_some_and(|t| t.starts_with(prefix::WIDGET_TOKEN)), || {
        format!("{REQUEST}: expected widgetToken to start with {} (value not shown)", prefix::WIDGET_TOKEN)
    })
}

async fn fresh_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let mut seen = HashSet::new();
    for n in 1..=3 {
        let created = ctx.create_connection().await?;
        ensure(seen.insert(created.connection_id.clone()), || {
            format!("{REQUEST}: creation {n} returned connectionId {:?} again", created.connection_id)
        })?;
    }
    Ok(())
}

/// Advisory: ids shaped like the samples (§2 says it is not a rule).
async fn id_shape(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    let rest = created.connection_id.strip_prefix(prefix::CONNECTION).unwrap_or(&created.connection_id);
    ensure(rest.len() == 26 && rest.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()), || {
        format!("{REQUEST}: connectionId {:?} differs from the samples' shape (conn_ + 26 upper-case alphanumerics); allowed, noted only", created.connection_id)
    })
}
