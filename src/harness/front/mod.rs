//! The front doors: `bankconf run` / `cargo test --test conformance`, and `bankconf check-events`.

pub(crate) mod check_events;
pub(crate) mod command;
