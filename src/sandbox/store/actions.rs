//! The control actions on the store (§3 lifecycle; the data changes `update_accounts` and
//! `delete_transaction`), each emitting its events, and the accounts they create and change.

use super::{ActionOutcome, Store};
use crate::sandbox::faults::{Mutant, Variant};
use crate::sandbox::model::{Account, Event, EventDetail, Transaction};
use crate::sandbox::seed;
use crate::sandbox::transitions::{transition_path, ActionArgs, ControlError};
use crate::spec::{prefix, Action, ConnectionState, ACCOUNTS_UPDATED, TRANSACTION_DELETED};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// [`Variant::BackgroundSync`]: a connection syncs this long after it first connects, and again
/// after as long, [`SYNCS`] times in all: often enough to land inside the harness's walks.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(400);
const SYNCS: u32 = 5;

/// What a data change did: its account, its transaction, the event's detail and kind.
type Change = (String, String, EventDetail, &'static str);

/// How often `read-echoes-update` echoes one account's reads at most.
const ECHO_EVERY_S: i64 = 2;

impl Store {
    /// One control action (§3 lifecycle, see `transitions.rs`; data changes for
    /// `update_accounts` / `delete_transaction`).
    pub(in crate::sandbox) fn apply(
        &mut self,
        conn_id: &str,
        action: Action,
        target: &ActionArgs,
    ) -> Result<ActionOutcome, ControlError> {
        let outcome = self.apply_change(conn_id, action, target);
        self.flush();
        outcome
    }

    pub(super) fn apply_change(
        &mut self,
        conn_id: &str,
        action: Action,
        target: &ActionArgs,
    ) -> Result<ActionOutcome, ControlError> {
        let from = self
            .connections
            .get(conn_id)
            .map(|c| c.status)
            .ok_or_else(|| ControlError::NotFound(format!("connection {conn_id}")))?;
        let now = self.now();
        if self.unannounced.remove(conn_id) {
            self.connection_event(conn_id, ConnectionState::Created, None, now);
        }
        let mut outcome = ActionOutcome {
            connection_id: conn_id.to_string(),
            action,
            status: from,
            event_ids: Vec::new(),
            account_id: None,
            transaction_id: None,
        };
        if action.target_state().is_some() {
            outcome.status = self.transition(conn_id, action, from, now, &mut outcome.event_ids)?;
            return Ok(outcome);
        }
        if from != ConnectionState::Connected {
            return Err(ControlError::NotPossible(format!("{action} needs a connected connection, it is {from}")));
        }
        let client_id = self.connections[conn_id].client_id.clone();
        let mut before_update = None;
        let (account_id, transaction_id, detail, kind) = match action {
            Action::UpdateAccounts => {
                let account_id = self.target_account(conn_id, target.account_id.as_deref())?;
                before_update = self.accounts.get(&account_id).cloned();
                self.update_accounts(conn_id, account_id, &client_id, now)
            }
            _ => self.delete_transaction(conn_id, target)?,
        };
        let id = match self.flavor.is(Mutant::ReusedEventId) {
            true => {
                self.last_event_id(conn_id, "connection.connected").unwrap_or_else(|| self.flavor.new_id(prefix::EVENT))
            }
            false => self.flavor.new_id(prefix::EVENT),
        };
        if kind == ACCOUNTS_UPDATED && self.flavor.is(Mutant::ConnectedReannounced) {
            outcome.event_ids.push(self.reannounce_connected(conn_id, &client_id, now));
        }
        if !self.silenced(kind, &account_id, now) {
            outcome.event_ids.push(self.emit(Event {
                id,
                kind,
                at: now,
                client_id,
                connection_id: conn_id.to_string(),
                detail,
            }));
        }
        // The three mutants serve the account (or its transactions) as it was until a while after
        // its event went out.
        if let (Some(event), ACCOUNTS_UPDATED, Some(before)) = (outcome.event_ids.last(), kind, before_update) {
            if self.flavor.is(Mutant::ChangeAfterAck) {
                self.unacked.insert(account_id.clone(), (event.clone(), before));
            } else if self.flavor.is(Mutant::EventBeforeData) {
                self.stale.insert(account_id.clone(), (event.clone(), before));
            } else if self.flavor.is(Mutant::TransactionsAfterAck) {
                // The new balance at once, the transactions of before.
                let mut partial = self.accounts[&account_id].clone();
                (partial.transactions, partial.tombstones) = (before.transactions, before.tombstones);
                self.stale.insert(account_id.clone(), (event.clone(), partial));
            }
        }
        outcome.account_id = Some(account_id);
        outcome.transaction_id = Some(transaction_id);
        Ok(outcome)
    }

    /// [`Mutant::QuickSyncUnannounced`]: an `accounts.updated` within 10 s of its account's last
    /// one is dropped; the sync's change stays.
    fn silenced(&mut self, kind: &str, account_id: &str, now: DateTime<Utc>) -> bool {
        if kind != ACCOUNTS_UPDATED || !self.flavor.is(Mutant::QuickSyncUnannounced) {
            return false;
        }
        match self.announced.get(account_id) {
            Some(at) if now - *at < chrono::Duration::seconds(10) => true,
            _ => {
                self.announced.insert(account_id.to_string(), now);
                false
            }
        }
    }

    /// [`Mutant::ReadEchoesUpdate`]: an authorised `GET /v1/accounts/{id}` of `client`'s own
    /// account sends an `accounts.updated` of it, at most once per account every
    /// [`ECHO_EVERY_S`] seconds, with nothing changed (a refresh hook that notifies on refresh, as
    /// `tests/foreign/python-wire`'s `read-echo-updated`).
    pub(in crate::sandbox) fn echo_read(&mut self, client: &str, account_id: &str) {
        let Ok(account) = self.own_account(client, account_id, false) else { return };
        let (id, connection_id, client_id) =
            (account.id.clone(), account.connection_id.clone(), account.client_id.clone());
        let now = self.now();
        if self.announced.get(&id).is_some_and(|at| now - *at < chrono::Duration::seconds(ECHO_EVERY_S)) {
            return;
        }
        self.announced.insert(id.clone(), now);
        self.emit(Event {
            id: self.flavor.new_id(prefix::EVENT),
            kind: ACCOUNTS_UPDATED,
            at: now,
            client_id,
            connection_id,
            detail: EventDetail::AccountsUpdated { account_id: id },
        });
        self.flush();
    }

    /// [`Mutant::ConnectedReannounced`]: `connection.connected` again, with previousStatus
    /// `connected`, though the status did not change.
    fn reannounce_connected(&mut self, conn_id: &str, client_id: &str, now: DateTime<Utc>) -> String {
        self.emit(Event {
            id: self.flavor.new_id(prefix::EVENT),
            kind: "connection.connected",
            at: now,
            client_id: client_id.to_string(),
            connection_id: conn_id.to_string(),
            detail: EventDetail::Connection { previous: Some(ConnectionState::Connected), error: None },
        })
    }

    /// A lifecycle action: the connection walks its path to the action's state, an event per
    /// step (pushed on `event_ids`); the state reached.
    fn transition(
        &mut self,
        conn_id: &str,
        action: Action,
        from: ConnectionState,
        now: DateTime<Utc>,
        event_ids: &mut Vec<String>,
    ) -> Result<ConnectionState, ControlError> {
        // The variant accepts an action leading to the state the connection is in, and
        // announces re-entering it (§3.2 shows no such transition: docs/checks.md's ruling).
        let path = match action.target_state() {
            Some(to) if to == from && self.flavor.has(Variant::ReenteredStates) => vec![to],
            _ => transition_path(from, action)
                .ok_or_else(|| ControlError::NotPossible(format!("{action} from {from}")))?,
        };
        let mut previous = from;
        for to in path {
            if to == ConnectionState::Connected {
                self.ensure_accounts(conn_id, now);
            }
            let conn = self.connections.get_mut(conn_id).expect("exists");
            conn.status = to;
            // The mutant's worker announces CONNECTED at once and stores it 1.5 s later.
            conn.stored_from = (self.flavor.is(Mutant::ConnectedBeforeStored) && to == ConnectionState::Connected)
                .then(|| {
                    now + chrono::Duration::milliseconds(crate::sandbox::faults::deliveries::ANNOUNCED_LATE_MS as i64)
                });
            let leaving_mfa = previous == ConnectionState::MfaRequired;
            let announced_previous = match self.flavor.mutant {
                Some(Mutant::PreviousStatusAfterMfa) if leaving_mfa => ConnectionState::Verifying,
                _ => previous,
            };
            // The mutant's worker takes 1.5 s to announce CONNECTED, its accounts served meanwhile.
            let at = match self.flavor.is(Mutant::AccountsWhileVerifying) && to == ConnectionState::Connected {
                true => {
                    now + chrono::Duration::milliseconds(crate::sandbox::faults::deliveries::ANNOUNCED_LATE_MS as i64)
                }
                false => now,
            };
            if !(self.flavor.is(Mutant::VerifyingAfterMfaSilent) && leaving_mfa) {
                event_ids.push(self.connection_event(conn_id, to, Some(announced_previous), at));
            }
            previous = to;
        }
        Ok(previous)
    }

    /// `update_accounts` on `account_id`: the account changed (a transaction added); the
    /// account, the transaction, and the event to announce.
    fn update_accounts(&mut self, conn_id: &str, account_id: String, client_id: &str, now: DateTime<Utc>) -> Change {
        let txn_id = self.update_account(conn_id, &account_id, now);
        for (owner, txn) in self.resurrecting.remove(conn_id).unwrap_or_default() {
            if let Some(account) = self.accounts.get_mut(&owner) {
                account.insert_transaction(txn);
            }
        }
        let detail = EventDetail::AccountsUpdated { account_id: account_id.clone() };
        if self.flavor.is(Mutant::AccountsListPartial) {
            self.update_hidden_account(conn_id, &account_id, client_id, now);
        }
        (account_id, txn_id, detail, ACCOUNTS_UPDATED)
    }

    /// `delete_transaction`: the transaction removed; the account, the transaction, and the
    /// event to announce.
    fn delete_transaction(&mut self, conn_id: &str, target: &ActionArgs) -> Result<Change, ControlError> {
        let (account_id, index) = self.target_transaction(conn_id, target)?;
        let account = self.accounts.get_mut(&account_id).expect("exists");
        let txn = if self.flavor.is(Mutant::DeletedTransactionListed) {
            account.transactions[index].clone()
        } else {
            account.remove_transaction(index)
        };
        // The transactions served of before lose the deleted one too.
        if let Some((_, partial)) =
            self.stale.get_mut(&account_id).filter(|_| self.flavor.is(Mutant::TransactionsAfterAck))
        {
            if let Some(at) = partial.transactions.iter().position(|t| t.id == txn.id) {
                partial.remove_transaction(at);
            }
        }
        if self.flavor.is(Mutant::DeletedReturnsOnNeighbourUpdate) {
            self.resurrecting.entry(conn_id.to_string()).or_default().push((account_id.clone(), txn.clone()));
        }
        if self.flavor.is(Mutant::DeletedTransactionReturns) {
            let at = self.reads_of(&account_id);
            self.returning.entry(account_id.clone()).or_default().push((at, txn.clone()));
        }
        // The mutant announces a transaction that never existed (the real one is removed).
        let announced = if self.flavor.is(Mutant::DeletedUnknownTransaction) {
            self.flavor.new_id(prefix::TRANSACTION)
        } else {
            txn.id.clone()
        };
        // The mutant names another account of the connection as the one concerned.
        let named = match self.flavor.is(Mutant::DeletedNamesOtherAccount) {
            true => self.connections[conn_id].account_ids.iter().find(|a| **a != account_id).cloned(),
            false => None,
        };
        let detail = EventDetail::TransactionDeleted {
            account_id: named.unwrap_or_else(|| account_id.clone()),
            transaction_id: announced,
        };
        Ok((account_id, txn.id, detail, TRANSACTION_DELETED))
    }

    /// Accounts are created the first time a connection reaches CONNECTED and kept afterwards.
    fn ensure_accounts(&mut self, conn_id: &str, now: DateTime<Utc>) {
        let conn = self.connections.get_mut(conn_id).expect("exists");
        if !conn.account_ids.is_empty() {
            return;
        }
        // The variant links no account to the connections of every client but the first (§4.2
        // does not say a connection has any).
        if self.flavor.has(Variant::EmptySecondClient) && self.first_client.as_ref() != Some(&conn.client_id) {
            return;
        }
        let mut accounts = seed::accounts(conn, now, self.flavor);
        // The mutant lists one transaction under two accounts: the second account's newest
        // takes the id of the first account's newest.
        if self.flavor.is(Mutant::TransactionInTwoAccounts) && accounts.len() > 1 {
            if let Some(id) = accounts[0].transactions.first().map(|t| t.id.clone()) {
                if let Some(t) = accounts[1].transactions.first_mut() {
                    t.id = id;
                }
            }
        }
        if self.flavor.has(Variant::PerClientIdsAtCreation) {
            // Numbered as they are made, read or not: the client's first account is its 1.
            let mut made: Value = accounts
                .iter()
                .flat_map(|a| std::iter::once(a.id.clone()).chain(a.transactions.iter().map(|t| t.id.clone())))
                .collect();
            self.aliases.outward(&conn.client_id, &mut made);
        }
        for account in accounts {
            conn.account_ids.push(account.id.clone());
            self.accounts.insert(account.id.clone(), account);
        }
        if self.flavor.has(Variant::BackgroundSync) || self.flavor.has(Variant::BackgroundDedup) {
            self.syncs_due.push((std::time::Instant::now() + SYNC_EVERY, conn_id.to_string(), SYNCS));
        }
    }

    /// [`Variant::BackgroundSync`]: the syncs whose instant has come, each an `update_accounts`
    /// of its own with its `accounts.updated` (§1 item 5). Run on a clock of their own
    /// (`Shared::start_syncs`), never by a request.
    pub(in crate::sandbox) fn sync_due(&mut self) {
        let now = std::time::Instant::now();
        while let Some(i) = self.syncs_due.iter().position(|(at, ..)| *at <= now) {
            let (at, conn_id, left) = self.syncs_due.swap_remove(i);
            // A connection no longer CONNECTED does not sync: the action is refused, and that is all.
            let (action, args) = match self.flavor.has(Variant::BackgroundDedup) {
                true => (Action::DeleteTransaction, self.middle_transaction(&conn_id)),
                false => (Action::UpdateAccounts, ActionArgs::default()),
            };
            if self.apply(&conn_id, action, &args).is_ok() && left > 1 {
                self.syncs_due.push((at + SYNC_EVERY, conn_id, left - 1));
            }
        }
    }

    /// [`Mutant::RefusedReadReverifies`]: a read refused for its key still re-verifies the
    /// connection it names when that one is CONNECTED: `connection.verifying`, then
    /// `connection.connected` again, both announced (the state ends where it was).
    pub(in crate::sandbox) fn reverify_on_refusal(&mut self, conn_id: &str) {
        if self.connections.get(conn_id).map(|c| c.status) != Some(ConnectionState::Connected) {
            return;
        }
        let now = self.now();
        let (connected, verifying) = (ConnectionState::Connected, ConnectionState::Verifying);
        self.connection_event(conn_id, verifying, Some(connected), now);
        self.connection_event(conn_id, connected, Some(verifying), now);
        self.flush();
    }

    /// [`Mutant::PhantomDeletion`]: once an account was listed to its end, its next first page
    /// announces a `transaction.deleted` of a transaction it never had, once per account.
    pub(in crate::sandbox) fn phantom_deletion(&mut self, account_id: &str, first: bool, last: bool) {
        let key = format!("phantom:{account_id}");
        match self.reads_of(&key) {
            0 if last => {
                self.count_read(&key);
            }
            1 if first => {
                self.count_read(&key);
                let Some(account) = self.accounts.get(account_id) else { return };
                let (client_id, connection_id) = (account.client_id.clone(), account.connection_id.clone());
                let transaction_id = self.flavor.new_id(prefix::TRANSACTION);
                let detail = EventDetail::TransactionDeleted { account_id: account_id.to_string(), transaction_id };
                let id = self.flavor.new_id(prefix::EVENT);
                let at = self.now();
                self.emit(Event { id, kind: TRANSACTION_DELETED, at, client_id, connection_id, detail });
                self.flush();
            }
            _ => {}
        }
    }

    /// [`Variant::BackgroundDedup`]: the transaction in the middle of the connection's first
    /// account that has any, where a walk of that account is most likely to be.
    fn middle_transaction(&self, conn_id: &str) -> ActionArgs {
        let accounts = self.connections.get(conn_id).map(|c| c.account_ids.clone()).unwrap_or_default();
        let Some(account) = accounts.iter().find_map(|id| self.accounts.get(id).filter(|a| !a.transactions.is_empty()))
        else {
            return ActionArgs::default();
        };
        let txn = &account.transactions[account.transactions.len() / 2];
        ActionArgs { account_id: Some(account.id.clone()), transaction_id: Some(txn.id.clone()) }
    }

    /// [`Mutant::AccountsListPartial`]: a sync updates the account the list leaves out too,
    /// announced by an `accounts.updated` of its own.
    fn update_hidden_account(&mut self, conn_id: &str, driven: &str, client_id: &str, now: DateTime<Utc>) {
        let ids = &self.connections[conn_id].account_ids;
        let Some(hidden) = ids.last().filter(|h| ids.len() > 1 && h.as_str() != driven).cloned() else { return };
        self.update_account(conn_id, &hidden, now);
        self.emit(Event {
            id: self.flavor.new_id(prefix::EVENT),
            kind: ACCOUNTS_UPDATED,
            at: now,
            client_id: client_id.to_string(),
            connection_id: conn_id.to_string(),
            detail: EventDetail::AccountsUpdated { account_id: hidden },
        });
    }

    /// [`Mutant::AccountsStampedAtFirstRead`]: the first list read of a connection's accounts
    /// stamps their `createdAt` with the time of the read, not of their creation.
    pub(crate) fn stamp_on_first_read(&mut self, conn_id: &str) {
        if !self.flavor.is(Mutant::AccountsStampedAtFirstRead) {
            return;
        }
        let Some(conn) = self.connections.get(conn_id) else { return };
        if conn.status != ConnectionState::Connected || self.count_read(&format!("first-list:{conn_id}")) > 0 {
            return;
        }
        let now = self.now();
        for id in conn.account_ids.clone() {
            if let Some(account) = self.accounts.get_mut(&id) {
                account.created_at = now;
            }
        }
    }

    /// Another account of `account`'s connection (the next one), for
    /// [`Mutant::AccountReadOtherFields`].
    pub(crate) fn sibling_account(&self, account: &Account) -> Option<&Account> {
        let ids = &self.connections.get(&account.connection_id)?.account_ids;
        let at = ids.iter().position(|id| *id == account.id)?;
        let next = ids.get((at + 1) % ids.len()).filter(|id| **id != account.id)?;
        self.accounts.get(next)
    }

    /// The given account (which must belong to the connection) or the connection's first.
    fn target_account(&self, conn_id: &str, account_id: Option<&str>) -> Result<String, ControlError> {
        let conn = &self.connections[conn_id];
        match account_id {
            Some(id) if conn.account_ids.iter().any(|a| a == id) => Ok(id.to_string()),
            Some(id) => Err(ControlError::NotFound(format!("account {id} of connection {conn_id}"))),
            None => conn
                .account_ids
                .first()
                .cloned()
                .ok_or_else(|| ControlError::NotPossible("connection has no accounts".into())),
        }
    }

    /// `update_accounts`: one new transaction dated today, applied to the balance.
    fn update_account(&mut self, conn_id: &str, account_id: &str, now: DateTime<Utc>) -> String {
        let conn = self.connections.get_mut(conn_id).expect("exists");
        let account = self.accounts.get_mut(account_id).expect("exists");
        let mut txn: Transaction = seed::transaction(&mut conn.rng, account, now.date_naive(), now, self.flavor);
        if txn.amount_cents == 0 {
            txn.amount_cents = -100;
        }
        account.balance_cents += txn.amount_cents;
        account.available_cents += txn.amount_cents;
        account.last_synced_at = if self.flavor.is(Mutant::LastSyncedGoesBack) {
            account.last_synced_at - chrono::Duration::hours(6)
        } else {
            now
        };
        if self.flavor.is(Mutant::CreatedAtRestamped) {
            account.created_at += chrono::Duration::days(1);
        }
        account.updates += 1;
        if self.flavor.is(Mutant::ForeignTransactionAfterUpdate) {
            // The new transaction names another account of the connection as its owner.
            if let Some(other) = conn.account_ids.iter().find(|id| *id != account_id) {
                txn.account_id = other.clone();
            }
        }
        if self.flavor.is(Mutant::SyncReplacesSilently) && !account.transactions.is_empty() {
            // Its tombstone keeps a cursor that names it working: only the id's absence is the fault.
            let mut copy = account.remove_transaction(0);
            copy.id = self.flavor.new_id(crate::spec::prefix::TRANSACTION);
            account.insert_transaction(copy);
        }
        let id = txn.id.clone();
        account.insert_transaction(txn);
        id
    }

    /// `delete_transaction`: the given transaction, or the newest of the given account, or the
    /// newest of the first account that has any. Returns (account id, index in its list).
    fn target_transaction(&self, conn_id: &str, target: &ActionArgs) -> Result<(String, usize), ControlError> {
        let conn = &self.connections[conn_id];
        let candidates: Vec<String> = match target.account_id.as_deref() {
            Some(id) => vec![self.target_account(conn_id, Some(id))?],
            None => conn.account_ids.clone(),
        };
        if let Some(txn_id) = target.transaction_id.as_deref() {
            for acc in candidates {
                let list = &self.accounts[&acc].transactions;
                if let Some(i) = list.iter().position(|t| t.id == txn_id) {
                    return Ok((acc, i));
                }
            }
            // The mutant refuses a deletion of an id it replaced, as a 409 would.
            if self.flavor.is(Mutant::SyncReplacesSilently) {
                return Err(ControlError::NotPossible(format!("transaction {txn_id} is already gone")));
            }
            return Err(ControlError::NotFound(format!("transaction {txn_id}")));
        }
        candidates
            .into_iter()
            .find(|acc| !self.accounts[acc].transactions.is_empty())
            .map(|acc| (acc, 0))
            .ok_or_else(|| ControlError::NotPossible("no transaction left to delete".into()))
    }
}
