//! Configuration of a conformance run: the flags of `bankconf run`, each also read from a
//! `BANKCONF_*` environment variable (which is how `cargo test --test conformance` is configured),
//! checked once into a [`RunPlan`] ([`RunConfig::validate`]); written back as a command line in
//! `rerun.rs`.

use crate::harness::embedded::{Conditions, Mutant, Variant};
pub use crate::harness::setup::completing::{parse_mutant, parse_variant};
use crate::harness::setup::plan::{DriverPlan, RunPlan, Target, Waits};
use crate::harness::transport::driver::DriverImpl;
use crate::harness::vocab::catalogue::{Level, Selection};
use crate::harness::vocab::errors::SetupError;
use crate::harness::vocab::outcome::Gate;
use crate::harness::vocab::redact::Redactor;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Every setting of a conformance run: the flags of `bankconf run` (each field's doc is its
/// `--help`). [`Conformance`](crate::Conformance) builds one, and
/// [`Conformance::configure`](crate::Conformance::configure) reaches the settings it has no
/// method for.
///
/// ```
/// let run = bankconf::Conformance::default().configure(|c| c.rate_limit = 5.0);
/// assert_eq!(run.config().rate_limit, 5.0);
/// ```
///
/// New flags come in new releases: the struct is `#[non_exhaustive]`, so a caller starts from
/// [`RunConfig::embedded`] (or the builder) and sets fields, rather than naming all of them.
#[derive(Args, Clone, Debug)]
#[non_exhaustive]
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
    /// Command (run with `sh -c`) that moves connections through states; see docs/driver.md.
    #[arg(long, env = "BANKCONF_DRIVER")]
    pub driver: Option<String>,
    /// Admin endpoint that moves connections through states: one JSON POST per action
    /// (docs/driver-over-http.md); instead of --driver.
    #[arg(long, env = "BANKCONF_DRIVER_URL")]
    pub driver_url: Option<String>,
    /// A driver given in code (a library user's [`Driver`]), instead of --driver or --driver-url.
    #[arg(skip)]
    pub(crate) driver_impl: Option<DriverImpl>,
    /// Where the run finds its browser: its own unless a caller gives runs one to share.
    #[arg(skip)]
    pub(crate) browser_pool: crate::harness::transport::browser::BrowserPool,
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
    /// Leave out the cases that need a browser, on purpose: they are not judged, the verdict
    /// names them once, and the run exits 3 unless an expectations file expects them ignored.
    #[arg(long, env = "BANKCONF_SKIP_BROWSER", conflicts_with = "browser")]
    pub skip_browser: bool,
    /// The expectations file of a release gate (TOML, docs/ci.md "Expectations"): the outcomes it
    /// expects do not decide the exit code; deviations from it fail the run.
    #[arg(long, env = "BANKCONF_EXPECT")]
    pub expect: Option<PathBuf>,
    /// Write the whole run as HAR 1.2 to this file: every request and answer, every webhook
    /// delivery and every driver call, secrets redacted (docs/running.md "Evidence").
    #[arg(long = "report-har", alias = "har", env = "BANKCONF_REPORT_HAR", value_name = "FILE")]
    pub har: Option<PathBuf>,
    /// Report files: `--report-json`, `--report-junit`, `--report-md`.
    #[command(flatten)]
    pub(crate) outputs: OutputPaths,
    /// Print only the failures and errors as they come, then the closing block (what to act on,
    /// what would complete the run, the verdict line): for CI logs. The reports are whole.
    #[arg(short, long, env = "BANKCONF_QUIET")]
    pub quiet: bool,
    /// Levels whose failures decide the exit code.
    #[arg(long, env = "BANKCONF_GATE", value_delimiter = ',', default_value = "must,security", value_parser = super::completing::levels(), hide_possible_values = true)]
    pub gate: Vec<Level>,
    /// Seed of the property-based cases (printed with every property failure, to replay it).
    #[arg(long, env = "BANKCONF_SEED")]
    pub seed: Option<u64>,
    /// Generated inputs per property.
    #[arg(long, env = "BANKCONF_CASES", default_value_t = 6)]
    pub cases: u32,
    /// Shortest wait, in seconds, for a webhook event a case expects; a wait grows with the
    /// delivery latency observed in the run and a busy queue, up to 120 s (see docs/driver.md "Waiting for events").
    #[arg(long, env = "BANKCONF_EVENT_TIMEOUT", default_value_t = 5.0)]
    pub event_timeout: f64,
    /// Seconds, at least, the run watches a connection announced CONNECTED before its last look
    /// at the accounts: a soak (a state left unannounced within them is seen in every run). By
    /// default none: the last look comes when the run's work is done, and the notes say how long
    /// the states were watched.
    #[arg(long, env = "BANKCONF_OBSERVE_FOR")]
    pub observe_for: Option<f64>,
    /// Seconds one HTTP request may take.
    #[arg(long, env = "BANKCONF_REQUEST_TIMEOUT", default_value_t = 10.0)]
    pub request_timeout: f64,
    /// Seconds one driver call may take.
    #[arg(long, env = "BANKCONF_DRIVER_TIMEOUT", default_value_t = 30.0)]
    pub driver_timeout: f64,
    /// Seconds the whole run may take: past them its unfinished cases are ignored, the run is
    /// INCOMPLETE (exit 3) and every report is still written (0: no deadline).
    #[arg(long, env = "BANKCONF_DEADLINE", default_value_t = DEFAULT_DEADLINE)]
    pub deadline: f64,
    /// Advanced: the embedded sandbox breaks this rule (`bankconf serve --list-mutants`).
    #[arg(long, hide = true, value_parser = super::completing::mutants())]
    pub sandbox_mutant: Option<Mutant>,
    /// Advanced: the embedded sandbox is this conforming variant (`bankconf serve --list-variants`).
    #[arg(long, hide = true, value_parser = super::completing::variants())]
    pub sandbox_variant: Option<Variant>,
    /// Advanced: the embedded sandbox applies these generated perturbations (`bankconf serve
    /// --list-mutants` lists them with their cell).
    #[arg(long = "sandbox-perturb", hide = true)]
    pub sandbox_perturb: Vec<String>,
    /// Advanced: the embedded sandbox's conditions (`bankconf serve --latency-ms` and so on).
    #[command(flatten)]
    #[doc(hidden)]
    pub sandbox_conditions: SandboxConditions,
    /// Requests per second sent to the target (a token bucket; 0: unlimited).
    #[arg(long, env = "BANKCONF_RATE_LIMIT", default_value_t = 0.0)]
    pub rate_limit: f64,
    /// Most API requests in flight at once, from every case: the ceiling of the adaptive window.
    #[arg(long, env = "BANKCONF_CONCURRENCY", default_value_t = 8)]
    pub concurrency: usize,
    /// A PEM file of CA certificates trusted beside the system's (a staging server behind an
    /// internal CA); given to every client that reaches the target, and to a --driver command as
    /// CURL_CA_BUNDLE, SSL_CERT_FILE, REQUESTS_CA_BUNDLE and NODE_EXTRA_CA_CERTS (each unless set).
    #[arg(long, env = "BANKCONF_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Do not verify the target's TLS certificate at all (said in every report).
    #[arg(long, env = "BANKCONF_INSECURE")]
    pub insecure: bool,
    /// A header sent on every request to the target's API, `'Name: value'` (repeatable; in
    /// BANKCONF_HEADER one per line). Values are secrets: never printed.
    #[arg(
        long = "header",
        env = "BANKCONF_HEADER",
        value_delimiter = '\n',
        hide_env_values = true,
        value_name = "NAME: VALUE"
    )]
    pub headers: Vec<String>,
    /// Select cases by section (`§4.3` or `4.3`; repeatable).
    #[arg(long = "section")]
    pub sections: Vec<String>,
    /// Select cases by level (repeatable).
    #[arg(long = "level", value_parser = super::completing::levels(), hide_possible_values = true)]
    pub levels: Vec<Level>,
    /// Select cases by id or id prefix (`transactions.`): a narrowed run (a rerun), judged on
    /// those cases alone; the reports count the others as not selected.
    #[arg(value_name = "CASE", value_parser = super::completing::case_ids(), hide_possible_values = true)]
    pub ids: Vec<String>,
    /// Leave out cases by id or id prefix (repeatable), whatever else selects them, on purpose:
    /// each is reported ignored with the flag, and a gating one makes the run INCOMPLETE (exit 3)
    /// unless an expectations file expects it ignored.
    #[arg(long = "exclude", value_name = "CASE", value_parser = super::completing::case_ids(), hide_possible_values = true)]
    pub excluded: Vec<String>,
}

