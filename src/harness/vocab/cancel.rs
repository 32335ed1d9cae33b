//! The one way a run is cut short: a [`Cancel`] the run owns, fired by a signal (SIGINT,
//! SIGTERM) or by the run's deadline (`--deadline`). Whoever starts new work checks it; the
//! cases running when it fires end ignored with its [`Cause`], the cleanup still runs, and every
//! report is written with what was judged (INCOMPLETE, naming the cause).

use crate::harness::vocab::outcome::IgnoreCause;
use std::time::Duration;
use tokio::sync::watch;

/// A signal that interrupts a run (the first one; a second ends the process at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: a CI job cancelled or out of time.
    Terminate,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }

    /// 128 + the signal's number, as a shell reports a process the signal ended: 130, 143.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Interrupt => 128 + libc::SIGINT,
            Self::Terminate => 128 + libc::SIGTERM,
        }
    }
}

/// Why a run was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Interrupted(Signal),
    /// The run's deadline (`--deadline`) passed.
    Deadline(Duration),
}

impl Cause {
    /// The cause an unfinished case is ignored with.
    pub fn ignore_cause(self) -> IgnoreCause {
        match self {
            Self::Interrupted(_) => IgnoreCause::Interrupted,
            Self::Deadline(_) => IgnoreCause::Deadline,
        }
    }

    /// `interrupted` or `deadline`, as the JSON report names it.
    pub fn as_str(self) -> &'static str {
        self.ignore_cause().as_str()
    }

    /// `interrupted by SIGINT`, `the run's deadline (--deadline 300 s) passed`.
    pub fn describe(self) -> String {
        match self {
            Self::Interrupted(signal) => format!("interrupted by {}", signal.name()),
            Self::Deadline(after) => format!("the run's deadline (--deadline {}) passed", seconds(after)),
        }
    }

    /// The reason of a case the cause left unfinished.
    pub fn unfinished(self) -> String {
        format!("not judged: the run was cut short before this case finished ({})", self.describe())
    }
}

/// `300 s`, `0.5 s`.
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// The run's cancellation: cloned to whoever must see it, fired once (later fires are ignored:
/// the first cause is the one reported).
#[derive(Clone, Debug)]
pub(crate) struct Cancel {
    sender: std::sync::Arc<watch::Sender<Option<Cause>>>,
}

impl Default for Cancel {
    fn default() -> Self {
        Self { sender: std::sync::Arc::new(watch::channel(None).0) }
    }
}

impl Cancel {
    /// Fires with `cause`, unless it has fired already.
    pub(crate) fn fire(&self, cause: Cause) {
        self.sender.send_if_modified(|now| now.is_none() && now.replace(cause).is_none());
    }

    /// The cause, once fired.
    pub(crate) fn cause(&self) -> Option<Cause> {
        *self.sender.borrow()
    }

    /// Resolves when fired (at once if it has), with the cause.
    pub(crate) async fn fired(&self) -> Cause {
        let mut receiver = self.sender.subscribe();
        let cause = receiver.wait_for(Option::is_some).await.map(|cause| *cause).ok().flatten();
        match cause {
            Some(cause) => cause,
            // The sender lives in `self`: never closed while this waits.
            None => std::future::pending().await,
        }
    }

    /// Fires with [`Cause::Deadline`] once `after` has passed (from now), unless dropped first.
    pub(crate) fn deadline(&self, after: Duration) -> tokio::task::JoinHandle<()> {
        let cancel = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            cancel.fire(Cause::Deadline(after));
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_cause_is_the_one_kept() {
        let cancel = Cancel::default();
        assert_eq!(cancel.cause(), None);
        let waiting = tokio::spawn({
            let cancel = cancel.clone();
            async move { cancel.fired().await }
        });
        cancel.fire(Cause::Interrupted(Signal::Terminate));
        cancel.fire(Cause::Deadline(Duration::from_secs(1)));
        assert_eq!(waiting.await.unwrap(), Cause::Interrupted(Signal::Terminate));
        assert_eq!(cancel.fired().await, Cause::Interrupted(Signal::Terminate));
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
    }

    #[tokio::test]
    async fn a_deadline_fires_once_past() {
        let cancel = Cancel::default();
        let _timer = cancel.deadline(Duration::from_millis(20));
        assert_eq!(cancel.fired().await, Cause::Deadline(Duration::from_millis(20)));
        assert!(Cause::Deadline(Duration::from_millis(500)).describe().contains("--deadline 0.5 s"));
    }
}
