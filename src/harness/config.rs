//! Configuration of a conformance run: the flags of `bankconf run`, each also read from a
//! `BANKCONF_*` environment variable (which is how `cargo test --test conformance` is configured).

use super::catalogue::{Level, Selection};
use super::report::Outputs;
use clap::Args;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Args, Clone, Debug)]
pub struct RunConfig {
    /// Base URL of the target; absent: an embedded sandbox started in-process.
    #[arg(long, env = "BANKCONF_BASE_URL")]
    pub base_url: Option<String>,
    /// API key of the client under test (never printed).
    #[arg(long, env = "BANKCONF_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// API key of another client, for the isolation cases (never printed).
    #[arg(long, env = "BANKCONF_SECOND_API_KEY", hide_env_values = true)]
    pub second_api_key: Option<String>,
    /// `<service>` in `/widget/<service>-connect.js`.
    #[arg(long, env = "BANKCONF_SERVICE")]
    pub service: Option<String>,
    /// Command (run with `sh -c`) that moves connections through states; see README.
    #[arg(long, env = "BANKCONF_DRIVER")]
    pub driver: Option<String>,
    /// Address of the webhook receiver.
    #[arg(long, env = "BANKCONF_WEBHOOK_LISTEN", default_value = "127.0.0.1:0")]
    pub webhook_listen: SocketAddr,
    /// URL the target should deliver webhooks to, when it cannot reach the listen address
    /// (a target in a container or on another host); default: the receiver's own address.
    #[arg(long, env = "BANKCONF_WEBHOOK_PUBLIC_URL")]
    pub webhook_public_url: Option<String>,
    /// An already CONNECTED connection, for read-only runs without a driver.
    #[arg(long, env = "BANKCONF_CONNECTION_ID")]
    pub connection_id: Option<String>,
    /// Chromium or Chrome that runs the widget script (§1); default: `chromium`,
    /// `chromium-headless-shell` or `google-chrome` on PATH. None: the browser cases are ignored.
    #[arg(long, env = "BANKCONF_BROWSER")]
    pub browser: Option<std::path::PathBuf>,
    /// Report files: `--report-json`, `--junit`, `--report-md`.
    #[command(flatten)]
    pub outputs: Outputs,
    /// Levels whose failures decide the exit code.
    #[arg(long, env = "BANKCONF_GATE", value_delimiter = ',', default_value = "must,security")]
    pub gate: Vec<Level>,
    /// Seed of the property-based cases (printed with every property failure, to replay it).
    #[arg(long, env = "BANKCONF_SEED")]
    pub seed: Option<u64>,
    /// Generated inputs per property.
    #[arg(long, env = "BANKCONF_CASES", default_value_t = 16)]
    pub cases: u32,
    /// Seconds a case waits for the webhook events it expects.
    #[arg(long, env = "BANKCONF_EVENT_TIMEOUT", default_value_t = 5.0)]
    pub event_timeout: f64,
    /// Seconds one HTTP request may take.
    #[arg(long, env = "BANKCONF_REQUEST_TIMEOUT", default_value_t = 10.0)]
    pub request_timeout: f64,
    /// Seconds one driver call may take.
    #[arg(long, env = "BANKCONF_DRIVER_TIMEOUT", default_value_t = 30.0)]
    pub driver_timeout: f64,
    /// Advanced: the embedded sandbox breaks this rule (`bankconf serve --list-mutants`).
    #[arg(long, hide = true)]
    pub sandbox_mutant: Option<String>,
    /// Advanced: the embedded sandbox is this conforming variant (`bankconf serve --list-variants`).
    #[arg(long, hide = true)]
    pub sandbox_variant: Option<String>,
    /// Select cases by section (`§4.3` or `4.3`; repeatable).
    #[arg(long = "section")]
    pub sections: Vec<String>,
    /// Select cases by level (repeatable).
    #[arg(long = "level")]
    pub levels: Vec<Level>,
    /// Select cases by id or id prefix (`transactions.`).
    #[arg(value_name = "CASE")]
    pub ids: Vec<String>,
}

impl RunConfig {
    /// Reads the configuration from the environment alone (for `cargo test`).
    pub fn from_env() -> Result<Self, clap::Error> {
        #[derive(clap::Parser)]
        struct EnvOnly {
            #[command(flatten)]
            config: RunConfig,
        }
        <EnvOnly as clap::Parser>::try_parse_from(["bankconf"]).map(|e| e.config)
    }

    pub fn selection(&self) -> Selection {
        Selection { ids: self.ids.clone(), sections: self.sections.clone(), levels: self.levels.clone() }
    }

    pub fn gates(&self, level: Level) -> bool {
        self.gate.contains(&level)
    }

    pub fn event_wait(&self) -> Duration {
        secs(self.event_timeout)
    }

    pub fn request_wait(&self) -> Duration {
        secs(self.request_timeout)
    }

    pub fn driver_wait(&self) -> Duration {
        secs(self.driver_timeout)
    }
}

/// A duration from user-given seconds, kept within sane bounds (0.05 s to one hour).
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() { s.clamp(0.05, 3600.0) } else { 5.0 })
}
