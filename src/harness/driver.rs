//! The driver protocol: how the harness moves a target's connections through states, since
//! the spec does not say how (§3.2, §4.5). See README "Driver protocol".

use super::embedded::{ActionArgs, Control, ControlError};
use super::redact;
use crate::spec::Action;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Exit code: this target cannot do that action (the cases that need it are ignored).
pub const EXIT_UNSUPPORTED: i32 = 3;
/// Exit code: the target refused the action from the connection's current state.
pub const EXIT_REFUSED: i32 = 4;
/// Most of the driver's stderr kept for messages.
const MAX_STDERR: usize = 2048;

/// What the driver is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverAction {
    /// Register the receiver's URL as a webhook delivery address (called once per run).
    RegisterWebhook,
    /// Remove it again, at the end of the run: nothing should be delivered to a receiver that is
    /// gone (exit 3 is fine: the target cannot).
    UnregisterWebhook,
    Act(Action),
}

impl DriverAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RegisterWebhook => "register_webhook",
            Self::UnregisterWebhook => "unregister_webhook",
            Self::Act(a) => a.as_str(),
        }
    }
}

/// The values passed to the driver (`BANKCONF_*` variables), each set where it applies.
#[derive(Clone, Debug, Default)]
pub struct DriveArgs {
    pub connection_id: Option<String>,
    pub widget_token: Option<String>,
    pub account_id: Option<String>,
    pub transaction_id: Option<String>,
    pub webhook_url: Option<String>,
}

/// Why a driver call did not do the action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError {
    /// Exit 3: the target cannot do this action.
    Unsupported(String),
    /// Exit 4: refused from the connection's current state.
    Refused(String),
    /// Any other exit, a timeout, or a driver that could not start.
    Failed(String),
}

/// A way to drive a target.
#[derive(Clone)]
pub enum Driver {
    /// The embedded sandbox, driven through its control handle.
    InProcess(Control),
    /// A command run with `sh -c` once per action; it gets the keys of the clients it acts
    /// for, whichever way they were given to the harness.
    Command { command: String, base_url: String, timeout: Duration, keys: Keys },
}

/// The API keys a command driver gets: `BANKCONF_API_KEY`, and `BANKCONF_SECOND_API_KEY`
/// when a second client is configured.
#[derive(Clone, Default)]
pub struct Keys {
    pub api_key: Option<String>,
    pub second_api_key: Option<String>,
}

impl Driver {
    pub async fn run(&self, action: DriverAction, args: &DriveArgs) -> Result<(), DriveError> {
        match self {
            Self::InProcess(control) => run_in_process(control, action, args).await,
            Self::Command { command, base_url, timeout, keys } => {
                run_command(command, base_url, *timeout, keys, action, args).await
            }
        }
    }
}

async fn run_in_process(control: &Control, action: DriverAction, args: &DriveArgs) -> Result<(), DriveError> {
    match action {
        DriverAction::RegisterWebhook => {
            let url = args.webhook_url.as_deref().ok_or_else(|| DriveError::Failed("no webhook URL".into()))?;
            control.register_webhook(url).await;
            Ok(())
        }
        DriverAction::UnregisterWebhook => {
            let url = args.webhook_url.as_deref().ok_or_else(|| DriveError::Failed("no webhook URL".into()))?;
            control.unregister_webhook(url).await;
            Ok(())
        }
        DriverAction::Act(a) => {
            let connection =
                args.connection_id.as_deref().ok_or_else(|| DriveError::Failed("no connection id".into()))?;
            let target =
                ActionArgs { account_id: args.account_id.clone(), transaction_id: args.transaction_id.clone() };
            control.apply(connection, a, target).await.map_err(|e| match e {
                ControlError::NotPossible(m) => DriveError::Refused(m),
                ControlError::NotFound(m) => DriveError::Failed(format!("not found: {m}")),
            })
        }
    }
}

async fn run_command(
    command: &str,
    base_url: &str,
    timeout: Duration,
    keys: &Keys,
    action: DriverAction,
    args: &DriveArgs,
) -> Result<(), DriveError> {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .env("BANKCONF_ACTION", action.as_str())
        .env("BANKCONF_BASE_URL", base_url)
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
        ("BANKCONF_API_KEY", &keys.api_key),
        ("BANKCONF_SECOND_API_KEY", &keys.second_api_key),
    ];
    for (name, value) in vars {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let mut child = cmd.spawn().map_err(|e| DriveError::Failed(format!("driver could not start: {e}")))?;
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    // Remembered until it is seen to be empty, so that even a cancelled call's group is ended.
    if let Some(g) = group {
        LEFT_RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(g);
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
                if buf.len() > 4 * MAX_STDERR {
                    let excess = buf.len() - MAX_STDERR;
                    buf.drain(..excess);
                }
            }
        })
    });
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            if let Some(group) = group {
                terminate(&[group]).await;
                forget_if_empty(group);
            }
            if let Some(r) = reader {
                r.abort();
            }
            return Err(DriveError::Failed(format!("driver {} timed out after {:.0?}", action.as_str(), timeout)));
        }
    };
    if let Some(mut r) = reader {
        // What the driver wrote before it exited is in the pipe by now.
        let _ = tokio::time::timeout(STDERR_AFTER_EXIT, &mut r).await;
        r.abort();
    }
    if let Some(group) = group {
        forget_if_empty(group);
    }
    let stderr = std::mem::take(&mut *kept.lock().unwrap_or_else(|e| e.into_inner()));
    let stderr = tail(&String::from_utf8_lossy(&stderr));
    let status = status.map_err(|e| DriveError::Failed(format!("driver did not finish: {e}")))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(EXIT_UNSUPPORTED) => {
            Err(DriveError::Unsupported(format!("driver cannot {} (exit 3){}", action.as_str(), stderr)))
        }
        Some(EXIT_REFUSED) => {
            Err(DriveError::Refused(format!("target refused {} (exit 4){}", action.as_str(), stderr)))
        }
        Some(code) => Err(DriveError::Failed(format!("driver {} exited {code}{}", action.as_str(), stderr))),
        None => Err(DriveError::Failed(format!("driver {} was killed by a signal{}", action.as_str(), stderr))),
    }
}

/// `: <last line(s) of stderr>` or nothing; redacted before it is cut.
fn tail(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    format!(": {}", redact::cut_start(trimmed, MAX_STDERR))
}

/// How long stderr is still read once the driver has exited.
const STDERR_AFTER_EXIT: Duration = Duration::from_millis(200);
/// How long a driver's process group has to end after SIGTERM before it gets SIGKILL.
const GRACE: Duration = Duration::from_millis(300);

/// Process groups of driver calls that may still have processes, ended by [`stop_all`].
static LEFT_RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Stops remembering `group` once no process of it is left.
fn forget_if_empty(group: i32) {
    if !alive(group) {
        LEFT_RUNNING.lock().unwrap_or_else(|e| e.into_inner()).retain(|g| *g != group);
    }
}

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

/// Ends every process a driver call left running; called when a run ends.
pub async fn stop_all() {
    let groups = std::mem::take(&mut *LEFT_RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    let groups: Vec<i32> = groups.into_iter().filter(|g| alive(*g)).collect();
    if !groups.is_empty() {
        terminate(&groups).await;
    }
}
