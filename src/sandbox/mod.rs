//! The embedded reference sandbox: a conforming in-memory implementation of the whole spec.
//! STUB: the sandbox helper replaces the body; the public API below is the contract.

use crate::spec::Action;
use std::net::SocketAddr;

/// How to start a sandbox.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Address to listen on; `127.0.0.1:0` picks a free port.
    pub listen: SocketAddr,
    /// One client per key. Empty: the sandbox makes two keys itself.
    pub api_keys: Vec<String>,
    /// `<service>` in `/widget/<service>-connect.js`.
    pub service: String,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self { listen: SocketAddr::from(([127, 0, 0, 1], 0)), api_keys: Vec::new(), service: "bankconf".to_string() }
    }
}

/// A client of the sandbox: its API key and the `cli_` id its events carry.
#[derive(Clone, Debug)]
pub struct SandboxClient {
    pub api_key: String,
    pub client_id: String,
}

/// What an action may apply to (`accountId`, `transactionId` of the control route's body).
#[derive(Clone, Debug, Default)]
pub struct ActionTarget {
    pub account_id: Option<String>,
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

/// In-process control of a running sandbox: the same operations as the `/sandbox` routes.
#[derive(Clone)]
pub struct Control {}

impl Control {
    /// Registers a webhook delivery address (like `POST /sandbox/webhooks`).
    pub async fn register_webhook(&self, url: &str) {
        let _ = url;
    }

    /// Applies an action (like `POST /sandbox/connections/{id}/{action}`).
    pub async fn apply(&self, connection_id: &str, action: Action, target: ActionTarget) -> Result<(), ControlError> {
        let _ = (connection_id, action, target);
        Ok(())
    }
}

/// A running sandbox. Dropping it does not stop it; call [`Sandbox::stop`].
pub struct Sandbox {
    /// e.g. `http://127.0.0.1:41234` (no trailing slash).
    pub base_url: String,
    pub local_addr: SocketAddr,
    pub clients: Vec<SandboxClient>,
    pub service: String,
    pub control: Control,
}

impl Sandbox {
    pub async fn start(config: SandboxConfig) -> anyhow::Result<Sandbox> {
        let _ = config;
        anyhow::bail!("sandbox not implemented yet")
    }

    /// Serves until the process ends (used by `bankconf serve`).
    pub async fn wait(self) {}

    pub async fn stop(self) {}
}
