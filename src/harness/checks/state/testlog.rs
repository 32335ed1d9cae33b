//! A log of reads and deliveries for the state rules' unit tests.

use super::model::Model;
use crate::harness::rules::delivery::Delivery;
use crate::harness::transport::answers::{Answer, Auth, Sent};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads one after another, 10 ms apart (each answered 1 ms after it was sent), each with the
/// first client's key.
pub(super) struct Log {
    start: Instant,
    pub(super) answers: Vec<Arc<Answer>>,
}

impl Log {
    pub(super) fn new() -> Self {
        Self { start: Instant::now(), answers: Vec::new() }
    }

    pub(super) fn at(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }

    pub(super) fn read(&mut self, path: &str, query: &[(&str, &str)], body: Value) {
        self.exchange("GET", path, query, body);
    }

    /// A creation (§4.1) answered with `body`.
    pub(super) fn create(&mut self, body: Value) {
        self.exchange("POST", "v1/connections", &[], body);
    }

    fn exchange(&mut self, method: &str, path: &str, query: &[(&str, &str)], body: Value) {
        let n = self.answers.len() as u64;
        let request = format!("{method} /{path}");
        self.answers.push(Arc::new(Answer {
            seq: n,
            sent: Sent { method: method.into(), url: request.clone(), auth: Auth::Primary, request },
            segments: path.split('/').map(str::to_string).collect(),
            query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            status: 200,
            body: Some(body.to_string()),
            content_type: None,
            excerpt: None,
            sent_at: self.at(10 * n),
            answered_at: self.at(10 * n + 1),
            har: None,
            coding: Default::default(),
            revealed: Vec::new(),
            tokens: Vec::new(),
        }));
    }

    pub(super) fn page(&mut self, account: &str, items: Value) {
        self.read(&format!("v1/accounts/{account}/transactions"), &[], json!({"data": items, "has_more": false}));
    }

    pub(super) fn model(&self, events: &[(u64, Value)]) -> Model {
        let deliveries: Vec<(Instant, Delivery)> =
            events.iter().enumerate().map(|(i, (ms, b))| (self.at(*ms), Delivery::new(i as u64, b.clone()))).collect();
        let mut observed = crate::harness::checks::state::Observed::default();
        crate::harness::transport::parsed::reads_of(&self.answers).for_each(|read| observed.add(&read));
        Model::of(&std::sync::Arc::new(observed), &deliveries)
    }
}

pub(super) fn txn(id: &str, amount: f64) -> Value {
    json!({"id": id, "accountId": "acc_1", "amount": amount})
}

pub(super) fn event(kind: &str, data: Value) -> Value {
    json!({"id": "evt_1", "type": kind, "data": data})
}
