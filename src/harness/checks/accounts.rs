//! §4.2 Get connection accounts, §2.2 the account fields, §4.4 Get one account.

use super::Reply;
use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::delivery::Delivery;
use crate::harness::vocab::kind::{AccountKind, Kind};
use crate::harness::vocab::outcome::{str_field, Problem, Problems, Stop};
use crate::schemas::{self, Schema};
use crate::spec::{prefix, ConnectionState};
use serde_json::Value;
use std::sync::Arc;

super::cases! {
    REFUSED_BEFORE_CONNECTED = "accounts.refused-before-connected" => refused_before_connected,
        record [crate::harness::rules::invariants::available::judge];
    RESPONSE_SCHEMA = "accounts.response-schema" => reads_accounts, responds [ConnectionAccounts => schema];
    CONNECTION_ID = "accounts.connection-id" => reads_accounts, responds [ConnectionAccounts => connection_id];
    ID_PREFIX = "accounts.id-prefix" => reads_accounts, responds [ConnectionAccounts => id_prefix];
    DISTINCT_IDS = "accounts.distinct-ids" => reads_accounts, responds [ConnectionAccounts => distinct_ids];
    CONDITIONAL_FIELDS = "accounts.conditional-fields" => reads_accounts, responds [ConnectionAccounts => conditional_fields];
    MASKED_NUMBERS = "accounts.masked-numbers" => reads_accounts, responds [ConnectionAccounts => masked_numbers];
    READABLE = "account.readable" => account_readable;
}

/// The flow of the response-checked cases: the accounts of a CONNECTED connection of each
/// client, read (every other accounts answer of the run is judged too).
async fn reads_accounts(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.reference_reads().await
}

/// The accounts of the answer, each with its id for messages.
fn accounts<'a>(reply: &'a Reply) -> impl Iterator<Item = (&'a Value, &'a str)> {
    reply.body.as_array().into_iter().flatten().map(|a| (a, str_field(a, "id").unwrap_or("<no id>")))
}

/// A CREATED connection's accounts are refused (§3.2); and beside it, a connection of its own
/// whose accounts are read while it connects: whatever those reads are answered with,
/// `rules::invariants::available` judges them against when the connection entered CONNECTED,
/// as it judges every other accounts answer of the run.
async fn refused_before_connected(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (created, connecting) = tokio::join!(refused_when_created(&ctx), reads_while_connecting(&ctx));
    // The reads only add to the record: a target or driver that cannot connect leaves the
    // CREATED connection's verdict standing (other cases say why it could not).
    let connecting = match connecting {
        Err(Stop::Ignore(..) | Stop::Error(..)) => Ok(()),
        other => other,
    };
    created.and(connecting)
}

/// The states a connection passes through on its way to CONNECTED (or a failure) after `connect`.
const ON_THE_WAY: [ConnectionState; 3] =
    [ConnectionState::Created, ConnectionState::CredentialsSubmitted, ConnectionState::Verifying];

/// How often, and at most how many times, the accounts of a connecting connection are read.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);
const MAX_POLLS: usize = 40;

/// Creates a connection and drives `connect`; from then on, reads its accounts every [`POLL`]
/// (at most [`MAX_POLLS`] times) until an event of a state past [`ON_THE_WAY`] has arrived
/// (awaited, so that the record holds what the reads are judged against): a state a server
/// passes through for a moment is sampled whenever it lasts. Without a driver or a receiver,
/// nothing is done; a driver that fails ends the reads.
async fn reads_while_connecting(ctx: &RunContext) -> Result<(), Stop> {
    let (Some(_), Ok(receiver)) = (ctx.driver.as_ref(), ctx.receiver()) else { return Ok(()) };
    let created = ctx.create_connection().await?;
    let id = created.connection_id.as_str();
    let past = |ds: &[Delivery]| {
        ds.iter().filter_map(|d| ConnectionState::from_event_type(d.event_type()?)).any(|s| !ON_THE_WAY.contains(&s))
    };
    let reads = async {
        for _ in 0..MAX_POLLS {
            if past(&receiver.for_connection(id)) {
                return Ok(());
            }
            ctx.api.get(&["v1", "connections", id, "accounts"], &[]).await?;
            tokio::time::sleep(POLL).await;
        }
        let what = format!("the event that ends {id}'s connecting");
        receiver.wait_until(&what, id, ctx.plan.event_wait(), past).await;
        Ok::<(), Stop>(())
    };
    let drive = ctx.drive(crate::spec::Action::Connect, &created, None, None);
    tokio::pin!(reads, drive);
    tokio::select! {
        driven = &mut drive => match driven {
            Ok(()) => reads.await,
            Err(stop) => Err(stop),
        },
        read = &mut reads => read.and(drive.await),
    }
}

