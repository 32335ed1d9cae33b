//! Four invariants over everything a run observes (issue 46): every answer of either client
//! (list, page, single read, refusal), every webhook delivery at either address, each with when
//! it was sent or received and under which credential. No case calls them: the checks layer
//! builds one [`Record`] at the end of the run and each invariant judges all of it, so a
//! violation cannot hide in a read or a delivery that no case thought to look at.
//!
//! - [`identity`]: one identifier names one object (§2);
//! - [`clock`]: no timestamp records a moment after it was observed (§2.2, §2.3, §6.1, §6.2);
//! - [`reach`]: a credential opens only what it may (§5);
//! - [`cause`] and [`cause_read`]: a refused creation, or read, has no effect (§5, §7).
//!
//! The record keeps, of each body, only what the invariants compare (ids, owners, a few fields,
//! timestamps): never two bodies parsed at once, and never a secret in a message.

pub(crate) mod available;
pub(crate) mod cause;
pub(crate) mod cause_read;
pub(crate) mod clock;
pub(crate) mod identity;
pub(crate) mod reach;
pub(crate) mod served;
pub(crate) mod settled;

use crate::harness::rules::delivery::{Delivery, Recipient};
use crate::harness::vocab::outcome::{Failure, Problem};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

/// Which client a key belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Client {
    First,
    Second,
}

impl Client {
    pub(crate) fn other(self) -> Self {
        match self {
            Self::First => Self::Second,
            Self::Second => Self::First,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::First => "the first client",
            Self::Second => "the second client",
        }
    }
}

/// The credential a request carried. `Header` holds the header's value, a secret: it is only
/// ever compared, never written into a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Credential {
    Key(Client),
    Missing,
    Header(String),
    NearKey,
}

/// The endpoints of §4 (and anything else, which the invariants only time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Endpoint {
    Create,
    Accounts,
    Account,
    Transactions,
    Other,
}

/// The kind of object an id names (§2's prefixes, told here by where the id was shown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Connection,
    Account,
    Transaction,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Connection => "connection",
            Self::Account => "account",
            Self::Transaction => "transaction",
        }
    }
}

/// The fields that tell one object from another under an equal id: what an account (§2.2) or a
/// transaction (§2.3) is, not what changes with an announced update (balances,
/// `lastSyncedAt`). Also the isolation cases' (`checks::security::isolation`).
pub(crate) const IDENTIFYING: [&str; 10] = [
    "connectionId",
    "accountId",
    "name",
    "type",
    "currency",
    "accountNumber",
    "createdAt",
    "amount",
    "description",
    "transactionDate",
];

/// Besides the [`IDENTIFYING`] fields, what an invariant compares: the values another client
/// must not be shown, balances included.
const CHANGING: [&str; 3] = ["balance", "availableBalance", "lastSyncedAt"];

/// One object an answer showed.
#[derive(Clone, Debug)]
pub(crate) struct Object {
    pub kind: Kind,
    pub id: String,
    /// The connection (account) or account (transaction) whose list showed it: the path's id.
    pub listed_under: Option<String>,
    pub fields: BTreeMap<&'static str, Value>,
}

impl Object {
    pub(crate) fn str(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }
}

/// One exchange with the API, as the invariants see it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The answer log's `seq`: the evidence.
    pub seq: u64,
    /// `GET /v1/accounts/acc_1`: no secret (credentials are never in it).
    pub request: String,
    pub endpoint: Endpoint,
    /// The id in the path ("" for none).
    pub id: String,
    pub credential: Credential,
    /// 0 when no answer came.
    pub status: u16,
    pub sent: DateTime<Utc>,
    pub answered: DateTime<Utc>,
    /// What a 2xx body showed: accounts, transactions, or (for §4.4) the one account.
    pub objects: Vec<Object>,
    /// A creation's `connectionId` and `widgetToken` (§4.1), the token a secret.
    pub created: Option<(String, Option<String>)>,
    /// What a refusal's body shows, anywhere in it: each object with an `id` and a value of
    /// the other client's to compare ([`reach`]). No other rule reads them: a refusal is about
    /// no object.
    pub refusal_objects: Vec<Object>,
    /// What the bytes received said of themselves: the `Content-Type` (cut), the coding and
    /// whose API keys the answer carried besides the request's own (`rules::http`,
    /// `rules::secrets`; set by the checks layer beside [`Record::answer`]).
    pub content_type: Option<String>,
    pub coding: crate::harness::rules::http::Coding,
    pub revealed: Vec<Client>,
    /// Whose widget tokens the answer carried to a request not sent with that client's key.
    pub tokens: Vec<Client>,
    /// A name one object of its JSON body repeats with another value (`rules::members`).
    pub repeated: Option<String>,
}

