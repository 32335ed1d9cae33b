//! The sandbox state behind one `Mutex`: clients, connections, accounts, the event log, and the
//! sending end of the webhook queue. Everything that changes state happens here, synchronously,
//! so that the events of one change are queued in emission order while the lock is held (the
//! queue is unbounded, so sending never waits).

use super::aliases::Aliases;
use super::faults::{Mutant, Variant};
use super::flavor::Flavor;
use super::model::{key_order, list_order, Account, Connection, Event, EventDetail, Transaction};
use super::transitions::ActionArgs;
use super::webhooks::Outbox;
mod actions;
mod leaks;

use super::{render, seed};
use crate::spec::{prefix, Action, ConnectionState, ACCOUNTS_UPDATED, TRANSACTION_DELETED};
use chrono::{DateTime, Timelike, Utc};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// What a control action did: the body of the control route's 200 answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionOutcome {
    /// The connection acted on.
    pub connection_id: String,
    /// The action applied.
    pub action: Action,
    /// The connection's status after the action.
    pub status: ConnectionState,
    /// Ids of the events emitted, in order.
    pub event_ids: Vec<String>,
    /// The account changed (`update_accounts`, `delete_transaction`).
    pub account_id: Option<String>,
    /// The transaction added (`update_accounts`) or removed (`delete_transaction`).
    pub transaction_id: Option<String>,
}

impl ActionOutcome {
    /// The control route's JSON answer.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "connectionId": self.connection_id,
            "action": self.action.as_str(),
            "status": self.status.upper(),
            "eventIds": self.event_ids,
            "accountId": self.account_id,
            "transactionId": self.transaction_id,
        })
    }
}

/// Why a read through the API failed (mapped to HTTP answers by the API layer).
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Unknown, or owned by another client.
    NotFound,
    /// Accounts of a connection that is not CONNECTED (§3.2, §4.2).
    NotConnected(ConnectionState),
    /// `starting_after` is not a transaction of this account, nor a deleted one.
    UnknownCursor,
}

pub(crate) struct Store {
    /// API key → client id (§5).
    clients: HashMap<String, String>,
    connections: HashMap<String, Connection>,
    accounts: HashMap<String, Account>,
    events: Vec<Arc<Value>>,
    next_seed: u64,
    outbox: Outbox,
    /// Each client's aliases of account and transaction ids ([`Variant::PerClientIds`]).
    aliases: Aliases,
    /// The client of the first configured key (what the auth mutants serve to anyone).
    first_client: Option<String>,
    flavor: Flavor,
    /// Events of the change in progress, with their client, delivered together by
    /// [`Store::flush`].
    batch: Vec<(Arc<Value>, String)>,
    /// First-page reads per account and list reads per connection (for the state mutants).
    reads: std::sync::Mutex<HashMap<String, u32>>,
    /// Deleted transactions the state mutant lists again, with the account's reads at deletion.
    returning: HashMap<String, Vec<(u32, Transaction)>>,
    /// Mutant `deleted-returns-on-neighbour-update`: deleted transactions by connection, each
    /// with its account, put back on the connection's next `update_accounts`.
    resurrecting: HashMap<String, Vec<(String, Transaction)>>,
    /// Mutant `event-before-data`: an updated account as it was before the update, served until
    /// 2.5 s after the event (its id) that announced the update was first posted; mutant
    /// `transactions-after-ack`: with the transactions of before only, until it is acknowledged.
    stale: HashMap<String, (String, Account)>,
    /// Each client's connections in creation order (mutants `wrong-connection` and
    /// `events-name-other-connection`).
    made: HashMap<String, Vec<String>>,
    /// Mutant `change-after-ack`: an updated account as it was before its update, served until
    /// 0.5 s after the delivery of the event (its id) that announced the update is acknowledged.
    unacked: HashMap<String, (String, Account)>,
    /// Variant `background-sync`: connections that sync on their own, each at its instant, with
    /// the syncs it has left.
    syncs_due: Vec<(std::time::Instant, String, u32)>,
    /// Mutants `quick-sync-unannounced` and `read-echoes-update`: when each account's last
    /// `accounts.updated` occurred.
    announced: HashMap<String, DateTime<Utc>>,
    /// Mutant `created-event-lazy`: connections whose `connection.created` waits for an action.
    unannounced: std::collections::HashSet<String>,
}

