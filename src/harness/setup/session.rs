//! One conformance run's access to the server under test: setup (the HTTP client, the driver,
//! the webhook receiver, the embedded sandbox when no base URL is given), the prerequisites a
//! case needs, and the run's seeds. The steps built on it are in [`crate::harness::setup::steps`], the shared
//! fixtures in [`crate::harness::fixtures::context`].

use crate::harness::embedded::{Sandbox, SandboxConfig};
use crate::harness::setup::plan::{DriverPlan, RunPlan, Target};
use crate::harness::transport::browser::RunBrowser;
use crate::harness::transport::driver::{
    CommandDriver, DriveArgs, DriveError, Driver, DriverAction, HttpDriver, Keys, SandboxDriver, NEEDS_DRIVER,
};
use crate::harness::transport::har::Recorder;
use crate::harness::transport::http::Api;
use crate::harness::transport::reach::Transport;
use crate::harness::transport::receiver::Receiver;
use crate::harness::vocab::catalogue::{Case, Need};
use crate::harness::vocab::errors::{SetupError, WidgetNotServed};
use crate::harness::vocab::note::Note;
use crate::harness::vocab::outcome::{ErrorSource, Stop};
use crate::harness::vocab::redact::Redactor;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Whether the receiver's address reached the target.
#[derive(Clone, Debug)]
pub(crate) enum Webhooks {
    Registered,
    /// No driver, or the driver cannot register (exit 3): event cases are ignored.
    Unavailable(String),
    /// The driver failed (the preflight stops the run with this).
    Failed(String),
}

/// The connections the preflight created, whose first deliveries show that webhooks reach the
/// receiver at all (`preflight::listen`, awaited beside the cases rather than before them).
pub(crate) struct FirstDeliveries {
    pub connection_id: String,
    /// The second client's connection, whose `clientId` should differ.
    pub second: Option<String>,
    /// When the preflight created them.
    pub since: std::time::Instant,
}

/// Reads of one account that a case already found stale: the account's `accounts.updated` came
/// before its data (§6, §6.3), and reads sent from `from` (the event's arrival) to `until` (the
/// answer that first showed the change) could show the data of before. The state rules set such
/// reads aside (`checks::state::set_aside`): whether another case's read fell in such a window is
/// the machine's timing, and the fault is the finding's, judged the same way every run.
#[derive(Clone, Debug)]
pub(crate) struct StaleReads {
    pub account: String,
    pub from: std::time::Instant,
    pub until: std::time::Instant,
    /// The case whose finding it is.
    pub case: &'static str,
}

/// One run's access to the server under test.
pub(crate) struct Session {
    /// The run's checked settings (never the flags themselves).
    pub plan: RunPlan,
    /// What the report names as the server under test (`embedded sandbox at …` or the base URL).
    pub server: String,
    pub api: Api,
    /// What moves connections through states: `--driver`, `--driver-url`, one given in code,
    /// or the embedded sandbox's control handle.
    pub driver: Option<Arc<dyn Driver>>,
    pub receiver: Option<Receiver>,
    pub webhooks: Webhooks,
    pub service: Option<String>,
    pub redactor: Redactor,
    /// Seed of the property-based cases: `--seed`, else [`default_seed`].
    pub seed: u64,
    /// The headless browser of the widget cases (§1), started on first use.
    pub browser: RunBrowser,
    sandbox: Mutex<Option<Sandbox>>,
    /// Whether the receiver was unregistered (see [`Session::unregister_webhook`]).
    unregistered: std::sync::atomic::AtomicBool,
    /// The connection the preflight created and had the driver connect: the shared CONNECTED
    /// connection of the read-only cases (`RunContext::connected`), when there is one.
    pub connected_early: Option<String>,
    /// The connection the preflight created with the second client's key, never driven: the
    /// second client's CONNECTED connection once connected (`RunContext::connected_second`),
    /// not made a second time (issue 72).
    /// Its id and widget token.
    pub second_early: Option<(String, Option<String>)>,
    /// What the preflight left for `preflight::listen` to await, when webhooks are registered.
    pub first_deliveries: Option<FirstDeliveries>,
    /// Why the widget script is not served, when the preflight found it missing: the widget
    /// cases end in this one diagnosis, and every other case is judged.
    pub widget_missing: Option<WidgetNotServed>,
    /// What the report's notes say of the run's own bounds, by topic (see [`Session::note`]).
    notes: std::sync::Mutex<BTreeMap<&'static str, BTreeSet<String>>>,
    /// See [`StaleReads`].
    stale: std::sync::Mutex<Vec<StaleReads>>,
}

