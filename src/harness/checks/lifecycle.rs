//! §3, §6 over random paths (`lifecycle.random-sequences`): proptest generates sequences of driver actions, each
//! played on a fresh connection, and after every step the target accepted, the events must tell
//! the truth about the path taken. The spec shows one transition only (§3.2), so a target is
//! never failed for taking or refusing a transition (driver exit 4): only for events that
//! contradict each other or the API.

use crate::harness::chain;
use crate::harness::delivery::{self, labels, Delivery};
use crate::harness::driver::{DriveArgs, DriveError, DriverAction};
use crate::harness::event_rules;
use crate::harness::fixtures::RunContext;
use crate::harness::graph::{Transition, TransitionGraph};
use crate::harness::har;
use crate::harness::http::Auth;
use crate::harness::outcome::{ErrorSource, Stop};
use crate::harness::property;
use crate::harness::session::Session;
use crate::harness::steps::Created;
use crate::harness::tour::{announcing_event, react, Before};
use crate::spec::{prefix, Action, ConnectionState};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::{Arc, Mutex};

crate::cases! {
    TRANSITION_GRAPH = "lifecycle.transition-graph" => transition_graph;
    RANDOM_SEQUENCES = "lifecycle.random-sequences" => random_sequences;
}

/// Most connections exploring at once.
const EXPLORE_AT_ONCE: usize = 8;

/// Most connections one exploration creates: one per (state, action) pair, a bound that only a
/// target whose known paths keep failing comes near.
const MOST_CONNECTIONS: usize = ConnectionState::ALL.len() * Action::ALL.len();

/// Explores the transition graph as the target reveals it, whatever the seed: from the created
/// state, and from every state an accepted action reaches, every action is tried exactly once.
/// A connection keeps exploring after a state change, so connections are few and so are their
/// webhooks: it tries an untried action of its state, or goes the shortest known way to a state
/// that has one, else it stops ([`Atlas::plan`]). Connections explore concurrently, claiming
/// the pairs they try; a fresh one starts when the created state is left with pairs untried
/// (connections start there), or when all stopped and pairs remain. The graph follows the
/// driver's answers, so a step waits for a webhook only where a read needs it: the accounts of
/// a state are judged once, when it is first left ([`Walk::checkpoint`]) or when a connection
/// ends in it (§3.2, §4.2); those of the created and connected states by other cases. Every connection is judged as in [`play`] once its events are in,
/// all those waits at the same time. The graph goes into the reports.
async fn transition_graph(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let atlas = Arc::new(Mutex::new(Atlas::default()));
    {
        let mut atlas = lock(&atlas);
        atlas.graph.reached.push(ConnectionState::Created);
        // Judged without a wait here: a new connection's accounts by
        // `accounts.refused-before-connected`, a connected one's by every read of the shared
        // connection. Each wait before leaving a state adds up along a connection.
        atlas.judged.extend([ConnectionState::Created, ConnectionState::Connected]);
    }
    let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let mut exploring = tokio::task::JoinSet::new();
    // The judgements of the explored connections, each waiting for its events meanwhile.
    let mut judging = tokio::task::JoinSet::new();
    let mut started = 0;
    // A connection that could not explore (not judged) stops the starting of more.
    let mut halted = false;
    loop {
        while !halted && started < MOST_CONNECTIONS && exploring.len() < EXPLORE_AT_ONCE && lock(&atlas).wants_fresh() {
            lock(&atlas).positions.push((started, ConnectionState::Created));
            let (ctx, atlas, wake) = (ctx.clone(), atlas.clone(), wake.clone());
            exploring.spawn(har::in_case(har::current_case(), explore(ctx, atlas, started, wake)));
            started += 1;
        }
        if exploring.is_empty() {
            break;
        }
        let joined = tokio::select! {
            _ = woken.recv() => continue,
            Some(joined) = exploring.join_next() => joined,
        };
        let (sequence, explored_to) = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
        match explored_to {
            Ok(pending) => {
                let ctx = ctx.clone();
                judging.spawn(har::in_case(har::current_case(), async move { (sequence, pending.judge(&ctx).await) }));
            }
            Err(Stop::Fail(f)) => {
                // The graph so far goes into the reports: it is needed most now.
                record_partial(&ctx, &lock(&atlas).graph);
                return Err(explored(f.message, &sequence));
            }
            Err(e) if e.is_transport() => return Err(e),
            Err(Stop::Ignore(..)) => halted = true,
            Err(e) => return Err(e),
        }
    }
    while let Some(joined) = judging.join_next().await {
        let (sequence, judged) = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
        match judged {
            Ok(()) => {}
            Err(Stop::Fail(f)) => {
                record_partial(&ctx, &lock(&atlas).graph);
                return Err(explored(f.message, &sequence));
            }
            Err(e) if e.is_transport() => return Err(e),
            Err(Stop::Ignore(..)) => {}
            Err(e) => return Err(e),
        }
    }
    let graph = lock(&atlas).graph.clone();
    ctx.record_graph(graph.canonical());
    Ok(())
}

