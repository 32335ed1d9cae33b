//! Cause: a refused request has no effect (§5: only an API key opens the API; §7's refusals).
//! Judged as an experiment over the whole run: the effects are `connection.created` events
//! (§3.2) of connections no 2xx creation of the run answered with, at either address. Activity
//! the run did not start is legal by itself (another backend of the client may create
//! connections), so a steady background of such events proves nothing; effects that follow the
//! refused creations one for one, each inside its refusal's time window, do.
//!
//! A refusal's window is its request's [sent, answered], widened by [`SLACK`]; an effect's time
//! is its `occurredAt` in the harness's clock (the offset of [`super::clock::offsets`]: between
//! the tightest bounds the run's creations give), or, without an offset, its arrival within [`LATE`] of the answer. An effect
//! whose time overlaps the [sent, answered] of one of the run's own creations is ambiguous (a
//! server that makes a second connection along with each one asked for) and counts for neither
//! side.

use super::clock::offsets;
use super::{finding, Endpoint, Record, Verdict};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashSet;

/// How far around a request its effect may be stamped: the two clocks' granularity and the
/// harness's scheduling.
const SLACK: Duration = Duration::milliseconds(1000);
/// Without an offset: how long after the refusal's answer its effect's event may arrive.
const LATE: Duration = Duration::seconds(5);
/// Fewest refusals followed one for one that make the experiment's verdict.
const MIN_MATCHED: usize = 2;

/// One effect: the delivery, and the interval in the harness's clock it happened in.
struct Effect {
    seq: u64,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

fn overlaps(e: &Effect, from: DateTime<Utc>, to: DateTime<Utc>, slack: Duration) -> bool {
    e.from <= to + slack && e.to >= from - slack
}

pub(crate) fn judge(record: &Record) -> Verdict {
    let refused: Vec<_> = record
        .answers
        .iter()
        .filter(|a| a.endpoint == Endpoint::Create && (400..500).contains(&a.status) && ![408, 429].contains(&a.status))
        .collect();
    if refused.is_empty() {
        return (0, Vec::new());
    }
    let ours: HashSet<&str> = record.creations().map(|(c, _)| c).collect();
    // Each creation bounds the offset from both sides: the tightest bounds, when they agree (a
    // consistent clock); else the widest (a server whose instances' clocks differ).
    let tight = offsets(record).fold(None, |acc: Option<(Duration, Duration)>, (lo, hi)| {
        Some(acc.map_or((lo, hi), |(l, h)| (l.max(lo), h.min(hi))))
    });
    let wide = offsets(record).fold(None, |acc: Option<(Duration, Duration)>, (lo, hi)| {
        Some(acc.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))))
    });
    let bounds = tight.filter(|(lo, hi)| lo <= hi).or(wide);
    let mut seen = HashSet::new();
    let effects: Vec<Effect> = record
        .deliveries
        .iter()
        .filter(|h| h.delivery.event_type() == Some(crate::spec::ConnectionState::Created.event_type()))
        .filter_map(|h| {
            let connection = h.delivery.connection_id()?;
            if ours.contains(connection) || !seen.insert(connection.to_string()) {
                return None;
            }
            let (from, to) = match (bounds, h.delivery.occurred_at()) {
                (Some((lo, hi)), Some(at)) => (at - hi, (at - lo).min(h.arrived)),
                _ => (h.arrived - LATE, h.arrived),
            };
            Some(Effect { seq: h.delivery.seq, from, to })
        })
        .collect();
    let own_windows: Vec<_> = record.creations().map(|(_, s)| (s.sent, s.answered)).collect();
    let clear: Vec<Effect> = effects
        .into_iter()
        .filter(|e| !own_windows.iter().any(|(f, t)| overlaps(e, *f, *t, Duration::zero())))
        .collect();
    let mut used = HashSet::new();
    let mut matched = Vec::new();
    for r in &refused {
        if let Some(e) = clear.iter().find(|e| !used.contains(&e.seq) && overlaps(e, r.sent, r.answered, SLACK)) {
            used.insert(e.seq);
            matched.push((*r, e.seq));
        }
    }
    // The background: effects outside every refusal's window, as a rate over the run, against
    // how many would fall inside the refusals' windows by chance.
    let span = |f: DateTime<Utc>, t: DateTime<Utc>| (t - f + SLACK * 2).num_milliseconds().max(1) as f64;
    let start = record.answers.iter().map(|a| a.sent).min();
    let end = record.answers.iter().map(|a| a.answered).chain(record.deliveries.iter().map(|h| h.arrived)).max();
    let (Some(start), Some(end)) = (start, end) else { return (refused.len(), Vec::new()) };
    let windows: f64 = refused.iter().map(|r| span(r.sent, r.answered)).sum();
    let background = (clear.len() - matched.len()) as f64;
    let expected = background * windows / span(start, end).max(windows + 1.0);
    let followed = matched.len() >= MIN_MATCHED && matched.len() * 2 >= refused.len();
    if !followed || (matched.len() as f64) < 3.0 * expected + 2.0 {
        return (refused.len(), Vec::new());
    }
    let answers: Vec<u64> = matched.iter().map(|(r, _)| r.seq).take(6).collect();
    let deliveries: Vec<u64> = matched.iter().map(|(_, d)| *d).take(6).collect();
    let detail = format!(
        "{} of {} refused creations (POST /v1/connections answered 4xx) were each followed, inside its own time \
         window, by a connection.created of a connection the run never created ({} such events outside those \
         windows in the whole run): a refused request has an effect (§5, §3.2)",
        matched.len(),
        refused.len(),
        background
    );
    (refused.len(), vec![finding(detail, &answers, &deliveries)])
}
