//! §3 States and §6 Events: what the webhook deliveries of the tour's connections say. Arrival
//! order and duplicates are never held against a target.
//!
//! The rules over deliveries live in [`crate::harness::rules::event_rules`], shared with `check-events`.

use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::chain;
use crate::harness::rules::delivery::{unique, Delivery};
use crate::harness::rules::event_rules;
use crate::harness::rules::invariants::{Record, Verdict};
use crate::harness::setup::session::Webhooks;
use crate::harness::transport::answers::{Auth, Creation};
use crate::harness::vocab::kind::EventKind;
use crate::harness::vocab::outcome::{Failure, Problem, Problems, Stop};
use crate::spec::{Action, ConnectionState};
use std::sync::Arc;

super::cases! {
    SCHEMA = "events.schema" => schema, record [schema_everywhere];
    DELIVERIES_ARE_EVENTS = "events.deliveries-are-events" => deliveries_are_events;
    ENVELOPE_AGREES = "events.envelope-agrees" => envelope_agrees, record [envelope_everywhere];
    UNIQUE_IDS = "events.unique-ids" => unique_ids, record [ids_everywhere];
    CREATED_ANNOUNCED = "events.created-announced" => created_announced;
    PREVIOUS_STATUS_CHAIN = "events.previous-status-chain" => previous_status_chain, record [reentries_everywhere];
    TIME_FOLLOWS_CHAIN = "events.time-follows-chain" => time_follows_chain;
    CONNECTED_ANNOUNCED = "events.connected-announced" => connected_announced,
        record [crate::harness::rules::invariants::settled::judge_connected];
    FAILED_AUTH_ANNOUNCED = "events.failed-auth-announced" => failed_auth_announced;
    MFA_REQUIRED_ANNOUNCED = "events.mfa-required-announced" => mfa_required_announced;
    ERROR_ANNOUNCED = "events.error-announced" => error_announced;
    DISCONNECTED_ANNOUNCED = "events.disconnected-announced" => disconnected_announced;
    SINGLE_CLIENT_ID = "events.single-client-id" => single_client_id;
    DISTINCT_CLIENT_IDS = "events.distinct-client-ids" => distinct_client_ids;
}

/// Every unique delivery of every tour connection, and the connections.
async fn tour_deliveries(ctx: &RunContext) -> Result<Vec<Delivery>, Stop> {
    let tour = ctx.tour().await?;
    Ok(tour.connections()?.into_iter().flat_map(|(_, ds)| ds.iter().cloned()).collect())
}

/// A rule over a set of deliveries, whatever their order.
pub(crate) type DeliveryRule = fn(&[Delivery]) -> Result<(), Stop>;

/// The cases that judge every delivery alike, with their rule: in a run over the tour's
/// deliveries, and in `bankconf check-events` over a capture.
pub(crate) const DELIVERY_RULES: [(&str, DeliveryRule); 3] = [
    (SCHEMA, event_rules::schema),
    (ENVELOPE_AGREES, event_rules::envelope_agrees),
    (UNIQUE_IDS, event_rules::ids_identify_events),
];

/// How `bankconf check-events` judges the run's case `case` on a capture, `None` for a case it
/// does not judge: the delivery rules over every delivery, the chain over the connections whose
/// capture holds their `connection.created`. The one judge of both `check-events` and the
/// runner, which prints a replay as a reproduction only when it fails here too.
pub(crate) fn offline(case: &str, deliveries: &[Delivery]) -> Option<Result<(), Stop>> {
    if let Some((_, rule)) = DELIVERY_RULES.iter().find(|(id, _)| *id == case) {
        return Some(rule(deliveries));
    }
    if case != PREVIOUS_STATUS_CHAIN {
        return None;
    }
    let (groups, _) = event_rules::by_connection(deliveries);
    let started: Vec<event_rules::Group<'_>> = groups
        .iter()
        .filter(|(_, ds)| event_rules::has_created(ds))
        .map(|(id, ds)| (id.as_str(), ds.as_slice()))
        .collect();
    Some(match started.is_empty() {
        true => Err(Stop::ignore("no connection in the capture has its connection.created: no chain to check")),
        false => event_rules::chains(&started),
    })
}

/// Applies the delivery rule of `case` to the tour's deliveries, and to every delivery that
/// names no connection (it may concern any of this run's, and no wait ever sees it).
/// The flow of a case whose [`DELIVERY_RULES`] rule judges the run's record: the tour, whose
/// deliveries the rule must see; the rule itself runs over every delivery of the run once the
/// flows ended, whichever flow caused it (a sync of a walk's account, a random sequence).
async fn over_tour(ctx: &RunContext, _case: &str) -> Result<(), Stop> {
    tour_deliveries(ctx).await?;
    ctx.receiver().map(|_| ())
}

