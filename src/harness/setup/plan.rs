//! A run's plan: what [`RunConfig::validate`](crate::harness::setup::config::RunConfig::validate) builds once
//! from the flags, and the session, fixtures, checks and runner read (they never see the clap
//! struct, as hurl's runner never sees its CLI options).

use crate::harness::embedded::{Conditions, Mutant, Variant};
use crate::harness::transport::browser::BrowserPool;
use crate::harness::transport::driver::DriverImpl;
use crate::harness::transport::reach::Headers;
use crate::harness::vocab::catalogue::Selection;
use crate::harness::vocab::outcome::Gate;
use crate::harness::vocab::redact::Redactor;
use reqwest::Url;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The target a plan judges: the embedded sandbox (with the conditions and the mutant or variant
/// the hidden flags give), or a server at a base URL whose key [`RunConfig::validate`] saw.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Embedded {
        mutant: Option<Mutant>,
        variant: Option<Variant>,
        perturbations: Vec<String>,
        conditions: Conditions,
    },
    /// `base_url`: `--base-url`, parsed once (an http(s) URL).
    Remote {
        base_url: Url,
        api_key: String,
        second_api_key: Option<String>,
    },
}

/// What moves the target's connections, the one the flags give (at most one, by validation);
/// `NoneGiven`: none given, which is the embedded sandbox's own control for it, or no driver at
/// all for a target.
#[derive(Clone, Debug)]
pub(crate) enum DriverPlan {
    Given(DriverImpl),
    Url(String),
    Command(String),
    NoneGiven,
}

impl DriverPlan {
    /// The preflight's hint when registering the receiver failed.
    pub(crate) fn register_hint(&self) -> &'static str {
        match self {
            Self::Given(_) => "the driver given in code",
            Self::Url(_) => "is --driver-url right, and its server up?",
            Self::Command(_) => "is --driver right, and executable?",
            // Without a driver for a target, nothing registers, so nothing fails.
            Self::NoneGiven => "the embedded sandbox's driver",
        }
    }
}

/// The patience settings, each kept within sane bounds (0.05 s to one hour).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waits {
    /// `--event-timeout`: the shortest wait for an event a case expects.
    pub event: Duration,
    /// `--request-timeout`: one HTTP request.
    pub request: Duration,
    /// `--driver-timeout`: one driver call.
    pub driver: Duration,
}

/// A run, checked once ([`RunConfig::validate`]) and built from the flags: what the session, the
/// fixtures, the checks and the runner read. Nothing past validation sees the clap struct.
#[derive(Clone)]
pub(crate) struct RunPlan {
    pub target: Target,
    pub driver: DriverPlan,
    /// Whose failures decide the exit code.
    pub gate: Gate,
    /// The cases to run.
    pub selection: Selection,
    /// How long the whole run may take; `None`: no deadline.
    pub deadline: Option<Duration>,
    pub waits: Waits,
    /// Generated inputs per property (`--cases`).
    pub cases: u32,
    /// `--seed`; `None`: the default seed (`session::default_seed`).
    pub seed: Option<u64>,
    pub service: Option<String>,
    /// An already CONNECTED connection (`--connection-id`).
    pub connection_id: Option<String>,
    /// `--browser`, and `--skip-browser`.
    pub browser: Option<PathBuf>,
    pub skip_browser: bool,
    pub browser_pool: BrowserPool,
    pub webhook_listen: SocketAddr,
    pub webhook_public_url: Option<String>,
    /// Where the HAR goes, if asked.
    pub har: Option<PathBuf>,
    /// The expectations file (read by the runner before the session starts).
    pub expect: Option<PathBuf>,
    /// The `--header` lines, parsed once; `--ca-cert`, `--insecure`.
    pub headers: Headers,
    pub ca_cert: Option<PathBuf>,
    pub insecure: bool,
    /// `--observe-for`: how long the first connection announced CONNECTED is watched before
    /// the run's last look ([`crate::harness::checks::last_look`]).
    pub observe_for: Duration,
    pub rate_limit: f64,
    pub concurrency: usize,
    /// The settings a rerun command repeats ([`RunConfig::rerun_settings`]).
    pub rerun: String,
    /// The secrets the flags give ([`RunConfig::secrets`]).
    pub secrets: Redactor,
    /// A note on keys too short to hide everywhere ([`RunConfig::short_keys_note`]).
    pub short_keys: Option<String>,
}

impl RunPlan {
    /// The shortest wait for an event a case expects (`--event-timeout`).
    pub(crate) fn event_wait(&self) -> Duration {
        self.waits.event
    }

    /// Whether the target is the embedded sandbox.
    pub(crate) fn embedded(&self) -> bool {
        matches!(self.target, Target::Embedded { .. })
    }
}
