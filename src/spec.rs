//! The vocabulary of the service's interface specification (cited by section, `§3.1`), shared by the
//! sandbox and the harness so that both spell states, events and prefixes the same way.

use std::fmt;

/// The numbered sections of the spec, with short titles (citations, for the coverage matrix of
/// the Markdown report). Kept here because the spec itself is not shipped with the crate.
pub const SECTIONS: [(&str, &str); 23] = [
    ("§1", "What the service does"),
    ("§2", "Resources and their fields"),
    ("§2.1", "Connection"),
    ("§2.2", "Account"),
    ("§2.3", "Transaction"),
    ("§2.4", "Event"),
    ("§3", "States and transitions"),
    ("§3.1", "Connection states"),
    ("§3.2", "Transitions"),
    ("§4", "Endpoints"),
    ("§4.1", "Create a connection"),
    ("§4.2", "Get connection accounts"),
    ("§4.3", "Get account transactions"),
    ("§4.4", "Get one account"),
    ("§4.5", "Other operations"),
    ("§5", "Authentication"),
    ("§6", "Events"),
    ("§6.1", "Envelope"),
    ("§6.2", "Data object"),
    ("§6.3", "Expected client reactions"),
    ("§7", "Errors"),
    ("§8", "Limits"),
    ("§9", "Versioning"),
];

/// Sections whose whole text refers to another section: they are checked as that one is.
pub(crate) const REFERS_TO: [(&str, &str); 1] = [("§2.4", "§6")];

/// Sections that state nothing a client can observe: everything they name is "not shown", so
/// no case can check them and none should.
pub(crate) const STATES_NOTHING: [&str; 1] = ["§4.5"];

/// Whether `sub` is `section` itself or one of its subsections (`§4.3` is under `§4`).
pub(crate) fn within(sub: &str, section: &str) -> bool {
    sub == section || sub.strip_prefix(section).is_some_and(|rest| rest.starts_with('.'))
}

/// Identifier prefixes (§2, §2.1, §5.3).
pub mod prefix {
    pub const CONNECTION: &str = "conn_";
    pub const ACCOUNT: &str = "acc_";
    pub const TRANSACTION: &str = "txn_";
    pub const EVENT: &str = "evt_";
    pub const CLIENT: &str = "cli_";
    pub const WIDGET_TOKEN: &str = "sess_";
}

/// Event types that are not connection events (§6).
pub const ACCOUNTS_UPDATED: &str = "accounts.updated";
pub const TRANSACTION_DELETED: &str = "transaction.deleted";

/// The eight connection states of §3.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConnectionState {
    /// Created, waiting for credentials.
    Created,
    /// The user submitted credentials in the widget.
    CredentialsSubmitted,
    /// A worker checks the credentials with the bank.
    Verifying,
    /// Connected, accounts available.
    Connected,
    /// The bank requires multi-factor authentication.
    MfaRequired,
    /// Invalid credentials were provided.
    FailedAuth,
    /// Unexpected error during connection.
    Error,
    /// The connection was disconnected.
    Disconnected,
}

impl ConnectionState {
    /// Every state, in the order of §3.1.
    pub const ALL: [ConnectionState; 8] = [
        Self::Created,
        Self::CredentialsSubmitted,
        Self::Verifying,
        Self::Connected,
        Self::MfaRequired,
        Self::FailedAuth,
        Self::Error,
        Self::Disconnected,
    ];

