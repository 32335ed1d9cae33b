//! Deliberate departures from the conforming sandbox, for testing the harness itself.
//!
//! - A [`Mutant`] breaks exactly one rule the catalogue checks; each names the cases that must
//!   catch it ([`Mutant::caught_by`]). `bankconf serve --mutant NAME`.
//! - A [`Variant`] is still conforming, but differs from the sandbox wherever the spec leaves an
//!   implementer free (status codes, id shapes, order, limits, delivery). The harness must pass
//!   it. `bankconf serve --variant NAME`.
//!
//! Most act through a *seam*: a named place of the sandbox (an answer's body, its headers, the
//! widget, a delivery, …) whose normal code asks [`Flavor::seam`](super::flavor::Flavor::seam)
//! for the fault registered there and calls it. Each seam is a file of this folder holding its
//! rows and, beside each row, its code (`=> function`), so that adding a mutant touches that
//! file alone. The rows below, without code, are the faults still applied by an `if f.is(…)`
//! hook where the store decides (`docs/layout.md` lists them, with why).

/// A seam's registered faults: each departure that acts there, with its code (`F`, the seam's
/// interface). Written by [`seam!`] from the rows of the seam's file.
pub(in crate::sandbox) struct Seam<F: 'static> {
    pub mutants: &'static [(Mutant, F)],
    pub variants: &'static [(Variant, F)],
}

impl<F: Copy> Seam<F> {
    /// The code registered for `mutant` or `variant`, if either acts here.
    pub(in crate::sandbox) fn of(&self, mutant: Option<Mutant>, variant: Option<Variant>) -> Option<F> {
        let m = self.mutants.iter().find(|(m, _)| Some(*m) == mutant).map(|(_, f)| *f);
        m.or_else(|| self.variants.iter().find(|(v, _)| Some(*v) == variant).map(|(_, f)| *f))
    }
}

