//! The command driver: a command run with `sh -c` once per action, in a process group of its own
//! (docs/driver.md "The protocol"), its exit code the answer. Its processes end with the run,
//! even those a call left in the background.

use super::{tail, Answer, DriveArgs, DriveFuture, Driver, DriverAction, Keys, MAX_SAID};
use crate::harness::transport::orphans;
use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Exit code of a command driver: this target cannot do that action (the cases that need it
/// are ignored).
pub(super) const EXIT_UNSUPPORTED: i32 = 3;
/// Exit code of a command driver: the target refused the action from the connection's current
/// state.
pub(super) const EXIT_REFUSED: i32 = 4;

/// A command run with `sh -c` once per action, in a process group of its own; it gets the keys
/// of the clients it acts for, whichever way they were given to the harness.
pub(crate) struct CommandDriver {
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
    /// What `register_webhook` said it registered on stdout ([`super::said_addresses`]).
    addresses: Mutex<Option<bool>>,
    /// `--ca-cert`: the file each of [`TRUST_VARIABLES`] names, unless the user set it.
    ca_cert: Option<std::path::PathBuf>,
}

/// The variables that tell a driver's HTTP client which CA certificates to trust, set to the
/// `--ca-cert` file: curl's, OpenSSL's (Python's `ssl` and `urllib`, Ruby, and Go's
/// `crypto/x509` read `SSL_CERT_FILE` too), Python requests' and Node's. A variable the user set
/// is left as it is. All but `NODE_EXTRA_CA_CERTS` replace the system's roots for the tool that
/// reads them (docs/running.md "TLS, gateways and proxies").
pub(crate) const TRUST_VARIABLES: [&str; 4] =
    ["CURL_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"];

impl CommandDriver {
    /// A driver running `command` against `base_url`, each call bounded by `timeout`.
    pub(crate) fn new(command: String, base_url: String, timeout: Duration, keys: Keys) -> Self {
        let (groups, addresses) = (Mutex::new(Vec::new()), Mutex::new(None));
        Self { command, base_url, timeout, keys, groups, addresses, ca_cert: None }
    }

    /// The driver inherits the run's trust: with `--ca-cert FILE`, its calls get
    /// [`TRUST_VARIABLES`] set to the file (its absolute path), each unless the user set it.
    pub(crate) fn trusting(mut self, ca_cert: Option<&std::path::Path>) -> Self {
        self.ca_cert = ca_cert.map(|f| std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf()));
        self
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

    /// The driver's command for `action`: `sh -c`, the action's variables set (the others
    /// removed), in a process group of its own.
    fn command(&self, action: DriverAction, args: &DriveArgs) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("BANKCONF_ACTION", action.as_str())
            .env("BANKCONF_BASE_URL", &self.base_url)
            .stdin(Stdio::null())
            // Only register_webhook's stdout is read: it may say what it registered.
            .stdout(if action == DriverAction::RegisterWebhook { Stdio::piped() } else { Stdio::null() })
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
        if let Some(file) = &self.ca_cert {
            for name in TRUST_VARIABLES.into_iter().filter(|name| std::env::var_os(name).is_none()) {
                cmd.env(name, file);
            }
        }
        cmd
    }

    async fn run_command(&self, action: DriverAction, args: &DriveArgs) -> Answer {
        let mut cmd = self.command(action, args);
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
        // Its head only (what it says is one short line), the rest drained unread.
        let out = Arc::new(Mutex::new(Vec::new()));
        let out_reader = child.stdout.take().map(|mut s| {
            let out = out.clone();
            tokio::spawn(async move {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut chunk).await {
                    let mut buf = out.lock().unwrap_or_else(|e| e.into_inner());
                    let room = MAX_SAID.saturating_sub(buf.len()).min(n);
                    buf.extend_from_slice(&chunk[..room]);
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
        for mut r in reader.into_iter().chain(out_reader) {
            // What the driver wrote before it exited is in the pipe by now.
            let _ = tokio::time::timeout(STDERR_AFTER_EXIT, &mut r).await;
            r.abort();
        }
        if action == DriverAction::RegisterWebhook && matches!(status, Ok(s) if s.success()) {
            let said = std::mem::take(&mut *out.lock().unwrap_or_else(|e| e.into_inner()));
            *self.addresses.lock().unwrap_or_else(|e| e.into_inner()) =
                super::said_addresses(&String::from_utf8_lossy(&said));
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

    fn per_client_addresses(&self) -> Option<bool> {
        *self.addresses.lock().unwrap_or_else(|e| e.into_inner())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether process `pid` runs (a zombie, killed but not reaped by a container's init, does not).
    fn running(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    }

    #[tokio::test]
    async fn register_webhook_may_say_what_it_registered_on_stdout() {
        let args = DriveArgs { webhook_url: Some("http://127.0.0.1:9/".into()), ..Default::default() };
        for (script, said) in [
            ("echo registered; echo webhooks=shared", Some(false)),
            ("echo webhooks=per-client", Some(true)),
            ("echo nothing to say", None),
            ("echo webhooks=shared; exit 1", None),
        ] {
            let driver =
                CommandDriver::new(script.into(), "http://127.0.0.1:9".into(), Duration::from_secs(5), Keys::default());
            let _ = driver.act(DriverAction::RegisterWebhook, &args).await;
            assert_eq!(driver.per_client_addresses(), said, "{script}");
        }
    }

    /// With `--ca-cert`, each trust variable the user did not set names the file, absolute.
    #[tokio::test]
    async fn the_driver_inherits_the_runs_trust() {
        let out = std::env::temp_dir().join(format!("bankconf-driver-trust-{}", std::process::id()));
        let script = format!(
            "echo \"$CURL_CA_BUNDLE|$SSL_CERT_FILE|$REQUESTS_CA_BUNDLE|$NODE_EXTRA_CA_CERTS\" > {}",
            out.display()
        );
        let driver = CommandDriver::new(script, "http://127.0.0.1:9".into(), Duration::from_secs(5), Keys::default())
            .trusting(Some(std::path::Path::new("ca.pem")));
        let args = DriveArgs { webhook_url: Some("http://127.0.0.1:9/".into()), ..Default::default() };
        assert_eq!(driver.act(DriverAction::RegisterWebhook, &args).await, Answer::Done);
        let said = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let file = std::env::current_dir().unwrap().join("ca.pem").display().to_string();
        // A variable this process has (the user's) is left as it is.
        let expected: Vec<String> =
            TRUST_VARIABLES.iter().map(|name| std::env::var(name).unwrap_or_else(|_| file.clone())).collect();
        assert_eq!(said.trim(), expected.join("|"));
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