impl RunConfig {
    /// The defaults of every flag, with no environment read: the embedded sandbox, no driver,
    /// no reports. Code that builds a run (the self-test, tests) starts from this, so a new flag
    /// never leaks in from a `BANKCONF_*` variable.
    pub fn embedded() -> Self {
        Self {
            base_url: None,
            api_key: None,
            second_api_key: None,
            service: None,
            driver: None,
            driver_url: None,
            driver_impl: None,
            browser_pool: Default::default(),
            webhook_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            webhook_public_url: None,
            connection_id: None,
            outputs: OutputPaths::default(),
            quiet: false,
            gate: vec![Level::Must, Level::Security],
            seed: None,
            cases: 6,
            event_timeout: 5.0,
            observe_for: None,
            request_timeout: 10.0,
            driver_timeout: 30.0,
            deadline: DEFAULT_DEADLINE,
            browser: None,
            skip_browser: false,
            expect: None,
            har: None,
            sandbox_mutant: None,
            sandbox_variant: None,
            sandbox_perturb: Vec::new(),
            sandbox_conditions: SandboxConditions::default(),
            rate_limit: 0.0,
            concurrency: 8,
            ca_cert: None,
            insecure: false,
            headers: Vec::new(),
            sections: Vec::new(),
            levels: Vec::new(),
            ids: Vec::new(),
            excluded: Vec::new(),
        }
    }