    /// The lower-case name events carry in `previousStatus` (§3.1, §6.2).
    pub fn lower(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::CredentialsSubmitted => "credentials_submitted",
            Self::Verifying => "verifying",
            Self::Connected => "connected",
            Self::MfaRequired => "mfa_required",
            Self::FailedAuth => "failed_auth",
            Self::Error => "error",
            Self::Disconnected => "disconnected",
        }
    }

    /// The upper-case name the API returns in `status` (§2.1, §3.1).
    pub fn upper(self) -> String {
        self.lower().to_ascii_uppercase()
    }

    /// The connection event type that announces entering this state (§3.1, §6).
    pub fn event_type(self) -> &'static str {
        match self {
            Self::Created => "connection.created",
            Self::CredentialsSubmitted => "connection.credentials_submitted",
            Self::Verifying => "connection.verifying",
            Self::Connected => "connection.connected",
            Self::MfaRequired => "connection.mfa_required",
            Self::FailedAuth => "connection.failed_auth",
            Self::Error => "connection.error",
            Self::Disconnected => "connection.disconnected",
        }
    }

    /// The state [`ConnectionState::lower`] names.
    pub fn from_lower(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.lower() == s)
    }

    /// The state whose event is of type `s` ([`ConnectionState::event_type`]).
    pub fn from_event_type(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.event_type() == s)
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.lower())
    }
}

/// The five account types of §2.2.
pub const ACCOUNT_TYPES: [&str; 5] = ["checking", "savings", "credit_card", "brokerage", "pension"];

/// Actions that move a connection or change its data. The spec does not say how (§3.2, §4.5),
/// so the harness asks a driver for them and the sandbox exposes them as control routes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Take the connection through the user's part of the widget to CONNECTED.
    Connect,
    /// Make the connection's authentication fail (FAILED_AUTH).
    FailAuth,
    /// Make it ask for a second factor (MFA_REQUIRED).
    RequireMfa,
    /// Put it in ERROR.
    Error,
    /// Disconnect it (DISCONNECTED).
    Disconnect,
    /// Change an account of the connection, announced by `accounts.updated`.
    UpdateAccounts,
    /// Delete a transaction, announced by `transaction.deleted`.
    DeleteTransaction,
}

