//! The sandbox driver: the embedded sandbox moved through its control handle, in process.

use super::{Answer, DriveArgs, DriveFuture, Driver, DriverAction, Keys};
use crate::harness::embedded::{ActionArgs, Control, ControlError};

/// The embedded sandbox, driven through its control handle (the same code as its `/sandbox`
/// routes), with the keys of the run's clients (each address is registered for its client).
pub(crate) struct SandboxDriver {
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
                    let Some(second) = second.filter(|_| !control.one_webhook_address()) else {
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

    /// An address per client, unless the sandbox keeps one for all (then one is registered).
    fn per_client_addresses(&self) -> Option<bool> {
        Some(!self.control.one_webhook_address())
    }
}
