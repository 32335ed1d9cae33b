//! The tour: a few connections driven along fixed paths, recording what each step announced
//! and what re-reading the API showed right after. The event cases (§3, §6) and reaction cases
//! (§6.3) judge this record, so one set of drives serves them all.

use super::answers::Auth;
use super::delivery::{labels, Delivery};
use super::outcome::{Failure, Stop};
use super::pagination;
use super::session::Session;
use super::steps::Created;
use crate::spec::{Action, ACCOUNTS_UPDATED, TRANSACTION_DELETED};
use futures::future::join_all;
use reqwest::Method;
use serde_json::Value;

/// The paths driven for the client under test, each on a fresh connection. The data actions
/// and the disconnection go on two connections, so that the connect of the first stays
/// connected for its reaction read (a read follows `connection.connected` and the data
/// events, §6.3); each path's events are awaited together ([`run_leg`]).
const PATHS: [&[Action]; 5] = [
    &[Action::Connect, Action::UpdateAccounts, Action::DeleteTransaction],
    &[Action::Connect, Action::Disconnect],
    &[Action::RequireMfa],
    &[Action::FailAuth],
    &[Action::Error],
];

/// The path driven for the second client, when its key is given: its connections are announced
/// and chained too, under a `clientId` of its own (§3.2, §6.2).
const SECOND_CLIENT_PATH: &[Action] = &[Action::Connect];

/// What one driven step showed.
#[derive(Debug)]
pub(crate) struct Step {
    pub action: Action,
    /// The announcing event arrived and the reaction check after it held; or why not.
    pub verdict: Result<(), Stop>,
}

/// One connection of the tour.
#[derive(Debug)]
pub(crate) struct Leg {
    /// The client whose key created the connection: `Primary` or `Second`.
    pub client: Auth,
    pub path: &'static [Action],
    /// Why the connection could not be created, if it could not.
    pub created: Result<Created, Stop>,
    pub steps: Vec<Step>,
    /// Every delivery about the connection once the tour settled (duplicates included).
    pub deliveries: Vec<Delivery>,
}

#[derive(Debug)]
pub(crate) struct Tour {
    pub legs: Vec<Leg>,
}

