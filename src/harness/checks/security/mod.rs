//! §5 Authentication, and isolation between clients. The spec fixes no error status (§7), so
//! "refused" means any non-2xx answer; a 2xx answer is a failure only when it could serve data.
//! This file holds the authentication cases; isolation.rs the isolation between clients.

mod isolation;

use crate::harness::fixtures::context::{Connected, RunContext};
use crate::harness::rules::invariants::{Record, Verdict, MAX_FINDINGS};
use crate::harness::transport::answers::Auth;
use crate::harness::vocab::key_variant::KeyEdit;
use crate::harness::vocab::kind::AuthKind;
use crate::harness::vocab::outcome::{Problem, Problems, Stop};
use isolation::{
    deliveries_isolated, foreign_cursor, isolation_account, isolation_accounts, isolation_transactions, request_shapes,
    separate_addresses,
};
use reqwest::Method;
use std::sync::Arc;

super::cases! {
    MISSING_KEY = "auth.missing-key" => missing_key;
    MALFORMED_KEY = "auth.malformed-key" => malformed_key;
    UNKNOWN_KEY = "auth.unknown-key" => unknown_key;
    NEAR_MISS_KEY = "auth.near-miss-key" => near_miss_key;
    WIDGET_TOKEN = "auth.widget-token" => widget_token;
    ACCOUNTS = "isolation.accounts" => isolation_accounts;
    ACCOUNT = "isolation.account" => isolation_account;
    TRANSACTIONS = "isolation.transactions" => isolation_transactions;
    FOREIGN_CURSOR = "isolation.foreign-cursor" => foreign_cursor;
    REQUEST_SHAPES = "isolation.request-shapes" => request_shapes;
    DELIVERIES = "isolation.deliveries" => separate_addresses, models [deliveries_isolated];
    SECRET_STAYS = "auth.secret-stays-with-owner" => refused_reads, record [secrets_everywhere];
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
        refused(ctx, method, &segments, auth.clone(), what, &mut problems).await?;
    }
    problems.finish()
}

