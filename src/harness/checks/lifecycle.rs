//! §3, §6 over random paths (`lifecycle.random-sequences`): proptest generates sequences of driver actions, each
//! played on a fresh connection, and after every step the target accepted, the events must tell
//! the truth about the path taken. The spec shows one transition only (§3.2), so a target is
//! never failed for taking or refusing a transition (driver exit 4): only for events that
//! contradict each other or the API.

use crate::harness::chain;
use crate::harness::delivery::{labels, Delivery};
use crate::harness::driver::{DriveArgs, DriveError, DriverAction};
use crate::harness::event_rules;
use crate::harness::fixtures::RunContext;
use crate::harness::graph::{Transition, TransitionGraph};
use crate::harness::har;
use crate::harness::http::Auth;
use crate::harness::outcome::{ErrorSource, Stop};
use crate::harness::property;
use crate::harness::session::Session;
use crate::harness::tour::{announcing_event, react, Before};
use crate::spec::{prefix, Action, ConnectionState};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::Arc;

crate::cases! {
    TRANSITION_GRAPH = "lifecycle.transition-graph" => transition_graph;
    RANDOM_SEQUENCES = "lifecycle.random-sequences" => random_sequences;
}

/// Most sequences played at once while exploring.
const EXPLORE_AT_ONCE: usize = 8;