impl Seen {
    pub(crate) fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The client whose key it carried, if a key of the run.
    pub(crate) fn client(&self) -> Option<Client> {
        match self.credential {
            Credential::Key(c) => Some(c),
            _ => None,
        }
    }
}

/// One delivery, with when it arrived.
#[derive(Clone, Debug)]
pub(crate) struct Heard {
    pub arrived: DateTime<Utc>,
    pub delivery: Delivery,
}

/// One driver call of the run (`connect`, `update_accounts`, ...), on the wall clock.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub action: &'static str,
    pub connection: Option<String>,
    pub started: DateTime<Utc>,
    /// It exited 0: the target did the action.
    pub done: bool,
}

/// Everything the run observed.
#[derive(Default)]
pub(crate) struct Record {
    pub answers: Vec<Seen>,
    pub deliveries: Vec<Heard>,
    pub calls: Vec<Call>,
    /// The driver calls were more than the recorder keeps: `calls` is not all of them.
    pub calls_cut: bool,
}

/// One exchange as the checks layer hands it over (`body`: a 2xx answer's, parsed).
pub(crate) struct Exchange<'a> {
    pub seq: u64,
    pub request: &'a str,
    pub method: &'a str,
    pub segments: &'a [String],
    pub credential: Credential,
    pub status: u16,
    pub sent: DateTime<Utc>,
    pub answered: DateTime<Utc>,
    pub body: Option<&'a Value>,
}

