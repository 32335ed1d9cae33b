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
use crate::harness::vocab::outcome::{CaseResult, Consequence, ErrorSource, Failure, Foundation, Outcome, Problem};
use serde_json::Value;
use std::collections::HashMap;

/// One id that names two objects for one client: a connection id answered by two or more
/// creations under one key, an account id listed by two connections' lists, or a transaction id
/// listed in the pages of two accounts, under one key.
#[derive(Clone, Debug)]
pub(crate) struct Reused {
    /// The id named twice.
    pub id: String,
    /// The answers that named it, by answer-log `seq`.
    pub answers: Vec<u64>,
    /// What kind of object the id names, and the two owners that listed it.
    pub named: Named,
}

/// The kind of id a [`Reused`] names twice.
#[derive(Clone, Debug)]
pub(crate) enum Named {
    /// A connection id answered by two creations.
    Connection,
    /// An account id listed by the lists of these two connections.
    Account(String, String),
    /// A transaction id listed in the pages of these two accounts.
    Transaction(String, String),
}

/// What every message of the finding says, and what a case it blocked is known by.
pub(crate) const SAID: &str = "a creation answered a connection id the same client was answered before";
/// The same, for an account id listed under two connections.
pub(crate) const SAID_ACCOUNT: &str = "one client was shown one account id in the lists of two connections";
/// The same, for a transaction id listed under two accounts.
pub(crate) const SAID_TRANSACTION: &str = "one client was shown one transaction id in the pages of two accounts";

impl std::fmt::Display for Reused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.named {
            Named::Connection => write!(
                f,
                "{} creations of one client (POST /v1/connections) answered connectionId {}: {SAID}, and a creation \
                 makes a new connection (§4.1, §3.2), so what an answer or event naming it concerns cannot be told",
                self.answers.len(),
                self.id
            ),
            Named::Account(a, b) => write!(
                f,
                "the accounts of {a} and of {b} (GET /v1/connections/{{id}}/accounts) both listed {}: {SAID_ACCOUNT}, \
                 and an account belongs to one connection (§2.2), so what a read naming it concerns cannot be told",
                self.id
            ),
            Named::Transaction(a, b) => write!(
                f,
                "the transactions of {a} and of {b} (GET /v1/accounts/{{id}}/transactions) both listed {}: \
                 {SAID_TRANSACTION}, and a transaction belongs to one account (§2.3), so what a read or event naming \
                 it concerns cannot be told",
                self.id
            ),
        }
    }
}

impl Reused {
    /// Whether case `id` rests on which object this id names.
    pub(crate) fn blocks(&self, id: &str) -> bool {
        match self.named {
            Named::Connection => rests_on_connection_id(id),
            Named::Account(..) => rests_on_account_id(id),
            Named::Transaction(..) => rests_on_transaction_id(id),
        }
    }

    /// The case that fails on it.
    pub(crate) fn owner(&self) -> &'static str {
        match self.named {
            Named::Connection => OWNER,
            Named::Account(..) => ACCOUNT_OWNER,
            Named::Transaction(..) => TRANSACTION_OWNER,
        }
    }
}

/// The first connection id (in creation order) that two 2xx creations under one key answered;
/// else the first account id that two connections' 2xx lists under one key listed; else the
/// first transaction id that two accounts' 2xx pages under one key listed.
pub(crate) fn reused(ctx: &RunContext) -> Option<Reused> {
    reused_connection(ctx).or_else(|| shared_account(ctx)).or_else(|| shared_transaction(ctx))
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
        (answers.len() > 1).then(|| Reused { id: id.clone(), answers, named: Named::Connection })
    })
}

/// The first account id (in answer order) that the 2xx account lists (§4.2) of two connections
/// showed under one key. Which connection a read of it then reaches depends on which flow
/// created when (`tests/foreign/python-identity`'s `account-id-per-client-index` wrote 4 files in 5 runs).
fn shared_account(ctx: &RunContext) -> Option<Reused> {
    let listed = |segments: &[String], body: &Value| match segments {
        [v1, connections, connection, accounts]
            if (v1.as_str(), connections.as_str(), accounts.as_str()) == ("v1", "connections", "accounts") =>
        {
            Some((connection.clone(), body.as_array()?.clone()))
        }
        _ => None,
    };
    listed_twice(ctx, listed).map(|(id, answers, a, b)| Reused { id, answers, named: Named::Account(a, b) })
}