impl Tour {
    pub(crate) async fn run(ctx: &Session) -> Tour {
        let mut plan: Vec<(Auth, &'static [Action])> = PATHS.iter().map(|p| (Auth::Primary, *p)).collect();
        if ctx.api.has_second_key() {
            plan.push((Auth::Second, SECOND_CLIENT_PATH));
        }
        // The legs share nothing but the receiver, so they run concurrently.
        let legs = join_all(plan.into_iter().map(|(client, path)| run_leg(ctx, client, path))).await;
        Tour { legs }
    }

    /// The verdict of the steps that drove `action`: the first failure among them, else the
    /// first verdict.
    pub(crate) fn step(&self, action: Action) -> Result<(), Stop> {
        let mut verdicts = Vec::new();
        for leg in self.legs.iter().filter(|leg| leg.path.contains(&action)) {
            leg.created.as_ref().map_err(Clone::clone)?;
            verdicts.extend(leg.steps.iter().filter(|s| s.action == action).map(|s| s.verdict.clone()));
        }
        let failed = verdicts.iter().find(|v| v.as_ref().is_err_and(Stop::is_fail)).cloned();
        failed
            .or(verdicts.into_iter().next())
            .unwrap_or_else(|| Err(Stop::ignore(format!("no tour step drove {action}"))))
    }

    /// Every delivery of the tour, by client: the client under test's connections, then the
    /// second client's (when its key is given).
    pub(crate) fn by_client(&self) -> Result<Vec<(String, Vec<Delivery>)>, Stop> {
        let mut groups = Vec::new();
        for (client, name) in [(Auth::Primary, "the client under test"), (Auth::Second, "the second client")] {
            let mut deliveries = Vec::new();
            for leg in self.legs.iter().filter(|leg| leg.client == client) {
                leg.created.as_ref().map_err(Clone::clone)?;
                deliveries.extend(leg.deliveries.iter().cloned());
            }
            if self.legs.iter().any(|leg| leg.client == client) {
                groups.push((name.to_string(), deliveries));
            }
        }
        Ok(groups)
    }

    /// Every connection the tour created, with its deliveries.
    pub(crate) fn connections(&self) -> Result<Vec<(&str, &[Delivery])>, Stop> {
        self.legs
            .iter()
            .map(|leg| match &leg.created {
                Ok(c) => Ok((c.connection_id.as_str(), leg.deliveries.as_slice())),
                Err(e) => Err(e.clone()),
            })
            .collect()
    }
}

async fn run_leg(ctx: &Session, client: Auth, path: &'static [Action]) -> Leg {
    let created = ctx.create_connection_as(client.clone()).await;
    let Ok(connection) = &created else {
        return Leg { client, path, created, steps: Vec::new(), deliveries: Vec::new() };
    };
    // Every step is driven first, in the path's order, and their events are awaited together:
    // one lateness per leg, however many steps (issue 42). The next step never waits for an
    // event: a step that needs the connection CONNECTED (a data action, §4.2; a disconnection
    // after connect) starts once the API serves its accounts, which says so whatever the
    // lateness of `connection.connected`. The reads the spec puts after an event (§6.3) are
    // each made once that event is in; a connect that a later state change leaves has none
    // (the connection has left the state by then: the other legs' connect reads it).
    let mut verdicts: Vec<Option<Result<(), Stop>>> = path.iter().map(|_| None).collect();
    let who = &client;
    let mut started = Vec::new();
    let mut blocked: Option<Stop> = None;
    for (at, &action) in path.iter().enumerate() {
        // A step that broke (its drive failed, or the driver did) leaves the connection in an
        // unknown state: the later steps are not driven (within a run of data actions, each is).
        if run_starts(path, at) {
            blocked = blocked.or_else(|| (0..at).find_map(|b| blocking(path, b, verdicts[b].as_ref(), "not driven")));
        }
        if let Some(why) = &blocked {
            verdicts[at] = Some(Err(why.clone()));
            continue;
        }
        if at > 0 && path[at - 1] == Action::Connect && action.target_state().is_some() {
            if let Err(e) = ctx.accounts_when_ready(&connection.connection_id).await {
                let why = match e {
                    e @ Stop::Fail(_) => {
                        Stop::ignore(format!("not driven: the accounts were not served after connect ({e})"))
                    }
                    other => other,
                };
                verdicts[at] = Some(Err(why));
                continue;
            }
        }
        match start_step(ctx, connection, action).await {
            Ok(step) => started.push((at, step)),
            Err(e) => verdicts[at] = Some(Err(e)),
        }
    }
    let left_after = |at: usize| started.iter().any(|(later, s)| *later > at && s.action.target_state().is_some());
    let reads: Vec<bool> = started.iter().map(|(at, _): &(usize, Started)| !left_after(*at)).collect();
    // Finished in the path's order: every event has been in flight since its drive, so the
    // waits still overlap (one lateness in all), and the reaction reads come in one order in
    // every run (a target whose reads depend on when a delivery was answered sees the same).
    for ((at, step), reads) in started.into_iter().zip(reads) {
        verdicts[at] = Some(finish_step(ctx, connection, step, who, reads).await);
    }
    // Likewise, what the later steps showed after one failed is not judged.
    let first = (0..path.len()).find_map(|at| Some((at, blocking(path, at, verdicts[at].as_ref(), "not judged")?)));
    if let Some((at, why)) = first {
        let next_run = (at + 1..path.len()).find(|l| run_starts(path, *l)).unwrap_or(path.len());
        verdicts[next_run..].iter_mut().for_each(|v| *v = Some(Err(why.clone())));
    }
    let steps = path
        .iter()
        .zip(verdicts)
        .map(|(&action, verdict)| Step { action, verdict: verdict.unwrap_or_else(|| Err(Stop::ignore("not driven"))) })
        .collect();
    // Let the chain settle: late deliveries are allowed, so wait (bounded) until it links up.
    let deliveries = match ctx.receiver() {
        Ok(r) => {
            let what = format!("the events of {} to link up (§6.2)", connection.connection_id);
            r.wait_until(&what, &connection.connection_id, ctx.plan.event_wait(), |ds| {
                super::chain::resolve(ds).is_ok()
            })
            .await
            .1
        }
        Err(_) => Vec::new(),
    };
    Leg { client, path, created, steps, deliveries }
}

/// Whether `action` acts on data (an account or a transaction) rather than on the connection.
fn data(action: Action) -> bool {
    matches!(action, Action::UpdateAccounts | Action::DeleteTransaction)
}

/// Whether the step at `at` starts a run of `path`: a data action after a data action
/// continues one (their events name what each was driven on, so one's failure says nothing of
/// the other's).
fn run_starts(path: &[Action], at: usize) -> bool {
    at == 0 || !(data(path[at]) && data(path[at - 1]))
}

/// What the steps of the runs after step `at` end in, when its `verdict` broke the leg: a
/// failure leaves the connection in an unknown state, and a broken driver (an error) is the
/// later steps' error too, never the target's failure. A skipped or refused step (ignored)
/// changes nothing. `what`: `not driven`, or `not judged`.
fn blocking(path: &[Action], at: usize, verdict: Option<&Result<(), Stop>>, what: &str) -> Option<Stop> {
    match verdict? {
        Err(e @ Stop::Fail(_)) => Some(Stop::ignore(format!("{what}: the earlier step {} failed ({e})", path[at]))),
        Err(Stop::Error(source, m)) => {
            Some(Stop::Error(*source, format!("{what}: the earlier step {} ended in an error ({m})", path[at])))
        }
        _ => None,
    }
}

/// A step driven, its event not yet awaited.
struct Started {
    action: Action,
    before: Option<Before>,
    /// The events known before the step was driven: none of them is the step's.
    known: std::collections::HashSet<String>,
    at: std::time::Instant,
    /// A data step's event is answered only after its reaction read, as a client's handler
    /// answers (§6.3): what the read shows cannot depend on when the delivery was acknowledged.
    hold: Option<super::receiver::Hold>,
}

/// Prepares (reads what a data action applies to) and drives one step.
async fn start_step(ctx: &Session, connection: &Created, action: Action) -> Result<Started, Stop> {
    let receiver = ctx.receiver()?;
    let id = &connection.connection_id;
    let before = match action {
        Action::UpdateAccounts | Action::DeleteTransaction => Some(Before::prepare(ctx, id, action).await?),
        _ => None,
    };
    // Never sent blind: a data action goes to what the connection lists (§4.2, §4.3).
    if before.as_ref().is_some_and(|b| b.target(action).is_none()) {
        return Err(Stop::ignore(format!(
            "{action} not sent: the connection lists no {} to act on",
            Before::target_kind(action)
        )));
    }
    let (account, transaction) = before.as_ref().map_or((None, None), |b| (b.account.clone(), b.transaction.clone()));
    let known = super::delivery::identities(&receiver.for_connection(id));
    let hold = before.is_some().then(|| receiver.hold(id, announcing_event(action)));
    let at = std::time::Instant::now();
    ctx.drive(action, connection, account.as_deref(), transaction.as_deref()).await?;
    Ok(Started { action, before, known, at, hold })
}

/// Waits for the event that announces a driven step, and checks the reaction (§6.3) where
/// `reads`: a connect that a later state change left has no reaction to read.
async fn finish_step(
    ctx: &Session,
    connection: &Created,
    step: Started,
    client: &Auth,
    reads: bool,
) -> Result<(), Stop> {
    let receiver = ctx.receiver()?;
    let id = &connection.connection_id;
    let Started { action, before, known, at, hold } = step;
    let expected = announcing_event(action);
    let names = |d: &Delivery| before.as_ref().is_none_or(|b| b.named_by(action, d));
    // The step's own event: not known before it, naming what it was driven on (a late copy of
    // an earlier event, or an event of another step, is not it).
    let (arrived, seen) = receiver
        .wait_until(&format!("{expected} for {id}"), id, ctx.plan.event_wait(), |ds| {
            super::delivery::step_event(ds, &known, expected, names).is_some_and(&names)
        })
        .await;
    // A wrong one is judged below (it names another object); none at all fails here.
    let event = super::delivery::step_event(&seen, &known, expected, names).cloned();
    if !arrived && event.is_none() {
        let message = format!(
            "drove {action} on {id}, but no {expected} arrived ({}); received {}{}{}",
            receiver.patience.describe(at.elapsed()),
            labels(&seen),
            receiver.batch_hint(),
            receiver.refusals()
        );
        // An absence: its evidence is what did arrive for the connection.
        return Err(Stop::Fail(super::event_rules::on(&seen, message)));
    }
    if !reads && action == Action::Connect {
        return Ok(());
    }
    react(ctx, id, action, event.as_ref(), before.as_ref(), client, hold).await
}

/// §6.3: the read that answers `accounts.updated` sees what it announces. The driver's
/// `update_accounts` changes the account (docs/driver.md), so the account's fields or its
/// transactions read after the event differ from the reads before the action. A reaction read
/// that shows nothing new is read again (bounded by the event wait): a change that shows up
/// later, with no `accounts.updated` of the account after the reaction read, means the event
/// came before the data, and the client that re-read on it missed the change (§6, §6.3). One
/// that never shows is not judged (an update that changed nothing visible).
async fn shows_update(
    ctx: &Session,
    connection_id: &str,
    account: &str,
    before: &Before,
    walked: Vec<String>,
    hold: Option<super::receiver::Hold>,
) -> Result<(), Stop> {
    let (Some(old), Some(old_ids)) = (&before.updated, before.transactions(account)) else { return Ok(()) };
    if old.get("id").and_then(Value::as_str) != Some(account) {
        return Ok(());
    }
    let receiver = ctx.receiver()?;
    // The account as listed now, and its transactions (walked again unless given).
    let read = |walked: Option<Vec<String>>| async move {
        let listed = ctx.accounts_when_ready(connection_id).await?;
        let now = listed.into_iter().find(|a| a.get("id").and_then(Value::as_str) == Some(account));
        let ids = match walked {
            Some(ids) => ids,
            None => {
                pagination::forget(&ctx.api, account);
                pagination::walk(&ctx.api, account, None, None).await?.ids()
            }
        };
        Ok::<_, Stop>(now.as_ref() != Some(old) || ids != old_ids)
    };
    let known = super::delivery::identities(&receiver.for_connection(connection_id));
    let reacted = std::time::Instant::now();
    let shown = read(Some(walked)).await?;
    // The reaction read is done: the delivery is answered now, as a client's handler would.
    drop(hold);
    if shown {
        return Ok(());
    }
    // The reaction read that showed nothing new: what a finding below rests on.
    let reaction = ctx.api.answers().latest(&["v1", "connections", connection_id, "accounts"]);
    let mut pause = std::time::Duration::from_millis(100);
    while reacted.elapsed() < ctx.plan.event_wait() {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
        if read(None).await? {
            let later = receiver.for_connection(connection_id);
            let announced_again = later.iter().any(|d| {
                d.event_type() == Some(ACCOUNTS_UPDATED)
                    && d.data_str("accountId") == Some(account)
                    && !known.contains(&d.identity())
            });
            if announced_again {
                return Ok(());
            }
            let message = format!(
                "after accounts.updated for {account}, GET /v1/connections/{connection_id}/accounts and \
                 GET /v1/accounts/{account}/transactions still showed the account as before the update; the change \
                 showed {:.1}s later with no accounts.updated after it: the event came before the data (§6, §6.3)",
                reacted.elapsed().as_secs_f64()
            );
            return Err(Stop::Fail(Failure::from(message).on_answer(reaction)));
        }
    }
    Ok(())
}

/// Before a data action (§6.3): what it applies to, and what the client could read then (the
/// accounts of the connection and, for a deletion, the transactions of the target account).
/// The events that follow must name these (§6, §6.2).
#[derive(Debug, Default)]
pub(crate) struct Before {
    pub account: Option<String>,
    pub transaction: Option<String>,
    /// Each account, with its transaction ids when they were read.
    accounts: Vec<(String, Option<Vec<String>>)>,
    /// The account an update is driven on, as the list showed it before (§4.2).
    updated: Option<Value>,
}

impl Before {
    /// Reads the connection's accounts once and picks the target of `action`: the first account
    /// to update, or the first transaction of the first account that has one to delete.
    pub(crate) async fn prepare(ctx: &Session, connection_id: &str, action: Action) -> Result<Before, Stop> {
        let mut before = Before::default();
        for account in ctx.accounts_when_ready(connection_id).await? {
            let Some(id) = account.get("id").and_then(Value::as_str) else { continue };
            let mut ids = None;
            if action == Action::DeleteTransaction && before.transaction.is_none() {
                let listed = pagination::walk(&ctx.api, id, None, None).await?.ids();
                if let Some(first) = listed.first() {
                    (before.account, before.transaction) = (Some(id.to_string()), Some(first.clone()));
                }
                ids = Some(listed);
            }
            if action == Action::UpdateAccounts && before.account.is_none() {
                before.account = Some(id.to_string());
                before.updated = Some(account.clone());
                ids = Some(pagination::walk(&ctx.api, id, None, None).await?.ids());
            }
            before.accounts.push((id.to_string(), ids));
        }
        Ok(before)
    }

