//! Which failures are another failure's consequence (issue 74): a finding whose every problem
//! rests on reads that a root finding showed to be unreliable. Decided from what each problem
//! rests on (its evidence, by reference to the answer log and the deliveries) and from typed
//! roots, never from the words of a message. A consequence is still reported, under its root;
//! the run fails by the root, and the `--expect` gate keys on the root alone.

use crate::harness::checks;
use crate::harness::rules::delivery::Delivery;
use crate::harness::transport::answers::Answer;
use crate::harness::vocab::outcome::{CaseResult, Consequence, Foundation, Outcome, Problem};
use std::collections::HashSet;
use std::sync::Arc;

/// The areas whose rules match events to connections: what they find rests on which
/// connection an event names.
const ON_EVENTS: [&str; 4] = ["events", "lifecycle", "reactions", "state"];

/// Marks each failed case of `results` that is a consequence of a root failure: of the first
/// failed walk ([`checks::transactions::WALKS`]) when every problem rests on a page of a
/// multi-page walk; of the events naming another connection ([`checks::misnamed`], given as
/// `misnamed`: its owner and the connection named twice) when every problem rests on that
/// connection's events or on an absence of events.
pub(crate) fn mark(
    results: &mut [CaseResult],
    answers: &[Arc<Answer>],
    deliveries: &[Delivery],
    misnamed: Option<(&str, &str)>,
) {
    let failed = |id: &str, rs: &[CaseResult]| rs.iter().any(|r| r.case.id == id && r.outcome.is_failed());
    let walk_root = checks::transactions::WALKS.into_iter().find(|id| failed(id, results));
    let walked: HashSet<u64> = answers.iter().filter(|a| is_walk_page(a)).map(|a| a.seq).collect();
    let misnamed = misnamed.filter(|(owner, _)| failed(owner, results)).map(|(owner, connection)| {
        let events: HashSet<u64> =
            deliveries.iter().filter(|d| d.connection_id() == Some(connection)).map(|d| d.seq).collect();
        (owner, events)
    });
    for r in results.iter_mut().filter(|r| r.consequence_of.is_none()) {
        let Outcome::Failed(failure) = &r.outcome else { continue };
        let problems = &failure.problems;
        let every = |rests: &dyn Fn(&Problem) -> bool| !problems.is_empty() && problems.iter().all(rests);
        if let Some(root) =
            walk_root.filter(|root| *root != r.case.id && !checks::transactions::WALKS.contains(&r.case.id.as_str()))
        {
            if every(&|p| p.evidence.answers.iter().any(|seq| walked.contains(seq))) {
                r.consequence_of = Some(Consequence { root: root.to_string(), foundation: Foundation::Pagination });
                continue;
            }
        }
        if let Some((owner, events)) = misnamed.as_ref().filter(|(owner, _)| *owner != r.case.id) {
            let on_events = ON_EVENTS.contains(&r.case.area);
            let rests = |p: &Problem| {
                p.evidence.deliveries.iter().any(|seq| events.contains(seq))
                    || (on_events && p.evidence.deliveries.is_empty())
            };
            if every(&rests) {
                r.consequence_of =
                    Some(Consequence { root: owner.to_string(), foundation: Foundation::EventConnection });
            }
        }
    }
}

/// Whether `answer` is a page of a walk of more than one page (§4.3): read by following a
/// cursor, or telling of a next page.
fn is_walk_page(answer: &Answer) -> bool {
    if answer.segments.last().map(String::as_str) != Some("transactions") {
        return false;
    }
    let followed = answer.query.iter().any(|(k, _)| k == "starting_after");
    let more = || {
        answer
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
            .and_then(|v| v.get("has_more").and_then(serde_json::Value::as_bool))
            .unwrap_or(false)
    };
    followed || more()
}
