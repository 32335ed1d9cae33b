//! §3, §6 over random paths (`lifecycle.random-sequences`): proptest generates sequences of driver actions, each
//! played on a fresh connection, and after every step the target accepted, the events must tell
//! the truth about the path taken. The spec shows one transition only (§3.2), so a target is
//! never failed for taking or refusing a transition (driver exit 4): only for events that
//! contradict each other or the API.
//!
//! The two cases' flows are here; what they run is in two files: [`plan`], which actions to try
//! (the exploration's [`Atlas`], the generated sequences), and [`walk`], a
//! connection driven step by step, its events awaited and judged.

mod plan;
mod walk;

use crate::harness::fixtures::context::RunContext;
use crate::harness::fixtures::property;
use crate::harness::rules::graph::TransitionGraph;
use crate::harness::setup::session::Session;
use crate::harness::transport::har;
use crate::harness::vocab::outcome::{ErrorSource, Failure, Stop};
use crate::spec::{Action, ConnectionState};
use plan::{sequences, Arrival, Atlas, Plan};
use std::sync::{Arc, Mutex};
use walk::{play, Pending, Walk};

super::cases! {
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
/// driver's answers, and no step waits for a webhook: the accounts of a state are judged once,
/// by the first connection to reach it, which stops there and is judged at the end (§3.2,
/// §4.2), and once more by the first to reach it after being CONNECTED ([`Arrival`]); those of
/// the created and connected states by other cases. Every connection is judged
/// as in [`play`] once its events are in, all those waits at the same time: one lateness for
/// the whole exploration. The graph goes into the reports.
async fn transition_graph(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let atlas = Arc::new(Mutex::new(Atlas::default()));
    {
        let mut atlas = lock(&atlas);
        atlas.graph.reached.push(ConnectionState::Created);
        // A connection stops at the first arrival whose accounts are not judged yet
        // (`Atlas::plan`): not these.
        atlas.judged.extend(Arrival::JUDGED_ELSEWHERE);
    }
    let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let mut exploring = tokio::task::JoinSet::new();
    // The judgements of the explored connections, each waiting for its events meanwhile.
    let mut judging = tokio::task::JoinSet::new();
    let mut started = 0;
    // A connection that could not explore (not judged) stops the starting of more.
    let mut halted = false;
    // Every finding, kept to the end (see [`route`]).
    let mut found: Vec<(Vec<Action>, Failure)> = Vec::new();
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
            // The exploration goes on: its findings are then those of the whole graph, the same
            // every run, whichever connection found one first.
            Err(Stop::Fail(f)) => found.push((sequence, f)),
            Err(e) if e.is_transport() => return Err(e),
            Err(Stop::Ignore(..)) => halted = true,
            Err(e) => return Err(e),
        }
    }
    while let Some(joined) = judging.join_next().await {
        let (sequence, judged) = joined.map_err(|e| Stop::Error(ErrorSource::Harness, e.to_string()))?;
        match judged {
            Ok(()) => {}
            Err(Stop::Fail(f)) => found.push((sequence, f)),
            Err(e) if e.is_transport() => return Err(e),
            Err(Stop::Ignore(..)) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some((sequence, first)) = route(&ctx, found) {
        // The graph so far goes into the reports: it is needed most now.
        record_partial(&ctx, &lock(&atlas).graph);
        return Err(explored(first, &sequence));
    }
    let graph = lock(&atlas).graph.clone();
    ctx.record_graph(graph.canonical());
    Ok(())
}

/// The exploration's findings: each of a rule another case owns is also reported under that
/// case (as the random sequences' are), so that the owner fails in every run the deterministic
/// exploration shows the fault, whatever the seed draws and whichever connection ended first
/// (a chain broken by `[create, disconnect]` is `events.previous-status-chain`'s, which judges
/// only the tour's connections otherwise). This case fails with the first finding in the
/// order of their sequences, the same every run, leaving out those of a rule its owner judges
/// over every delivery or read of the run (the events' schema and envelope, the accounts against
/// the announced state, `walk::owners::OVER_EVERY_READ`): whether a copy that breaks
/// one arrived before the exploration judged its connection is the queue's timing, and the
/// owner sees it whenever it arrives (issue 51: `tests/foreign/python-stepwise`'s `dup-eventid-stale` failed
/// this case in one run of two).
fn route(ctx: &RunContext, mut found: Vec<(Vec<Action>, Failure)>) -> Option<(Vec<Action>, Failure)> {
    found.sort_by_cached_key(|(sequence, _)| format!("{sequence:?}"));
    for (sequence, f) in &found {
        if let Some(owner) = selected_owner(ctx, f).filter(|o| *o != TRANSITION_GRAPH) {
            let f =
                f.clone().reworded(|m| format!("found by {TRANSITION_GRAPH}: {m} [explored sequence: {sequence:?}]"));
            ctx.report_to(owner, f);
        }
    }
    found.into_iter().find(|(_, f)| !over_the_record(ctx, f))
}

/// Whether `f` breaks a rule its owner, selected, judges over every delivery or read of the
/// run (the events' schema and envelope, the accounts against the announced state).
fn over_the_record(ctx: &RunContext, f: &Failure) -> bool {
    selected_owner(ctx, f).is_some_and(|o| {
        [walk::owners::SCHEMA, walk::owners::ENVELOPE].contains(&o) || walk::owners::OVER_EVERY_READ.contains(&o)
    })
}

/// The case that owns the rule `f` breaks, when this run judges it.
fn selected_owner(ctx: &RunContext, f: &Failure) -> Option<&'static str> {
    let selection = &ctx.plan.selection;
    f.owner().filter(|o| crate::harness::vocab::catalogue::find(o).is_some_and(|c| selection.matches(c)))
}

