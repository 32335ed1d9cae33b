//! Four invariants over everything the run observed (issue 46; the rules are
//! `rules::invariants`): each is judged once, after the last flow, over every answer of either
//! client and every delivery at either address, whichever case or fixture made it. No case
//! calls them; their flows only make sure the record holds what each can judge (the reference
//! reads, the tour, a few probes of their own), reusing the fixtures every other case shares.

use super::{Endpoint, Judged};
use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::invariants::{self as inv, Client, Credential, Record};
use crate::harness::transport::answers::{Answer, Auth};
use crate::harness::vocab::budget;
use crate::harness::vocab::key_variant::KeyEdit;
use crate::harness::vocab::outcome::Stop;
use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

super::cases! {
    IDENTITY = "invariants.identity" => identity_reads, record [inv::identity::judge];
    CLOCK = "invariants.clock" => clock_reads, record [inv::clock::judge];
    REACH = "invariants.reach" => reach_probes, record [inv::reach::judge];
    CAUSE = "invariants.cause" => refused_requests, models [super::state::deletions_caused],
        record [inv::cause::judge, inv::cause_read::judge];
}

/// The whole record of the run: every answer (a 2xx body of §4's endpoints parsed one at a
/// time, only its ids and compared fields kept) and every delivery, on the wall clock.
pub(crate) fn record_of(ctx: &RunContext) -> Record {
    let (now, wall) = (Instant::now(), Utc::now());
    let on_wall = |at: Instant| {
        wall - chrono::Duration::from_std(now.saturating_duration_since(at)).unwrap_or(chrono::Duration::zero())
    };
    let mut record = Record::default();
    for answer in ctx.api.answers().all() {
        add_answer(&mut record, &answer, &on_wall);
    }
    for (arrived, delivery) in ctx.receiver.as_ref().map(|r| r.timeline()).unwrap_or_default() {
        record.delivery(on_wall(arrived), delivery);
    }
    let calls = ctx.api.recorder().calls();
    record.calls_cut = calls.len() >= crate::harness::transport::har::MAX_CALLS;
    record.calls = calls
        .into_iter()
        .map(|c| inv::Call {
            action: c.action,
            connection: c.connection,
            started: on_wall(c.started),
            done: c.exit == "exit 0",
        })
        .collect();
    record
}

fn add_answer(record: &mut Record, answer: &Answer, on_wall: &impl Fn(Instant) -> DateTime<Utc>) {
    let credential = match &answer.sent.auth {
        Auth::Primary => Credential::Key(Client::First),
        Auth::Second => Credential::Key(Client::Second),
        Auth::Missing => Credential::Missing,
        Auth::Header(h) => Credential::Header(h.clone()),
        Auth::NearKey(_) => Credential::NearKey,
    };
    // A 2xx answer's body, and a refusal's as the log keeps it (its first 2 KiB: what it shows
    // beside the refusal, `inv::reach`; a longer one does not parse and is not judged).
    let ok = (200..300).contains(&answer.status);
    let read = Endpoint::of(&answer.sent.method, &answer.segments).is_some();
    let kept = if ok { answer.body.as_deref() } else { answer.excerpt.as_deref() };
    let body = match kept {
        Some(text) if read && budget::too_dense(text.as_bytes()).is_none() => serde_json::from_str::<Value>(text).ok(),
        _ => None,
    };
    record.answer(inv::Exchange {
        seq: answer.seq,
        request: &answer.sent.request,
        method: &answer.sent.method,
        segments: &answer.segments,
        credential,
        status: answer.status,
        sent: on_wall(answer.sent_at),
        answered: on_wall(answer.answered_at),
        body: body.as_ref(),
    });
    if let Some(seen) = record.answers.last_mut() {
        seen.content_type.clone_from(&answer.content_type);
        seen.coding = answer.coding.clone();
        seen.revealed.clone_from(&answer.revealed);
        seen.tokens.clone_from(&answer.tokens);
        let judged = |t: &&str| ok && read && budget::too_dense(t.as_bytes()).is_none();
        seen.repeated =
            answer.body.as_deref().filter(judged).and_then(crate::harness::rules::members::repeated_differently);
    }
}

