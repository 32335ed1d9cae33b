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

#[path = "schemas/cases.rs"]
mod cases;
use cases::{invalid_cases, valid_cases};
