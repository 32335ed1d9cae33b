//! Connection ids a client was answered twice (§4.1: a creation makes a new connection, so it
//! never answers an id it answered before): `create.fresh-ids`' finding over the whole run.
//! Every observation keyed by a connection id (an account list, an event, a driven action, a
//! token) may then concern either connection, and which one depends on which flow created
//! when: the cases resting on it are derived from the finding, the same way every run (issue 51),
//! like the events that name another connection (`rules::misnamed`).

use super::{connections, Judged};
use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::answers::Auth;
use crate::harness::vocab::outcome::{CaseResult, ErrorSource, Failure, IgnoreCause, Outcome};

/// One connection id answered by two or more creations under one key.
#[derive(Clone, Debug)]
pub(crate) struct Reused {
    pub connection: String,
    /// The creations that answered it, by answer-log `seq`.
    pub answers: Vec<u64>,
}

/// What every message of the finding says, and what a case it blocked is known by.
pub(crate) const SAID: &str = "a creation answered a connection id the same client was answered before";

impl std::fmt::Display for Reused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} creations of one client (POST /v1/connections) answered connectionId {}: {SAID}, and a creation \
             makes a new connection (§4.1, §3.2), so what an answer or event naming it concerns cannot be told",
            self.answers.len(),
            self.connection
        )
    }
}

/// The first connection id (in creation order) that two 2xx creations under one key answered.
pub(crate) fn reused(ctx: &RunContext) -> Option<Reused> {
    let mut made: Vec<(Auth, String, u64)> = Vec::new();
    for a in ctx.api.answers().all() {
        if a.sent.method != "POST" || a.segments != ["v1", "connections"] || !(200..300).contains(&a.status) {
            continue;
        }
        let Some(body) = a.body.as_deref().and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok()) else {
            continue;
        };
        let Some(id) = body.get("connectionId").and_then(serde_json::Value::as_str) else { continue };
        made.push((a.sent.auth.clone(), id.to_string(), a.seq));
    }
    made.iter().find_map(|(auth, id, _)| {
        let answers: Vec<u64> = made.iter().filter(|(a, i, _)| a == auth && i == id).map(|(_, _, s)| *s).collect();
        (answers.len() > 1).then(|| Reused { connection: id.clone(), answers })
    })
}

/// The case that fails on [`Reused`].
pub(crate) const OWNER: &str = connections::FRESH_IDS;

/// Whether case `id` rests on which connection an id names: its flow reads, drives or opens a
/// connection (or its accounts, transactions, events) by the id a creation answered. The rest
/// judge a creation's answer alone, the widget script, unknown ids, or each delivery alone.
pub(crate) fn rests_on_connection_id(id: &str) -> bool {
    const AREAS: [&str; 8] =
        ["accounts.", "account.", "auth.", "isolation.", "lifecycle.", "reactions.", "state.", "transactions."];
    const CASES: [&str; 17] = [
        "events.created-announced",
        "events.previous-status-chain",
        "events.time-follows-chain",
        "events.connected-announced",
        "events.failed-auth-announced",
        "events.mfa-required-announced",
        "events.error-announced",
        "events.disconnected-announced",
        "events.distinct-client-ids",
        "events.single-client-id",
        "invariants.identity",
        "invariants.clock",
        "invariants.reach",
        "robustness.bad-limit",
        "robustness.unknown-cursor",
        "widget.open-accepts-token",
        "widget.frontend-no-key",
    ];
    AREAS.iter().any(|a| id.starts_with(a)) || CASES.contains(&id)
}

/// What [`Reused`] makes of case `id`: its owner fails on it; a case resting on which connection
/// an id names is blocked by it.
pub(crate) fn derive(id: &str, r: &Reused, found: &mut Option<Judged>) {
    if id == OWNER {
        let failure = r.answers.iter().fold(Failure::from(r.to_string()), |f, seq| f.on_answer(Some(*seq)));
        found.get_or_insert_with(Default::default).problems.insert(0, failure);
    } else if rests_on_connection_id(id) {
        found.get_or_insert_with(Default::default).blocked =
            Some(format!("not judged: it rests on which connection an id names, and {r} (judged by {OWNER})"));
    }
}

/// A driver's error in a case that rests on which connection an id names, when ids were reused:
/// two causes are possible (the driver, or the target's reused id, which makes the driver act on
/// whichever connection holds it now), so the case is not judged, naming both, the same way in
/// every run.
pub(crate) fn over_driver_error(r: &Reused, result: &mut CaseResult) {
    let Outcome::Error { source: ErrorSource::Driver, message } = &result.outcome else { return };
    if !rests_on_connection_id(&result.case.id) {
        return;
    }
    let reason = format!(
        "not judged: it rests on which connection an id names, and {r} (judged by {OWNER}); its own flow ended in \
         the driver's error, which the reused id may explain: {message}"
    );
    result.outcome = Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason };
}