/// Runs the invariants of `cases` over the run's record, built once.
pub(crate) fn judge_record(ctx: &RunContext, cases: &[&str]) -> BTreeMap<&'static str, Judged> {
    let registrations: Vec<_> =
        cases.iter().filter_map(|id| super::code_of(id)).filter(|r| !r.invariants.is_empty()).collect();
    if registrations.is_empty() {
        return BTreeMap::new();
    }
    let record = record_of(ctx);
    registrations
        .into_iter()
        .map(|r| {
            let mut judged = Judged::default();
            for rule in r.invariants {
                let verdict = rule(&record);
                judged.answers += verdict.judged;
                judged.problems.extend(verdict.found);
                for why in verdict.unweighed {
                    ctx.note("judged in part", format!("{}: {why}", r.id));
                }
            }
            (r.id, judged)
        })
        .collect()
}

/// Identity: the reference reads of both clients, a single read of each of the shared
/// connection's accounts that no other flow has read singly yet (§4.4), and the first account
/// asked for under ids it does not have: its own part after the prefix behind another kind's
/// prefix or alone (§2: the prefix says the kind), and the ids of the connection and of a
/// transaction; and the accounts of a second connection of the client. Whatever these are answered with, the identity rule
/// judges it: an answer that shows an account under another id than the one asked for fails; a
/// refusal, any status, is not judged (§7).
async fn identity_reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.reference_reads().await?;
    let fixture = ctx.connected().await?;
    for id in fixture.account_ids() {
        if ctx.api.answers().latest(&["v1", "accounts", &id]).is_none() {
            ctx.api.get(&["v1", "accounts", &id], &[]).await?;
        }
    }
    let first = fixture.account_ids().into_iter().next();
    let mut asked = Vec::new();
    if let Some(rest) = first.as_deref().and_then(|a| a.strip_prefix(crate::spec::prefix::ACCOUNT)) {
        asked.extend([crate::spec::prefix::CONNECTION, crate::spec::prefix::TRANSACTION].map(|k| format!("{k}{rest}")));
        asked.push(rest.to_string());
    }
    // Ids of other objects that exist: the connection's own, and a transaction of its first
    // account (a lookup that takes any id it knows, of whatever kind, shows another object).
    asked.push(fixture.connection_id.clone());
    let walks = fixture.walks.iter().filter_map(|(_, w)| w.as_ref().ok());
    asked.extend(walks.flat_map(|w| w.ids()).next());
    for id in asked {
        ctx.api.get(&["v1", "accounts", &id], &[]).await?;
    }
    // A second connection of the client, listed (the tour's that stays connected; other flows
    // list it too): an account id the lists of two connections hold names two objects.
    if let Some(kept) = ctx.tour().await.ok().as_deref().and_then(|t| t.stays_connected().cloned()) {
        let path = ["v1", "connections", kept.connection_id.as_str(), "accounts"];
        if ctx.api.answers().latest(&path).is_none() {
            ctx.api.get(&path, &[]).await?;
        }
    }
    Ok(())
}

/// Clock: the reference reads and the tour (its creations announce the server's offset; its
/// updates and deletions carry timestamps of their own), and beside them a connection of its
/// own whose accounts are first read [`LATE_READ`] after its `connection.connected` arrived:
/// accounts stamped when first read, not when created, then show it ([`inv::clock`]).
async fn clock_reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let shared = async {
        ctx.reference_reads().await?;
        ctx.tour().await.map(|_| ())
    };
    let (shared, late) = tokio::join!(shared, late_first_read(&ctx));
    shared.and(late)
}

