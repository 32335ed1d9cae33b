//! A conformance run from Rust code: what an implementer writes in their own `cargo test`.
//!
//! [`Conformance`] is a builder over the settings of `bankconf run` (the same defaults, and no
//! `BANKCONF_*` variable read: a test is configured by its code alone). [`Conformance::run`]
//! judges the target and returns the [`Report`]; its exit code is the one `bankconf run` would
//! give.
//!
//! ```no_run
//! use bankconf::{Conformance, Level};
//! # async fn example(my_driver: impl bankconf::Driver + 'static) {
//! let report = Conformance::new("http://127.0.0.1:8080")
//!     .api_key("acme_live_primary")
//!     .second_api_key("acme_live_second")
//!     .service("acme")
//!     .driver(my_driver)
//!     .gate([Level::Must, Level::Security])
//!     .seed(7)
//!     .run()
//!     .await;
//! assert_eq!(report.exit_code(), 0, "{}", report.verdict());
//! # }
//! ```

use crate::harness::report::{self, Report};
use crate::harness::runner;
use crate::harness::setup::config::RunConfig;
use crate::harness::transport::browser;
use crate::harness::transport::driver::Driver;
use crate::harness::transport::driver::DriverImpl;
use crate::harness::vocab::catalogue::Level;
use std::path::PathBuf;
use std::sync::Arc;

/// The settings of one conformance run, built in code.
#[derive(Clone, Debug)]
pub struct Conformance {
    config: RunConfig,
    progress: bool,
}

impl Default for Conformance {
    /// The embedded sandbox, judged with its own driver (what `bankconf run` does with no flag).
    fn default() -> Self {
        Self { config: RunConfig::embedded(), progress: false }
    }
}

impl Conformance {
    /// A run against the target at `base_url` (give its key with [`Conformance::api_key`]).
    ///
    /// ```
    /// let run = bankconf::Conformance::new("http://127.0.0.1:8080").api_key("acme_test_1");
    /// assert_eq!(run.config().base_url.as_deref(), Some("http://127.0.0.1:8080"));
    /// ```
    pub fn new(base_url: impl Into<String>) -> Self {
        let mut run = Self::default();
        run.config.base_url = Some(base_url.into());
        run
    }

