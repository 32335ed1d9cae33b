//! Drivers: how the harness moves a target's connections through states and registers its
//! webhook receiver, since the spec does not say how (§3.2, §4.5, §6.3).
//!
//! [`Driver`] is the one interface; the harness holds an `Arc<dyn Driver>`. Its implementations:
//! - [`CommandDriver`]: a command run with `sh -c` once per action (docs/driver.md "The protocol");
//! - [`HttpDriver`]: one JSON `POST` per action to an admin endpoint (`docs/driver-over-http.md`);
//! - [`SandboxDriver`]: the embedded sandbox, through its control handle;
//! - any type of a library user's own, which moves their in-process server's state directly.

use super::embedded::{ActionArgs, Control, ControlError};
use super::errors::SetupError;
use super::orphans;
use super::redact;
use crate::spec::Action;
use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Exit code of a command driver: this target cannot do that action (the cases that need it
/// are ignored).
pub const EXIT_UNSUPPORTED: i32 = 3;
/// Exit code of a command driver: the target refused the action from the connection's current
/// state.
pub const EXIT_REFUSED: i32 = 4;
/// Most of a driver's own text (stderr, an HTTP answer) kept for messages.
const MAX_SAID: usize = 2048;
/// Why a case that needs a driver is not judged without one.
pub const NEEDS_DRIVER: &str = "needs a driver (--driver / BANKCONF_DRIVER, or --driver-url / BANKCONF_DRIVER_URL)";

/// What a driver answers to one action.
///
/// ```
/// use bankconf::harness::driver::Answer;
/// assert!(Answer::Done.into_result().is_ok());
/// assert!(Answer::Refused("not from CREATED".into()).into_result().is_err());
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
    pub fn into_result(self) -> Result<(), DriveError> {
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
/// use bankconf::harness::driver::{Answer, DriveFuture, Driver};
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

    /// Ends whatever the driver left running (the run is over); by default nothing.
    fn stop(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

impl dyn Driver {
    /// [`Driver::act`] as a `Result`, the form the harness's steps use.
    pub async fn run(&self, action: DriverAction, args: &DriveArgs) -> Result<(), DriveError> {
        self.act(action, args).await.into_result()
    }
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
pub struct Keys {
    /// The key of the client under test.
    pub api_key: Option<String>,
    /// The second client's key, when one is configured.
    pub second_api_key: Option<String>,
}

/// The embedded sandbox, driven through its control handle (the same code as its `/sandbox`
/// routes), with the keys of the run's clients (each address is registered for its client).
pub struct SandboxDriver {
    pub control: Control,
    pub keys: Keys,
}

impl Driver for SandboxDriver {
    fn act<'a>(&'a self, action: DriverAction, args: &'a DriveArgs) -> DriveFuture<'a> {
        Box::pin(async move {
            let control = &self.control;
            let second = args.second_webhook_url.as_deref();
            match (action, args.webhook_url.as_deref(), args.connection_id.as_deref()) {
                (DriverAction::RegisterWebhook, Some(url), _) => {
                    let Some(second) = second else {
                        control.register_webhook(url).await;
                        return Answer::Done;
                    };
                    for (url, key) in [(url, &self.keys.api_key), (second, &self.keys.second_api_key)] {
                        if let Err(e) = control.register_client_webhook(url, key.as_deref()).await {
                            return Answer::Error(e.to_string());
                        }
                    }
                }
                (DriverAction::UnregisterWebhook, Some(url), _) => {
                    for url in std::iter::once(url).chain(second) {
                        control.unregister_webhook(url).await;
                    }
                }
                (DriverAction::Act(a), _, Some(connection)) => {
                    let target =
                        ActionArgs { account_id: args.account_id.clone(), transaction_id: args.transaction_id.clone() };
                    return match control.apply(connection, a, target).await {
                        Ok(()) => Answer::Done,
                        Err(ControlError::NotPossible(m)) => Answer::Refused(m),
                        Err(ControlError::NotFound(m)) => Answer::Error(format!("not found: {m}")),
                    };
                }
                _ => return Answer::Error(format!("{}: missing arguments", action.as_str())),
            }
            Answer::Done
        })
    }
}

/// A command run with `sh -c` once per action, in a process group of its own; it gets the keys
/// of the clients it acts for, whichever way they were given to the harness.
pub struct CommandDriver {
    /// The command, run with `sh -c`.
    pub command: String,
    /// The target (`BANKCONF_BASE_URL`).
    pub base_url: String,
    /// How long one call may take before its process group is ended.
    pub timeout: Duration,
    /// The keys it gets (`BANKCONF_API_KEY`, `BANKCONF_SECOND_API_KEY`).
    pub keys: Keys,
    /// Process groups of this driver's calls that may still have processes (a call cancelled
    /// with its case, a driver's background child): ended by [`Driver::stop`], or on drop.
    groups: Mutex<Vec<i32>>,
}

impl CommandDriver {
    /// A driver running `command` against `base_url`, each call bounded by `timeout`.
    pub fn new(command: String, base_url: String, timeout: Duration, keys: Keys) -> Self {
        Self { command, base_url, timeout, keys, groups: Mutex::new(Vec::new()) }
    }

    /// Remembers `group` until it is empty; it dies with the harness meanwhile, even on SIGKILL.
    fn remember(&self, group: i32) {
        orphans::watch(-group);
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).push(group);
    }

    /// Stops remembering `group` once no process of it is left.
    fn forget_if_empty(&self, group: i32) {
        if !alive(group) {
            self.groups.lock().unwrap_or_else(|e| e.into_inner()).retain(|g| *g != group);
            orphans::unwatch(-group);
        }
    }

    async fn run_command(&self, action: DriverAction, args: &DriveArgs) -> Answer {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("BANKCONF_ACTION", action.as_str())
            .env("BANKCONF_BASE_URL", &self.base_url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group, so that a timeout or the end of the run ends its children too.
            .process_group(0)
            .kill_on_drop(true);
        let vars = [
            ("BANKCONF_CONNECTION_ID", &args.connection_id),
            ("BANKCONF_WIDGET_TOKEN", &args.widget_token),
            ("BANKCONF_ACCOUNT_ID", &args.account_id),
            ("BANKCONF_TRANSACTION_ID", &args.transaction_id),
            ("BANKCONF_WEBHOOK_URL", &args.webhook_url),
            ("BANKCONF_SECOND_WEBHOOK_URL", &args.second_webhook_url),
            ("BANKCONF_API_KEY", &self.keys.api_key),
            ("BANKCONF_SECOND_API_KEY", &self.keys.second_api_key),
        ];
        for (name, value) in vars {
            match value {
                Some(v) => cmd.env(name, v),
                None => cmd.env_remove(name),
            };
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return Answer::Error(format!("driver could not start: {e}")),
        };
        let group = child.id().and_then(|id| i32::try_from(id).ok());
        // Remembered until it is seen to be empty, so that even a cancelled call's group is ended.
        if let Some(g) = group {
            self.remember(g);
        }
        // Stderr is read aside, keeping a bounded tail: a background child of the driver may hold
        // it open long after the driver has exited, so its end is never waited for.
        let kept = Arc::new(Mutex::new(Vec::new()));
        let reader = child.stderr.take().map(|mut s| {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut chunk).await {
                    let mut buf = kept.lock().unwrap_or_else(|e| e.into_inner());
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.len() > 4 * MAX_SAID {
                        let excess = buf.len() - MAX_SAID;
                        buf.drain(..excess);
                    }
                }
            })
        });
        let status = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                if let Some(group) = group {
                    terminate(&[group]).await;
                    self.forget_if_empty(group);
                }
                if let Some(r) = reader {
                    r.abort();
                }
                return Answer::Error(format!("driver {} timed out after {:.0?}", action.as_str(), self.timeout));
            }
        };
        if let Some(mut r) = reader {
            // What the driver wrote before it exited is in the pipe by now.
            let _ = tokio::time::timeout(STDERR_AFTER_EXIT, &mut r).await;
            r.abort();
        }
        if let Some(group) = group {
            self.forget_if_empty(group);
        }
        let stderr = std::mem::take(&mut *kept.lock().unwrap_or_else(|e| e.into_inner()));
        let stderr = tail(&String::from_utf8_lossy(&stderr));
        let status = match status {
            Ok(status) => status,
            Err(e) => return Answer::Error(format!("driver did not finish: {e}")),
        };
        let name = action.as_str();
        match status.code() {
            Some(0) => Answer::Done,
            Some(EXIT_UNSUPPORTED) => Answer::NotSupported(format!("driver cannot {name} (exit 3){stderr}")),
            Some(EXIT_REFUSED) => Answer::Refused(format!("target refused {name} (exit 4){stderr}")),
            Some(code) => Answer::Error(format!("driver {name} exited {code}{stderr}")),
            None => Answer::Error(format!("driver {name} was killed by a signal{stderr}")),
        }
    }
}

