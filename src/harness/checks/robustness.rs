//! Bad input must not break the target: no 5xx. Which 4xx it answers is its own choice (§7).

use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::http::Exchange;
use crate::harness::vocab::kind::AnswerKind;
use crate::harness::vocab::outcome::{Problem, Problems, Stop};
use crate::spec::prefix;
use std::sync::Arc;

super::cases! {
    BAD_LIMIT = "robustness.bad-limit" => bad_limit;
    UNKNOWN_CURSOR = "robustness.unknown-cursor" => unknown_cursor;
    UNKNOWN_IDS = "robustness.unknown-ids" => unknown_ids;
}

fn no_server_error(exchange: &Exchange, problems: &mut Problems) {
    if exchange.is_server_error() {
        let detail = format!("{}: expected no 5xx, got {}", exchange.request, exchange.summary());
        let problem = Problem::found(AnswerKind::ServerError, [], detail).expecting("no 5xx", exchange.summary());
        problems.add_at(exchange.seq, problem);
    }
}

async fn some_account(ctx: &RunContext) -> Result<String, Stop> {
    let fixture = ctx.connected().await?;
    fixture.account_ids().into_iter().next().ok_or_else(|| Stop::ignore("the connection has no account"))
}

async fn bad_limit(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let account = some_account(&ctx).await?;
    let mut problems = Problems::default();
    for limit in ["0", "-1", "abc", "99999999999999999999"] {
        let exchange =
            ctx.api.get(&["v1", "accounts", &account, "transactions"], &[("limit", limit.to_string())]).await?;
        no_server_error(&exchange, &mut problems);
    }
    problems.finish()
}

async fn unknown_cursor(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let account = some_account(&ctx).await?;
    let cursor = ctx.unknown_id(prefix::TRANSACTION);
    let exchange = ctx.api.get(&["v1", "accounts", &account, "transactions"], &[("starting_after", cursor)]).await?;
    let mut problems = Problems::default();
    no_server_error(&exchange, &mut problems);
    problems.finish()
}

async fn unknown_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (connection, account) = (ctx.unknown_id(prefix::CONNECTION), ctx.unknown_id(prefix::ACCOUNT));
    let mut problems = Problems::default();
    for segments in [
        vec!["v1", "connections", connection.as_str(), "accounts"],
        vec!["v1", "accounts", account.as_str()],
        vec!["v1", "accounts", account.as_str(), "transactions"],
    ] {
        let exchange = ctx.api.get(&segments, &[]).await?;
        no_server_error(&exchange, &mut problems);
    }
    problems.finish()
}
