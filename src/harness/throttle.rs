//! Pacing of the requests sent to the target. §8 leaves rate limits open, so being refused for
//! going too fast is never a violation: `--rate-limit` spaces requests (a token bucket refilled
//! at that rate, one token deep), and a 429, or a 503 with `Retry-After`, pauses every request
//! of the run for the time asked and retries, within [`RETRY_BUDGET`] per request: long enough
//! to outlast a steady limit shared by many concurrent cases. A target that has refused every
//! request for a whole budget is not waited for again: later refusals are answers, so a run
//! against a target that only says 429 ends in minutes, not hours.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most time one request spends waiting to be retried.
pub const RETRY_BUDGET: Duration = Duration::from_secs(60);
/// Longest single pause, whatever `Retry-After` asks.
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The run's pacing, shared by every request.
#[derive(Default)]
pub struct Throttle {
    /// Seconds between two requests; zero: unlimited.
    spacing: Duration,
    /// The earliest moment the next request may go: the next token, or the end of a pause.
    next: Mutex<Option<Instant>>,
    refused: AtomicU64,
    /// When the current run of refusals began (no other answer since); `None`: the last answer
    /// was not a refusal.
    streak: Mutex<Option<Instant>>,
}

impl Throttle {
    /// `rate` requests per second at most (zero or less, or not finite: unlimited).
    pub fn new(rate: f64) -> Self {
        let spacing = if rate.is_finite() && rate > 0.0 {
            Duration::from_secs_f64(1.0 / rate.min(10_000.0))
        } else {
            Duration::ZERO
        };
        Self { spacing, ..Self::default() }
    }

    /// Waits for this request's turn.
    pub async fn acquire(&self) {
        let turn = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let turn = next.map_or(now, |n| n.max(now));
            *next = Some(turn + self.spacing);
            turn
        };
        tokio::time::sleep_until(turn.into()).await;
    }

    /// A refusal for going too fast (`status`, and its `Retry-After` in seconds): counts it and
    /// returns how long to pause before retrying, or `None` when `spent` (this request's waits so
    /// far, updated here) would exceed the budget.
    pub fn refused(&self, status: u16, retry_after: Option<f64>, spent: &mut Duration) -> Option<Duration> {
        if status == 429 {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        let began = *self.streak.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Instant::now);
        if began.elapsed() > RETRY_BUDGET {
            return None;
        }
        let asked = retry_after.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64);
        let pause = asked.unwrap_or(Duration::from_millis(500)).clamp(Duration::from_millis(50), MAX_PAUSE);
        if *spent + pause > RETRY_BUDGET {
            return None;
        }
        *spent += pause;
        // Everyone pauses: the limit is the target's, for all the run's requests alike.
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let until = Instant::now() + pause;
        *next = Some(next.map_or(until, |n| n.max(until)));
        Some(pause)
    }

    /// Any answer other than a refusal: the target lets requests through again.
    pub fn answered(&self) {
        *self.streak.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// For the report: how many 429 answers the run got (each retried), if any.
    pub fn note(&self) -> Option<String> {
        let n = self.refused.load(Ordering::Relaxed);
        (n > 0).then(|| {
            format!("the target answered 429 (too many requests) {n} time(s); each was retried as asked (§8 leaves rate limits open)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_and_retried_within_the_budget() {
        let t = Throttle::new(0.0);
        let mut spent = Duration::ZERO;
        let mut retries = 0;
        while t.refused(429, Some(1.0), &mut spent).is_some() {
            retries += 1;
        }
        assert_eq!(retries, 60, "a steady 1 s Retry-After is outlasted for a minute");
        assert!(t.note().is_some_and(|n| n.contains("61 time(s)")));
        assert_eq!(t.refused(503, Some(100.0), &mut Duration::default()), Some(MAX_PAUSE));
        assert_eq!(t.refused(503, Some(f64::NAN), &mut Duration::default()), Some(Duration::from_millis(500)));
    }

    #[test]
    fn a_target_that_only_refuses_is_given_up_on() {
        let t = Throttle::new(0.0);
        *t.streak.lock().unwrap() = Some(Instant::now() - RETRY_BUDGET - Duration::from_secs(1));
        assert_eq!(t.refused(429, Some(1.0), &mut Duration::default()), None);
        t.answered();
        assert!(t.refused(429, Some(1.0), &mut Duration::default()).is_some());
    }

    #[tokio::test]
    async fn a_rate_spaces_requests() {
        let t = Throttle::new(100.0);
        let started = Instant::now();
        for _ in 0..5 {
            t.acquire().await;
        }
        assert!(started.elapsed() >= Duration::from_millis(40));
        assert_eq!(Throttle::new(f64::INFINITY).spacing, Duration::ZERO);
    }
}
