//! The conformance run, in layers, one folder each: a folder imports only from itself and the
//! folders below it (no cycle, macros included), and the harness reaches the sandbox only
//! through [`embedded`]. `python3 scripts/layers.py` checks this (its `LAYERS` table is the
//! authority), in CI and in `tests/layers.rs`. Bottom to top:
//!
//! 0. base: `spec`, `schemas`, and the sandbox through its one seam, [`embedded`];
//! 1. [`vocab`]: the cases of `cases/*.toml` and the clause matrix, typed outcomes and
//!    problems, target text made safe for each medium, secrets and their near misses, the
//!    memory budget, a run cut short, what a run tells as it goes, the typed errors;
//! 2. [`rules`]: pure rules over recorded data, no I/O: the event set and its chains, the
//!    explored transition graph, the expectations file of a release gate, latency, the trace of
//!    a run, and the verdict of a finished run;
//! 3. [`transport`]: access to the server under test: HTTP paced and logged (its answer log
//!    and the HAR), TLS and extra headers, typed pages and their walks, the webhook receiver and
//!    its patience, the driver, the headless browser, what dies with the harness, report files
//!    written whole;
//! 4. [`setup`]: the run's flags, its session (setup, prerequisites, seeds), its API and driver
//!    steps, and the preflight;
//! 5. [`fixtures`]: what cases share: the tour, the context a check gets, the property runner,
//!    the recording of a run;
//! 6. [`checks`]: the code of every case, one file per catalogue file;
//! 7. [`runner`]: cases to outcomes, a run to a report, with its root causes;
//! 8. [`report`]: terminal, JSON, JUnit, Markdown, HTML and libtest, from a report alone;
//! 9. [`front`]: the front doors, `bankconf run` (and `cargo test --test conformance`) and
//!    `bankconf check-events`.

pub(crate) mod checks;
mod embedded;
pub(crate) mod fixtures;
pub(crate) mod front;
pub(crate) mod report;
pub(crate) mod rules;
pub(crate) mod runner;
pub(crate) mod setup;
pub(crate) mod transport;
pub(crate) mod vocab;
