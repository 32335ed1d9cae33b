//! Drivers: how the harness moves a target's connections through states and registers its
//! webhook receiver, since the spec does not say how (§3.2, §4.5, §6.3).
//!
//! [`Driver`] is the one interface; the harness holds an `Arc<dyn Driver>`. Its implementations:
//! - [`CommandDriver`]: a command run with `sh -c` once per action (docs/driver.md "The protocol");
//! - [`HttpDriver`]: one JSON `POST` per action to an admin endpoint (`docs/driver-over-http.md`);
//! - [`SandboxDriver`]: the embedded sandbox, through its control handle;
//! - any type of a library user's own, which moves their in-process server's state directly.
//!
//! Each implementation is a file of its own; this one holds the interface, the actions and their
//! arguments and answers, and what the implementations share.

mod command;
mod http;
mod sandbox;

use crate::harness::vocab::redact;
use crate::spec::Action;
pub(crate) use command::CommandDriver;
pub use http::HttpDriver;
pub(crate) use sandbox::SandboxDriver;
use std::future::Future;
use std::pin::Pin;

/// Most of a driver's own text (stderr, an HTTP answer) kept for messages.
const MAX_SAID: usize = 2048;
/// Why a case that needs a driver is not judged without one.
pub(crate) const NEEDS_DRIVER: &str =
    "needs a driver (--driver / BANKCONF_DRIVER, or --driver-url / BANKCONF_DRIVER_URL)";

/// What a driver answers to one action.
///
/// ```
/// use bankconf::Answer;
/// // A target that cannot fail a login on demand says so: the cases that need `fail_auth` are
/// // then ignored with this reason, never failed.
/// let answer = Answer::NotSupported("this backend cannot fail a login on demand".into());
/// assert_ne!(answer, Answer::Done);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The target accepted the action; the events that announce it may follow later.
    Done,
    /// The target refused the action from the connection's current state (command exit 4,
    /// HTTP 409): the case that asked is not judged.
    Refused(String),
    /// The target cannot do this action at all (command exit 3, HTTP 404 or 501): the cases
    /// that need it are not judged.
    NotSupported(String),
    /// The driver itself broke (any other exit or answer, a timeout, no answer): the case ends
    /// in an error whose source is the driver, never in a failure of the target.
    Error(String),
}

impl Answer {
    /// `Ok` for [`Answer::Done`], else the reason as a [`DriveError`].
    pub(crate) fn into_result(self) -> Result<(), DriveError> {
        match self {
            Self::Done => Ok(()),
            Self::Refused(m) => Err(DriveError::Refused(m)),
            Self::NotSupported(m) => Err(DriveError::Unsupported(m)),
            Self::Error(m) => Err(DriveError::Failed(m)),
        }
    }
}

/// Why a driver call did not do the action (an [`Answer`] other than `Done`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError {
    /// The target cannot do this action.
    Unsupported(String),
    /// Refused from the connection's current state.
    Refused(String),
    /// The driver broke: any other exit or answer, a timeout, or a driver that could not start.
    Failed(String),
}

