//! The state of one conformance run: the target, its client, the driver, the webhook receiver,
//! and the shared fixtures that several cases read (built once, on first use).

use super::browser::{Probe, RunBrowser};
use super::catalogue::{Case, Need};
use super::config::RunConfig;
use super::driver::{DriveArgs, DriveError, Driver, DriverAction};
use super::http::{Api, Auth};
use super::outcome::Stop;
use super::pagination::{self, Walk};
use super::receiver::Receiver;
use super::redact::Redactor;
use super::tour::Tour;
use crate::sandbox::{Mutant, Sandbox, SandboxConfig, Variant};
use crate::spec::Action;
use reqwest::Method;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OnceCell};

/// Whether the receiver's address reached the target.
#[derive(Clone, Debug)]
pub enum Webhooks {
    Registered,
    /// No driver, or the driver cannot register (exit 3): event cases are ignored.
    Unavailable(String),
    /// The driver failed: event cases fail with this.
    Failed(String),
}

/// A connection this run created (§4.1).
#[derive(Clone, Debug)]
pub struct Created {
    pub connection_id: String,
    pub widget_token: Option<String>,
    pub body: Value,
}

/// The CONNECTED connection that read-only cases share, read once.
#[derive(Debug)]
pub struct Connected {
    pub connection_id: String,
    /// The accounts array as returned (§4.2).
    pub accounts: Vec<Value>,
    /// Per account id, the walk of its transactions with the target's default limit.
    pub walks: Vec<(String, Result<Walk, Stop>)>,
}

impl Connected {
    pub fn account_ids(&self) -> Vec<String> {
        self.accounts.iter().filter_map(|a| a.get("id").and_then(Value::as_str)).map(str::to_string).collect()
    }

    /// The reference walks, failing on the first that failed.
    pub fn walks(&self) -> Result<Vec<(&str, &Walk)>, Stop> {
        self.walks.iter().map(|(id, w)| w.as_ref().map(|w| (id.as_str(), w)).map_err(Clone::clone)).collect()
    }
}

pub struct RunContext {
    pub config: RunConfig,
    /// What the report names as the target (`embedded sandbox` or the base URL).
    pub target: String,
    pub api: Api,
    pub driver: Option<Driver>,
    pub receiver: Option<Receiver>,
    pub webhooks: Webhooks,
    pub service: Option<String>,
    pub redactor: Redactor,
    /// Seed of the property-based cases.
    pub seed: u64,
    fixture: OnceCell<Result<Arc<Connected>, Stop>>,
    tour: OnceCell<Arc<Tour>>,
    sandbox: Mutex<Option<Sandbox>>,
    /// The headless browser of the widget cases (§1), started on first use.
    pub browser: RunBrowser,
    /// What the browser saw running the widget script, probed once per run.
    pub widget_probe: OnceCell<Result<Probe, Stop>>,
}

