//! How long a case waits for a webhook event it expects. The spec fixes no delivery time
//! (§6.3, §8): a late event is not a violation, a missing one is. So a wait ends the moment its
//! event arrives, and otherwise lasts:
//!
//! - at least `--event-timeout` (the floor);
//! - while no delivery at all has arrived in this run, as long as the wait for the first one
//!   ([`FIRST_WAIT_FACTOR`] + 1 times the floor from the preflight, which awaits it beside the
//!   cases): nothing is known yet of the target's latency;
//! - at least twice the longest delivery latency observed in this run, plus a second (the
//!   latency is learned from the waits that succeeded: from the triggering request or driver
//!   call to the arrival);
//! - longer while the receiver keeps getting this run's deliveries (a busy queue): until
//!   `--event-timeout` has passed without any;
//! - never longer than [`MAX_WAIT`] (or `--event-timeout`, if larger) in all.
//!
//! Waits that ran out are remembered: an event that arrives afterwards is reported as late (a
//! note), not counted as missing twice.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cap of one wait, whatever the observed latency or the queue.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(120);
/// The run's first delivery is awaited this many times `--event-timeout` longer than a wait's
/// floor: nothing is learned yet about the target's latency.
pub(crate) const FIRST_WAIT_FACTOR: u32 = 3;

#[derive(Default)]
struct State {
    /// Longest time a successful wait took.
    latency: Option<Duration>,
    /// Successful waits.
    observed: u32,
    /// When a waiter last saw a delivery arrive.
    last_arrival: Option<Instant>,
    /// Waits that ran out: connection id, and how many of its deliveries had arrived then.
    ran_out: Vec<(String, usize)>,
    /// Until when the run's first delivery is awaited.
    first_until: Option<Instant>,
}

/// The run's waiting policy and what it has learned; shared by every wait of the run.
#[derive(Default)]
pub(crate) struct Patience {
    state: Mutex<State>,
}

impl Patience {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits last at least until `until` while no delivery has arrived in the run (`quiet`).
    pub(crate) fn expect_first(&self, until: Instant) {
        self.state().first_until = Some(until);
    }

    /// When a wait begun at `started` with floor `floor` (`--event-timeout`) gives up, as of now;
    /// `quiet`: no delivery has arrived in the run yet.
    pub(crate) fn deadline(&self, started: Instant, floor: Duration, quiet: bool) -> Instant {
        let state = self.state();
        let learned = state.latency.map_or(Duration::ZERO, |l| l * 2 + Duration::from_secs(1));
        let mut deadline = started + floor.max(learned);
        if let Some(last) = state.last_arrival {
            deadline = deadline.max(last + floor);
        }
        let deadline = deadline.min(started + MAX_WAIT.max(floor));
        match state.first_until {
            Some(first) if quiet => deadline.max(first),
            _ => deadline,
        }
    }

    /// A waiter saw a delivery arrive.
    pub(crate) fn arrival(&self) {
        self.state().last_arrival = Some(Instant::now());
    }

    /// A wait succeeded after `took`.
    pub(crate) fn succeeded(&self, took: Duration) {
        let mut state = self.state();
        state.latency = Some(state.latency.map_or(took, |l| l.max(took)));
        state.observed += 1;
    }

    /// A wait for deliveries about `connection_id` ran out with `seen` of them arrived.
    pub(crate) fn ran_out(&self, connection_id: &str, seen: usize) {
        let mut state = self.state();
        if state.ran_out.len() < 1000 {
            state.ran_out.push((connection_id.to_string(), seen));
        }
    }

    /// For the message of a case whose event never came: how long it waited, and what latency
    /// this run has shown.
    pub(crate) fn describe(&self, waited: Duration) -> String {
        let state = self.state();
        let latency = match state.latency {
            Some(l) => format!(
                "the longest delivery latency observed in this run is {:.1}s over {}",
                l.as_secs_f64(),
                crate::harness::vocab::outcome::count(state.observed as usize, "delivery", "deliveries")
            ),
            None => "no delivery latency was observed in this run".to_string(),
        };
        format!("waited {:.1}s; {latency}", waited.as_secs_f64())
    }

    /// After the run: the waits that ran out whose connection got deliveries afterwards (late,
    /// not missing), given how many deliveries each connection has now.
    pub(crate) fn late_note(&self, count_now: impl Fn(&str) -> usize) -> Option<String> {
        let state = self.state();
        let late: Vec<&str> =
            state.ran_out.iter().filter(|(id, seen)| count_now(id) > *seen).map(|(id, _)| id.as_str()).collect();
        (!late.is_empty()).then(|| {
            format!(
                "{} ran out before deliveries that came later (late, not missing; the spec fixes no delivery \
                 time, §6.3): consider a larger --event-timeout",
                crate::harness::vocab::outcome::count(late.len(), "wait", "waits")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_secs(5);

    #[test]
    fn a_wait_lasts_the_floor_until_latency_is_learned() {
        let p = Patience::default();
        let now = Instant::now();
        assert_eq!(p.deadline(now, FLOOR, false), now + FLOOR);
        p.succeeded(Duration::from_secs(10));
        assert_eq!(p.deadline(now, FLOOR, false), now + Duration::from_secs(21));
        assert!(p.describe(Duration::from_secs(21)).contains("10.0s over 1 delivery"));
    }

    #[test]
    fn until_the_first_delivery_a_wait_lasts_as_long_as_the_first_one() {
        let p = Patience::default();
        let now = Instant::now();
        p.expect_first(now + FLOOR * 4);
        assert_eq!(p.deadline(now, FLOOR, true), now + FLOOR * 4);
        assert_eq!(p.deadline(now, FLOOR, false), now + FLOOR, "once any delivery arrived, the floor");
    }

    #[test]
    fn a_busy_queue_extends_a_wait_up_to_the_cap() {
        let p = Patience::default();
        let started = Instant::now() - Duration::from_secs(30);
        p.arrival();
        let deadline = p.deadline(started, FLOOR, false);
        assert!(deadline > Instant::now() + Duration::from_secs(4), "extended past the floor");
        let long_ago = Instant::now() - MAX_WAIT;
        assert_eq!(p.deadline(long_ago, FLOOR, false), long_ago + MAX_WAIT);
    }

    #[test]
    fn deliveries_after_a_wait_ran_out_are_late() {
        let p = Patience::default();
        p.ran_out("conn_a", 1);
        p.ran_out("conn_b", 2);
        assert_eq!(p.late_note(|_| 2).as_deref().map(|n| n.starts_with("1 wait ran out")), Some(true));
        assert_eq!(p.late_note(|id| if id == "conn_a" { 1 } else { 2 }), None);
    }
}
