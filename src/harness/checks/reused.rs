//! Ids that name two objects for one client, over the whole run: a connection id a client was
//! answered twice (§4.1: a creation makes a new connection, so it never answers an id it
//! answered before), `create.fresh-ids`' finding; an account id two connections' lists showed
//! (§2.2: an account belongs to one connection), `invariants.identity`'s.
//! Every observation keyed by a connection id (an account list, an event, a driven action, a
//! token) may then concern either connection, and which one depends on which flow created
//! when: the cases resting on it are derived from the finding, the same way every run (issue 51),
//! like the events that name another connection (`rules::misnamed`).

use super::{connections, Judged};
use crate::harness::fixtures::context::RunContext;
use crate::harness::transport::answers::Auth;
use crate::harness::vocab::outcome::{CaseResult, ErrorSource, Failure, IgnoreCause, Outcome};

/// One id that names two objects for one client: a connection id answered by two or more
/// creations under one key, or an account id listed by two connections' lists under one key.
#[derive(Clone, Debug)]
pub(crate) struct Reused {
    /// The id named twice.
    pub id: String,
    /// The answers that named it, by answer-log `seq`.
    pub answers: Vec<u64>,
    /// The two connections whose lists showed it, for an account id; `None` for a connection id.
    pub listed_by: Option<(String, String)>,
}

/// What every message of the finding says, and what a case it blocked is known by.
pub(crate) const SAID: &str = "a creation answered a connection id the same client was answered before";
/// The same, for an account id listed under two connections.
pub(crate) const SAID_ACCOUNT: &str = "one client was shown one account id in the lists of two connections";

impl std::fmt::Display for Reused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.listed_by {
            None => write!(
                f,
                "{} creations of one client (POST /v1/connections) answered connectionId {}: {SAID}, and a creation \
                 makes a new connection (§4.1, §3.2), so what an answer or event naming it concerns cannot be told",
                self.answers.len(),
                self.id
            ),
            Some((a, b)) => write!(
                f,
                "the accounts of {a} and of {b} (GET /v1/connections/{{id}}/accounts) both listed {}: {SAID_ACCOUNT}, \
                 and an account belongs to one connection (§2.2), so what a read naming it concerns cannot be told",
                self.id
            ),
        }
    }
}

impl Reused {
    /// Whether case `id` rests on which object this id names.
    pub(crate) fn blocks(&self, id: &str) -> bool {
        match self.listed_by {
            None => rests_on_connection_id(id),
            Some(_) => rests_on_account_id(id),
        }
    }

    /// The case that fails on it.
    pub(crate) fn owner(&self) -> &'static str {
        match self.listed_by {
            None => OWNER,
            Some(_) => ACCOUNT_OWNER,
        }
    }
}

/// The first connection id (in creation order) that two 2xx creations under one key answered;
/// else the first account id that two connections' 2xx lists under one key listed.
pub(crate) fn reused(ctx: &RunContext) -> Option<Reused> {
    reused_connection(ctx).or_else(|| shared_account(ctx))
}

fn reused_connection(ctx: &RunContext) -> Option<Reused> {
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
        (answers.len() > 1).then(|| Reused { id: id.clone(), answers, listed_by: None })
    })
}

