//! Reads a case already found stale, set aside before the state rules judge the run (issue 51).
//! When `reactions.accounts-updated` found an `accounts.updated` that came before its data, any
//! read of an account soon after one of its `accounts.updated` arrived may show the data of
//! before, a deletion made meanwhile included. Whether some case's read fell in such a window
//! follows from the machine's timing alone: judged, they failed `state.deletions-hold` or
//! `state.changes-announced` in some runs only. The fault is the finding's, failed every run.

use super::model::Observed;
use crate::harness::rules::delivery::Delivery;
use crate::harness::setup::session::StaleReads;
use crate::spec;
use std::collections::HashMap;
use std::time::Instant;

/// `observed` without the reads that stale windows cover, and what the report says of them;
/// `None` when no case found a read stale. The windows: each one a case measured (from its
/// event's arrival to the answer that first showed the change), and for every account, the
/// longest of those after each of its `accounts.updated` arrived (its first arrival, from
/// `deliveries`): a flow that drove an update without judging its reaction has one too.
pub(crate) fn set_aside(
    observed: &Observed,
    found: &[StaleReads],
    deliveries: &[(Instant, Delivery)],
) -> Option<(Observed, Vec<String>)> {
    let lag = found.iter().map(|w| w.until.saturating_duration_since(w.from)).max()?;
    let mut windows: HashMap<&str, Vec<(Instant, Instant)>> = HashMap::new();
    for w in found {
        windows.entry(w.account.as_str()).or_default().push((w.from, w.until));
    }
    let mut first: HashMap<String, (Instant, &str)> = HashMap::new();
    for (at, d) in deliveries.iter().filter(|(_, d)| d.event_type() == Some(spec::ACCOUNTS_UPDATED)) {
        let Some(account) = d.data_str("accountId") else { continue };
        let entry = first.entry(d.identity()).or_insert((*at, account));
        entry.0 = entry.0.min(*at);
    }
    for (at, account) in first.into_values() {
        windows.entry(account).or_default().push((at, at + lag));
    }
    let covers = |sent: Instant, account: &str| {
        windows.get(account).is_some_and(|ws| ws.iter().any(|(from, until)| (*from..=*until).contains(&sent)))
    };
    let mut kept = observed.clone();
    kept.lists.retain(|l| !l.accounts.iter().any(|(id, _)| covers(l.answer.sent_at, id)));
    kept.pages.retain(|p| !covers(p.answer.sent_at, &p.account));
    kept.balances.retain(|(a, id, _)| !covers(a.sent_at, id));
    kept.singles.retain(|(a, id, _)| !covers(a.sent_at, id));
    let count = |o: &Observed| o.lists.len() + o.pages.len() + o.balances.len() + o.singles.len();
    let dropped = count(observed) - count(&kept);
    let mut accounts: Vec<&str> = found.iter().map(|w| w.account.as_str()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    let line = format!(
        "{dropped} read{} of an account sent within {:.1} s after one of its accounts.updated arrived (the longest \
         wait for the change that {} measured: the event came before the data, on {})",
        if dropped == 1 { "" } else { "s" },
        lag.as_secs_f64(),
        found[0].case,
        accounts.join(", ")
    );
    Some((kept, vec![line]))
}
