//! bankconf: a conformance test harness for the Bank Connection Aggregation Service.
//!
//! # The library surface
//! What a team testing its own server needs, and nothing else (`docs/library.md` lists it):
//! - [`Conformance`]: a run built in code ([`RunConfig`] holds every setting),
//!   [`Conformance::run`] for its [`Report`], or [`Conformance::tests`] as the `main` of a
//!   `harness = false` test (one trial per case);
//! - [`Driver`]: how the run moves the server's state ([`Answer`] done, refused, not
//!   supported), implemented in Rust against an in-process server, or given as a command or URL;
//! - reading a [`Report`]: each case's [`CaseResult`] (its [`Case`] and [`Outcome`]), the
//!   [`EXIT_PASSED`]… exit codes, and [`summary`], the run's summary as `bankconf run` prints it;
//! - [`Action`] and [`ConnectionState`], the spec's vocabulary, and [`sandbox`], the reference
//!   implementation (a starting point, and the server of the example in `examples/implementer/`).
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
//!     .run()
//!     .await;
//! assert_eq!(report.exit_code(), bankconf::EXIT_PASSED, "{}", bankconf::summary(&report));
//! # }
//! ```
//!
//! The crate has three parts, kept apart on purpose (`scripts/layers.py` checks it): `spec` and
//! `schemas` (what the specification says), [`sandbox`] (the reference server), and `harness`
//! (the conformance run). All but the sandbox are private; the items above are re-exported from
//! them. `internal`, hidden from the documentation, holds what bankconf's own binary and tests
//! need besides: it is no part of the library and may change in any release.

#![warn(unreachable_pub, unnameable_types)]

mod conformance;
mod generated;
mod harness;
mod openapi;
pub mod sandbox;
mod schemas;
mod selftest;
mod spec;

pub use conformance::{passed_or_no_browser, summary, Conformance};
pub use harness::rules::verdict::{Origin, Report, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_NOT_RUN, EXIT_PASSED};
pub use harness::setup::config::RunConfig;
pub use harness::transport::driver::{Answer, DriveArgs, DriveFuture, Driver, DriverAction};
pub use harness::vocab::catalogue::{Case, Level, Need};
pub use harness::vocab::errors::{ExpectError, ReportWriteError, SelectionError, SetupError, UrlProblem};
pub use harness::vocab::kind::{
    AccountKind, AnswerKind, AuthKind, ConnectionKind, EventKind, HttpKind, InvariantKind, IsolationKind, Kind,
    LifecycleKind, ReactionKind, SecretKind, StateKind, TransactionKind, WalkKind, WidgetKind,
};
pub use harness::vocab::note::Note;
pub use harness::vocab::outcome::{
    CaseResult, Consequence, Contrast, Counts, ErrorSource, Evidence, Failure, Foundation, Gate, IgnoreCause, Outcome,
    Problem,
};
pub use spec::{Action, ConnectionState};

