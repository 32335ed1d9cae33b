//! Root causes: what the run fails by, said once and first (the closing block, the Markdown,
//! JSON and HTML reports), each with the cases that follow from it. Two kinds, both observed,
//! never guessed from a message's words:
//! - every failed case that is no other's consequence is a root, listed with its consequences
//!   (typed, [`CaseResult::consequence_of`], set by `runner::consequences` and the dispatch);
//! - a fact of the whole run's answers or deliveries (bodies that are not JSON, creations
//!   announced under one connection), with the failed cases whose evidence shows it.

use crate::harness::rules::delivery::{unique, Delivery};
use crate::harness::rules::verdict::RootCause;
use crate::harness::transport::answers::{Answer, Auth};
use crate::harness::vocab::outcome::{CaseResult, Foundation, Outcome};
use crate::spec::ConnectionState;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// Fewest failed cases a fact of the answers must explain to be said apart from them.
const MIN_EXPLAINED: usize = 2;

/// The root causes of the run's failures, from its answers and deliveries.
pub(crate) fn find(answers: &[Arc<Answer>], deliveries: &[Delivery], results: &[CaseResult]) -> Vec<RootCause> {
    let failed: Vec<&CaseResult> = results.iter().filter(|r| r.outcome.is_failed()).collect();
    let on_answers = |shown: &HashSet<u64>| -> Vec<String> {
        failed
            .iter()
            .filter(|r| match &r.outcome {
                Outcome::Failed(f) => f.evidence.answers.iter().any(|seq| shown.contains(seq)),
                _ => false,
            })
            .map(|r| r.case.id.clone())
            .collect()
    };
    let mut causes = Vec::new();
    let bodies: Vec<(u64, &str)> = answers
        .iter()
        .filter(|a| (200..300).contains(&a.status))
        .filter_map(|a| Some((a.seq, a.body.as_deref()?)))
        .collect();
    let bom: HashSet<u64> = bodies.iter().filter(|(_, b)| b.starts_with('\u{feff}')).map(|(seq, _)| *seq).collect();
    let not_json: HashSet<u64> = bodies
        .iter()
        .filter(|(_, b)| !b.starts_with('\u{feff}') && serde_json::from_str::<serde::de::IgnoredAny>(b).is_err())
        .map(|(seq, _)| *seq)
        .collect();
    if !bom.is_empty() {
        causes.push(RootCause {
            case: None,
            cause: format!(
                "{} of {} 2xx answers begin with a byte-order mark (U+FEFF) before their JSON: a JSON text sent \
                 over a network carries none (RFC 8259 §8.1), so no JSON parser reads these bodies (§4: bodies are \
                 JSON)",
                bom.len(),
                bodies.len()
            ),
            cases: on_answers(&bom),
        });
    }
    // An address that is not this service's: said first (its answers are also `not_json`'s,
    // said then as what they more likely are). A key it does not take stops the preflight.
    let elsewhere: Vec<RootCause> = not_this_service(answers)
        .map(|(cause, shown)| RootCause { case: None, cause, cases: on_answers(&shown) })
        .into_iter()
        .collect();
    if !not_json.is_empty() && elsewhere.is_empty() {
        causes.push(RootCause {
            case: None,
            cause: format!("{} of {} 2xx answers have a body that is not JSON (§4)", not_json.len(), bodies.len()),
            cases: on_answers(&not_json),
        });
    }
    // Said by its typed root where the events name another connection (`rules::misnamed`).
    let misnamed = results.iter().any(|r| {
        r.consequence_of.as_ref().is_some_and(|c| c.foundation == Foundation::EventConnection)
            || (r.case.id == crate::harness::checks::MISNAMED_OWNER && r.outcome.is_failed())
    });
    if let Some(cause) = creations_named_alike(answers, deliveries, &failed).filter(|_| !misnamed) {
        causes.push(cause);
    }
    causes.splice(0..0, elsewhere);
    causes.retain(|c| c.cases.len() >= MIN_EXPLAINED);
    causes.extend(roots(results));
    causes
}

/// Every failed case that is no other's consequence is a root: listed with its consequences
/// (typed: [`CaseResult::consequence_of`]), those with consequences first, in catalogue order
/// otherwise.
fn roots(results: &[CaseResult]) -> Vec<RootCause> {
    let mut roots: Vec<RootCause> = results
        .iter()
        .filter(|r| r.consequence_of.is_none())
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(f) => {
                let under: Vec<&CaseResult> =
                    results.iter().filter(|c| c.consequence_of.as_ref().is_some_and(|c| c.root == r.case.id)).collect();
                let rests = match under.first().and_then(|c| c.consequence_of.as_ref()) {
                    Some(c) => format!("; its consequences rest on {}", c.foundation.what()),
                    None => String::new(),
                };
                let first = f.problems.first().map(|p| p.text()).unwrap_or_default();
                Some(RootCause {
                    case: Some(r.case.id.clone()),
                    cause: format!("{} ({}): {first}{rests}", r.case.id, r.case.section),
                    cases: under.iter().map(|c| c.case.id.clone()).collect(),
                })
            }
            _ => None,
        })
        .collect();
    roots.sort_by_key(|r| r.cases.is_empty());
    roots
}

