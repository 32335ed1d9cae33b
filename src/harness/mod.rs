//! The conformance run.