/// The future a driver method returns (boxed, so that drivers are usable as `dyn Driver`).
pub type DriveFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Moves a target's connections through states (§3.1) and registers the harness's webhook
/// receiver: what the spec leaves to each implementation (§3.2, §4.5, §6.3).
///
/// Each action method answers once the target has *accepted* the action; the events that
/// announce it may follow later. A method a driver does not override answers
/// [`Answer::NotSupported`], so an implementer writes only what their target can do. Drivers
/// that handle every action the same way (a command, an HTTP endpoint) override [`Driver::act`]
/// instead.
///
/// An implementer whose server runs in the same process moves its state directly:
///
/// ```
/// use bankconf::{Answer, DriveFuture, Driver};
///
/// struct MyDriver; // would hold a handle on the server's state
///
/// impl Driver for MyDriver {
///     fn register_webhook<'a>(&'a self, _url: &'a str, _second: Option<&'a str>) -> DriveFuture<'a> {
///         Box::pin(async { Answer::Done })
///     }
///     fn connect<'a>(&'a self, connection_id: &'a str, _widget_token: Option<&'a str>) -> DriveFuture<'a> {
///         Box::pin(async move {
///             // e.g. state.lock().connect(connection_id)
///             if connection_id.starts_with("conn_") { Answer::Done } else { Answer::Refused("unknown".into()) }
///         })
///     }
/// }
/// ```
pub trait Driver: Send + Sync {
    /// Does `action` with `args`; by default, calls the action's own method below with the
    /// arguments it takes. An argument the action needs and `args` lacks is a broken call.
    fn act<'a>(&'a self, action: DriverAction, args: &'a DriveArgs) -> DriveFuture<'a> {
        let missing = |what: &str| answer(Answer::Error(format!("{}: no {what} given", action.as_str())));
        let (account, transaction) = (args.account_id.as_deref(), args.transaction_id.as_deref());
        let act = match action {
            DriverAction::RegisterWebhook => {
                return args.webhook_url.as_deref().map_or_else(
                    || missing("webhook URL"),
                    |u| self.register_webhook(u, args.second_webhook_url.as_deref()),
                )
            }
            DriverAction::UnregisterWebhook => {
                return args.webhook_url.as_deref().map_or_else(
                    || missing("webhook URL"),
                    |u| self.unregister_webhook(u, args.second_webhook_url.as_deref()),
                )
            }
            DriverAction::Act(act) => act,
        };
        let Some(connection) = args.connection_id.as_deref() else { return missing("connection id") };
        match act {
            Action::Connect => self.connect(connection, args.widget_token.as_deref()),
            Action::FailAuth => self.fail_auth(connection),
            Action::RequireMfa => self.require_mfa(connection),
            Action::Error => self.error(connection),
            Action::Disconnect => self.disconnect(connection),
            Action::UpdateAccounts => self.update_accounts(connection, account),
            Action::DeleteTransaction => self.delete_transaction(connection, account, transaction),
        }
    }

