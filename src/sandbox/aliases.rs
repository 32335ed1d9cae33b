//! The per-client-ids variant ([`super::Variant::PerClientIds`]): each client numbers its accounts and
//! transactions from 1, so two clients see equal id strings for different objects. §2 calls ids
//! opaque and never makes them unique across clients, so this is legal, and the isolation cases
//! must tell a client's own object under an equal id from the other client's data.
//!
//! The store keeps its own unique ids; the tables here translate at the edges: API answers
//! (`api::translate_ids`) and webhook bodies carry the client's alias, and the ids a request or
//! a driver call names are read back through the same client's table. Connection ids stay unique: events and the driver
//! protocol name a connection by its id alone (`cases/README.md`, "Ids that repeat across
//! clients").

use crate::spec::prefix;
use serde_json::Value;
use std::collections::HashMap;

/// The prefixes whose ids are numbered per client.
const ALIASED: [&str; 2] = [prefix::ACCOUNT, prefix::TRANSACTION];

/// Every client's table of aliases.
#[derive(Default)]
pub(crate) struct Aliases {
    clients: HashMap<String, Table>,
    /// [`super::Mutant::AccountIdPerConnection`]: an account listed with its connection is
    /// numbered within that connection, so a client's connections list equal ids, and an id
    /// reads back the account that took it last.
    per_connection: bool,
}

/// One client's aliases: store id → alias, alias → store id, and the last number per prefix
/// (and, for the mutant, per connection).
#[derive(Default)]
struct Table {
    alias: HashMap<String, String>,
    id: HashMap<String, String>,
    last: HashMap<&'static str, u64>,
    per_connection: Option<HashMap<String, u64>>,
}

impl Aliases {
    /// The tables of a sandbox; `per_connection` for [`super::Mutant::AccountIdPerConnection`].
    pub(super) fn new(per_connection: bool) -> Self {
        Self { per_connection, ..Self::default() }
    }

    /// `value` as `client` sees it: every account and transaction id replaced by the client's
    /// alias for it, numbered in the order the client first sees them.
    pub(super) fn outward(&mut self, client: &str, value: &mut Value) {
        let per_connection = self.per_connection;
        let table = self
            .clients
            .entry(client.to_string())
            .or_insert_with(|| Table { per_connection: per_connection.then(HashMap::new), ..Table::default() });
        table.rewrite(value);
    }

    /// The store's id for an id `client` sent; an id the client has no alias for is unchanged
    /// (and matches nothing the client may read).
    pub(super) fn inward(&self, client: &str, sent: &str) -> String {
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
            Value::Object(map) => {
                self.number_in_connection(map);
                map.values_mut().for_each(|v| self.rewrite(v))
            }
            _ => {}
        }
    }

    /// For the mutant: an account object not yet aliased takes the next number of its
    /// connection, which another connection's account of the client may hold already.
    fn number_in_connection(&mut self, map: &serde_json::Map<String, Value>) {
        let Some(counts) = self.per_connection.as_mut() else { return };
        let (Some(Value::String(id)), Some(Value::String(connection))) = (map.get("id"), map.get("connectionId"))
        else {
            return;
        };
        if !id.starts_with(prefix::ACCOUNT) || self.alias.contains_key(id) || self.id.contains_key(id) {
            return;
        }
        let n = counts.entry(connection.clone()).or_default();
        *n += 1;
        let alias = format!("{}N{:025}", prefix::ACCOUNT, *n);
        self.alias.insert(id.clone(), alias.clone());
        self.id.insert(alias, id.clone());
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