/// Longer than [`inv::clock::CREATED_SLACK`] by a margin. Counted in the server's clock from
/// the event's `occurredAt`, so the stamp is surely past the slack. Each stamp written to the
/// whole second adds [`CUT`].
const LATE_READ: std::time::Duration = std::time::Duration::from_millis(1250);

/// What a stamp cut to the whole second may read early by: a `createdAt` made at the read then
/// shows up to 1 s before it (a read 0.5 s past the slack was missed in about half the runs of
/// a sandbox that wrote `createdAt` so).
const CUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Creates and connects a connection, waits for its `connection.connected`, and reads its
/// accounts for the first time once the server's clock has surely passed the event's
/// `occurredAt` by [`LATE_READ`]: by the receiver's [`clock_floor`](crate::harness::transport::receiver::Receiver::clock_floor),
/// at most [`LATE_READ`] after the event arrived (a queue that delivers it late then costs no
/// extra wait). Without a driver or a receiver there is nothing to compare, and nothing is done.
async fn late_first_read(ctx: &RunContext) -> Result<(), Stop> {
    let (Some(_), Ok(receiver)) = (ctx.driver.as_ref(), ctx.receiver()) else { return Ok(()) };
    let created = ctx.create_connection().await?;
    ctx.drive(crate::spec::Action::Connect, &created, None, None).await?;
    let connected = crate::spec::ConnectionState::Connected.event_type();
    let (_, seen) = receiver.wait_for_type(&created.connection_id, connected, ctx.plan.event_wait()).await;
    let stamps: Vec<_> =
        seen.iter().filter(|d| d.event_type() == Some(connected)).filter_map(|d| d.occurred_at()).collect();
    // An event stamped to the whole second widens the rule's slack by a second; accounts whose
    // `createdAt` is (every one the shared connection listed, or it listed none) may show the
    // late stamp a second early: wait as much more for each.
    let event_cut = stamps.iter().copied().any(inv::clock::whole_second);
    let accounts_cut = ctx.connected().await.map_or(true, |c| {
        let at = |a: &Value| a.get("createdAt")?.as_str()?.parse::<DateTime<Utc>>().ok();
        c.accounts.iter().all(|a| at(a).is_none_or(inv::clock::whole_second))
    });
    let late = LATE_READ + CUT * (u32::from(event_cut) + u32::from(accounts_cut));
    let due = stamps.iter().min().zip(receiver.clock_floor());
    tokio::time::sleep(due.map_or(late, |(at, floor)| until_server_passes(*at, floor, late, chrono::Utc::now()))).await;
    ctx.accounts_when_ready(&created.connection_id).await.map(|_| ())
}

/// How long from `now` until the server's clock, at least `floor` ahead of this machine's, has
/// passed `at` by `late`; never more than `late` (what waiting from the event's arrival costs).
fn until_server_passes(
    at: chrono::DateTime<chrono::Utc>,
    floor: chrono::Duration,
    late: std::time::Duration,
    now: chrono::DateTime<chrono::Utc>,
) -> std::time::Duration {
    let left = at + chrono::Duration::from_std(late).unwrap_or_default() - floor - now;
    left.to_std().unwrap_or_default().min(late)
}

/// Reach: the shared connection's own `widgetToken` tried as the Bearer key on its own
/// accounts and transactions (auth.widget-token tries a fresh token on other data), and each
/// client's key on the other's connection, account and transactions.
async fn reach_probes(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let fixture = ctx.connected().await?;
    let paths = |connected: &crate::harness::fixtures::context::Connected| {
        let mut out =
            vec![vec!["v1".to_string(), "connections".into(), connected.connection_id.clone(), "accounts".into()]];
        if let Some(account) = connected.account_ids().first() {
            out.push(vec!["v1".into(), "accounts".into(), account.clone()]);
            out.push(vec!["v1".into(), "accounts".into(), account.clone(), "transactions".into()]);
        }
        out
    };
    let send = |segments: Vec<String>, auth: Auth| {
        let ctx = ctx.clone();
        async move {
            let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
            ctx.api.send(Method::GET, &segments, &[], auth).await.map(|_| ())
        }
    };
    match token_of(&ctx, &fixture.connection_id) {
        Some(token) => {
            ctx.redactor.add_token(&token);
            for path in paths(&fixture) {
                send(path, Auth::Header(format!("Bearer {token}"))).await?;
            }
        }
        None => ctx.note(
            "not judged",
            format!("invariants.reach: no widgetToken of {} in the run's creations", fixture.connection_id),
        ),
    }
    if let Some(second) = ctx.connected_second().await? {
        for path in paths(&second) {
            send(path, Auth::Primary).await?;
        }
        for path in paths(&fixture) {
            send(path, Auth::Second).await?;
        }
    }
    Ok(())
}