impl RunContext {
    /// Prepares a run: starts the embedded sandbox when no base URL is given, the receiver
    /// when there is a driver, and registers the receiver. Errors mean the run cannot start.
    pub async fn setup(config: RunConfig) -> Result<Arc<Self>, String> {
        let redactor = Redactor::default();
        let sandbox_config = embedded_sandbox(&config)?;
        let (sandbox, base_url, key, second_key, service) = match &config.base_url {
            None => {
                let sandbox = Sandbox::start(sandbox_config).await.map_err(|e| format!("embedded sandbox: {e}"))?;
                let key = sandbox.clients.first().map(|c| c.api_key.clone());
                let second = sandbox.clients.get(1).map(|c| c.api_key.clone());
                let service = config.service.clone().or_else(|| Some(sandbox.service.clone()));
                let url = sandbox.base_url.clone();
                (Some(sandbox), url, key, second, service)
            }
            Some(url) => {
                if config.api_key.as_deref().unwrap_or("").is_empty() {
                    return Err("--api-key (BANKCONF_API_KEY) is required with --base-url".into());
                }
                (None, url.clone(), config.api_key.clone(), config.second_api_key.clone(), config.service.clone())
            }
        };
        for k in key.iter().chain(second_key.iter()) {
            redactor.add(k);
        }
        let api = Api::new(&base_url, key, second_key, config.request_wait()).map_err(|e| e.to_string())?;
        if sandbox.is_none() {
            api.reachable().await.map_err(|e| format!("target unreachable: {e}"))?;
        }
        let driver = match (&config.driver, &sandbox) {
            (Some(command), _) => Some(Driver::Command {
                command: command.clone(),
                base_url: api.base_url().to_string(),
                timeout: config.driver_wait(),
            }),
            (None, Some(sandbox)) => Some(Driver::InProcess(sandbox.control.clone())),
            (None, None) => None,
        };
        let (receiver, webhooks) = match &driver {
            None => (None, Webhooks::Unavailable("no driver (--driver) to register a webhook address".into())),
            Some(driver) => {
                let receiver = Receiver::start(config.webhook_listen, config.webhook_public_url.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                let args = DriveArgs { webhook_url: Some(receiver.url().to_string()), ..Default::default() };
                let webhooks = match driver.run(DriverAction::RegisterWebhook, &args).await {
                    Ok(()) => Webhooks::Registered,
                    Err(DriveError::Unsupported(m) | DriveError::Refused(m)) => Webhooks::Unavailable(m),
                    Err(DriveError::Failed(m)) => Webhooks::Failed(m),
                };
                (Some(receiver), webhooks)
            }
        };
        let target = match &sandbox {
            Some(_) => format!("embedded sandbox at {}", api.base_url()),
            None => api.base_url().to_string(),
        };
        let seed = config.seed.unwrap_or_else(rand::random);
        Ok(Arc::new(Self {
            config,
            target,
            api,
            driver,
            receiver,
            webhooks,
            service,
            redactor,
            seed,
            fixture: OnceCell::new(),
            tour: OnceCell::new(),
            sandbox: Mutex::new(sandbox),
            browser: RunBrowser::default(),
            widget_probe: OnceCell::new(),
        }))
    }

    /// Stops what the run started.
    pub async fn shutdown(&self) {
        self.browser.close().await;
        if let Some(sandbox) = self.sandbox.lock().await.take() {
            sandbox.stop().await;
        }
    }

    /// Why `case` cannot run with this configuration, if it cannot.
    pub fn missing(&self, case: &Case) -> Option<String> {
        case.needs.iter().find_map(|need| match need {
            Need::Driver if self.driver.is_none() => Some("needs a driver (--driver / BANKCONF_DRIVER)".to_string()),
            Need::Webhooks => match &self.webhooks {
                Webhooks::Unavailable(why) => Some(format!("needs webhook deliveries: {why}")),
                _ => None,
            },
            Need::Connection if self.driver.is_none() && self.config.connection_id.is_none() => {
                Some("needs a CONNECTED connection: give --driver or --connection-id".to_string())
            }
            Need::SecondKey if !self.api.has_second_key() => {
                Some("needs a second client's key (--second-api-key / BANKCONF_SECOND_API_KEY)".to_string())
            }
            Need::Service if self.service.is_none() => {
                Some("needs the service name (--service / BANKCONF_SERVICE)".to_string())
            }
            _ => None,
        })
    }

    /// The receiver, or why event cases cannot judge.
    pub fn receiver(&self) -> Result<&Receiver, Stop> {
        match (&self.webhooks, &self.receiver) {
            (Webhooks::Registered, Some(r)) => Ok(r),
            (Webhooks::Failed(m), _) => Err(Stop::fail(format!("registering the webhook receiver failed: {m}"))),
            (Webhooks::Unavailable(m), _) => Err(Stop::ignore(m.clone())),
            (Webhooks::Registered, None) => Err(Stop::ignore("no webhook receiver")),
        }
    }

    /// `POST /v1/connections` with the primary key (§4.1); the widget token is redacted from
    /// then on.
    pub async fn create_connection(&self) -> Result<Created, Stop> {
        let exchange = self.api.send(Method::POST, &["v1", "connections"], &[], Auth::Primary).await?;
        let body = exchange.success_json()?;
        let widget_token = body.get("widgetToken").and_then(Value::as_str).map(str::to_string);
        match body.get("widgetToken") {
            Some(Value::String(t)) => self.redactor.add(t),
            // Not a string, but still a secret wherever it is quoted.
            Some(other) if !other.is_null() => self.redactor.add(&other.to_string()),
            _ => {}
        }
        let connection_id = body
            .get("connectionId")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Stop::fail(format!("{}: no connectionId string in {}", exchange.request, exchange.snippet()))
            })?
            .to_string();
        Ok(Created { connection_id, widget_token, body })
    }

    /// Asks the driver for `action` on `created`. A target that cannot (exit 3) or will not
    /// (exit 4) do it makes the case ignored; a failing driver fails it.
    pub async fn drive(
        &self,
        action: Action,
        created: &Created,
        account_id: Option<&str>,
        transaction_id: Option<&str>,
    ) -> Result<(), Stop> {
        let driver = self.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver (--driver / BANKCONF_DRIVER)"))?;
        let args = DriveArgs {
            connection_id: Some(created.connection_id.clone()),
            widget_token: created.widget_token.clone(),
            account_id: account_id.map(str::to_string),
            transaction_id: transaction_id.map(str::to_string),
            webhook_url: self.receiver.as_ref().map(|r| r.url().to_string()),
        };
        driver.run(DriverAction::Act(action), &args).await.map_err(|e| match e {
            DriveError::Unsupported(m) | DriveError::Refused(m) => Stop::ignore(m),
            DriveError::Failed(m) => Stop::fail(m),
        })
    }

    /// Creates a connection and drives it to CONNECTED; returns once its accounts are readable.
    pub async fn connect_new(&self) -> Result<Created, Stop> {
        let created = self.create_connection().await?;
        self.drive(Action::Connect, &created, None, None).await?;
        if let Ok(receiver) = self.receiver() {
            receiver.wait_for_type(&created.connection_id, "connection.connected", self.config.event_wait()).await;
        }
        self.accounts_when_ready(&created.connection_id).await?;
        Ok(created)
    }

    /// Reads the accounts of a connection, retrying (bounded) while they are refused: a
    /// target may finish connecting after the driver returns.
    pub async fn accounts_when_ready(&self, connection_id: &str) -> Result<Vec<Value>, Stop> {
        let deadline = Instant::now() + self.config.event_wait();
        let mut pause = Duration::from_millis(10);
        loop {
            let exchange = self.api.get(&["v1", "connections", connection_id, "accounts"], &[]).await?;
            if exchange.is_success() || Instant::now() >= deadline {
                let body = exchange.success_json()?;
                return match body {
                    Value::Array(items) => Ok(items),
                    _ => Err(Stop::fail(format!(
                        "{}: expected a JSON array, got {}",
                        exchange.request,
                        exchange.snippet()
                    ))),
                };
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// The shared CONNECTED connection (given with `--connection-id`, or made with the driver),
    /// its accounts, and a reference walk of each account's transactions.
    pub async fn connected(&self) -> Result<Arc<Connected>, Stop> {
        self.fixture
            .get_or_init(|| async {
                let connection_id = match &self.config.connection_id {
                    Some(id) => id.clone(),
                    None if self.driver.is_some() => self.connect_new().await?.connection_id,
                    None => return Err(Stop::ignore("needs a CONNECTED connection: give --driver or --connection-id")),
                };
                let accounts = self.accounts_when_ready(&connection_id).await?;
                let mut walks = Vec::new();
                for account in &accounts {
                    if let Some(id) = account.get("id").and_then(Value::as_str) {
                        walks.push((id.to_string(), pagination::walk(&self.api, id, None, None).await));
                    }
                }
                Ok(Arc::new(Connected { connection_id, accounts, walks }))
            })
            .await
            .clone()
    }

    /// The shared tour of driven lifecycles that the event and reaction cases judge.
    pub async fn tour(&self) -> Result<Arc<Tour>, Stop> {
        self.receiver()?;
        Ok(self.tour.get_or_init(|| async { Arc::new(Tour::run(self).await) }).await.clone())
    }

    /// A seed-derived value for the properties of one case, so that each case's inputs are
    /// replayable on their own with `--seed`.
    pub fn case_seed(&self, case_id: &str) -> u64 {
        case_id.bytes().fold(self.seed ^ 0x9e37_79b9_7f4a_7c15, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    }

    /// An id with the prefix `kind` (`conn_`, `acc_`, …) that no target issued, for probes.
    pub fn unknown_id(&self, kind: &str) -> String {
        format!("{kind}BANKCONFUNKNOWN0000000000000")
    }
}

/// The embedded sandbox's configuration: conforming, or the mutant or variant asked for.
fn embedded_sandbox(config: &RunConfig) -> Result<SandboxConfig, String> {
    let (mutant, variant) = (config.sandbox_mutant.as_deref(), config.sandbox_variant.as_deref());
    if config.base_url.is_some() && (mutant.is_some() || variant.is_some()) {
        return Err("--sandbox-mutant and --sandbox-variant apply to the embedded sandbox, not to --base-url".into());
    }
    let mutant = mutant
        .map(|n| {
            Mutant::from_name(n).ok_or_else(|| format!("unknown mutant {n:?} (see `bankconf serve --list-mutants`)"))
        })
        .transpose()?;
    let variant = variant
        .map(|n| {
            Variant::from_name(n).ok_or_else(|| format!("unknown variant {n:?} (see `bankconf serve --list-variants`)"))
        })
        .transpose()?;
    Ok(SandboxConfig { mutant, variant, ..SandboxConfig::default() })
}
