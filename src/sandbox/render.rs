//! Every JSON body the sandbox sends is built here, one function per payload, so that a mutant
//! or a variant ([`super::faults`]) only needs to change one place.

use super::faults::objects::{Object, OBJECTS};
use super::faults::Variant;
use super::flavor::Flavor;
use super::model::{Account, Event, EventDetail, Transaction};
pub(crate) use super::stamps::{amount, timestamp, timestamp_millis};
use crate::spec::ConnectionState;
use serde_json::{json, Map, Value};

/// The connection-creation response (§2.1, §4.1).
pub(crate) fn connection_created(f: Flavor, id: &str, status: ConnectionState, widget_token: &str) -> Value {
    let mut v = json!({
        "connectionId": id,
        "status": status.upper(),
        "widgetToken": widget_token,
    });
    extra(f, &mut v);
    fault(f, Object::Created(status), &mut v);
    v
}

/// `v`, rendered from `object`, edited by the fault of the seam of objects, if one acts.
fn fault(f: Flavor, object: Object<'_>, v: &mut Value) {
    if let Some(fault) = f.seam(&OBJECTS) {
        fault(object, v);
    }
}

/// [`Variant::ExtraFields`]: fields the spec does not show (§2.1 says they exist).
fn extra(f: Flavor, v: &mut Value) {
    if f.has(Variant::ExtraFields) {
        v["x_sandbox"] = json!({ "note": "extra field", "n": 1 });
        v["livemode"] = json!(false);
    }
}

/// One account (§2.2), as listed by §4.2 and returned by §4.4. Type-specific fields are
/// absent (not null) on the types that do not have them.
pub(crate) fn account(f: Flavor, a: &Account) -> Value {
    let mut v = json!({
        "id": a.id,
        "connectionId": a.connection_id,
        "name": a.name,
        "type": a.kind,
        "currency": a.currency,
        "balance": amount(a.balance_cents),
        "availableBalance": amount(a.available_cents),
        "accountNumber": format!("****{}", a.number_last4),
        // With milliseconds: a read made late shows in it at once (`invariants.clock`).
        "createdAt": timestamp_millis(a.created_at),
        "lastSyncedAt": timestamp(a.last_synced_at),
        "institution": {
            "id": a.institution.id,
            "name": a.institution.name,
            "logo": null,
        },
    });
    extra(f, &mut v);
    fault(f, Object::Account(a), &mut v);
    let obj = v.as_object_mut().expect("object");
    if f.has(Variant::MinimalFields) {
        obj.remove("lastSyncedAt");
        obj.remove("institution");
    }
    if f.has(Variant::EmptyArraysElsewhere) {
        // §2.2 says which types have them; an empty array elsewhere is a defensible reading.
        obj.insert("positions".into(), json!([]));
        obj.insert("currencyBalances".into(), json!([]));
    }
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

/// §4.4: one account, with its current balance.
pub(crate) fn single_account(f: Flavor, a: &Account) -> Value {
    let mut v = account(f, a);
    fault(f, Object::SingleAccount(a), &mut v);
    v
}

/// The accounts array of §4.2.
pub(crate) fn accounts<'a>(f: Flavor, list: impl IntoIterator<Item = &'a Account>) -> Value {
    Value::Array(list.into_iter().map(|a| account(f, a)).collect())
}

/// One transaction (§2.3).
pub(crate) fn transaction(f: Flavor, t: &Transaction) -> Value {
    if f.has(Variant::MinimalFields) {
        return json!({ "id": t.id, "accountId": t.account_id, "amount": amount(t.amount_cents) });
    }
    let mut v = json!({
        "id": t.id,
        "accountId": t.account_id,
        "amount": amount(t.amount_cents),
        "currency": t.currency,
        "description": t.description,
        "transactionDate": t.date.format("%Y-%m-%d").to_string(),
        "category": t.category,
        "status": "posted",
        "createdAt": timestamp(t.created_at),
    });
    extra(f, &mut v);
    fault(f, Object::Transaction(t), &mut v);
    v
}

/// [`Variant::OpaqueCursor`]: the token standing for "after transaction `id`".
pub(crate) fn opaque_cursor(id: &str) -> String {
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("cur.{hex}")
}

/// The transaction id an [`opaque_cursor`] token stands for.
pub(crate) fn cursor_id(token: &str) -> Option<String> {
    let hex = token.strip_prefix("cur.")?;
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

/// A transactions page (§4.3): `next_cursor` (the id of the last item, `cursor`) is present
/// only when `has_more` is true.
pub(crate) fn page(f: Flavor, items: &[&Transaction], has_more: bool, cursor: Option<&str>) -> Value {
    let mut v = json!({
        "data": items.iter().map(|t| transaction(f, t)).collect::<Vec<_>>(),
        "has_more": has_more,
    });
    let cursor = if f.has(Variant::OpaqueCursor) { cursor.map(opaque_cursor) } else { cursor.map(str::to_string) };
    if has_more || f.has(Variant::ExtraFields) {
        if let Some(cursor) = cursor {
            v["next_cursor"] = json!(cursor);
        }
    }
    extra(f, &mut v);
    fault(f, Object::Page, &mut v);
    v
}

/// The short flat form §6.2 shows for the `connection.connected` delivery (whole seconds).
pub(crate) fn short_form(e: &Event) -> Value {
    json!({ "event": e.kind, "connectionId": e.connection_id, "timestamp": timestamp(e.at) })
}

/// A webhook delivery: the envelope of §6.1 around the data object of §6.2. Connection events
/// carry `previousStatus` (lower case, null for `connection.created`) and `error` (null, or
/// `{code, message}` on entering the error state); account and transaction events carry
/// `accountId` (and `transactionId`) instead.
pub(crate) fn event(f: Flavor, e: &Event) -> Value {
    if f.has(Variant::ShortConnected) && e.kind == "connection.connected" {
        return short_form(e);
    }
    let at = timestamp_millis(e.at);
    let mut data = Map::new();
    data.insert("eventId".into(), json!(e.id));
    data.insert("type".into(), json!(e.kind));
    data.insert("occurredAt".into(), json!(at));
    data.insert("clientId".into(), json!(e.client_id));
    data.insert("connectionId".into(), json!(e.connection_id));
    match &e.detail {
        EventDetail::Connection { previous, error } => {
            let previous = match previous {
                None if f.has(Variant::EmptyPreviousOnCreated) => json!(""),
                p => json!(p.map(|s| s.lower())),
            };
            if !(previous.is_null() && f.has(Variant::NoPreviousOnCreated)) {
                data.insert("previousStatus".into(), previous);
            }
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
    let mut data = Value::Object(data);
    extra(f, &mut data);
    let mut v = json!({
        "id": e.id,
        "type": e.kind,
        "created_at": at,
        "data": data,
    });
    extra(f, &mut v);
    fault(f, Object::Event(e), &mut v);
    v
}

/// The sandbox's error body (§7 leaves it open): `{"error": {"code", "message"}}`.
pub(crate) fn error(code: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message } })
}
