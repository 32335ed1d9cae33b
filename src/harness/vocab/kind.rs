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
    /// A walk of an account's pages by `next_cursor` (`transport::pagination`: §4.3).
    Walk(WalkKind),
    /// An answer a rule could not read (`transport::http`: §4).
    Answer(AnswerKind),
    /// Who may call the API (`checks::security`: §5).
    Auth(AuthKind),
    /// The widget script and what its page receives (`checks::widget`: §1, §5).
    Widget(WidgetKind),
    /// What an event sends the client to do (`fixtures::reaction`: §6.3).
    Reaction(ReactionKind),
}

impl From<ConnectionKind> for Kind {
    fn from(kind: ConnectionKind) -> Self {
        Kind::Connection(kind)
    }
}

impl From<AccountKind> for Kind {
    fn from(kind: AccountKind) -> Self {
        Kind::Account(kind)
    }
}

impl From<TransactionKind> for Kind {
    fn from(kind: TransactionKind) -> Self {
        Kind::Transaction(kind)
    }
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
    /// A creation returned a `connectionId` an earlier creation returned (§2, §3.2).
    IdRepeated,
    /// A `connectionId` unlike the samples' shape (§2: allowed, advisory).
    IdShape,
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
    /// A CREATED connection's accounts served (§3.2, §4.2).
    ServedWhenCreated,
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
        /// An `accounts.updated` after which the account and its transactions read as before (§6).
        NoChange = "update-shows-no-change", "§6";
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
        /// An account synced well before it was created (§2.2).
        SyncedBeforeCreated = "synced-before-created", "§2.2";
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
        /// One id reused for another object after the first was gone (§2).
        IdReused = "id-reused", "§2";
        /// A `transaction.deleted` naming a transaction no read showed, after a complete listing
        /// of its account with nothing announced between (§6, §2.3).
        PhantomDeletion = "phantom-deletion", "§6";
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
        /// An object of a JSON body that names one field twice with two values (RFC 8259 §4; §2.2, §2.3).
        RepeatedName = "repeated-name", "§2.2";
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
        /// A read with one client's key served the other client's data (§5).
        Leak = "leak", "§5";
        /// A cursor taken from another account or client served what it names (§4.3, §5).
        ForeignCursor = "foreign-cursor", "§5";
    }
}

family! {
    /// Who may call the API (`checks::security`).
    AuthKind as Auth "auth" {
        /// A request without a key the service issued, not refused (§5).
        NotRefused = "not-refused", "§5";
    }
}

family! {
    /// What a walk of an account's transactions by `next_cursor` shows (§4.3): the pages every
    /// listing built from cursors rests on.
    WalkKind as Walk "walk" {
        /// A page that is no object with a `data` array and a boolean `has_more` (§4.3).
        PageShape = "page-shape", "§4.3";
        /// `has_more` true with no `next_cursor` to follow (§4.3 rule 1).
        NoNextCursor = "no-next-cursor", "§4.3";
        /// A `next_cursor` already followed: the walk loops (§4.3 rule 1).
        CursorLoops = "cursor-loops", "§4.3";
        /// An item visited twice in one walk (§4.3 rule 1).
        Repeated = "repeated", "§4.3";
        /// A walk whose items are not the reference's (§4.3 rule 1).
        Differs = "differs", "§4.3";
        /// A walk from a cursor that does not continue after its item (§4.3 `starting_after`).
        AfterCursor = "after-cursor", "§4.3";
        /// `has_more` true, and the next page empty (§4.3 rule 2).
        EmptyAfterMore = "empty-after-has-more", "§4.3";
        /// `has_more` false, and items after the last one (§4.3 rule 2).
        MoreAfterEnd = "more-after-end", "§4.3";
        /// `has_more` false before every item was listed (§4.3 rule 2).
        EndsEarly = "ends-early", "§4.3";
        /// An item that existed throughout a walk, never listed by it (§4.3 rule 1).
        NeverListed = "never-listed", "§4.3";
    }
}

family! {
    /// An answer a rule needed to read and could not (§4: request and response bodies are JSON).
    AnswerKind as Answer "answer" {
        /// Not a 2xx where one was expected (§4).
        NotSuccess = "not-2xx", "§4";
        /// A body that is not UTF-8, so no JSON (§4).
        NotUtf8 = "not-utf8", "§4";
        /// A body that is not JSON (§4).
        NotJson = "not-json", "§4";
        /// A body too dense to parse within the harness's bounds (§4).
        TooDense = "too-dense", "§4";
        /// A 5xx answer to a request the harness made (§7 leaves errors open, but a 5xx says the
        /// service failed).
        ServerError = "server-error", "§7";
        /// An id that is a dot segment, which no URL can name (§2, §4).
        DotSegment = "dot-segment-id", "§2";
    }
}

