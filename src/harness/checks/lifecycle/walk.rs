//! The walk of the lifecycle cases: a fresh connection driven one step at a time ([`Walk`]),
//! following the driver's answers, then its events awaited and judged with what the API reads
//! ([`Pending`]). Which steps to take is the planner's ([`super::plan`]).

use super::plan::is_data;
use crate::harness::fixtures::reaction::{announcing_event, react, Before};
use crate::harness::rules::chain;
use crate::harness::rules::delivery::{self, labels, Delivery};
use crate::harness::rules::event_rules;
use crate::harness::rules::graph::Transition;
use crate::harness::setup::session::Session;
use crate::harness::setup::steps::Created;
use crate::harness::transport::answers::Auth;
use crate::harness::transport::driver::{DriveArgs, DriveError, DriverAction};
use crate::harness::vocab::kind::{Kind, LifecycleKind};
use crate::harness::vocab::outcome::{Failure, Problem, Stop};
use crate::spec::{prefix, Action, ConnectionState};
use serde_json::Value;
use std::time::Instant;

/// What happened to one step, for messages: `connect` accepted, `error` refused.
struct Trace {
    steps: Vec<String>,
}

impl Trace {
    /// A finding about the connection's events, resting on their deliveries; `owner` is the
    /// case whose rule it breaks ([`owners`]).
    fn fail(
        &self,
        (owner, kind): (&'static str, Kind),
        connection: &str,
        problem: String,
        deliveries: &[Delivery],
    ) -> Stop {
        let message =
            format!("after [{}] on {connection}: {problem}; events {}", self.steps.join(", "), labels(deliveries));
        let problem = Problem::found(kind, [connection.to_string()], message);
        Stop::Fail(crate::harness::rules::event_rules::on(deliveries, problem).owned_by(owner))
    }
}

/// The kind of the rule `stop` broke (its first problem's), else `or`: a walk that applies
/// another rule keeps that rule's kind.
fn kind_of(stop: &Stop, or: LifecycleKind) -> Kind {
    match stop {
        Stop::Fail(f) => f.problems.first().and_then(|p| p.kind).unwrap_or(or.into()),
        _ => or.into(),
    }
}

/// The cases that own the rules a walk judges: a finding of the random sequences is reported
/// under its rule's owner, which judges that rule in every run (one judge per rule).
pub(super) mod owners {
    pub(crate) const SCHEMA: &str = "events.schema";
    pub(crate) const ENVELOPE: &str = "events.envelope-agrees";
    pub(crate) const CHAIN: &str = "events.previous-status-chain";
    /// The graph's own: the states on its way (credentials_submitted, verifying) announced.
    pub(crate) const GRAPH: &str = "lifecycle.transition-graph";
    /// Accounts served in a state announced other than CONNECTED, in every state reached.
    pub(crate) const ACCOUNTS_SERVED: &str = "accounts.refused-before-connected";
    /// Accounts refused once CONNECTED was announced (the event announces them available).
    pub(crate) const ACCOUNTS_REFUSED: &str = "events.connected-announced";
    /// The owners that also judge every accounts read of the run (`rules::invariants::settled`
    /// and the last look): whether one of the walk's reads met the fault (a state a target
    /// leaves unannounced after some seconds) is the run's pace, so only they fail for it.
    pub(crate) const OVER_EVERY_READ: [&str; 2] = [ACCOUNTS_SERVED, ACCOUNTS_REFUSED];
    pub(crate) const ACCOUNT_PREFIX: &str = "accounts.id-prefix";
    pub(crate) const ACCOUNTS_UPDATED: &str = "reactions.accounts-updated";
    pub(crate) const TRANSACTION_DELETED: &str = "reactions.transaction-deleted";
    /// The walks of an account's transactions that a data action is driven on (§4.3).
    pub(crate) const TRANSACTIONS_WALK: &str = "transactions.walk-exactly-once";

    /// The case that owns "a step's announcing event arrives" for `event_type` (§3.1, §6).
    pub(crate) fn announced(event_type: &str) -> &'static str {
        match event_type {
            "connection.created" => "events.created-announced",
            "connection.connected" => "events.connected-announced",
            "connection.failed_auth" => "events.failed-auth-announced",
            "connection.mfa_required" => "events.mfa-required-announced",
            "connection.error" => "events.error-announced",
            "connection.disconnected" => "events.disconnected-announced",
            "accounts.updated" => ACCOUNTS_UPDATED,
            "transaction.deleted" => TRANSACTION_DELETED,
            // credentials_submitted and verifying: announced on every path the graph explores.
            _ => GRAPH,
        }
    }

