//! Cause: a refused request has no effect (§5: only an API key opens the API; §7's refusals).
//! Judged as an experiment over the whole run: the effects are `connection.created` events
//! (§3.2) of connections no 2xx creation of the run answered with, at either address. Activity
//! the run did not start is legal by itself (another backend of the client may create
//! connections), so a steady background of such events proves nothing; effects that follow the
//! refused creations one for one, each inside its refusal's time window, do.
//!
//! A refusal's window is its request's [sent, answered], widened by [`SLACK`]; an effect's time
//! is its `occurredAt` in the harness's clock (the offset of [`super::clock::offsets`]: between
//! the tightest bounds the run's creations give), or, without an offset, its arrival within
//! [`LATE`] of the answer. An effect whose time overlaps the [sent, answered] of one of the
//! run's own creations is ambiguous (a server that makes a second connection along with each one
//! asked for) and counts for neither side.
//!
//! The verdict is a function of the record, not of which request happened to run next to which
//! (issue 51). Only a *clear* refusal is weighed: one that no own creation ran within the
//! offset's uncertainty of, so that its effect, if any, cannot be ambiguous. An unmatched clear
//! refusal counts against the finding only once *settled*: a creation of the run sent after it
//! was answered has had its `connection.created` arrive, so its own effect had the time to arrive
//! too. The run's experiment (`checks::invariants`) makes clear refusals in every run, settled by
//! a creation it awaits.

use super::clock::offsets;
use super::{finding, Credential, Endpoint, Record, Seen, Verdict};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, HashSet};

/// How far around a request its effect may be stamped: the two clocks' granularity and the
/// harness's scheduling.
pub(super) const SLACK: Duration = Duration::milliseconds(1000);
/// Without an offset: how long after the refusal's answer its effect's event may arrive.
pub(super) const LATE: Duration = Duration::seconds(5);
/// Fewest refusals followed one for one that make the experiment's verdict.
const MIN_MATCHED: usize = 2;

/// One effect: the delivery, and the interval in the harness's clock it happened in.
pub(super) struct Effect {
    pub seq: u64,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The account and connection it names (a read's effect is one on what was read).
    pub subject: (Option<String>, Option<String>),
    /// Its event type.
    pub kind: String,
}

pub(super) fn overlaps(e: &Effect, from: DateTime<Utc>, to: DateTime<Utc>, slack: Duration) -> bool {
    e.from <= to + slack && e.to >= from - slack
}

/// How long the windows of `refusals` ([sent, answered] ± `slack`) cover in all, overlaps once.
fn covered(refusals: &[&Seen], slack: Duration) -> Duration {
    let mut windows: Vec<_> = refusals.iter().map(|r| (r.sent - slack, r.answered + slack)).collect();
    windows.sort();
    let mut total = Duration::zero();
    let mut open: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for (from, to) in windows {
        open = match open {
            Some((f, t)) if from <= t => Some((f, t.max(to))),
            Some((f, t)) => {
                total += t - f;
                Some((from, to))
            }
            None => Some((from, to)),
        };
    }
    total + open.map_or(Duration::zero(), |(f, t)| t - f)
}

/// The server's clock offset from the harness's, as bounds: the tightest the run's creations
/// give, when they agree (a consistent clock); else the widest (instances whose clocks differ).
pub(super) fn offset_bounds(record: &Record) -> Option<(Duration, Duration)> {
    let wide = offsets(record).fold(None, |acc: Option<(Duration, Duration)>, (lo, hi)| {
        Some(acc.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))))
    });
    tight(record).or(wide)
}

/// The tightest bounds every creation allows at once, if they agree.
fn tight(record: &Record) -> Option<(Duration, Duration)> {
    let tight = offsets(record).fold(None, |acc: Option<(Duration, Duration)>, (lo, hi)| {
        Some(acc.map_or((lo, hi), |(l, h)| (l.max(lo), h.min(hi))))
    });
    tight.filter(|(lo, hi)| lo <= hi)
}