fn lock(atlas: &Mutex<Atlas>) -> std::sync::MutexGuard<'_, Atlas> {
    atlas.lock().unwrap_or_else(|e| e.into_inner())
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
            let arrival = Arrival { state: walk.state(), after_connected: walk.after_connected() };
            if explored.is_ok() && !atlas.judged.contains(&arrival) {
                atlas.judged.push(arrival);
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
        let Some(Plan { action, explore }) = lock(atlas).plan(me, from, walk.after_connected()) else { return Ok(()) };
        // It may have left the created state: time for a fresh connection, perhaps.
        let _ = wake.send(());
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

/// Records the graph explored so far, for the reports of a failed exploration.
fn record_partial(ctx: &RunContext, graph: &TransitionGraph) {
    ctx.record_graph(graph.clone().canonical());
}

/// The failure of an explored sequence (its message names the request that shows it).
fn explored(failure: Failure, sequence: &[Action]) -> Stop {
    Stop::Fail(failure.reworded(|m| format!("{m} [explored sequence: {sequence:?}]")))
}

/// Random sequences of actions, each on a fresh connection ([`play`]). Their inputs follow the
/// seed, so what they find decides no verdict (the same target, the same verdict whatever the
/// seed, issue 71): a finding is said in the run's notes, with the sequence and the seed that
/// replays it, and gates nothing. What gates is the deterministic exploration
/// ([`transition_graph`]), which tries every action from every state it reaches in every run,
/// and the rules over the whole record, which judge these sequences' reads and deliveries too.
async fn random_sequences(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.receiver()?;
    let run = ctx.clone();
    let play_one = move |actions: Vec<Action>| {
        let ctx = run.clone();
        async move { play(&ctx, &actions).await.map(|_| ()) }
    };
    // A finding its owner judges over the whole record is shown as drawn: each attempt to
    // shrink it would wait out the event wait of a read that disagrees.
    let found = property::for_all(&ctx, RANDOM_SEQUENCES, RANDOM_SEQUENCES, sequences(), play_one, |f| {
        !over_the_record(&ctx, f)
    })
    .await;
    match found {
        Err(Stop::Fail(f)) => {
            let rule = f.owner().unwrap_or(RANDOM_SEQUENCES);
            let said = Stop::Fail(f.clone()).to_string();
            ctx.note(
                "random sequences",
                format!(
                    "{RANDOM_SEQUENCES} found a violation of a rule {rule} owns on a drawn sequence; not gating, as \
                     what is drawn follows the seed (the deterministic exploration and the rules over every \
                     read judge the rest): {said}"
                ),
            );
            Ok(())
        }
        other => other,
    }
}

/// Whether `case` may receive a finding of the random sequences ([`random_sequences`]): its
/// result waits for theirs.
pub(super) fn receives_findings(case: &str) -> bool {
    walk::owners::ALL.contains(&case)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_owner_of_a_walk_finding_is_a_case() {
        for owner in super::walk::owners::ALL {
            assert!(crate::harness::vocab::catalogue::find(owner).is_some(), "{owner} is no case");
        }
        for event in crate::spec::ConnectionState::ALL.map(|s| s.event_type()) {
            assert!(super::walk::owners::ALL.contains(&super::walk::owners::announced(event)), "{event}");
        }
    }
}
