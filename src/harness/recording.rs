//! Gathers what a run recorded (the answer log, the receiver's deliveries, the driver calls)
//! into the report's bounded [`Trace`], at the end of the run: the HTML report draws it.

use super::answers::{Answer, Auth};
use super::delivery::Recipient;
use super::fixtures::RunContext;
use super::outcome::{CaseResult, Outcome};
use super::trace::{Client, Connection, Exchange, Item, Kind, Posted, Trace};
use super::trace::{MAX_CONNECTIONS, MAX_EVIDENCE, MAX_ITEMS, MAX_TEXT};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Most bytes of an accounts list read to learn which connection an account belongs to (only
/// the ids are kept, as they are read).
const MAX_PARSED: usize = 1024 * 1024;
/// Most bytes of a body laid out on lines for the evidence (a parsed body takes several times its
/// size: the run's memory budget holds the answer log at its fullest now).
const MAX_PRETTY: usize = 64 * 1024;

/// An element of an accounts list: its id alone (the rest is skipped as it is read).
#[derive(serde::Deserialize)]
struct Listed {
    id: Option<String>,
}

/// The run's trace, times counted from `started`; the failures of `results` name the evidence
/// kept and the connections drawn first.
pub(super) fn trace(ctx: &RunContext, started: Instant, results: &[CaseResult]) -> Trace {
    let redactor = &ctx.redactor;
    let since = |at: Instant| at.saturating_duration_since(started);
    let (mut named_answers, mut named_deliveries) = (Vec::new(), Vec::new());
    for r in results {
        if let Outcome::Failed(f) = &r.outcome {
            named_answers.extend(f.evidence.answers.iter().copied());
            named_deliveries.extend(f.evidence.deliveries.iter().copied());
        }
    }
    let answers = ctx.api.answers().all();
    let deliveries = ctx.receiver().map(|r| r.timeline()).unwrap_or_default();
    let calls = ctx.api.recorder().calls();

    // Whose each connection is, and which connection each account belongs to.
    let (mut owners, mut accounts) = (HashMap::new(), HashMap::new());
    for a in answers.iter().filter(|a| (200..300).contains(&a.status)) {
        let Some(body) = a.body.as_deref().filter(|b| b.len() <= MAX_PARSED) else { continue };
        match a.segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["v1", "connections"] if a.sent.method == "POST" && body.len() <= MAX_PRETTY => {
                let created = serde_json::from_str::<Value>(body).ok();
                if let Some(id) = created.as_ref().and_then(|v| v["connectionId"].as_str()) {
                    owners.entry(id.to_string()).or_insert(client(&a.sent.auth));
                }
            }
            ["v1", "connections", connection, "accounts"] => {
                let Ok(listed) = serde_json::from_str::<Vec<Listed>>(body) else { continue };
                for id in listed.into_iter().filter_map(|acc| acc.id) {
                    accounts.entry(id).or_insert_with(|| connection.to_string());
                }
            }
            _ => {}
        }
    }
    let connection_of = |a: &Answer| -> Option<String> {
        match a.segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["v1", "connections", id, ..] => Some(id.to_string()),
            ["v1", "accounts", account, ..] => accounts.get(account).cloned(),
            ["v1", "connections"] => {
                let body = a.body.as_deref().filter(|b| b.len() <= MAX_PRETTY)?;
                serde_json::from_str::<Value>(body).ok()?["connectionId"].as_str().map(str::to_string)
            }
            _ => None,
        }
    };

    let mut lanes: HashMap<String, Vec<Item>> = HashMap::new();
    for a in &answers {
        let Some(connection) = connection_of(a) else { continue };
        let answered = if a.status == 0 { "no answer".to_string() } else { a.status.to_string() };
        lanes.entry(connection).or_default().push(Item {
            kind: Kind::Read,
            client: client(&a.sent.auth),
            at: since(a.sent_at),
            until: since(a.answered_at),
            label: redactor.cut(&format!("{} → {answered}", a.sent.request), 200),
            answer: Some(a.seq),
            delivery: None,
        });
    }
    for (arrived, d) in &deliveries {
        let Some(connection) = d.connection_id() else { continue };
        lanes.entry(connection.to_string()).or_default().push(Item {
            kind: Kind::Delivery,
            client: recipient(d.to),
            at: since(*arrived),
            until: since(*arrived),
            label: redactor.cut(&d.label(), 120),
            answer: None,
            delivery: Some(d.seq),
        });
    }
    for call in &calls {
        let Some(connection) = &call.connection else { continue };
        lanes.entry(connection.clone()).or_default().push(Item {
            kind: Kind::Call,
            client: owners.get(connection).copied().unwrap_or_default(),
            at: since(call.started),
            until: since(call.ended),
            label: format!("{}: {}", call.action, call.exit),
            answer: None,
            delivery: None,
        });
    }

    // The connections the failures name first (in their order), then by first appearance.
    let rank = |seqs: &[u64]| {
        let mut ranks = HashMap::new();
        for (at, seq) in seqs.iter().enumerate() {
            ranks.entry(*seq).or_insert(at);
        }
        ranks
    };
    let (answer_rank, delivery_rank) = (rank(&named_answers), rank(&named_deliveries));
    let rank_of = |item: &Item| {
        let by_answer = item.answer.and_then(|s| answer_rank.get(&s).copied());
        by_answer.or_else(|| item.delivery.and_then(|s| delivery_rank.get(&s).copied()))
    };
    let named = |item: &Item| rank_of(item).is_some();
    let mut order: Vec<(usize, std::time::Duration, String)> = lanes
        .iter()
        .map(|(id, items)| {
            let first_named = items.iter().filter_map(rank_of).min().unwrap_or(usize::MAX);
            let first = items.iter().map(|i| i.at).min().unwrap_or_default();
            (first_named, first, id.clone())
        })
        .collect();
    order.sort();
    let connections_left_out = order.len().saturating_sub(MAX_CONNECTIONS);
    let connections = order
        .into_iter()
        .take(MAX_CONNECTIONS)
        .map(|(_, _, id)| {
            let mut items = lanes.remove(&id).unwrap_or_default();
            items.sort_by_key(|i| (i.at, i.until));
            let total = items.len();
            if total > MAX_ITEMS {
                // The evidence stays; the others, first come, fill the rest.
                let evidence = items.iter().filter(|i| named(i)).count().min(MAX_ITEMS);
                let mut others = MAX_ITEMS - evidence;
                items.retain(|i| {
                    named(i) || {
                        let keep = others > 0;
                        others = others.saturating_sub(1);
                        keep
                    }
                });
                items.truncate(MAX_ITEMS);
            }
            let left_out = total - items.len();
            Connection { owner: owners.get(&id).copied(), id: redactor.cut(&id, 200), items, left_out }
        })
        .collect();

    let mut exchanges = std::collections::BTreeMap::new();
    for seq in named_answers.iter().collect::<BTreeSet<_>>().into_iter().take(MAX_EVIDENCE) {
        let Some(a) = ctx.api.answers().get(*seq) else { continue };
        let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
        match &a.sent.auth {
            Auth::Missing => {}
            Auth::Header(h) => headers.push(("Authorization".into(), redactor.cut(h, 200))),
            _ => headers.push(("Authorization".into(), "Bearer [redacted]".into())),
        }
        if a.sent.method == "POST" {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let body = a.body.as_deref().or(a.excerpt.as_deref()).map(|b| match pretty(b) {
            Some(laid) => redactor.cut(&laid, MAX_TEXT),
            None => redactor.cut(b, MAX_TEXT),
        });
        exchanges.insert(
            *seq,
            Exchange {
                method: a.sent.method.clone(),
                url: redactor.cut(&a.sent.url, MAX_TEXT),
                headers,
                status: a.status,
                content_type: a.content_type.as_deref().map(|t| redactor.cut(t, 200)),
                body,
                client: client(&a.sent.auth),
                at: since(a.sent_at),
                took: a.answered_at.saturating_duration_since(a.sent_at),
            },
        );
    }
    let mut posted = std::collections::BTreeMap::new();
    for seq in named_deliveries.iter().collect::<BTreeSet<_>>().into_iter().take(MAX_EVIDENCE) {
        let Some((arrived, d)) = deliveries.iter().find(|(_, d)| d.seq == *seq) else { continue };
        let compact = d.body.to_string();
        let text = match compact.len() <= MAX_PRETTY {
            true => serde_json::to_string_pretty(&d.body).unwrap_or(compact),
            false => compact,
        };
        posted.insert(
            *seq,
            Posted {
                label: redactor.cut(&d.label(), 200),
                to: recipient(d.to),
                at: since(*arrived),
                body: redactor.cut(&text, MAX_TEXT),
            },
        );
    }
    Trace { connections, connections_left_out, exchanges, deliveries: posted }
}

/// A small JSON body laid out on lines (easier to read than one long line); `None` for any
/// other text, or a large body (shown as it came).
fn pretty(body: &str) -> Option<String> {
    let parsed = (body.len() <= MAX_PRETTY).then(|| serde_json::from_str::<Value>(body).ok()).flatten()?;
    serde_json::to_string_pretty(&parsed).ok()
}

/// Whose key a request carried: the second client's, or (any other) the client under test's.
fn client(auth: &Auth) -> Client {
    match auth {
        Auth::Second => Client::Second,
        _ => Client::First,
    }
}

fn recipient(to: Recipient) -> Client {
    match to {
        Recipient::First => Client::First,
        Recipient::Second => Client::Second,
    }
}
