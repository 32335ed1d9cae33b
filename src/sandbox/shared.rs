//! What the routes and the control handle share: the state behind one mutex.

use super::faults::Variant;
use super::flavor::Flavor;
use super::store::{ActionOutcome, Store};
use super::transitions::{ActionArgs, ControlError};
use crate::spec::Action;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// The state shared by the routes and [`Control`](super::Control).
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) service: String,
    pub(crate) flavor: Flavor,
    /// What an answer edit remembers ([`super::faults::Answer::memory`]).
    pub(crate) edit_memory: Mutex<HashMap<String, usize>>,
}

impl Shared {
    /// The store; never held across an `.await`. Under [`Variant::BackgroundSync`] the syncs
    /// that are due run first, so that they happen whenever anyone looks.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        let mut store = self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.flavor.has(Variant::BackgroundSync) {
            store.sync_due();
        }
        store
    }

    /// Registers `url` for the events of the client whose key is `key` (`None`: every
    /// client's); an unknown key is refused.
    pub(crate) fn register_webhook(&self, url: &str, key: Option<&str>) -> Result<bool, ControlError> {
        let mut store = self.lock();
        let client = match key {
            None => None,
            Some(key) => {
                Some(store.client_for_key(key).ok_or_else(|| ControlError::NotFound("no client has that key".into()))?)
            }
        };
        if self.flavor.has(Variant::SharedWebhookAddress) {
            // One address for every client: the new one replaces whatever was registered.
            for old in store.outbox_mut().urls().into_iter().filter(|u| u != url) {
                store.outbox_mut().unregister(&old);
            }
            return Ok(store.outbox_mut().register(url, None));
        }
        Ok(store.outbox_mut().register(url, client))
    }

    pub(crate) fn unregister_webhook(&self, url: &str) -> bool {
        self.lock().outbox_mut().unregister(url)
    }

    pub(crate) fn webhooks(&self) -> Vec<String> {
        self.lock().outbox_mut().urls()
    }

    pub(crate) fn apply(
        &self,
        connection_id: &str,
        action: Action,
        target: &ActionArgs,
    ) -> Result<ActionOutcome, ControlError> {
        let mut store = self.lock();
        if !self.flavor.per_client_ids() {
            return store.apply(connection_id, action, target);
        }
        // The driver names accounts and transactions as the connection's client reads them.
        let client = store.client_of_connection(connection_id).unwrap_or_default().to_string();
        let inward = |id: &Option<String>| id.as_ref().map(|id| store.aliases().inward(&client, id));
        let target =
            ActionArgs { account_id: inward(&target.account_id), transaction_id: inward(&target.transaction_id) };
        store.apply(connection_id, action, &target)
    }
}
