//! The run's last look (§3.2, §4.2, §6): after the last flow, the accounts of each connection
//! the run created and left CONNECTED are read once more, with its owner's key, and the rules over every read
//! (`rules::invariants::settled`) weigh these reads too. A connection that leaves CONNECTED by
//! itself, unannounced, some seconds after it was connected (`tests/foreign/node-caches`'s
//! `silent-session-expiry`, 10 s) showed it to no read of a run whose reads of it all fell
//! before (missed at first sight). The look comes when the run's work is done, with no floor of
//! its own (issue 72): the notes say how long the states were watched. `--observe-for` asks for
//! a soak: the look then waits until the first connection announced CONNECTED has been so that
//! long, so a change within it shows in every run, whatever the pace.
//!
//! A read that disagrees with the state the connection's events end in waits (bounded) for an
//! event still in flight that explains it, as a client would: a target's own change, announced
//! late, is not taken for an unannounced one.

use super::{accounts::REFUSED_BEFORE_CONNECTED, events::CONNECTED_ANNOUNCED};
use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::{chain, delivery};
use crate::harness::transport::answers::Auth;
use crate::spec::ConnectionState;
use reqwest::Method;

/// Most connections the last look reads (in the order they were created).
const MOST: usize = 64;

/// Reads the accounts of the run's connections once more, when a case whose rules weigh every
/// accounts read runs (see the module).
pub(crate) async fn last_look(ctx: &RunContext, cases: &[&str]) {
    if !cases.iter().any(|c| [CONNECTED_ANNOUNCED, REFUSED_BEFORE_CONNECTED].contains(c)) {
        return;
    }
    let Ok(receiver) = ctx.receiver() else { return };
    let timeline = receiver.timeline();
    let looked: Vec<(String, Auth, ConnectionState)> = ctx
        .api
        .answers()
        .creations()
        .into_iter()
        .filter(|(_, auth)| [Auth::Primary, Auth::Second].contains(auth))
        .filter_map(|(id, auth)| Some((chain::resolve(&receiver.for_connection(&id)).ok()?, id, auth)))
        // The connections its events leave CONNECTED: the fault the look is for is a connection
        // leaving CONNECTED unannounced (a session that expires); the others were read where the
        // flows that drove them read them (issue 72: 40 reads to 14 on the sandbox).
        .filter(|(state, _, _)| *state == ConnectionState::Connected)
        .map(|(state, id, auth)| (id, auth, state))
        .take(MOST)
        .collect();
    let first_connected = timeline
        .iter()
        .filter(|(_, d)| d.event_type() == Some(ConnectionState::Connected.event_type()))
        .filter(|(_, d)| looked.iter().any(|(id, _, _)| d.connection_id() == Some(id)))
        .map(|(at, _)| *at)
        .min();
    let Some(first) = first_connected else { return };
    let observe = ctx.plan.observe_for;
    tokio::time::sleep_until(tokio::time::Instant::from_std(first + observe)).await;
    ctx.note(
        "last look",
        format!(
            "states watched for {:.1} s after CONNECTED: the accounts of {} connection(s) read once more at the \
             end, when the run's work was done (--observe-for {:.0} s at least): a state left unannounced later \
             than that is not seen (a longer --observe-for soaks)",
            first.elapsed().as_secs_f64(),
            looked.len(),
            observe.as_secs_f64()
        ),
    );
    let reads = looked.iter().map(|(id, auth, state)| look(ctx, id, auth, *state));
    futures::future::join_all(reads).await;
}

/// One connection's read; where it disagrees with `state`, the wait for an event that explains it.
async fn look(ctx: &RunContext, id: &str, auth: &Auth, state: ConnectionState) {
    let Ok(receiver) = ctx.receiver() else { return };
    let known = delivery::identities(&receiver.for_connection(id));
    let path = ["v1", "connections", id, "accounts"];
    let Ok(exchange) = ctx.api.send(Method::GET, &path, &[], auth.clone()).await else { return };
    if exchange.is_success() != (state == ConnectionState::Connected) {
        let what = format!("an event of {id} that explains {} ({})", exchange.request, exchange.status);
        let new = |ds: &[delivery::Delivery]| ds.iter().any(|d| !known.contains(&d.identity()));
        receiver.wait_until(&what, id, ctx.plan.event_wait(), new).await;
    }
}
