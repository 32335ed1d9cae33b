//! The sandbox's in-memory data: connections (§2.1), accounts (§2.2), transactions (§2.3) and
//! events (§6). Amounts are kept in minor units (cents) and only turned into JSON numbers by
//! the renderers in [`super::render`].

use crate::spec::ConnectionState;
use chrono::{DateTime, NaiveDate, Utc};
use rand::rngs::StdRng;
use rand::Rng;
use std::cmp::Ordering;
use std::collections::HashMap;

/// Page size when `limit` is absent (§4.3, §8: the sandbox's choice).
pub const DEFAULT_LIMIT: usize = 25;
/// Larger `limit` values are clamped to this.
pub const MAX_LIMIT: usize = 100;

/// Characters of the opaque part of identifiers (§2: samples are 26 upper-case alphanumerics).
const ID_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A fresh identifier: `prefix` followed by 26 random upper-case alphanumerics (§2).
pub(crate) fn new_id(prefix: &str) -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(prefix.len() + 26);
    id.push_str(prefix);
    for _ in 0..26 {
        id.push(ID_CHARS[rng.random_range(0..ID_CHARS.len())] as char);
    }
    id
}

/// Institution shown on every account of a connection (§2.2 `institution`).
#[derive(Clone, Debug)]
pub(crate) struct Institution {
    pub id: &'static str,
    pub name: &'static str,
    /// Primary currency of the accounts held there.
    pub currency: &'static str,
}

pub(crate) struct Connection {
    pub id: String,
    pub client_id: String,
    pub status: ConnectionState,
    pub widget_token: String,
    /// Account ids in display order (one per account type, §2.2); empty until first connected.
    pub account_ids: Vec<String>,
    pub institution: Institution,
    /// Deterministic per connection: seeded from the connection counter.
    pub rng: StdRng,
    /// Until when a CONNECTED status is not yet stored for reads: the mutant
    /// `connected-before-stored` announces CONNECTED before it stores it.
    pub stored_from: Option<chrono::DateTime<chrono::Utc>>,
}

/// §2.2 `creditLimit`, `currencyBalances`, `positions`: present only on some account types.
#[derive(Clone, Debug)]
pub(crate) struct Position {
    pub symbol: &'static str,
    pub quantity: u32,
    pub value_cents: i64,
}

#[derive(Clone)]
pub(crate) struct Account {
    pub id: String,
    pub connection_id: String,
    pub client_id: String,
    pub name: &'static str,
    /// One of [`crate::spec::ACCOUNT_TYPES`].
    pub kind: &'static str,
    pub currency: &'static str,
    pub balance_cents: i64,
    pub available_cents: i64,
    /// `(balance, available)` when the account was first connected (for a mutant only).
    pub first_balance_cents: (i64, i64),
    /// Last four digits; rendered masked as `****1234`.
    pub number_last4: String,
    pub created_at: DateTime<Utc>,
    pub last_synced_at: DateTime<Utc>,
    /// How many `update_accounts` changed it (for the mutants that break only updated data).
    pub updates: u32,
    pub institution: Institution,
    pub credit_limit_cents: Option<i64>,
    /// Secondary currency balances (multi-currency credit cards only).
    pub currency_balances: Vec<(&'static str, i64)>,
    pub positions: Vec<Position>,
    /// Kept sorted in list order, see [`list_order`].
    pub transactions: Vec<Transaction>,
    /// Deleted transactions' sort keys, so a cursor naming one keeps working.
    pub tombstones: HashMap<String, (NaiveDate, String)>,
}

impl Account {
    /// Inserts `txn` at its place in list order.
    pub(super) fn insert_transaction(&mut self, txn: Transaction) {
        let at = self.transactions.partition_point(|t| list_order(t, &txn) == Ordering::Less);
        self.transactions.insert(at, txn);
    }

    /// Removes a transaction, remembering its position for cursors.
    pub(super) fn remove_transaction(&mut self, index: usize) -> Transaction {
        let txn = self.transactions.remove(index);
        self.tombstones.insert(txn.id.clone(), (txn.date, txn.id.clone()));
        txn
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Transaction {
    pub id: String,
    pub account_id: String,
    pub amount_cents: i64,
    pub currency: &'static str,
    pub description: &'static str,
    pub category: &'static str,
    pub date: NaiveDate,
    pub created_at: DateTime<Utc>,
}

/// The order of the transactions list (§4.3 leaves it open): newest first by
/// `transactionDate`, ties broken by `id` descending (byte-wise). Stable under inserts and
/// deletes, so cursors stay meaningful.
pub(crate) fn list_order(a: &Transaction, b: &Transaction) -> Ordering {
    key_order((&a.date, &a.id), (&b.date, &b.id))
}

/// [`list_order`] on `(transactionDate, id)` keys: `Less` means `a` is listed before `b`.
pub(crate) fn key_order(a: (&NaiveDate, &String), b: (&NaiveDate, &String)) -> Ordering {
    b.0.cmp(a.0).then_with(|| b.1.cmp(a.1))
}

/// The `data` part of an event that differs by category (§6.2).
#[derive(Clone, Debug)]
pub(crate) enum EventDetail {
    /// A `connection.*` event: the status left (`None` for `connection.created`) and, for the
    /// error state, an error `(code, message)`.
    Connection { previous: Option<ConnectionState>, error: Option<(&'static str, &'static str)> },
    /// `accounts.updated`.
    AccountsUpdated { account_id: String },
    /// `transaction.deleted`.
    TransactionDeleted { account_id: String, transaction_id: String },
}

#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub id: String,
    pub kind: &'static str,
    pub at: DateTime<Utc>,
    pub client_id: String,
    pub connection_id: String,
    pub detail: EventDetail,
}
