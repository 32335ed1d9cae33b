//! HTTP itself (RFC 9110) on every answer of the run, whichever case made it: what the bytes
//! received say of themselves, judged apart from what any case reads in them (issue 73). The
//! rules are `rules::http`; the transport decodes each body and keeps what it found.

use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::http;
use crate::harness::rules::invariants::{finding, Endpoint, Record, Seen, Verdict, MAX_FINDINGS};
use crate::harness::vocab::kind::HttpKind;
use crate::harness::vocab::outcome::{Problem, Stop};
use std::sync::Arc;

super::cases! {
    CONTENT_CODING = "http.content-coding" => reads, record [coding_everywhere];
    JSON_MEDIA_TYPE = "http.json-media-type" => reads, record [media_types_everywhere];
    STATUS_ALLOWED = "http.status-allowed" => reads, record [statuses_everywhere];
    ONE_VALUE_PER_NAME = "http.one-value-per-name" => reads, record [repeats_everywhere];
}

/// The reads of every endpoint that every run makes (the reference's, and one single read of
/// each account, §4.4, where none was made): the rules judge every answer of the run. A read
/// whose body these cases do not judge (not JSON, a wrong field) is its own case's finding, not
/// theirs: they judge what was received, so only a read that could not be made stops them.
async fn reads(ctx: Arc<RunContext>) -> Result<(), Stop> {
    made(ctx.reference_reads().await)?;
    let Some(connected) = made(ctx.connected().await)? else { return Ok(()) };
    for id in connected.account_ids() {
        if ctx.api.answers().latest(&["v1", "accounts", &id]).is_none() {
            made(ctx.api.get(&["v1", "accounts", &id], &[]).await)?;
        }
    }
    Ok(())
}

/// A fixture's or read's result as these cases take it: a failure is another case's finding
/// (the read was made, and the record holds it); anything else (not judged, an error) stops
/// them as it stops the others.
pub(super) fn made<T>(result: Result<T, Stop>) -> Result<Option<T>, Stop> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(Stop::Fail(_)) => Ok(None),
        Err(other) => Err(other),
    }
}

/// What a rule of `kind` expects of an answer, and what the answer showed instead.
type Contrast = fn(&Seen) -> (String, String);

/// `problem` of each answer it finds one in, over every answer of the record: a finding of
/// `kind`, with what was expected against what came (`contrast`).
fn over_answers(
    record: &Record,
    (kind, contrast): (HttpKind, Contrast),
    judged: impl Fn(&Seen) -> bool,
    problem: impl Fn(&Seen) -> Option<String>,
) -> Verdict {
    let (mut verdict, mut more) = (Verdict::default(), 0);
    for seen in record.answers.iter().filter(|s| judged(s)) {
        verdict.judged += 1;
        match problem(seen) {
            Some(_) if verdict.found.len() >= MAX_FINDINGS => more += 1,
            Some(p) => {
                let (expected, actual) = contrast(seen);
                let detail = format!("{} ({}): {p}", seen.request, seen.status);
                let problem = Problem::found(kind, [seen.id.clone()], detail).expecting(expected, actual);
                verdict.found.push(finding(problem, &[seen.seq], &[]))
            }
            None => {}
        }
    }
    if more > 0 {
        let detail = format!("and {more} more answers with a problem of the same rule");
        verdict.found.push(finding(Problem::found(kind, [], detail), &[], &[]));
    }
    verdict
}

/// Every answer whose `Content-Encoding` names a coding its bytes do not decode as (RFC 9110
/// §8.4; §4: bodies are JSON). A coding the harness does not decode is not judged.
fn coding_everywhere(record: &Record) -> Verdict {
    let contrast: Contrast = |s| {
        let named = match &s.coding {
            http::Coding::Undecodable { coding, .. } => coding.clone(),
            _ => String::new(),
        };
        (format!("a body that decodes as {named}"), format!("bytes that do not decode as {named}"))
    };
    over_answers(record, (HttpKind::Coding, contrast), |s| s.status != 0, |s| http::coding_problem(&s.coding))
}

/// Every 2xx answer of §4's endpoints that labels its body (§4: bodies are JSON; RFC 9110 §8.3).
/// Error answers are not judged: their bodies are not shown (§7).
fn media_types_everywhere(record: &Record) -> Verdict {
    let contrast: Contrast = |s| {
        let given = crate::harness::vocab::redact::shorten(s.content_type.as_deref().unwrap_or_default(), 80);
        ("a JSON media type".to_string(), format!("Content-Type {given:?}"))
    };
    over_answers(
        record,
        (HttpKind::MediaType, contrast),
        |s| s.ok() && s.status != 204 && s.endpoint != Endpoint::Other,
        |s| http::media_type_problem(s.content_type.as_deref()),
    )
}

/// Every answer whose status its request rules out (RFC 9110 §15.3.7, §15.4.5; §4.2 and §4.3
/// answer 200): the harness sends no `Range` and no condition, so none may be a 206 or a 304.
fn statuses_everywhere(record: &Record) -> Verdict {
    let contrast: Contrast = |s| {
        ("a status other than 206 and 304 (no Range, no condition sent)".to_string(), format!("status {}", s.status))
    };
    over_answers(record, (HttpKind::Status, contrast), |s| s.status != 0, |s| http::status_problem(s.status))
}

/// Every 2xx JSON answer one of whose objects repeats a name with another value (RFC 8259 §4;
/// §2.2 and §2.3 give each field one value): which of the two a client reads is unpredictable.
/// A name repeated with the same value is not judged (the RFC only recommends unique names).
fn repeats_everywhere(record: &Record) -> Verdict {
    let contrast: Contrast = |s| {
        let name = crate::harness::vocab::redact::shorten(s.repeated.as_deref().unwrap_or_default(), 64);
        (format!("one value for {name:?}"), format!("{name:?} twice, with two different values"))
    };
    over_answers(
        record,
        (HttpKind::RepeatedName, contrast),
        |s| s.ok() && s.endpoint != Endpoint::Other,
        |s| {
            s.repeated.as_ref().map(|name| {
                format!(
                    "an object of the body names {:?} twice, with two different values: a reader keeps either \
                     (RFC 8259 §4), so the answer gives no one value for it (§2.2, §2.3)",
                    crate::harness::vocab::redact::shorten(name, 64)
                )
            })
        },
    )
}