/// A seam's table, from its rows: `seam!(NAME: Interface; mutants { … } variants { … })`.
macro_rules! seam {
    ($name:ident: $ty:ty; mutants { $($(#[$mflag:ident])* $mv:ident = $mn:literal, $ms:literal, [$($mc:literal),*], $md:literal => $mf:path;)* }
        variants { $($vv:ident = $vn:literal, $vs:literal, [$($vc:literal),*], $vd:literal => $vf:path;)* }) => {
        /// The faults registered at this seam, each with its code (the rows above).
        pub(in crate::sandbox) const $name: super::Seam<$ty> = super::Seam {
            mutants: &[$((super::Mutant::$mv, $mf as $ty),)*],
            variants: &[$((super::Variant::$vv, $vf as $ty),)*],
        };
    };
}

/// Gathers the rows of every seam's file, in the order given, after the rows of this file:
/// each file's macro hands its rows to the next (`collect!`), the last to [`departures!`].
macro_rules! collect {
    ([$next:ident $($more:ident)*] [$($m:tt)*] [$($v:tt)*] mutants { $($m2:tt)* } variants { $($v2:tt)* }) => {
        $next!(collect [$($more)*] [$($m)* $($m2)*] [$($v)* $($v2)*]);
    };
    ([] [$($m:tt)*] [$($v:tt)*] mutants { $($m2:tt)* } variants { $($v2:tt)* }) => {
        departures! {
            /// One deliberate spec violation, for testing the harness itself: it breaks exactly one
            /// rule the catalogue checks, and names the cases that must catch it
            /// ([`Mutant::caught_by`]). `bankconf serve --mutant NAME`.
            pub enum Mutant { $($m)* $($m2)* }
        }
        departures! {
            /// A conforming server that reads the spec's freedoms differently: it differs from the
            /// sandbox wherever the spec leaves an implementer free (status codes, id shapes, order,
            /// limits, delivery), and the harness must pass it. `bankconf serve --variant NAME`.
            pub enum Variant { $($v)* $($v2)* }
        }
    };
}

macro_rules! departures {
    (
        $(#[$meta:meta])* $vis:vis enum $ty:ident {
            $($(#[$flag:ident])* $v:ident = $name:literal, $section:literal, [$($case:literal),*], $desc:literal
                $(=> $code:path)?;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $ty { $(#[doc = $desc] $v,)* }

        impl $ty {
            /// Every one, in the order `--list-mutants` / `--list-variants` prints them.
            pub const ALL: &'static [$ty] = &[$($ty::$v,)*];

            /// The name given to `--mutant` / `--variant`.
            pub fn name(self) -> &'static str {
                match self { $($ty::$v => $name,)* }
            }

            /// What it does, in one line.
            pub fn description(self) -> &'static str {
                match self { $($ty::$v => $desc,)* }
            }

            /// The spec section whose rule (mutant) or freedom (variant) it concerns.
            pub fn section(self) -> &'static str {
                match self { $($ty::$v => $section,)* }
            }

            /// Case ids that must fail against it (empty for variants).
            pub fn caught_by(self) -> &'static [&'static str] {
                match self { $($ty::$v => &[$($case),*],)* }
            }

            /// The flags written above its row: `#[seed]`, `#[noisy]` (see [`Self::seed_sensitive`]
            /// and [`Self::noisy`]; `bankconf serve --list-mutants` prints them).
            pub fn flags(self) -> &'static [&'static str] {
                match self { $($ty::$v => &[$(stringify!($flag)),*],)* }
            }

            /// `#[seed]`: its fault shows only on some inputs (a limit, a path through one
            /// state), so the full matrix runs it under five more seeds, and it must be caught
            /// under each (`tests/mutants.rs`).
            pub fn seed_sensitive(self) -> bool {
                self.flags().contains(&"seed")
            }

            /// `#[noisy]`: it breaks so much shared state that which *other* cases fail depends on
            /// timing: only [`Self::caught_by`] is then reproducible (`scripts/same-failures.sh`
            /// compares only those). Each one's reason is in `docs/checks.md`.
            pub fn noisy(self) -> bool {
                self.flags().contains(&"noisy")
            }

            /// The one [`Self::name`] names.
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|m| m.name() == name)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

// The seams, each a file with its rows and their code (`collect!` takes them in this order).
#[macro_use]
pub(super) mod answers;
#[macro_use]
pub(super) mod headers;
#[macro_use]
pub(super) mod widget;
#[macro_use]
pub(super) mod deliveries;
#[macro_use]
pub(super) mod objects;

// The rows whose fault is still a hook where the store decides; then each seam's (`collect!`).
answers! { collect [headers widget deliveries objects] [
        // §2.1, §4.1 creation
        ConnectionPrefix = "connection-prefix", "§2.1", ["create.id-prefixes"],
            "connection ids start with `connection_` instead of `conn_`";
        WidgetTokenPrefix = "widget-token-prefix", "§2.1", ["create.id-prefixes", "create.response-schema"],
            "widget tokens start with `tok_` instead of `sess_`";
        DuplicateConnectionIds = "duplicate-connection-ids", "§4.1", ["create.fresh-ids"],
            "connection ids come from a pool of two: a new connection replaces an older one";
        // §2.2, §4.2 accounts
        AccountPrefix = "account-prefix", "§2", ["accounts.id-prefix", "accounts.response-schema"],
            "account ids start with `account_` instead of `acc_`";
        #[seed]
        AccountListedTwice = "account-listed-twice", "§4.2", ["accounts.distinct-ids"],
            "a connection's accounts list carries its first account twice, as two identical elements";
        AccountsBeforeConnected = "accounts-before-connected", "§3.2", ["accounts.refused-before-connected"],
            "the accounts of a connection that is not CONNECTED are served (200 [])";
        AccountEndpointMissing = "account-endpoint-missing", "§4.4", ["account.readable", "reactions.accounts-updated"],
            "GET /v1/accounts/{id} answers 404";
        AccountUnreadableAfterUpdate = "account-unreadable-after-update", "§6.3", ["reactions.accounts-updated"],
            "GET /v1/accounts/{id} answers 500 once the account was updated";
        #[seed]
        AccountDropsAfterUpdate = "account-drops-after-update", "§4.2", ["state.nothing-vanishes"],
            "an account drops out of its connection's accounts list once `update_accounts` changed it";
        #[seed]
        EventBeforeData = "event-before-data", "§6.3", ["reactions.accounts-updated"],
            "accounts.updated goes out at once, but the update becomes readable only 2.5 s after the event was first posted";
        #[seed]
        TransactionsAfterAck = "transactions-after-ack", "§6.3", ["reactions.accounts-updated"],
            "an update's balance is readable with its accounts.updated, its new transactions only once the delivery is acknowledged and 1 s after its first posting";
        // What reads imply over time (the state model)
        #[seed]
        TransactionInTwoAccounts = "transaction-in-two-accounts", "§2.3", ["state.one-owner"],
            "the newest transaction of a connection's second account has the id of the first account's newest";
        #[seed]
        DeletedTransactionReturns = "deleted-transaction-returns", "§6", ["state.deletions-hold"],
            "a deleted transaction is listed again from the second listing of its account after the deletion, with no event";
        #[seed]
        DeletedReturnsOnNeighbourUpdate = "deleted-returns-on-neighbour-update", "§6", ["state.deletions-hold"],
            "a deleted transaction is listed again once any account of its connection is updated (the event names only that account)";
        #[seed]
        TransactionVanishes = "transaction-vanishes", "§4.3", ["state.nothing-vanishes", "state.changes-announced"],
            "from the second listing of an account on, its oldest transaction is gone, with no transaction.deleted";
        #[seed]
        SilentBalanceChange = "silent-balance-change", "§1", ["state.changes-announced"],
            "each read of a connection's accounts shows balances a cent higher than the read before, with no event";
        SyncReplacesSilently = "sync-replaces-silently", "§6", ["state.nothing-vanishes"],
            "`update_accounts` also re-imports the account's newest transaction under a new id: the old id vanishes with no transaction.deleted, and a deletion of it is refused (as `tests/foreign/python-steady`'s `silent-dedup-on-update`)";
        QuickSyncUnannounced = "quick-sync-unannounced", "§1", ["state.changes-announced"],
            "an `accounts.updated` within 10 s of its account's last one is dropped, the sync's new transaction kept (a rate limit on events, as `tests/foreign/node-side-effects`'s `update-silenced` within 3 s)";
        #[seed]
        ReadEchoesUpdate = "read-echoes-update", "§6", ["state.updates-show-a-change"],
            "every authorised GET /v1/accounts/{id} sends an accounts.updated of the account (at most once per account every 2 s), with nothing changed (as `tests/foreign/python-wire`'s `read-echo-updated`)";
        #[seed]
        CreatedAtRestamped = "created-at-restamped", "§2.2", ["state.fixed-fields"],
            "`update_accounts` re-stamps the account's createdAt a day later (announced by accounts.updated)";
        #[seed]
        LastSyncedGoesBack = "last-synced-goes-back", "§2.2", ["state.sync-moves-forward"],
            "`update_accounts` moves the account's lastSyncedAt six hours back from the last sync (announced by accounts.updated)";
        // §2.3, §4.3 transactions
        SecondClientTransactionAccount = "second-client-transaction-account", "§2.3", ["transactions.account-id"],
            "only the second client's transactions name another account in accountId";
        SecondClientAccountConnection = "second-client-account-connection", "§2.2", ["accounts.connection-id"],
            "only the second client's accounts name another connection in connectionId";
        TransactionPrefix = "transaction-prefix", "§2.3", ["transactions.id-prefix", "transactions.page-schema"],
            "transaction ids start with `tx_` instead of `txn_`";
        PageGap = "page-gap", "§4.3", ["transactions.walk-exactly-once", "transactions.starting-after"],
            "starting_after skips one item: an item is lost at every page boundary";
        PageDuplicate = "page-duplicate", "§4.3", ["transactions.walk-exactly-once", "transactions.starting-after"],
            "starting_after includes the cursor item: it is listed twice at every page boundary";
        #[seed]
        HasMoreWhenPageFull = "has-more-when-page-full", "§4.3", ["transactions.has-more-honest"],
            "`has_more` is true whenever a page is full: wrong only when the count is a multiple of the limit";
        #[seed]
        PageGapLimitOne = "page-gap-limit-one", "§4.3", ["transactions.walk-exactly-once"],
            "with `limit=1` only, a page skips the item after the cursor";
        HasMoreTrueAtEnd = "has-more-true-at-end", "§4.3", ["transactions.has-more-honest"],
            "the last non-empty page says has_more true";
        HasMoreFalseEarly = "has-more-false-early", "§4.3", ["transactions.has-more-honest"],
            "the first page says has_more false although more items remain";
        #[seed]
        OffsetCursorUnderInsertions = "offset-cursor-under-insertions", "§4.3", ["transactions.walk-under-insertions"],
            "next_cursor is an offset into the list, so a transaction added between two page reads shifts the items after it";
        CursorIgnored = "cursor-ignored", "§4.3", ["transactions.walk-exactly-once", "transactions.starting-after"],
            "starting_after is ignored: always the first page";
        LimitIgnored = "limit-ignored", "§4.3", ["transactions.limit-respected"],
            "limit is ignored: always the default page size";
        CursorLoops = "cursor-loops", "§4.3", ["transactions.walk-exactly-once"],
            "the last page of a walk says has_more true and points back at the cursor it was fetched with";
        // §6 events
        EventPrefix = "event-prefix", "§6.1", ["events.schema"],
            "event ids start with `event_` instead of `evt_`";
        ClientPrefix = "client-prefix", "§6.2", ["events.schema"],
            "client ids start with `client_` instead of `cli_`";
        #[seed]
        EventTimeReversed = "event-time-reversed", "§6.2", ["events.time-follows-chain"],
            "each later event of a connection has an occurredAt a minute earlier than the one before";
        NoCreatedEvent = "no-created-event", "§3.2", ["events.created-announced", "events.previous-status-chain"],
            "connection.created is never sent";
        NoConnectedEvent = "no-connected-event", "§3.1", ["events.connected-announced"],
            "connection.connected is never sent";
        ConnectedBeforeStored = "connected-before-stored", "§3.1", ["events.connected-announced"],
            "`connection.connected` is sent 1.5 s before CONNECTED is stored: the accounts are refused meanwhile";
        NoFailedAuthEvent = "no-failed-auth-event", "§3.1", ["events.failed-auth-announced"],
            "connection.failed_auth is never sent";
        NoMfaRequiredEvent = "no-mfa-required-event", "§3.1", ["events.mfa-required-announced"],
            "connection.mfa_required is never sent";
        NoErrorEvent = "no-error-event", "§3.1", ["events.error-announced"],
            "connection.error is never sent";
        NoDisconnectedEvent = "no-disconnected-event", "§3.1", ["events.disconnected-announced"],
            "connection.disconnected is never sent";
        ConnectedReannounced = "connected-reannounced", "§6", ["events.previous-status-chain"],
            "`update_accounts` also sends connection.connected with previousStatus `connected`: a status change that did not happen";
        NoAccountsUpdatedEvent = "no-accounts-updated-event", "§6", ["reactions.accounts-updated"],
            "accounts.updated is never sent";
        NoTransactionDeletedEvent = "no-transaction-deleted-event", "§6", ["reactions.transaction-deleted"],
            "transaction.deleted is never sent";
        ReusedEventId = "reused-event-id", "§6.1", ["events.unique-ids"],
            "`accounts.updated` and `transaction.deleted` reuse the event id of the connection's `connection.connected`";
        #[seed]
        PreviousStatusAfterMfa = "previous-status-after-mfa", "§6.2", ["lifecycle.transition-graph"],
            "leaving `mfa_required`, the next event names `verifying` as its `previousStatus`";
        #[seed]
        VerifyingAfterMfaSilent = "verifying-after-mfa-silent", "§3.1", ["lifecycle.transition-graph"],
            "re-entering `verifying` from `mfa_required` is not announced";
        #[seed]
        AccountsAfterDisconnected = "accounts-after-disconnected", "§3.2", ["accounts.refused-before-connected"],
            "accounts are still served once the connection is `disconnected`";
        ForeignTransactionAfterUpdate = "foreign-transaction-after-update", "§2.3", ["transactions.account-id"],
            "the transaction `update_accounts` adds names another account of the connection as `accountId`";
        SecondClientNoCreated = "second-client-no-created", "§3.2", ["events.created-announced", "events.previous-status-chain"],
            "connections of any client but the first are never announced by `connection.created`";
        CreatedEventLazy = "created-event-lazy", "§3.2", ["events.created-announced"],
            "`connection.created` is sent when the connection's first action is driven: one never driven is never announced";
        WrongConnection = "wrong-connection", "§6.2", ["events.created-announced"],
            "every event names, as `connectionId`, its client's first connection instead of the one concerned";
        EventsNameOtherConnection = "events-name-other-connection", "§6.2", ["events.created-announced"],
            "each connection's events name, as `connectionId`, the connection its client created just before it (the client's first names the latest)";
        FailedAuthAsError = "failed-auth-as-error", "§3.1", ["events.failed-auth-announced"],
            "a connection entering failed_auth is announced by connection.error (the right connection, the wrong type)";
        // §6.3 reactions
        DeletedTransactionListed = "deleted-transaction-listed", "§6.3", ["state.deletions-hold"],
            "transaction.deleted is sent but the transaction stays listed";
        DeletedUnknownTransaction = "deleted-unknown-transaction", "§6", ["reactions.transaction-deleted"],
            "transaction.deleted names a transaction the account never listed";
        // §5 authentication and isolation
        NoAuthRequired = "no-auth-required", "§5", ["auth.missing-key"],
            "requests without Authorization are served as the first client";
        MalformedHeaderAccepted = "malformed-header-accepted", "§5", ["auth.malformed-key"],
            "malformed Authorization headers are served as the first client";
        AnyKeyAccepted = "any-key-accepted", "§5", ["auth.unknown-key"],
            "unknown keys are served as the first client";
        #[seed]
        KeyPrefixMatch = "key-prefix-match", "§5", ["auth.near-miss-key"],
            "any key that starts with a real key is served as that key's client";
        #[seed]
        KeyShapeMatch = "key-shape-match", "§5", ["auth.near-miss-key"],
            "any key of a real key's length that starts with its service prefix is served as that key's client";
        IsolationAccounts = "isolation-accounts", "§5", ["isolation.accounts"],
            "any client can read any connection's accounts";
        IsolationAccount = "isolation-account", "§5", ["isolation.account"],
            "any client can read any account";
        IsolationTransactions = "isolation-transactions", "§5", ["isolation.transactions"],
            "any client can read any account's transactions";
        #[seed]
        IsolationWithCursor = "isolation-with-cursor", "§5", ["isolation.request-shapes"],
            "any client can read any account's transactions by sending a starting_after";
        #[seed]
        ForeignCursor = "foreign-cursor", "§4.3", ["isolation.foreign-cursor"],
            "a starting_after that names a transaction of another account (of any client) continues that account's list";
        #[seed]
        OtherConnectionCursor = "other-connection-cursor", "§4.3", ["isolation.foreign-cursor"],
            "a starting_after that names a transaction of another connection of the same client continues that account's list";
        FirstClientReadsAll = "first-client-reads-all", "§5", ["isolation.accounts", "isolation.account", "isolation.transactions"],
            "the first client can read every client's connections, accounts and transactions (the other direction stays closed)";
        // §1 widget
        #[seed]
        KeyInWidgetToken = "key-in-widget-token", "§5", ["widget.token-no-key"],
            "the widget token is `sess_` and the client's API key, hex-encoded";
        // §7, §8 robustness
        BadLimit500 = "bad-limit-500", "§8", ["robustness.bad-limit"],
            "a bad limit answers 500";
        UnknownCursor500 = "unknown-cursor-500", "§4.3", ["robustness.unknown-cursor"],
            "an unknown starting_after answers 500";
        UnknownIds500 = "unknown-ids-500", "§7", ["robustness.unknown-ids"],
            "unknown connection and account ids answer 500";
        // §4: one cause under many symptoms (the closing block names it first)
        JsonBom = "json-bom", "§4", ["create.response-schema", "accounts.response-schema"],
            "every JSON body starts with a byte-order mark (U+FEFF)";
        // Issue 39: statements judged from every view (cases/clauses.toml)
        #[seed]
        WidgetTokenAsKey = "widget-token-as-key", "§5", ["auth.widget-token"],
            "a connection's widgetToken sent as the Bearer key is served as that connection's client";
        #[seed]
        DeletedNamesOtherAccount = "deleted-names-other-account", "§6.2", ["state.deleted-owner"],
            "transaction.deleted names another account of the connection as accountId (the transaction is removed from its own)";
        #[seed]
        AccountsListPartial = "accounts-list-partial", "§4.2", ["state.list-complete"],
            "the accounts list leaves out the connection's last account, which GET /v1/accounts/{id} serves and every update_accounts updates too (announced by accounts.updated)";
        #[seed]
        AccountReadOtherFields = "account-read-other-fields", "§4.4", ["state.account-read-agrees"],
            "GET /v1/accounts/{id} answers the right id with another account's name, type and currency";
        #[seed]
        ChangeAfterAck = "change-after-ack", "§6.3", ["reactions.accounts-updated"],
            "accounts.updated goes out at once, but the update becomes readable only 0.5 s after its delivery is acknowledged";
        // Issue 46: invariants over everything the run observes
        #[seed]
        AccountAnsweredUnderOtherId = "account-answered-under-other-id", "§4.4", ["invariants.identity"],
            "GET /v1/accounts/{id} answers with another account of the connection, whole, its own id included";
        #[seed]
        EventTimeInFuture = "event-time-in-future", "§6.2", ["invariants.clock"],
            "accounts.updated and transaction.deleted are stamped an hour ahead of the server's own clock";
        #[seed]
        AccountsStampedAtFirstRead = "accounts-stamped-at-first-read", "§3.1", ["invariants.clock"],
            "an account's createdAt is the time its connection's accounts were first listed, after connection.connected";
        IdPrefixIgnored = "id-prefix-ignored", "§2", ["invariants.identity"],
            "GET /v1/accounts/{id} finds the account by the part of the id after the prefix: conn_X and txn_X answer acc_X";
        #[seed]
        AccountIdPerConnection = "account-id-per-connection", "§2.2", ["invariants.identity"],
            "each connection numbers its accounts from 1: a client's connections list equal account ids, and an id reads the account that took it last";
        EventsInLocalZone = "events-in-local-zone", "§6.1", ["invariants.clock"],
            "every event is stamped in local time (UTC+2) written with `Z`: two hours ahead, its objects' times right";
        #[seed]
        WidgetTokenOpensOwnData = "widget-token-opens-own-data", "§5", ["invariants.reach"],
            "a connection's widgetToken as the Bearer key opens that connection's own accounts and transactions";
        #[seed]
        LeakBlankedField = "leak-blanked-field", "§5", ["invariants.reach"],
            "the first client reads every client's accounts and transactions, with names and descriptions blanked";
        #[seed]
        RefusedRequestCreates = "refused-request-creates", "§5", ["invariants.cause"],
            "a refused POST /v1/connections still creates a connection of the first client (announced)";
        RefusalShowsToken = "refusal-shows-token", "§5", ["auth.secret-stays-with-owner"],
            "GET /v1/accounts/{id} of another client's account is refused (404) with its connection's widget token in `error.details`";
        RefusalShowsAccount = "refusal-shows-account", "§5", ["invariants.reach"],
            "GET /v1/accounts/{id} of another client's account is refused (404) with that account in `error.details`";
        #[seed]
        RefusedReadSyncs = "refused-read-syncs", "§5", ["invariants.cause"],
            "a refused GET /v1/accounts/{id} still syncs the account first (a transaction added, announced by accounts.updated)";
        #[seed]
        OtherClientReadSyncs = "other-client-read-syncs", "§5", ["invariants.cause"],
            "GET /v1/accounts/{id} with another client's key is refused (404), but syncs the account first (announced); other refusals do not";
        RefusedReadReverifies = "refused-read-reverifies", "§5", ["invariants.cause"],
            "a read refused for its key re-verifies the CONNECTED connection it names first: connection.verifying then connection.connected, announced";
        PhantomDeletion = "phantom-deletion", "§6", ["invariants.cause"],
            "once an account was listed to its end, its next first page announces a transaction.deleted of a transaction it never had (once per account)";
        OtherKeyInEvents = "other-key-in-events", "§5", ["auth.secret-stays-with-owner"],
            "every event carries `data.verification`: the API key of another client than its own";
        SecondClientOwnTransactionsRefused = "second-client-own-transactions-refused", "§4.3", ["transactions.owner-served"],
            "the second client's reads of its own accounts' transactions answer 404";
] [
        UuidIds = "uuid-ids", "§2", [],
            "identifiers are the prefix and a lower-case UUID (`conn_3f2a…-…`)";
        PlainErrors = "plain-errors", "§7", [],
            "creation answers 200; errors answer 403 or 422 with a text/plain body";
        EmptyErrors = "empty-errors", "§7", [],
            "every error answers 400 with an empty body";
        OldestFirst = "oldest-first", "§4.3", [],
            "transactions are listed oldest first";
        SmallLimitRejected = "small-limit-rejected", "§8", [],
            "default limit 7, maximum 10; a larger limit is refused with 400";
        SmallLimitClamped = "small-limit-clamped", "§8", [],
            "default limit 7, maximum 10; a larger limit is clamped";
        ExtraFields = "extra-fields", "§2", [],
            "extra fields on every object, and next_cursor also on the last page";
        MinimalFields = "minimal-fields", "§2.2", [],
            "no lastSyncedAt nor institution; transactions carry only id, accountId and amount";
        OpaqueCursor = "opaque-cursor", "§4.3", [],
            "next_cursor is an opaque token; starting_after takes tokens and transaction ids";
        DeletedCursorRefused = "deleted-cursor-refused", "§4.3", [],
            "a starting_after naming a transaction deleted since is refused with 400, as an unknown one is";
        ReversedEvents = "reversed-events", "§6.3", [],
            "the events of one change are delivered in reverse order";
        EmptyArraysElsewhere = "empty-arrays-elsewhere", "§2.2", [],
            "accounts of every other type carry empty positions and currencyBalances arrays";
        ShortConnected = "short-connected", "§6.2", [],
            "connection.connected is delivered in the short flat form";
        ConnectedBothForms = "connected-both-forms", "§6.2", [],
            "connection.connected is delivered in the short flat form as well as the full one";
        EmptyPreviousOnCreated = "empty-previous-on-created", "§6.2", [],
            "connection.created carries previousStatus \"\" instead of null";
        NoPreviousOnCreated = "no-previous-on-created", "§6.2", [],
            "connection.created has no previousStatus field at all (there is no previous state)";
        PerClientIds = "per-client-ids", "§2", [],
            "each client numbers its accounts and transactions from 1: the second client's ids equal the first's";
        BigAccount = "big-account", "§8", [],
            "the checking account holds 3,000 transactions";
        EmptySecondClient = "empty-second-client", "§4.2", [],
            "the connections of the second client link no account: CONNECTED, with an empty accounts list";
        ForeignConnectionEvents = "foreign-connection-events", "§6", [],
            "each new connection comes with another connection of the same client, made and connected elsewhere, whose events reach the receiver too";
        PerClientIdsAtCreation = "per-client-ids-at-creation", "§2", [],
            "each client numbers its accounts and transactions from 1 as they are created, read or not: another client's id often names one of the reader's own";
        SharedWebhookAddress = "shared-webhook-address", "§6.3", [],
            "one webhook address for all clients: a registration replaces it, whichever client registers (the driver says so)";
        ClockAhead = "clock-ahead", "§6.2", [],
            "the server's clock is 90 s ahead of the harness's, in every timestamp alike";
        WholeSecondClock = "whole-second-clock", "§6.2", [],
            "the server's clock reads whole seconds: every timestamp is cut to the second, an event's `.000`";
        AccountBesideBalance = "account-beside-balance", "§4.4", [],
            "GET /v1/accounts/{id} answers `{\"account\": {…}, \"balance\": {\"current\": …, \"available\": …}}`";
        ReenteredStates = "reentered-states", "§3.2", [],
            "an action leading to the state a connection is in is accepted and re-enters it, announced again with that state as previousStatus";
        BackgroundDedup = "background-dedup", "§6", [],
            "from 0.4 s after a connection first connects, it deduplicates on its own 5 times, 0.4 s apart: the middle transaction of its first account removed each time, announced by transaction.deleted";
        BackgroundSync = "background-sync", "§1", [],
            "from 0.4 s after a connection first connects, it syncs on its own 5 times, 0.4 s apart: a transaction added each time, announced by accounts.updated";
] }

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let names: HashSet<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Mutant::ALL.len());
        assert!(Mutant::ALL.len() >= 40);
        assert!(Variant::ALL.len() >= 8);
        for m in Mutant::ALL {
            assert!(!m.caught_by().is_empty(), "{m} names no case");
            assert_eq!(Mutant::from_name(m.name()), Some(*m));
        }
        for v in Variant::ALL {
            assert_eq!(Variant::from_name(v.name()), Some(*v));
            assert!(v.flags().is_empty(), "{v}: flags are for mutants");
        }
    }

    /// A misspelt flag would silently drop a mutant from the seed matrix.
    #[test]
    fn every_flag_is_known() {
        for m in Mutant::ALL {
            for flag in m.flags() {
                assert!(["seed", "noisy"].contains(flag), "{m}: unknown flag #[{flag}]");
            }
        }
        assert!(Mutant::ALL.iter().filter(|m| m.seed_sensitive()).count() >= 37);
    }
}