/// The `widgetToken` the run's creation of `connection` answered with.
fn token_of(ctx: &RunContext, connection: &str) -> Option<String> {
    ctx.api.answers().all().iter().rev().find_map(|a| {
        if a.sent.method != "POST" || !(200..300).contains(&a.status) {
            return None;
        }
        let body: Value = serde_json::from_str(a.body.as_deref()?).ok()?;
        (body.get("connectionId")?.as_str()? == connection)
            .then(|| body.get("widgetToken")?.as_str().map(str::to_string))?
    })
}

/// Cause: the two experiments side by side, creations and reads, then one creation that
/// settles both ([`settle`]; one for each was a creation and its delivery more: issue 72).
async fn refused_requests(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (created, read) = tokio::join!(refused_creations(ctx.clone()), refused_reads(ctx.clone()));
    created.and(read)?;
    settle(&ctx).await
}

/// The credentials the service must refuse: none, a malformed header, a key never issued.
fn refused_credentials(ctx: &RunContext) -> Vec<Auth> {
    let key = ctx.api.keys().next().unwrap_or_default().to_string();
    let prefix = key.find('_').map_or("unknown_", |i| &key[..=i]);
    let forged = format!("Bearer {prefix}bankconfNeverIssued0000000001");
    vec![Auth::Missing, Auth::Header("Bearer not a key".into()), Auth::Header(forged)]
}

/// Cause, over reads: an account of a fresh connection of the first client, which no other
/// flow reads or drives (else of the shared connection), read (§4.4) and its transactions read
/// (§4.3), three times each (the first sync after a connect is taken for the connect's, whatever
/// caused it), with no key, with a key never issued and with the second client's key, once the
/// connection's deliveries have been quiet a while: what it announced on connecting is not in
/// their windows, and no 2xx read of another flow makes their effects the run's own
/// (issue 51: with the second client's connection as the subject, the state cases' reads of it
/// fell beside the refusals under load, and mutant `other-client-read-syncs` passed in 1 run
/// of 8). The rule (`inv::cause_read`) weighs them with every other refused read of the run
/// (the reach probes' keys of the other client, the auth cases' headers).
async fn refused_reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (connection, ids) = match ctx.connect_new_as(Auth::Primary).await {
        Ok((created, accounts)) => {
            let ids = accounts.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_string)).collect();
            (created.connection_id, ids)
        }
        Err(Stop::Ignore(..)) => {
            let shared = ctx.connected().await?;
            (shared.connection_id.clone(), shared.account_ids())
        }
        Err(stop) => return Err(stop),
    };
    let Some(account) = ids.first().cloned() else { return Ok(()) };
    if let Some(other) = ids.last().filter(|id| **id != account) {
        listed_twice(&ctx, other).await?;
    }
    let credentials = refused_credentials(&ctx);
    let other = ctx.api.has_second_key().then_some(Auth::Second);
    quiet_deliveries(&ctx, &connection).await;
    for auth in [Some(&credentials[0]), Some(&credentials[2]), other.as_ref()].into_iter().flatten() {
        for _ in 0..3 {
            ctx.api.send(Method::GET, &["v1", "accounts", &account], &[], auth.clone()).await?;
            ctx.api.send(Method::GET, &["v1", "accounts", &account, "transactions"], &[], auth.clone()).await?;
        }
    }
    Ok(())
}

