//! Reach (§5): a credential opens only what it may. Judged over every answer of the run:
//! - a credential that is no key of the run (none, a malformed header, a near miss, a key never
//!   issued, a connection's `widgetToken`: §5 items 1-3, the token is the frontend's and no key)
//!   gets no data: no 2xx creation, and no 2xx read that shows an object, its own connection's
//!   objects included;
//! - a client's key shows nothing of the other client's data that it was never shown itself,
//!   judged field by field: a server that blanks one field of what it leaks still leaks the
//!   rest. An answer about an object of the reader's own (an id its own connections showed it)
//!   is its own, whatever the other client holds under the same id (ids may repeat across
//!   clients, §2); a value the reader's own objects also show is no evidence either. A
//!   refusal's body is judged alike: an object it holds beside the refusal (`error.details`)
//!   leaks as a 2xx answer would.

use super::{finding, Client, Credential, Endpoint, Kind, Record, Seen, Verdict, MAX_FINDINGS};
use crate::harness::vocab::kind::InvariantKind as K;
use crate::harness::vocab::outcome::Problem;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The values another client must not be shown: what tells one client's object from another's
/// (type and currency say too little: every client has checking accounts in some currency).
const PRIVATE: [&str; 9] = [
    "name",
    "accountNumber",
    "balance",
    "availableBalance",
    "createdAt",
    "amount",
    "description",
    "transactionDate",
    "lastSyncedAt",
];

pub(crate) fn judge(record: &Record) -> Verdict {
    let (mut judged, mut found) = (0, Vec::new());
    let tokens: HashMap<String, &str> = record
        .creations()
        .filter_map(|(c, seen)| Some((format!("Bearer {}", seen.created.as_ref()?.1.as_ref()?), c)))
        .collect();
    let trees = [Client::First, Client::Second].map(|c| Tree::of(record, c));
    for seen in &record.answers {
        match seen.client() {
            None => {
                judged += 1;
                found.extend(no_key(record, seen, &tokens));
            }
            Some(client) => {
                let (own, theirs) = match client {
                    Client::First => (&trees[0], &trees[1]),
                    Client::Second => (&trees[1], &trees[0]),
                };
                if seen.ok() && !seen.objects.is_empty() {
                    judged += 1;
                    found.extend(leak(seen, &seen.objects, client, own, theirs));
                }
                if !seen.refusal_objects.is_empty() {
                    judged += 1;
                    found.extend(leak(seen, &seen.refusal_objects, client, own, theirs));
                }
            }
        }
    }
    found.truncate(MAX_FINDINGS);
    (judged, found).into()
}

/// A 2xx answer with data to a credential that is no key.
fn no_key(record: &Record, seen: &Seen, tokens: &HashMap<String, &str>) -> Option<super::Failure> {
    let data = seen.endpoint == Endpoint::Create || !seen.objects.is_empty();
    if !seen.ok() || !data {
        return None;
    }
    let what = match &seen.credential {
        Credential::Missing => "without a key".to_string(),
        Credential::NearKey => "with a near miss of the API key".to_string(),
        Credential::Header(h) => match tokens.get(h) {
            Some(connection) if belongs(record, seen, connection) => {
                format!("with the widgetToken of {connection}, its own connection, as the Bearer key")
            }
            Some(connection) => format!("with the widgetToken of {connection} as the Bearer key"),
            None => "with a malformed header or a key the service never issued".to_string(),
        },
        Credential::Key(_) => return None,
    };
    let shown = match seen.objects.len() {
        0 => "a new connection".to_string(),
        n => format!(
            "{n} object(s) ({})",
            seen.objects.iter().map(|o| o.id.as_str()).take(3).collect::<Vec<_>>().join(", ")
        ),
    };
    let detail = format!(
        "{} {what}: expected a refusal (§5: only an API key opens the API; the widget token is the frontend's), got \
         status {} serving {shown}",
        seen.request, seen.status
    );
    Some(
        finding(
            Problem::found(K::ServedWithoutKey, [seen.id.clone()], detail)
                .expecting("a refusal", format!("status {}", seen.status)),
            &[seen.seq],
            &[],
        )
        .requested(&seen.request),
    )
}

