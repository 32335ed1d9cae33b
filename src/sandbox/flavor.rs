//! What the sandbox departs from ([`Flavor`]), as every hook sees it: the mutant or variant
//! of [`super::faults`], and the generated perturbations.

use super::faults::{Mutant, Seam, Variant};
use rand::Rng;

/// What the sandbox departs from, if anything: passed to every hook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flavor {
    pub mutant: Option<Mutant>,
    pub variant: Option<Variant>,
    /// Generated perturbations (`super::perturb`), applied where the JSON leaves the sandbox.
    pub perturb: Option<Perturbs>,
}

/// Generated perturbations as the hooks see them (`super::perturb_apply` implements it): the
/// renderers name no module that generates, so no module imports in a circle.
pub(super) trait Perturb: Send + Sync {
    /// Edits an event as it is emitted; `false` drops it.
    fn event(&self, body: &mut serde_json::Value, second: bool) -> bool;
    /// Edits an API answer to `path` for `client` (`second`: not the first client).
    fn answer(&self, path: &str, client: &str, second: bool, refused: bool, cursor: bool, body: &mut serde_json::Value);
    /// Whether a refused creation is made anyway.
    fn refused_creates(&self) -> bool;
    /// The names of the active perturbations.
    fn names(&self) -> Vec<&'static str>;
}

/// The active perturbations of one sandbox (leaked: a sandbox lives as long as its run).
#[derive(Clone, Copy)]
pub(super) struct Perturbs(pub(super) &'static dyn Perturb);

impl PartialEq for Perturbs {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0)
    }
}

impl Eq for Perturbs {}

impl std::fmt::Debug for Perturbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.names()).finish()
    }
}

impl Flavor {
    pub(super) fn is(self, m: Mutant) -> bool {
        self.mutant == Some(m)
    }

    pub(super) fn has(self, v: Variant) -> bool {
        self.variant == Some(v)
    }

    /// The code the departure registered at `seam`, if it acts there (`faults/<seam>.rs`).
    pub(super) fn seam<F: Copy>(self, seam: &Seam<F>) -> Option<F> {
        seam.of(self.mutant, self.variant)
    }

    /// Whether account and transaction ids are numbered per client (two variants, §2; and the
    /// mutant that numbers accounts per connection).
    pub(super) fn per_client_ids(self) -> bool {
        self.has(Variant::PerClientIds)
            || self.has(Variant::PerClientIdsAtCreation)
            || self.is(Mutant::AccountIdPerConnection)
    }

    /// A fresh identifier with `prefix` (§2): 26 upper-case alphanumerics, a lower-case UUID
    /// under [`Variant::UuidIds`], and the wrong prefix under the prefix mutants.
    pub(super) fn new_id(self, prefix: &str) -> String {
        use crate::spec::prefix as p;
        let wrong = [
            (Mutant::ConnectionPrefix, p::CONNECTION, "connection_"),
            (Mutant::WidgetTokenPrefix, p::WIDGET_TOKEN, "tok_"),
            (Mutant::AccountPrefix, p::ACCOUNT, "account_"),
            (Mutant::TransactionPrefix, p::TRANSACTION, "tx_"),
            (Mutant::EventPrefix, p::EVENT, "event_"),
            (Mutant::ClientPrefix, p::CLIENT, "client_"),
        ];
        let prefix = wrong.iter().find(|(m, right, _)| self.is(*m) && *right == prefix).map_or(prefix, |w| w.2);
        if self.has(Variant::UuidIds) {
            let n: u128 = rand::rng().random();
            let h = format!("{n:032x}");
            format!("{prefix}{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
        } else {
            super::model::new_id(prefix)
        }
    }

    /// The connection event type this flavor never sends, if any.
    pub(super) fn suppressed_event(self) -> Option<&'static str> {
        Some(match self.mutant? {
            Mutant::NoCreatedEvent => "connection.created",
            Mutant::NoConnectedEvent => "connection.connected",
            Mutant::NoFailedAuthEvent => "connection.failed_auth",
            Mutant::NoMfaRequiredEvent => "connection.mfa_required",
            Mutant::NoErrorEvent => "connection.error",
            Mutant::NoDisconnectedEvent => "connection.disconnected",
            Mutant::NoAccountsUpdatedEvent => crate::spec::ACCOUNTS_UPDATED,
            Mutant::NoTransactionDeletedEvent => crate::spec::TRANSACTION_DELETED,
            _ => return None,
        })
    }

    /// Default and maximum `limit` (§8 leaves both open).
    pub(super) fn limits(self) -> (usize, usize) {
        if self.has(Variant::SmallLimitRejected) || self.has(Variant::SmallLimitClamped) {
            (7, 10)
        } else {
            (super::model::DEFAULT_LIMIT, super::model::MAX_LIMIT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_prefix() {
        let f = Flavor { variant: Some(Variant::UuidIds), ..Default::default() };
        assert_eq!(f.new_id("conn_").len(), 5 + 36);
        let f = Flavor { mutant: Some(Mutant::AccountPrefix), ..Default::default() };
        assert!(f.new_id("acc_").starts_with("account_"));
        assert!(f.new_id("txn_").starts_with("txn_"));
    }
}
