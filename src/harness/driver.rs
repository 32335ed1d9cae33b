//! The driver protocol: how the harness moves a target's connections through states, since
//! the spec does not say how (§3.2, §4.5). See README "Driver protocol".

use crate::sandbox::{ActionArgs, Control, ControlError};
use crate::spec::Action;
use std::process::Stdio;
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
    Act(Action),
}

impl DriverAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RegisterWebhook => "register_webhook",
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
    /// A command run with `sh -c` once per action.
    Command { command: String, base_url: String, timeout: Duration },
}

impl Driver {
    pub async fn run(&self, action: DriverAction, args: &DriveArgs) -> Result<(), DriveError> {
        match self {
            Self::InProcess(control) => run_in_process(control, action, args).await,
            Self::Command { command, base_url, timeout } => {
                run_command(command, base_url, *timeout, action, args).await
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
        .kill_on_drop(true);
    let vars = [
        ("BANKCONF_CONNECTION_ID", &args.connection_id),
        ("BANKCONF_WIDGET_TOKEN", &args.widget_token),
        ("BANKCONF_ACCOUNT_ID", &args.account_id),
        ("BANKCONF_TRANSACTION_ID", &args.transaction_id),
        ("BANKCONF_WEBHOOK_URL", &args.webhook_url),
    ];
    for (name, value) in vars {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let mut child = cmd.spawn().map_err(|e| DriveError::Failed(format!("driver could not start: {e}")))?;
    let mut stderr = child.stderr.take();
    let work = async {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            // Read to the end but keep only a bounded tail.
            let mut chunk = [0u8; 4096];
            loop {
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.len() > 4 * MAX_STDERR {
                            buf.drain(..buf.len() - MAX_STDERR);
                        }
                    }
                }
            }
        }
        let status = child.wait().await;
        (status, buf)
    };
    let (status, stderr) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| DriveError::Failed(format!("driver {} timed out after {:.0?}", action.as_str(), timeout)))?;
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

/// `: <last line(s) of stderr>` or nothing.
fn tail(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    let start = trimmed.len().saturating_sub(MAX_STDERR);
    let start = (start..=trimmed.len()).find(|i| trimmed.is_char_boundary(*i)).unwrap_or(trimmed.len());
    format!(": {}", &trimmed[start..])
}