/// The driver protocol's name (`require_mfa`), never Rust's (`RequireMfa`): an explored or
/// shrunk sequence is printed in failure messages as `[require_mfa, connect]`.
impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 7] = [
        Self::Connect,
        Self::FailAuth,
        Self::RequireMfa,
        Self::Error,
        Self::Disconnect,
        Self::UpdateAccounts,
        Self::DeleteTransaction,
    ];

    /// The name used by the driver protocol (`BANKCONF_ACTION`) and the sandbox control route.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::FailAuth => "fail_auth",
            Self::RequireMfa => "require_mfa",
            Self::Error => "error",
            Self::Disconnect => "disconnect",
            Self::UpdateAccounts => "update_accounts",
            Self::DeleteTransaction => "delete_transaction",
        }
    }

    /// The action [`Action::as_str`] names.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The state a successful state-changing action ends in, as the sandbox and the example
    /// driver implement it. `None` for actions that change data, not state.
    pub fn target_state(self) -> Option<ConnectionState> {
        match self {
            Self::Connect => Some(ConnectionState::Connected),
            Self::FailAuth => Some(ConnectionState::FailedAuth),
            Self::RequireMfa => Some(ConnectionState::MfaRequired),
            Self::Error => Some(ConnectionState::Error),
            Self::Disconnect => Some(ConnectionState::Disconnected),
            Self::UpdateAccounts | Self::DeleteTransaction => None,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The account in an answer to `GET /v1/accounts/{accountId}`, whose shape §4.4 leaves open:
/// the body itself when it carries an `id` (§2.2's field), else the one object member of the
/// body that carries an `id` (a wrapper such as `{"data": {…}}`, or `{"account": {…}, "balance":
/// {…}}` beside other members: choices an implementer is free to make), else the body when it
/// carries a `balance`. None: no account there, and nothing is judged of it.
pub(crate) fn single_account(body: &serde_json::Value) -> Option<&serde_json::Map<String, serde_json::Value>> {
    let top = body.as_object()?;
    if top.contains_key("id") {
        return Some(top);
    }
    let mut inner = top.values().filter_map(|v| v.as_object().filter(|o| o.contains_key("id")));
    match (inner.next(), inner.next()) {
        (Some(one), None) => Some(one),
        (None, _) if top.contains_key("balance") => Some(top),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_nest() {
        assert!(within("§4.3", "§4") && within("§4", "§4") && !within("§4.3", "§4.1") && !within("§41", "§4"));
    }

    #[test]
    fn state_names_round_trip() {
        for st in ConnectionState::ALL {
            assert_eq!(ConnectionState::from_lower(st.lower()), Some(st));
            assert_eq!(ConnectionState::from_event_type(st.event_type()), Some(st));
        }
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
        }
    }

    #[test]
    fn a_single_account_is_found_bare_or_in_one_wrapper() {
        let bare = serde_json::json!({"id": "acc_1", "balance": 2.0});
        assert_eq!(single_account(&bare).and_then(|a| a.get("balance")), Some(&serde_json::json!(2.0)));
        let wrapped = serde_json::json!({"result": {"id": "acc_1", "balance": 2.0}, "meta": {}});
        assert_eq!(single_account(&wrapped).and_then(|a| a.get("id")), Some(&serde_json::json!("acc_1")));
        let beside = serde_json::json!({"account": {"id": "acc_1", "balance": 2.0}, "balance": {"current": 2.0}});
        assert_eq!(single_account(&beside).and_then(|a| a.get("balance")), Some(&serde_json::json!(2.0)));
        let two = serde_json::json!({"a": {"id": "acc_1"}, "b": {"id": "acc_2"}});
        assert!(single_account(&two).is_none() && single_account(&serde_json::json!([1])).is_none());
    }
}

/// An ISO 8601 UTC timestamp (§2.2, §2.3, §6.1, §6.2) in the extended form RFC 3339 reads:
/// `text` itself when it is extended, its extended spelling when it is ISO 8601's basic format
/// (`20261207T194815.620Z`) or writes the fraction after a comma (`19:48:15,620Z`). The spec says
/// "ISO 8601", which defines both formats alike, and never names RFC 3339's profile of it, so a
/// careful implementer may write either (docs/checks.md, "Timestamps"). A text that mixes the
/// two, or is neither, is returned as it is, and RFC 3339 refuses it.
pub(crate) fn extended_timestamp(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some((date, time)) = text.split_once(['T', 't']) else { return Cow::Borrowed(text) };
    let zone_at = time.find(['Z', 'z', '+', '-']).unwrap_or(time.len());
    let (clock, zone) = time.split_at(zone_at);
    let (whole, fraction) = match clock.split_once(['.', ',']) {
        Some((w, f)) if digits(f) => (w, Some(f)),
        Some(_) => return Cow::Borrowed(text),
        None => (clock, None),
    };
    let fraction = fraction.map_or(String::new(), |f| format!(".{f}"));
    if date.len() == 8 && digits(date) && whole.len() == 6 && digits(whole) {
        let zone = match zone.len() {
            5 if digits(&zone[1..]) => format!("{}:{}", &zone[..3], &zone[3..]),
            3 if digits(&zone[1..]) => format!("{zone}:00"),
            _ => zone.to_string(),
        };
        let (d, w) = (date, whole);
        return Cow::Owned(format!(
            "{}-{}-{}T{}:{}:{}{fraction}{zone}",
            &d[..4],
            &d[4..6],
            &d[6..],
            &w[..2],
            &w[2..4],
            &w[4..]
        ));
    }
    match clock.contains(',') {
        true => Cow::Owned(format!("{date}T{whole}{fraction}{zone}")),
        false => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod timestamp_tests {
    use super::extended_timestamp as ext;

    #[test]
    fn basic_and_comma_forms_read_as_extended_and_nothing_else_changes() {
        assert_eq!(ext("20261207T194815.620Z"), "2026-12-07T19:48:15.620Z");
        assert_eq!(ext("20261207T194815Z"), "2026-12-07T19:48:15Z");
        assert_eq!(ext("20261207T194815+0000"), "2026-12-07T19:48:15+00:00");
        assert_eq!(ext("2026-12-07T19:48:15,620Z"), "2026-12-07T19:48:15.620Z");
        for same in ["2026-12-07T19:48:15.620Z", "2026-12-07T194815Z", "20261207T19:48:15Z", "x", "20261207T1948Z"] {
            assert_eq!(ext(same), same);
        }
    }
}