/// How far an effect's interval may reach past the moment it happened: the offset's width
/// ([`LATE`] without one). A refusal this close to one of the run's creations is not clear.
pub(super) fn reach_of(bounds: Option<(Duration, Duration)>) -> Duration {
    bounds.map_or(LATE, |(lo, hi)| hi - lo)
}

/// The [`reach_of`] the record shows so far, when the run's creations bound the offset tightly:
/// more creations only narrow it, so a refusal kept this far from them stays clear at the
/// judgment. `None` while no bound, or only the loose one (which more creations may widen).
pub(crate) fn reach_so_far(record: &Record) -> Option<Duration> {
    tight(record).map(|b| reach_of(Some(b)))
}

/// The effects: the first `connection.created` of each connection the run never created, with
/// when it happened, leaving out those that overlap one of the run's own creations.
fn effects(record: &Record, bounds: Option<(Duration, Duration)>) -> Vec<Effect> {
    let ours: HashSet<&str> = record.creations().map(|(c, _)| c).collect();
    let own_windows: Vec<_> = record.creations().map(|(_, s)| (s.sent, s.answered)).collect();
    let mut seen = HashSet::new();
    record
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
            Some(Effect { seq: h.delivery.seq, from, to, subject: (None, None), kind: String::new() })
        })
        .filter(|e| !own_windows.iter().any(|(f, t)| overlaps(e, *f, *t, Duration::zero())))
        .collect()
}

/// Whether one of the run's creations was sent after `at` and its `connection.created` arrived.
pub(super) fn settled_after(record: &Record, at: DateTime<Utc>) -> bool {
    let created = crate::spec::ConnectionState::Created.event_type();
    record.creations().filter(|(_, s)| s.sent > at).any(|(c, _)| {
        record
            .deliveries
            .iter()
            .any(|h| h.delivery.connection_id() == Some(c) && h.delivery.event_type() == Some(created))
    })
}

/// What a refused creation carried, for grouping (never printed: a header may hold a secret,
/// so the label names its kind only). A server may leak through one credential only (a widget
/// token taken for the key's client, `tests/foreign/python-identity`'s `sess-token-create-leak`), so each
/// kind is its own experiment.
fn class(record: &Record, credential: &Credential) -> (u8, &'static str, String) {
    match credential {
        Credential::Missing => (0, "no key", String::new()),
        Credential::NearKey => (1, "a near-miss key", String::new()),
        Credential::Key(_) => (2, "a key of the run", String::new()),
        Credential::Header(h) => {
            let mut tokens = record.answers.iter().filter_map(|a| a.created.as_ref()?.1.as_deref());
            match tokens.any(|t| !t.is_empty() && h.contains(t)) {
                true => (3, "a widget token", h.clone()),
                false => (4, "a header that holds no key of the run", h.clone()),
            }
        }
    }
}

/// One class's refusals (a kind of credential on one endpoint): weighed (matched or settled),
/// and those followed by an effect. Each class is matched on its own: an experiment's refusals
/// come in one burst, closer together than the clocks tell apart, so a class followed one for
/// one is named with those beside it. A server may act on one endpoint's refusals only (a
/// refresh on `GET /v1/accounts/{id}` that runs before the ownership check,
/// `tests/foreign/python-stamps`'s `foreign-read-refresh`): the other endpoints' refusals, unmatched, must
/// not outweigh it.
#[derive(Default)]
struct Tally<'a> {
    label: &'static str,
    clear: Vec<&'a Seen>,
    weighed: usize,
    matched: Vec<(&'a Seen, u64)>,
    used: HashSet<u64>,
}

/// One experiment over the record (refused creations, refused reads): its refusals, the
/// effects that could be theirs, and how each is told apart.
pub(super) struct Experiment<'a> {
    /// Every refusal of the kind, clear or not: their windows are left out of the background.
    pub refused: Vec<&'a Seen>,
    /// Whether a refusal is clear of the run's own activity, so that an effect in its window can
    /// only be its own (or the background's).
    pub clear: &'a dyn Fn(&Seen) -> bool,
    pub effects: Vec<Effect>,
    /// Whether `effect` could be `refusal`'s (the same object, for a read).
    pub may_cause: &'a dyn Fn(&Seen, &Effect) -> bool,
    /// Whether an unmatched clear refusal had the time to show its effect.
    pub settled: &'a dyn Fn(&Seen) -> bool,
    /// How far around a refusal's [sent, answered] its effect may be stamped.
    pub slack: Duration,
}