/// Cause, over events about objects nobody created: another account of the experiment's
/// connection listed to its end, then, the offset's uncertainty later ([`margin`]), its first
/// page once more (two requests or a few more), so that a `transaction.deleted` the server
/// dates between them is judged (`state::deletions_caused`) whatever else the run selected.
/// Before the quiet wait that precedes the refusals, and of another account than theirs: these
/// 2xx reads make none of them unclear, and an event they set off is past by then.
async fn listed_twice(ctx: &RunContext, account: &str) -> Result<(), Stop> {
    use crate::harness::transport::pagination;
    pagination::walk(&ctx.api, account, None, None).await?;
    tokio::time::sleep(margin(&record_of(ctx))).await;
    pagination::fetch_page(&ctx.api, account, None, None).await?;
    Ok(())
}

/// One creation of the run after an experiment's refusals, whose `connection.created` is
/// awaited: the refusals' effects have had the time to arrive, so the rule weighs them whichever
/// flows ran after this one (`inv::cause::settled_after`).
async fn settle(ctx: &RunContext) -> Result<(), Stop> {
    let created = ctx.create_connection().await?;
    let receiver = ctx.receiver()?;
    let created_event = crate::spec::ConnectionState::Created.event_type();
    receiver.wait_for_type(&created.connection_id, created_event, ctx.plan.event_wait()).await;
    Ok(())
}

/// Until no delivery about `connection` arrived for [`QUIET`], at most [`QUIET_CAP`]: a burst a
/// server sends on connecting has passed (a steady background never ends, and the rule weighs
/// it as a rate).
async fn quiet_deliveries(ctx: &RunContext, connection: &str) {
    let Some(receiver) = ctx.receiver.as_ref() else { return };
    let started = Instant::now();
    while started.elapsed() < QUIET_CAP {
        let last = receiver
            .timeline()
            .into_iter()
            .filter(|(_, d)| d.connection_id() == Some(connection))
            .map(|(at, _)| at)
            .max();
        let quiet_for = last.map_or(started.elapsed(), |at| at.elapsed());
        if quiet_for >= QUIET {
            return;
        }
        tokio::time::sleep(QUIET - quiet_for).await;
    }
}

/// How long the cause experiment waits for the run's first delivery before it goes on without.
const HEARD_SOON: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the subject of the refused reads stays silent before them, and the longest wait.
const QUIET: std::time::Duration = std::time::Duration::from_millis(1000);
const QUIET_CAP: std::time::Duration = std::time::Duration::from_secs(4);

/// Cause: creations the service must refuse (no key, a malformed header, a key never issued, a
/// fresh connection's widget token, two near misses of the key), each twice, one after the other, while no creation of the run is in flight ([`margin`] before
/// and after: their effects cannot be confused with the run's own), then one of the run's own,
/// whose `connection.created` is awaited: the refusals' effects have had the time to arrive,
/// and the rule weighs them in every run (`inv::cause`).
async fn refused_creations(ctx: Arc<RunContext>) -> Result<(), Stop> {
    // A delivery heard narrows the margin ([`margin`]); none heard soon leaves it at its widest,
    // the safe side, rather than waiting out a late queue here as well as in [`settle`] (two
    // late waits in turn: issue 72).
    if let Ok(receiver) = ctx.receiver() {
        let soon = Instant::now() + HEARD_SOON;
        while receiver.arrived_so_far() == 0 && receiver.next_arrival(soon).await {}
    }
    let mut credentials = refused_credentials(&ctx);
    // A fresh connection's widget token too (§5: the frontend's, never a key): redacted as one.
    if let Some(token) = ctx.created().await.ok().and_then(|c| c.widget_token.clone()) {
        ctx.redactor.add(&token);
        credentials.push(Auth::Header(format!("Bearer {token}")));
    }
    credentials.extend(near_keys(&ctx));
    {
        let _quiet = ctx.api.quiet().await;
        let margin = margin(&record_of(&ctx));
        tokio::time::sleep(margin).await;
        // Each twice: each kind of credential is an experiment of its own (`inv::cause`).
        for auth in credentials.iter().flat_map(|a| [a.clone(), a.clone()]) {
            ctx.api.send(Method::POST, &["v1", "connections"], &[], auth).await?;
        }
        tokio::time::sleep(margin).await;
    }
    Ok(())
}

