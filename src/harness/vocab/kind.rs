//! What a rule found, as a value (issue 74: a finding is data): one enum per family of rules,
//! each variant naming its rule and the section of the spec that states it. A [`Problem`]
//! carries its kind, the ids it is about and what was expected against what came, and each
//! report renders the sentence made once from them.
//!
//! [`Problem`]: super::failure::Problem

/// The kind of a finding, by family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// A rule over a creation's answer (§4.1, §2.1).
    Connection(ConnectionKind),
    /// A rule over a list of accounts (§4.2, §2.2).
    Account(AccountKind),
    /// A rule over a page of transactions (§4.3, §2.3).
    Transaction(TransactionKind),
}

/// The rules over a creation's answer (`POST /v1/connections`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnectionKind {
    /// The answer does not validate against connection-created.json.
    Schema,
    /// Its `status` is not `CREATED`.
    StatusCreated,
    /// Its `connectionId` lacks `conn_`.
    ConnectionIdPrefix,
    /// Its `widgetToken` lacks `sess_` (its value is never shown).
    WidgetTokenPrefix,
}

/// The rules over a list of accounts (`GET /v1/connections/{id}/accounts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AccountKind {
    /// The list does not validate against accounts.json.
    Schema,
    /// An account is listed more than once.
    Repeated,
    /// An account names another connection than the one asked for.
    ConnectionId,
    /// An account id lacks `acc_`.
    IdPrefix,
    /// A field only some account types carry, on another type.
    ConditionalField,
    /// An account number is not masked (the number is never shown).
    Unmasked,
}

/// The rules over a page of transactions (`GET /v1/accounts/{id}/transactions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TransactionKind {
    /// The page does not validate against transactions-page.json.
    PageSchema,
    /// A transaction names another account than the one asked for.
    AccountId,
    /// A transaction id lacks `txn_`.
    IdPrefix,
    /// More items than the `limit` asked for.
    PageBound,
    /// A status other than `posted`, the only one shown.
    Status,
}

impl Kind {
    /// Its name in the JSON report: the family, then the rule (`account.connection-id`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Connection(k) => match k {
                ConnectionKind::Schema => "connection.schema",
                ConnectionKind::StatusCreated => "connection.status-created",
                ConnectionKind::ConnectionIdPrefix => "connection.connection-id-prefix",
                ConnectionKind::WidgetTokenPrefix => "connection.widget-token-prefix",
            },
            Self::Account(k) => match k {
                AccountKind::Schema => "account.schema",
                AccountKind::Repeated => "account.repeated",
                AccountKind::ConnectionId => "account.connection-id",
                AccountKind::IdPrefix => "account.id-prefix",
                AccountKind::ConditionalField => "account.conditional-field",
                AccountKind::Unmasked => "account.unmasked-number",
            },
            Self::Transaction(k) => match k {
                TransactionKind::PageSchema => "transaction.page-schema",
                TransactionKind::AccountId => "transaction.account-id",
                TransactionKind::IdPrefix => "transaction.id-prefix",
                TransactionKind::PageBound => "transaction.page-bound",
                TransactionKind::Status => "transaction.status",
            },
        }
    }

    /// The section of the spec that states the rule (`§2.2`).
    pub fn section(self) -> &'static str {
        match self {
            Self::Connection(ConnectionKind::Schema) => "§4.1",
            Self::Connection(_) => "§2.1",
            Self::Account(AccountKind::Schema | AccountKind::Repeated) => "§4.2",
            Self::Account(AccountKind::IdPrefix) => "§2",
            Self::Account(_) => "§2.2",
            Self::Transaction(TransactionKind::PageSchema | TransactionKind::PageBound) => "§4.3",
            Self::Transaction(_) => "§2.3",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind has a name of its own: the JSON report keys on it.
    #[test]
    fn every_kind_has_its_own_name() {
        use AccountKind as A;
        use ConnectionKind as C;
        use TransactionKind as T;
        let all = [
            Kind::Connection(C::Schema),
            Kind::Connection(C::StatusCreated),
            Kind::Connection(C::ConnectionIdPrefix),
            Kind::Connection(C::WidgetTokenPrefix),
            Kind::Account(A::Schema),
            Kind::Account(A::Repeated),
            Kind::Account(A::ConnectionId),
            Kind::Account(A::IdPrefix),
            Kind::Account(A::ConditionalField),
            Kind::Account(A::Unmasked),
            Kind::Transaction(T::PageSchema),
            Kind::Transaction(T::AccountId),
            Kind::Transaction(T::IdPrefix),
            Kind::Transaction(T::PageBound),
            Kind::Transaction(T::Status),
        ];
        let names: std::collections::BTreeSet<&str> = all.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|k| k.section().starts_with('§')));
    }
}
