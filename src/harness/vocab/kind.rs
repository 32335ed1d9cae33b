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
    /// A rule over the model of the run's reads and deliveries (`checks::state`: §1, §2, §4, §6).
    State(StateKind),
    /// An invariant over the run's whole record (`rules::invariants`: §2, §3, §4, §5, §6).
    Invariant(InvariantKind),
    /// A rule over the webhook deliveries and their chain (`rules::event_rules`, `rules::chain`:
    /// §3, §6).
    Event(EventKind),
    /// A finding of a lifecycle walk (`checks::lifecycle`: §3, §4.2, §6.3).
    Lifecycle(LifecycleKind),
    /// A rule of HTTP itself over every answer (`rules::http`: RFC 9110, §4).
    Http(HttpKind),
    /// A secret that reached someone it does not belong to (`rules::secrets`: §5).
    Secret(SecretKind),
    /// One client shown another's (`checks::security::isolation`: §5).
    Isolation(IsolationKind),
}

/// Declares a family of kinds: its enum (each variant's doc names its section), the name of each
/// in the JSON report (`family.rule`) and its section, and every kind of it ([`ALL`]).
///
/// [`ALL`]: StateKind::ALL
macro_rules! family {
    ($(#[$meta:meta])* $name:ident as $of:ident $family:literal {
        $($(#[$vmeta:meta])* $variant:ident = $rule:literal, $section:literal;)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every kind of the family.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// Its name in the JSON report (`family.rule`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => concat!($family, ".", $rule),)*
                }
            }

            /// The section of the spec (or RFC) that states its rule.
            pub fn section(self) -> &'static str {
                match self {
                    $(Self::$variant => $section,)*
                }
            }
        }

        impl From<$name> for Kind {
            fn from(kind: $name) -> Self {
                Kind::$of(kind)
            }
        }
    };
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

family! {
    /// The rules over the model of the run's reads and deliveries (`checks::state`), and the
    /// reads they compare.
    StateKind as State "state" {
        /// A read lists an id under another owner than an earlier read of its view did (§2.2, §2.3).
        OneOwner = "one-owner", "§2.2";
        /// A read lists a transaction a `transaction.deleted` announced removed before it (§6).
        DeletedListed = "deleted-listed", "§6";
        /// A connection's list no longer holds an account an earlier list held (§4.2).
        AccountGone = "account-gone", "§4.2";
        /// A complete listing no longer holds a transaction an earlier one held, and no
        /// `transaction.deleted` names it (§6).
        TransactionGone = "transaction-gone", "§6";
        /// A `createdAt` that changed between two reads (§2.2, §2.3).
        FixedField = "fixed-field", "§2.2";
        /// A `lastSyncedAt` that moved back between two reads (§2.2).
        SyncBack = "sync-back", "§2.2";
        /// Two reads differ with no event of the account between them (§1 step 5).
        Unannounced = "unannounced-change", "§1";
        /// A change shows only in a read after the one an `accounts.updated` sent the client to (§6.3).
        DataAfterEvent = "data-after-event", "§6.3";
        /// A `transaction.deleted` names another account than the one that lists the transaction (§6.2).
        DeletedOwner = "deleted-owner", "§6.2";
        /// A connection's list leaves out an account its events named before the read (§4.2).
        ListIncomplete = "list-incomplete", "§4.2";
        /// A single read of an account disagrees with its connection's list (§4.4).
        ReadDisagrees = "account-read-disagrees", "§4.4";
    }
}

family! {
    /// The invariants over everything a run observed (`rules::invariants`).
    InvariantKind as Invariant "invariants" {
        /// An answer about one object names another (§2, §4.2, §4.3).
        AnsweredOther = "answered-other", "§2";
        /// One id shown as two kinds of object (§2).
        IdTwoKinds = "id-two-kinds", "§2";
        /// One id shown under two owners (§2).
        IdTwoOwners = "id-two-owners", "§2";
        /// One account id shown with two values of a field that tells accounts apart (§2.2).
        IdTwoAccounts = "id-two-accounts", "§2.2";
        /// An event stamped after it arrived (§6.1, §6.2).
        EventAhead = "event-ahead", "§6.2";
        /// An object's timestamp after the answer that showed it (§2.2, §2.3).
        TimestampAhead = "timestamp-ahead", "§2.2";
        /// Every `connection.created` stamped minutes before its creation was sent (§6.2).
        ClockBehind = "clock-behind", "§6.2";
        /// An account created well after its connection was announced connected (§3.1, §2.2).
        CreatedAfterConnected = "created-after-connected", "§3.1";
        /// A request without the run's key served (§5).
        ServedWithoutKey = "served-without-key", "§5";
        /// A client shown the other client's data (§5).
        OtherClientsData = "other-clients-data", "§5";
        /// Accounts served after the connection was announced in another state than CONNECTED (§3.2, §4.2).
        ServedAfterLeaving = "served-after-leaving", "§4.2";
        /// Accounts refused after `connection.connected` announced them available (§3.1, §4.2).
        RefusedWhenConnected = "refused-when-connected", "§4.2";
        /// Accounts served before the connection's first `connection.connected` occurred (§3.2, §4.2).
        ServedBeforeConnected = "served-before-connected", "§3.2";
        /// The transactions of an account its client was listed, refused to that client (§4.3).
        TransactionsRefused = "transactions-refused", "§4.3";
        /// Refused creations followed by a creation's event (§5, §3.2).
        RefusedCreationActs = "refused-creation-acts", "§5";
        /// Refused reads followed by an event of what they read (§5, §6).
        RefusedReadActs = "refused-read-acts", "§5";
    }
}

