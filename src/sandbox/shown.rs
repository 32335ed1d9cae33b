//! The reads that show a mutant beyond the cases that judge it: the self-test runs both.

use super::faults::Mutant;

impl Mutant {
    /// Cases whose flows make the reads that show this mutant, beyond the cases that judge it
    /// ([`Mutant::caught_by`]): the self-test runs both.
    pub fn shown_by(self) -> &'static [&'static str] {
        match self {
            Self::ForeignTransactionAfterUpdate | Self::BalanceStringAfterUpdate => &["reactions.accounts-updated"],
            // A fresh connection's list, an update, the list again: the drop shows in one flow.
            Self::AccountDropsAfterUpdate => &["reactions.account-balance"],
            // The tour's reaction read after `transaction.deleted` (§6.3).
            Self::DeletedTransactionListed => &["reactions.transaction-deleted"],
            // The single reads of every listed account (§4.4).
            Self::AccountReadOtherFields => &["account.readable"],
            // The walk's disconnects and its reads after them (reported under the owner).
            Self::AccountsAfterDisconnected => &["lifecycle.transition-graph"],
            // The walk under deletions' tail: a sync, a read, a quick sync, a read.
            Self::QuickSyncUnannounced => &["transactions.walk-under-deletions"],
            // A sync and a deletion of the newest transaction, driven together (the walk's tail).
            Self::SyncReplacesSilently => &["transactions.walk-under-deletions", "reactions.transaction-deleted"],
            // Re-announced on each sync: more than the one connect of a connection synced three
            // times (the walk under deletions' tail) explains (a re-entry per action, §6).
            Self::ConnectedReannounced => &["transactions.walk-under-deletions"],
            _ => &[],
        }
    }
}