    /// What `action` is driven on: the account to update or the transaction to delete; `None`
    /// when the connection lists none (the action is then not sent).
    pub(crate) fn target(&self, action: Action) -> Option<&str> {
        match action {
            Action::UpdateAccounts => self.account.as_deref(),
            Action::DeleteTransaction => self.transaction.as_deref(),
            _ => None,
        }
    }

    /// `account` or `transaction`, for messages.
    pub(crate) fn target_kind(action: Action) -> &'static str {
        if action == Action::DeleteTransaction {
            "transaction"
        } else {
            "account"
        }
    }

    /// Whether `event` names what `action` was driven on (§6.2: `accountId`, `transactionId`).
    pub(crate) fn named_by(&self, action: Action, event: &Delivery) -> bool {
        let field = if action == Action::DeleteTransaction { "transactionId" } else { "accountId" };
        self.target(action).is_some_and(|t| event.data_str(field) == Some(t))
    }

    fn has_account(&self, account: &str) -> bool {
        self.accounts.iter().any(|(id, _)| id == account)
    }

    /// The transactions `account` listed, when they were read.
    fn transactions(&self, account: &str) -> Option<&[String]> {
        self.accounts.iter().find(|(id, _)| id == account).and_then(|(_, ids)| ids.as_deref())
    }
}

