//! Tests of the JSON Schemas in `schemas/` (rulings: `schemas/README.md`).
//!
//! Valid documents are built from the spec's statements; every constraint has an invalid
//! document whose violation must name the offending field (`instance_path`).

use bankconf::internal::schemas::{validate, Schema, Violation, ID_BASE, MAX_MESSAGE_CHARS};
use serde_json::{json, Value};
use std::collections::BTreeSet;

const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
const STATES: [&str; 8] = [
    "created",
    "credentials_submitted",
    "verifying",
    "connected",
    "mfa_required",
    "failed_auth",
    "error",
    "disconnected",
];
const EVENT_TYPES: [&str; 10] = [
    "connection.created",
    "connection.credentials_submitted",
    "connection.verifying",
    "connection.connected",
    "connection.mfa_required",
    "connection.failed_auth",
    "connection.error",
    "connection.disconnected",
    "accounts.updated",
    "transaction.deleted",
];

// ---------------------------------------------------------------- document builders

/// `doc` with the value at JSON pointer `path` replaced (or added, the parent must exist).
fn with(mut doc: Value, path: &str, value: Value) -> Value {
    let (parent, key) = path.rsplit_once('/').expect("pointer");
    match doc.pointer_mut(parent).expect("parent exists") {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
        }
        Value::Array(items) => items[key.parse::<usize>().expect("index")] = value,
        _ => panic!("{parent} is not a container"),
    }
    doc
}

/// `doc` without the member at JSON pointer `path`.
fn without(mut doc: Value, path: &str) -> Value {
    let (parent, key) = path.rsplit_once('/').expect("pointer");
    doc.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("parent object")
        .remove(key)
        .unwrap_or_else(|| panic!("{path} absent"));
    doc
}

fn connection_created() -> Value {
    json!({
        "connectionId": "conn_01HZX3K9Q2W8E5R7T1Y4U6I0OP",
        "status": "CREATED",
        "widgetToken": "sess_01HZX3K9Q2W8E5R7T1Y4U6I0OQ"
    })
}

/// A minimal account: only the `*` fields of §2.2.
fn minimal_account(kind: &str) -> Value {
    json!({
        "id": "acc_01HZX3K9Q2W8E5R7T1Y4U6I0OA",
        "connectionId": "conn_01HZX3K9Q2W8E5R7T1Y4U6I0OP",
        "name": "Everyday account",
        "type": kind,
        "currency": "EUR",
        "balance": 1250.5,
        "availableBalance": 1200,
        "accountNumber": "****1234",
        "createdAt": "2024-01-15T10:30:00Z"
    })
}

/// A full account of `kind`: every §2.2 field that may occur on that type.
fn full_account(kind: &str) -> Value {
    let mut account = minimal_account(kind);
    account["lastSyncedAt"] = json!("2024-06-01T08:00:00.123Z");
    account["institution"] = json!({"id": "ins_1", "name": "Example Bank", "logo": null});
    match kind {
        "credit_card" => {
            account["creditLimit"] = json!({"amount": 5000, "currency": "EUR"});
            account["currencyBalances"] = json!([{"currency": "USD", "balance": -12.5}]);
            account["balance"] = json!(-340.25);
            account["availableBalance"] = json!(4659.75);
        }
        "brokerage" | "pension" => {
            account["positions"] = json!([{"isin": "IE00B4L5Y983", "quantity": 3}]);
        }
        _ => {}
    }
    account
}

fn transaction() -> Value {
    json!({
        "id": "txn_01HZX3K9Q2W8E5R7T1Y4U6I0OT",
        "accountId": "acc_01HZX3K9Q2W8E5R7T1Y4U6I0OA",
        "amount": -42.17,
        "currency": "EUR",
        "description": "Grocery store",
        "transactionDate": "2024-01-14",
        "category": "groceries",
        "status": "posted",
        "createdAt": "2024-01-15T10:30:00.000Z"
    })
}

fn page() -> Value {
    json!({
        "data": [transaction(), with(transaction(), "/id", json!("txn_2"))],
        "has_more": true,
        "next_cursor": "txn_2"
    })
}

