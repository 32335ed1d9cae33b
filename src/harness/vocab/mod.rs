//! The run's vocabulary: cases, outcomes, errors, secrets; no I/O.

pub(crate) mod budget;
pub(crate) mod cancel;
pub(crate) mod catalogue;
pub(crate) mod clauses;
pub(crate) mod errors;
pub(crate) mod failure;
pub(crate) mod key_variant;
pub(crate) mod kind;
pub(crate) mod note;
pub(crate) mod outcome;
pub(crate) mod progress;
pub(crate) mod redact;
pub(crate) mod sanitize;
pub(crate) mod unescape;