    /// Every owner, for the runner to hold their results until the exploration ended.
    pub(crate) const ALL: [&str; 15] = [
        SCHEMA,
        TRANSACTIONS_WALK,
        "events.disconnected-announced",
        ENVELOPE,
        CHAIN,
        GRAPH,
        ACCOUNTS_SERVED,
        ACCOUNT_PREFIX,
        ACCOUNTS_UPDATED,
        TRANSACTION_DELETED,
        "events.created-announced",
        "events.connected-announced",
        "events.failed-auth-announced",
        "events.mfa-required-announced",
        "events.error-announced",
    ];
}

/// The steps of a played sequence: each action with the state it was tried from and what the
/// target did.
pub(super) type Played = Vec<(ConnectionState, Action, Transition)>;

/// Plays `actions` on a fresh connection, then judges what the events and the API tell.
pub(super) async fn play(ctx: &Session, actions: &[Action]) -> Result<Played, Stop> {
    let (played, pending) = drive(ctx, actions).await?;
    pending.judge(ctx).await?;
    Ok(played)
}

/// A driven sequence, to judge once its events are in: no step waits for the webhooks of the
/// one before (the spec puts no read between them, §6.3).
pub(super) struct Pending {
    id: String,
    trace: Trace,
    /// The events the accepted steps announce, one per state change (§3.1, §6), in order.
    expected: Vec<&'static str>,
    /// The last data action the target accepted, when no state change followed it: its
    /// reaction is judged after its event (§6.3).
    reaction: Option<(Action, std::collections::HashSet<String>, Option<Before>)>,
}

/// Drives `actions` on a fresh connection (see [`Walk`]).
pub(super) async fn drive(ctx: &Session, actions: &[Action]) -> Result<(Played, Pending), Stop> {
    let mut walk = Walk::start(ctx).await?;
    for &action in actions {
        walk.step(ctx, action).await?;
    }
    Ok(walk.finish())
}

/// A fresh connection driven one step at a time, following the driver's answers: an accepted
/// action moves it to the state the action targets (a data action keeps the state).
pub(super) struct Walk {
    created: Created,
    state: ConnectionState,
    /// Every action driven, the one under way included (for messages).
    pub(super) actions: Vec<Action>,
    played: Played,
    pending: Pending,
}