impl Driver for CommandDriver {
    fn act<'a>(&'a self, action: DriverAction, args: &'a DriveArgs) -> DriveFuture<'a> {
        Box::pin(self.run_command(action, args))
    }

    /// Ends every process a call left running: no driver process outlives the run.
    fn stop(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let groups = std::mem::take(&mut *self.groups.lock().unwrap_or_else(|e| e.into_inner()));
            let live: Vec<i32> = groups.iter().copied().filter(|g| alive(*g)).collect();
            if !live.is_empty() {
                terminate(&live).await;
            }
            for group in groups {
                orphans::unwatch(-group);
            }
        })
    }
}

impl Drop for CommandDriver {
    /// A driver dropped without [`Driver::stop`] (a run that ended early) still ends what its
    /// calls left running, at once.
    fn drop(&mut self) {
        for group in self.groups.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            if alive(group) {
                // SAFETY: signals only a process group this driver created for one of its calls.
                unsafe { libc::kill(-group, libc::SIGKILL) };
            }
            orphans::unwatch(-group);
        }
    }
}

/// `: <last line(s) of the driver's text>` or nothing; redacted before it is cut.
fn tail(said: &str) -> String {
    let trimmed = said.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    format!(": {}", redact::cut_start(trimmed, MAX_SAID))
}