/// The run's CREATED connection: its accounts are refused (any non-2xx), unless the target
/// connected it on its own.
async fn refused_when_created(ctx: &RunContext) -> Result<(), Stop> {
    let created = ctx.created().await?;
    let exchange = ctx.api.get(&["v1", "connections", &created.connection_id, "accounts"], &[]).await?;
    if !exchange.is_success() {
        return Ok(());
    }
    // A target may connect a connection on its own (and announce it late); if it did,
    // nothing was broken.
    if let Ok(receiver) = ctx.receiver() {
        let (connected, _) =
            receiver.wait_for_type(&created.connection_id, "connection.connected", ctx.plan.event_wait()).await;
        if connected {
            return Err(Stop::ignore("the target connected the new connection on its own before it could be read"));
        }
    }
    let detail =
        format!("expected a refusal (any non-2xx) while the connection is CREATED (§3.2), got {}", exchange.summary());
    let problem = Problem::found(AccountKind::ServedWhenCreated, [created.connection_id.clone()], detail)
        .expecting("a refusal (any non-2xx)", exchange.summary());
    Err(exchange.fails(problem))
}

/// §4.2: every accounts answer validates against accounts.json.
fn schema(reply: &Reply) -> Vec<Problem> {
    let violated = schemas::violated(Schema::Accounts, reply.body).err();
    violated
        .map(|v| Problem::found(Kind::Account(AccountKind::Schema), [reply.id.to_string()], v))
        .into_iter()
        .collect()
}

/// §4.2 lists the accounts linked to the connection, and an id identifies one account (§2): a
/// list is a set, holding each account once.
fn distinct_ids(reply: &Reply) -> Vec<Problem> {
    let mut seen = std::collections::HashSet::new();
    let twice: std::collections::BTreeSet<&str> = accounts(reply)
        .filter(|(a, _)| a.get("id").is_some())
        .map(|(_, id)| id)
        .filter(|id| !seen.insert(*id))
        .collect();
    twice
        .into_iter()
        .map(|id| {
            let detail = format!("lists account {id} more than once (§4.2: the accounts linked to the connection)");
            Problem::found(Kind::Account(AccountKind::Repeated), [id.to_string()], detail)
                .expecting("once", "more than once")
        })
        .collect()
}

/// §2.2: each account names the connection asked for.
fn connection_id(reply: &Reply) -> Vec<Problem> {
    accounts(reply)
        .filter(|(a, _)| str_field(a, "connectionId") != Some(reply.id))
        .map(|(a, id)| {
            let got = a.get("connectionId").map_or("nothing".into(), ToString::to_string);
            let expected = format!("{:?}", reply.id);
            let detail = format!("account {id} has connectionId {got}, expected {expected}");
            Problem::found(Kind::Account(AccountKind::ConnectionId), [id.to_string(), reply.id.to_string()], detail)
                .expecting(expected, got)
        })
        .collect()
}

/// §2: account ids carry `acc_`.
fn id_prefix(reply: &Reply) -> Vec<Problem> {
    accounts(reply)
        .filter(|(a, _)| !str_field(a, "id").is_some_and(|id| id.starts_with(prefix::ACCOUNT)))
        .map(|(a, id)| {
            let got = a.get("id").map_or("(absent)".into(), ToString::to_string);
            let detail = format!("account id {got} does not start with {}", prefix::ACCOUNT);
            Problem::found(Kind::Account(AccountKind::IdPrefix), [id.to_string()], detail)
                .expecting(format!("an id starting with {}", prefix::ACCOUNT), got)
        })
        .collect()
}

