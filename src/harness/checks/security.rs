//! §5 Authentication, and isolation between clients. The spec fixes no error status (§7), so
//! "refused" means any non-2xx answer; a 2xx answer is a failure only when it could serve data.

use crate::harness::fixtures::{Connected, RunContext};
use crate::harness::http::{Auth, Exchange};
use crate::harness::outcome::{Problems, Stop};

use reqwest::Method;
use std::sync::Arc;

crate::cases! {
    MISSING_KEY = "auth.missing-key" => missing_key;
    MALFORMED_KEY = "auth.malformed-key" => malformed_key;
    UNKNOWN_KEY = "auth.unknown-key" => unknown_key;
    ACCOUNTS = "isolation.accounts" => isolation_accounts;
    ACCOUNT = "isolation.account" => isolation_account;
    TRANSACTIONS = "isolation.transactions" => isolation_transactions;
}

/// Every endpoint of §4, with the fixture's ids.
fn endpoints(fixture: &Connected) -> Vec<(Method, Vec<String>)> {
    let mut out = vec![
        (Method::POST, vec!["v1".into(), "connections".into()]),
        (Method::GET, vec!["v1".into(), "connections".into(), fixture.connection_id.clone(), "accounts".into()]),
    ];
    if let Some(account) = fixture.account_ids().first() {
        out.push((Method::GET, vec!["v1".into(), "accounts".into(), account.clone()]));
        out.push((Method::GET, vec!["v1".into(), "accounts".into(), account.clone(), "transactions".into()]));
    }
    out
}

/// Sends `auth` to every endpoint; each must be refused.
async fn refused_everywhere(ctx: &RunContext, auth: Auth, what: &str) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for (method, segments) in endpoints(&fixture) {
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let exchange = ctx.api.send(method, &segments, &[], auth.clone()).await?;
        if exchange.is_success() {
            problems.add(format!(
                "{} {what}: expected a refusal (any non-2xx), got {}",
                exchange.request,
                exchange.summary()
            ));
        }
    }
    problems.finish()
}

async fn missing_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    refused_everywhere(&ctx, Auth::Missing, "without Authorization").await
}

async fn malformed_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    for (header, what) in [
        ("Bearer", "with `Authorization: Bearer` and no key"),
        ("Bearer not a key", "with `Authorization: Bearer not a key`"),
        ("Basic Zm9vOmJhcg==", "with Basic credentials"),
    ] {
        refused_everywhere(&ctx, Auth::Header(header.to_string()), what).await?;
    }
    Ok(())
}

async fn unknown_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    // Same shape as a real key (§5.2: a service prefix, an underscore, more characters).
    let key = ctx.api.keys().next().unwrap_or_default().to_string();
    // Only the service prefix, up to the first underscore: the rest of a key is secret.
    let prefix = key.find('_').map_or("unknown_", |i| &key[..=i]);
    let forged = format!("Bearer {prefix}bankconfNeverIssued0000000000");
    refused_everywhere(&ctx, Auth::Header(forged), "with a well-formed key the service never issued").await
}

/// A 2xx answer to another client leaks data when it names any of `ids`.
fn leaks(exchange: &Exchange, ids: &[String]) -> Option<String> {
    leaks_to(exchange, ids, "the second client's key")
}

fn leaks_to(exchange: &Exchange, ids: &[String], whose: &str) -> Option<String> {
    if !exchange.is_success() {
        return None;
    }
    ids.iter().find(|id| exchange.body.contains(id.as_str())).map(|id| {
        format!("{} with {whose}: expected a refusal, got status {} naming {id}", exchange.request, exchange.status)
    })
}

/// The other direction: the second client's CONNECTED connection from the tour (§5: each
/// client sees only its own data) and its accounts, read with its own key. `None` when the tour
/// did not connect one (no webhooks, or the target refused): then only one direction is checked.
async fn second_client_data(ctx: &RunContext) -> Result<Option<(String, Vec<String>)>, Stop> {
    let Ok(tour) = ctx.tour().await else { return Ok(None) };
    let Some(created) = tour.legs.iter().filter(|l| l.client == Auth::Second).find_map(|l| l.created.as_ref().ok())
    else {
        return Ok(None);
    };
    let id = created.connection_id.clone();
    let own = ctx.api.send(Method::GET, &["v1", "connections", &id, "accounts"], &[], Auth::Second).await?;
    let accounts = match own.success_json() {
        Ok(serde_json::Value::Array(items)) => {
            items.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_string)).collect()
        }
        _ => return Ok(None),
    };
    Ok(Some((id, accounts)))
}

/// Reads the second client's data with the first client's key: each read must be refused or
/// name none of it. `read` gives the paths to try.
async fn first_reads_second(
    ctx: &RunContext,
    problems: &mut Problems,
    read: impl Fn(&str, &[String]) -> Vec<(Vec<String>, Vec<String>)>,
) -> Result<(), Stop> {
    let Some((connection, accounts)) = second_client_data(ctx).await? else { return Ok(()) };
    for (path, ids) in read(&connection, &accounts) {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let exchange = ctx.api.send(Method::GET, &path, &[], Auth::Primary).await?;
        if let Some(m) = leaks_to(&exchange, &ids, "the first client's key, of the second client's data") {
            problems.add(m);
        }
    }
    Ok(())
}

async fn isolation_accounts(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let exchange = ctx
        .api
        .send(Method::GET, &["v1", "connections", &fixture.connection_id, "accounts"], &[], Auth::Second)
        .await?;
    let mut ids = fixture.account_ids();
    ids.push(fixture.connection_id.clone());
    let mut problems = Problems::default();
    if let Some(m) = leaks(&exchange, &ids) {
        problems.add(m);
    }
    first_reads_second(&ctx, &mut problems, |connection, accounts| {
        let path = ["v1", "connections", connection, "accounts"].map(str::to_string).to_vec();
        vec![(path, [accounts, &[connection.to_string()][..]].concat())]
    })
    .await?;
    problems.finish()
}

async fn isolation_account(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for id in fixture.account_ids() {
        let exchange = ctx.api.send(Method::GET, &["v1", "accounts", &id], &[], Auth::Second).await?;
        if let Some(m) = leaks(&exchange, std::slice::from_ref(&id)) {
            problems.add(m);
        }
    }
    first_reads_second(&ctx, &mut problems, |_, accounts| {
        accounts.iter().map(|a| (["v1", "accounts", a].map(str::to_string).to_vec(), vec![a.clone()])).collect()
    })
    .await?;
    problems.finish()
}

async fn isolation_transactions(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let mut problems = Problems::default();
    for (account, walk) in fixture.walks()? {
        let mut ids: Vec<String> = walk.ids();
        ids.push(account.to_string());
        let exchange =
            ctx.api.send(Method::GET, &["v1", "accounts", account, "transactions"], &[], Auth::Second).await?;
        if let Some(m) = leaks(&exchange, &ids) {
            problems.add(m);
        }
    }
    first_reads_second(&ctx, &mut problems, |_, accounts| {
        let path = |a: &String| ["v1", "accounts", a, "transactions"].map(str::to_string).to_vec();
        accounts.iter().map(|a| (path(a), vec![a.clone()])).collect()
    })
    .await?;
    problems.finish()
}
