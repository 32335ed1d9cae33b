//! A run's flags, its session (setup, prerequisites, seeds), its steps and its preflight.

pub(crate) mod completing;
pub(crate) mod config;
pub(crate) mod plan;
pub(crate) mod preflight;
pub(crate) mod profile;
pub(crate) mod rerun;
pub(crate) mod session;
pub(crate) mod steps;