/// Whether the answer is about `connection` or one of the accounts its lists showed.
fn belongs(record: &Record, seen: &Seen, connection: &str) -> bool {
    seen.id == connection
        || record.answers.iter().any(|a| {
            a.ok()
                && a.endpoint == Endpoint::Accounts
                && a.id == connection
                && a.objects.iter().any(|o| o.id == seen.id)
        })
}

/// What one client's own connections showed it: the ids of its tree, and the values of each.
#[derive(Default)]
struct Tree<'a> {
    ids: HashSet<&'a str>,
    objects: HashMap<&'a str, Vec<&'a super::Object>>,
    values: BTreeMap<&'static str, BTreeSet<String>>,
}

impl<'a> Tree<'a> {
    /// The connections `client` created, the accounts their lists showed it, and those
    /// accounts' transactions, as its own key read them.
    fn of(record: &'a Record, client: Client) -> Self {
        let mut tree = Tree::default();
        let mine = |a: &&Seen| a.ok() && a.client() == Some(client);
        tree.ids.extend(record.creations().filter(|(_, s)| s.client() == Some(client)).map(|(c, _)| c));
        // Connections first, then accounts, then transactions: each level from the one above.
        for endpoint in [Endpoint::Accounts, Endpoint::Account, Endpoint::Transactions] {
            let answers: Vec<&Seen> = record.answers.iter().filter(mine).filter(|a| a.endpoint == endpoint).collect();
            for seen in answers {
                let under = match endpoint {
                    Endpoint::Account => seen.objects.first().and_then(|o| o.str("connectionId")),
                    _ => Some(seen.id.as_str()),
                };
                // A single read of an account of its own, or a list of a connection of its own.
                let single = endpoint == Endpoint::Account && tree.ids.contains(seen.id.as_str());
                if !(single || under.is_some_and(|u| tree.ids.contains(u))) {
                    continue;
                }
                for object in &seen.objects {
                    tree.ids.insert(object.id.as_str());
                    tree.objects.entry(object.id.as_str()).or_default().push(object);
                    for field in PRIVATE {
                        if let Some(v) = object.fields.get(field) {
                            tree.values.entry(field).or_default().insert(text(v));
                        }
                    }
                }
            }
        }
        tree
    }
}

/// A value as compared: numbers by their value (`12.5` and `12.50` alike).
fn text(v: &Value) -> String {
    match v.as_f64() {
        Some(n) => format!("{n}"),
        None => v.to_string(),
    }
}

/// The other client's values an answer to `client` shows (a 2xx answer's `objects`, or what a
/// refusal's body holds), about an object not of its own.
fn leak(seen: &Seen, objects: &[super::Object], client: Client, own: &Tree, theirs: &Tree) -> Option<super::Failure> {
    if own.ids.contains(seen.id.as_str()) || !theirs.ids.contains(seen.id.as_str()) {
        return None;
    }
    for object in objects.iter().filter(|o| !own.ids.contains(o.id.as_str())) {
        let Some(versions) = theirs.objects.get(object.id.as_str()) else { continue };
        let leaked: Vec<&str> = PRIVATE
            .iter()
            .copied()
            .filter(|f| {
                let Some(v) = object.fields.get(f) else { return false };
                let shown = |o: &&&super::Object| o.fields.get(f).is_some_and(|w| text(w) == text(v));
                versions.iter().any(|o| shown(&o)) && !own.values.get(f).is_some_and(|vs| vs.contains(&text(v)))
            })
            .collect();
        if leaked.is_empty() {
            continue;
        }
        let kind = if object.kind == Kind::Account { "account" } else { "transaction" };
        let how = if seen.ok() { "got" } else { "the refusal shows" };
        let detail = format!(
            "{} with {}'s key: expected no data of {}'s, {how} its {kind} {} with {} as that client was shown them \
             (§5: a key opens its own client's data; this reader was never shown these values)",
            seen.request,
            client.name(),
            client.other().name(),
            object.id,
            leaked.join(", ")
        );
        return Some(
            finding(
                Problem::found(K::OtherClientsData, [object.id.clone()], detail).expecting(
                    format!("no data of {}'s", client.other().name()),
                    format!("{} {} with {}", kind, object.id, leaked.join(", ")),
                ),
                &[seen.seq],
                &[],
            )
            .requested(&seen.request),
        );
    }
    None
}