    /// Deliver the client under test's events (§6) to `webhook_url` from now on, and, when
    /// `second_webhook_url` is given, the second client's events there (each client's events to
    /// its own server; registering `webhook_url` for both still works, but then delivery
    /// isolation is not judged). Called once, before any case; not supported: the event cases
    /// are not judged.
    fn register_webhook<'a>(&'a self, webhook_url: &'a str, second_webhook_url: Option<&'a str>) -> DriveFuture<'a> {
        let _ = (webhook_url, second_webhook_url);
        not_supported("register_webhook")
    }

    /// Stop delivering, and retrying, to both addresses. Called once, at the end of the run;
    /// not supported is fine.
    fn unregister_webhook<'a>(&'a self, webhook_url: &'a str, second_webhook_url: Option<&'a str>) -> DriveFuture<'a> {
        let _ = (webhook_url, second_webhook_url);
        not_supported("unregister_webhook")
    }

    /// Complete the widget flow for the connection: it becomes CONNECTED (§3.1) with accounts.
    fn connect<'a>(&'a self, connection_id: &'a str, widget_token: Option<&'a str>) -> DriveFuture<'a> {
        let _ = (connection_id, widget_token);
        not_supported("connect")
    }

    /// Submit invalid credentials: the connection becomes `failed_auth` (§3.1).
    fn fail_auth<'a>(&'a self, connection_id: &'a str) -> DriveFuture<'a> {
        let _ = connection_id;
        not_supported("fail_auth")
    }

    /// The bank asks for multi-factor authentication: `mfa_required` (§3.1).
    fn require_mfa<'a>(&'a self, connection_id: &'a str) -> DriveFuture<'a> {
        let _ = connection_id;
        not_supported("require_mfa")
    }

    /// An unexpected error during connection: `error` (§3.1).
    fn error<'a>(&'a self, connection_id: &'a str) -> DriveFuture<'a> {
        let _ = connection_id;
        not_supported("error")
    }

    /// Disconnect the connection: `disconnected` (§3.1).
    fn disconnect<'a>(&'a self, connection_id: &'a str) -> DriveFuture<'a> {
        let _ = connection_id;
        not_supported("disconnect")
    }

    /// Change an account's data, announced by `accounts.updated` (§6); `account_id` absent:
    /// pick an account of the connection.
    fn update_accounts<'a>(&'a self, connection_id: &'a str, account_id: Option<&'a str>) -> DriveFuture<'a> {
        let _ = (connection_id, account_id);
        not_supported("update_accounts")
    }

    /// Remove a transaction, announced by `transaction.deleted` (§6); absent ids: pick one.
    fn delete_transaction<'a>(
        &'a self,
        connection_id: &'a str,
        account_id: Option<&'a str>,
        transaction_id: Option<&'a str>,
    ) -> DriveFuture<'a> {
        let _ = (connection_id, account_id, transaction_id);
        not_supported("delete_transaction")
    }

    /// What [`Driver::register_webhook`] registered, when the driver says (docs/driver.md
    /// "register_webhook and the second client"): `Some(true)` each client's address for its
    /// own client's events, `Some(false)` one address that the target uses for every client,
    /// `None` not said (every driver of before; still fine). It decides how
    /// `isolation.deliveries` reads the second client's events at the first client's address:
    /// a leak (per client), the target's set-up (one address), or either (not said).
    fn per_client_addresses(&self) -> Option<bool> {
        None
    }

    /// Ends whatever the driver left running (the run is over); by default nothing.
    fn stop(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

impl dyn Driver {
    /// [`Driver::act`] as a `Result`, the form the harness's steps use.
    pub(crate) async fn run(&self, action: DriverAction, args: &DriveArgs) -> Result<(), DriveError> {
        self.act(action, args).await.into_result()
    }
}

/// What a driver said it registered, from its own words: `webhooks=per-client` or
/// `webhooks=shared` on a line of its own (the command driver's stdout), or the HTTP driver's
/// answer `{"webhooks": "per-client"}`; anything else says nothing.
pub(crate) fn said_addresses(text: &str) -> Option<bool> {
    let word = |w: &str| match w.trim() {
        "per-client" => Some(true),
        "shared" => Some(false),
        _ => None,
    };
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text) {
        return map.get("webhooks").and_then(serde_json::Value::as_str).and_then(word);
    }
    text.lines().find_map(|l| l.trim().strip_prefix("webhooks=").and_then(word))
}

/// An answer that is ready at once.
fn answer<'a>(answer: Answer) -> DriveFuture<'a> {
    Box::pin(std::future::ready(answer))
}

fn not_supported<'a>(action: &str) -> DriveFuture<'a> {
    answer(Answer::NotSupported(format!("this driver does not implement {action}")))
}

/// What the driver is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverAction {
    /// Register the receiver's URL as a webhook delivery address (called once per run).
    RegisterWebhook,
    /// Remove it again, at the end of the run: nothing should be delivered to a receiver that is
    /// gone (not supported is fine).
    UnregisterWebhook,
    /// Move a connection or change its data.
    Act(Action),
}

impl DriverAction {
    /// The name of the driver protocol (`BANKCONF_ACTION`, the HTTP body's `action`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RegisterWebhook => "register_webhook",
            Self::UnregisterWebhook => "unregister_webhook",
            Self::Act(a) => a.as_str(),
        }
    }
}

/// The arguments of one action, each set where it applies.
#[derive(Clone, Debug, Default)]
pub struct DriveArgs {
    /// The connection to act on (§2.1); absent for the webhook actions.
    pub connection_id: Option<String>,
    /// Its widget token (§2.1): a secret, never to be printed.
    pub widget_token: Option<String>,
    /// The account to update, or whose transaction to delete; absent: the driver picks one.
    pub account_id: Option<String>,
    /// The transaction to delete; absent: the driver picks one.
    pub transaction_id: Option<String>,
    /// The harness's webhook receiver: the client under test's address.
    pub webhook_url: Option<String>,
    /// The receiver's address for the second client's events, when a second key is given.
    pub second_webhook_url: Option<String>,
}

