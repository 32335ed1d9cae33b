//! The seam of the objects the sandbox renders (`render.rs`): a connection's creation, an
//! account (listed, or read alone), a transaction, a page, an event. Each is built conforming,
//! then the fault registered here edits it; each row's code is the function named on it, below
//! the rows, and sees the record it was rendered from ([`Object`]).

use crate::sandbox::model::{Account, Event, EventDetail, Transaction};
use crate::sandbox::stamps::{amount, offset_timestamp, timestamp};
use crate::spec::ConnectionState;
use serde_json::{json, Value};

/// The rows of this seam, handed to `$then` (`seam!` here, `collect!` in `faults/mod.rs`).
macro_rules! objects {
    ($then:ident $($args:tt)*) => { $then! { $($args)*
    mutants {
        StatusLowercase = "status-lowercase", "§2.1", ["create.status-created", "create.response-schema"],
            "POST /v1/connections answers status `created` instead of `CREATED`" => status_lowercase;
        AccountMissingCurrency = "account-missing-currency", "§2.2", ["accounts.response-schema"],
            "accounts lack the required `currency`" => account_missing_currency;
        BalanceAsString = "balance-as-string", "§2.2", ["accounts.response-schema"],
            "account `balance` is a string (\"12.50\")" => balance_as_string;
        BalanceStringAfterUpdate = "balance-string-after-update", "§2.2", ["accounts.response-schema"],
            "an account's `balance` becomes a string once `update_accounts` changed it" => balance_string_after_update;
        AccountTypeUppercase = "account-type-uppercase", "§2.2", ["accounts.response-schema"],
            "account `type` is upper case (`CHECKING`)" => account_type_uppercase;
        AccountNumberUnmasked = "account-number-unmasked", "§2.2", ["accounts.masked-numbers"],
            "account numbers are served in full" => account_number_unmasked;
        AccountCreatedAtOffset = "account-created-at-offset", "§2.2", ["accounts.response-schema"],
            "account `createdAt` has a +02:00 offset instead of UTC" => account_created_at_offset;
        SyncedBeforeCreated = "synced-before-created", "§2.2", ["invariants.clock"],
            "an account's `lastSyncedAt` is two days before its `createdAt`: synced before it was created" => synced_before_created;
        CreditLimitOnChecking = "credit-limit-on-checking", "§2.2", ["accounts.conditional-fields", "accounts.response-schema"],
            "checking accounts carry `creditLimit`" => credit_limit_on_checking;
        PositionsOnSavings = "positions-on-savings", "§2.2", ["accounts.conditional-fields", "accounts.response-schema"],
            "savings accounts carry `positions`" => positions_on_savings;
        AccountConnectionIdWrong = "account-connection-id-wrong", "§2.2", ["accounts.connection-id"],
            "accounts name another connection in `connectionId`" => account_connection_id_wrong;
        AccountBalanceStale = "account-balance-stale", "§4.4", ["reactions.account-balance"],
            "GET /v1/accounts/{id} keeps serving the balance of before accounts.updated" => account_balance_stale;
        TransactionAccountIdWrong = "transaction-account-id-wrong", "§2.3", ["transactions.account-id"],
            "transactions name another account in `accountId`" => transaction_account_id_wrong;
        TransactionDateTime = "transaction-date-time", "§2.3", ["transactions.page-schema"],
            "`transactionDate` is a date-time instead of a date" => transaction_date_time;
        TransactionAmountString = "transaction-amount-string", "§2.3", ["transactions.page-schema"],
            "transaction `amount` is a string" => transaction_amount_string;
        TransactionCreatedAtOffset = "transaction-created-at-offset", "§2.3", ["transactions.page-schema"],
            "transaction `createdAt` has a +02:00 offset instead of UTC" => transaction_created_at_offset;
        TransactionStatusPending = "transaction-status-pending", "§2.3", ["transactions.status-posted"],
            "transactions have status `pending`, a value the spec does not show (an advisory note)" => transaction_status_pending;
        EventsWithoutConnectionId = "events-without-connection-id", "§6.2", ["events.schema", "events.created-announced"],
            "events carry no `data.connectionId`" => events_without_connection_id;
        PreviousStatusUppercase = "previous-status-uppercase", "§3.1", ["events.previous-status-chain", "events.schema"],
            "`previousStatus` is upper case" => previous_status_uppercase;
        PreviousStatusWrong = "previous-status-wrong", "§6.2", ["events.previous-status-chain"],
            "`previousStatus` always says `created`: the chain is broken" => previous_status_wrong;
        OccurredAtOffset = "occurred-at-offset", "§6.2", ["events.schema"],
            "`data.occurredAt` has a +02:00 offset instead of UTC" => occurred_at_offset;
        DataTypeMismatch = "data-type-mismatch", "§6.2", ["events.envelope-agrees"],
            "`data.type` differs from the envelope `type`" => data_type_mismatch;
        DataEventIdMismatch = "data-event-id-mismatch", "§6.2", ["events.envelope-agrees"],
            "`data.eventId` differs from the envelope `id`" => data_event_id_mismatch;
        SharedClientId = "shared-client-id", "§6.2", ["events.distinct-client-ids"],
            "every client's events carry one and the same `clientId`" => shared_client_id;
        TwoClientIds = "two-client-ids", "§6.2", ["events.single-client-id"],
            "account and transaction events carry another clientId than connection events" => two_client_ids;
        CreatedAtNoMillis = "created-at-no-millis", "§6.1", ["events.schema"],
            "envelope `created_at` has no milliseconds" => created_at_no_millis;
        CreatedAtMissing = "created-at-missing", "§6.1", ["events.schema"],
            "the envelope lacks `created_at`" => created_at_missing;
    }
    variants {
        CursorlessPages = "cursorless-pages", "§4.3", [],
            "no page carries next_cursor (not required, §4.3): a client continues after the last item's id" => cursorless_pages;
        IsoBasicTimestamps = "iso-basic-timestamps", "§2.2", [],
            "accounts' and transactions' createdAt and lastSyncedAt in ISO 8601's basic format (20261207T194815.620Z)" => iso_basic_timestamps;
    }
    } };
}