/// How long stderr is still read once the driver has exited.
const STDERR_AFTER_EXIT: Duration = Duration::from_millis(200);
/// How long a driver's process group has to end after SIGTERM before it gets SIGKILL.
const GRACE: Duration = Duration::from_millis(300);

/// Whether the process group `group` still has a member.
fn alive(group: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the group exists.
    unsafe { libc::kill(-group, 0) == 0 }
}

/// Ends the process groups: SIGTERM, then SIGKILL to whatever is left after [`GRACE`] (a
/// driver may ignore SIGTERM).
async fn terminate(groups: &[i32]) {
    for group in groups {
        // SAFETY: signals only the process group this harness created for a driver call.
        unsafe { libc::kill(-group, libc::SIGTERM) };
    }
    let deadline = tokio::time::Instant::now() + GRACE;
    while groups.iter().any(|g| alive(*g)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for group in groups.iter().filter(|g| alive(**g)) {
        // SAFETY: as above.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
}

/// One JSON `POST` per action to an admin endpoint (`--driver-url`; `docs/driver-over-http.md`):
/// 2xx done, 409 refused, 404 or 501 not supported, anything else or no answer within the
/// driver timeout a broken driver. Keys go by reference (`"apiKey": "primary"`), never by value:
/// the endpoint holds its own keys, and nothing secret but the widget token crosses to it.
pub struct HttpDriver {
    url: String,
    client: reqwest::Client,
    second_key: bool,
}

impl HttpDriver {
    /// A driver posting to `url`; each call bounded by `timeout`. `second_key`: the run has a
    /// second client (`"secondApiKey": "second"` is sent).
    pub fn new(url: &str, timeout: Duration, second_key: bool) -> Result<Self, SetupError> {
        Self::check_url(url)?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            // An admin endpoint that redirects is misconfigured: a broken driver, not a hop.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(SetupError::DriverClient)?;
        Ok(Self { url: url.to_string(), client, second_key })
    }

    /// Whether `url` can be a driver's endpoint: an http(s) URL with a host. Checked with the
    /// other flags ([`RunConfig::validate`](super::config::RunConfig::validate)) and again here.
    pub fn check_url(url: &str) -> Result<(), SetupError> {
        match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
            _ => Err(SetupError::BadDriverUrl { url: url.to_string() }),
        }
    }

    /// The body of one action: its name and the arguments that apply.
    pub fn body(&self, action: DriverAction, args: &DriveArgs) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        body.insert("action".into(), action.as_str().into());
        let fields = [
            ("connectionId", &args.connection_id),
            ("widgetToken", &args.widget_token),
            ("accountId", &args.account_id),
            ("transactionId", &args.transaction_id),
            ("webhookUrl", &args.webhook_url),
            ("secondWebhookUrl", &args.second_webhook_url),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                body.insert(name.into(), v.as_str().into());
            }
        }
        body.insert("apiKey".into(), "primary".into());
        if self.second_key {
            body.insert("secondApiKey".into(), "second".into());
        }
        serde_json::Value::Object(body)
    }

    async fn post(&self, action: DriverAction, args: &DriveArgs) -> Answer {
        let name = action.as_str();
        let sent = self.client.post(&self.url).json(&self.body(action, args)).send().await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Answer::Error(format!("driver {name}: no answer from --driver-url {}: timed out", self.url))
            }
            Err(e) => {
                return Answer::Error(format!(
                    "driver {name}: --driver-url {} could not be reached: {}",
                    self.url,
                    super::outcome::network_error(&e)
                ))
            }
        };
        let status = response.status().as_u16();
        // A bounded piece of the answer, for the message: the endpoint's text is not trusted.
        let mut said = Vec::new();
        while said.len() < MAX_SAID {
            match response.chunk().await {
                Ok(Some(chunk)) => said.extend_from_slice(&chunk[..chunk.len().min(MAX_SAID - said.len())]),
                _ => break,
            }
        }
        let said = tail(&String::from_utf8_lossy(&said));
        match status {
            200..=299 => Answer::Done,
            409 => Answer::Refused(format!("target refused {name} (HTTP 409){said}")),
            404 | 501 => Answer::NotSupported(format!("driver cannot {name} (HTTP {status}){said}")),
            _ => Answer::Error(format!("driver {name}: HTTP {status} from --driver-url{said}")),
        }
    }
}