/// The API keys a command driver gets: `BANKCONF_API_KEY`, and `BANKCONF_SECOND_API_KEY`
/// when a second client is configured.
#[derive(Clone, Default)]
pub(crate) struct Keys {
    /// The key of the client under test.
    pub api_key: Option<String>,
    /// The second client's key, when one is configured.
    pub second_api_key: Option<String>,
}

/// `: <last line(s) of the driver's text>` or nothing; the run's redactor redacts the message it
/// ends up in, and what the cut left of a secret beside its `…`.
fn tail(said: &str) -> String {
    let trimmed = said.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    format!(": {}", redact::shorten_start(trimmed, MAX_SAID))
}

/// A driver given in code: shared by the clones of a configuration, shown as `<driver>`.
#[derive(Clone)]
pub struct DriverImpl(pub std::sync::Arc<dyn Driver>);

impl std::fmt::Debug for DriverImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<driver>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_driver_says_per_client_or_shared_in_a_line_or_a_json_answer() {
        assert_eq!(said_addresses("ok\nwebhooks=per-client\n"), Some(true));
        assert_eq!(said_addresses(r#"{"webhooks": "shared"}"#), Some(false));
        assert_eq!(said_addresses("webhooks=both"), None);
        assert_eq!(said_addresses(r#"{"registered": true}"#), None);
        assert_eq!(said_addresses(""), None);
    }

    /// Implements two actions; the others answer not supported.
    struct Partial;

    impl Driver for Partial {
        fn connect<'a>(&'a self, connection_id: &'a str, widget_token: Option<&'a str>) -> DriveFuture<'a> {
            let done = connection_id == "conn_1" && widget_token == Some("sess_1");
            answer(if done { Answer::Done } else { Answer::Error("wrong arguments".into()) })
        }

        fn delete_transaction<'a>(
            &'a self,
            _connection_id: &'a str,
            account: Option<&'a str>,
            transaction: Option<&'a str>,
        ) -> DriveFuture<'a> {
            answer(if (account, transaction) == (Some("acc_1"), None) {
                Answer::Done
            } else {
                Answer::Refused("no".into())
            })
        }
    }

    pub(super) fn args(connection: Option<&str>) -> DriveArgs {
        DriveArgs {
            connection_id: connection.map(str::to_string),
            widget_token: Some("sess_1".into()),
            account_id: Some("acc_1".into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_answer_other_than_done_is_an_error() {
        assert!(Answer::Done.into_result().is_ok());
        assert!(Answer::Refused("not from CREATED".into()).into_result().is_err());
    }

    #[tokio::test]
    async fn act_dispatches_to_the_action_methods() {
        let driver: Arc<dyn Driver> = Arc::new(Partial);
        let connect = DriverAction::Act(Action::Connect);
        assert_eq!(driver.act(connect, &args(Some("conn_1"))).await, Answer::Done);
        let delete = DriverAction::Act(Action::DeleteTransaction);
        assert_eq!(driver.run(delete, &args(Some("conn_1"))).await, Ok(()));
        assert!(matches!(
            driver.act(DriverAction::Act(Action::Disconnect), &args(Some("c"))).await,
            Answer::NotSupported(_)
        ));
        assert!(matches!(driver.act(connect, &args(None)).await, Answer::Error(m) if m.contains("connection id")));
        let hook = DriveArgs { webhook_url: Some("http://127.0.0.1:1/".into()), ..args(Some("conn_1")) };
        assert!(matches!(driver.act(DriverAction::RegisterWebhook, &hook).await, Answer::NotSupported(_)));
        assert!(matches!(driver.act(DriverAction::UnregisterWebhook, &args(None)).await, Answer::Error(_)));
    }
}