family! {
    /// The widget script (`checks::widget`), served and run in a browser, and what its page
    /// receives.
    WidgetKind as Widget "widget" {
        /// The script is not served where §1 says (§1 item 2).
        NotServed = "not-served", "§1";
        /// Served with a content type no browser runs as a script (§1).
        MediaType = "media-type", "§1";
        /// The script never mentions `open` (§1 item 2; without a browser).
        NoOpen = "no-open", "§1";
        /// A page of another origin cannot load the script (§1 item 2).
        LoadsCrossOrigin = "loads-cross-origin", "§1";
        /// The widget does not work in a page of another origin (§1 item 2).
        OpensCrossOrigin = "opens-cross-origin", "§1";
        /// The script does not load or throws in the browser (§1 item 2).
        ScriptRuns = "script-runs", "§1";
        /// No global with an `open` function (§1 item 2).
        GlobalOpen = "global-open", "§1";
        /// `open` refuses a fresh token, or `onSuccess` gets no argument (§1 item 2).
        OpenAcceptsToken = "open-accepts-token", "§1";
        /// The script carries an API key (§5 item 2).
        KeyInScript = "key-in-script", "§5";
        /// The creation's token or id carries an API key (§5 items 2 and 3).
        KeyInToken = "key-in-token", "§5";
        /// What the widget's page received carries an API key (§5 item 2).
        KeyInFrontend = "key-in-frontend", "§5";
    }
}

family! {
    /// What an event sends the client to do, done (`fixtures::reaction`, §6.3).
    ReactionKind as Reaction "reaction" {
        /// An `accounts.updated` or `transaction.deleted` with no `data.accountId` (§6.2).
        NoAccountId = "no-account-id", "§6.2";
        /// A `transaction.deleted` with no `data.transactionId` (§6.2).
        NoTransactionId = "no-transaction-id", "§6.2";
        /// The event names an account that is not its connection's (§6.2, §6.3).
        ForeignAccount = "foreign-account", "§6.3";
        /// A `transaction.deleted` naming a transaction never listed (§6.3).
        UnknownTransaction = "unknown-transaction", "§6.3";
        /// The reads the event sends the client to still show the account as before it (§6, §6.3).
        BeforeData = "before-data", "§6.3";
        /// The account read after an update shows neither balance its list showed around it (§6.3).
        Balance = "balance", "§6.3";
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
                ConnectionKind::IdRepeated => "connection.id-repeated",
                ConnectionKind::IdShape => "connection.id-shape",
            },
            Self::Account(k) => match k {
                AccountKind::Schema => "account.schema",
                AccountKind::Repeated => "account.repeated",
                AccountKind::ConnectionId => "account.connection-id",
                AccountKind::IdPrefix => "account.id-prefix",
                AccountKind::ConditionalField => "account.conditional-field",
                AccountKind::Unmasked => "account.unmasked-number",
                AccountKind::ServedWhenCreated => "account.served-when-created",
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
            Self::Walk(k) => k.name(),
            Self::Answer(k) => k.name(),
            Self::Auth(k) => k.name(),
            Self::Widget(k) => k.name(),
            Self::Reaction(k) => k.name(),
        }
    }

    /// The section of the spec that states the rule (`§2.2`).
    pub fn section(self) -> &'static str {
        match self {
            Self::Connection(ConnectionKind::Schema) => "§4.1",
            Self::Connection(ConnectionKind::IdRepeated | ConnectionKind::IdShape) => "§2",
            Self::Connection(_) => "§2.1",
            Self::Account(AccountKind::Schema | AccountKind::Repeated) => "§4.2",
            Self::Account(AccountKind::IdPrefix) => "§2",
            Self::Account(AccountKind::ServedWhenCreated) => "§3.2",
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
            Self::Walk(k) => k.section(),
            Self::Answer(k) => k.section(),
            Self::Auth(k) => k.section(),
            Self::Widget(k) => k.section(),
            Self::Reaction(k) => k.section(),
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
            Kind::Connection(C::IdRepeated),
            Kind::Connection(C::IdShape),
            Kind::Account(A::Schema),
            Kind::Account(A::Repeated),
            Kind::Account(A::ConnectionId),
            Kind::Account(A::IdPrefix),
            Kind::Account(A::ConditionalField),
            Kind::Account(A::Unmasked),
            Kind::Account(A::ServedWhenCreated),
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
            WalkKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            AnswerKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            AuthKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            WidgetKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
            ReactionKind::ALL.iter().map(|k| Kind::from(*k)).collect(),
        ];
        let all: Vec<Kind> = all.into_iter().chain(families.into_iter().flatten()).collect();
        let names: std::collections::BTreeSet<&str> = all.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|k| k.section().starts_with('§')));
    }
}