impl Driver for HttpDriver {
    fn act<'a>(&'a self, action: DriverAction, args: &'a DriveArgs) -> DriveFuture<'a> {
        Box::pin(self.post(action, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn args(connection: Option<&str>) -> DriveArgs {
        DriveArgs {
            connection_id: connection.map(str::to_string),
            widget_token: Some("sess_1".into()),
            account_id: Some("acc_1".into()),
            ..Default::default()
        }
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

    #[test]
    fn http_bodies_name_keys_by_reference() {
        let driver = HttpDriver::new("http://127.0.0.1:9/admin", Duration::from_secs(1), true).unwrap();
        let body = driver.body(DriverAction::Act(Action::UpdateAccounts), &args(Some("conn_1")));
        assert_eq!(
            body,
            serde_json::json!({"action": "update_accounts", "connectionId": "conn_1", "widgetToken": "sess_1",
                "accountId": "acc_1", "apiKey": "primary", "secondApiKey": "second"})
        );
        assert!(HttpDriver::new("ftp://example", Duration::from_secs(1), false).is_err());
    }

    /// Whether process `pid` runs (a zombie, killed but not reaped by a container's init, does not).
    fn running(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    }

    #[tokio::test]
    async fn a_command_driver_leaves_no_process_behind() {
        let pid_file = std::env::temp_dir().join(format!("bankconf-driver-test-{}", std::process::id()));
        let driver = CommandDriver::new(
            format!("sleep 30 & echo $! > {}; exit 0", pid_file.display()),
            "http://127.0.0.1:9".into(),
            Duration::from_secs(5),
            Keys::default(),
        );
        let args = DriveArgs { webhook_url: Some("http://127.0.0.1:9/".into()), ..Default::default() };
        assert_eq!(driver.act(DriverAction::RegisterWebhook, &args).await, Answer::Done);
        let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
        let _ = std::fs::remove_file(&pid_file);
        assert!(running(&pid), "the background sleep outlived its driver call");
        assert_eq!(driver.groups.lock().unwrap().len(), 1, "and its group is remembered");
        driver.stop().await;
        assert!(!running(&pid), "stop ends the group");
    }
}