/// `rule` over every delivery of the record: how many events it judged, and its failure.
fn over_record(rule: DeliveryRule, record: &Record) -> Verdict {
    let deliveries: Vec<Delivery> = record.deliveries.iter().map(|h| h.delivery.clone()).collect();
    let judged = unique(&deliveries).len();
    match rule(&deliveries) {
        Err(Stop::Fail(failure)) => (judged, vec![failure]).into(),
        _ => (judged, Vec::new()).into(),
    }
}

/// Every connection the run created: its events that announce re-entering a state
/// ([`chain::reentries`]) are no more than the accepted driver calls on it that lead to that
/// state (§6, §3.1; the ruling in `docs/checks.md`, "A state re-entered"). Judged over the whole
/// record at the end, whichever flow drove the connection: a late event only ever lowers the
/// count, so the order of arrival cannot fail a server.
fn reentries_everywhere(record: &Record) -> Verdict {
    let deliveries: Vec<Delivery> = record.deliveries.iter().map(|h| h.delivery.clone()).collect();
    let (groups, _) = event_rules::by_connection(&deliveries);
    let created: std::collections::HashSet<&str> = record.creations().map(|(c, _)| c).collect();
    let mut verdict = Verdict::default();
    if record.calls_cut {
        verdict.unweighed.push("re-entered states: the driver calls were more than the record keeps".to_string());
        return verdict;
    }
    for (connection, ds) in groups.iter().filter(|(c, _)| created.contains(c.as_str())) {
        verdict.judged += 1;
        let accepted = |state: ConnectionState| {
            record
                .calls
                .iter()
                .filter(|c| c.done && c.connection.as_deref() == Some(connection.as_str()))
                .filter(|c| Action::parse(c.action).and_then(Action::target_state) == Some(state))
                .count()
        };
        for (problem, events) in chain::unexplained_reentries(ds, accepted) {
            let detail = format!("connection {connection}: {problem}");
            let mut found = Problem::found(EventKind::Reentered, [connection.clone()], detail);
            if let crate::harness::vocab::errors::ChainError::NoChange { count, actions, state, .. } = &problem {
                found = found.expecting(format!("{actions} re-entries of {state} at most"), format!("{count}"));
            }
            verdict.found.push(event_rules::on(&events, found));
        }
    }
    verdict
}

fn schema_everywhere(record: &Record) -> Verdict {
    over_record(event_rules::schema, record)
}

fn envelope_everywhere(record: &Record) -> Verdict {
    over_record(event_rules::envelope_agrees, record)
}

fn ids_everywhere(record: &Record) -> Verdict {
    over_record(event_rules::ids_identify_events, record)
}

async fn unique_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    over_tour(&ctx, UNIQUE_IDS).await
}

async fn schema(ctx: Arc<RunContext>) -> Result<(), Stop> {
    over_tour(&ctx, SCHEMA).await
}

/// Every delivery the receiver took at either address by the end of the tour, whichever
/// connection it names or none: the tour's own are judged by `events.schema`, the rest here.
async fn deliveries_are_events(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let ours: std::collections::HashSet<String> =
        tour.connections()?.into_iter().map(|(id, _)| id.to_string()).collect();
    let all: Vec<Delivery> = ctx.session.receiver()?.timeline().into_iter().map(|(_, d)| d).collect();
    event_rules::deliveries_are_events(&all, &ours)
}

async fn envelope_agrees(ctx: Arc<RunContext>) -> Result<(), Stop> {
    over_tour(&ctx, ENVELOPE_AGREES).await
}

/// Every tour connection was created by this run (POST /v1/connections), so each must have
/// its connection.created (§3.2). (That no connection of the run is announced as created twice
/// is judged once the run's flows ended, over every delivery: `checks::misnamed`.)
async fn created_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for missing in event_rules::missing_created(&tour.connections()?) {
        problems.add(missing.reworded(|m| format!("{m}, though the connection was created by POST /v1/connections")));
    }
    problems.finish()
}

/// Most creations [`creations_announced`] looks at, in creation order.
const MOST_CREATIONS: usize = 256;