impl Record {
    /// Keeps what the invariants need of one exchange.
    pub(crate) fn answer(&mut self, e: Exchange<'_>) {
        let path: Vec<&str> = e.segments.iter().map(String::as_str).collect();
        let (endpoint, id) = match (e.method, path.as_slice()) {
            ("POST", ["v1", "connections"]) => (Endpoint::Create, ""),
            ("GET", ["v1", "connections", id, "accounts"]) => (Endpoint::Accounts, *id),
            ("GET", ["v1", "accounts", id]) => (Endpoint::Account, *id),
            ("GET", ["v1", "accounts", id, "transactions"]) => (Endpoint::Transactions, *id),
            _ => (Endpoint::Other, ""),
        };
        let ok = (200..300).contains(&e.status);
        let refusal_objects = match e.body.filter(|_| (400..500).contains(&e.status)) {
            Some(b) => objects_within(b),
            None => Vec::new(),
        };
        let body = e.body.filter(|_| ok);
        let object = |kind, v: &Value, under: Option<&str>| {
            let id = v.get("id")?.as_str()?.to_string();
            let fields = IDENTIFYING.iter().chain(&CHANGING).filter_map(|f| Some((*f, v.get(*f)?.clone()))).collect();
            Some(Object { kind, id, listed_under: under.map(str::to_string), fields })
        };
        fn items(v: Option<&Value>) -> Vec<&Value> {
            v.and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        let objects: Vec<Object> = match endpoint {
            Endpoint::Accounts => items(body).into_iter().filter_map(|v| object(Kind::Account, v, Some(id))).collect(),
            Endpoint::Transactions => items(body.and_then(|b| b.get("data")))
                .into_iter()
                .filter_map(|v| object(Kind::Transaction, v, Some(id)))
                .collect(),
            Endpoint::Account => body
                .and_then(crate::spec::single_account)
                .and_then(|a| object(Kind::Account, &Value::Object(a.clone()), None))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        let created = match (endpoint, body) {
            (Endpoint::Create, Some(b)) => b
                .get("connectionId")
                .and_then(Value::as_str)
                .map(|c| (c.to_string(), b.get("widgetToken").and_then(Value::as_str).map(str::to_string))),
            _ => None,
        };
        self.answers.push(Seen {
            seq: e.seq,
            request: e.request.to_string(),
            endpoint,
            id: id.to_string(),
            credential: e.credential,
            status: e.status,
            sent: e.sent,
            answered: e.answered,
            objects,
            created,
            refusal_objects,
            content_type: None,
            coding: crate::harness::rules::http::Coding::Identity,
            revealed: Vec::new(),
            tokens: Vec::new(),
            repeated: None,
        });
    }

    /// Keeps one delivery.
    pub(crate) fn delivery(&mut self, arrived: DateTime<Utc>, delivery: Delivery) {
        self.deliveries.push(Heard { arrived, delivery });
    }

    /// The connections the run created (a 2xx creation answer), with the answer.
    pub(crate) fn creations(&self) -> impl Iterator<Item = (&str, &Seen)> {
        self.answers.iter().filter(|a| a.ok()).filter_map(|a| a.created.as_ref().map(|(c, _)| (c.as_str(), a)))
    }

    /// The deliveries posted to `to`'s address.
    pub(crate) fn heard_by(&self, to: Recipient) -> Vec<Delivery> {
        self.deliveries.iter().filter(|h| h.delivery.to == to).map(|h| h.delivery.clone()).collect()
    }
}

/// Most objects kept of one refusal's body, and how deep it is searched.
const REFUSAL_OBJECTS: usize = 32;
const REFUSAL_DEPTH: usize = 6;

/// The objects anywhere in a refusal's body that carry an `id` and a value the other client's
/// objects could show (a transaction when it has an `amount`, else an account).
fn objects_within(body: &Value) -> Vec<Object> {
    fn walk(v: &Value, depth: usize, out: &mut Vec<Object>) {
        if depth > REFUSAL_DEPTH || out.len() >= REFUSAL_OBJECTS {
            return;
        }
        match v {
            Value::Object(map) => {
                if let Some(id) = map.get("id").and_then(Value::as_str) {
                    let fields: BTreeMap<&'static str, Value> =
                        IDENTIFYING.iter().chain(&CHANGING).filter_map(|f| Some((*f, map.get(*f)?.clone()))).collect();
                    if !fields.is_empty() {
                        let kind = if fields.contains_key("amount") { Kind::Transaction } else { Kind::Account };
                        out.push(Object { kind, id: id.to_string(), listed_under: None, fields });
                    }
                }
                map.values().for_each(|v| walk(v, depth + 1, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, depth + 1, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, 0, &mut out);
    out
}

/// What one invariant concluded.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// How many observations it judged.
    pub judged: usize,
    /// The ones that break it.
    pub found: Vec<Failure>,
    /// What it weighed none of, and why, when the record held the observations but not what
    /// tells them apart (issue 51: said in every report, never a silent pass).
    pub unweighed: Vec<String>,
}

impl From<(usize, Vec<Failure>)> for Verdict {
    fn from((judged, found): (usize, Vec<Failure>)) -> Self {
        Self { judged, found, unweighed: Vec::new() }
    }
}

/// The finding `problem`, resting on `answers` and `deliveries` (by `seq`).
pub(crate) fn finding(problem: Problem, answers: &[u64], deliveries: &[u64]) -> Failure {
    let failure = answers.iter().fold(Failure::from(problem), |f, a| f.on_answer(Some(*a)));
    deliveries.iter().fold(failure, |f, d| f.on_delivery(*d))
}

/// Most findings an invariant keeps (the runner shows the first ones).
pub(crate) const MAX_FINDINGS: usize = 20;

#[cfg(test)]
pub(crate) mod tests;
