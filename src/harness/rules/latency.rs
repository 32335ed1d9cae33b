//! What an implementer tunes: how long the target took to answer (API latency) and how late its
//! webhooks came (delivery latency: from the moment the harness sent the triggering request or
//! started the driver call, to the delivery's arrival). Neither is judged (§6.3 and §8 fix no
//! times); both are summarised in every report. Samples are bounded, so a long run's memory is.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most samples kept per kind; past it, new ones replace old ones (round robin).
const MAX_SAMPLES: usize = 200_000;
/// Most trigger times kept per connection (a connection sees a handful of actions).
const MAX_TRIGGERS: usize = 64;

/// Latencies observed during one run.
#[derive(Default)]
pub(crate) struct Latency {
    api: Mutex<Samples>,
    webhooks: Mutex<Samples>,
    /// When something that may make the target emit an event for a connection was started.
    triggers: Mutex<HashMap<String, Vec<Instant>>>,
    /// Every webhook delivery that reached the receiver (kept or refused).
    deliveries: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Samples {
    micros: Vec<u64>,
    seen: usize,
}

impl Samples {
    fn push(&mut self, d: Duration) {
        let v = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if self.micros.len() < MAX_SAMPLES {
            self.micros.push(v);
        } else {
            self.micros[self.seen % MAX_SAMPLES] = v;
        }
        self.seen += 1;
    }

    fn stats(&self) -> Option<Stats> {
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let at = |q: f64| {
            let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[i] as f64 / 1000.0
        };
        (!sorted.is_empty()).then(|| Stats { count: self.seen, median_ms: at(0.5), p95_ms: at(0.95), max_ms: at(1.0) })
    }
}

/// Count, median, 95th percentile and maximum, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub count: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
}

impl Stats {
    /// `412 samples, median 3 ms, p95 12 ms, max 40 ms`.
    pub fn line(&self) -> String {
        format!(
            "{} samples, median {}, p95 {}, max {}",
            self.count,
            ms(self.median_ms),
            ms(self.p95_ms),
            ms(self.max_ms)
        )
    }
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{v:.1} ms")
    }
}

/// The run's latencies, for the reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub api: Option<Stats>,
    pub webhooks: Option<Stats>,
    /// API requests the run sent (each retry counts), and webhook deliveries it received: what
    /// a run costs a target (a rate limit counts requests).
    pub requests: usize,
    pub deliveries: usize,
}

impl Latency {
    /// One answer of the target, from sending the request to reading the whole body.
    pub(crate) fn answered(&self, took: Duration) {
        self.api.lock().unwrap_or_else(|e| e.into_inner()).push(took);
    }

    /// Something that may make the target emit events for `connection` started at `at`.
    pub(crate) fn triggered(&self, connection: &str, at: Instant) {
        let mut triggers = self.triggers.lock().unwrap_or_else(|e| e.into_inner());
        if triggers.len() >= MAX_SAMPLES && !triggers.contains_key(connection) {
            return;
        }
        let times = triggers.entry(connection.to_string()).or_default();
        if times.len() >= MAX_TRIGGERS {
            times.remove(0);
        }
        times.push(at);
    }

    /// A delivery about `connection` arrived at `at`: its latency is from the latest trigger
    /// before it. Deliveries with no known trigger (another run's, a retry of an old one) are
    /// not counted.
    pub(crate) fn arrived(&self, connection: Option<&str>, at: Instant) {
        self.deliveries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(connection) = connection else { return };
        let trigger = {
            let triggers = self.triggers.lock().unwrap_or_else(|e| e.into_inner());
            triggers.get(connection).and_then(|t| t.iter().rev().find(|t| **t <= at).copied())
        };
        if let Some(trigger) = trigger {
            self.webhooks.lock().unwrap_or_else(|e| e.into_inner()).push(at - trigger);
        }
    }

    pub(crate) fn summary(&self) -> Summary {
        let api = self.api.lock().unwrap_or_else(|e| e.into_inner());
        Summary {
            api: api.stats(),
            webhooks: self.webhooks.lock().unwrap_or_else(|e| e.into_inner()).stats(),
            requests: api.seen,
            deliveries: self.deliveries.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let l = Latency::default();
        for i in 1..=100 {
            l.answered(Duration::from_millis(i));
        }
        let s = l.summary().api.unwrap();
        assert_eq!((s.count, s.median_ms, s.p95_ms, s.max_ms), (100, 50.0, 95.0, 100.0));
        assert_eq!(l.summary().webhooks, None);
    }

    #[test]
    fn a_delivery_counts_from_the_latest_trigger_before_it() {
        let l = Latency::default();
        let t0 = Instant::now();
        l.triggered("conn_1", t0);
        l.triggered("conn_1", t0 + Duration::from_millis(100));
        l.arrived(Some("conn_1"), t0 + Duration::from_millis(130));
        l.arrived(Some("conn_2"), t0 + Duration::from_millis(130));
        l.arrived(None, t0);
        let s = l.summary().webhooks.unwrap();
        assert_eq!((s.count, s.max_ms), (1, 30.0));
        assert_eq!(l.summary().deliveries, 3, "every delivery counts, with a trigger or not");
        assert_eq!(s.line(), "1 samples, median 30.0 ms, p95 30.0 ms, max 30.0 ms");
    }
}
