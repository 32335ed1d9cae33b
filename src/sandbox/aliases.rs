//! The per-client-ids variant ([`Variant::PerClientIds`]): each client numbers its accounts and
//! transactions from 1, so two clients see equal id strings for different objects. §2 calls ids
//! opaque and never makes them unique across clients, so this is legal, and the isolation cases
//! must tell a client's own object under an equal id from the other client's data.
//!
//! The store keeps its own unique ids; this layer translates at the edges: API answers and
//! webhook bodies carry the client's alias, and the ids a request or a driver call names are
//! read back through the same client's table. Connection ids stay unique: events and the driver
//! protocol name a connection by its id alone (`cases/README.md`, "Ids that repeat across
//! clients").

use super::faults::Variant;
use super::shared::Shared;
use crate::spec::prefix;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The prefixes whose ids are numbered per client.
const ALIASED: [&str; 2] = [prefix::ACCOUNT, prefix::TRANSACTION];
/// Largest answer body rewritten (the variant's answers are far smaller).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Every client's table of aliases.
#[derive(Default)]
pub(crate) struct Aliases {
    clients: HashMap<String, Table>,
}

/// One client's aliases: store id → alias, alias → store id, and the last number per prefix.
#[derive(Default)]
struct Table {
    alias: HashMap<String, String>,
    id: HashMap<String, String>,
    last: HashMap<&'static str, u64>,
}

impl Aliases {
    /// `value` as `client` sees it: every account and transaction id replaced by the client's
    /// alias for it, numbered in the order the client first sees them.
    pub fn outward(&mut self, client: &str, value: &mut Value) {
        let table = self.clients.entry(client.to_string()).or_default();
        table.rewrite(value);
    }

    /// The store's id for an id `client` sent; an id the client has no alias for is unchanged
    /// (and matches nothing the client may read).
    pub fn inward(&self, client: &str, sent: &str) -> String {
        self.clients.get(client).and_then(|t| t.id.get(sent)).cloned().unwrap_or_else(|| sent.to_string())
    }
}

impl Table {
    fn rewrite(&mut self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(p) = ALIASED.iter().find(|p| s.starts_with(**p)) {
                    *s = self.alias_of(p, s);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.rewrite(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.rewrite(v)),
            _ => {}
        }
    }

    fn alias_of(&mut self, prefix: &'static str, id: &str) -> String {
        if let Some(alias) = self.alias.get(id) {
            return alias.clone();
        }
        if self.id.contains_key(id) {
            // Already an alias (an answer that echoes what the client sent).
            return id.to_string();
        }
        let n = self.last.entry(prefix).or_default();
        *n += 1;
        let alias = format!("{prefix}{:026}", *n);
        self.alias.insert(id.to_string(), alias.clone());
        self.id.insert(alias.clone(), id.to_string());
        alias
    }
}

/// The API layer of the variant: the request's ids in, the answer's ids out, as the
/// authenticated client sees them. Other flavors pass through untouched.
pub(crate) async fn translate(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !shared.flavor.has(Variant::PerClientIds) || !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    let key = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(client) = key.and_then(|k| shared.lock().client_for_key(&k)) else {
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    if let Some(uri) = inward_uri(&shared, &client, &parts.uri) {
        parts.uri = uri;
    }
    let response = next.run(Request::from_parts(parts, body)).await;
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    shared.lock().aliases_mut().outward(&client, &mut value);
    let text = value.to_string();
    parts.headers.insert(CONTENT_LENGTH, text.len().into());
    Response::from_parts(parts, Body::from(text))
}

/// The URI with each path segment and query value the client sent read back to store ids.
fn inward_uri(shared: &Shared, client: &str, uri: &axum::http::Uri) -> Option<axum::http::Uri> {
    let store = shared.lock();
    let aliases = store.aliases();
    let path: Vec<String> = uri.path().split('/').map(|s| aliases.inward(client, s)).collect();
    let query: Option<String> = uri.query().map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) => format!("{k}={}", aliases.inward(client, v)),
                None => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    let joined = path.join("/");
    let text = match query {
        Some(q) => format!("{joined}?{q}"),
        None => joined,
    };
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn two_clients_see_equal_ids_for_their_own_objects_and_each_reads_back_its_own() {
        let mut aliases = Aliases::default();
        let mut a = json!({"id": "acc_STOREA", "data": [{"id": "txn_STORE1", "accountId": "acc_STOREA"}]});
        let mut b = json!([{"id": "acc_STOREB", "connectionId": "conn_1"}]);
        aliases.outward("cli_a", &mut a);
        aliases.outward("cli_b", &mut b);
        let first = format!("{}{:026}", prefix::ACCOUNT, 1);
        assert_eq!(a["id"], first.as_str());
        assert_eq!(a["data"][0]["accountId"], first.as_str());
        assert_eq!(b[0]["id"], first.as_str());
        assert_eq!(b[0]["connectionId"], "conn_1", "connection ids stay as they are");
        assert_eq!(aliases.inward("cli_a", &first), "acc_STOREA");
        assert_eq!(aliases.inward("cli_b", &first), "acc_STOREB");
        assert_eq!(aliases.inward("cli_b", "acc_UNKNOWN"), "acc_UNKNOWN");
    }
}
