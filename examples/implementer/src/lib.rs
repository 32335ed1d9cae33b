//! A team's server crate, in miniature. In your repository, [`start`] starts your own router on
//! 127.0.0.1:0 and [`StateDriver`] moves your own state; here both stand in with bankconf's
//! reference sandbox, so that the example runs as it is.

use bankconf::sandbox::{ActionArgs, Control, ControlError, Mutant, Sandbox, SandboxConfig};
use bankconf::Action;
use bankconf::{Answer, DriveFuture, Driver};

/// The server under test, started in this process (`mutant`: one with a deliberate bug).
pub async fn start(mutant: Option<Mutant>) -> Sandbox {
    Sandbox::start(SandboxConfig { mutant, ..SandboxConfig::default() }).await.expect("the server starts")
}

/// The driver: it moves the server's state directly, with no process and no admin route.
pub struct StateDriver {
    pub control: Control,
    /// The API keys of the two clients the run uses: each client's events go to its own address.
    pub keys: [String; 2],
}

impl StateDriver {
    /// The driver of `server`, for its first two clients.
    pub fn of(server: &Sandbox) -> Self {
        let key = |i: usize| server.clients[i].api_key.clone();
        Self { control: server.control.clone(), keys: [key(0), key(1)] }
    }
}

impl StateDriver {
    fn apply<'a>(&'a self, id: &'a str, action: Action, account: Option<&str>, txn: Option<&str>) -> DriveFuture<'a> {
        let target = ActionArgs { account_id: account.map(Into::into), transaction_id: txn.map(Into::into) };
        Box::pin(async move {
            match self.control.apply(id, action, target).await {
                Ok(()) => Answer::Done,
                Err(ControlError::NotPossible(why)) => Answer::Refused(why),
                Err(ControlError::NotFound(what)) => Answer::Error(format!("not found: {what}")),
            }
        })
    }
}

impl Driver for StateDriver {
    fn register_webhook<'a>(&'a self, url: &'a str, second: Option<&'a str>) -> DriveFuture<'a> {
        Box::pin(async move {
            // Each client's events to its own address; one address takes every client's.
            let Some(second) = second else {
                self.control.register_webhook(url).await;
                return Answer::Done;
            };
            for (url, key) in [(url, &self.keys[0]), (second, &self.keys[1])] {
                if let Err(e) = self.control.register_client_webhook(url, Some(key)).await {
                    return Answer::Error(e.to_string());
                }
            }
            Answer::Done
        })
    }

    /// Each address is registered for its own client: an event of one client at the other's
    /// address is a leak (`isolation.deliveries`).
    fn per_client_addresses(&self) -> Option<bool> {
        Some(true)
    }

    fn unregister_webhook<'a>(&'a self, url: &'a str, second: Option<&'a str>) -> DriveFuture<'a> {
        Box::pin(async move {
            for url in std::iter::once(url).chain(second) {
                self.control.unregister_webhook(url).await;
            }
            Answer::Done
        })
    }

    fn connect<'a>(&'a self, id: &'a str, _widget_token: Option<&'a str>) -> DriveFuture<'a> {
        self.apply(id, Action::Connect, None, None)
    }

    fn fail_auth<'a>(&'a self, id: &'a str) -> DriveFuture<'a> {
        self.apply(id, Action::FailAuth, None, None)
    }

    fn require_mfa<'a>(&'a self, id: &'a str) -> DriveFuture<'a> {
        self.apply(id, Action::RequireMfa, None, None)
    }

    fn error<'a>(&'a self, id: &'a str) -> DriveFuture<'a> {
        self.apply(id, Action::Error, None, None)
    }

    fn disconnect<'a>(&'a self, id: &'a str) -> DriveFuture<'a> {
        self.apply(id, Action::Disconnect, None, None)
    }

    fn update_accounts<'a>(&'a self, id: &'a str, account: Option<&'a str>) -> DriveFuture<'a> {
        self.apply(id, Action::UpdateAccounts, account, None)
    }

    fn delete_transaction<'a>(
        &'a self,
        id: &'a str,
        account: Option<&'a str>,
        txn: Option<&'a str>,
    ) -> DriveFuture<'a> {
        self.apply(id, Action::DeleteTransaction, account, txn)
    }
}
