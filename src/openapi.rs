//! `bankconf openapi`: an OpenAPI 3.1 description of the service, built from the embedded JSON
//! Schemas (`schemas/`): the endpoints of §4.1–§4.4, the bearer scheme of §5, and the webhook
//! deliveries of §6 as OpenAPI 3.1 `webhooks`.
//!
//! Rulings:
//! - Status codes: only those the spec shows. §4.2 and §4.3 show `200`; §4.1 shows a response
//!   body without a status and §4.4 neither status nor shape, so those are `2XX`. Errors are
//!   `default`, with no body shape (§7 shows none). Webhook acknowledgements are `2XX` (§6.3
//!   leaves delivery unstated).
//! - The schemas go under `components/schemas` nearly as-is (OpenAPI 3.1 uses JSON Schema
//!   2020-12): `$schema` and `$id` are dropped (an `$id` would rebase the document-relative
//!   `$ref`s) and every `$ref` is rewritten to `#/components/schemas/...`.

use crate::schemas::Schema;
use crate::spec::{ConnectionState, ACCOUNTS_UPDATED, TRANSACTION_DELETED};
use serde_json::{json, Map, Value};

/// The component name of a payload schema.
pub(crate) fn component_name(schema: Schema) -> &'static str {
    match schema {
        Schema::ConnectionCreated => "ConnectionCreated",
        Schema::Account => "Account",
        Schema::Accounts => "Accounts",
        Schema::Transaction => "Transaction",
        Schema::TransactionsPage => "TransactionsPage",
        Schema::WebhookEvent => "WebhookEvent",
        Schema::Report => "BankconfReport",
    }
}

fn component_ref(schema: Schema) -> Value {
    json!({"$ref": format!("#/components/schemas/{}", component_name(schema))})
}

/// Rewrites `$ref`s of `schema`'s document to point into `#/components/schemas/`.
fn rewrite_refs(node: &mut Value, within: Schema) {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                let (file, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
                let owner = if file.is_empty() {
                    within
                } else {
                    Schema::PAYLOADS.into_iter().find(|s| s.file_name() == file).unwrap_or(within)
                };
                *target = format!("#/components/schemas/{}{fragment}", component_name(owner));
            }
            map.values_mut().for_each(|v| rewrite_refs(v, within));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, within)),
        _ => {}
    }
}

/// A payload schema as an OpenAPI component.
pub(crate) fn component(schema: Schema) -> Value {
    let mut doc = schema.document().clone();
    if let Value::Object(map) = &mut doc {
        map.remove("$schema");
        map.remove("$id");
    }
    rewrite_refs(&mut doc, schema);
    doc
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

fn error_response() -> Value {
    json!({"description": "An error. Status codes and error bodies are not shown by the spec (§7)."})
}

fn path_param(name: &str, section: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": section})
}

/// The OpenAPI 3.1 document.
pub fn document() -> Value {
    let schemas: Map<String, Value> =
        Schema::PAYLOADS.into_iter().map(|s| (component_name(s).to_string(), component(s))).collect();

    let paths = paths();
    let webhooks = webhooks();

    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Bank Connection Aggregation Service",
            "version": "v1",
            "description": "Derived by bankconf from the service specification and the JSON Schemas in its schemas/ folder. Sections are cited as §N. Status codes the spec does not show are left open (2XX, default)."
        },
        "servers": [{
            "url": "{base_url}",
            "description": "The service's base address (not shown by the spec)",
            "variables": {"base_url": {"default": "http://127.0.0.1:8080"}}
        }],
        "security": [{"bearerApiKey": []}],
        "paths": paths,
        "webhooks": webhooks,
        "components": {
            "securitySchemes": {
                "bearerApiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "Authorization: Bearer <API_KEY> on every API call; the key has a service-specific prefix and an underscore (§5)."
                }
            },
            "schemas": schemas
        }
    })
}

