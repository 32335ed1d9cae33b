//! The store's faults that put a secret where it does not belong (§5 item 2), each beside its
//! name; the row is in `faults/mod.rs`.

use super::Store;
use crate::sandbox::faults::Mutant;
use serde_json::Value;

impl Store {
    /// `refusal-shows-token`: the widget token of the connection `account_id` belongs to, for a
    /// refusal to name (`api.rs`).
    pub(in crate::sandbox) fn token_of_account(&self, account_id: &str) -> Option<String> {
        let account = self.accounts.get(account_id)?;
        self.connections.get(&account.connection_id).map(|c| c.widget_token.clone())
    }

    /// `other-key-in-events`: the event carries, as `data.verification`, the API key of a client
    /// other than the one it is delivered to (a global set by the last registration).
    pub(super) fn leak_other_key(&self, body: &mut Value, client: &str) {
        if !self.flavor.is(Mutant::OtherKeyInEvents) {
            return;
        }
        let mut others = self.clients.iter().filter(|(_, c)| c.as_str() != client).map(|(k, _)| k);
        if let (Some(key), Some(data)) = (others.next(), body.get_mut("data").and_then(Value::as_object_mut)) {
            data.insert("verification".to_string(), Value::String(key.clone()));
        }
    }
}