family! {
    /// The rules over the webhook deliveries (`rules::event_rules`) and the chain of each
    /// connection's events (`rules::chain`).
    EventKind as Event "event" {
        /// A delivery whose body is not JSON (§6.1).
        NotJson = "not-json", "§6.1";
        /// A delivery whose body is an array of events (§6.1).
        Batch = "batch", "§6.1";
        /// A delivery that does not validate against webhook-event.json (§6.1, §6.2).
        Schema = "schema", "§6.1";
        /// A delivery that is no event at all (§6.1).
        NoEvent = "no-event", "§6.1";
        /// One event id on two different events (§6.1).
        IdReused = "id-reused", "§6.1";
        /// The envelope and its data disagree (§6.2).
        EnvelopeDisagrees = "envelope-disagrees", "§6.2";
        /// A connection created with no `connection.created` (§3.2).
        CreatedMissing = "created-missing", "§3.2";
        /// A connection's events do not link into one chain from `connection.created` (§3.1, §6.2).
        Chain = "chain", "§6.2";
        /// A state announced re-entered more often than actions led to it (§3.1, §6).
        Reentered = "reentered", "§3.1";
        /// `occurredAt` times that contradict the chain (§6.2).
        TimeContradicts = "time-contradicts-chain", "§6.2";
        /// One client's events carry several `clientId`s (§6.2).
        ClientIds = "client-ids", "§6.2";
        /// Two clients announced with one `clientId` (§6.2).
        SharedClientId = "shared-client-id", "§6.2";
        /// Events that name another connection than the one concerned (§3.2, §6.2).
        Misnamed = "misnamed-connection", "§6.2";
        /// A step's announcing event that never arrived (§3.1, §6).
        NotAnnounced = "not-announced", "§6";
    }
}

family! {
    /// What a lifecycle walk (`checks::lifecycle`) finds besides the event rules it applies.
    LifecycleKind as Lifecycle "lifecycle" {
        /// An accepted action whose event never arrived (§3.1, §6).
        NotAnnounced = "not-announced", "§6";
        /// A delivery of the walk that breaks an event rule (§6.1, §6.2).
        Event = "event", "§6.2";
        /// The walk's events do not link into one chain (§3.1, §6.2).
        Chain = "chain", "§6.2";
        /// Accounts served while the chain ends in another state than CONNECTED (§3.2, §4.2).
        AccountsServed = "accounts-served", "§4.2";
        /// Accounts refused while the chain ends in CONNECTED (§3.1, §4.2).
        AccountsRefused = "accounts-refused", "§4.2";
        /// An account id without `acc_` in a walk's read (§2).
        AccountPrefix = "account-prefix", "§2";
        /// The reaction to a data action's event does not show what it announced (§6.3).
        Reaction = "reaction", "§6.3";
    }
}

family! {
    /// The rules of HTTP itself over every answer (`rules::http`).
    HttpKind as Http "http" {
        /// A `Content-Encoding` the body does not decode as (RFC 9110 §8.4, §4).
        Coding = "coding", "§4";
        /// A 2xx JSON body labelled as another media type (§4, RFC 9110 §8.3).
        MediaType = "media-type", "§4";
        /// A status the request rules out: 206, 304 (RFC 9110 §15.3.7, §15.4.5; §4.3).
        Status = "status", "§4.3";
    }
}

family! {
    /// Secrets that reached someone they do not belong to (`rules::secrets`): never shown, so
    /// never an expected or received value.
    SecretKind as Secret "secret" {
        /// An answer carries an API key its request did not send (§5).
        KeyInAnswer = "key-in-answer", "§5";
        /// An answer carries a widget token of another client's connection (§2.1, §5).
        TokenInAnswer = "token-in-answer", "§5";
        /// A delivery to one client's address carries the other client's key (§5).
        KeyInDelivery = "key-in-delivery", "§5";
    }
}

family! {
    /// One client shown what is the other's (`checks::security::isolation`).
    IsolationKind as Isolation "isolation" {
        /// A client's webhook address got events of the other client's connection (§5).
        Deliveries = "deliveries", "§5";
    }
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
            Self::State(k) => k.name(),
            Self::Invariant(k) => k.name(),
            Self::Event(k) => k.name(),
            Self::Lifecycle(k) => k.name(),
            Self::Http(k) => k.name(),
            Self::Secret(k) => k.name(),
            Self::Isolation(k) => k.name(),
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
            Self::State(k) => k.section(),
            Self::Invariant(k) => k.section(),
            Self::Event(k) => k.section(),
            Self::Lifecycle(k) => k.section(),
            Self::Http(k) => k.section(),
            Self::Secret(k) => k.section(),
            Self::Isolation(k) => k.section(),
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
        let families = [
            StateKind::ALL.iter().map(|k| Kind::from(*k)).collect::<Vec<_>>(),
            InvariantKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            EventKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            LifecycleKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            HttpKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            SecretKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            IsolationKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
        ];
        let all: Vec<Kind> = all.into_iter().chain(families.into_iter().flatten()).collect();
        let names: std::collections::BTreeSet<&str> = all.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|k| k.section().starts_with('§')));
    }
}
