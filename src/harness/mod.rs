//! The conformance run, in layers; a module imports only from the layers below it (checked by
//! `python3 scripts/import-cycles.py`):
//!
//! 1. vocabulary: [`catalogue`] (the cases of `cases/*.toml`), [`outcome`] (typed outcomes,
//!    problems, schema validation), [`config`] (the run's flags), [`sanitize`] (target text
//!    made safe for each medium), [`budget`] (the run's memory budget);
//! 2. pure rules over recorded data, no I/O: [`delivery`], [`chain`], [`event_rules`], the
//!    [`endpoint_rules`] every answer keeps, the explored [`graph`] of transitions, and the
//!    [`expect`] file of a release gate;
//! 3. access to the server under test: [`http`] (paced by [`throttle`]; what it sends and
//!    receives recorded by [`har`], with the run's [`latency`]), [`browser`] (the
//!    headless Chromium of the widget cases), [`pagination`],
//!    [`receiver`] (waits bounded by [`patience`]), [`driver`],
//!    [`redact`], [`session`] (setup, prerequisites, seeds), [`steps`] (API and driver steps)
//!    and [`preflight`] (the setup checked before any case);
//! 4. fixtures shared by cases: [`tour`], [`fixtures`] (the [`fixtures::RunContext`] a check
//!    gets), [`property`] (the property runner);
//! 5. [`checks`]: the code of every case, one file per catalogue file;
//! 6. [`runner`]: cases to outcomes, a run to a report;
//! 7. [`report`]: terminal, JSON, JUnit and Markdown, from outcomes alone;
//! 8. [`check_events`]: `bankconf check-events`, from the rules, outcomes, catalogue and reports.

pub mod browser;
pub mod budget;
pub mod catalogue;
pub mod chain;
pub mod check_events;
pub mod checks;
pub mod command;
pub mod config;
pub mod delivery;
pub mod driver;
pub mod event_rules;
pub mod expect;
pub mod fixtures;
pub mod graph;
pub mod har;
pub mod http;
pub mod latency;
pub mod outcome;
pub mod pagination;
pub mod patience;
pub mod preflight;
pub mod property;
pub mod receiver;
pub mod redact;
pub mod report;
pub mod runner;
pub mod sanitize;
pub mod session;
pub mod steps;
pub mod throttle;
pub mod tour;
pub mod verdict;