fn lock(atlas: &Mutex<Atlas>) -> std::sync::MutexGuard<'_, Atlas> {
    atlas.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the exploring connections share: the graph so far, the pairs claimed, the states whose
/// accounts are judged, and where each connection is (or is heading).
#[derive(Default)]
struct Atlas {
    graph: TransitionGraph,
    claimed: Vec<(ConnectionState, Action)>,
    judged: Vec<ConnectionState>,
    positions: Vec<(usize, ConnectionState)>,
    /// The unclaimed pairs when a connection was last started for what others left: another
    /// starts only once that shrank, so a target whose known paths fail cannot loop.
    leftover: Option<usize>,
}

/// One step a connection is to take.
struct Plan {
    action: Action,
    /// A claimed pair (else a step of a known way to one).
    explore: bool,
    /// The state is left before its accounts were judged.
    judge_here: bool,
}

impl Atlas {
    /// The actions not yet tried from `state`. A data action is tried only where it has a
    /// target the harness listed (a CONNECTED connection's account or transaction): it is never
    /// sent blind ([`Walk::step`]).
    fn untried(&self, state: ConnectionState) -> impl Iterator<Item = Action> + '_ {
        Action::ALL
            .into_iter()
            .filter(move |a| state == ConnectionState::Connected || !is_data(*a))
            .filter(move |a| !self.claimed.contains(&(state, *a)))
    }

    fn unclaimed(&self) -> usize {
        self.graph.reached.iter().map(|s| self.untried(*s).count()).sum()
    }

    fn known(&self, from: ConnectionState, action: Action) -> Option<Transition> {
        self.graph.edges.iter().find(|(f, a, _)| *f == from && *a == action).map(|(_, _, t)| *t)
    }

    /// Whether a fresh connection should start: the created state has untried pairs and no
    /// connection is there to try them, or every connection stopped with pairs left.
    fn wants_fresh(&mut self) -> bool {
        let created = ConnectionState::Created;
        if self.untried(created).next().is_some() && !self.positions.iter().any(|(_, s)| *s == created) {
            return true;
        }
        let left = self.unclaimed();
        if self.positions.is_empty() && left > 0 && self.leftover.is_none_or(|before| left < before) {
            self.leftover = Some(left);
            return true;
        }
        false
    }

    /// The next step of connection `me` at `from`: an untried action of `from` (claimed; first
    /// those expected to keep the state, then those leading where work is), else the first
    /// step of the shortest known way to a state with untried actions; `None`: stop.
    fn plan(&mut self, me: usize, from: ConnectionState) -> Option<Plan> {
        let rank = |a: &Action| match a.target_state() {
            None => 0,
            Some(to) if to == from => 0,
            Some(to) if !self.graph.reached.contains(&to) || self.untried(to).next().is_some() => 1,
            Some(_) => 2,
        };
        let (action, explore) = match self.untried(from).min_by_key(rank) {
            Some(action) => (action, true),
            None => (self.route(from)?, false),
        };
        if explore {
            self.claimed.push((from, action));
        }
        let leaves = action.target_state().filter(|to| *to != from);
        let judge_here = leaves.is_some() && !self.judged.contains(&from);
        if judge_here {
            self.judged.push(from);
        }
        self.at(me, leaves.unwrap_or(from));
        Some(Plan { action, explore, judge_here })
    }

    /// The first action of the shortest known accepted way from `from` to a state with untried
    /// actions (breadth first, actions in their order).
    fn route(&self, from: ConnectionState) -> Option<Action> {
        let mut seen: Vec<(ConnectionState, Option<Action>)> = vec![(from, None)];
        let mut at = 0;
        while let Some(&(state, first)) = seen.get(at) {
            if at > 0 && self.untried(state).next().is_some() {
                return first;
            }
            for action in Action::ALL {
                if let Some(Transition::Accepted(to)) = self.known(state, action) {
                    if to != state && !seen.iter().any(|(s, _)| *s == to) {
                        seen.push((to, first.or(Some(action))));
                    }
                }
            }
            at += 1;
        }
        None
    }

    fn at(&mut self, me: usize, state: ConnectionState) {
        if let Some(p) = self.positions.iter_mut().find(|(id, _)| *id == me) {
            p.1 = state;
        }
    }

    fn record(&mut self, from: ConnectionState, action: Action, transition: Transition) {
        if !self.graph.edges.contains(&(from, action, transition)) {
            self.graph.edges.push((from, action, transition));
        }
        if let Transition::Accepted(to) = transition {
            if !self.graph.reached.contains(&to) {
                self.graph.reached.push(to);
            }
        }
    }
}