impl Store {
    pub(super) fn new(
        clients: HashMap<String, String>,
        first_client: Option<String>,
        outbox: Outbox,
        flavor: Flavor,
    ) -> Self {
        Self {
            clients,
            connections: HashMap::new(),
            accounts: HashMap::new(),
            events: Vec::new(),
            next_seed: 1,
            outbox,
            aliases: Aliases::new(flavor.is(Mutant::AccountIdPerConnection)),
            first_client,
            flavor,
            batch: Vec::new(),
            made: HashMap::new(),
            reads: Default::default(),
            returning: HashMap::new(),
            stale: HashMap::new(),
            syncs_due: Vec::new(),
            announced: HashMap::new(),
            unannounced: Default::default(),
            resurrecting: HashMap::new(),
            unacked: HashMap::new(),
        }
    }

    /// How many times `key` was read before, counting this read.
    fn count_read(&self, key: &str) -> u32 {
        let mut reads = self.reads.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = reads.entry(key.to_string()).or_default();
        *n += 1;
        *n - 1
    }

    fn reads_of(&self, key: &str) -> u32 {
        self.reads.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).copied().unwrap_or(0)
    }

    /// The server's clock: 90 s ahead of the machine's under [`Variant::ClockAhead`], cut to
    /// the second under [`Variant::WholeSecondClock`] (events alike within a second but for
    /// their ids: `tests/foreign/node-projected`'s `whole-second-timestamps`, which failed the chain once).
    fn now(&self) -> DateTime<Utc> {
        let ahead = if self.flavor.has(Variant::ClockAhead) { 90 } else { 0 };
        let now = Utc::now() + chrono::Duration::seconds(ahead);
        if self.flavor.has(Variant::WholeSecondClock) {
            return now.with_nanosecond(0).unwrap_or(now);
        }
        now
    }

    /// The connection whose `widgetToken` is `token`, for [`Mutant::WidgetTokenOpensOwnData`].
    pub(super) fn connection_of_token(&self, token: &str) -> Option<&Connection> {
        self.connections.values().find(|c| c.widget_token == token)
    }

    /// The client an API key belongs to.
    pub(super) fn client_for_key(&self, key: &str) -> Option<String> {
        let exact = self.clients.get(key).cloned();
        if exact.is_none() && self.flavor.is(Mutant::WidgetTokenAsKey) {
            return self.connections.values().find(|c| c.widget_token == key).map(|c| c.client_id.clone());
        }
        if exact.is_none() && self.flavor.is(Mutant::KeyPrefixMatch) {
            return self.clients.iter().find(|(k, _)| key.starts_with(k.as_str())).map(|(_, c)| c.clone());
        }
        if exact.is_none() && self.flavor.is(Mutant::KeyShapeMatch) {
            let prefix = |k: &str| k.find('_').map(|i| k[..=i].to_string());
            let shaped = |k: &str| k.len() == key.len() && prefix(k).is_some_and(|p| key.starts_with(&p));
            // The client whose key it resembles most, whatever the map's order.
            let alike = |k: &str| k.chars().zip(key.chars()).filter(|(a, b)| a == b).count();
            return self
                .clients
                .iter()
                .filter(|(k, _)| shaped(k))
                .max_by_key(|(k, _)| (alike(k), k.as_str()))
                .map(|(_, c)| c.clone());
        }
        exact
    }

    /// Some API key (for the `widget-embeds-key` mutant, which leaks one into the frontend).
    pub(super) fn any_key(&self) -> Option<String> {
        self.clients.keys().min().cloned()
    }

    /// The client of the first configured key.
    pub(super) fn first_client(&self) -> Option<String> {
        self.first_client.clone()
    }

    /// Every event emitted so far, rendered, in emission order.
    pub(super) fn events(&self) -> Vec<Value> {
        self.events.iter().map(|e| (**e).clone()).collect()
    }

    pub(super) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub(super) fn outbox_mut(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    pub(super) fn aliases(&self) -> &Aliases {
        &self.aliases
    }

    pub(super) fn aliases_mut(&mut self) -> &mut Aliases {
        &mut self.aliases
    }

    /// The client a connection belongs to.
    pub(super) fn client_of_connection(&self, conn_id: &str) -> Option<&str> {
        self.connections.get(conn_id).map(|c| c.client_id.as_str())
    }

    /// The id of the latest `kind` event of a connection (for the `reused-event-id` mutant).
    fn last_event_id(&self, conn_id: &str, kind: &str) -> Option<String> {
        self.events.iter().rev().find_map(|e| {
            let data = e.get("data")?;
            (data.get("connectionId")?.as_str() == Some(conn_id) && e.get("type")?.as_str() == Some(kind))
                .then(|| e.get("id")?.as_str().map(str::to_string))?
        })
    }

    /// The connection an event names instead of its own, under the mutants that misname it:
    /// `wrong-connection`, its client's first; `events-name-other-connection`, the one its
    /// client created just before it (the client's first names the latest, rotating).
    fn other_connection(&self, event: &Event) -> Option<String> {
        let made = self.made.get(&event.client_id)?;
        if self.flavor.is(Mutant::WrongConnection) {
            return made.first().cloned();
        }
        if !self.flavor.is(Mutant::EventsNameOtherConnection) {
            return None;
        }
        let at = made.iter().position(|c| *c == event.connection_id)?;
        made.get(at.checked_sub(1).unwrap_or(made.len() - 1)).cloned()
    }

    fn emit(&mut self, mut event: Event) -> String {
        let id = event.id.clone();
        if self.flavor.is(Mutant::EventTimeReversed) {
            // Each later event of a connection is dated a minute earlier than the one before.
            let earlier = self.events.iter().filter(|e| e["data"]["connectionId"] == event.connection_id.as_str());
            event.at -= chrono::Duration::minutes(earlier.count() as i64);
        }
        if self.flavor.is(Mutant::EventTimeInFuture) && [ACCOUNTS_UPDATED, TRANSACTION_DELETED].contains(&event.kind) {
            event.at += chrono::Duration::hours(1);
        }
        if self.flavor.is(Mutant::EventsInLocalZone) {
            event.at += chrono::Duration::hours(2);
        }
        if self.flavor.suppressed_event() == Some(event.kind) {
            return id;
        }
        if let Some(other) = self.other_connection(&event) {
            event.connection_id = other;
        }
        if self.flavor.is(Mutant::FailedAuthAsError) && event.kind == ConnectionState::FailedAuth.event_type() {
            // The right connection, the wrong type: a failed authentication announced as an error.
            event.kind = ConnectionState::Error.event_type();
        }
        let mut body = render::event(self.flavor, &event);
        self.leak_other_key(&mut body, &event.client_id);
        if let Some(p) = self.flavor.perturb {
            let second = self.first_client.as_deref() != Some(event.client_id.as_str());
            if !p.0.event(&mut body, second) {
                return id;
            }
        }
        let body = Arc::new(body);
        self.events.push(body.clone());
        // The variant sends the short form too, just before the full one (§6.2 shows both).
        if self.flavor.has(Variant::ConnectedBothForms) && event.kind == ConnectionState::Connected.event_type() {
            self.batch.push((Arc::new(render::short_form(&event)), event.client_id.clone()));
        }
        self.batch.push((body, event.client_id));
        id
    }

    /// Delivers the events of one change, in emission order (reversed under
    /// [`Variant::ReversedEvents`]: §6.3 leaves the delivery order open).
    fn flush(&mut self) {
        let mut batch = std::mem::take(&mut self.batch);
        if self.flavor.has(Variant::ReversedEvents) {
            batch.reverse();
        }
        for (body, client) in batch {
            let body = if self.flavor.per_client_ids() {
                let mut seen = (*body).clone();
                self.aliases.outward(&client, &mut seen);
                Arc::new(seen)
            } else {
                body
            };
            self.outbox.deliver(body, client);
        }
    }

    fn connection_event(
        &mut self,
        conn_id: &str,
        to: ConnectionState,
        previous: Option<ConnectionState>,
        now: DateTime<Utc>,
    ) -> String {
        let client_id = self.connections[conn_id].client_id.clone();
        if self.flavor.is(Mutant::SecondClientNoCreated)
            && to == ConnectionState::Created
            && self.first_client.as_deref() != Some(client_id.as_str())
        {
            return self.flavor.new_id(prefix::EVENT);
        }
        let error = (to == ConnectionState::Error)
            .then_some(("sandbox_error", "Simulated unexpected error while talking to the bank"));
        self.emit(Event {
            id: self.flavor.new_id(prefix::EVENT),
            kind: to.event_type(),
            at: now,
            client_id,
            connection_id: conn_id.to_string(),
            detail: EventDetail::Connection { previous, error },
        })
    }

    /// §4.1: a new connection in CREATED, announced by `connection.created` (§3.2).
    pub(super) fn create_connection(&mut self, client_id: &str) -> Value {
        let f = self.flavor;
        let seed = self.next_seed;
        self.next_seed += 1;
        let id = if f.is(Mutant::DuplicateConnectionIds) {
            // Two ids for everything: a new connection replaces the older one of the same id.
            format!("{}DUPLICATE{:017}", prefix::CONNECTION, seed % 2)
        } else {
            f.new_id(prefix::CONNECTION)
        };
        let conn = self.new_connection(&id, client_id, seed, seed);
        let body = render::connection_created(f, &conn.id, conn.status, &conn.widget_token);
        self.connections.insert(id.clone(), conn);
        self.made.entry(client_id.to_string()).or_default().push(id.clone());
        if f.is(Mutant::CreatedEventLazy) {
            self.unannounced.insert(id.clone());
        } else {
            self.connection_event(&id, ConnectionState::Created, None, self.now());
        }
        if f.has(Variant::ForeignConnectionEvents) {
            self.foreign_connection(client_id, seed);
        }
        self.flush();
        body
    }

    /// A CREATED connection of `client_id`: its institution from `seed`, its data from `rng_seed`.
    fn new_connection(&mut self, id: &str, client_id: &str, seed: u64, rng_seed: u64) -> Connection {
        Connection {
            id: id.to_string(),
            client_id: client_id.to_string(),
            status: ConnectionState::Created,
            widget_token: self.widget_token(client_id),
            account_ids: Vec::new(),
            institution: seed::INSTITUTIONS[(seed as usize - 1) % seed::INSTITUTIONS.len()].clone(),
            rng: StdRng::seed_from_u64(rng_seed),
            stored_from: None,
        }
    }

    /// [`Variant::ForeignConnectionEvents`]: another backend of the same client makes and
    /// connects a connection of its own, whose events reach the same webhook receiver (§6 does
    /// not confine deliveries to the connections one caller made).
    fn foreign_connection(&mut self, client_id: &str, seed: u64) {
        let id = self.flavor.new_id(prefix::CONNECTION);
        let conn = self.new_connection(&id, client_id, seed, seed + (1 << 32));
        self.connections.insert(id.clone(), conn);
        self.connection_event(&id, ConnectionState::Created, None, self.now());
        let _ = self.apply_change(&id, Action::Connect, &ActionArgs::default());
    }

    /// A fresh widget token (§2.1); [`Mutant::KeyInWidgetToken`] makes it of the client's API
    /// key, hex-encoded, so a frontend holds the key (§5.2, §5.3).
    fn widget_token(&self, client_id: &str) -> String {
        let key = self.clients.iter().find(|(_, c)| *c == client_id).map(|(k, _)| k.as_str());
        match key {
            Some(key) if self.flavor.is(Mutant::KeyInWidgetToken) => {
                let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
                format!("{}{hex}", prefix::WIDGET_TOKEN)
            }
            _ => self.flavor.new_id(prefix::WIDGET_TOKEN),
        }
    }

    /// [`Mutant::FirstClientReadsAll`]: the first client's reads are not confined to its own.
    fn first_reads_all(&self, client_id: &str) -> bool {
        let hole = self.flavor.is(Mutant::FirstClientReadsAll) || self.flavor.is(Mutant::LeakBlankedField);
        hole && self.first_client.as_deref() == Some(client_id)
    }

    fn own_connection(&self, client_id: &str, conn_id: &str) -> Result<&Connection, ReadError> {
        let any_client = self.flavor.is(Mutant::IsolationAccounts) || self.first_reads_all(client_id);
        match self.connections.get(conn_id) {
            Some(c) if c.client_id == client_id || any_client => Ok(c),
            _ => Err(ReadError::NotFound),
        }
    }

    /// The account as reads show it: under mutants `change-after-ack` and `event-before-data`,
    /// as it was before its update for a moment after the update was announced (its
    /// transactions only, under `transactions-after-ack`).
    pub(super) fn account_as_read(&self, account_id: &str) -> Option<&Account> {
        if let Some((event, before)) = self.unacked.get(account_id) {
            let readable = self.outbox.acked(event).map(|at| at + std::time::Duration::from_millis(500));
            if readable.is_none_or(|at| std::time::Instant::now() < at) {
                return Some(before);
            }
        }
        if let Some((event, before)) = self.stale.get(account_id) {
            let readable = match self.flavor.is(Mutant::TransactionsAfterAck) {
                // Not before 1 s after the first posting either: a copy of the delivery is
                // acknowledged at once, whatever the reaction read holds.
                true => self
                    .outbox
                    .acked(event)
                    .zip(self.outbox.posted(event))
                    .map(|(acked, posted)| acked.max(posted + std::time::Duration::from_secs(1))),
                false => self.outbox.posted(event).map(|at| at + std::time::Duration::from_millis(2500)),
            };
            if readable.is_none_or(|at| std::time::Instant::now() < at) {
                return Some(before);
            }
        }
        self.accounts.get(account_id)
    }

    /// An account of this client. Readable whatever the connection's later status: only the
    /// connection-accounts endpoint is tied to CONNECTED (§4.2). `any_client`: a mutant's hole.
    pub(super) fn own_account(
        &self,
        client_id: &str,
        account_id: &str,
        any_client: bool,
    ) -> Result<&Account, ReadError> {
        let any_client = any_client || self.first_reads_all(client_id);
        // The mutant finds an account by the part of its id after the prefix, whatever the prefix.
        let by_rest = account_id.split_once('_').map(|(_, rest)| format!("{}{rest}", prefix::ACCOUNT));
        let account_id = match by_rest.filter(|_| self.flavor.is(Mutant::IdPrefixIgnored)) {
            Some(id) => id,
            None => account_id.to_string(),
        };
        match self.account_as_read(&account_id) {
            Some(a) if a.client_id == client_id || any_client => Ok(a),
            _ => Err(ReadError::NotFound),
        }
    }

    /// §4.2: the accounts array, only when CONNECTED.
    pub(super) fn connection_accounts(&self, client_id: &str, conn_id: &str) -> Result<Value, ReadError> {
        let conn = self.own_connection(client_id, conn_id)?;
        let served = match self.flavor.mutant {
            Some(Mutant::AccountsBeforeConnected) => true,
            Some(Mutant::AccountsAfterDisconnected) => conn.status == ConnectionState::Disconnected,
            _ => false,
        };
        if conn.status != ConnectionState::Connected && !served {
            return Err(ReadError::NotConnected(conn.status));
        }
        if conn.stored_from.is_some_and(|from| self.now() < from) {
            return Err(ReadError::NotConnected(ConnectionState::Verifying));
        }
        // The mutant's list leaves out the connection's last account (of two or more).
        let hidden = match self.flavor.is(Mutant::AccountsListPartial) && conn.account_ids.len() > 1 {
            true => conn.account_ids.last().map(String::as_str),
            false => None,
        };
        let listed =
            conn.account_ids.iter().filter(|id| Some(id.as_str()) != hidden).filter_map(|id| self.account_as_read(id));
        // The mutant forgets an account once `update_accounts` changed it.
        let dropped = |a: &&Account| self.flavor.is(Mutant::AccountDropsAfterUpdate) && a.updates > 0;
        let mut accounts = render::accounts(self.flavor, listed.filter(|a| !dropped(a)));
        if let (true, Some(list)) = (self.flavor.is(Mutant::AccountListedTwice), accounts.as_array_mut()) {
            if let Some(first) = list.first().cloned() {
                list.push(first);
            }
        }
        // The mutant's balances creep up a cent a read, with no event.
        if self.flavor.is(Mutant::SilentBalanceChange) {
            let cents = f64::from(self.count_read(conn_id)) / 100.0;
            for a in accounts.as_array_mut().into_iter().flatten() {
                if let Some(b) = a.get("balance").and_then(Value::as_f64) {
                    a["balance"] = serde_json::json!(((b + cents) * 100.0).round() / 100.0);
                }
            }
        }
        Ok(accounts)
    }

    /// §4.3: one page of an account's transactions, in [`super::model::list_order`]
    /// (`any_client`: an isolation mutant's hole, see [`Store::own_account`]).
    /// `starting_after` may name a transaction deleted since: the page then starts after the
    /// place it had.
    pub(super) fn transactions_page(
        &self,
        client_id: &str,
        account_id: &str,
        limit: usize,
        starting_after: Option<&str>,
        any_client: bool,
    ) -> Result<Value, ReadError> {
        let f = self.flavor;
        let account = self.own_account(client_id, account_id, any_client)?;
        let account = match starting_after {
            // The mutant follows a cursor into whichever account lists it.
            Some(c) if f.is(Mutant::ForeignCursor) && !account.transactions.iter().any(|t| t.id == c) => {
                self.accounts.values().find(|a| a.transactions.iter().any(|t| t.id == c)).unwrap_or(account)
            }
            // This one only into an account of another connection of the same client.
            Some(c) if f.is(Mutant::OtherConnectionCursor) && !account.transactions.iter().any(|t| t.id == c) => self
                .accounts
                .values()
                .filter(|a| a.client_id == account.client_id && a.connection_id != account.connection_id)
                .find(|a| a.transactions.iter().any(|t| t.id == c))
                .unwrap_or(account),
            _ => account,
        };
        // The list is kept newest first; the oldest-first variant reads it backwards.
        let oldest_first = f.has(Variant::OldestFirst);
        let mut list: Vec<&Transaction> = if oldest_first {
            account.transactions.iter().rev().collect()
        } else {
            account.transactions.iter().collect()
        };
        // The state mutants: a deleted transaction listed again from the second listing after
        // its deletion; the oldest transaction gone from the second listing on; both silent.
        let reads = if starting_after.is_none() { self.count_read(&account.id) } else { self.reads_of(&account.id) };
        if f.is(Mutant::DeletedTransactionReturns) {
            let back = self.returning.get(&account.id).into_iter().flatten();
            list.extend(back.filter(|(at, _)| reads > *at).map(|(_, t)| t));
            list.sort_by(|a, b| if oldest_first { list_order(b, a) } else { list_order(a, b) });
        }
        if f.is(Mutant::TransactionVanishes) && reads >= 1 && !oldest_first {
            list.pop();
        }
        let decoded = starting_after.and_then(render::cursor_id).filter(|_| f.has(Variant::OpaqueCursor));
        // The mutant's next_cursor is an offset into the list as it is at each read, which an
        // insertion before it shifts (transaction ids are still taken as cursors).
        let offsets = f.is(Mutant::OffsetCursorUnderInsertions);
        let offset = starting_after.and_then(|c| c.strip_prefix("offset_")?.parse::<usize>().ok()).filter(|_| offsets);
        let start = match decoded.as_deref().or(starting_after) {
            _ if offset.is_some() => offset.unwrap_or(0).min(list.len()),
            None => 0,
            Some(cursor) => {
                if let Some(i) = list.iter().position(|t| t.id == cursor) {
                    match f.mutant {
                        Some(Mutant::PageGap) => i + 2,
                        Some(Mutant::PageGapLimitOne) if limit == 1 => i + 2,
                        Some(Mutant::PageDuplicate) => i,
                        Some(Mutant::CursorIgnored) => 0,
                        _ => i + 1,
                    }
                    .min(list.len())
                } else if let Some((date, id)) =
                    account.tombstones.get(cursor).filter(|_| !f.has(Variant::DeletedCursorRefused))
                {
                    list.partition_point(|t| {
                        let (a, b) = ((&t.date, &t.id), (date, id));
                        if oldest_first { key_order(b, a) } else { key_order(a, b) }.is_lt()
                    })
                } else {
                    return Err(ReadError::UnknownCursor);
                }
            }
        };
        let end = (start + limit).min(list.len());
        let items = &list[start..end];
        let mut has_more = end < list.len();
        let at_offset = format!("offset_{end}");
        let mut cursor = if offsets { Some(at_offset.as_str()) } else { items.last().map(|t| t.id.as_str()) };
        match f.mutant {
            Some(Mutant::HasMoreTrueAtEnd) => has_more = start < list.len(),
            Some(Mutant::HasMoreWhenPageFull) => has_more = !items.is_empty() && items.len() == limit,
            Some(Mutant::HasMoreFalseEarly) if start == 0 => has_more = false,
            Some(Mutant::CursorLoops) if start > 0 && !has_more => {
                has_more = true;
                cursor = starting_after;
            }
            _ => {}
        }
        Ok(render::page(f, items, has_more, cursor))
    }
}