    /// Reads the configuration from the environment alone (for `cargo test`).
    pub(crate) fn from_env() -> Result<Self, clap::Error> {
        forget_empty_env();
        #[derive(clap::Parser)]
        struct EnvOnly {
            #[command(flatten)]
            config: RunConfig,
        }
        <EnvOnly as clap::Parser>::try_parse_from(["bankconf"]).map(|e| e.config.with_legacy_env())
    }

    /// A redactor of the secrets the flags give (keys, `--header` values): for what a run says
    /// before its session has one of its own (a setup error may quote a driver or a target that echoed a key).
    pub(crate) fn secrets(&self) -> Redactor {
        let keys = [self.api_key.as_deref().unwrap_or(""), self.second_api_key.as_deref().unwrap_or("")];
        Redactor::of(keys.into_iter().chain(crate::harness::transport::reach::header_values(&self.headers)))
    }

    /// A note when a key the flags give is shorter than the redactor can tell apart from
    /// ordinary text: it is hidden only where it stands as a word.
    pub(crate) fn short_keys_note(&self) -> Option<String> {
        let short: Vec<&str> = [("--api-key", &self.api_key), ("--second-api-key", &self.second_api_key)]
            .into_iter()
            .filter(|(_, key)| key.as_deref().is_some_and(crate::harness::vocab::redact::is_short))
            .map(|(flag, _)| flag)
            .collect();
        (!short.is_empty()).then(|| {
            format!(
                "{} shorter than 8 characters: the reports hide it only where it stands as a word, not \
                 within other words or in pieces; a real key is longer (§5.2: a prefix, an underscore and more)",
                short.join(" and ")
            )
        })
    }

    /// The configuration, with report paths that only a former variable name gives
    /// (`BANKCONF_HAR`, `BANKCONF_JUNIT`) filled in: old scripts keep working.
    pub(crate) fn with_legacy_env(mut self) -> Self {
        self.outputs = self.outputs.with_legacy_env();
        if self.har.is_none() {
            self.har = legacy_env("BANKCONF_HAR");
        }
        self
    }

