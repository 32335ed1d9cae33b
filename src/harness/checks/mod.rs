//! The code of every case. Each `cases/<area>.toml` has exactly one module `checks::<area>`
//! (`checks/<area>.rs`, or `checks/<area>/mod.rs` where its code is split along a seam), which
//! declares its own table with [`cases!`](cases); this module only assembles the tables
//! and judges the run's answers with their response checks.
//!
//! A case has up to two kinds of check, both registered next to it:
//! - a **flow check**, `async fn(Arc<RunContext>) -> Result<(), Stop>`: what the case does
//!   (create, drive, walk, wait) and what it concludes from it;
//! - **response checks**, `fn(&Reply) -> Vec<String>`: a rule every 2xx answer of one endpoint
//!   keeps, whoever read it (either client, any case or fixture). They run once, after every
//!   flow, over the run's answer log ([`judge_responses`]): a violation cannot hide in a read
//!   that another case made.
//!
//! Both those and the state model's rules read the run's answers as [`Read`](super::transport::parsed::Read)s, parsed once
//! ([`reads_of`], one at a time); every finding carries the answers and deliveries it rests on
//! ([`Failure::evidence`](super::vocab::outcome::Failure)), from which the reports make the curl, the
//! offline replay and the HAR link.

mod accounts;
mod connections;
pub(crate) mod events;
mod http;
pub(crate) mod invariants;
pub(crate) mod last_look;
mod lifecycle;
mod reactions;
pub(crate) mod reused;
mod robustness;
mod security;
mod state;
pub(crate) mod transactions;
mod widget;

use super::fixtures::context::{CheckFn, RunContext};
use super::rules::delivery::Delivery;
use super::transport::answers::Answer;
pub(crate) use super::transport::parsed::{reads_of, Endpoint};
use super::vocab::errors::DeliveriesUnproven;
use super::vocab::outcome::{Failure, Problem};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Declares the cases a checks file codes, each with a constant for its id:
///
/// ```text
/// cases! {
///     PAGE_SCHEMA = "transactions.page-schema" => reads_pages, responds [AccountTransactions => page_schema];
///     WALK = "transactions.walk-exactly-once" => walk_exactly_once;
/// }
/// ```
macro_rules! cases {
    ($($name:ident = $id:literal => $flow:path $(, responds [$($endpoint:ident => $rule:path),* $(,)?])? $(, models [$($model:path),* $(,)?])? $(, record [$($invariant:path),* $(,)?])? ;)*) => {
        $(
            #[doc = concat!("The id of the case `", $id, "`.")]
            #[allow(dead_code)]
            pub(crate) const $name: &str = $id;
        )*
        /// The cases of this file: id, flow check, response checks.
        pub(super) const CASES: &[$crate::harness::checks::Registration] = &[$(
            $crate::harness::checks::Registration {
                id: $id,
                flow: |ctx| Box::pin($flow(ctx)),
                responses: &[$($($crate::harness::checks::ResponseCheck {
                    endpoint: $crate::harness::checks::Endpoint::$endpoint,
                    rule: $rule,
                },)*)?],
                models: &[$($($model,)*)?],
                invariants: &[$($($invariant,)*)?],
            },
        )*];
    };
}
pub(crate) use cases;

/// One case's code.
pub(crate) struct Registration {
    pub id: &'static str,
    pub flow: CheckFn,
    pub responses: &'static [ResponseCheck],
    pub models: &'static [ModelRule],
    /// Invariants over the run's whole record (`checks::invariants`).
    pub invariants: &'static [InvariantRule],
}

impl Registration {
    /// Whether the case is judged after every flow, over the run's answers.
    pub(crate) fn judges_answers(&self) -> bool {
        !self.responses.is_empty() || !self.models.is_empty() || !self.invariants.is_empty()
    }
}

/// An invariant over everything the run observed: how many observations it judged, and the
/// findings (`rules::invariants`).
pub(crate) type InvariantRule = fn(&super::rules::invariants::Record) -> super::rules::invariants::Verdict;

/// A rule over the model of the run's reads and deliveries (`checks::state`): how many reads or
/// pairs of reads it judged, and what it found.
pub(crate) type ModelRule = fn(&state::Model) -> (usize, Vec<Finding>);

