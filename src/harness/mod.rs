//! The conformance run, in layers; a module imports only from its own layer and the layers
//! below (no cycle), and reaches the sandbox only through [`embedded`]. `python3
//! scripts/layers.py` checks this (its `LAYERS` table is the authority), in CI and in
//! `tests/layers.rs`:
//!
//! 0. base: `spec`, `schemas`, and the sandbox through its one seam, [`embedded`];
//! 1. vocabulary: [`catalogue`] (the cases of `cases/*.toml`), [`clauses`] (the clause matrix
//!    of `cases/clauses.toml`), [`outcome`] (typed outcomes,
//!    problems, schema validation), [`sanitize`] (target text made safe for each medium),
//!    [`budget`] (the run's memory budget), [`redact`] (secrets), [`key_variant`] (near misses of a
//!    key, and the shell expressions that make them), [`cancel`] (a run cut short by a
//!    signal or its deadline), [`progress`] (what a run tells as it goes: the runner calls it,
//!    a report implements it), [`errors`] (the typed errors: [`errors::SetupError`], what stops
//!    a run before it starts, and each step's own);
//! 2. pure rules over recorded data, no I/O: [`delivery`], [`chain`], [`event_rules`], the
//!    explored [`graph`] of transitions, the [`expect`] file of a release gate, [`latency`],
//!    [`trace`] (what a run did, in time, for the HTML report), and [`verdict`] (a finished run:
//!    its results, gate and exit code);
//! 3. access to the server under test: [`config`] (the run's flags, checked once into the
//!    [`config::RunPlan`] that everything past validation reads),
//!    [`files`] (report files written whole),
//!    [`reads`] (typed pages, and the run's cache of them), [`http`] (paced by [`throttle`]; every exchange kept
//!    in its answer log for the response checks, and recorded by [`har`]), [`browser`] (the
//!    headless Chromium of the widget cases, driven by [`cdp`]), [`orphans`] (what dies with the harness, even on
//!    SIGKILL), [`pagination`], [`receiver`] (waits bounded by
//!    [`patience`]), [`transport`] (TLS and extra headers), [`driver`], [`session`] (setup, prerequisites, seeds), [`steps`] (API and
//!    driver steps) and [`preflight`] (the setup checked before any case);
//! 4. fixtures shared by cases: [`tour`], [`fixtures`] (the [`fixtures::RunContext`] a check
//!    gets), [`property`] (the property runner), [`recording`] (a run's trace gathered at its end);
//! 5. [`checks`]: the code of every case, flow checks and response checks, one file per
//!    catalogue file;
//! 6. [`runner`]: cases to outcomes (flows, then the response checks over every answer), a run
//!    to a [`verdict::Report`], with its [`causes`] (one fact that explains many failures);
//! 7. [`report`]: terminal, JSON, JUnit, Markdown and libtest, from a report alone;
//! 8. front doors: [`command`] (`bankconf run`, `cargo test --test conformance`) and
//!    [`check_events`] (`bankconf check-events`, over a capture).

mod answers;
pub(crate) mod browser;
mod budget;
pub(crate) mod cancel;
pub(crate) mod catalogue;
mod causes;
pub(crate) mod cdp;
mod chain;
pub(crate) mod check_events;
pub(crate) mod checks;
pub(crate) mod clauses;
pub(crate) mod command;
pub(crate) mod config;
pub(crate) mod delivery;
pub(crate) mod driver;
mod embedded;
pub(crate) mod errors;
mod event_rules;
pub(crate) mod expect;
mod files;
mod fixtures;
pub(crate) mod graph;
mod har;
mod http;
mod key_variant;
pub(crate) mod latency;
mod orphans;
pub(crate) mod outcome;
mod pagination;
mod patience;
mod plan;
mod preflight;
pub(crate) mod probe;
pub(crate) mod progress;
mod property;
mod reads;
mod receiver;
mod recording;
pub(crate) mod redact;
pub(crate) mod report;
mod reproduce;
mod rerun;
pub(crate) mod runner;
mod sanitize;
mod session;
mod steps;
mod throttle;
mod tour;
pub(crate) mod trace;
mod transport;
pub(crate) mod verdict;