/// What an experiment found: the first class followed one for one, with the labels of every
/// class followed, the matched refusals and effects, how many were weighed, and the background.
pub(super) struct Followed {
    pub labels: Vec<&'static str>,
    pub answers: Vec<u64>,
    pub deliveries: Vec<u64>,
    pub matched: usize,
    pub weighed: usize,
    pub background: usize,
}

/// What weighing one experiment came to: how many refusals were clear and how many weighed,
/// over every class, and the class followed one for one, if one was.
pub(super) struct Weighing {
    pub clear: usize,
    pub weighed: usize,
    pub followed: Option<Followed>,
}

impl Weighing {
    /// Why the experiment weighed nothing, if it did not (said in every report: the case passes
    /// on its other experiment, or on none): `what` names its refusals.
    pub(super) fn unweighed(&self, what: &str, reach: Duration) -> Option<String> {
        let reach = reach.num_milliseconds() as f64 / 1000.0;
        match (self.clear, self.weighed) {
            (_, w) if w > 0 => None,
            (0, _) => Some(format!(
                "{what} weighed none: none was clear of the run's own activity by the server's clock offset's \
                 uncertainty ({reach:.1} s, which late webhooks widen), so no effect could be told apart"
            )),
            _ => Some(format!(
                "{what} weighed none: no delivery after them showed that their effects had the time to arrive"
            )),
        }
    }
}

/// Weighs one experiment: a class of clear refusals followed one for one (at least
/// [`MIN_MATCHED`], half of those weighed, and well above what the background rate puts in
/// their windows by chance).
pub(super) fn weigh(record: &Record, x: &Experiment<'_>) -> Weighing {
    let tallies = tallies(record, x);
    let (clear, weighed) = tallies.iter().fold((0, 0), |(c, w), t| (c + t.clear.len(), w + t.weighed));
    Weighing { clear, weighed, followed: followed(record, x, &tallies) }
}

/// One tally per class of the experiment's clear refusals, in the classes' order.
fn tallies<'a>(record: &Record, x: &Experiment<'a>) -> Vec<Tally<'a>> {
    let mut tallies: BTreeMap<((u8, &'static str, String), Endpoint), Tally> = BTreeMap::new();
    for r in x.refused.iter().copied().filter(|r| (x.clear)(r)) {
        let key = (class(record, &r.credential), r.endpoint);
        let tally = tallies.entry(key.clone()).or_insert_with(|| Tally { label: key.0 .1, ..Tally::default() });
        tally.clear.push(r);
        let found = x
            .effects
            .iter()
            .find(|e| !tally.used.contains(&e.seq) && overlaps(e, r.sent, r.answered, x.slack) && (x.may_cause)(r, e));
        match found {
            Some(e) => {
                tally.used.insert(e.seq);
                tally.matched.push((r, e.seq));
                tally.weighed += 1;
            }
            None if (x.settled)(r) => tally.weighed += 1,
            None => {}
        }
    }
    tallies.into_values().collect()
}

/// The first class of `tallies` followed one for one, with the labels of every such class.
fn followed(record: &Record, x: &Experiment<'_>, tallies: &[Tally<'_>]) -> Option<Followed> {
    // The background: the effects no refusal can take, as a rate over the time outside the
    // refusals' windows, against how many would fall inside a class's clear refusals' windows
    // by chance.
    let start = record.answers.iter().map(|a| a.sent).min()?;
    let end = record.answers.iter().map(|a| a.answered).chain(record.deliveries.iter().map(|h| h.arrived)).max()?;
    let background = x.effects.len() - paired(x);
    let outside = ((end - start) - covered(&x.refused, x.slack)).num_milliseconds().max(1) as f64;
    let followed = |t: &Tally| {
        let expected = background as f64 * covered(&t.clear, x.slack).num_milliseconds() as f64 / outside;
        t.matched.len() >= MIN_MATCHED
            && t.matched.len() * 2 >= t.weighed
            && (t.matched.len() as f64) >= 3.0 * expected + 2.0
    };
    let followed: Vec<&Tally> = tallies.iter().filter(|t| followed(t)).collect();
    let t = followed.first()?;
    let mut labels: Vec<&'static str> = followed.iter().map(|t| t.label).collect();
    labels.dedup();
    Some(Followed {
        labels,
        answers: t.matched.iter().map(|(r, _)| r.seq).take(6).collect(),
        deliveries: t.matched.iter().map(|(_, d)| *d).take(6).collect(),
        matched: t.matched.len(),
        weighed: t.weighed,
        background,
    })
}