/// §3.2 over every creation of the run, either client's, driven or not: the tour judges its own
/// connections as it drives them, and this, after the last flow, every other one (a server that
/// sends `connection.created` only when a connection is first driven never announces the
/// connections no action reached: `tests/foreign/node-lazy`'s `created-event-lazy`). A creation whose
/// event has not arrived is awaited (the event wait, all at once); one still missing is reported
/// to `events.created-announced` only when deliveries about the same client's other connections
/// arrived after it was answered: the target demonstrably delivered that client's events since.
/// Otherwise it is not judged: deliveries may have stopped, or never had that client's address.
pub(crate) async fn creations_announced(ctx: &RunContext, selected: &[&str]) {
    if !selected.contains(&CREATED_ANNOUNCED) || !matches!(ctx.webhooks, Webhooks::Registered) {
        return;
    }
    let Ok(receiver) = ctx.receiver() else { return };
    let created = ConnectionState::Created.event_type();
    let mut made: Vec<Creation> =
        ctx.api.answers().created().into_iter().filter(|c| [Auth::Primary, Auth::Second].contains(&c.auth)).collect();
    if made.len() > MOST_CREATIONS {
        ctx.note(
            "creations",
            format!(
                "the announcements of the first {MOST_CREATIONS} of {} connections created were judged after the \
                 last flow (a bound of the harness's effort)",
                made.len()
            ),
        );
        made.truncate(MOST_CREATIONS);
    }
    let waits = made.iter().map(|c| async move {
        let (arrived, _) = receiver.wait_for_type(&c.id, created, ctx.plan.event_wait()).await;
        (!arrived).then_some(c)
    });
    let missing: Vec<&Creation> = futures::future::join_all(waits).await.into_iter().flatten().collect();
    if missing.is_empty() {
        return;
    }
    if receiver.refused() > 0 {
        ctx.note(
            "creations",
            format!(
                "{} connection(s) created without a {created} arriving were not judged: the receiver refused {} \
                 delivery(ies) by its bounds, which may have held them",
                missing.len(),
                receiver.refused()
            ),
        );
        return;
    }
    let timeline = receiver.timeline();
    let owners: std::collections::HashMap<&str, &Auth> = made.iter().map(|m| (m.id.as_str(), &m.auth)).collect();
    for c in missing {
        // The same client's other connections: its events kept arriving after this creation.
        let own = |id: &str| id != c.id && owners.get(id) == Some(&&c.auth);
        let later = timeline.iter().filter(|(at, d)| *at > c.answered_at && d.connection_id().is_some_and(own)).count();
        if later == 0 {
            continue;
        }
        let whose = if c.auth == Auth::Second { "the second client" } else { "the first client" };
        let waited = c.answered_at.elapsed().as_secs_f64();
        ctx.report_to(
            CREATED_ANNOUNCED,
            Failure::from(Problem::found(
                EventKind::CreatedMissing,
                [c.id.clone()],
                format!(
                    "POST /v1/connections answered {} ({whose}), and no {created} naming it arrived in the {waited:.0} \
                     s after, while {later} delivery(ies) about the same client's other connections arrived after it: \
                     a creation is announced (§3.2), whether or not anything drives the connection (an announcement \
                     later than the run is not told from none)",
                    c.id
                ),
            ))
            .on_answer(Some(c.seq)),
        );
    }
}

async fn previous_status_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::chains(&ctx.tour().await?.connections()?)
}

/// Each tour connection's `occurredAt` times agree with its state chain (read order-free,
/// [`chain::time_contradictions`]).
async fn time_follows_chain(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let tour = ctx.tour().await?;
    let mut problems = Problems::default();
    for (connection, deliveries) in tour.connections()? {
        for contradiction in chain::time_contradictions(deliveries) {
            let detail = format!("{connection}: {}", contradiction.said);
            let problem = Problem::found(EventKind::TimeContradicts, [connection.to_string()], detail)
                .expecting(contradiction.expected, contradiction.actual);
            problems.add(event_rules::on(deliveries, problem));
        }
    }
    problems.finish()
}

async fn connected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Connect)
}

async fn failed_auth_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::FailAuth)
}

async fn mfa_required_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::RequireMfa)
}

async fn error_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Error)
}

async fn disconnected_announced(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::Disconnect)
}

/// The tour's connections all belong to the client under test: one group.
/// Each client's connections (the tour drives both when the second key is given) carry one
/// `clientId`.
async fn single_client_id(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::one_client_id(&ctx.tour().await?.by_client()?)
}

async fn distinct_client_ids(ctx: Arc<RunContext>) -> Result<(), Stop> {
    event_rules::distinct_client_ids(&ctx.tour().await?.by_client()?)
}