impl Walk {
    /// Creates the connection: CREATED, announced by connection.created (§3.2).
    pub(super) async fn start(ctx: &Session) -> Result<Walk, Stop> {
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
    pub(super) fn state(&self) -> ConnectionState {
        self.state
    }

    /// Whether the driver's answers so far made the connection CONNECTED at some step.
    pub(super) fn after_connected(&self) -> bool {
        self.state == ConnectionState::Connected
            || self.played.iter().any(|(_, _, t)| *t == Transition::Accepted(ConnectionState::Connected))
    }

    /// Drives `action`; a refused or unsupported one changes nothing (not a failure).
    pub(super) async fn step(&mut self, ctx: &Session, action: Action) -> Result<Transition, Stop> {
        let receiver = ctx.receiver()?;
        let driver = ctx.driver.as_ref().ok_or_else(|| Stop::ignore("needs a driver"))?;
        self.actions.push(action);
        let Pending { id, trace, expected, reaction } = &mut self.pending;
        // A data action goes only to what a CONNECTED connection lists: where nothing is listed
        // to act on, it is not sent (the same target whatever the seed, never the driver's pick).
        let data_action = is_data(action);
        let before = if data_action && self.state == ConnectionState::Connected {
            match Before::prepare(ctx, id, action).await {
                Ok(prepared) => Some(prepared),
                Err(Stop::Fail(f)) => match left_connected(ctx, id, &f).await {
                    // Not where the driver's answers put it: nothing to act on (§3.2 leaves the
                    // transactions of a connection that is not CONNECTED open).
                    Some(event) => {
                        trace.steps.push(format!("{action} (not sent: {event} came as it was read)"));
                        self.played.push((self.state, action, Transition::NotSent));
                        return Ok(Transition::NotSent);
                    }
                    None => return Err(Stop::Fail(f.owned_by(owners::TRANSACTIONS_WALK))),
                },
                Err(e) => return Err(e),
            }
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
            crate::harness::transport::pagination::forget(&ctx.api, account);
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
            crate::harness::transport::pagination::forget(&ctx.api, account);
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

    /// What was played, and the judgement to come.
    pub(super) fn finish(self) -> (Played, Pending) {
        (self.played, self.pending)
    }
}

impl Pending {
    /// Waits (bounded) until every expected event has arrived, the chain links up, and the
    /// last data action's own event (naming what it was driven on) is in; fails if an expected
    /// event is missing. Returns the deliveries. The reaction waits for its own event as the
    /// tour's does: another event of the same type may come first (a sync of another account),
    /// and which came first must not decide what is judged.
    async fn settle(&self, ctx: &Session) -> Result<Vec<Delivery>, Stop> {
        let Pending { id, trace, expected, reaction } = self;
        let receiver = ctx.receiver()?;
        // Events are a set: copies of one event count once (§6.3 leaves retries open).
        let missing = |ds: &[Delivery]| {
            expected.iter().copied().find(|t| !delivery::holds(ds, t, expected.iter().filter(|e| e == &t).count()))
        };
        let own_event = |ds: &[Delivery]| {
            reaction.as_ref().is_none_or(|(action, known, before)| {
                let Some(before) = before else { return true };
                let names = |d: &Delivery| before.named_by(*action, d);
                delivery::step_event(ds, known, announcing_event(*action), names).is_some_and(names)
            })
        };
        let started = std::time::Instant::now();
        let what = format!("{} for {id}", expected.join(", "));
        let (_, deliveries) = receiver
            .wait_until(&what, id, ctx.plan.event_wait(), |ds| {
                missing(ds).is_none() && chain::ends(ds).is_ok() && own_event(ds)
            })
            .await;
        if let Some(absent) = missing(&deliveries) {
            let problem = format!(
                "the target accepted the action, but no {absent} arrived ({}){}",
                receiver.patience.describe(started.elapsed()),
                receiver.refusals()
            );
            let owner = (owners::announced(absent), LifecycleKind::NotAnnounced.into());
            return Err(trace.fail(owner, id, problem, &deliveries));
        }
        Ok(deliveries)
    }

    /// Waits (bounded) until every expected event has arrived and the chain links up, then
    /// judges: each delivery's schema and envelope (§6.1, §6.2), the chain (§3, §6.2), the
    /// accounts against the last announced state (§3.2, §4.2), and the last data action's
    /// reaction (§6.3).
    pub(super) async fn judge(self, ctx: &Session) -> Result<(), Stop> {
        let deliveries = self.settle(ctx).await?;
        let Pending { id, trace, reaction, .. } = self;
        // Every delivery on its own: schema (which also asserts the prefixes of the ids it
        // names, §2) and envelope agreement (§6.2).
        event_rules::schema(&deliveries).map_err(|problem| {
            let owner = (owners::SCHEMA, kind_of(&problem, LifecycleKind::Event));
            trace.fail(owner, &id, problem.to_string(), &deliveries)
        })?;
        event_rules::envelope_agrees(&deliveries).map_err(|problem| {
            let owner = (owners::ENVELOPE, kind_of(&problem, LifecycleKind::Event));
            trace.fail(owner, &id, problem.to_string(), &deliveries)
        })?;
        chain::resolve(&deliveries).map_err(|problem| {
            trace.fail((owners::CHAIN, LifecycleKind::Chain.into()), &id, problem.to_string(), &deliveries)
        })?;
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
    let owner =
        if action == Action::DeleteTransaction { owners::TRANSACTION_DELETED } else { owners::ACCOUNTS_UPDATED };
    match react(ctx, id, action, event, before.as_ref(), &Auth::Primary, None).await {
        Err(Stop::Fail(f)) if left_connected(ctx, id, &f).await.is_some() => Ok(()),
        Err(e) if e.is_fail() => {
            Err(trace.fail((owner, kind_of(&e, LifecycleKind::Reaction)), id, e.to_string(), deliveries))
        }
        other => other,
    }
}

/// The event that announced `id` leaving CONNECTED (a full form whose `previousStatus` is
/// `connected`), with no `connection.connected` first heard after it and before the refused
/// request was sent, awaited (bounded), when `failure` rests on a refusal (a 4xx other than 408
/// and 429, rule 5): the read may have met that other state, so it is no evidence about a
/// CONNECTED connection, which the walk's steps alone would take it for (a driver-refused
/// action the target did anyway, `tests/foreign/python-staging`'s `refused-connect-applies`; §3.2 leaves
/// the transactions of a connection that is not CONNECTED open).
async fn left_connected(ctx: &Session, id: &str, failure: &Failure) -> Option<&'static str> {
    let refused = failure.evidence.answers.last().and_then(|seq| ctx.api.answers().get(*seq))?;
    if !(400..500).contains(&refused.status) || [408, 429].contains(&refused.status) {
        return None;
    }
    let receiver = ctx.receiver().ok()?;
    let left = || {
        let timeline = receiver.timeline();
        let heard: Vec<&(Instant, Delivery)> = timeline.iter().filter(|(_, d)| d.connection_id() == Some(id)).collect();
        let first = |d: &Delivery| heard.iter().filter(|(_, o)| o.identity() == d.identity()).map(|(at, _)| *at).min();
        let back_before_sent = |left_at: Instant| {
            heard.iter().any(|(_, d)| {
                d.event_type() == Some(ConnectionState::Connected.event_type())
                    && first(d).is_some_and(|at| at > left_at && at < refused.sent_at)
            })
        };
        heard
            .iter()
            .filter(|(_, d)| d.data_str("previousStatus") == Some("connected"))
            .filter_map(|(_, d)| Some((first(d)?, ConnectionState::from_event_type(d.event_type()?)?)))
            .find(|(at, state)| *state != ConnectionState::Connected && !back_before_sent(*at))
            .map(|(_, state)| state.event_type())
    };
    let what = format!("an event of {id} leaving connected that explains a refusal");
    receiver.wait_until(&what, id, ctx.plan.event_wait(), |_| left().is_some()).await;
    left()
}

/// Accounts are readable exactly when the connection is CONNECTED (§3.2, §4.2). The read met a
/// state the chain of the connection's events allows: one its events heard before the request
/// was sent can end in, or one announced by an event first heard since (the target moved on
/// while the read was in flight, `tests/foreign/python-staging`'s `refused-connect-applies`: a refusal in
/// VERIFYING whose `connection.connected` came a moment after), or the chain's end. A read that
/// disagrees with all of them waits (bounded) for a delivery still in flight that could
/// explain it: only one that still disagrees fails.
async fn accounts_follow_state(ctx: &Session, id: &str, trace: &Trace) -> Result<(), Stop> {
    let receiver = ctx.receiver()?;
    let before = receiver.for_connection(id);
    let known = delivery::identities(&before);
    let exchange = ctx.api.get(&["v1", "connections", id, "accounts"], &[]).await?;
    let served = exchange.is_success();
    let met = |s: &ConnectionState| (*s == ConnectionState::Connected) == served;
    let ended_before = chain::ends(&before).is_ok_and(|ends| ends.iter().any(met));
    let agrees = |ds: &[Delivery]| {
        let since = ds.iter().filter(|d| !known.contains(&d.identity()));
        ended_before
            || since.filter_map(|d| ConnectionState::from_event_type(d.event_type()?)).any(|s| met(&s))
            || chain::ends(ds).is_ok_and(|ends| ends.iter().any(met))
    };
    let mut deliveries = receiver.for_connection(id);
    if !agrees(&deliveries) {
        let what = format!("an event of {id} that explains {} ({})", exchange.request, exchange.status);
        deliveries = receiver.wait_until(&what, id, ctx.plan.event_wait(), agrees).await.1;
    }
    if !agrees(&deliveries) {
        let state = chain::resolve(&deliveries).map_err(|problem| {
            trace.fail((owners::CHAIN, LifecycleKind::Chain.into()), id, problem.to_string(), &deliveries)
        })?;
        let problem = if served {
            format!(
                "{}: the chain of events ends {state}, and CONNECTED was not announced since the request was sent, \
                 but accounts are served (status {})",
                exchange.request, exchange.status
            )
        } else {
            format!(
                "{}: the chain of events ends with connection.connected, and no other state was announced since \
                 the request was sent, but accounts are refused ({})",
                exchange.request,
                exchange.summary()
            )
        };
        let (owner, expected) = if served {
            (
                (owners::ACCOUNTS_SERVED, LifecycleKind::AccountsServed.into()),
                format!("a refusal (the chain ends {state})"),
            )
        } else {
            (
                (owners::ACCOUNTS_REFUSED, LifecycleKind::AccountsRefused.into()),
                "accounts served (CONNECTED)".to_string(),
            )
        };
        let got = if served { format!("status {}", exchange.status) } else { exchange.summary() };
        return Err(match trace.fail(owner, id, problem, &deliveries) {
            Stop::Fail(f) => Stop::Fail(f.expected(expected, got)),
            other => other,
        });
    }
    if served {
        if let Ok(Value::Array(accounts)) = exchange.success_json() {
            if let Some(bad) = accounts
                .iter()
                .filter_map(|a| a.get("id").and_then(Value::as_str))
                .find(|a| !a.starts_with(prefix::ACCOUNT))
            {
                return Err(trace.fail(
                    (owners::ACCOUNT_PREFIX, LifecycleKind::AccountPrefix.into()),
                    id,
                    format!("{}: account id {bad:?} does not start with {}", exchange.request, prefix::ACCOUNT),
                    &deliveries,
                ));
            }
        }
    }
    Ok(())
}