    /// The key of the client under test (§5); never printed.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.config.api_key = Some(key.into());
        self
    }

    /// Another client's key, for the isolation cases; never printed.
    pub fn second_api_key(mut self, key: impl Into<String>) -> Self {
        self.config.second_api_key = Some(key.into());
        self
    }

    /// `<service>` in `/widget/<service>-connect.js` (§1).
    pub fn service(mut self, service: impl Into<String>) -> Self {
        self.config.service = Some(service.into());
        self
    }

    /// The driver that moves the target's connections through states: a type of your own that
    /// implements [`Driver`] (e.g. one that moves an in-process server's state directly).
    pub fn driver(self, driver: impl Driver + 'static) -> Self {
        self.shared_driver(Arc::new(driver))
    }

    /// [`Conformance::driver`] with a driver already shared.
    pub fn shared_driver(mut self, driver: Arc<dyn Driver>) -> Self {
        self.config.driver_impl = Some(DriverImpl(driver));
        self
    }

    /// A driver command, run with `sh -c` once per action (docs/driver.md "The protocol").
    pub fn driver_command(mut self, command: impl Into<String>) -> Self {
        self.config.driver = Some(command.into());
        self
    }

    /// An admin endpoint that gets one JSON `POST` per action (`docs/driver-over-http.md`).
    pub fn driver_url(mut self, url: impl Into<String>) -> Self {
        self.config.driver_url = Some(url.into());
        self
    }

    /// Runs only the cases of these levels (all by default).
    pub fn levels(mut self, levels: impl IntoIterator<Item = Level>) -> Self {
        self.config.levels = levels.into_iter().collect();
        self
    }

    /// The levels whose failures decide the exit code (default: must and security).
    pub fn gate(mut self, levels: impl IntoIterator<Item = Level>) -> Self {
        self.config.gate = levels.into_iter().collect();
        self
    }

    /// Runs only the cases whose id is or starts with one of `ids` (`transactions.`).
    pub fn cases<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.config.ids = ids.into_iter().map(Into::into).collect();
        self
    }

    /// The seed of the property-based cases (random by default; every report names it).
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// How long the whole run may take (default 300 s; `Duration::ZERO`: no deadline). Past
    /// it, the unfinished cases are ignored and the run is INCOMPLETE (exit code 3).
    ///
    /// ```
    /// let run = bankconf::Conformance::default().deadline(std::time::Duration::from_secs(60));
    /// assert_eq!(run.config().deadline, 60.0);
    /// ```
    pub fn deadline(mut self, deadline: std::time::Duration) -> Self {
        self.config.deadline = deadline.as_secs_f64();
        self
    }

    /// Writes the JSON report (`schemas/report.json`) to `path`.
    pub fn report_json(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.outputs.report_json = Some(path.into());
        self
    }

    /// Writes a JUnit XML report to `path`.
    pub fn junit(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.outputs.junit = Some(path.into());
        self
    }

    /// Writes a Markdown summary to `path`.
    pub fn report_md(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.outputs.report_md = Some(path.into());
        self
    }

    /// Writes the HTML report (one self-contained page) to `path`.
    pub fn report_html(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.outputs.report_html = Some(path.into());
        self
    }

    /// Writes an expectations file from this run (`bankconf run --write-expectations`): one line
    /// per gating case that did not pass, to review and commit.
    pub fn write_expectations(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.outputs.write_expectations = Some(path.into());
        self
    }

    /// Writes the whole run as HAR 1.2 to `path`, secrets redacted.
    pub fn har(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.har = Some(path.into());
        self
    }

    /// Prints the header and one line per case as `bankconf run` does (off by default).
    pub fn progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// Any other setting of `bankconf run` (timeouts, rate limit, webhook addresses), on the
    /// configuration itself.
    ///
    /// ```
    /// let run = bankconf::Conformance::default().configure(|c| c.event_timeout = 10.0);
    /// assert_eq!(run.config().event_timeout, 10.0);
    /// ```
    pub fn configure(mut self, change: impl FnOnce(&mut RunConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// The configuration the run will use.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Runs the selected cases and writes the report files asked for. A run that could not
    /// start, or whose report files could not be written, is a report with a `setup_error`
    /// (exit code 2).
    pub async fn run(self) -> Report {
        let outputs = self.config.outputs.clone();
        let writable = report::check_writable(&outputs, self.config.har.as_deref());
        let mut report = runner::run_report(
            self.config,
            self.progress.then(|| {
                std::sync::Arc::new(crate::harness::report::progress::Terminal::new(
                    crate::harness::report::terminal::full_text(&outputs).to_string(),
                )) as std::sync::Arc<dyn crate::harness::vocab::progress::Progress>
            }),
        )
        .await;
        if let Err(e) = writable.and_then(|()| report::write(&outputs, &report)) {
            report.setup_error.get_or_insert(e.into());
        }
        report
    }
}

impl Conformance {
    /// Runs as the `main` of a `harness = false` test: one libtest trial per case, with
    /// libtest's filters, `--list` and `--ignored` (the rules of `bankconf run`'s exit code, case
    /// by case, and a `coverage.complete` trial that fails when gating cases went unjudged).
    /// Call it outside any async runtime; a server the test starts runs on a runtime of its own.
    ///
    /// ```no_run
    /// // tests/conformance.rs, with `[[test]] name = "conformance" harness = false`
    /// fn main() -> std::process::ExitCode {
    ///     bankconf::Conformance::new("http://127.0.0.1:8080").api_key("acme_test_1").tests()
    /// }
    /// ```
    pub fn tests(self) -> std::process::ExitCode {
        crate::harness::front::command::test_main(self.config, libtest_mimic::Arguments::from_args())
    }
}

/// The run's summary as `bankconf run` prints it: verdict, counts, what went unjudged and why,
/// and each failure (for a test's failure message).
pub fn summary(report: &Report) -> String {
    report::terminal::summary(report, &report::terminal::full_text(&Default::default()))
}

/// Whether a test over the run should pass: the run PASSED, or the only gating cases it left
/// unjudged needed a browser this machine lacks (the widget cases, §1), as a test runner reports
/// a test that needs a missing tool ignored rather than failed.
///
/// ```
/// # async fn example() {
/// let report = bankconf::Conformance::default().cases(["create."]).run().await;
/// assert!(bankconf::passed_or_no_browser(&report), "{}", bankconf::summary(&report));
/// # }
/// ```
pub fn passed_or_no_browser(report: &Report) -> bool {
    match report.exit_code() {
        report::EXIT_PASSED => true,
        report::EXIT_INCOMPLETE => report.unjudged().iter().all(|(how, _)| how == browser::INSTALL_HINT),
        _ => false,
    }
}