/// Two near misses of the API key (its letters' case swapped, else one character more, and the
/// key short of its last character), each redacted as the key: a server that compares keys
/// loosely, or after it acted, creates for them (`tests/foreign/node-side-effects`'s `near-miss-creates`,
/// caught at first only when `auth.near-miss-key`'s refusals fell clear of the run's creations).
fn near_keys(ctx: &RunContext) -> Vec<Auth> {
    let keys: Vec<String> = ctx.api.keys().map(str::to_string).collect();
    let Some(key) = keys.first() else { return Vec::new() };
    let edits = super::security::near_misses(key).into_iter().map(|(edit, _)| edit);
    let mut chosen: Vec<_> = edits.filter(|e| !keys.contains(&e.apply(key)) && !e.apply(key).is_empty()).collect();
    // The case swap when there is one (the last listed), else one character more; then a cut.
    chosen.sort_by_key(|e| !matches!(e, KeyEdit::SwapCase));
    let (loose, cut) = (chosen.first().cloned(), chosen.iter().find(|e| matches!(e, KeyEdit::CutLast)).cloned());
    [loose, cut].into_iter().flatten().inspect(|e| ctx.redactor.add(&e.apply(key))).map(Auth::NearKey).collect()
}

/// How long the cause experiment keeps apart from the run's creations on either side, at most:
/// more than the server's clock offset is uncertain by on a local target (a creation's event
/// latency).
const MARGIN: std::time::Duration = std::time::Duration::from_millis(400);

/// The cause experiment's distance from the run's creations: twice the offset's uncertainty the
/// record shows so far ([`inv::cause::reach_so_far`], which only narrows as the run goes on, so
/// its refusals stay clear at the judgment), at least [`MARGIN_FLOOR`] for the scheduling, at
/// most [`MARGIN`]; [`MARGIN`] while the record bounds no offset tightly. Each of the run's
/// creations the experiment holds back waits this long twice, so a local target's few
/// milliseconds are not made 400 ms.
fn margin(record: &Record) -> std::time::Duration {
    let Some(reach) = inv::cause::reach_so_far(record).and_then(|r| r.to_std().ok()) else { return MARGIN };
    (reach * 2).clamp(MARGIN_FLOOR, MARGIN)
}

/// The least [`margin`]: the harness's own scheduling between a request and its record.
const MARGIN_FLOOR: std::time::Duration = std::time::Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::until_server_passes;
    use chrono::{Duration, TimeZone, Utc};
    use std::time::Duration as Std;

    #[test]
    fn the_late_read_waits_in_the_servers_clock() {
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let late = Std::from_millis(2250);
        // The event arrived 1 s after it occurred (clocks equal): 1.25 s are left.
        assert_eq!(until_server_passes(at, Duration::zero(), late, at + Duration::seconds(1)), Std::from_millis(1250));
        // A server 300 ms behind: its clock passes the mark 300 ms later.
        let behind = until_server_passes(at, Duration::milliseconds(-300), late, at + Duration::seconds(1));
        assert_eq!(behind, Std::from_millis(1550));
        // Never longer than from the arrival; nothing left once the mark has passed.
        assert_eq!(until_server_passes(at, Duration::hours(-1), late, at), late);
        assert_eq!(until_server_passes(at, Duration::zero(), late, at + Duration::seconds(3)), Std::ZERO);
    }
}
