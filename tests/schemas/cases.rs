//! The valid and invalid documents each schema is tried with (split from schemas.rs to keep files
//! under 600 lines).

use super::*;

pub(super) fn valid_cases() -> Vec<Valid> {
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

pub(super) fn invalid_cases() -> Vec<Invalid> {
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