/// Which account types may carry a conditional field (§2.2). A key with `null` counts as
/// absent, and so does an empty array: "only for" read as "has entries only for" is defensible
/// (schemas/README.md, variant `empty-arrays-elsewhere`).
pub(super) const ALLOWED_ON: [(&str, &[&str]); 3] = [
    ("creditLimit", &["credit_card"]),
    ("currencyBalances", &["credit_card"]),
    ("positions", &["brokerage", "pension"]),
];

fn conditional_fields(reply: &Reply) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (account, id) in accounts(reply) {
        let ty = str_field(account, "type").unwrap_or("?");
        for (field, allowed) in ALLOWED_ON {
            let empty = |v: &Value| v.is_null() || v.as_array().is_some_and(Vec::is_empty);
            let present = account.get(field).is_some_and(|v| !empty(v));
            if present && !allowed.contains(&ty) {
                let only = allowed.join(" and ");
                let detail = format!("account {id} of type {ty:?} carries {field}, which §2.2 allows only on {only}");
                let kind = Kind::Account(AccountKind::ConditionalField);
                problems.push(
                    Problem::found(kind, [id.to_string()], detail)
                        .expecting(format!("{field} only on {only}"), format!("{field} on {ty:?}")),
                );
            }
        }
    }
    problems
}

/// Characters that mask digits in an account number (named in messages).
const MASKS: &[char] = &['*', '•', '●', 'x', 'X', '#', '…', '·'];

/// §2.2: "masked, only the last digits visible". Our reading: no digit shows except one final
/// group of at most 6 (`****1234`, `XXXX-XXXX-1234`, `…1234`, `1234`, or none at all).
pub(super) fn is_masked(number: &str) -> bool {
    let head = number.trim_end_matches(|c: char| c.is_ascii_digit());
    let visible = number.len() - head.len();
    visible <= 6 && !head.chars().any(|c| c.is_ascii_digit())
}

/// §2.2 (security): the account number is masked.
fn masked_numbers(reply: &Reply) -> Vec<Problem> {
    let mut problems = Vec::new();
    let kind = Kind::Account(AccountKind::Unmasked);
    for (account, id) in accounts(reply) {
        match str_field(account, "accountNumber") {
            Some(n) if is_masked(n) => {}
            // The number itself is not printed: an unmasked one is sensitive.
            Some(n) => {
                let digits = n.chars().filter(char::is_ascii_digit).count();
                let how = if n.contains(MASKS) { "masked in part" } else { "no masking character" };
                let detail =
                    format!("account {id} has an accountNumber that is not masked ({digits} digits visible, {how})");
                let expected = "masked: no digit visible but a last group of at most 6";
                problems.push(
                    Problem::found(kind, [id.to_string()], detail)
                        .expecting(expected, format!("{digits} digits visible, {how}")),
                );
            }
            None => problems.push(Problem::found(
                kind,
                [id.to_string()],
                format!("account {id} has no accountNumber string"),
            )),
        }
    }
    problems
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
    use super::{connection_id, is_masked, Reply};
    use crate::harness::vocab::kind::{AccountKind, Kind};

    /// A rule that compares two values says both apart from its sentence (issue 74): the JSON
    /// report's `expected` and `received`, its kind and the ids it is about.
    #[test]
    fn a_wrong_connection_id_is_a_typed_problem() {
        let body = serde_json::json!([{"id": "acc_1", "connectionId": "conn_other"}]);
        let found = connection_id(&Reply { id: "conn_1", limit: None, body: &body });
        let [one] = found.as_slice() else { panic!("one problem: {found:?}") };
        assert_eq!(one.detail, "account acc_1 has connectionId \"conn_other\", expected \"conn_1\"");
        assert_eq!(one.kind, Some(Kind::Account(AccountKind::ConnectionId)));
        assert_eq!(one.about, ["acc_1", "conn_1"]);
        let contrast = one.contrast.as_deref().expect("expected and received");
        assert_eq!((contrast.expected.as_str(), contrast.actual.as_str()), ("\"conn_1\"", "\"conn_other\""));
    }

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
