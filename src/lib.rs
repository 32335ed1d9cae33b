//! bankconf: a conformance test harness for the Bank Connection Aggregation Service.
//!
//! # The library surface
//! What a team testing its own server needs, and nothing else:
//! - [`Conformance`]: a run built in code, [`Conformance::run`] for its [`Report`], or
//!   [`Conformance::tests`] as the `main` of a `harness = false` test (one trial per case);
//! - [`Driver`]: how the run moves the server's state ([`Answer`] done, refused, not
//!   supported), implemented in Rust against an in-process server, or given as a command or URL;
//! - [`Level`], [`Report`], [`Action`], and [`sandbox`], the reference implementation (a
//!   starting point, and the server of the example in `examples/implementer/`).
//!
//! The crate has three parts, kept apart on purpose (`scripts/layers.py` checks it):
//! `spec` and `schemas` (what the specification says), [`sandbox`] (the reference server), and
//! `harness` (the conformance run). Modules outside this surface are public only for bankconf's
//! own binary and tests, are hidden from the documentation, and may change in any release.

pub mod conformance;
#[doc(hidden)]
pub mod harness;
#[doc(hidden)]
pub mod openapi;
pub mod sandbox;
#[doc(hidden)]
pub mod schemas;
#[doc(hidden)]
pub mod selftest;
#[doc(hidden)]
pub mod spec;

pub use conformance::Conformance;
pub use harness::catalogue::Level;
pub use harness::driver::{Answer, DriveArgs, DriveFuture, Driver, DriverAction};
pub use harness::report::Report;
pub use spec::Action;
