//! Pure rules over recorded data: events, chains, the transition graph, gates, verdicts; no I/O.

pub(crate) mod chain;
pub(crate) mod decided;
pub(crate) mod delivery;
pub(crate) mod event_rules;
pub(crate) mod expect;
pub(crate) mod graph;
pub(crate) mod http;
pub(crate) mod invariants;
pub(crate) mod latency;
pub(crate) mod members;
pub(crate) mod misnamed;
pub(crate) mod roots;
pub(crate) mod secrets;
pub(crate) mod trace;
pub(crate) mod verdict;
