//! §4.1 Create a connection, §2.1 the connection it returns.

use super::Reply;
use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::answers::Auth;
use crate::harness::vocab::kind::{ConnectionKind, Kind};
use crate::harness::vocab::outcome::{str_field, Failure, Problem, Stop};
use crate::schemas::{self, Schema};
use crate::spec::prefix;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

super::cases! {
    RESPONSE_SCHEMA = "create.response-schema" => creates, responds [CreateConnection => schema];
    STATUS_CREATED = "create.status-created" => creates, responds [CreateConnection => status_created];
    ID_PREFIXES = "create.id-prefixes" => creates, responds [CreateConnection => id_prefixes];
    FRESH_IDS = "create.fresh-ids" => fresh_ids;
    ID_SHAPE = "create.id-shape" => id_shape;
}

const REQUEST: &str = "POST /v1/connections";

/// The flow of the response-checked cases: one creation, so that there is an answer to judge
/// (every other creation of the run, by either client, is judged too).
async fn creates(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.created().await.map(drop)
}

/// §4.1: every creation answer validates against connection-created.json.
fn schema(reply: &Reply) -> Vec<Problem> {
    let violated = schemas::violated(Schema::ConnectionCreated, reply.body).err();
    violated.map(|v| Problem::found(Kind::Connection(ConnectionKind::Schema), [], v)).into_iter().collect()
}

/// §2.1: a connection is `CREATED` right after creation.
fn status_created(reply: &Reply) -> Vec<Problem> {
    match reply.body.get("status") {
        Some(Value::String(s)) if s == "CREATED" => Vec::new(),
        other => {
            let got = other.map_or("nothing".into(), ToString::to_string);
            let about = str_field(reply.body, "connectionId").map(str::to_string);
            let detail = format!("expected status \"CREATED\", got {got}");
            vec![Problem::found(Kind::Connection(ConnectionKind::StatusCreated), about, detail)
                .expecting("\"CREATED\"", got)]
        }
    }
}

/// §2.1: `conn_` and `sess_` prefixes. The token's value is a secret: never shown.
fn id_prefixes(reply: &Reply) -> Vec<Problem> {
    let mut problems = Vec::new();
    match str_field(reply.body, "connectionId") {
        Some(id) if id.starts_with(prefix::CONNECTION) => {}
        other => {
            let (expected, got) = (format!("an id starting with {}", prefix::CONNECTION), other.unwrap_or("nothing"));
            let detail = format!("expected connectionId to start with {}, got {got:?}", prefix::CONNECTION);
            let kind = Kind::Connection(ConnectionKind::ConnectionIdPrefix);
            problems
                .push(Problem::found(kind, other.map(str::to_string), detail).expecting(expected, format!("{got:?}")));
        }
    }
    if !str_field(reply.body, "widgetToken").is_some_and(|t| t.starts_with(prefix::WIDGET_TOKEN)) {
        // The token is a secret: what came is not shown, only that it lacks the prefix.
        let detail = format!("expected widgetToken to start with {} (value not shown)", prefix::WIDGET_TOKEN);
        let about = str_field(reply.body, "connectionId").map(str::to_string);
        problems.push(Problem::found(Kind::Connection(ConnectionKind::WidgetTokenPrefix), about, detail));
    }
    problems
}

/// §4.1, §2: each creation names a connection of its own. Judged over the first client's
/// creations of the run so far: the shared one and the tour's (every run that judges the
/// events makes them), with creations of its own only while there are fewer than three
/// (issue 72: two creations and their deliveries fewer, and five or more creations judged
/// instead of three). Ids may repeat across clients (§2): only the first client's are compared.
async fn fresh_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.created().await?;
    let _ = ctx.tour().await;
    let own = |ctx: &RunContext| {
        let created = ctx.api.answers().created();
        created.into_iter().filter(|c| c.auth == Auth::Primary).collect::<Vec<_>>()
    };
    let mut created = own(&ctx);
    while created.len() < 3 {
        ctx.create_connection().await?;
        created = own(&ctx);
    }
    let mut seen = HashMap::new();
    for (n, creation) in created.iter().enumerate() {
        if let Some(first) = seen.insert(creation.id.as_str(), creation.seq) {
            let message = format!(
                "{REQUEST}: creation {} of the run returned connectionId {:?} again (as an earlier one did)",
                n + 1,
                creation.id
            );
            let problem = Problem::found(ConnectionKind::IdRepeated, [creation.id.clone()], message);
            return Err(Stop::Fail(Failure::from(problem).on_answer(Some(first)).on_answer(Some(creation.seq))));
        }
    }
    Ok(())
}

/// Advisory: ids shaped like the samples (§2 says it is not a rule).
async fn id_shape(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.created().await?;
    let rest = created.connection_id.strip_prefix(prefix::CONNECTION).unwrap_or(&created.connection_id);
    if rest.len() == 26 && rest.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        return Ok(());
    }
    let message = format!("{REQUEST}: connectionId {:?} differs from the samples' shape (conn_ + 26 upper-case alphanumerics); allowed, noted only", created.connection_id);
    let problem = Problem::found(ConnectionKind::IdShape, [created.connection_id.clone()], message);
    Err(Stop::Fail(Failure::from(problem).shown_by(created.answer)))
}
