//! The run's answers read once: each 2xx answer of an endpoint with rules (§4), its body parsed
//! into JSON a single time, for every consumer: the response checks
//! (`checks::judge_responses`), the state model (`checks::state::Model`) and the report's trace
//! (`fixtures::recording`), so that they can never disagree on what an answer said or which
//! endpoint it came from.

use crate::harness::transport::answers::Answer;
use crate::harness::vocab::budget;
use serde_json::Value;
use std::sync::Arc;

/// The endpoints of §4 whose answers have rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/connections` (§4.1).
    CreateConnection,
    /// `GET /v1/connections/{connectionId}/accounts` (§4.2).
    ConnectionAccounts,
    /// `GET /v1/accounts/{accountId}` (§4.4).
    Account,
    /// `GET /v1/accounts/{accountId}/transactions` (§4.3).
    AccountTransactions,
}

impl Endpoint {
    /// The endpoint `method` and `segments` address, and the id in its path ("" for none).
    pub(crate) fn of<'a>(method: &str, segments: &'a [String]) -> Option<(Self, &'a str)> {
        let path: Vec<&str> = segments.iter().map(String::as_str).collect();
        match (method, path.as_slice()) {
            ("POST", ["v1", "connections"]) => Some((Self::CreateConnection, "")),
            ("GET", ["v1", "connections", _, "accounts"]) => Some((Self::ConnectionAccounts, &segments[2])),
            ("GET", ["v1", "accounts", _]) => Some((Self::Account, &segments[2])),
            ("GET", ["v1", "accounts", _, "transactions"]) => Some((Self::AccountTransactions, &segments[2])),
            _ => None,
        }
    }
}

/// One 2xx answer of an [`Endpoint`], its body parsed.
pub(crate) struct Read {
    pub answer: Arc<Answer>,
    pub endpoint: Endpoint,
    /// The id in the path: the connection (§4.2) or account (§4.3, §4.4) asked for; "" for §4.1.
    pub id: String,
    pub body: Value,
}

/// The reads among `answers`, in their order, each parsed as it is taken: one body at a time is
/// held whole (a hostile target's pages may be large), and each consumer keeps what it needs.
/// A body that is not JSON fails the flow that read it (`Exchange::success_json`); one too dense
/// to parse within the memory budget is not read.
pub(crate) fn reads_of(answers: &[Arc<Answer>]) -> impl Iterator<Item = Read> + '_ {
    answers.iter().filter_map(|answer| {
        let text = answer.body.as_deref()?;
        let (endpoint, id) = Endpoint::of(&answer.sent.method, &answer.segments)?;
        if budget::too_dense(text.as_bytes()).is_some() {
            return None;
        }
        let body = serde_json::from_str::<Value>(text).ok()?;
        Some(Read { answer: answer.clone(), endpoint, id: id.to_string(), body })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_recognised_by_method_and_path() {
        let path = |p: &str| p.split('/').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(Endpoint::of("POST", &path("v1/connections")).map(|e| e.0), Some(Endpoint::CreateConnection));
        let accounts = path("v1/connections/conn_1/accounts");
        assert_eq!(Endpoint::of("GET", &accounts), Some((Endpoint::ConnectionAccounts, "conn_1")));
        let txns = path("v1/accounts/acc_1/transactions");
        assert_eq!(Endpoint::of("GET", &txns), Some((Endpoint::AccountTransactions, "acc_1")));
        assert_eq!(Endpoint::of("GET", &path("v1/accounts/acc_1")).map(|e| e.0), Some(Endpoint::Account));
        assert_eq!(Endpoint::of("DELETE", &path("v1/accounts/acc_1")), None);
    }
}