/// A §6.1 envelope of `event_type` with the §6.2 data that type carries.
fn event(event_type: &str) -> Value {
    let mut data = json!({
        "eventId": "evt_01HZX3K9Q2W8E5R7T1Y4U6I0OE",
        "type": event_type,
        "occurredAt": "2024-01-15T10:30:00.123Z",
        "clientId": "cli_01HZX3K9Q2W8E5R7T1Y4U6I0OC",
        "connectionId": "conn_01HZX3K9Q2W8E5R7T1Y4U6I0OP"
    });
    if event_type.starts_with("connection.") {
        data["previousStatus"] = if event_type == "connection.created" { Value::Null } else { json!("verifying") };
        data["error"] = Value::Null;
    }
    if event_type == "accounts.updated" || event_type == "transaction.deleted" {
        data["accountId"] = json!("acc_01HZX3K9Q2W8E5R7T1Y4U6I0OA");
    }
    if event_type == "transaction.deleted" {
        data["transactionId"] = json!("txn_01HZX3K9Q2W8E5R7T1Y4U6I0OT");
    }
    json!({
        "id": "evt_01HZX3K9Q2W8E5R7T1Y4U6I0OE",
        "type": event_type,
        "created_at": "2024-01-15T10:30:00.123Z",
        "data": data
    })
}

fn short_form() -> Value {
    json!({
        "event": "connection.connected",
        "connectionId": "conn_01HZX3K9Q2W8E5R7T1Y4U6I0OP",
        "timestamp": "2024-01-15T10:30:00Z"
    })
}

// ---------------------------------------------------------------- tables

struct Valid {
    name: String,
    schema: Schema,
    doc: Value,
}

fn ok(name: impl Into<String>, schema: Schema, doc: Value) -> Valid {
    Valid { name: name.into(), schema, doc }
}

struct Invalid {
    name: String,
    schema: Schema,
    doc: Value,
    /// `instance_path` one violation must have.
    path: &'static str,
    /// Text that violation's message must contain (e.g. the missing property).
    says: &'static str,
}

fn bad(name: impl Into<String>, schema: Schema, doc: Value, path: &'static str, says: &'static str) -> Invalid {
    Invalid { name: name.into(), schema, doc, path, says }
}