/// The API's paths (§4).
fn paths() -> Value {
    json!({
        "/v1/connections": {
            "post": {
                "operationId": "createConnection",
                "summary": "Create a connection (§4.1)",
                "description": "No request body is sent (§4.1). The response status is not shown; the body is the connection of §2.1.",
                "responses": {
                    "2XX": {"description": "The new connection, status CREATED (§2.1, §3.2, §4.1)", "content": json_content(component_ref(Schema::ConnectionCreated))},
                    "default": error_response()
                }
            }
        },
        "/v1/connections/{connectionId}/accounts": {
            "get": {
                "operationId": "getConnectionAccounts",
                "summary": "Get connection accounts (§4.2)",
                "description": "Available only while the connection status is CONNECTED (§3.2, §4.2).",
                "parameters": [path_param("connectionId", "Connection identifier, prefix conn_ (§2, §4.2)")],
                "responses": {
                    "200": {"description": "The accounts of the connection (§2.2, §4.2)", "content": json_content(component_ref(Schema::Accounts))},
                    "default": error_response()
                }
            }
        },
        "/v1/accounts/{accountId}/transactions": {
            "get": {
                "operationId": "getAccountTransactions",
                "summary": "Get account transactions, cursor-paginated (§4.3)",
                "parameters": [
                    path_param("accountId", "Account identifier (§2.2, §4.3)"),
                    {"name": "limit", "in": "query", "required": false, "schema": {"type": "number"}, "description": "Items per page; default and maximum not shown (§4.3, §8)"},
                    {"name": "starting_after", "in": "query", "required": false, "schema": {"type": "string"}, "description": "Cursor: the next_cursor of the previous page (§4.3 rule 1)"}
                ],
                "responses": {
                    "200": {"description": "One page of transactions (§2.3, §4.3)", "content": json_content(component_ref(Schema::TransactionsPage))},
                    "default": error_response()
                }
            }
        },
        "/v1/accounts/{accountId}": {
            "get": {
                "operationId": "getAccount",
                "summary": "Get one account, with its updated balance (§4.4)",
                "parameters": [path_param("accountId", "Account identifier (§2.2, §4.4)")],
                "responses": {
                    "2XX": {"description": "The account; its shape is not shown (§4.4)", "content": json_content(json!({}))},
                    "default": error_response()
                }
            }
        }
    })
}

/// The deliveries of §6, one per event type.
fn webhooks() -> Map<String, Value> {
    let event_types = ConnectionState::ALL
        .into_iter()
        .map(ConnectionState::event_type)
        .chain([ACCOUNTS_UPDATED, TRANSACTION_DELETED]);
    event_types
        .map(|ty| {
            let operation = json!({
                "post": {
                    "operationId": format!("on_{}", ty.replace('.', "_")),
                    "summary": format!("A {ty} delivery (§6, §6.1, §6.2)"),
                    "description": "POSTed to the client's server; how the address is registered, retries and ordering are not shown (§6.3). Signing is not shown (§5).",
                    "security": [],
                    "requestBody": {"required": true, "content": json_content(component_ref(Schema::WebhookEvent))},
                    "responses": {"2XX": {"description": "Delivery acknowledged (status not shown, §6.3)"}}
                }
            });
            (ty.to_string(), operation)
        })
        .collect()
}

/// The document as pretty JSON with its top-level keys in the conventional order (`openapi`,
/// `info`, … `components`), for people reading it; nested keys stay sorted.
pub fn to_pretty_string(doc: &Value) -> String {
    const ORDER: [&str; 8] =
        ["openapi", "jsonSchemaDialect", "info", "servers", "security", "paths", "webhooks", "components"];
    let Value::Object(map) = doc else { return serde_json::to_string_pretty(doc).unwrap_or_default() };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    let members: Vec<String> = keys
        .into_iter()
        .map(|k| {
            let value = serde_json::to_string_pretty(&map[k]).unwrap_or_default().replace('\n', "\n  ");
            format!("  {}: {value}", Value::String(k.clone()))
        })
        .collect();
    format!("{{\n{}\n}}", members.join(",\n"))
}