/// Sends `auth` to one endpoint: a 2xx is a problem (§5, any refusal will do, §7).
async fn refused(
    ctx: &RunContext,
    method: Method,
    segments: &[&str],
    auth: Auth,
    what: &str,
    problems: &mut Problems,
) -> Result<(), Stop> {
    let exchange = ctx.api.send(method, segments, &[], auth).await?;
    if exchange.is_success() {
        let detail =
            format!("{} {what}: expected a refusal (any non-2xx), got {}", exchange.request, exchange.summary());
        let problem =
            Problem::found(AuthKind::NotRefused, [], detail).expecting("a refusal (any non-2xx)", exchange.summary());
        problems.add_at(exchange.seq, problem);
    }
    Ok(())
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

/// §5: a key is accepted exactly or not at all. The run's key with a character more, with a
/// character cut off at either end, and with the case of its letters swapped is each a key the
/// service never issued (a variant equal to a key of this run is skipped, and so is a case swap
/// that changes nothing).
async fn near_miss_key(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let keys: Vec<String> = ctx.api.keys().map(str::to_string).collect();
    let Some(key) = keys.first() else { return Err(Stop::ignore("needs the API key (--api-key)")) };
    for (edit, what) in near_misses(key) {
        let near = edit.apply(key);
        if near.is_empty() || keys.contains(&near) {
            continue;
        }
        // A near miss is as secret as the key it comes from: never printed (the reproduction
        // makes it from `$BANKCONF_API_KEY`).
        ctx.redactor.add(&near);
        refused_everywhere(&ctx, Auth::NearKey(edit), what).await?;
    }
    // Keys of the right shape: one creation each (§4.1), which any client may do: accepted as
    // whichever client, a key the service never issued shows.
    let path = ["v1", "connections"];
    let mut problems = Problems::default();
    let mut tried = std::collections::HashSet::new();
    for (edit, what) in shapes(key) {
        let near = edit.apply(key);
        if near.is_empty() || keys.contains(&near) || !tried.insert(near.clone()) {
            continue;
        }
        // The service prefix alone is no secret (`auth.unknown-key` sends it too).
        if near.len() > shape_prefix(key).len() {
            ctx.redactor.add(&near);
        }
        refused(&ctx, Method::POST, &path, Auth::NearKey(edit), &what, &mut problems).await?;
    }
    problems.finish()
}

/// §5 items 2 and 3: the frontend holds the `widgetToken` (`sess_…`), never the API key, so the
/// token must not work as one. A fresh connection's token, sent as `Authorization: Bearer`, is
/// refused on every endpoint (it is redacted like a key: never printed). The connection is the
/// run's shared one, created and never driven (the cause experiment tries its token too): a
/// creation of its own cost the target a connection and a webhook for nothing (issue 72).
async fn widget_token(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let created = ctx.created().await?;
    let Some(token) = created.widget_token.clone() else {
        return Err(Stop::ignore(
            "the connection's creation carried no widgetToken (judged by create.response-schema)",
        ));
    };
    ctx.redactor.add(&token);
    let what = "with the connection's widgetToken as the Bearer key";
    refused_everywhere(&ctx, Auth::Header(format!("Bearer {token}")), what).await
}

/// The service prefix of a key (§5: a fixed prefix and an underscore), `""` when it has none.
fn shape_prefix(key: &str) -> &str {
    key.find('_').map_or("", |i| &key[..=i])
}

/// Keys of the real key's shape that the service never issued: every simple edit
/// (substitution, insertion, deletion, case change) at the first, middle and last character
/// after the service prefix, the same length with every such character replaced, and the
/// prefix alone. A target that compares a prefix and a length, or a few characters, accepts
/// some of them.
fn shapes(key: &str) -> Vec<(KeyEdit, String)> {
    let prefix = shape_prefix(key).chars().count();
    let rest: Vec<char> = key.chars().skip(prefix).collect();
    let Some(last) = rest.len().checked_sub(1) else { return Vec::new() };
    let mut out = Vec::new();
    for (at, place) in [(0, "first"), (rest.len() / 2, "middle"), (last, "last")] {
        let edits = [
            (
                KeyEdit::Bump { at: prefix + at },
                format!("with the API key's {place} character after its prefix replaced"),
            ),
            (
                KeyEdit::InsertBumped { at: prefix + at },
                format!("with the API key and a character inserted at its {place} after its prefix"),
            ),
            (
                KeyEdit::Remove { at: prefix + at },
                format!("with the API key short of its {place} character after its prefix"),
            ),
        ];
        out.extend(edits);
        if rest[at].is_ascii_alphabetic() {
            out.push((
                KeyEdit::SwapCaseAt { at: prefix + at },
                format!("with the API key's {place} character after its prefix in the other case"),
            ));
        }
    }
    out.push((
        KeyEdit::BumpFrom { from: prefix },
        "with a key of the API key's prefix and length, every other character replaced".into(),
    ));
    out.push((KeyEdit::Keep { len: prefix }, "with the API key's service prefix alone".into()));
    out
}

/// The near misses of `key`, each with what it is, for messages.
pub(crate) fn near_misses(key: &str) -> Vec<(KeyEdit, &'static str)> {
    let mut out = vec![
        (KeyEdit::Append('0'), "with the API key and one character more"),
        (KeyEdit::CutLast, "with the API key short of its last character"),
        (KeyEdit::CutFirst, "with the API key short of its first character"),
    ];
    if KeyEdit::SwapCase.apply(key) != key {
        out.push((KeyEdit::SwapCase, "with the API key in swapped letter case"));
    }
    out
}

/// Reads that a key's leak would answer: the reference's, and the accounts list asked with a
/// key of the service's shape that was never issued and with none (a "did you mean" helper, a
/// debugging header). The rule judges every answer and delivery of the run.
async fn refused_reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    use super::http::made;
    made(ctx.reference_reads().await)?;
    let Some(connected) = made(ctx.connected().await)? else { return Ok(()) };
    let path = ["v1", "connections", &connected.connection_id, "accounts"];
    let unknown = ctx.api.keys().next().map(|key| {
        let public = key.rfind('_').map_or(0, |at| at + 1);
        format!("Bearer {}{}", &key[..public], "Z".repeat(key.len().saturating_sub(public).max(8)))
    });
    for auth in unknown.map(Auth::Header).into_iter().chain([Auth::Missing]) {
        made(ctx.api.send(Method::GET, &path, &[], auth).await)?;
    }
    // One of its accounts read with the other client's key: a refusal that names what the key
    // may not have (its connection's widget token, §2.1) is judged with the rest.
    if let Some(account) = connected.account_ids().first() {
        made(ctx.api.send(Method::GET, &["v1", "accounts", account], &[], Auth::Second).await)?;
    }
    Ok(())
}