/// One exploring connection (see [`transition_graph`]): the actions it was driven, and its
/// judgement to come.
async fn explore(
    ctx: Arc<RunContext>,
    atlas: Arc<Mutex<Atlas>>,
    me: usize,
    wake: tokio::sync::mpsc::UnboundedSender<()>,
) -> (Vec<Action>, Result<Pending, Stop>) {
    let walked = match Walk::start(&ctx).await {
        Ok(mut walk) => {
            let explored = explore_with(&ctx, &atlas, me, &wake, &mut walk).await;
            // It ends here: its judgement judges the accounts of this state.
            let mut atlas = lock(&atlas);
            if explored.is_ok() && !atlas.judged.contains(&walk.state()) {
                atlas.judged.push(walk.state());
            }
            (walk.actions.clone(), explored.map(|()| walk.finish().1))
        }
        Err(e) => (Vec::new(), Err(e)),
    };
    lock(&atlas).positions.retain(|(id, _)| *id != me);
    let _ = wake.send(());
    walked
}

async fn explore_with(
    ctx: &Session,
    atlas: &Mutex<Atlas>,
    me: usize,
    wake: &tokio::sync::mpsc::UnboundedSender<()>,
    walk: &mut Walk,
) -> Result<(), Stop> {
    loop {
        let from = walk.state();
        let Some(Plan { action, explore, judge_here }) = lock(atlas).plan(me, from) else { return Ok(()) };
        // It may have left the created state: time for a fresh connection, perhaps.
        let _ = wake.send(());
        let leaves = action.target_state().is_some_and(|to| to != from);
        // Only to judge a state's accounts: a data action's reaction left behind is the tour's
        // and the random sequences' to judge (a wait here would add up along the connection).
        if leaves && judge_here {
            walk.checkpoint(ctx).await?;
        }
        let transition = walk.step(ctx, action).await?;
        let mut atlas = lock(atlas);
        if explore {
            atlas.record(from, action, transition);
        } else if atlas.known(from, action) != Some(transition) {
            // A known way that no longer holds: this connection stops where it is.
            atlas.at(me, walk.state());
            return Ok(());
        }
        atlas.at(me, walk.state());
    }
}

/// Whether `action` acts on data (an account or a transaction) rather than on the connection.
fn is_data(action: Action) -> bool {
    matches!(action, Action::UpdateAccounts | Action::DeleteTransaction)
}

/// Records the graph explored so far, for the reports of a failed exploration.
fn record_partial(ctx: &RunContext, graph: &TransitionGraph) {
    ctx.record_graph(graph.clone().canonical());
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
pub const MAX_STEPS: usize = 5;

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
    let (played, pending) = drive(ctx, actions).await?;
    pending.judge(ctx).await?;
    Ok(played)
}

/// A driven sequence, to judge once its events are in: no step waits for the webhooks of the
/// one before (the spec puts no read between them, §6.3), unless a read needs them
/// ([`Walk::checkpoint`]).
pub struct Pending {
    id: String,
    trace: Trace,
    /// The events the accepted steps announce, one per state change (§3.1, §6), in order.
    expected: Vec<&'static str>,
    /// The last data action the target accepted, when no state change followed it: its
    /// reaction is judged after its event (§6.3).
    reaction: Option<(Action, std::collections::HashSet<String>, Option<Before>)>,
}

