//! The sandbox's connection lifecycle: which control action moves a connection along which
//! states. The spec names the eight states (§3.1) but shows only the creation transition (§3.2);
//! everything else here is the sandbox's own choice.
//!
//! Every state entered emits its `connection.*` event (§6), in path order, so an action that
//! passes through intermediate states emits one event per state, each carrying the state it
//! left as `previousStatus`.
//!
//! | Action        | From                                      | Path (states entered)                          |
//! |---------------|-------------------------------------------|------------------------------------------------|
//! | `connect`     | created, failed_auth, error               | credentials_submitted → verifying → connected  |
//! | `connect`     | credentials_submitted                     | verifying → connected                          |
//! | `connect`     | mfa_required                              | verifying → connected                          |
//! | `connect`     | verifying                                 | connected                                      |
//! | `fail_auth`   | created, failed_auth, error               | credentials_submitted → verifying → failed_auth|
//! | `fail_auth`   | credentials_submitted, mfa_required       | verifying → failed_auth                        |
//! | `fail_auth`   | verifying                                 | failed_auth                                    |
//! | `require_mfa` | created, failed_auth, error               | credentials_submitted → verifying → mfa_required |
//! | `require_mfa` | credentials_submitted                     | verifying → mfa_required                       |
//! | `require_mfa` | verifying                                 | mfa_required                                   |
//! | `error`       | any state but error and disconnected      | error                                          |
//! | `disconnect`  | any state but disconnected                | disconnected                                   |
//! | `update_accounts`, `delete_transaction` | connected only  | (no state change; data events)                 |
//!
//! Everything else is refused (`ControlError::NotPossible`, route 409): in particular
//! `connect` on a connected connection, `require_mfa` on a connection already waiting for MFA,
//! and every action on a disconnected connection (disconnected is terminal: create a new
//! connection). The sandbox never rests in credentials_submitted or verifying by itself; the
//! rows starting there exist so the table is total.

use crate::spec::{Action, ConnectionState};

use ConnectionState::{Created, CredentialsSubmitted, Disconnected, Error, FailedAuth, MfaRequired, Verifying};

/// The states a state-changing `action` moves a connection through, starting from `from`, in
/// order (the last one is the resting state). `None`: not possible from `from`, or `action`
/// does not change state (`update_accounts`, `delete_transaction`). See the module table.
pub(super) fn transition_path(from: ConnectionState, action: Action) -> Option<Vec<ConnectionState>> {
    let to = action.target_state()?;
    match action {
        Action::Connect | Action::FailAuth | Action::RequireMfa => {
            let path: &[ConnectionState] = match from {
                Created | FailedAuth | Error => &[CredentialsSubmitted, Verifying],
                CredentialsSubmitted => &[Verifying],
                // Answering the MFA challenge re-enters verification; requiring MFA again
                // while already waiting for it is refused.
                MfaRequired if action != Action::RequireMfa => &[Verifying],
                Verifying => &[],
                _ => return None,
            };
            let mut path = path.to_vec();
            path.push(to);
            Some(path)
        }
        Action::Error => (!matches!(from, Error | Disconnected)).then(|| vec![Error]),
        Action::Disconnect => (from != Disconnected).then(|| vec![Disconnected]),
        Action::UpdateAccounts | Action::DeleteTransaction => None,
    }
}

/// What an action may apply to (`accountId`, `transactionId` of the control route's body).
#[derive(Clone, Debug, Default)]
pub struct ActionArgs {
    /// The account `update_accounts` or `delete_transaction` applies to (else one it picks).
    pub account_id: Option<String>,
    /// The transaction `delete_transaction` deletes (else one it picks).
    pub transaction_id: Option<String>,
}

/// Why a control action was not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// No such connection, account or transaction (route answers 404).
    NotFound(String),
    /// Not possible from the connection's current state (route answers 409).
    NotPossible(String),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(m) => write!(f, "not found: {m}"),
            Self::NotPossible(m) => write!(f, "not possible: {m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectionState::Connected;

    #[test]
    fn paths_end_in_target_and_change_state_at_every_step() {
        for from in ConnectionState::ALL {
            for action in Action::ALL {
                if let Some(path) = transition_path(from, action) {
                    assert_eq!(path.last().copied(), action.target_state());
                    let mut prev = from;
                    for st in path {
                        assert_ne!(prev, st, "{action} from {from}");
                        prev = st;
                    }
                }
            }
        }
        assert!(transition_path(Connected, Action::Connect).is_none());
        assert!(transition_path(Disconnected, Action::Connect).is_none());
        assert!(transition_path(MfaRequired, Action::RequireMfa).is_none());
    }
}
