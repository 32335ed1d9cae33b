//! §4.2 Get connection accounts, §2.2 the account fields, §4.4 Get one account.

use crate::harness::fixtures::RunContext;
use crate::harness::outcome::{str_field, validate, Problems, Stop};
use crate::schemas::Schema;
use crate::spec::prefix;
use serde_json::Value;
use std::sync::Arc;

crate::cases! {
    "accounts.refused-before-connected" => refused_before_connected,
    "accounts.response-schema" => response_schema,
    "accounts.connection-id" => connection_id,
    "accounts.id-prefix" => id_prefix,
    "accounts.conditional-fields" => conditional_fields,
    "accounts.masked-numbers" => masked_numbers,
    "account.readable" => account_readable,
}

fn accounts_request(connection_id: &str) -> String {
    format!("GET /v1/connections/{connection_id}/accounts")
}

async fn refused_before_connected(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    let exchange = ctx.api.get(&["v1", "connections", &created.connection_id, "accounts"], &[]).await?;
    if !exchange.is_success() {
        return Ok(());
    }
    // A target may connect a connection on its own (and announce it late); if it did,
    // nothing was broken.
    if let Ok(receiver) = ctx.receiver() {
        let (connected, _) =
            receiver.wait_for_type(&created.connection_id, "connection.connected", ctx.config.event_wait()).await;
        if connected {
            return Err(Stop::ignore("the target connected the new connection on its own before it could be read"));
        }
    }
    Err(Stop::fail(format!(
        "{}: expected a refusal (any non-2xx) while the connection is CREATED (§3.2), got {}",
        exchange.request,
        exchange.summary()
    )))
}

async fn response_schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    validate(Schema::Accounts, &Value::Array(fixture.accounts.clone()), &accounts_request(&fixture.connection_id))
}

async fn connection_id(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for (i, account) in fixture.accounts.iter().enumerate() {
        let got = account.get("connectionId");
        if got.and_then(Value::as_str) != Some(fixture.connection_id.as_str()) {
            problems.add(format!(
                "{}: account {i} has connectionId {}, expected {:?}",
                accounts_request(&fixture.connection_id),
                got.map_or("nothing".into(), ToString::to_string),
                fixture.connection_id
            ));
        }
    }
    problems.finish()
}

async fn id_prefix(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for (i, account) in fixture.accounts.iter().enumerate() {
        if !str_field(account, "id").is_some_and(|id| id.starts_with(prefix::ACCOUNT)) {
            problems.add(format!(
                "{}: account {i} id {} does not start with {}",
                accounts_request(&fixture.connection_id),
                account.get("id").map_or("(absent)".into(), ToString::to_string),
                prefix::ACCOUNT
            ));
        }
    }
    problems.finish()
}

/// Which account types may carry a conditional field (§2.2). A key with `null` counts as
/// absent, and so does an empty array: "only for" read as "has entries only for" is defensible
/// (schemas/README.md, variant `empty-arrays-elsewhere`).
pub const CONDITIONAL_FIELDS: [(&str, &[&str]); 3] = [
    ("creditLimit", &["credit_card"]),
    ("currencyBalances", &["credit_card"]),
    ("positions", &["brokerage", "pension"]),
];

async fn conditional_fields(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for account in &fixture.accounts {
        let ty = str_field(account, "type").unwrap_or("?");
        for (field, allowed) in CONDITIONAL_FIELDS {
            let empty = |v: &serde_json::Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
            let present = account.get(field).is_some_and(|v| !empty(v));
            if present && !allowed.contains(&ty) {
                problems.add(format!(
                    "{}: account {} of type {ty:?} carries {field}, which §2.2 allows only on {}",
                    accounts_request(&fixture.connection_id),
                    str_field(account, "id").unwrap_or("?"),
                    allowed.join(" and ")
                ));
            }
        }
    }
    problems.finish()
}

/// Characters that mask digits in an account number (named in messages).
const MASKS: &[char] = &['*', '•', '●', 'x', 'X', '#', '…', '·'];

/// §2.2: "masked, only the last digits visible". Our reading: no digit shows except one final
/// group of at most 6 (`****1234`, `XXXX-XXXX-1234`, `…1234`, `1234`, or none at all).
pub fn is_masked(number: &str) -> bool {
    let head = number.trim_end_matches(|c: char| c.is_ascii_digit());
    let visible = number.len() - head.len();
    visible <= 6 && !head.chars().any(|c| c.is_ascii_digit())
}

async fn masked_numbers(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for account in &fixture.accounts {
        let id = str_field(account, "id").unwrap_or("?");
        match str_field(account, "accountNumber") {
            Some(n) if is_masked(n) => {}
            // The number itself is not printed: an unmasked one is sensitive.
            Some(n) => problems.add(format!(
                "{}: account {id} has an accountNumber that is not masked ({} digits visible, {})",
                accounts_request(&fixture.connection_id),
                n.chars().filter(char::is_ascii_digit).count(),
                if n.contains(MASKS) { "masked in part" } else { "no masking character" }
            )),
            None => problems
                .add(format!("{}: account {id} has no accountNumber string", accounts_request(&fixture.connection_id))),
        }
    }
    problems.finish()
}

async fn account_readable(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    if fixture.account_ids().is_empty() {
        return Err(Stop::ignore("the connection has no account to read"));
    }
    let mut problems = Problems::default();
    for id in fixture.account_ids() {
        let exchange = ctx.api.get(&["v1", "accounts", &id], &[]).await?;
        problems.keep(exchange.success_json().map(|_| ()))?;
    }
    problems.finish()
}

#[cfg(test)]
mod tests {
    use super::is_masked;

    #[test]
    fn masking_rule() {
        let samples = [
            ("****1234", true),
            ("•••• 1234", true),
            ("XXXX-XXXX-1234", true),
            ("DE** **** **** **** 3000", true),
            ("…1234", true),
            ("1234", true),
            ("****", true),
            ("1234567890", false),
            ("DE89370400440532013000", false),
            ("**** 1234 5678 9012", false),
            ("1234****5678", false),
            ("****1234567", false),
        ];
        for (number, masked) in samples {
            assert_eq!(is_masked(number), masked, "{number}");
        }
    }
}
