//! Every JSON body the sandbox sends is built here, one function per payload, so that a mutant
//! (a deliberately broken variant) only needs to change one place.

use super::model::{Account, Event, EventDetail, Transaction};
use crate::spec::ConnectionState;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Map, Value};

/// Minor units to a JSON number in the currency's amount unit (§2.2 `balance`).
pub(crate) fn amount(cents: i64) -> Value {
    json!(cents as f64 / 100.0)
}

/// RFC 3339 UTC with `Z`, whole seconds (§2.2 `createdAt`, `lastSyncedAt`; §2.3 `createdAt`).
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// RFC 3339 UTC with `Z` and milliseconds (§6.1 `created_at`, §6.2 `occurredAt`).
pub(crate) fn timestamp_millis(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The connection-creation response (§2.1, §4.1).
pub(crate) fn connection_created(id: &str, status: ConnectionState, widget_token: &str) -> Value {
    json!({
        "connectionId": id,
        "status": status.upper(),
        "widgetToken": widget_token,
    })
}

/// One account (§2.2), as listed by §4.2 and returned by §4.4. Type-specific fields are
/// absent (not null) on the types that do not have them.
pub(crate) fn account(a: &Account) -> Value {
    let mut v = json!({
        "id": a.id,
        "connectionId": a.connection_id,
        "name": a.name,
        "type": a.kind,
        "currency": a.currency,
        "balance": amount(a.balance_cents),
        "availableBalance": amount(a.available_cents),
        "accountNumber": format!("****{}", a.number_last4),
        "createdAt": timestamp(a.created_at),
        "lastSyncedAt": timestamp(a.last_synced_at),
        "institution": {
            "id": a.institution.id,
            "name": a.institution.name,
            "logo": null,
        },
    });
    let obj = v.as_object_mut().expect("object");
    if let Some(limit) = a.credit_limit_cents {
        obj.insert("creditLimit".into(), json!({ "amount": amount(limit), "currency": a.currency }));
    }
    if !a.currency_balances.is_empty() {
        let balances: Vec<Value> = a
            .currency_balances
            .iter()
            .map(|(cur, cents)| json!({ "currency": cur, "balance": amount(*cents) }))
            .collect();
        obj.insert("currencyBalances".into(), Value::Array(balances));
    }
    if !a.positions.is_empty() {
        let positions: Vec<Value> = a
            .positions
            .iter()
            .map(|p| json!({ "symbol": p.symbol, "quantity": p.quantity, "value": amount(p.value_cents) }))
            .collect();
        obj.insert("positions".into(), Value::Array(positions));
    }
    v
}

/// The accounts array of §4.2.
pub(crate) fn accounts<'a>(list: impl IntoIterator<Item = &'a Account>) -> Value {
    Value::Array(list.into_iter().map(account).collect())
}

/// One transaction (§2.3).
pub(crate) fn transaction(t: &Transaction) -> Value {
    json!({
        "id": t.id,
        "accountId": t.account_id,
        "amount": amount(t.amount_cents),
        "currency": t.currency,
        "description": t.description,
        "transactionDate": t.date.format("%Y-%m-%d").to_string(),
        "category": t.category,
        "status": "posted",
        "createdAt": timestamp(t.created_at),
    })
}

/// A transactions page (§4.3): `next_cursor` is the id of the last item, present only when
/// `has_more` is true.
pub(crate) fn page(items: &[Transaction], has_more: bool) -> Value {
    let mut v = json!({
        "data": items.iter().map(transaction).collect::<Vec<_>>(),
        "has_more": has_more,
    });
    if has_more {
        if let Some(last) = items.last() {
            v["next_cursor"] = json!(last.id);
        }
    }
    v
}

/// A webhook delivery: the envelope of §6.1 around the data object of §6.2. Connection events
/// carry `previousStatus` (lower case, null for `connection.created`) and `error` (null, or
/// `{code, message}` on entering the error state); account and transaction events carry
/// `accountId` (and `transactionId`) instead.
pub(crate) fn event(e: &Event) -> Value {
    let at = timestamp_millis(e.at);
    let mut data = Map::new();
    data.insert("eventId".into(), json!(e.id));
    data.insert("type".into(), json!(e.kind));
    data.insert("occurredAt".into(), json!(at));
    data.insert("clientId".into(), json!(e.client_id));
    data.insert("connectionId".into(), json!(e.connection_id));
    match &e.detail {
        EventDetail::Connection { previous, error } => {
            data.insert("previousStatus".into(), json!(previous.map(|s| s.lower())));
            let error = error.map(|(code, message)| json!({ "code": code, "message": message }));
            data.insert("error".into(), error.unwrap_or(Value::Null));
        }
        EventDetail::AccountsUpdated { account_id } => {
            data.insert("accountId".into(), json!(account_id));
        }
        EventDetail::TransactionDeleted { account_id, transaction_id } => {
            data.insert("accountId".into(), json!(account_id));
            data.insert("transactionId".into(), json!(transaction_id));
        }
    }
    json!({
        "id": e.id,
        "type": e.kind,
        "created_at": at,
        "data": Value::Object(data),
    })
}

/// The sandbox's error body (§7 leaves it open): `{"error": {"code", "message"}}`.
pub(crate) fn error(code: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message } })
}