/// §5 item 2 over every byte received: no answer carries an API key other than the one its
/// request sent (an error's "did you mean", a debugging header), and no delivery to one client's
/// address carries the other client's key. Searched on arrival, before any redaction, whole
/// or a piece, plain, escaped or encoded (`rules::secrets`); the text is never kept.
fn secrets_everywhere(record: &Record) -> Verdict {
    use crate::harness::rules::invariants::{finding, Client};
    use crate::harness::vocab::kind::SecretKind;
    let mut verdict = Verdict::default();
    let whose = |c: &Client| match c {
        Client::First => "the first client's",
        Client::Second => "the second client's",
    };
    for seen in &record.answers {
        verdict.judged += 1;
        if !seen.revealed.is_empty() && verdict.found.len() < MAX_FINDINGS {
            let keys: Vec<&str> = seen.revealed.iter().map(whose).collect();
            let detail = format!(
                "{} ({}) answered a request that did not carry it with {} API key (whole or a piece, in a header \
                 or the body): a key stays on its client's backend (§5)",
                seen.request,
                seen.status,
                keys.join(" and ")
            );
            verdict.found.push(finding(
                Problem::found(SecretKind::KeyInAnswer, [seen.id.clone()], detail),
                &[seen.seq],
                &[],
            ));
        }
        if !seen.tokens.is_empty() && verdict.found.len() < MAX_FINDINGS {
            let tokens: Vec<&str> = seen.tokens.iter().map(whose).collect();
            let detail = format!(
                "{} ({}) answered a request not sent with its owner's key with {} widget token (of a connection that \
                 client created; whole or a piece, in a header or the body): a token opens its own connection's \
                 widget, in its own client's frontend only (§2.1, §5)",
                seen.request,
                seen.status,
                tokens.join(" and ")
            );
            verdict.found.push(finding(
                Problem::found(SecretKind::TokenInAnswer, [seen.id.clone()], detail),
                &[seen.seq],
                &[],
            ));
        }
    }
    for heard in &record.deliveries {
        verdict.judged += 1;
        if heard.delivery.other_clients_key && verdict.found.len() < MAX_FINDINGS {
            let to = match heard.delivery.to {
                crate::harness::rules::delivery::Recipient::First => "the first client's",
                crate::harness::rules::delivery::Recipient::Second => "the second client's",
            };
            let detail = format!(
                "a delivery to {to} webhook address ({}) carried the other client's API key (whole or a piece, in a \
                 header or the body): a key stays on its own client's backend (§5)",
                heard.delivery.label()
            );
            let about = heard.delivery.connection_id().map(str::to_string);
            verdict.found.push(finding(
                Problem::found(SecretKind::KeyInDelivery, about, detail),
                &[],
                &[heard.delivery.seq],
            ));
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_edit_after_the_prefix_and_never_equal_the_key() {
        let key = "bank_Ab3z9";
        let keys: Vec<String> = shapes(key).iter().map(|(edit, _)| edit.apply(key)).collect();
        assert!(keys.iter().all(|k| k != key && k.starts_with("bank_")), "{keys:?}");
        for expected in ["bank_Bb3z9", "bank_BAb3z9", "bank_b3z9", "bank_ab3z9", "bank_Ab3z0", "bank_Bc4a0", "bank_"] {
            assert!(keys.iter().any(|k| k == expected), "{expected} in {keys:?}");
        }
    }
}