fn valid_cases() -> Vec<Valid> {
    use Schema::*;
    let mut cases = vec![
        ok("§4.1 creation response", ConnectionCreated, connection_created()),
        ok(
            "§2.1 open object: other connection fields",
            ConnectionCreated,
            with(connection_created(), "/createdAt", json!("anything")),
        ),
        ok("§2.2 extra field", Account, with(minimal_account("checking"), "/iban", json!("x"))),
        ok("§2.2 lastSyncedAt object", Account, with(minimal_account("savings"), "/lastSyncedAt", json!({"at": 1}))),
        ok("§2.2 lastSyncedAt null", Account, with(minimal_account("savings"), "/lastSyncedAt", Value::Null)),
        ok(
            "§2.2 institution null reads as absent",
            Account,
            with(minimal_account("savings"), "/institution", Value::Null),
        ),
        // Masking is judged by the security case accounts.masked-numbers, not by the schema.
        ok("§2.2 accountNumber any string", Account, with(minimal_account("savings"), "/accountNumber", json!("1234"))),
        ok("§4.3 next_cursor null reads as absent", TransactionsPage, with(page(), "/next_cursor", Value::Null)),
        ok(
            "§2.2 institution subfields optional",
            Account,
            with(minimal_account("checking"), "/institution", json!({})),
        ),
        ok(
            "§2.2 logo set (type not shown)",
            Account,
            with(
                minimal_account("checking"),
                "/institution",
                json!({"id": "i", "name": "n", "logo": "https://x/logo.png"}),
            ),
        ),
        ok("§2.2 creditLimit as number", Account, with(minimal_account("credit_card"), "/creditLimit", json!(5000))),
        ok("§2.2 positions null on checking", Account, with(minimal_account("checking"), "/positions", Value::Null)),
        ok(
            "§2.2 empty positions on checking (a defensible reading)",
            Account,
            with(minimal_account("checking"), "/positions", json!([])),
        ),
        ok(
            "§2.2 empty currencyBalances on savings (a defensible reading)",
            Account,
            with(minimal_account("savings"), "/currencyBalances", json!([])),
        ),
        ok(
            "§2.2 creditLimit/currencyBalances null on savings",
            Account,
            with(with(minimal_account("savings"), "/creditLimit", Value::Null), "/currencyBalances", Value::Null),
        ),
        ok(
            "§2.2 createdAt +00:00",
            Account,
            with(minimal_account("checking"), "/createdAt", json!("2024-01-15T10:30:00+00:00")),
        ),
        ok(
            "§2.2 createdAt -00:00 with fraction",
            Account,
            with(minimal_account("checking"), "/createdAt", json!("2024-01-15T10:30:00.5-00:00")),
        ),
        ok(
            "§2.2 currencyBalances null on credit_card",
            Account,
            with(minimal_account("credit_card"), "/currencyBalances", Value::Null),
        ),
        ok("§2 opaque id part", Account, with(minimal_account("checking"), "/id", json!("acc_x"))),
        ok("§4.2 empty array", Accounts, json!([])),
        ok(
            "§4.2 mixed accounts",
            Accounts,
            json!([full_account("checking"), full_account("credit_card"), minimal_account("pension")]),
        ),
        ok("§2.3 full transaction", Transaction, transaction()),
        ok("§2.3 minimal transaction (id only)", Transaction, json!({"id": "txn_1"})),
        ok("§2.3 status other than posted", Transaction, with(transaction(), "/status", json!("pending"))),
        ok("§2.3 credit", Transaction, with(transaction(), "/amount", json!(1500))),
        ok("§4.3 page with next_cursor", TransactionsPage, page()),
        ok("§4.3 last page without next_cursor", TransactionsPage, json!({"data": [transaction()], "has_more": false})),
        ok("§4.3 empty page", TransactionsPage, json!({"data": [], "has_more": false})),
        ok("§6.2 short form", WebhookEvent, short_form()),
        ok(
            "§6.2 short form +00:00",
            WebhookEvent,
            with(short_form(), "/timestamp", json!("2024-01-15T10:30:00+00:00")),
        ),
        ok(
            "§6.1 microseconds",
            WebhookEvent,
            with(event("accounts.updated"), "/created_at", json!("2024-01-15T10:30:00.123456Z")),
        ),
        ok(
            "§6.2 connection.created previousStatus empty string",
            WebhookEvent,
            with(event("connection.created"), "/data/previousStatus", json!("")),
        ),
        ok(
            "§6.2 error set on connection.error",
            WebhookEvent,
            with(event("connection.error"), "/data/error", json!({"code": "X", "message": "m"})),
        ),
        ok(
            "§6 open objects",
            WebhookEvent,
            with(with(event("transaction.deleted"), "/extra", json!(1)), "/data/extra", json!(2)),
        ),
    ];
    for kind in ["checking", "savings", "credit_card", "brokerage", "pension"] {
        cases.push(ok(format!("§2.2 full {kind}"), Account, full_account(kind)));
        cases.push(ok(format!("§2.2 minimal {kind}"), Account, minimal_account(kind)));
    }
    for number in [
        "****1234",
        "•••• 1234",
        "XXXX-XXXX-1234",
        "****6789",
        "xxxx12",
        "#### 1",
        "●●●● 123456",
        "DE** **** **** **** 3000",
    ] {
        cases.push(ok(
            format!("§2.2 accountNumber {number}"),
            Account,
            with(minimal_account("checking"), "/accountNumber", json!(number)),
        ));
    }
    for event_type in EVENT_TYPES {
        cases.push(ok(format!("§6 {event_type}"), WebhookEvent, event(event_type)));
    }
    for state in STATES {
        cases.push(ok(
            format!("§3.1 previousStatus {state}"),
            WebhookEvent,
            with(event("connection.disconnected"), "/data/previousStatus", json!(state)),
        ));
    }
    cases
}