/// The event type that announces a driven action (§3.1, §6).
pub(super) fn announcing_event(action: Action) -> &'static str {
    match action.target_state() {
        Some(state) => state.event_type(),
        None if action == Action::UpdateAccounts => ACCOUNTS_UPDATED,
        None => TRANSACTION_DELETED,
    }
}

/// A finding about the step's `event`, resting on its delivery.
fn about(event: Option<&Delivery>, message: impl Into<String>) -> Stop {
    let failure = Failure::from(message.into());
    Stop::Fail(match event {
        Some(d) => failure.on_delivery(d.seq),
        None => failure,
    })
}

/// A failure of the reaction to `event`, saying so; what stops otherwise (a read left
/// unanswered) is passed on as it is, never made a failure.
fn after(event: &'static str) -> impl Fn(Stop) -> Stop {
    move |stop| match stop {
        Stop::Fail(f) => Stop::Fail(f.reworded(|m| format!("after {event}: {m}"))),
        other => other,
    }
}

/// What the client does on the event (§6.3), and whether it shows what the event announced.
pub(crate) async fn react(
    ctx: &Session,
    connection_id: &str,
    action: Action,
    event: Option<&Delivery>,
    before: Option<&Before>,
    client: &Auth,
    hold: Option<super::receiver::Hold>,
) -> Result<(), Stop> {
    let data = |field: &str| {
        event.and_then(|e| e.body.pointer(&format!("/data/{field}"))).and_then(Value::as_str).map(str::to_string)
    };
    match action {
        // §3.2, §4.2: accounts are available once CONNECTED is announced.
        Action::Connect => {
            let path = ["v1", "connections", connection_id, "accounts"];
            let exchange = ctx.api.send(Method::GET, &path, &[], client.clone()).await?;
            exchange.success_json().map(|_| ()).map_err(after("connection.connected"))
        }
        // §6.3: re-read the account and its transactions.
        Action::UpdateAccounts => {
            let account =
                data("accountId").ok_or_else(|| about(event, "accounts.updated carries no data.accountId"))?;
            if before.is_some_and(|b| !b.has_account(&account)) {
                return Err(about(
                    event,
                    format!(
                    "accounts.updated names account {account}, which is not an account of connection {connection_id}"
                ),
                ));
            }
            let exchange = ctx.api.get(&["v1", "accounts", &account], &[]).await?;
            exchange.success_json().map_err(after("accounts.updated"))?;
            let walk = pagination::walk(&ctx.api, &account, None, None).await.map_err(after("accounts.updated"))?;
            match before {
                Some(before) => shows_update(ctx, connection_id, &account, before, walk.ids(), hold).await,
                None => Ok(()),
            }
        }
        // §6.3: the deleted transaction is gone from the list.
        Action::DeleteTransaction => {
            let account =
                data("accountId").ok_or_else(|| about(event, "transaction.deleted carries no data.accountId"))?;
            let txn = data("transactionId")
                .ok_or_else(|| about(event, "transaction.deleted carries no data.transactionId"))?;
            if let Some(before) = before {
                if !before.has_account(&account) {
                    return Err(about(event, format!(
                        "transaction.deleted names account {account}, which is not an account of connection {connection_id}"
                    )));
                }
                if before.transactions(&account).is_some_and(|listed| !listed.contains(&txn)) {
                    return Err(about(event, format!(
                        "transaction.deleted names {txn}, which GET /v1/accounts/{account}/transactions never listed before"
                    )));
                }
            }
            // The reaction read (§6.3). Whether it still lists the transaction is judged once, by
            // `state.deletions-hold`, over every read of the run.
            pagination::walk(&ctx.api, &account, None, None).await.map_err(after("transaction.deleted"))?;
            Ok(())
        }
        _ => Ok(()),
    }
}
