//! Identity (§2): one identifier names one object. Judged over every answer and delivery:
//! - an answer about an object names the id it was asked for (§4.2's accounts name the
//!   connection asked for, §4.3's transactions the account, §4.4's account is the one asked);
//! - within one client's view, an id has one kind, one owner (an account one connection, a
//!   transaction one account) and one type and currency (an account's, §2.2), over the whole
//!   run: an id that is gone and comes back as something else shows here;
//! - an event id names one event at each address (`events.unique-ids`' rule, §6.1).
//!
//! The scope of an id is one client: ids need not be unique across clients (§2 calls them
//! opaque; `cases/README.md`), so answers to the second client's key are a view of their own,
//! and answers to a credential that is no key of the run are judged only against what they
//! were asked.

use super::{finding, Client, Kind, Record, Seen, Verdict, MAX_FINDINGS};
use crate::harness::rules::delivery::Recipient;
use crate::harness::rules::event_rules;
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use crate::harness::vocab::outcome::{Failure, Stop};
use std::collections::BTreeMap;

/// The fields that stay with an id for as long as it names anything (§2.2: an account's type and
/// primary currency are what it is; a change of either is another account).
const FIXED: [&str; 2] = ["type", "currency"];

pub(crate) fn judge(record: &Record) -> Verdict {
    let mut judged = 0;
    let mut found = Vec::new();
    for seen in record.answers.iter().filter(|a| a.ok()) {
        judged += seen.objects.len();
        found.extend(asked(seen));
    }
    for client in [Client::First, Client::Second] {
        found.extend(one_view(record, client));
    }
    for to in [Recipient::First, Recipient::Second] {
        let heard = record.heard_by(to);
        judged += heard.len();
        if let Err(Stop::Fail(f)) = event_rules::ids_identify_events(&heard) {
            found.push(f);
        }
    }
    found.truncate(MAX_FINDINGS);
    (judged, found).into()
}

/// An answer about an object names the one asked for.
fn asked(seen: &Seen) -> Vec<Failure> {
    let (field, what) = match seen.endpoint {
        super::Endpoint::Accounts => ("connectionId", "an account of another connection"),
        super::Endpoint::Transactions => ("accountId", "a transaction of another account"),
        super::Endpoint::Account => ("id", "another account"),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for object in &seen.objects {
        let named = if field == "id" { Some(object.id.as_str()) } else { object.str(field) };
        match named {
            Some(named) if named != seen.id => {
                let detail = format!(
                    "asked about {}, answered with {what}: {} {} names {field} {named}{}",
                    seen.id,
                    object.kind.name(),
                    object.id,
                    whose(seen)
                );
                out.push(
                    finding(
                        Problem::found(K::AnsweredOther, [seen.id.clone(), object.id.clone()], detail)
                            .expecting(format!("{field} {}", seen.id), format!("{field} {named}")),
                        &[seen.seq],
                        &[],
                    )
                    .requested(&seen.request),
                );
                break;
            }
            _ => {}
        }
    }
    out
}

fn whose(seen: &Seen) -> &'static str {
    match seen.client() {
        Some(Client::Second) => " (read with the second client's key)",
        Some(Client::First) => "",
        None => " (read with a credential that is no key of the run)",
    }
}

/// Where an id was first shown as what.
struct First<'a> {
    seq: u64,
    value: &'a str,
}

/// Within `client`'s view: one kind, one owner, and fixed fields per id.
fn one_view(record: &Record, client: Client) -> Vec<Failure> {
    let mut kinds: BTreeMap<&str, (Kind, u64)> = BTreeMap::new();
    let mut owners: BTreeMap<(Kind, &str), First> = BTreeMap::new();
    let mut fixed: BTreeMap<(&str, &str), First> = BTreeMap::new();
    let mut out = Vec::new();
    let view = record.answers.iter().filter(|a| a.ok() && a.client() == Some(client));
    for seen in view {
        let connection = seen.created.as_ref().map(|(c, _)| (Kind::Connection, c.as_str()));
        let shown = seen.objects.iter().map(|o| (o.kind, o.id.as_str())).chain(connection);
        for (kind, id) in shown {
            match kinds.get(id) {
                Some((earlier, seq)) if *earlier != kind => {
                    let detail = format!(
                        "{id} is shown as a {} here and as a {} by an earlier answer{}",
                        kind.name(),
                        earlier.name(),
                        whose(seen)
                    );
                    out.push(
                        finding(
                            Problem::found(K::IdTwoKinds, [id.to_string()], detail)
                                .expecting(earlier.name(), kind.name()),
                            &[*seq, seen.seq],
                            &[],
                        )
                        .requested(&seen.request),
                    );
                }
                Some(_) => {}
                None => {
                    kinds.insert(id, (kind, seen.seq));
                }
            }
        }
        for object in &seen.objects {
            // An account's owner is the list that showed it, or the connectionId a single read
            // states; a transaction's, the account whose page showed it.
            let owner = object.listed_under.as_deref().or(object.str("connectionId"));
            if let Some(owner) = owner {
                let key = (object.kind, object.id.as_str());
                match owners.get(&key) {
                    Some(first) if first.value != owner => {
                        let detail = format!(
                            "{} {} belongs to {owner} here and to {} in an earlier answer (one id names one \
                             object, with one owner){}",
                            object.kind.name(),
                            object.id,
                            first.value,
                            whose(seen)
                        );
                        out.push(
                            finding(
                                Problem::found(K::IdTwoOwners, [object.id.clone()], detail)
                                    .expecting(first.value, owner),
                                &[first.seq, seen.seq],
                                &[],
                            )
                            .requested(&seen.request),
                        );
                    }
                    Some(_) => {}
                    None => {
                        owners.insert(key, First { seq: seen.seq, value: owner });
                    }
                }
            }
            if object.kind != Kind::Account {
                continue;
            }
            for field in FIXED {
                let Some(value) = object.str(field) else { continue };
                match fixed.get(&(object.id.as_str(), field)) {
                    Some(first) if first.value != value => {
                        let detail = format!(
                            "account {} has {field} {value:?} here and {:?} in an earlier answer (an account's \
                             {field} is what it is: another {field} is another account under the same id){}",
                            object.id,
                            first.value,
                            whose(seen)
                        );
                        out.push(
                            finding(
                                Problem::found(K::IdTwoAccounts, [object.id.clone()], detail)
                                    .expecting(format!("{field} {:?}", first.value), format!("{field} {value:?}")),
                                &[first.seq, seen.seq],
                                &[],
                            )
                            .requested(&seen.request),
                        );
                    }
                    Some(_) => {}
                    None => {
                        fixed.insert((object.id.as_str(), field), First { seq: seen.seq, value });
                    }
                }
            }
        }
    }
    out
}