/// A problem a model rule found, with the answer that shows it.
pub(crate) struct Finding {
    /// What it found, typed (its kind, the ids it is about, what it compared).
    pub problem: Problem,
    pub answer: Arc<Answer>,
    /// Whether a delivery that has not arrived yet could explain it (a late event, §6.3).
    pub awaits_event: bool,
}

/// A rule over every 2xx answer of `endpoint`: the problems it finds in one answer, each what
/// is wrong without the request (the runner names the request apart).
pub(crate) struct ResponseCheck {
    pub endpoint: Endpoint,
    pub rule: fn(&Reply) -> Vec<Problem>,
}

/// One 2xx answer, as a response check sees it.
pub(crate) struct Reply<'a> {
    /// The id in the path: the connection (§4.2) or account (§4.3, §4.4) asked for.
    pub id: &'a str,
    /// The `limit` asked for, when it is a positive page size.
    pub limit: Option<u64>,
    pub body: &'a Value,
}

/// Every checks file, named by its area (the catalogue file `cases/<area>.toml`).
pub(crate) const AREAS: [(&str, &[Registration]); 12] = [
    ("connections", connections::CASES),
    ("accounts", accounts::CASES),
    ("transactions", transactions::CASES),
    ("events", events::CASES),
    ("lifecycle", lifecycle::CASES),
    ("reactions", reactions::CASES),
    ("security", security::CASES),
    ("widget", widget::CASES),
    ("robustness", robustness::CASES),
    ("state", state::CASES),
    ("invariants", invariants::CASES),
    ("http", http::CASES),
];

/// Whether `case` may receive a finding another case's exploration made about its rule
/// (`RunContext::report_to`): the runner concludes it once every flow ended.
pub(crate) fn receives_findings(case: &str) -> bool {
    lifecycle::receives_findings(case)
}

/// The code of the case `id`.
pub(crate) fn code_of(id: &str) -> Option<&'static Registration> {
    AREAS.iter().flat_map(|(_, cases)| cases.iter()).find(|r| r.id == id)
}

/// What the response rules of case `id` find in one answer to `method` at the path `segments`
/// (its `limit` asked for, its JSON `body`): how a pasted reproduction is judged again. `None`
/// when the case has no rule for that endpoint.
pub fn judge_one(id: &str, method: &str, segments: &[String], limit: Option<u64>, body: &Value) -> Option<Vec<String>> {
    let (endpoint, path_id) = Endpoint::of(method, segments)?;
    let reply = Reply { id: path_id, limit, body };
    let rules: Vec<_> = code_of(id)?.responses.iter().filter(|c| c.endpoint == endpoint).collect();
    (!rules.is_empty()).then(|| rules.iter().flat_map(|c| (c.rule)(&reply)).map(|p| p.detail).collect())
}

/// What the response checks of one case found over the run's answers.
#[derive(Default)]
pub(crate) struct Judged {
    /// How many answers its rules judged.
    pub answers: usize,
    /// Each problem, resting on the answer that showed it.
    pub problems: Vec<Failure>,
    /// Why some of its rules were not judged (their evidence is missing), if so.
    pub unjudged: Option<String>,
    /// The finding of another case that blocks it, if one does: none of its findings can be
    /// told apart from that finding's symptom (the run's events name other connections:
    /// `rules::misnamed`).
    pub blocked: Option<Blocked>,
    /// What a bound of the harness's left out of what its rules judge, if anything: the
    /// answers whose bodies the answer log did not keep, or too dense to parse.
    pub cut: Option<String>,
}

/// Another case's failure that blocks a case, as a value: the case that failed, what its
/// failure broke, and how the blocked case rests on it (`it rests on …`). The runner makes it
/// the blocked case's outcome and consequence (issue 74: "blocked by" is never read back from
/// a sentence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Blocked {
    pub on: &'static str,
    pub foundation: crate::harness::vocab::outcome::Foundation,
    pub why: String,
}