/// Drives `actions` on a fresh connection (see [`Walk`]).
pub async fn drive(ctx: &Session, actions: &[Action]) -> Result<(Played, Pending), Stop> {
    let mut walk = Walk::start(ctx).await?;
    for &action in actions {
        walk.step(ctx, action).await?;
    }
    Ok(walk.finish())
}

/// A fresh connection driven one step at a time, following the driver's answers: an accepted
/// action moves it to the state the action targets (a data action keeps the state).
pub struct Walk {
    created: Created,
    state: ConnectionState,
    /// Every action driven, the one under way included (for messages).
    actions: Vec<Action>,
    played: Played,
    pending: Pending,
}

impl Walk {
    /// Creates the connection: CREATED, announced by connection.created (§3.2).
    pub async fn start(ctx: &Session) -> Result<Walk, Stop> {
        ctx.receiver()?;
        ctx.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver"))?;
        let created = ctx.create_connection().await?;
        let pending = Pending {
            id: created.connection_id.clone(),
            trace: Trace { steps: vec!["create".to_string()] },
            expected: vec!["connection.created"],
            reaction: None,
        };
        Ok(Walk { created, state: ConnectionState::Created, actions: Vec::new(), played: Played::new(), pending })
    }

    /// The state the driver's answers so far put the connection in.
    pub fn state(&self) -> ConnectionState {
        self.state
    }

    /// Drives `action`; a refused or unsupported one changes nothing (not a failure).
    pub async fn step(&mut self, ctx: &Session, action: Action) -> Result<Transition, Stop> {
        let receiver = ctx.receiver()?;
        let driver = ctx.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver"))?;
        self.actions.push(action);
        let Pending { id, trace, expected, reaction } = &mut self.pending;
        // A data action goes only to what a CONNECTED connection lists: where nothing is listed
        // to act on, it is not sent (the same target whatever the seed, never the driver's pick).
        let data_action = is_data(action);
        let before = if data_action && self.state == ConnectionState::Connected {
            Some(Before::prepare(ctx, id, action).await?)
        } else {
            None
        };
        if data_action && before.as_ref().is_none_or(|b| b.target(action).is_none()) {
            trace.steps.push(format!("{action} (not sent: no listed {})", Before::target_kind(action)));
            self.played.push((self.state, action, Transition::NotSent));
            return Ok(Transition::NotSent);
        }
        let (account, transaction) =
            before.as_ref().map_or((None, None), |b| (b.account.clone(), b.transaction.clone()));
        let args = DriveArgs {
            connection_id: Some(id.clone()),
            widget_token: self.created.widget_token.clone(),
            account_id: account,
            transaction_id: transaction,
            webhook_url: Some(receiver.url().to_string()),
            second_webhook_url: None,
        };
        if let Some(account) = &args.account_id {
            crate::harness::pagination::forget(&ctx.api, account);
        }
        // Two steps within one millisecond could announce events of equal content and
        // `occurredAt`, which read as one re-stamped retry (`delivery::unique`): a step apart.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        // The events known before the step: none of them (nor a late copy) is the step's own.
        let known = delivery::identities(&receiver.for_connection(id));
        let from = self.state;
        let call = driver.run(DriverAction::Act(action), &args);
        let driven = ctx.api.recorder().driven(DriverAction::Act(action), &args, call).await;
        if let Some(account) = &args.account_id {
            crate::harness::pagination::forget(&ctx.api, account);
        }
        let transition = match driven {
            Ok(()) => {
                trace.steps.push(format!("{action}"));
                // Already in the target state: the target may accept without a change, hence no event.
                if action.target_state() != Some(from) {
                    expected.push(announcing_event(action));
                    if action.target_state().is_some() {
                        // The state changed: an earlier data action's reaction can no longer be read.
                        *reaction = None;
                    }
                    if data_action {
                        *reaction = Some((action, known, before));
                    }
                }
                Transition::Accepted(action.target_state().unwrap_or(from))
            }
            // Refused from this state, or not supported: not a failure; the sequence goes on.
            Err(DriveError::Refused(_)) => {
                trace.steps.push(format!("{action} (refused)"));
                Transition::Refused
            }
            Err(DriveError::Unsupported(_)) => {
                trace.steps.push(format!("{action} (unsupported)"));
                Transition::Unsupported
            }
            Err(e @ DriveError::Failed(_)) => return Err(Stop::from(e)),
        };
        if let Transition::Accepted(to) = transition {
            self.state = to;
        }
        self.played.push((from, action, transition));
        Ok(transition)
    }

