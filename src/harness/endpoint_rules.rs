//! The rules every answer of an endpoint must keep, applied to each exchange with the target in
//! one place (the HTTP client), whichever case or fixture sent the request: a violation cannot
//! hide in a read that "belongs" to another case. Each rule names the case it is attributed to;
//! the runner fails a case that passed when one of its rules was broken in any read.
//!
//! Judged here, only on 2xx answers with the primary key (a refusal is judged by its own case):
//! `POST /v1/connections` (§4.1), `GET /v1/connections/{id}/accounts` (§4.2, owning connection
//! §2.2, prefixes §2) and `GET /v1/accounts/{id}/transactions` (§4.3, owning account §2.3,
//! prefixes, and the page bound against the `limit` asked, §8).

use crate::schemas::{self, Schema};
use crate::spec::prefix;
use serde_json::Value;

/// One broken rule: the case it belongs to and what showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub case_id: &'static str,
    pub message: String,
}

/// The violations in one 2xx answer. `path` is the request path below the base URL's
/// (`/v1/accounts/acc_1/transactions`), `limit` the `limit` query parameter if any, `request`
/// the request as messages name it.
pub fn judge(method: &str, path: &[&str], limit: Option<u64>, request: &str, body: &Value) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut add = |case_id: &'static str, message: String| found.push(Violation { case_id, message });
    match (method, path) {
        ("POST", ["v1", "connections"]) => {
            if let Err(e) = schemas::check(Schema::ConnectionCreated, body, request) {
                add("create.response-schema", e);
            }
        }
        ("GET", ["v1", "connections", connection, "accounts"]) => {
            if let Err(e) = schemas::check(Schema::Accounts, body, request) {
                add("accounts.response-schema", e);
            }
            for account in body.as_array().into_iter().flatten() {
                let id = account.get("id").and_then(Value::as_str).unwrap_or("<no id>");
                match account.get("connectionId") {
                    Some(Value::String(c)) if c == connection => {}
                    other => add(
                        "accounts.connection-id",
                        format!("{request}: account {id} has connectionId {}, expected {connection:?}", show(other)),
                    ),
                }
                if !id.starts_with(prefix::ACCOUNT) {
                    add(
                        "accounts.id-prefix",
                        format!("{request}: account id {id} does not start with {}", prefix::ACCOUNT),
                    );
                }
            }
        }
        ("GET", ["v1", "accounts", account, "transactions"]) => {
            if let Err(e) = schemas::check(Schema::TransactionsPage, body, request) {
                add("transactions.page-schema", e);
            }
            let items = body.get("data").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if let Some(limit) = limit.filter(|l| items.len() as u64 > *l) {
                add(
                    "transactions.limit-respected",
                    format!("{request}: {} items on a page, limit {limit}", items.len()),
                );
            }
            for item in items {
                let id = item.get("id").and_then(Value::as_str).unwrap_or("<no id>");
                if !id.starts_with(prefix::TRANSACTION) {
                    add(
                        "transactions.id-prefix",
                        format!("{request}: transaction id {id} does not start with {}", prefix::TRANSACTION),
                    );
                }
                // Which transaction fields are present is not shown (§2.3): judged when given.
                match item.get("accountId") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(a)) if a == account => {}
                    Some(other) => add(
                        "transactions.account-id",
                        format!("{request}: transaction {id} has accountId {other}, expected {account:?}"),
                    ),
                }
            }
        }
        _ => {}
    }
    found
}

fn show(v: Option<&Value>) -> String {
    v.map_or("absent".to_string(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_foreign_transaction_is_attributed_to_its_rule() {
        let page = json!({"data": [{"id": "txn_1", "accountId": "acc_2"}], "has_more": false});
        let found = judge("GET", &["v1", "accounts", "acc_1", "transactions"], Some(1), "GET …", &page);
        assert_eq!(found.iter().map(|v| v.case_id).collect::<Vec<_>>(), ["transactions.account-id"]);
        let long = json!({"data": [{"id": "txn_1"}, {"id": "txn_2"}], "has_more": false});
        let found = judge("GET", &["v1", "accounts", "acc_1", "transactions"], Some(1), "GET …", &long);
        assert_eq!(found.iter().map(|v| v.case_id).collect::<Vec<_>>(), ["transactions.limit-respected"]);
        assert!(judge("GET", &["v1", "accounts", "acc_1"], None, "GET …", &json!({})).is_empty());
    }
}
