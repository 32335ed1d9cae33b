//! bankconf: a conformance test harness for the Bank Connection Aggregation Service.
//!
//! The crate has three parts, kept apart on purpose:
//! - [`spec`] and [`schemas`]: what the specification says, as Rust vocabulary and JSON Schemas;
//! - [`sandbox`]: an embedded reference implementation of the service (the default target);
//! - [`harness`]: the conformance run (catalogue, checks, reports) that judges any target.

pub mod conformance;
pub mod harness;
pub mod openapi;
pub mod sandbox;
pub mod schemas;
pub mod selftest;
pub mod spec;

pub use conformance::Conformance;
pub use harness::catalogue::Level;
pub use harness::driver::{Answer, DriveArgs, DriveFuture, Driver, DriverAction};
pub use harness::report::Report;