/// The cases that rest on which connection an event names (§6.2 `connectionId`): each
/// awaits, groups or finds events by the connection they name (the tour's steps, the chains,
/// the walks, a client's connection's deliveries, the model rule that reads an event's
/// connection). Where the run's events name other connections ([`misnamed`]), what they find
/// is that finding's symptom, found or not by what was driven on, or read of, the connection an
/// event happened to name: not judged, in every run alike (issue 51).
pub(crate) const ON_EVENT_CONNECTION: [&str; 14] = [
    events::PREVIOUS_STATUS_CHAIN,
    events::TIME_FOLLOWS_CHAIN,
    events::CONNECTED_ANNOUNCED,
    events::FAILED_AUTH_ANNOUNCED,
    events::MFA_REQUIRED_ANNOUNCED,
    events::ERROR_ANNOUNCED,
    events::DISCONNECTED_ANNOUNCED,
    reactions::ACCOUNTS_UPDATED,
    reactions::TRANSACTION_DELETED,
    reactions::ACCOUNT_BALANCE,
    lifecycle::TRANSITION_GRAPH,
    lifecycle::RANDOM_SEQUENCES,
    security::DELIVERIES,
    state::LIST_COMPLETE,
];

/// What the run's events naming other connections (`checks::misnamed`) makes of case `id`: its
/// owner fails on it; a case that rests on which connection an event names is blocked by it.
pub(crate) fn derive_from_misnamed(
    id: &str,
    m: &crate::harness::rules::misnamed::Misnamed,
    found: &mut Option<Judged>,
) {
    if id == MISNAMED_OWNER {
        let problem =
            Problem::found(crate::harness::vocab::kind::EventKind::Misnamed, [m.connection.clone()], m.to_string());
        let failure = m.deliveries.iter().fold(Failure::from(problem), |f, seq| f.on_delivery(*seq));
        found.get_or_insert_with(Default::default).problems.insert(0, failure);
    } else if ON_EVENT_CONNECTION.contains(&id) {
        found.get_or_insert_with(Default::default).blocked = Some(Blocked {
            on: MISNAMED_OWNER,
            foundation: crate::harness::vocab::outcome::Foundation::EventConnection,
            why: format!("it rests on which connection an event names, and {m} (judged by {MISNAMED_OWNER})"),
        });
    }
}

/// The case that fails on [`misnamed`]'s finding (§3.2: a connection is created once).
pub(crate) const MISNAMED_OWNER: &str = events::CREATED_ANNOUNCED;

/// Whether the run's events name other connections than the one concerned
/// (`rules::misnamed`), over every delivery and every connection the run created: judged once
/// the flows ended, so the same in every run (the run's first connection is made before any
/// case, and the next creation lands on it).
pub(crate) fn misnamed(ctx: &RunContext) -> Option<crate::harness::rules::misnamed::Misnamed> {
    let all: Vec<Delivery> = ctx.receiver.as_ref()?.timeline().into_iter().map(|(_, d)| d).collect();
    crate::harness::rules::misnamed::announced_twice(&ctx.api.answers().created_connections(), &all).into_iter().next()
}

/// Most problems kept per case (the first ones; the count says how many more there were).
const MAX_PROBLEMS: usize = 20;

/// Reads the run's `answers` once ([`reads_of`]): the response checks of `cases` judge each
/// read as it is taken, and the state model keeps what its rules compare (for
/// [`judge_models`]); no more than one body is held parsed at a time.
pub(crate) fn judge_responses(
    cases: &[&str],
    answers: &[Arc<Answer>],
    cut: &(Vec<(String, Vec<String>)>, bool),
) -> (BTreeMap<&'static str, Judged>, Arc<state::Observed>) {
    let registrations: Vec<&Registration> =
        cases.iter().filter_map(|id| code_of(id)).filter(|r| !r.responses.is_empty()).collect();
    let mut judged: BTreeMap<&'static str, Judged> = registrations.iter().map(|r| (r.id, Judged::default())).collect();
    let mut observed = state::Observed::default();
    for read in reads_of(answers) {
        observed.add(&read);
        let answer = &read.answer;
        let reply = Reply { id: &read.id, limit: answer.limit(), body: &read.body };
        for registration in &registrations {
            for check in registration.responses.iter().filter(|c| c.endpoint == read.endpoint) {
                let found = judged.entry(registration.id).or_default();
                found.answers += 1;
                for mut problem in (check.rule)(&reply) {
                    if found.problems.len() < MAX_PROBLEMS {
                        problem.detail += answer.whose();
                        let failure = Failure::from(problem).shown_by(Some(answer.seq));
                        found.problems.push(failure.requested(&answer.sent.request));
                    }
                }
            }
        }
    }
    mark_cut(&registrations, answers, cut, &mut judged);
    observed.keep_own_cursors();
    (judged, Arc::new(observed))
}