fn invalid_cases() -> Vec<Invalid> {
    use Schema::*;
    let acc = || minimal_account("checking");
    let mut cases = vec![
        // §2.1, §4.1
        bad("not an object", ConnectionCreated, json!([]), "", "object"),
        bad(
            "connectionId prefix",
            ConnectionCreated,
            with(connection_created(), "/connectionId", json!("c_1")),
            "/connectionId",
            "^conn_",
        ),
        bad(
            "connectionId bare prefix",
            ConnectionCreated,
            with(connection_created(), "/connectionId", json!("conn_")),
            "/connectionId",
            "^conn_",
        ),
        bad(
            "status not CREATED",
            ConnectionCreated,
            with(connection_created(), "/status", json!("created")),
            "/status",
            "CREATED",
        ),
        bad(
            "widgetToken prefix",
            ConnectionCreated,
            with(connection_created(), "/widgetToken", json!("tok_1")),
            "/widgetToken",
            "^sess_",
        ),
        bad(
            "widgetToken type",
            ConnectionCreated,
            with(connection_created(), "/widgetToken", json!(1)),
            "/widgetToken",
            "string",
        ),
        // §2.2
        bad("id prefix", Account, with(acc(), "/id", json!("acct_1")), "/id", "^acc_"),
        bad("connectionId prefix", Account, with(acc(), "/connectionId", json!("acc_1")), "/connectionId", "^conn_"),
        bad("name type", Account, with(acc(), "/name", json!(5)), "/name", "string"),
        bad("type enum", Account, with(acc(), "/type", json!("loan")), "/type", "loan"),
        bad("currency lower case", Account, with(acc(), "/currency", json!("eur")), "/currency", "[A-Z]{3}"),
        bad("currency four letters", Account, with(acc(), "/currency", json!("EURO")), "/currency", "[A-Z]{3}"),
        bad("balance as string", Account, with(acc(), "/balance", json!("10.00")), "/balance", "number"),
        bad(
            "availableBalance null",
            Account,
            with(acc(), "/availableBalance", Value::Null),
            "/availableBalance",
            "number",
        ),
        bad(
            "createdAt local offset",
            Account,
            with(acc(), "/createdAt", json!("2024-01-15T10:30:00+02:00")),
            "/createdAt",
            "does not match",
        ),
        bad(
            "createdAt no offset",
            Account,
            with(acc(), "/createdAt", json!("2024-01-15T10:30:00")),
            "/createdAt",
            "date-time",
        ),
        bad(
            "createdAt space separator",
            Account,
            with(acc(), "/createdAt", json!("2024-01-15 10:30:00Z")),
            "/createdAt",
            "date-time",
        ),
        bad(
            "createdAt impossible date",
            Account,
            with(acc(), "/createdAt", json!("2024-02-30T10:30:00Z")),
            "/createdAt",
            "date-time",
        ),
        bad("createdAt epoch number", Account, with(acc(), "/createdAt", json!(1705314600)), "/createdAt", "string"),
        bad("lastSyncedAt number", Account, with(acc(), "/lastSyncedAt", json!(1705314600)), "/lastSyncedAt", "anyOf"),
        bad(
            "lastSyncedAt non-UTC",
            Account,
            with(acc(), "/lastSyncedAt", json!("2024-01-15T10:30:00+01:00")),
            "/lastSyncedAt",
            "anyOf",
        ),
        bad(
            "institution not object",
            Account,
            with(acc(), "/institution", json!("Example Bank")),
            "/institution",
            "object",
        ),
        bad("institution.id type", Account, with(acc(), "/institution", json!({"id": 7})), "/institution/id", "string"),
        bad(
            "institution.name null",
            Account,
            with(acc(), "/institution", json!({"name": null})),
            "/institution/name",
            "string",
        ),
        bad(
            "creditLimit on checking",
            Account,
            with(acc(), "/creditLimit", json!({"amount": 1})),
            "/creditLimit",
            "null",
        ),
        bad(
            "currencyBalances on savings",
            Account,
            with(minimal_account("savings"), "/currencyBalances", json!([{"currency": "USD", "balance": 1}])),
            "/currencyBalances",
            "items",
        ),
        bad(
            "currencyBalances on brokerage",
            Account,
            with(minimal_account("brokerage"), "/currencyBalances", json!([{"currency": "USD", "balance": 1}])),
            "/currencyBalances",
            "items",
        ),
        bad(
            "currencyBalances not array",
            Account,
            with(minimal_account("credit_card"), "/currencyBalances", json!({})),
            "/currencyBalances",
            "array",
        ),
        bad("positions on checking", Account, with(acc(), "/positions", json!([{}])), "/positions", "items"),
        bad(
            "positions on credit_card",
            Account,
            with(minimal_account("credit_card"), "/positions", json!([{}])),
            "/positions",
            "items",
        ),
        bad(
            "positions not array",
            Account,
            with(minimal_account("pension"), "/positions", json!("x")),
            "/positions",
            "array",
        ),
        // §4.2
        bad("accounts not array", Accounts, minimal_account("checking"), "", "array"),
        bad("accounts element", Accounts, json!([acc(), with(acc(), "/type", json!("loan"))]), "/1/type", "loan"),
        bad("accounts element missing field", Accounts, json!([without(acc(), "/balance")]), "/0", "balance"),
        // §2.3
        bad("transaction missing id", Transaction, without(transaction(), "/id"), "", "\"id\""),
        bad("transaction id prefix", Transaction, with(transaction(), "/id", json!("tx_1")), "/id", "^txn_"),
        bad(
            "transaction accountId prefix",
            Transaction,
            with(transaction(), "/accountId", json!("conn_1")),
            "/accountId",
            "^acc_",
        ),
        bad("amount as string", Transaction, with(transaction(), "/amount", json!("-42.17")), "/amount", "number"),
        bad(
            "currency lower case",
            Transaction,
            with(transaction(), "/currency", json!("usd")),
            "/currency",
            "[A-Z]{3}",
        ),
        bad("description type", Transaction, with(transaction(), "/description", json!(1)), "/description", "string"),
        bad(
            "transactionDate timestamp",
            Transaction,
            with(transaction(), "/transactionDate", json!("2024-01-14T00:00:00Z")),
            "/transactionDate",
            "date",
        ),
        bad(
            "transactionDate day first",
            Transaction,
            with(transaction(), "/transactionDate", json!("14/01/2024")),
            "/transactionDate",
            "date",
        ),
        bad(
            "transactionDate month 13",
            Transaction,
            with(transaction(), "/transactionDate", json!("2024-13-01")),
            "/transactionDate",
            "date",
        ),
        bad("category type", Transaction, with(transaction(), "/category", json!(3)), "/category", "string"),
        bad("status type", Transaction, with(transaction(), "/status", json!(true)), "/status", "string"),
        bad(
            "createdAt non-UTC",
            Transaction,
            with(transaction(), "/createdAt", json!("2024-01-15T10:30:00-05:00")),
            "/createdAt",
            "does not match",
        ),
        // §4.3
        bad("page missing data", TransactionsPage, without(page(), "/data"), "", "\"data\""),
        bad("page missing has_more", TransactionsPage, without(page(), "/has_more"), "", "has_more"),
        bad("has_more string", TransactionsPage, with(page(), "/has_more", json!("true")), "/has_more", "boolean"),
        bad("data object", TransactionsPage, with(page(), "/data", json!({})), "/data", "array"),
        bad("data item without id", TransactionsPage, without(page(), "/data/1/id"), "/data/1", "\"id\""),
        bad(
            "data item amount",
            TransactionsPage,
            with(page(), "/data/0/amount", json!("1")),
            "/data/0/amount",
            "number",
        ),
        bad("next_cursor number", TransactionsPage, with(page(), "/next_cursor", json!(2)), "/next_cursor", "string"),
        // §6.1 envelope
        bad("not an object", WebhookEvent, json!("connection.connected"), "", "object"),
        bad("id prefix", WebhookEvent, with(event("connection.connected"), "/id", json!("event_1")), "/id", "^evt_"),
        bad(
            "unknown type",
            WebhookEvent,
            with(event("connection.connected"), "/type", json!("connection.unknown")),
            "/type",
            "connection.unknown",
        ),
        bad(
            "created_at without ms",
            WebhookEvent,
            with(event("connection.connected"), "/created_at", json!("2024-01-15T10:30:00Z")),
            "/created_at",
            "does not match",
        ),
        bad(
            "created_at 2 fraction digits",
            WebhookEvent,
            with(event("connection.connected"), "/created_at", json!("2024-01-15T10:30:00.12Z")),
            "/created_at",
            "does not match",
        ),
        bad(
            "created_at non-UTC",
            WebhookEvent,
            with(event("connection.connected"), "/created_at", json!("2024-01-15T10:30:00.123+01:00")),
            "/created_at",
            "does not match",
        ),
        bad("missing data", WebhookEvent, without(event("connection.connected"), "/data"), "", "\"data\""),
        bad("missing created_at", WebhookEvent, without(event("accounts.updated"), "/created_at"), "", "created_at"),
        bad(
            "data not object",
            WebhookEvent,
            with(event("connection.connected"), "/data", json!([])),
            "/data",
            "object",
        ),
        // §6.2 data
        bad(
            "data.type differs",
            WebhookEvent,
            with(event("connection.connected"), "/data/type", json!("connection.error")),
            "/data/type",
            "connection.connected",
        ),
        bad(
            "data.eventId prefix",
            WebhookEvent,
            with(event("connection.connected"), "/data/eventId", json!("e_1")),
            "/data/eventId",
            "^evt_",
        ),
        bad(
            "occurredAt without ms",
            WebhookEvent,
            with(event("connection.connected"), "/data/occurredAt", json!("2024-01-15T10:30:00Z")),
            "/data/occurredAt",
            "does not match",
        ),
        bad(
            "clientId prefix",
            WebhookEvent,
            with(event("connection.connected"), "/data/clientId", json!("client_1")),
            "/data/clientId",
            "^cli_",
        ),
        bad(
            "connectionId prefix",
            WebhookEvent,
            with(event("accounts.updated"), "/data/connectionId", json!("acc_1")),
            "/data/connectionId",
            "^conn_",
        ),
        bad(
            "missing connectionId",
            WebhookEvent,
            without(event("transaction.deleted"), "/data/connectionId"),
            "/data",
            "connectionId",
        ),
        bad(
            "missing clientId",
            WebhookEvent,
            without(event("connection.created"), "/data/clientId"),
            "/data",
            "clientId",
        ),
        bad(
            "previousStatus upper case",
            WebhookEvent,
            with(event("connection.verifying"), "/data/previousStatus", json!("CREDENTIALS_SUBMITTED")),
            "/data/previousStatus",
            "CREDENTIALS_SUBMITTED",
        ),
        bad(
            "previousStatus not a state",
            WebhookEvent,
            with(event("connection.verifying"), "/data/previousStatus", json!("pending")),
            "/data/previousStatus",
            "pending",
        ),
        bad(
            "previousStatus null after created",
            WebhookEvent,
            with(event("connection.connected"), "/data/previousStatus", Value::Null),
            "/data/previousStatus",
            "not one of",
        ),
        bad(
            "created: previousStatus upper case",
            WebhookEvent,
            with(event("connection.created"), "/data/previousStatus", json!("NONE")),
            "/data/previousStatus",
            "does not match",
        ),
        bad(
            "created: previousStatus number",
            WebhookEvent,
            with(event("connection.created"), "/data/previousStatus", json!(0)),
            "/data/previousStatus",
            "string",
        ),
        bad(
            "error missing",
            WebhookEvent,
            without(event("connection.failed_auth"), "/data/error"),
            "/data",
            "\"error\"",
        ),
        bad(
            "accounts.updated accountId missing",
            WebhookEvent,
            without(event("accounts.updated"), "/data/accountId"),
            "/data",
            "accountId",
        ),
        bad(
            "accountId prefix",
            WebhookEvent,
            with(event("accounts.updated"), "/data/accountId", json!("acct_1")),
            "/data/accountId",
            "^acc_",
        ),
        bad(
            "transaction.deleted transactionId missing",
            WebhookEvent,
            without(event("transaction.deleted"), "/data/transactionId"),
            "/data",
            "transactionId",
        ),
        bad(
            "transaction.deleted accountId missing",
            WebhookEvent,
            without(event("transaction.deleted"), "/data/accountId"),
            "/data",
            "accountId",
        ),
        bad(
            "transactionId prefix",
            WebhookEvent,
            with(event("transaction.deleted"), "/data/transactionId", json!("t_1")),
            "/data/transactionId",
            "^txn_",
        ),
        // §6.2 short form
        bad("short form timestamp missing", WebhookEvent, without(short_form(), "/timestamp"), "", "timestamp"),
        bad(
            "short form connectionId missing",
            WebhookEvent,
            without(short_form(), "/connectionId"),
            "",
            "connectionId",
        ),
        bad(
            "short form with ms",
            WebhookEvent,
            with(short_form(), "/timestamp", json!("2024-01-15T10:30:00.123Z")),
            "/timestamp",
            "does not match",
        ),
        bad(
            "short form non-UTC",
            WebhookEvent,
            with(short_form(), "/timestamp", json!("2024-01-15T10:30:00+02:00")),
            "/timestamp",
            "does not match",
        ),
        bad(
            "short form other event",
            WebhookEvent,
            with(short_form(), "/event", json!("connection.created")),
            "/event",
            "connection.connected",
        ),
        bad(
            "short form connectionId prefix",
            WebhookEvent,
            with(short_form(), "/connectionId", json!("conn")),
            "/connectionId",
            "^conn_",
        ),
    ];
    for field in
        ["id", "connectionId", "name", "type", "currency", "balance", "availableBalance", "accountNumber", "createdAt"]
    {
        let path = format!("/{field}");
        let mut case = bad(format!("missing {field}"), Account, without(acc(), &path), "", "");
        case.says = Box::leak(format!("\"{field}\" is a required property").into_boxed_str());
        cases.push(case);
    }
    // connection.created has no previous state: absent previousStatus is accepted there.
    for event_type in EVENT_TYPES[..8].iter().filter(|t| **t != "connection.created") {
        cases.push(bad(
            format!("{event_type} previousStatus missing"),
            WebhookEvent,
            without(event(event_type), "/data/previousStatus"),
            "/data",
            "previousStatus",
        ));
    }
    cases
}