objects!(seam OBJECTS: ObjectFault;);

/// What an object was rendered from.
#[derive(Clone, Copy)]
pub(in crate::sandbox) enum Object<'a> {
    /// The answer to a creation (§4.1), with the new connection's state.
    Created(ConnectionState),
    /// An account (§2.2), in a list or read alone.
    Account(&'a Account),
    /// An account read alone (§4.4), after [`Object::Account`] edited it.
    SingleAccount(&'a Account),
    Transaction(&'a Transaction),
    /// A page of transactions (§4.3).
    Page,
    /// A webhook delivery's envelope (§6.1) and its data (§6.2).
    Event(&'a Event),
}

/// The seam's interface: an edit of the object rendered.
pub(in crate::sandbox) type ObjectFault = fn(Object<'_>, &mut Value);

impl Object<'_> {
    /// Itself, unless it is an account for which `keep` fails (then no account fault's).
    fn filter(self, keep: impl Fn(&Account) -> bool) -> Self {
        match self {
            Object::Account(a) if !keep(a) => Object::Page,
            _ => self,
        }
    }
}

fn text_amount(cents: i64) -> Value {
    json!(format!("{:.2}", cents as f64 / 100.0))
}

fn status_lowercase(o: Object<'_>, v: &mut Value) {
    if let Object::Created(status) = o {
        v["status"] = json!(status.lower());
    }
}

fn account_missing_currency(o: Object<'_>, v: &mut Value) {
    if let (Object::Account(_), Some(obj)) = (o, v.as_object_mut()) {
        obj.remove("currency");
    }
}

fn balance_as_string(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["balance"] = text_amount(a.balance_cents);
    }
}

fn balance_string_after_update(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o.filter(|a| a.updates > 0) {
        v["balance"] = text_amount(a.balance_cents);
    }
}

fn account_type_uppercase(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["type"] = json!(a.kind.to_ascii_uppercase());
    }
}

fn account_number_unmasked(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["accountNumber"] = json!(format!("DE8937040044053201{}", a.number_last4));
    }
}

fn account_created_at_offset(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["createdAt"] = json!(offset_timestamp(a.created_at));
    }
}

/// `synced-before-created`.
fn synced_before_created(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["lastSyncedAt"] = json!(timestamp(a.created_at - chrono::Duration::days(2)));
    }
}

fn credit_limit_on_checking(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o.filter(|a| a.kind == "checking") {
        v["creditLimit"] = json!({ "amount": 1000.0, "currency": a.currency });
    }
}

fn positions_on_savings(o: Object<'_>, v: &mut Value) {
    if let Object::Account(_) = o.filter(|a| a.kind == "savings") {
        v["positions"] = json!([{ "symbol": "VWRL", "quantity": 1, "value": 112.5 }]);
    }
}

fn account_connection_id_wrong(o: Object<'_>, v: &mut Value) {
    if let Object::Account(a) = o {
        v["connectionId"] = json!(format!("{}X", a.connection_id));
    }
}

/// `account-balance-stale`: the single read keeps the balance the account was seeded with.
fn account_balance_stale(o: Object<'_>, v: &mut Value) {
    if let Object::SingleAccount(a) = o {
        v["balance"] = amount(a.first_balance_cents.0);
        v["availableBalance"] = amount(a.first_balance_cents.1);
    }
}

