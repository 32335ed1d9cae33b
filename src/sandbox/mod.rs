//! The embedded reference sandbox: a conforming in-memory implementation of the whole spec,
//! served with axum. It is the harness's default target and a local sandbox to build clients
//! against.
//!
//! Modules (private: what a user of the sandbox needs is re-exported here):
//! - `api`: the `/v1` endpoints of §4 behind bearer keys (§5), the widget script route (§1),
//!   and the sandbox's error answers (§7 leaves them open);
//! - `control`: the `/sandbox/...` control routes (webhook registration, lifecycle actions);
//! - `faults`, `flavor`: the mutants and variants, by seam, and the choice every hook sees;
//!   `edit_apply` and `header_apply` apply the faults of an answer's body and of its headers;
//! - `transitions`: the transition table of the sandbox (§3.2 leaves it open);
//! - `model`: the in-memory records, identifiers (§2) and the transaction list order (§4.3);
//! - `render`: every JSON body (account, page, event, error) built in one place;
//! - `seed`: deterministic realistic account data per connection;
//! - `store`: the state behind one mutex and every state change;
//! - `webhooks`: the background delivery queue (§6);
//! - `widget`: the widget script (§1).
//!
//! Without configured keys, two clients are made with keys `bankconf_test_<24 random
//! lower-case alphanumerics>` (a service-specific prefix, an underscore, more characters: §5.2).

mod aliases;
mod api;
mod conditions;
mod control;
mod edit_apply;
mod faults;
mod flavor;
mod header_apply;
mod model;
mod perturb;
mod perturb_apply;
mod render;
mod seed;
mod shared;
mod shown;
mod stamps;
mod store;
mod transitions;
mod webhooks;
mod widget;

pub use conditions::Conditions;
pub use faults::{Mutant, Variant};
use flavor::Flavor;
pub use model::{DEFAULT_LIMIT, MAX_LIMIT};
/// The generated perturbations (issue 49): the harness's own test machinery, no part of the
/// library (`bankconf::internal::generated` judges them).
#[doc(hidden)]
pub use perturb::{generated, Family, Generated, NotApplicable, Perturbation, Site};
use shared::Shared;
pub use store::ActionOutcome;
pub use transitions::{ActionArgs, ControlError};

use crate::spec::{prefix, Action};
use axum::Router;
use rand::Rng;
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
/// How to start a sandbox.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Address to listen on; `127.0.0.1:0` picks a free port.
    pub listen: SocketAddr,
    /// One client per key. Empty: the sandbox makes two keys itself.
    pub api_keys: Vec<String>,
    /// `<service>` in `/widget/<service>-connect.js`.
    pub service: String,
    /// One deliberate spec violation (`bankconf serve --mutant`); `None` conforms.
    pub mutant: Option<Mutant>,
    /// A conforming reading of the spec's freedoms other than the sandbox's own.
    pub variant: Option<Variant>,
    /// Generated perturbations by name (`bankconf serve --list-mutants` lists them).
    pub perturbations: Vec<String>,
    /// Latency, late deliveries and a rate limit, as real deployments have them.
    pub conditions: Conditions,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_keys: Vec::new(),
            service: "bankconf".to_string(),
            mutant: None,
            variant: None,
            perturbations: Vec::new(),
            conditions: Conditions::default(),
        }
    }
}

/// A client of the sandbox: its API key and the `cli_` id its events carry.
#[derive(Clone, Debug)]
pub struct SandboxClient {
    /// Its bearer key (§5).
    pub api_key: String,
    /// Its `cli_` id.
    pub client_id: String,
}

/// In-process control of a running sandbox: the same operations as the `/sandbox` routes
/// (docs/sandbox.md), through the same code.
#[derive(Clone)]
pub struct Control {
    shared: Arc<Shared>,
}

impl Control {
    /// Registers a webhook delivery address for every client's events (like `POST
    /// /sandbox/webhooks` without a key). Registering the same address twice has no further
    /// effect.
    pub async fn register_webhook(&self, url: &str) {
        let _ = self.shared.register_webhook(url, None);
    }

    /// Registers `url` for the events of the client whose API key is `key` only (like `POST
    /// /sandbox/webhooks` with `Authorization: Bearer <key>`); `None`: every client's. An unknown
    /// key is refused.
    pub async fn register_client_webhook(&self, url: &str, key: Option<&str>) -> Result<(), ControlError> {
        self.shared.register_webhook(url, key).map(drop)
    }

    /// Whether the sandbox keeps one webhook address for every client
    /// ([`Variant::SharedWebhookAddress`]): a driver then registers one and says so.
    pub fn one_webhook_address(&self) -> bool {
        self.shared.flavor.has(Variant::SharedWebhookAddress)
    }

    /// Removes a webhook delivery address (like `DELETE /sandbox/webhooks`).
    pub async fn unregister_webhook(&self, url: &str) {
        self.shared.unregister_webhook(url);
    }

    /// Applies an action (like `POST /sandbox/connections/{id}/{action}`); see
    /// `lifecycle` for what is possible from which state.
    pub async fn apply(&self, connection_id: &str, action: Action, target: ActionArgs) -> Result<(), ControlError> {
        self.apply_outcome(connection_id, action, target).await.map(drop)
    }

    /// [`Control::apply`], returning what was done (the control route's answer).
    pub async fn apply_outcome(
        &self,
        connection_id: &str,
        action: Action,
        target: ActionArgs,
    ) -> Result<ActionOutcome, ControlError> {
        self.shared.apply(connection_id, action, &target)
    }

    /// Every event emitted so far (rendered §6.1 envelopes), in emission order.
    pub fn events(&self) -> Vec<Value> {
        self.shared.lock().events()
    }