/// What bankconf's own binary (`src/main.rs`) and its tests (`tests/*.rs`) need beyond the
/// library surface, item by item, under the names of the modules that define them. No part of
/// the library: hidden from the documentation, and changed at will.
#[doc(hidden)]
pub mod internal {
    /// The headless browser of the widget cases.
    pub mod browser {
        pub use crate::harness::transport::browser::{find, launch, PageHeaders, Session};
        pub use crate::harness::transport::cdp::{Event, Page};
        pub use crate::harness::transport::probe::{Call, Probe, Received};
        pub use crate::harness::vocab::errors::{BrowserLaunchError, CdpError};
    }
    /// A run cut short.
    pub mod cancel {
        pub use crate::harness::vocab::cancel::{Cause, Signal};
    }
    /// The cases of `cases/*.toml`.
    pub mod catalogue {
        pub use crate::harness::vocab::catalogue::{all, check_selection, find, Selection};
    }
    /// The code of the cases.
    pub mod checks {
        pub use crate::harness::checks::judge_one;
    }
    /// What a check concludes, and why it stops.
    pub mod outcome {
        pub use crate::harness::vocab::outcome::Stop;
    }
    /// The generated perturbations judged by the clause matrix.
    pub mod generated {
        pub use crate::generated::{
            items, legal_batches, legal_verdict, listing, mutant_verdict, run, Expect, Item, Run,
        };
    }
    /// The clause matrix of `cases/clauses.toml`.
    pub mod clauses {
        pub use crate::harness::vocab::clauses::{markdown, matrix, problems, Cell, Clause, Matrix};
    }
    /// `bankconf check-events`.
    pub mod check_events {
        pub use crate::harness::front::check_events::{
            check_events, judge_capture, parse, CheckEventsConfig, CASE_IDS,
        };
        pub use crate::harness::vocab::errors::CaptureError;
    }
    /// Webhook deliveries as received.
    pub mod delivery {
        pub use crate::harness::rules::delivery::{Delivery, Recipient};
    }
    /// `bankconf run` and `cargo test --test conformance`.
    pub mod command {
        pub use crate::harness::front::command::{conformance_test, name_this_binary, run};
    }
    /// The flags of `bankconf run` and `bankconf serve`.
    pub mod config {
        pub use crate::harness::setup::config::{
            forget_empty_env, parse_mutant, parse_variant, OutputPaths, SandboxConditions,
        };
        /// Value parsers that complete their names in the shell.
        pub mod completing {
            pub use crate::harness::setup::completing::{case_ids, levels, mutants, variants, Completing};
        }
        pub use crate::harness::vocab::errors::UnknownName;
        /// `bankconf.toml` and its profiles.
        pub mod file {
            pub use crate::harness::setup::profile::{print_config, ConfigChoice, ConfigFile, FromFile, DEFAULT_FILE};
            pub use crate::harness::vocab::errors::ConfigFileError;
        }
    }
    /// The driver over HTTP.
    pub mod driver {
        pub use crate::harness::transport::driver::{DriveError, DriverImpl, HttpDriver};
    }
    /// The `--expect` file.
    pub mod expect {
        pub use crate::harness::rules::expect::{Expectation, Expectations, Expected, Standing};
    }
    /// `bankconf openapi`.
    pub mod openapi {
        pub use crate::openapi::{document, to_pretty_string};
    }
    /// The report formats, and the lines the binary prints.
    pub mod report {
        pub use crate::harness::report::say;
        /// The JSON report.
        pub mod json {
            pub use crate::harness::report::json::render;
        }
        /// `cargo test`'s report of a run.
        pub mod libtest {
            pub use crate::harness::report::libtest::printed;
        }
        /// The JUnit XML report.
        pub mod junit {
            pub use crate::harness::report::junit::render;
        }
        /// The Markdown summary.
        pub mod markdown {
            pub use crate::harness::report::markdown::render;
        }
        /// The HTML report.
        pub mod html {
            pub use crate::harness::report::html::{escape, render, well_formed, CSP};
        }
        /// The terminal's lines and summary.
        pub mod terminal {
            pub use crate::harness::report::terminal::{render_quiet_summary, render_summary, FullText, Lines, Paint};
        }
    }
    /// What a run did, in time (the HTML report's timelines and evidence).
    pub mod trace {
        pub use crate::harness::rules::trace::{Client, Connection, Exchange, Item, Kind, Posted, Trace};
    }
    /// What a report holds besides the library's surface.
    pub mod verdict {
        pub use crate::harness::rules::decided::Decided;
        pub use crate::harness::rules::verdict::{Cited, Link, RootCause};
    }
    /// The latency a run observed (not judged).
    pub mod latency {
        pub use crate::harness::rules::latency::{Stats, Summary};
    }
    /// The secrets a report hides.
    pub mod redact {
        pub use crate::harness::vocab::redact::Redactor;
    }
    /// The transition graph a target reveals.
    pub mod graph {
        pub use crate::harness::rules::graph::{Transition, TransitionGraph};
    }
    /// A run, from its configuration to its report.
    pub mod runner {
        pub use crate::harness::runner::{run_report, Progress};
    }
    /// The JSON Schemas of `schemas/`.
    pub mod schemas {
        pub use crate::schemas::{validate, Schema, Violation, ID_BASE, MAX_MESSAGE_CHARS};
    }
    /// `bankconf self-test`.
    pub mod selftest {
        pub use crate::selftest::{
            browser_missing, config_with_seed, self_test, trial, trial_with, Options, SelfTest, Subject, Trial,
        };
    }
    /// The specification's constants.
    pub mod spec {
        pub use crate::spec::{prefix, ACCOUNTS_UPDATED, ACCOUNT_TYPES, SECTIONS, TRANSACTION_DELETED};
    }
}