    /// The reads a connection owes before it leaves its state, once the events so far are in
    /// and announce that state (never on the driver's word alone): the accounts against it
    /// (§3.2, §4.2), and the last data action's reaction (§6.3), which a state change would
    /// make unreadable. The whole chain is still judged at the end ([`Pending::judge`]).
    pub async fn checkpoint(&mut self, ctx: &Session) -> Result<(), Stop> {
        let deliveries = self.pending.settle(ctx, Some(self.state)).await?;
        let Pending { id, trace, reaction, .. } = &mut self.pending;
        chain::resolve(&deliveries).map_err(|problem| trace.fail(id, problem.to_string(), &deliveries))?;
        accounts_follow_state(ctx, id, trace).await?;
        if let Some(reaction) = reaction.take() {
            judge_reaction(ctx, id, trace, reaction, &deliveries).await?;
        }
        Ok(())
    }

    /// What was played, and the judgement to come.
    pub fn finish(self) -> (Played, Pending) {
        (self.played, self.pending)
    }
}

impl Pending {
    /// Waits (bounded) until every expected event has arrived and the chain links up (and ends
    /// in `state`, when given); fails if an expected event is missing. Returns the deliveries.
    async fn settle(&self, ctx: &Session, state: Option<ConnectionState>) -> Result<Vec<Delivery>, Stop> {
        let Pending { id, trace, expected, .. } = self;
        let receiver = ctx.receiver()?;
        // Events are a set: copies of one event count once (§6.3 leaves retries open).
        let missing = |ds: &[Delivery]| {
            expected.iter().copied().find(|t| !delivery::holds(ds, t, expected.iter().filter(|e| e == &t).count()))
        };
        let started = std::time::Instant::now();
        let what = format!("{} for {id}", expected.join(", "));
        let (_, deliveries) = receiver
            .wait_until(&what, id, ctx.config.event_wait(), |ds| {
                missing(ds).is_none() && chain::ends(ds).is_ok_and(|ends| state.is_none_or(|s| ends.contains(&s)))
            })
            .await;
        if let Some(absent) = missing(&deliveries) {
            let problem = format!(
                "the target accepted the action, but no {absent} arrived ({}){}",
                receiver.patience.describe(started.elapsed()),
                receiver.refusals()
            );
            return Err(trace.fail(id, problem, &deliveries));
        }
        Ok(deliveries)
    }

    /// Waits (bounded) until every expected event has arrived and the chain links up, then
    /// judges: each delivery's schema and envelope (§6.1, §6.2), the chain (§3, §6.2), the
    /// accounts against the last announced state (§3.2, §4.2), and the last data action's
    /// reaction (§6.3).
    pub async fn judge(self, ctx: &Session) -> Result<(), Stop> {
        let deliveries = self.settle(ctx, None).await?;
        let Pending { id, trace, reaction, .. } = self;
        // Every delivery on its own: schema (which also asserts the prefixes of the ids it
        // names, §2) and envelope agreement (§6.2).
        event_rules::schema(&deliveries)
            .and_then(|()| event_rules::envelope_agrees(&deliveries))
            .map_err(|problem| trace.fail(&id, problem.to_string(), &deliveries))?;
        chain::resolve(&deliveries).map_err(|problem| trace.fail(&id, problem.to_string(), &deliveries))?;
        accounts_follow_state(ctx, &id, &trace).await?;
        if let Some(reaction) = reaction {
            judge_reaction(ctx, &id, &trace, reaction, &deliveries).await?;
        }
        Ok(())
    }
}

/// The reaction to a data action's event (§6.3).
async fn judge_reaction(
    ctx: &Session,
    id: &str,
    trace: &Trace,
    (action, known, before): (Action, std::collections::HashSet<String>, Option<Before>),
    deliveries: &[Delivery],
) -> Result<(), Stop> {
    // Steps are not awaited one by one, so an earlier step's event may arrive after this one
    // began: the step's event is one not known before it, naming what it was driven on.
    let names = |d: &Delivery| before.as_ref().is_some_and(|b| b.named_by(action, d));
    let event = delivery::step_event(deliveries, &known, announcing_event(action), names);
    react(ctx, id, action, event, before.as_ref(), &Auth::Primary).await.map_err(|e| {
        if e.is_fail() {
            trace.fail(id, e.to_string(), deliveries)
        } else {
            e
        }
    })
}