/// Marks each case whose response rules judge an endpoint of which a 2xx answer went unread:
/// its body left out by the answer log's budget (`cut`: their paths, and whether more were),
/// or too dense to parse. A pass over the rest is not a pass (ignored, cause `bound`).
fn mark_cut(
    registrations: &[&Registration],
    answers: &[Arc<Answer>],
    cut: &(Vec<(String, Vec<String>)>, bool),
    judged: &mut BTreeMap<&'static str, Judged>,
) {
    let dense = answers.iter().filter(|a| {
        a.body.as_deref().is_some_and(|b| crate::harness::vocab::budget::too_dense(b.as_bytes()).is_some())
    });
    let mut endpoints: Vec<(Endpoint, String, &'static str)> = cut
        .0
        .iter()
        .filter_map(|(method, segments)| {
            let (endpoint, _) = Endpoint::of(method, segments)?;
            Some((endpoint, format!("{method} /{}", segments.join("/")), "the answer log's budget left its body out"))
        })
        .chain(dense.filter_map(|a| {
            let (endpoint, _) = Endpoint::of(&a.sent.method, &a.segments)?;
            Some((endpoint, a.sent.request.clone(), "its body holds too many values to parse"))
        }))
        .collect();
    endpoints.dedup_by(|a, b| a.0 == b.0);
    for registration in registrations {
        let hit = endpoints.iter().find(|(e, _, _)| registration.responses.iter().any(|c| c.endpoint == *e));
        let reason = match (hit, cut.1) {
            (Some((_, request, why)), _) => {
                format!("not judged in full: a 2xx answer to {request} went unread ({why})")
            }
            (None, true) => {
                "not judged in full: more 2xx answers than the answer log names had their bodies left out by its budget"
                    .to_string()
            }
            (None, false) => continue,
        };
        judged.entry(registration.id).or_default().cut = Some(reason);
    }
}

/// Runs the model rules of `cases` over the run's answers and deliveries. A finding that a
/// late delivery could explain is judged again on each arrival until the run's event wait has
/// passed since the read that shows it: only an event that never comes fails. And only with
/// evidence that deliveries still came through after that read (`delivery_evidence`): an
/// absence proves nothing on a receiver that hears nothing.
pub(crate) async fn judge_models(
    ctx: &RunContext,
    cases: &[&str],
    reads: &Arc<state::Observed>,
) -> BTreeMap<&'static str, Judged> {
    let registrations: Vec<&Registration> =
        cases.iter().filter_map(|id| code_of(id)).filter(|r| !r.models.is_empty()).collect();
    if registrations.is_empty() {
        return BTreeMap::new();
    }
    let deliveries = || ctx.receiver.as_ref().map(|r| r.timeline()).unwrap_or_default();
    // Reads a case found stale are that case's finding, never the state rules' (`state::set_aside`).
    let kept;
    let reads = match state::set_aside(reads, &ctx.stale_reads(), &deliveries()) {
        Some((rest, lines)) => {
            for line in lines {
                ctx.note("set aside", line);
            }
            kept = Arc::new(rest);
            &kept
        }
        None => reads,
    };
    let judge = |model: &state::Model| {
        registrations
            .iter()
            .map(|r| {
                let (answers, findings) =
                    r.models.iter().map(|rule| rule(model)).fold((0, Vec::new()), |(n, mut all), (m, found)| {
                        all.extend(found);
                        (n + m, all)
                    });
                (r.id, answers, findings)
            })
            .collect::<Vec<_>>()
    };
    let awaited = |judged: &[(&str, usize, Vec<Finding>)]| {
        judged.iter().flat_map(|(_, _, f)| f).filter(|f| f.awaits_event).map(|f| f.answer.answered_at).max()
    };
    let mut judged = judge(&state::Model::of(reads, &deliveries()));
    if let (Some(latest), Some(receiver)) = (awaited(&judged), ctx.receiver.as_ref()) {
        let wait = ctx.plan.event_wait();
        let until = (latest + wait).min(std::time::Instant::now() + wait);
        // Judged again on each delivery, until none is awaited or the wait is over.
        while awaited(&judged).is_some() && receiver.next_arrival(until).await {
            judged = judge(&state::Model::of(reads, &deliveries()));
        }
    }
    let unheard = match awaited(&judged) {
        Some(latest) => delivery_evidence(ctx, latest).await.err().map(|e| e.to_string()),
        None => None,
    };

    judged
        .into_iter()
        .map(|(id, answers, findings)| {
            let mut found = Judged { answers, ..Judged::default() };
            for f in findings {
                if f.awaits_event && unheard.is_some() {
                    found.unjudged = unheard.clone();
                } else if found.problems.len() < MAX_PROBLEMS {
                    found.problems.push(Failure::from(f.problem).on_answer(Some(f.answer.seq)));
                }
            }
            (id, found)
        })
        .collect()
}