/// The first account id (in answer order) that the 2xx account lists (§4.2) of two connections
/// showed under one key. Which connection a read of it then reaches depends on which flow
/// created when (`tests/foreign-9`'s `account-id-per-client-index` wrote 4 files in 5 runs).
fn shared_account(ctx: &RunContext) -> Option<Reused> {
    // (key, account id) → the first connection that listed it, with that answer.
    let mut first: Vec<(Auth, String, String, u64)> = Vec::new();
    for a in ctx.api.answers().all() {
        let [v1, connections, connection, accounts] = a.segments.as_slice() else { continue };
        if (v1.as_str(), connections.as_str(), accounts.as_str()) != ("v1", "connections", "accounts")
            || a.sent.method != "GET"
            || !(200..300).contains(&a.status)
        {
            continue;
        }
        let Some(body) = a.body.as_deref().and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok()) else {
            continue;
        };
        let ids = body.as_array().into_iter().flatten().filter_map(|x| x.get("id").and_then(serde_json::Value::as_str));
        for id in ids {
            match first.iter().find(|(auth, account, _, _)| *auth == a.sent.auth && account == id) {
                Some((_, _, other, seq)) if other != connection => {
                    return Some(Reused {
                        id: id.to_string(),
                        answers: vec![*seq, a.seq],
                        listed_by: Some((other.clone(), connection.clone())),
                    });
                }
                Some(_) => {}
                None => first.push((a.sent.auth.clone(), id.to_string(), connection.clone(), a.seq)),
            }
        }
    }
    None
}

/// The case that fails on a reused connection id.
pub(crate) const OWNER: &str = connections::FRESH_IDS;
/// The case that fails on an account id listed under two connections (§2.2, the identity
/// rulings of `docs/checks.md`).
pub(crate) const ACCOUNT_OWNER: &str = super::invariants::IDENTITY;

/// Whether case `id` rests on which connection an id names: its flow reads, drives or opens a
/// connection (or its accounts, transactions, events) by the id a creation answered. The rest
/// judge a creation's answer alone, the widget script, unknown ids, or each delivery alone.
pub(crate) fn rests_on_connection_id(id: &str) -> bool {
    const AREAS: [&str; 8] =
        ["accounts.", "account.", "auth.", "isolation.", "lifecycle.", "reactions.", "state.", "transactions."];
    const CASES: [&str; 18] = [
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
        "invariants.cause",
        "invariants.clock",
        "invariants.reach",
        "robustness.bad-limit",
        "robustness.unknown-cursor",
        "widget.open-accepts-token",
        "widget.frontend-no-key",
    ];
    AREAS.iter().any(|a| id.starts_with(a)) || CASES.contains(&id)
}

/// Whether case `id` rests on which account an id names: its flow reads an account, its
/// transactions, or acts on them by id (the events' and the widget's cases do not).
pub(crate) fn rests_on_account_id(id: &str) -> bool {
    const AREAS: [&str; 7] =
        ["accounts.", "account.", "isolation.", "lifecycle.", "reactions.", "state.", "transactions."];
    AREAS.iter().any(|a| id.starts_with(a))
        || ["invariants.cause", "invariants.clock", "invariants.reach"].contains(&id)
}

/// What [`Reused`] makes of case `id`: its owner fails on it; a case resting on which connection
/// an id names is blocked by it.
pub(crate) fn derive(id: &str, r: &Reused, found: &mut Option<Judged>) {
    let owner = r.owner();
    if id == owner {
        let failure = r.answers.iter().fold(Failure::from(r.to_string()), |f, seq| f.on_answer(Some(*seq)));
        found.get_or_insert_with(Default::default).problems.insert(0, failure);
    } else if r.blocks(id) {
        found.get_or_insert_with(Default::default).blocked =
            Some(format!("not judged: it rests on which object an id names, and {r} (judged by {owner})"));
    }
}

/// A driver's error in a case that rests on which object an id names, when ids were reused:
/// two causes are possible (the driver, or the target's reused id, which makes the driver act on
/// whichever connection holds it now), so the case is not judged, naming both, the same way in
/// every run.
pub(crate) fn over_driver_error(r: &Reused, result: &mut CaseResult) {
    let Outcome::Error { source: ErrorSource::Driver, message } = &result.outcome else { return };
    if !r.blocks(&result.case.id) {
        return;
    }
    let reason = format!(
        "not judged: it rests on which object an id names, and {r} (judged by {}); its own flow ended in the \
         driver's error, which the reused id may explain: {message}",
        r.owner()
    );
    result.outcome = Outcome::Ignored { cause: IgnoreCause::MissingPrerequisite, reason };
}