/// Accounts are readable exactly when the chain of the connection's events ends connected
/// (§3.2, §4.2). A read that disagrees with every end the chain allows waits (bounded) for a
/// delivery still in flight that could explain it: only a chain that still disagrees fails.
async fn accounts_follow_state(ctx: &Session, id: &str, trace: &Trace) -> Result<(), Stop> {
    let receiver = ctx.receiver()?;
    let exchange = ctx.api.get(&["v1", "connections", id, "accounts"], &[]).await?;
    let served = exchange.is_success();
    let agrees = |ds: &[Delivery]| {
        chain::ends(ds).is_ok_and(|ends| ends.iter().any(|s| (*s == ConnectionState::Connected) == served))
    };
    let mut deliveries = receiver.for_connection(id);
    if !agrees(&deliveries) {
        let what = format!("an event of {id} that explains {} ({})", exchange.request, exchange.status);
        deliveries = receiver.wait_until(&what, id, ctx.config.event_wait(), agrees).await.1;
    }
    if !agrees(&deliveries) {
        let state = chain::resolve(&deliveries).map_err(|problem| trace.fail(id, problem.to_string(), &deliveries))?;
        let problem = if served {
            format!(
                "{}: the chain of events ends {state}, but accounts are served (status {})",
                exchange.request, exchange.status
            )
        } else {
            format!(
                "{}: the chain of events ends with connection.connected, but accounts are refused ({})",
                exchange.request,
                exchange.summary()
            )
        };
        return Err(trace.fail(id, problem, &deliveries));
    }
    if served {
        if let Ok(Value::Array(accounts)) = exchange.success_json() {
            if let Some(bad) = accounts
                .iter()
                .filter_map(|a| a.get("id").and_then(Value::as_str))
                .find(|a| !a.starts_with(prefix::ACCOUNT))
            {
                return Err(trace.fail(
                    id,
                    format!("{}: account id {bad:?} does not start with {}", exchange.request, prefix::ACCOUNT),
                    &deliveries,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConnectionState::{Connected, Created, Disconnected, Error, FailedAuth, MfaRequired};

    /// A target shaped like the sandbox: disconnected is terminal, data actions need connected.
    fn target(from: ConnectionState, action: Action) -> Transition {
        let to = action.target_state();
        let accepted = match action {
            Action::Connect | Action::FailAuth => matches!(from, Created | FailedAuth | Error | MfaRequired),
            Action::RequireMfa => matches!(from, Created | FailedAuth | Error),
            Action::Error => !matches!(from, Error | Disconnected),
            Action::Disconnect => from != Disconnected,
            Action::UpdateAccounts | Action::DeleteTransaction => from == Connected,
        };
        if accepted {
            Transition::Accepted(to.unwrap_or(from))
        } else {
            Transition::Refused
        }
    }

    #[test]
    fn one_connection_at_a_time_tries_every_pair_once_and_judges_every_state() {
        let mut atlas = Atlas::default();
        atlas.graph.reached.push(Created);
        let mut connections = 0;
        while atlas.wants_fresh() {
            connections += 1;
            atlas.positions.push((connections, Created));
            let mut state = Created;
            while let Some(plan) = atlas.plan(connections, state) {
                let transition = target(state, plan.action);
                if plan.explore {
                    atlas.record(state, plan.action, transition);
                } else {
                    assert_eq!(atlas.known(state, plan.action), Some(transition), "a known way");
                }
                if let Transition::Accepted(to) = transition {
                    state = to;
                }
                atlas.at(connections, state);
            }
            if !atlas.judged.contains(&state) {
                atlas.judged.push(state);
            }
            atlas.positions.clear();
        }
        assert_eq!(atlas.graph.reached.len(), 6);
        // Data actions only from the connected state: never sent without a listed target.
        assert_eq!(atlas.graph.edges.len(), 6 * Action::ALL.len() - 5 * 2);
        assert_eq!(atlas.claimed.len(), atlas.graph.edges.len(), "each pair once");
        assert!(atlas.graph.reached.iter().all(|s| atlas.judged.contains(s)));
        // Each disconnection ends a connection: five, and no more.
        assert_eq!(connections, 5);
    }
}
