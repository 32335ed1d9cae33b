//! What a failure rests on, as the reports name it: the command that reproduces it when one
//! can ([`reproduction`]), the HAR written and where each failure's evidence is in it
//! ([`write_har`]), and each failure's requests and deliveries cited by name ([`cite`]). Apart
//! from the runner, which calls these once the cases have run.

use crate::harness::checks;
use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::verdict::{Cited, Link};
use crate::harness::vocab::catalogue::Case;
use crate::harness::vocab::outcome::{CaseResult, Failure, Outcome};
use std::collections::BTreeMap;

/// Most items of one failure's evidence the reports name.
const MAX_CITED: usize = 64;

/// What each failure rests on, named as the files the run wrote name it (after the HAR is
/// written, so that its `_id`s are the file's).
pub(crate) fn cite(ctx: &RunContext, results: &[CaseResult]) -> BTreeMap<String, Vec<Cited>> {
    let recorder = ctx.api.recorder();
    let timeline = ctx.receiver().map(|r| r.timeline()).unwrap_or_default();
    let text = |body: &serde_json::Value, field: &str| {
        body.get(field).or_else(|| body.get("event")).and_then(|v| v.as_str()).map(|s| ctx.redactor.cut(s, 80))
    };
    results
        .iter()
        .filter_map(|r| {
            let Outcome::Failed(f) = &r.outcome else { return None };
            let requests = f.evidence.answers.iter().filter_map(|seq| ctx.api.answers().get(*seq)).map(|a| {
                let request = ctx.redactor.cut(&a.sent.request, 200);
                Cited::Request { request, status: a.status, har: a.har.and_then(|id| recorder.written(id)) }
            });
            let deliveries = f.evidence.deliveries.iter().filter_map(|seq| {
                let (_, d) = timeline.iter().find(|(_, d)| d.seq == *seq)?;
                let event = d.body.get("id").and_then(|v| v.as_str()).map(|s| ctx.redactor.cut(s, 80));
                Some(Cited::Delivery { event, kind: text(&d.body, "type"), har: recorder.delivery_entry(*seq) })
            });
            // The probe's items, in the order its references count them (`Probe::received`).
            let probed = ctx.widget_probe.get().and_then(|p| p.as_ref().ok()).map(|p| p.received()).unwrap_or_default();
            let received = f.evidence.received.iter().filter_map(|seq| {
                let item = probed.get(usize::try_from(*seq).ok()?)?;
                Some(Cited::Received { what: ctx.redactor.cut(&item.what, 200) })
            });
            Some((r.case.id.clone(), requests.chain(deliveries).chain(received).take(MAX_CITED).collect()))
        })
        .collect()
}

/// Writes the `--report-har` file, if asked; returns it with where each failure's evidence is in it.
/// (Its path was checked writable before the run; a failure to write it now is a note.)
pub(crate) fn write_har(
    ctx: &RunContext,
    results: &[CaseResult],
    notes: &mut Vec<crate::harness::vocab::note::Note>,
) -> Option<(String, BTreeMap<String, Link>)> {
    let path = ctx.plan.har.as_ref()?;
    let recorder = ctx.api.recorder();
    if let Err(e) = recorder.write(path, &ctx.redactor) {
        notes.push(format!("the HAR was not written: {e}").into());
        return None;
    }
    let links = results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(f) => {
                let requests: Vec<u64> =
                    f.evidence.answers.iter().filter_map(|seq| ctx.api.answers().get(*seq)?.har).collect();
                Some((r.case.id.clone(), recorder.link(&r.case.id, &requests, &f.evidence.deliveries)?))
            }
            _ => None,
        })
        .collect();
    Some((path.display().to_string(), links))
}

/// A command that, pasted, fails the same rule again, from the failure's evidence; none when
/// no command can (the reports then name the evidence as context, `Report::context`):
/// - a finding an answer shows by itself ([`Failure::alone`]: not two reads compared, not the
///   state model over time, not a read against an event): the curl of that request asks the
///   target the same question;
/// - a finding on deliveries, of a case `bankconf check-events` judges: those deliveries'
///   connection, piped into it.
///
/// A finding on two reads, a read against an event, or an absence is not reproduced by any one
/// request, and `check-events` does not judge absences or cross-references.
pub(crate) fn reproduction(ctx: &RunContext, case: &Case, failure: &Failure) -> Option<String> {
    let evidence = &failure.evidence;
    match failure.alone() {
        // A request whose credential is a secret the reports hide (a widget token sent as the
        // key) cannot be pasted: its evidence is named instead.
        Some(seq) if evidence.deliveries.is_empty() => {
            let plan = &ctx.plan;
            let reach = crate::harness::transport::reach::curl_words(
                &plan.headers.names(),
                plan.ca_cert.as_deref(),
                plan.insecure,
            );
            ctx.api.answers().get(seq).map(|a| a.sent.curl(&reach)).filter(|curl| ctx.redactor.redact(curl) == *curl)
        }
        _ if evidence.answers.is_empty() => delivery_reproduction(ctx, &case.id, &evidence.deliveries),
        _ => None,
    }
}

/// `printf '%s\n' '{…}' … | bankconf check-events -`: the deliveries of the connection of the
/// first delivery a failure rests on (each event once), piped into the offline judge of the
/// same rules; only when that judge fails the case on them too ([`checks::events::offline`]).
fn delivery_reproduction(ctx: &RunContext, case: &str, deliveries: &[u64]) -> Option<String> {
    let receiver = ctx.receiver().ok()?;
    let timeline = receiver.timeline();
    let named = deliveries.iter().find_map(|seq| timeline.iter().map(|(_, d)| d).find(|d| d.seq == *seq))?;
    let deliveries = match named.connection_id() {
        Some(connection) => crate::harness::rules::delivery::unique(&receiver.for_connection(connection)),
        None => vec![named.clone()],
    };
    if !matches!(checks::events::offline(case, &deliveries), Some(Err(crate::harness::vocab::outcome::Stop::Fail(_)))) {
        return None;
    }
    let quoted: Vec<String> =
        deliveries.iter().map(|d| crate::harness::vocab::sanitize::shell_word(&d.body.to_string())).collect();
    Some(format!("printf '%s\\n' {} | {} check-events -", quoted.join(" "), crate::harness::rules::verdict::program()))
}