    /// Every mistake the flags alone show, before anything starts (no network, no file read):
    /// settings of a target without one, two drivers, one key given twice, a missing key, the
    /// sandbox's flags for a target, a URL that is not http(s), a header that is no header, a
    /// selection that names no case. The one place these are checked; what passes is the
    /// [`RunPlan`] the session, the checks and the runner read (never the flags themselves).
    pub(crate) fn validate(&self) -> Result<RunPlan, SetupError> {
        let target = self.base_url.is_some();
        let target_flags = [
            ("--api-key", self.api_key.is_some()),
            ("--second-api-key", self.second_api_key.is_some()),
            ("--driver", self.driver.is_some()),
            ("--driver-url", self.driver_url.is_some()),
            ("a driver given in code", self.driver_impl.is_some()),
            ("--connection-id", self.connection_id.is_some()),
            ("--service", self.service.is_some()),
            ("--webhook-public-url", self.webhook_public_url.is_some()),
        ];
        let flags: Vec<&'static str> = target_flags.iter().filter(|(_, set)| *set).map(|(flag, _)| *flag).collect();
        if !target && !flags.is_empty() {
            return Err(SetupError::TargetFlagsWithoutBaseUrl { flags });
        }
        let drivers = [self.driver.is_some(), self.driver_url.is_some(), self.driver_impl.is_some()];
        if drivers.into_iter().filter(|given| *given).count() > 1 {
            return Err(SetupError::SeveralDrivers);
        }
        if self.api_key.is_some() && self.api_key == self.second_api_key {
            return Err(SetupError::SameKeyTwice);
        }
        let conditions = self.sandbox_conditions.conditions();
        let sandbox_only = self.sandbox_mutant.is_some()
            || self.sandbox_variant.is_some()
            || !self.sandbox_perturb.is_empty()
            || !conditions.is_local();
        let target = match &self.base_url {
            Some(url) => {
                if sandbox_only {
                    return Err(SetupError::SandboxFlagsWithBaseUrl);
                }
                let api_key = self.api_key.clone().filter(|k| !k.is_empty()).ok_or(SetupError::MissingApiKey)?;
                let base_url = crate::harness::transport::http::parse_base_url(url)?;
                Target::Remote { base_url, api_key, second_api_key: self.second_api_key.clone() }
            }
            None => Target::Embedded {
                mutant: self.sandbox_mutant,
                variant: self.sandbox_variant,
                perturbations: self.sandbox_perturb.clone(),
                conditions,
            },
        };
        if let Some(url) = &self.driver_url {
            crate::harness::transport::driver::HttpDriver::check_url(url)?;
        }
        let headers = crate::harness::transport::reach::Headers::parse(&self.headers)?;
        let selection = self.selection();
        crate::harness::vocab::catalogue::check_selection(&selection)?;
        let driver = match (&self.driver_impl, &self.driver_url, &self.driver) {
            (Some(given), ..) => DriverPlan::Given(given.clone()),
            (None, Some(url), _) => DriverPlan::Url(url.clone()),
            (None, None, Some(command)) => DriverPlan::Command(command.clone()),
            (None, None, None) => DriverPlan::NoneGiven,
        };
        // No floor by default: the last look comes when the run's work is done (issue 72); a
        // soak is asked for (a nightly profile), never paid by every run.
        let observe_for = match self.observe_for {
            Some(s) if s.is_finite() => Duration::from_secs_f64(s.clamp(0.0, 3600.0)),
            _ => Duration::ZERO,
        };
        Ok(RunPlan {
            observe_for,
            target,
            driver,
            gate: self.gate(),
            selection,
            deadline: self.deadline(),
            waits: Waits {
                event: secs(self.event_timeout),
                request: secs(self.request_timeout),
                driver: secs(self.driver_timeout),
            },
            cases: self.cases,
            seed: self.seed,
            service: self.service.clone(),
            connection_id: self.connection_id.clone(),
            browser: self.browser.clone(),
            skip_browser: self.skip_browser,
            browser_pool: self.browser_pool.clone(),
            webhook_listen: self.webhook_listen,
            webhook_public_url: self.webhook_public_url.clone(),
            har: self.har.clone(),
            expect: self.expect.clone(),
            headers,
            ca_cert: self.ca_cert.clone(),
            insecure: self.insecure,
            rate_limit: self.rate_limit,
            concurrency: self.concurrency,
            rerun: self.rerun_settings(),
            secrets: self.secrets(),
            short_keys: self.short_keys_note(),
        })
    }

    /// The cases the flags select (for `bankconf run --list`).
    #[doc(hidden)]
    pub fn selection(&self) -> Selection {
        Selection {
            ids: self.ids.clone(),
            sections: self.sections.clone(),
            levels: self.levels.clone(),
            excluded: self.excluded.clone(),
        }
    }

    /// The gate the flags give: also what a run that never started reports.
    pub(crate) fn gate(&self) -> Gate {
        Gate(self.gate.clone())
    }

