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
/// state, and from every state an accepted action reaches, every action is tried once, each on a
/// fresh connection along the shortest known path (breadth first, played concurrently). Every
/// accepted step is judged as in [`play`]; the graph goes into the reports.
async fn transition_graph(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let mut graph = TransitionGraph { reached: vec![ConnectionState::Created], edges: Vec::new() };
    let mut paths: Vec<(ConnectionState, Vec<Action>)> = vec![(ConnectionState::Created, Vec::new())];
    let mut frontier = paths.clone();
    let permits = Arc::new(tokio::sync::Semaphore::new(EXPLORE_AT_ONCE));
    // Each round goes one step deeper; 8 states bound it.
    for _ in 0..ConnectionState::ALL.len() {
        let mut set = tokio::task::JoinSet::new();
        for (_, path) in &frontier {
            for action in Action::ALL {
                let sequence: Vec<Action> = path.iter().copied().chain([action]).collect();
                let (ctx, permits) = (ctx.clone(), permits.clone());
                set.spawn(crate::harness::har::in_case(crate::harness::har::current_case(), async move {
                    let _permit = permits.acquire_owned().await;
                    let played = play(&ctx, &sequence).await;
                    (sequence, played)
                }));
            }
        }
        let mut next = Vec::new();
        while let Some(joined) = set.join_next().await {
            let (sequence, played) = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
            let played = match played {
                Ok(played) => played,
                Err(Stop::Fail(f)) => {
                    return Err(Stop::fail(format!("{} [explored sequence: {sequence:?}]", f.message)));
                }
                Err(Stop::Ignore(..)) => continue,
                Err(e) => return Err(e),
            };
            let Some(&(from, action, transition)) = played.last().filter(|(_, a, _)| sequence.last() == Some(a)) else {
                continue;
            };
            if !graph.edges.contains(&(from, action, transition)) {
                graph.edges.push((from, action, transition));
            }
            if let Transition::Accepted(to) = transition {
                if !graph.reached.contains(&to) {
                    graph.reached.push(to);
                    paths.push((to, sequence.clone()));
                    next.push((to, sequence));
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    graph.edges.sort();
    ctx.record_graph(graph);
    Ok(())
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

/// Plays `actions` on a fresh connection, checking after every accepted step.
pub async fn play(ctx: &Session, actions: &[Action]) -> Result<Played, Stop> {
    let mut played = Played::new();
    let receiver = ctx.receiver()?;
    let driver = ctx.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver"))?;
    let created = ctx.create_connection().await?;
    let id = created.connection_id.clone();
    let mut trace = Trace { steps: vec!["create".to_string()] };
    // The connection starts CREATED, announced by connection.created (§3.2).
    let mut state = settle(ctx, &id, "connection.created", 0, &trace).await?;
    accounts_follow_state(ctx, &id, state, &trace).await?;
    for &action in actions {
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
        // Deliveries from here on are the step's: the target may announce before the driver returns.
        let since = receiver.arrived_so_far();
        let from = state;
        let call = driver.run(DriverAction::Act(action), &args);
        match ctx.api.recorder().driven(DriverAction::Act(action), &args, call).await {
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
        state = settle(ctx, &id, announcing_event(action), since, &trace).await?;
        played.push((from, action, Transition::Accepted(state)));
        accounts_follow_state(ctx, &id, state, &trace).await?;
        if matches!(action, Action::UpdateAccounts | Action::DeleteTransaction) {
            let deliveries = receiver.for_connection(&id);
            let event = deliveries.iter().find(|d| d.event_type() == Some(announcing_event(action)) && d.seq >= since);
            react(ctx, &id, action, event, before.as_ref(), &Auth::Primary)
                .await
                .map_err(|e| trace.fail(&id, e.to_string(), &deliveries))?;
        }
    }
    Ok(played)
}

/// Waits (bounded) until an `expected` event has arrived since delivery `since` and the chain
/// links up, then judges the deliveries that arrived since. Returns the state the chain ends in.
async fn settle(ctx: &Session, id: &str, expected: &str, since: u64, trace: &Trace) -> Result<ConnectionState, Stop> {
    let receiver = ctx.receiver()?;
    let arrived = |ds: &[Delivery]| ds.iter().any(|d| d.event_type() == Some(expected) && d.seq >= since);
    let started = std::time::Instant::now();
    let (_, deliveries) =
        receiver.wait_for(id, ctx.config.event_wait(), |ds| arrived(ds) && chain::resolve(ds).is_ok()).await;
    if !arrived(&deliveries) {
        let problem = format!(
            "the target accepted the action, but no {expected} arrived ({}){}",
            receiver.patience.describe(started.elapsed()),
            receiver.refusals()
        );
        return Err(trace.fail(id, problem, &deliveries));
    }
    // Every new delivery on its own: schema (which also asserts the prefixes of the ids it
    // names, §2) and envelope agreement (§6.2).
    let new: Vec<Delivery> = deliveries.iter().filter(|d| d.seq >= since).cloned().collect();
    event_rules::schema(&new)
        .and_then(|()| event_rules::envelope_agrees(&new))
        .map_err(|problem| trace.fail(id, problem.to_string(), &deliveries))?;
    chain::resolve(&deliveries).map_err(|problem| trace.fail(id, problem, &deliveries))
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