impl Session {
    /// Prepares a run from its checked plan ([`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate)):
    /// starts the embedded sandbox when the plan has no base URL, the receiver when there is a
    /// driver, and registers the receiver. Errors mean the run cannot start.
    pub(crate) async fn setup(plan: RunPlan) -> Result<Self, SetupError> {
        let redactor = Redactor::default();
        let Reached { sandbox, base_url, key, second_key, service } = Reached::of(&plan).await?;
        for k in key.iter().chain(second_key.iter()) {
            redactor.add(k);
        }
        // `--header` values are secrets like keys (a gateway's token).
        for value in plan.headers.values() {
            redactor.add(value);
        }
        let transport = Transport::load(plan.ca_cert.as_deref(), plan.insecure, &plan.headers)?;
        let api = Api::with_transport(base_url, key.clone(), second_key.clone(), plan.waits.request, &transport)?
            .with_throttle(std::sync::Arc::new(
                crate::harness::transport::throttle::Throttle::new(plan.rate_limit).with_ceiling(plan.concurrency),
            ))
            .with_recorder(std::sync::Arc::new(
                Recorder::new(plan.har.is_some(), redactor.clone()).sending(plan.headers.names()),
            ));
        if sandbox.is_none() {
            api.reachable().await?;
        }
        let keys = Keys { api_key: key, second_api_key: second_key };
        let driver = driver_of(&plan, sandbox.as_ref(), &api, keys, &transport)?;
        let (receiver, webhooks) = register(&plan, driver.as_ref(), &api).await?;
        let server = match &sandbox {
            Some(_) => format!("embedded sandbox at {}", api.base_url()),
            None => api.base_url().to_string(),
        };
        let seed = plan.seed.unwrap_or_else(|| default_seed(service.as_deref()));
        let browser_pool = plan.browser_pool.clone();
        // Chromium takes no CA file: with --ca-cert or --insecure it skips verification, the
        // target's certificate having been verified (or not, with --insecure) by the API client.
        let browser = RunBrowser::new(browser_pool)
            .ignoring_certificate_errors(plan.insecure || plan.ca_cert.is_some())
            .sending(crate::harness::transport::browser::PageHeaders::of(api.base(), &plan.headers));
        let session = Self {
            plan,
            server,
            api,
            driver,
            receiver,
            webhooks,
            service,
            redactor,
            seed,
            browser,
            sandbox: Mutex::new(sandbox),
            unregistered: Default::default(),
            notes: Default::default(),
            stale: Default::default(),
            connected_early: None,
            second_early: None,
            first_deliveries: None,
            widget_missing: None,
        };
        if let Some(note) = crate::harness::transport::reach::header_variables_note(&session.plan.headers.names()) {
            session.note("gateway", note);
        }
        Ok(session)
    }

    /// Asks the driver to unregister the receiver, once (later calls do nothing): a finished
    /// run's receiver is gone, and the target should stop delivering and retrying there. A
    /// driver that cannot (exit 3) is fine; another failure is a note for the report.
    pub(crate) async fn unregister_webhook(&self) -> Option<String> {
        if !matches!(self.webhooks, Webhooks::Registered)
            || self.unregistered.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        let (driver, receiver) = (self.driver.as_ref()?, self.receiver.as_ref()?);
        let args = webhook_args(receiver, self.api.has_second_key());
        let call = driver.run(DriverAction::UnregisterWebhook, &args);
        match self.api.recorder().driven(DriverAction::UnregisterWebhook, &args, call).await {
            Ok(()) | Err(DriveError::Unsupported(_)) => None,
            Err(DriveError::Refused(m) | DriveError::Failed(m)) => {
                Some(format!("the driver could not unregister the webhook receiver: {}", self.redactor.redact(&m)))
            }
        }
    }

    /// Adds `item` to the report's note on `topic` (one note per topic, each item once): what
    /// the harness left unjudged by its own bounds is said, never silent.
    pub(crate) fn note(&self, topic: &'static str, item: String) {
        self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(topic).or_default().insert(item);
    }