    /// How long the whole run may take (`--deadline`); `None`: no deadline (0, or not a number).
    fn deadline(&self) -> Option<Duration> {
        (self.deadline.is_finite() && self.deadline > 0.0).then(|| Duration::from_secs_f64(self.deadline.min(1e7)))
    }
}

/// `--deadline`: a few minutes, far beyond a plain run (tens of seconds against the sandbox,
/// a minute or two against a slow staging server), so that only a stuck run meets it.
pub(crate) const DEFAULT_DEADLINE: f64 = 300.0;

/// A duration from user-given seconds, kept within sane bounds (0.05 s to one hour).
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() { s.clamp(0.05, 3600.0) } else { 5.0 })
}

/// Where the report files go: the flags shared by `run` and `check-events`.
#[derive(Args, Clone, Debug, Default)]
pub struct OutputPaths {
    /// Write the JSON report (`schemas/report.json`) to this file (`-`: standard output, the
    /// terminal's lines then on standard error; so for every `--report-*`).
    #[arg(long, env = "BANKCONF_REPORT_JSON", value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Write a JUnit XML report to this file (non-gating failures are not JUnit failures).
    #[arg(long = "report-junit", alias = "junit", env = "BANKCONF_REPORT_JUNIT", value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a Markdown summary (for a CI job summary) to this file.
    #[arg(long, env = "BANKCONF_REPORT_MD", value_name = "FILE")]
    pub report_md: Option<PathBuf>,
    /// Write an HTML report to this file: one self-contained page (no script, no network) with
    /// each failure's evidence, a timeline per connection and the transition graph.
    #[arg(long, env = "BANKCONF_REPORT_HTML", value_name = "FILE")]
    pub report_html: Option<PathBuf>,
    /// Write an expectations file from this run (docs/ci.md "Expectations"; `run --expect`
    /// reads it back): one line per gating case that did not pass, to review and commit.
    #[arg(long, env = "BANKCONF_WRITE_EXPECTATIONS")]
    pub write_expectations: Option<PathBuf>,
}

impl OutputPaths {
    /// See [`RunConfig::with_legacy_env`].
    pub fn with_legacy_env(mut self) -> Self {
        if self.junit.is_none() {
            self.junit = legacy_env("BANKCONF_JUNIT");
        }
        self
    }
}

/// A report path from a variable named as before the `--report-*` scheme; read only when
/// neither the flag nor the new variable gives one.
/// Removes every `BANKCONF_*` variable set to the empty string, so that clap sees it unset.
/// CI templates often write `BANKCONF_BROWSER=` for "none": an empty value is never a setting
/// (clap would take it as a flag given without its value). Called first thing in the binary's
/// `main` and in the conformance test harness, while the process has one thread.
pub fn forget_empty_env() {
    let empty: Vec<_> = std::env::vars_os()
        .filter(|(name, value)| name.to_str().is_some_and(|n| n.starts_with("BANKCONF_")) && value.is_empty())
        .map(|(name, _)| name)
        .collect();
    for name in empty {
        std::env::remove_var(name);
    }
}

fn legacy_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The hidden `bankconf run --sandbox-*` flags: the embedded sandbox's [`Conditions`].
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct SandboxConditions {
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_latency_ms: u64,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_delivery_delay_ms: u64,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_delivery_serial_ms: u64,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_rate_limit: u32,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_backlog: u32,
    #[arg(long, hide = true)]
    pub sandbox_connection_close: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_delivery_copies: u32,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_delivery_copy_late_ms: u64,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_delivery_shuffle_ms: u64,
    #[arg(long, hide = true)]
    pub sandbox_delivery_unreachable: bool,
    #[arg(long, hide = true)]
    pub sandbox_stall_transactions: bool,
    #[arg(long, hide = true)]
    pub sandbox_trickle_transactions: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    pub sandbox_idle_close_ms: u64,
}