    /// The registered webhook addresses, sorted.
    pub fn webhook_urls(&self) -> Vec<String> {
        self.shared.lock().outbox().urls()
    }
}

/// Why a sandbox could not start: its socket could not listen (the address is taken, or not
/// this machine's; the I/O error is its [`source`](std::error::Error::source)), or a
/// perturbation it was asked for is not one of its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("the sandbox cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("unknown perturbation {0:?} (bankconf serve --list-mutants)")]
    UnknownPerturbation(String),
}

impl StartError {
    /// The address it could not listen on, when that was the cause.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Self::Listen { addr, .. } => Some(*addr),
            Self::UnknownPerturbation(_) => None,
        }
    }
}

/// A running sandbox. Dropping it does not stop it; call [`Sandbox::stop`].
pub struct Sandbox {
    /// e.g. `http://127.0.0.1:41234` (no trailing slash).
    pub base_url: String,
    /// The address it listens on.
    pub local_addr: SocketAddr,
    /// Its clients, one per configured key (or the two it made).
    pub clients: Vec<SandboxClient>,
    /// `<service>` in `/widget/<service>-connect.js`.
    pub service: String,
    /// In-process control of its connections and webhooks.
    pub control: Control,
    shutdown: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
    delivery: JoinHandle<()>,
}

/// A listening socket on `addr` with an accept queue of `backlog` (a small one imitates a weak
/// server, see [`Conditions`]).
fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// A generated API key: `bankconf_test_` and 24 random lower-case alphanumerics (§5.2).
fn generate_key() -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let tail: String = (0..24).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect();
    format!("bankconf_test_{tail}")
}

impl Sandbox {
    /// Starts a sandbox: it serves until [`Sandbox::stop`], on a task of the current runtime.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), bankconf::sandbox::StartError> {
    /// use bankconf::sandbox::{Sandbox, SandboxConfig};
    /// let sandbox = Sandbox::start(SandboxConfig::default()).await?;
    /// println!("{} with key {}", sandbox.base_url, sandbox.clients[0].api_key);
    /// sandbox.stop().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start(config: SandboxConfig) -> Result<Sandbox, StartError> {
        let perturb = perturb_apply::activate(&config.perturbations)?;
        let flavor = Flavor { mutant: config.mutant, variant: config.variant, perturb };
        let keys =
            if config.api_keys.is_empty() { vec![generate_key(), generate_key()] } else { config.api_keys.clone() };
        let mut clients: Vec<SandboxClient> = Vec::new();
        for key in keys {
            if !clients.iter().any(|c| c.api_key == key) {
                clients.push(SandboxClient { api_key: key, client_id: flavor.new_id(prefix::CLIENT) });
            }
        }
        let by_key: HashMap<String, String> =
            clients.iter().map(|c| (c.api_key.clone(), c.client_id.clone())).collect();
        let first_client = clients.first().map(|c| c.client_id.clone());

        let cannot_listen = |source| StartError::Listen { addr: config.listen, source };
        let listener = listen(config.listen, config.conditions.listen_backlog()).map_err(cannot_listen)?;
        let local_addr = listener.local_addr().map_err(cannot_listen)?;
        let (outbox, delivery) = webhooks::start(flavor, config.conditions);
        let store = Store::new(by_key, first_client, outbox, flavor);
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            service: config.service.clone(),
            flavor,
            edit_memory: Mutex::default(),
        });
        Shared::start_syncs(&shared);
        let mut router = Router::new()
            .merge(api::routes(shared.clone()).layer(axum::middleware::from_fn_with_state(
                conditions::Gate::new(config.conditions),
                conditions::api_gate,
            )))
            .merge(control::routes())
            .fallback(api::fallback)
            .method_not_allowed_fallback(api::method_not_allowed)
            .with_state(shared.clone());
        if flavor.seam(&faults::answers::EDITS).is_some() {
            router = router.layer(axum::middleware::from_fn_with_state(shared.clone(), edit_apply::answers));
        }
        if config.conditions.connection_close {
            router = router.layer(axum::middleware::from_fn(conditions::close_connections));
        }

        // Ids are translated before routing, so that the routes see the store's own
        // ([`Variant::PerClientIds`]; other flavors pass through): a layer on an outer router
        // runs before the inner one routes.
        let app = Router::new()
            .fallback_service(router)
            .layer(axum::middleware::from_fn_with_state(shared.clone(), api::translate_ids))
            .layer(axum::middleware::from_fn_with_state(shared.clone(), perturb_apply::answers));
        let (shutdown, stop) = oneshot::channel::<()>();
        // A dropped `Sandbox` keeps serving (see the type's doc).
        let stopped = async move {
            if stop.await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let idle = Duration::from_millis(config.conditions.idle_close_ms);
        let server = tokio::spawn(async move {
            if idle.is_zero() {
                axum::serve(listener, app).with_graceful_shutdown(stopped).await
            } else {
                let listener = conditions::IdleCloseListener { listener, idle };
                axum::serve(listener, app).with_graceful_shutdown(stopped).await
            }
        });

        let mut url_addr = local_addr;
        if url_addr.ip().is_unspecified() {
            url_addr.set_ip(if url_addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        Ok(Sandbox {
            base_url: format!("http://{url_addr}"),
            local_addr,
            clients,
            service: config.service,
            control: Control { shared },
            shutdown,
            server,
            delivery,
        })
    }

    /// Serves until the process ends (used by `bankconf serve`).
    pub async fn wait(self) {
        let Sandbox { shutdown, server, .. } = self;
        let _ = server.await;
        drop(shutdown);
    }

    /// Stops accepting connections, lets requests in flight finish (at most 5 s), and stops
    /// webhook delivery (events still queued are dropped).
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_secs(5), &mut server).await.is_err() {
            server.abort();
        }
        self.delivery.abort();
    }
}