/// How many effects the refusals (clear or not) can take one for one: each refusal at most one
/// effect that may be its own and overlaps its window. The others are the background: those
/// outside every window, and those a window holds beyond its one. A process of the server's
/// own that acts several times in one slow refusal's window (§6's deduplication, a sync every
/// 400 ms on a busy machine) is background, where counting only the effects outside every
/// window left none, and a burst that covered three refusals read as their effects.
fn paired(x: &Experiment<'_>) -> usize {
    let mut refusals = x.refused.clone();
    refusals.sort_by_key(|r| r.answered);
    let mut used = HashSet::new();
    for r in refusals {
        // Sorted by the windows' ends, each takes the free effect that ends first: the most pairs.
        let first = x
            .effects
            .iter()
            .filter(|e| !used.contains(&e.seq) && overlaps(e, r.sent, r.answered, x.slack) && (x.may_cause)(r, e))
            .min_by_key(|e| e.to);
        if let Some(e) = first {
            used.insert(e.seq);
        }
    }
    used.len()
}

/// Whether `r` was refused (a 4xx that is not a timeout or a rate limit: those say nothing).
pub(super) fn refused(r: &Seen) -> bool {
    (400..500).contains(&r.status) && ![408, 429].contains(&r.status)
}

/// The refused creations' experiment (refused reads: [`super::cause_read`]).
pub(crate) fn judge(record: &Record) -> Verdict {
    let refused: Vec<&Seen> = record.answers.iter().filter(|a| a.endpoint == Endpoint::Create && refused(a)).collect();
    if refused.is_empty() {
        return Verdict::default();
    }
    let bounds = offset_bounds(record);
    let reach = reach_of(bounds);
    let own: Vec<_> = record.creations().map(|(_, s)| (s.sent, s.answered)).collect();
    let clear = |r: &Seen| !own.iter().any(|(f, t)| *f <= r.answered + reach && *t >= r.sent - reach);
    let settled = |r: &Seen| settled_after(record, r.answered);
    let x = Experiment {
        refused: refused.clone(),
        clear: &clear,
        effects: effects(record, bounds),
        may_cause: &|_, _| true,
        settled: &settled,
        slack: SLACK,
    };
    let weighing = weigh(record, &x);
    let unweighed = weighing.unweighed("the refused creations (§5)", reach).into_iter().collect();
    let Some(f) = weighing.followed else { return Verdict { judged: refused.len(), found: Vec::new(), unweighed } };
    let detail = format!(
        "refused creations (POST /v1/connections answered 4xx) with {} were each followed, inside its own time window, \
         by a connection.created of a connection the run never created, in {} of the {} whose effect could be told \
         apart from the run's own creations ({} such events in the whole run that no refusal could take, one each): a refused request \
         has an effect (§5, §3.2)",
        f.labels.join(" or "),
        f.matched,
        f.weighed,
        f.background
    );
    Verdict {
        judged: refused.len(),
        found: vec![finding(Problem::found(K::RefusedCreationActs, [], detail), &f.answers, &f.deliveries)],
        unweighed,
    }
}