// ---------------------------------------------------------------- tests

fn show(violations: &[Violation]) -> String {
    violations.iter().map(|v| format!("\n  {v}")).collect()
}

#[test]
fn valid_documents_pass() {
    let mut failures = Vec::new();
    for case in valid_cases() {
        if let Err(violations) = validate(case.schema, &case.doc) {
            failures.push(format!("{:?} / {}:{}", case.schema, case.name, show(&violations)));
        }
    }
    assert!(failures.is_empty(), "valid documents rejected:\n{}", failures.join("\n"));
}

#[test]
fn invalid_documents_name_the_offending_field() {
    let mut failures = Vec::new();
    for case in invalid_cases() {
        match validate(case.schema, &case.doc) {
            Ok(()) => failures.push(format!("{:?} / {}: accepted", case.schema, case.name)),
            Err(violations) => {
                let hit = violations.iter().any(|v| v.instance_path == case.path && v.message.contains(case.says));
                if !hit {
                    failures.push(format!(
                        "{:?} / {}: no violation at {:?} saying {:?}:{}",
                        case.schema,
                        case.name,
                        case.path,
                        case.says,
                        show(&violations)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_violation_cites_a_section_and_stays_short() {
    for case in invalid_cases() {
        for v in validate(case.schema, &case.doc).unwrap_err() {
            assert!(v.message.contains("[§"), "{}: no citation in {v}", case.name);
            assert!(v.message.chars().count() <= MAX_MESSAGE_CHARS, "{}: {v}", case.name);
        }
    }
}

#[test]
fn huge_instances_are_not_dumped() {
    let many: Vec<Value> = (0..500).map(|_| full_account("credit_card")).collect();
    let huge_name = "n".repeat(10_000);
    for (schema, doc) in [
        (Schema::Account, Value::Array(many.clone())),
        (Schema::Transaction, json!({"id": huge_name})),
        (Schema::Account, with(minimal_account("checking"), "/name", json!([huge_name]))),
    ] {
        for v in validate(schema, &doc).unwrap_err() {
            assert!(v.message.chars().count() <= MAX_MESSAGE_CHARS, "{v}");
            assert!(!v.message.contains("nnnnnnnnnn"), "{v}");
        }
    }
}

/// With `if`/`then` branches per event type, a broken event yields exactly the relevant error.
#[test]
fn webhook_errors_are_focused() {
    let cases = [
        (without(event("connection.verifying"), "/data/previousStatus"), "/data"),
        (with(event("transaction.deleted"), "/data/transactionId", json!("t_1")), "/data/transactionId"),
        (with(short_form(), "/timestamp", json!("2024-01-15T10:30:00.123Z")), "/timestamp"),
        (with(event("accounts.updated"), "/type", json!("nope")), "/type"),
    ];
    for (doc, path) in cases {
        let violations = validate(Schema::WebhookEvent, &doc).unwrap_err();
        assert_eq!(violations.len(), 1, "{}", show(&violations));
        assert_eq!(violations[0].instance_path, path);
    }
}

#[test]
fn schema_files_are_draft_2020_12_and_compile() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("schemas/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path).expect("readable");
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(doc["$schema"], DRAFT_2020_12, "{name}");
        assert_eq!(doc["$id"], format!("{ID_BASE}{name}"), "{name}");
        on_disk.insert(name);
    }
    let declared: BTreeSet<String> = Schema::ALL.iter().map(|s| s.file_name().to_owned()).collect();
    assert_eq!(on_disk, declared, "schemas/*.json and Schema::ALL differ");
    for schema in Schema::ALL {
        let on_disk: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(schema.file_name())).unwrap()).unwrap();
        assert_eq!(&on_disk, schema.document(), "{schema:?}: embedded copy is stale");
        assert!(jsonschema::meta::is_valid(schema.document()), "{schema:?} breaks the meta-schema");
        // Compiles (validate panics if it does not) and rejects a non-JSON-object/array.
        assert!(validate(schema, &json!(42)).is_err(), "{schema:?}");
    }
}

/// Every `$ref` stays inside the embedded set: a local pointer or a sibling file name.
#[test]
fn refs_never_need_the_network() {
    fn walk(node: &Value, refs: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    refs.push(r.clone());
                }
                map.values().for_each(|v| walk(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, refs)),
            _ => {}
        }
    }
    let names: Vec<&str> = Schema::PAYLOADS.iter().map(|s| s.file_name()).collect();
    for schema in Schema::PAYLOADS {
        let mut refs = Vec::new();
        walk(schema.document(), &mut refs);
        for r in refs {
            let ok = match r.split_once('#') {
                Some(("", pointer)) => schema.document().pointer(pointer).is_some(),
                Some(_) => false,
                None => names.contains(&r.as_str()),
            };
            assert!(ok, "{schema:?}: $ref {r:?} does not resolve locally");
        }
    }
}

/// Every property and `$defs` entry (and each root) cites its section in `$comment`.
#[test]
fn every_constraint_cites_its_section() {
    fn check(node: &Value, at: &str, missing: &mut Vec<String>) {
        let Value::Object(map) = node else { return };
        for (key, child) in map {
            let here = format!("{at}/{key}");
            if key == "properties" || key == "$defs" {
                for (name, sub) in child.as_object().into_iter().flatten() {
                    let cited = sub["$comment"].as_str().is_some_and(|c| c.starts_with('§'));
                    if !cited {
                        missing.push(format!("{here}/{name}"));
                    }
                }
            }
            match child {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        check(item, &format!("{here}/{i}"), missing);
                    }
                }
                _ => check(child, &here, missing),
            }
        }
    }
    for schema in Schema::PAYLOADS {
        let doc = schema.document();
        let mut missing = Vec::new();
        if !doc["$comment"].as_str().is_some_and(|c| c.starts_with('§')) {
            missing.push("(root)".to_owned());
        }
        check(doc, "", &mut missing);
        // Conditions of `if` only select a branch; they are not constraints.
        missing.retain(|p| !p.contains("/if/"));
        assert!(missing.is_empty(), "{schema:?}: uncited {missing:?}");
    }
}