/// The first transaction id (in answer order) that the 2xx pages (§4.3) of two accounts showed
/// under one key. The state model keys a client's reads by id, so which account's transaction
/// a read or event concerns would depend on which was read when (`tests/foreign/python-outsider`'s
/// `txn-id-per-account` and `tests/foreign/node-projected`'s `txn-ids-shared-across-connections` failed
/// `reactions.accounts-updated` in some runs of 5).
fn shared_transaction(ctx: &RunContext) -> Option<Reused> {
    let listed = |segments: &[String], body: &Value| match segments {
        [v1, accounts, account, transactions]
            if (v1.as_str(), accounts.as_str(), transactions.as_str()) == ("v1", "accounts", "transactions") =>
        {
            Some((account.clone(), body.get("data")?.as_array()?.clone()))
        }
        _ => None,
    };
    listed_twice(ctx, listed).map(|(id, answers, a, b)| Reused { id, answers, named: Named::Transaction(a, b) })
}

/// Id → the first owner that listed it, with that answer's `seq`.
type FirstOwners = HashMap<String, (String, u64)>;

/// The first id (in answer order) that the 2xx GET answers `listed` reads as (owner, items) show
/// under two owners for one key: the id, the two answers and the two owners.
fn listed_twice(
    ctx: &RunContext,
    listed: impl Fn(&[String], &Value) -> Option<(String, Vec<Value>)>,
) -> Option<(String, Vec<u64>, String, String)> {
    // Per key, id → the first owner that listed it, with that answer: a map, as the pages of a
    // long account list thousands of ids.
    let mut first: Vec<(Auth, FirstOwners)> = Vec::new();
    for a in ctx.api.answers().all() {
        if a.sent.method != "GET" || !(200..300).contains(&a.status) {
            continue;
        }
        let Some(body) = a.body.as_deref().and_then(|b| serde_json::from_str::<Value>(b).ok()) else { continue };
        let Some((owner, items)) = listed(&a.segments, &body) else { continue };
        let seen = match first.iter().position(|(auth, _)| *auth == a.sent.auth) {
            Some(i) => &mut first[i].1,
            None => {
                first.push((a.sent.auth.clone(), HashMap::new()));
                &mut first.last_mut().expect("just pushed").1
            }
        };
        for id in items.iter().filter_map(|x| x.get("id").and_then(Value::as_str)) {
            match seen.get(id) {
                Some((other, seq)) if *other != owner => {
                    return Some((id.to_string(), vec![*seq, a.seq], other.clone(), owner));
                }
                Some(_) => {}
                None => {
                    seen.insert(id.to_string(), (owner.clone(), a.seq));
                }
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
/// The case that fails on a transaction id listed under two accounts (§2.3).
pub(crate) const TRANSACTION_OWNER: &str = super::state::ONE_OWNER;

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

/// Whether case `id` rests on which transaction an id names: the state rules that key a
/// client's reads of transactions and the events naming them by id, and the reactions judged
/// over them or acting on a transaction by id. The rules over accounts alone, a walk of one
/// account, and the isolation cases (ids may repeat across clients, §2) do not.
pub(crate) fn rests_on_transaction_id(id: &str) -> bool {
    use super::{reactions, state};
    [
        state::DELETIONS_HOLD,
        state::NOTHING_VANISHES,
        state::CHANGES_ANNOUNCED,
        state::FIXED_FIELDS,
        state::DELETED_OWNER,
        reactions::ACCOUNTS_UPDATED,
        reactions::TRANSACTION_DELETED,
    ]
    .contains(&id)
}

/// What [`Reused`] makes of case `id`: its owner fails on it; a case resting on which connection
/// an id names is blocked by it.
pub(crate) fn derive(id: &str, r: &Reused, found: &mut Option<Judged>) {
    let owner = r.owner();
    if id == owner {
        let problem = Problem::found(crate::harness::vocab::kind::InvariantKind::IdReused, [], r.to_string());
        let failure = r.answers.iter().fold(Failure::from(problem), |f, seq| f.on_answer(Some(*seq)));
        found.get_or_insert_with(Default::default).problems.insert(0, failure);
    } else if r.blocks(id) {
        found.get_or_insert_with(Default::default).blocked = Some(crate::harness::checks::Blocked {
            on: owner,
            foundation: Foundation::IdOwner,
            why: format!("it rests on which object an id names, and {r} (judged by {owner})"),
        });
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
    let why = format!(
        "it rests on which object an id names, and {r} (judged by {}); its own flow ended in the driver's \
         error, which the reused id may explain: {message}",
        r.owner()
    );
    result.outcome = Outcome::rests_on(r.owner(), &why);
    result.consequence_of = Some(Consequence { root: r.owner().to_string(), foundation: Foundation::IdOwner });
}
