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
    /// What an answer edit remembers ([`super::faults::answers::Answer::memory`]).
    pub(crate) edit_memory: Mutex<HashMap<String, usize>>,
}

impl Shared {
    /// The store; never held across an `.await`.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Under [`Variant::BackgroundSync`], runs the syncs that are due on a clock of their own
    /// until the sandbox is dropped. Not when anyone looks: a sync that a request set off, even
    /// a refused one, is the fault `invariants.cause` judges, and the legal variant failed it
    /// when the run's refused reads were the first requests after a quiet spell (a busy CPU).
    pub(crate) fn start_syncs(shared: &std::sync::Arc<Self>) {
        if !shared.flavor.has(Variant::BackgroundSync) && !shared.flavor.has(Variant::BackgroundDedup) {
            return;
        }
        let weak = std::sync::Arc::downgrade(shared);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(20));
            while let Some(shared) = weak.upgrade() {
                shared.lock().sync_due();
                drop(shared);
                tick.tick().await;
            }
        });
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