/// Whether deliveries reach the receiver after `read` (when the latest read that a missing
/// event is held against was answered): `Ok` when one arrived since, else when a fresh
/// connection's `connection.created` (§3.2) arrives within the event wait; `Err` says why the
/// rules that rest on a missing event are not judged (deliveries stopped, or never came).
async fn delivery_evidence(ctx: &RunContext, read: std::time::Instant) -> Result<(), DeliveriesUnproven> {
    if let Err(diagnosis) = ctx.heard().await {
        return Err(diagnosis.clone().into());
    }
    let receiver = ctx.receiver().map_err(|e| DeliveriesUnproven::NoReceiver(e.to_string()))?;
    if receiver.timeline().iter().any(|(arrived, _)| *arrived > read) {
        return Ok(());
    }
    let stopped = DeliveriesUnproven::Stopped { created_event: crate::spec::ConnectionState::Created.event_type() };
    let canary = ctx.create_connection().await.map_err(|_| stopped.clone())?;
    let id = &canary.connection_id;
    let what = format!("a delivery for {id}, proof that deliveries still arrive");
    let (arrived, _) = receiver.wait_until(&what, id, ctx.plan.event_wait(), |ds| !ds.is_empty()).await;
    if arrived {
        Ok(())
    } else {
        Err(stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound that cut what a case judges says so (issue 51): a 2xx body the answer log's
    /// budget left out makes the cases whose rules judge its endpoint ignored (cause `bound`).
    #[test]
    fn a_body_the_answer_log_left_out_is_said_by_the_cases_it_concerns() {
        let path = ["v1", "connections", "conn_1", "accounts"].map(String::from).to_vec();
        let cut = (vec![("GET".to_string(), path)], false);
        let (judged, _) = judge_responses(&["accounts.response-schema", "transactions.page-schema"], &[], &cut);
        let reason = judged["accounts.response-schema"].cut.as_deref().unwrap_or_default();
        assert!(reason.contains("GET /v1/connections/conn_1/accounts") && reason.contains("answer log"), "{reason}");
        assert!(judged["transactions.page-schema"].cut.is_none());
        let (judged, _) = judge_responses(&["transactions.page-schema"], &[], &(Vec::new(), true));
        assert!(judged["transactions.page-schema"].cut.is_some(), "more cut than named: every endpoint");
    }
    use crate::harness::vocab::catalogue;

    /// A case is one place: its entry in `cases/<area>.toml` and its code in `checks/<area>.rs`.
    #[test]
    fn every_case_has_code_in_the_file_of_its_area_and_every_check_a_case() {
        for case in catalogue::all().iter().filter(|c| !c.offline) {
            let area = AREAS.iter().find(|(a, _)| *a == case.area);
            let coded = area.is_some_and(|(_, cases)| cases.iter().any(|r| r.id == case.id));
            assert!(coded, "case {} of cases/{}.toml has no code in checks/{}.rs", case.id, case.area, case.area);
        }
        for (area, cases) in AREAS {
            for r in cases {
                let case = catalogue::find(r.id).unwrap_or_else(|| panic!("check {} has no entry in cases/", r.id));
                assert_eq!(
                    case.area, area,
                    "check {} is coded in checks/{area}.rs but listed in cases/{}.toml",
                    r.id, case.area
                );
            }
        }
    }
}