/// Explores the transition graph as the target reveals it, whatever the seed: from the created
/// state, and from every state an accepted action reaches, every action is tried once (breadth
/// first, the states of a round concurrently). A connection is brought along the shortest known
/// path, then tries the untried actions one after another until one changes its state (a
/// refused action changes nothing), so a fresh connection is needed only per state change. The
/// graph follows the driver's answers, so exploring never waits for a webhook; every played
/// sequence is judged as in [`play`] once its events are in, all those waits at the same time.
/// The graph goes into the reports.
async fn transition_graph(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let mut graph = TransitionGraph { reached: vec![ConnectionState::Created], edges: Vec::new() };
    let mut frontier: Vec<Vec<Action>> = vec![Vec::new()];
    let permits = Arc::new(tokio::sync::Semaphore::new(EXPLORE_AT_ONCE));
    // The judgements of the played sequences, each waiting for its events meanwhile.
    let mut judging = tokio::task::JoinSet::new();
    // Each round goes one step deeper; 8 states bound it.
    for _ in 0..ConnectionState::ALL.len() {
        let mut set = tokio::task::JoinSet::new();
        for path in &frontier {
            let (ctx, permits, path) = (ctx.clone(), permits.clone(), path.clone());
            set.spawn(har::in_case(har::current_case(), async move {
                let mut untried = Action::ALL.to_vec();
                let mut connections = Vec::new();
                while !untried.is_empty() {
                    let sequence: Vec<Action> = path.iter().chain(&untried).copied().collect();
                    let permit = permits.clone().acquire_owned().await;
                    let driven = drive(&ctx, &sequence, path.len()).await;
                    drop(permit);
                    let tried = driven.as_ref().map_or(0, |(played, _)| played.len().saturating_sub(path.len()));
                    let played = sequence[..(path.len() + tried).min(sequence.len())].to_vec();
                    connections.push((path.len(), played, driven));
                    if tried == 0 {
                        break;
                    }
                    untried.drain(..tried.min(untried.len()));
                }
                connections
            }));
        }
        let mut next = Vec::new();
        while let Some(joined) = set.join_next().await {
            let connections = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
            for (path_len, sequence, driven) in connections {
                let (played, pending) = match driven {
                    Ok(driven) => driven,
                    Err(Stop::Fail(f)) => {
                        // The graph so far goes into the reports: it is needed most now.
                        record_partial(&ctx, &graph);
                        return Err(explored(f.message, &sequence));
                    }
                    Err(e) if e.is_transport() => return Err(e),
                    Err(Stop::Ignore(..)) => continue,
                    Err(e) => return Err(e),
                };
                let ctx = ctx.clone();
                let judged = sequence.clone();
                judging.spawn(har::in_case(har::current_case(), async move { (judged, pending.judge(&ctx).await) }));
                // The steps past the path are the ones this connection explored.
                for &(from, action, transition) in played.iter().skip(path_len) {
                    if !graph.edges.contains(&(from, action, transition)) {
                        graph.edges.push((from, action, transition));
                    }
                    if let Transition::Accepted(to) = transition {
                        if !graph.reached.contains(&to) {
                            graph.reached.push(to);
                            next.push(sequence[..path_len].iter().copied().chain([action]).collect());
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    while let Some(joined) = judging.join_next().await {
        let (sequence, judged) = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
        match judged {
            Ok(()) => {}
            Err(Stop::Fail(f)) => {
                record_partial(&ctx, &graph);
                return Err(explored(f.message, &sequence));
            }
            Err(e) if e.is_transport() => return Err(e),
            Err(Stop::Ignore(..)) => {}
            Err(e) => return Err(e),
        }
    }
    graph.edges.sort();
    ctx.record_graph(graph);
    Ok(())
}

/// Records the graph explored so far, for the reports of a failed exploration.
fn record_partial(ctx: &RunContext, graph: &TransitionGraph) {
    let mut graph = graph.clone();
    graph.edges.sort();
    ctx.record_graph(graph);
}

/// The failure of an explored sequence (its message names the request that shows it).
fn explored(message: String, sequence: &[Action]) -> Stop {
    Stop::fail(format!("{message} [explored sequence: {sequence:?}]"))
}

async fn random_sequences(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let run = ctx.clone();
    property::for_all(&ctx, RANDOM_SEQUENCES, sequences(), move |actions| {
        let ctx = run.clone();
        async move { play(&ctx, &actions).await.map(|_| ()) }
    })
    .await
}

/// Longest generated sequence.
pub const MAX_STEPS: usize = 6;

/// Sequences of 1 to [`MAX_STEPS`] actions; shrinking drops actions and turns them into
/// `connect`. Half the sequences start with `connect`, and `connect` and the data actions are
/// drawn more often than the others: the data actions only mean something on a CONNECTED
/// connection.
pub fn sequences() -> impl Strategy<Value = Vec<Action>, Tree: Send> {
    use Action::*;
    let first = prop_oneof![Just(Connect), prop::sample::select(Action::ALL.to_vec())];
    let weighted = vec![
        Connect,
        Connect,
        UpdateAccounts,
        UpdateAccounts,
        DeleteTransaction,
        DeleteTransaction,
        FailAuth,
        RequireMfa,
        Error,
        Disconnect,
    ];
    (first, prop::collection::vec(prop::sample::select(weighted), 0..MAX_STEPS)).prop_map(|(first, rest)| {
        let mut actions = vec![first];
        actions.extend(rest);
        actions
    })
}

/// What happened to one step, for messages: `connect` accepted, `error` refused.
struct Trace {
    steps: Vec<String>,
}

impl Trace {
    fn fail(&self, connection: &str, problem: String, deliveries: &[Delivery]) -> Stop {
        Stop::fail(format!(
            "after [{}] on {connection}: {problem}; events {}",
            self.steps.join(", "),
            labels(deliveries)
        ))
    }
}

/// The steps of a played sequence: each action with the state it was tried from and what the
/// target did.
pub type Played = Vec<(ConnectionState, Action, Transition)>;

/// Plays `actions` on a fresh connection, then judges what the events and the API tell.
pub async fn play(ctx: &Session, actions: &[Action]) -> Result<Played, Stop> {
    let (played, pending) = drive(ctx, actions, actions.len()).await?;
    pending.judge(ctx).await?;
    Ok(played)
}

/// A driven sequence, to judge once its events are in: no step waits for the webhooks of the
/// one before (the spec puts no read between them, §6.3).
pub struct Pending {
    id: String,
    trace: Trace,
    /// The events the accepted steps announce, one per state change (§3.1, §6), in order.
    expected: Vec<&'static str>,
    /// The last data action the target accepted, when no state change followed it: its
    /// reaction is judged after its event (§6.3).
    reaction: Option<(Action, u64, Option<Before>)>,
}

/// Drives `actions` on a fresh connection, following the driver's answers: an accepted action
/// moves the connection to the state it targets (a data action keeps the state). From step
/// `explore_from` on, the first action that changes the state is the last one driven.
pub async fn drive(ctx: &Session, actions: &[Action], explore_from: usize) -> Result<(Played, Pending), Stop> {
    let mut played = Played::new();
    let receiver = ctx.receiver()?;
    let driver = ctx.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver"))?;
    let created = ctx.create_connection().await?;
    let id = created.connection_id.clone();
    let mut trace = Trace { steps: vec!["create".to_string()] };
    // The connection starts CREATED, announced by connection.created (§3.2).
    let mut state = ConnectionState::Created;
    let mut expected = vec!["connection.created"];
    let mut reaction = None;
    for (at, &action) in actions.iter().enumerate() {
        let changed = played.last().is_some_and(|(from, _, t)| matches!(t, Transition::Accepted(to) if to != from));
        if at > explore_from && changed {
            break;
        }
        // Data actions target what a CONNECTED connection lists; otherwise the driver picks.
        let data_action = matches!(action, Action::UpdateAccounts | Action::DeleteTransaction);
        let before = if data_action && state == ConnectionState::Connected {
            Some(Before::prepare(ctx, &id, action).await?)
        } else {
            None
        };
        let (account, transaction) =
            before.as_ref().map_or((None, None), |b| (b.account.clone(), b.transaction.clone()));
        let args = DriveArgs {
            connection_id: Some(id.clone()),
            widget_token: created.widget_token.clone(),
            account_id: account,
            transaction_id: transaction,
            webhook_url: Some(receiver.url().to_string()),
        };
        if let Some(account) = &args.account_id {
            crate::harness::pagination::forget(&ctx.api, account);
        }
        // Two steps within one millisecond could announce events of equal content and
        // `occurredAt`, which read as one re-stamped retry (`delivery::unique`): a step apart.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        // Deliveries from here on are the step's: the target may announce before the driver returns.
        let since = receiver.arrived_so_far();
        let from = state;
        let call = driver.run(DriverAction::Act(action), &args);
        let driven = ctx.api.recorder().driven(DriverAction::Act(action), &args, call).await;
        if let Some(account) = &args.account_id {
            crate::harness::pagination::forget(&ctx.api, account);
        }
        match driven {
            Ok(()) => trace.steps.push(format!("{action}")),
            // Refused from this state, or not supported: not a failure; the sequence goes on.
            Err(DriveError::Refused(_)) => {
                trace.steps.push(format!("{action} (refused)"));
                played.push((from, action, Transition::Refused));
                continue;
            }
            Err(DriveError::Unsupported(_)) => {
                trace.steps.push(format!("{action} (unsupported)"));
                played.push((from, action, Transition::Unsupported));
                continue;
            }
            Err(e @ DriveError::Failed(_)) => return Err(Stop::from(e)),
        }
        // Already in the target state: the target may accept without a change, hence no event.
        if action.target_state() == Some(state) {
            played.push((from, action, Transition::Accepted(state)));
            continue;
        }
        expected.push(announcing_event(action));
        if action.target_state().is_some() {
            // The state changed: an earlier data action's reaction can no longer be read.
            reaction = None;
        }
        state = action.target_state().unwrap_or(state);
        played.push((from, action, Transition::Accepted(state)));
        if data_action {
            reaction = Some((action, since, before));
        }
    }
    Ok((played, Pending { id, trace, expected, reaction }))
}

impl Pending {
    /// Waits (bounded) until every expected event has arrived and the chain links up, then
    /// judges: each delivery's schema and envelope (§6.1, §6.2), the chain (§3, §6.2), the
    /// accounts against the last announced state (§3.2, §4.2), and the last data action's
    /// reaction (§6.3).
    pub async fn judge(self, ctx: &Session) -> Result<(), Stop> {
        let Pending { id, trace, expected, reaction } = self;
        let receiver = ctx.receiver()?;
        let missing = |ds: &[Delivery]| {
            expected.iter().copied().find(|t| {
                let want = expected.iter().filter(|e| e == &t).count();
                ds.iter().filter(|d| d.event_type() == Some(t)).count() < want
            })
        };
        let started = std::time::Instant::now();
        let what = format!("{} for {id}", expected.join(", "));
        let (_, deliveries) = receiver
            .wait_until(&what, &id, ctx.config.event_wait(), |ds| missing(ds).is_none() && chain::resolve(ds).is_ok())
            .await;
        if let Some(absent) = missing(&deliveries) {
            let problem = format!(
                "the target accepted the action, but no {absent} arrived ({}){}",
                receiver.patience.describe(started.elapsed()),
                receiver.refusals()
            );
            return Err(trace.fail(&id, problem, &deliveries));
        }
        // Every delivery on its own: schema (which also asserts the prefixes of the ids it
        // names, §2) and envelope agreement (§6.2).
        event_rules::schema(&deliveries)
            .and_then(|()| event_rules::envelope_agrees(&deliveries))
            .map_err(|problem| trace.fail(&id, problem.to_string(), &deliveries))?;
        let state = chain::resolve(&deliveries).map_err(|problem| trace.fail(&id, problem, &deliveries))?;
        accounts_follow_state(ctx, &id, state, &trace).await?;
        if let Some((action, since, before)) = reaction {
            // Steps are not awaited one by one, so an earlier step's event may arrive after this
            // one began: the event of this step names what it was driven on (else the latest).
            let (field, wanted) = match (action, &before) {
                (Action::DeleteTransaction, Some(b)) => ("/data/transactionId", b.transaction.clone()),
                (_, Some(b)) => ("/data/accountId", b.account.clone()),
                _ => ("", None),
            };
            let candidates: Vec<&Delivery> = deliveries
                .iter()
                .filter(|d| d.event_type() == Some(announcing_event(action)) && d.seq >= since)
                .collect();
            let event = candidates
                .iter()
                .find(|d| wanted.is_some() && d.body.pointer(field).and_then(Value::as_str) == wanted.as_deref())
                .or(candidates.last())
                .copied();
            react(ctx, &id, action, event, before.as_ref(), &Auth::Primary).await.map_err(|e| {
                if e.is_fail() {
                    trace.fail(&id, e.to_string(), &deliveries)
                } else {
                    e
                }
            })?;
        }
        Ok(())
    }
}

/// Accounts are readable exactly when the last announced state is connected (§3.2, §4.2).
async fn accounts_follow_state(ctx: &Session, id: &str, state: ConnectionState, trace: &Trace) -> Result<(), Stop> {
    let exchange = ctx.api.get(&["v1", "connections", id, "accounts"], &[]).await?;
    let deliveries = || ctx.receiver.as_ref().map(|r| r.for_connection(id)).unwrap_or_default();
    match (state == ConnectionState::Connected, exchange.is_success()) {
        (true, false) => Err(trace.fail(
            id,
            format!(
                "{}: connection.connected was announced last, but accounts are refused ({})",
                exchange.request,
                exchange.summary()
            ),
            &deliveries(),
        )),
        (false, true) => Err(trace.fail(
            id,
            format!(
                "{}: the last announced state is {state}, but accounts are served (status {})",
                exchange.request, exchange.status
            ),
            &deliveries(),
        )),
        _ => {
            if state == ConnectionState::Connected {
                if let Ok(Value::Array(accounts)) = exchange.success_json() {
                    if let Some(bad) = accounts
                        .iter()
                        .filter_map(|a| a.get("id").and_then(Value::as_str))
                        .find(|a| !a.starts_with(prefix::ACCOUNT))
                    {
                        return Err(trace.fail(
                            id,
                            format!("{}: account id {bad:?} does not start with {}", exchange.request, prefix::ACCOUNT),
                            &deliveries(),
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}