fn transaction_account_id_wrong(o: Object<'_>, v: &mut Value) {
    if let Object::Transaction(t) = o {
        v["accountId"] = json!(format!("{}X", t.account_id));
    }
}

fn transaction_date_time(o: Object<'_>, v: &mut Value) {
    if let Object::Transaction(t) = o {
        v["transactionDate"] = json!(timestamp(t.created_at));
    }
}

fn transaction_status_pending(o: Object<'_>, v: &mut Value) {
    if let Object::Transaction(_) = o {
        v["status"] = json!("pending");
    }
}

fn transaction_amount_string(o: Object<'_>, v: &mut Value) {
    if let Object::Transaction(t) = o {
        v["amount"] = text_amount(t.amount_cents);
    }
}

fn transaction_created_at_offset(o: Object<'_>, v: &mut Value) {
    if let Object::Transaction(t) = o {
        v["createdAt"] = json!(offset_timestamp(t.created_at));
    }
}

fn cursorless_pages(o: Object<'_>, v: &mut Value) {
    if let (Object::Page, Some(page)) = (o, v.as_object_mut()) {
        page.remove("next_cursor");
    }
}

/// The data object (§6.2) of an event's envelope, with the event.
fn data<'o, 'v>(o: Object<'o>, v: &'v mut Value) -> Option<(&'o Event, &'v mut serde_json::Map<String, Value>)> {
    match o {
        Object::Event(e) => Some((e, v.get_mut("data")?.as_object_mut()?)),
        _ => None,
    }
}

/// `events-without-connection-id`: no event names the connection it concerns (§6.2: all do).
fn events_without_connection_id(o: Object<'_>, v: &mut Value) {
    if let Some((_, data)) = data(o, v) {
        data.remove("connectionId");
    }
}

fn previous_status_uppercase(o: Object<'_>, v: &mut Value) {
    if let Some((_, data)) = data(o, v) {
        if let Some(s) = data.get("previousStatus").and_then(Value::as_str).map(str::to_ascii_uppercase) {
            data.insert("previousStatus".into(), json!(s));
        }
    }
}

fn previous_status_wrong(o: Object<'_>, v: &mut Value) {
    if let Some((_, data)) = data(o, v) {
        if data.get("previousStatus").is_some_and(Value::is_string) {
            data.insert("previousStatus".into(), json!("created"));
        }
    }
}

fn occurred_at_offset(o: Object<'_>, v: &mut Value) {
    if let Some((e, data)) = data(o, v) {
        data.insert("occurredAt".into(), json!(offset_timestamp(e.at)));
    }
}

fn data_type_mismatch(o: Object<'_>, v: &mut Value) {
    if let Some((_, data)) = data(o, v) {
        data.insert("type".into(), json!("connection.updated"));
    }
}

fn data_event_id_mismatch(o: Object<'_>, v: &mut Value) {
    if let Some((e, data)) = data(o, v) {
        data.insert("eventId".into(), json!(format!("{}X", e.id)));
    }
}

fn shared_client_id(o: Object<'_>, v: &mut Value) {
    if let Some((_, data)) = data(o, v) {
        data.insert("clientId".into(), json!(format!("{}SHAREDBYEVERYCLIENT0000000", crate::spec::prefix::CLIENT)));
    }
}

fn two_client_ids(o: Object<'_>, v: &mut Value) {
    if let Some((e, data)) = data(o, v) {
        if !matches!(e.detail, EventDetail::Connection { .. }) {
            data.insert("clientId".into(), json!(format!("{}X", e.client_id)));
        }
    }
}

fn created_at_no_millis(o: Object<'_>, v: &mut Value) {
    if let Object::Event(e) = o {
        v["created_at"] = json!(timestamp(e.at));
    }
}

fn created_at_missing(o: Object<'_>, v: &mut Value) {
    if let (Object::Event(_), Some(envelope)) = (o, v.as_object_mut()) {
        envelope.remove("created_at");
    }
}

/// `iso-basic-timestamps` (legal): `2026-12-07T19:48:15.620Z` written `20261207T194815.620Z`, ISO
/// 8601's basic format, which "ISO 8601 UTC" (§2.2, §2.3) allows as it allows the extended one.
fn iso_basic_timestamps(o: Object<'_>, v: &mut Value) {
    if matches!(o, Object::Account(_) | Object::SingleAccount(_) | Object::Transaction(_)) {
        for field in ["createdAt", "lastSyncedAt"] {
            if let Some(text) = v.get(field).and_then(Value::as_str) {
                v[field] = json!(text.replace(['-', ':'], ""));
            }
        }
    }
}