    /// Records a window of reads a case found stale (see [`StaleReads`]).
    pub(crate) fn found_stale(&self, window: StaleReads) {
        self.stale.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(window);
    }

    /// The windows of [`Session::found_stale`].
    pub(crate) fn stale_reads(&self) -> Vec<StaleReads> {
        self.stale.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The notes of [`Session::note`], one line per topic, after the TLS note of a run that
    /// did not check the target's identity (`--insecure`).
    pub(crate) fn notes(&self) -> Vec<Note> {
        let notes = self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Notes quote requests and target text: redacted like every message.
        let topics = notes.iter().map(|(topic, items)| {
            Note::Said(
                self.redactor.redact(&format!("{topic}: {}", items.iter().cloned().collect::<Vec<_>>().join("; "))),
            )
        });
        self.plan.insecure.then_some(Note::Unverified).into_iter().chain(topics).collect()
    }

    /// Stops what the run started; no process a driver started outlives it.
    pub(crate) async fn shutdown(&self) {
        self.unregister_webhook().await;
        if let Some(driver) = &self.driver {
            driver.stop().await;
        }
        self.browser.close().await;
        if let Some(sandbox) = self.sandbox.lock().await.take() {
            sandbox.stop().await;
        }
    }

    /// Why `case` cannot run with this configuration, if it cannot.
    pub(crate) fn missing(&self, case: &Case) -> Option<String> {
        case.needs.iter().find_map(|need| match need {
            Need::Driver if self.driver.is_none() => Some(NEEDS_DRIVER.to_string()),
            Need::Webhooks => match &self.webhooks {
                Webhooks::Unavailable(why) => Some(format!("needs webhook deliveries: {why}")),
                _ => None,
            },
            Need::Connection if self.driver.is_none() && self.plan.connection_id.is_none() => {
                Some("needs a CONNECTED connection: give --driver or --connection-id".to_string())
            }
            Need::SecondKey if !self.api.has_second_key() => {
                Some("needs a second client's key (--second-api-key / BANKCONF_SECOND_API_KEY)".to_string())
            }
            Need::Browser if self.plan.skip_browser => Some(crate::harness::transport::browser::SKIPPED.to_string()),
            Need::Browser if crate::harness::transport::browser::find(self.plan.browser.as_deref()).is_none() => {
                Some(crate::harness::transport::browser::INSTALL_HINT.to_string())
            }
            Need::Service if self.service.is_none() => {
                Some("needs the service name (--service / BANKCONF_SERVICE)".to_string())
            }
            _ => None,
        })
    }

    /// The receiver, or why event cases cannot judge.
    pub(crate) fn receiver(&self) -> Result<&Receiver, Stop> {
        match (&self.webhooks, &self.receiver) {
            (Webhooks::Registered, Some(r)) => Ok(r),
            (Webhooks::Failed(m), _) => {
                Err(Stop::Error(ErrorSource::Receiver, format!("registering the webhook receiver failed: {m}")))
            }
            (Webhooks::Unavailable(m), _) => Err(Stop::ignore(m.clone())),
            (Webhooks::Registered, None) => Err(Stop::ignore("no webhook receiver")),
        }
    }

    /// A seed-derived value for the properties of one case, so that each case's inputs are
    /// replayable on their own with `--seed`.
    pub(crate) fn case_seed(&self, case_id: &str) -> u64 {
        case_id.bytes().fold(self.seed ^ 0x9e37_79b9_7f4a_7c15, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    }

    /// An id with the prefix `kind` (`conn_`, `acc_`, …) that no target issued, for probes.
    pub(crate) fn unknown_id(&self, kind: &str) -> String {
        format!("{kind}BANKCONFUNKNOWN0000000000000")
    }
}

/// The seed of a run without `--seed`: fixed by the catalogue (its case ids) and the service
/// name, so that the same target gets the same random inputs, the same verdict and the same
/// `--write-expectations` file in every run (a release gate must not flap). Another `--seed`
/// explores further; a failure it finds is reported under the case that owns the rule it
/// breaks (see `checks::lifecycle`).
pub(crate) fn default_seed(service: Option<&str>) -> u64 {
    let words = crate::harness::vocab::catalogue::all().iter().map(|c| c.id.as_str()).chain(service);
    words.fold(0xcbf2_9ce4_8422_2325, |h, word| {
        word.bytes().chain([0]).fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    })
}

/// The receiver's addresses for `register_webhook` and `unregister_webhook`: the second client's
/// only when a second key is given (its events are the only ones to go there).
fn webhook_args(receiver: &Receiver, second: bool) -> DriveArgs {
    DriveArgs {
        webhook_url: Some(receiver.url().to_string()),
        second_webhook_url: second.then(|| receiver.second_url()),
        ..Default::default()
    }
}

/// The target a plan reaches: the embedded sandbox, started, or the server at `--base-url`; its
/// keys and service.
struct Reached {
    sandbox: Option<Sandbox>,
    base_url: reqwest::Url,
    key: Option<String>,
    second_key: Option<String>,
    service: Option<String>,
}

impl Reached {
    async fn of(plan: &RunPlan) -> Result<Self, SetupError> {
        match &plan.target {
            Target::Embedded { mutant, variant, perturbations, conditions } => {
                let sandbox_config = SandboxConfig {
                    mutant: *mutant,
                    variant: *variant,
                    perturbations: perturbations.clone(),
                    conditions: *conditions,
                    ..SandboxConfig::default()
                };
                let sandbox =
                    Sandbox::start(sandbox_config).await.map_err(|e| SetupError::SandboxStart(format!("{e:#}")))?;
                Ok(Self {
                    base_url: crate::harness::transport::http::parse_base_url(&sandbox.base_url)?,
                    key: sandbox.clients.first().map(|c| c.api_key.clone()),
                    second_key: sandbox.clients.get(1).map(|c| c.api_key.clone()),
                    service: plan.service.clone().or_else(|| Some(sandbox.service.clone())),
                    sandbox: Some(sandbox),
                })
            }
            Target::Remote { base_url, api_key, second_api_key } => Ok(Self {
                sandbox: None,
                base_url: base_url.clone(),
                key: Some(api_key.clone()),
                second_key: second_api_key.clone(),
                service: plan.service.clone(),
            }),
        }
    }
}

/// The driver the plan names, built (the embedded sandbox's own control when none is named).
fn driver_of(
    plan: &RunPlan,
    sandbox: Option<&Sandbox>,
    api: &Api,
    keys: Keys,
    transport: &Transport,
) -> Result<Option<Arc<dyn Driver>>, SetupError> {
    let second = keys.second_api_key.is_some();
    Ok(match (&plan.driver, sandbox) {
        (DriverPlan::Given(given), _) => Some(given.0.clone()),
        (DriverPlan::Url(url), _) => {
            Some(Arc::new(HttpDriver::with_transport(url, plan.waits.driver, second, transport)?))
        }
        (DriverPlan::Command(command), _) => {
            let driver = CommandDriver::new(command.clone(), api.base_url().to_string(), plan.waits.driver, keys);
            Some(Arc::new(driver.trusting(plan.ca_cert.as_deref())))
        }
        (DriverPlan::NoneGiven, Some(sandbox)) => {
            Some(Arc::new(SandboxDriver { control: sandbox.control.clone(), keys }))
        }
        (DriverPlan::NoneGiven, None) => None,
    })
}

/// The receiver started and its address registered through `driver`, when there is one.
async fn register(
    plan: &RunPlan,
    driver: Option<&Arc<dyn Driver>>,
    api: &Api,
) -> Result<(Option<Receiver>, Webhooks), SetupError> {
    let Some(driver) = driver else {
        return Ok((
            None,
            Webhooks::Unavailable("no driver (--driver, --driver-url) to register a webhook address".into()),
        ));
    };
    let recorder = api.recorder_handle();
    let receiver = Receiver::start(plan.webhook_listen, plan.webhook_public_url.clone(), recorder)
        .await
        .map_err(|e| SetupError::ReceiverStart(format!("{e:#}")))?;
    use crate::harness::rules::invariants::Client;
    receiver.know_keys(api.client_key(Client::First), api.client_key(Client::Second));
    let args = webhook_args(&receiver, api.has_second_key());
    let call = driver.run(DriverAction::RegisterWebhook, &args);
    let webhooks = match api.recorder().driven(DriverAction::RegisterWebhook, &args, call).await {
        Ok(()) => Webhooks::Registered,
        Err(DriveError::Unsupported(m) | DriveError::Refused(m)) => Webhooks::Unavailable(m),
        Err(DriveError::Failed(m)) => Webhooks::Failed(m),
    };
    Ok((Some(receiver), webhooks))
}