/// Fewest answers a run must have had for "every answer" to say something of the address.
const MIN_ANSWERS: usize = 2;

/// Every answer of the run is a "no such path" status or an HTML page (a web server's, a
/// proxy's): a `--base-url` that names something else than this service looks exactly like a
/// target that serves none of §4's endpoints, so the cause names both. The failures stand (the
/// second is the target's violation); what was received is counted, never guessed.
fn not_this_service(answers: &[Arc<Answer>]) -> Option<(String, HashSet<u64>)> {
    let answered: Vec<&Arc<Answer>> = answers.iter().filter(|a| a.status != 0).collect();
    // A page: markup, or a body labelled HTML that is no JSON (a JSON body mislabelled is the
    // service's, `http.json-media-type`'s finding).
    let page = |a: &Answer| {
        let body = a.body.as_deref().or(a.excerpt.as_deref()).unwrap_or_default();
        let labelled = a.content_type.as_deref().is_some_and(|t| t.to_ascii_lowercase().contains("html"));
        body.trim_start().starts_with('<') || (labelled && serde_json::from_str::<serde::de::IgnoredAny>(body).is_err())
    };
    let nowhere = |a: &Answer| matches!(a.status, 404 | 405 | 501 | 502 | 503 | 504);
    if answered.len() < MIN_ANSWERS || !answered.iter().all(|a| page(a) || nowhere(a)) {
        return None;
    }
    let statuses: BTreeSet<String> = answered.iter().map(|a| a.status.to_string()).collect();
    let pages = answered.iter().filter(|a| page(a)).count();
    let pages = match pages {
        0 => String::new(),
        n if n == answered.len() => ", each an HTML page".to_string(),
        n => format!(", {n} of them an HTML page"),
    };
    let cause = format!(
        "every one of the {} answers of the run is status {}{pages}: either --base-url is not this service's \
         address (another server on that host and port, a proxy's page, a path prefix left out or added), or the \
         target serves none of §4's endpoints there",
        answered.len(),
        statuses.into_iter().collect::<Vec<_>>().join(" or ")
    );
    Some((cause, answered.iter().map(|a| a.seq).collect()))
}

/// Several `connection.created` events (distinct ids) naming one connection: each connection is
/// created once (§3.2), so the events name another connection than the one that changed
/// (§6.2 `connectionId`).
fn creations_named_alike(
    answers: &[Arc<Answer>],
    deliveries: &[Delivery],
    failed: &[&CaseResult],
) -> Option<RootCause> {
    // Each connection the run created, with the key that created it.
    let made: Vec<(String, &Auth)> = answers
        .iter()
        .filter(|a| a.sent.method == "POST" && (200..300).contains(&a.status))
        .filter_map(|a| {
            let body: serde_json::Value = serde_json::from_str(a.body.as_deref()?).ok()?;
            Some((body.get("connectionId")?.as_str()?.to_string(), &a.sent.auth))
        })
        .collect();
    let made_alike = |connection: &str| {
        let auth = made.iter().find(|(id, _)| id == connection).map(|(_, auth)| *auth);
        made.iter().filter(|(_, a)| Some(*a) == auth).count()
    };
    let created: Vec<Delivery> = unique(deliveries)
        .into_iter()
        .filter(|d| d.event_type() == Some(ConnectionState::Created.event_type()))
        .collect();
    // Per client (each has connections of its own): its clientId, else the address it reached.
    let client = |d: &Delivery| {
        d.body.pointer("/data/clientId").and_then(|v| v.as_str()).map_or_else(|| format!("{:?}", d.to), str::to_string)
    };
    let clients: BTreeSet<String> = created.iter().map(client).collect();
    let (one, count) = clients.iter().find_map(|c| {
        let own: Vec<&Delivery> = created.iter().filter(|d| client(d) == *c).collect();
        let named: BTreeSet<&str> = own.iter().filter_map(|d| d.connection_id()).collect();
        match named.into_iter().collect::<Vec<_>>()[..] {
            // Not one connection announced again under new ids: its key created others too.
            [one] if own.len() >= 3 && made_alike(one) >= 3 => Some((one.to_string(), own.len())),
            _ => None,
        }
    })?;
    let one = one.as_str();
    let on_events: HashSet<u64> = deliveries.iter().filter(|d| d.connection_id() == Some(one)).map(|d| d.seq).collect();
    // An event awaited for another connection never comes: its absence rests on no delivery,
    // so the cases of the event flows are named too (as what it may explain).
    let cases = failed
        .iter()
        .filter(|r| match &r.outcome {
            Outcome::Failed(f) => {
                f.evidence.deliveries.iter().any(|seq| on_events.contains(seq))
                    || matches!(r.case.area, "events" | "lifecycle")
            }
            _ => false,
        })
        .map(|r| r.case.id.clone())
        .collect();
    Some(RootCause {
        case: None,
        cause: format!(
            "{} connection.created events, each with its own id, all name the connection {one}: a connection is \
             created once (§3.2), so the events name another connection than the one that changed (§6.2 \
             connectionId: the connection concerned)",
            count
        ),
        cases,
    })
}