impl SandboxConditions {
    pub fn conditions(&self) -> Conditions {
        Conditions {
            latency_ms: self.sandbox_latency_ms,
            delivery_delay_ms: self.sandbox_delivery_delay_ms,
            delivery_serial_ms: self.sandbox_delivery_serial_ms,
            rate_limit: self.sandbox_rate_limit,
            backlog: self.sandbox_backlog,
            connection_close: self.sandbox_connection_close,
            delivery_copies: self.sandbox_delivery_copies,
            delivery_copy_late_ms: self.sandbox_delivery_copy_late_ms,
            delivery_shuffle_ms: self.sandbox_delivery_shuffle_ms,
            delivery_unreachable: self.sandbox_delivery_unreachable,
            stall_transactions: self.sandbox_stall_transactions,
            trickle_transactions: self.sandbox_trickle_transactions,
            idle_close_ms: self.sandbox_idle_close_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::vocab::errors::{SelectionError, SetupError};

    fn target() -> RunConfig {
        RunConfig {
            base_url: Some("http://127.0.0.1:8080".into()),
            api_key: Some("k1".into()),
            ..RunConfig::embedded()
        }
    }

    /// What passes validation is the plan: the target with its key, the one driver, the gate,
    /// the selection, the waits within their bounds, the deadline.
    #[test]
    fn validate_builds_the_plan() {
        let mut flags = target();
        flags.driver_url = Some("http://127.0.0.1:9/".into());
        flags.event_timeout = 0.0;
        flags.gate = vec![Level::Must];
        flags.ids = vec!["auth.".into()];
        let plan = flags.validate().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(&plan.target, Target::Remote { api_key, .. } if api_key == "k1"));
        assert!(matches!(&plan.driver, DriverPlan::Url(url) if url == "http://127.0.0.1:9/"));
        assert_eq!(plan.gate, Gate(vec![Level::Must]));
        assert_eq!(plan.selection.ids, ["auth."]);
        assert_eq!(plan.event_wait(), Duration::from_millis(50));
        assert!(!plan.embedded());
        let plan = RunConfig::embedded().validate().unwrap_or_else(|e| panic!("{e}"));
        assert!(plan.embedded() && matches!(plan.driver, DriverPlan::NoneGiven));
        assert_eq!(plan.deadline, Some(Duration::from_secs_f64(DEFAULT_DEADLINE)));
        assert_eq!(plan.waits.request, Duration::from_secs(10));
    }

    /// Each mistake the flags show is its own variant, whichever front door built the flags.
    #[test]
    fn validate_names_each_mistake_of_the_flags() {
        assert!(RunConfig::embedded().validate().is_ok());
        assert!(target().validate().is_ok());
        let check = |change: fn(&mut RunConfig), embedded: bool| {
            let mut config = if embedded { RunConfig::embedded() } else { target() };
            change(&mut config);
            config.validate().err().expect("a mistake of the flags")
        };
        let e = check(|c| c.driver_url = Some("http://127.0.0.1:9/".into()), true);
        assert!(matches!(&e, SetupError::TargetFlagsWithoutBaseUrl { flags } if flags == &["--driver-url"]), "{e}");
        assert!(e.to_string().starts_with("--driver-url given without --base-url"), "{e}");
        let e = check(
            |c| {
                c.driver = Some("true".into());
                c.driver_url = Some("http://127.0.0.1:9/".into());
            },
            false,
        );
        assert!(matches!(e, SetupError::SeveralDrivers), "{e}");
        assert!(matches!(check(|c| c.second_api_key = Some("k1".into()), false), SetupError::SameKeyTwice));
        assert!(matches!(check(|c| c.api_key = None, false), SetupError::MissingApiKey));
        assert!(matches!(check(|c| c.api_key = Some(String::new()), false), SetupError::MissingApiKey));
        let e = check(|c| c.sandbox_mutant = Some(Mutant::ALL[0]), false);
        assert!(matches!(e, SetupError::SandboxFlagsWithBaseUrl), "{e}");
        let e = check(|c| c.base_url = Some("ftp://127.0.0.1/".into()), false);
        assert_eq!(e.to_string(), "base URL \"ftp://127.0.0.1/\": only http and https are supported");
        let e = check(|c| c.driver_url = Some("ftp://127.0.0.1/".into()), false);
        assert_eq!(e.to_string(), "--driver-url must be an http(s) URL, got \"ftp://127.0.0.1/\"");
        let e = check(|c| c.ids = vec!["transactions.walk-exactly-one".into()], true);
        assert!(matches!(e, SetupError::Selection(SelectionError::UnknownCase { .. })), "{e}");
    }
}
