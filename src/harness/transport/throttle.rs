//! Pacing of the requests sent to the target. Slow, refused or dropped is never a violation
//! (§6.3 and §8 leave timing, retries and limits open), so this module decides how hard to push
//! and when to stop pushing:
//!
//! - **Adaptive load** (as TCP does): the requests in flight are bounded by a window that grows
//!   by one per window's worth of answers (additive increase) and halves on a timeout, a refused
//!   or reset connection, a 429 or a 503 (multiplicative decrease), never above `--concurrency`.
//!   A weak server (a small accept queue, no keep-alive) thus gets the parallelism it takes.
//! - **Spacing**: `--rate-limit` spaces requests (a token bucket one token deep).
//! - **Refusals** (429, 503): the refused request keeps its place in the window and is retried
//!   after the `Retry-After` asked, or after a growing backoff, while every other request pauses
//!   as long; within [`RETRY_BUDGET`] per request. An endpoint that has answered nothing but
//!   refusals for [`GIVE_UP_AFTER`] is given up: its remaining requests are not sent, and their
//!   cases are ignored. A target that refuses everything is given up on as a whole.
//! - **Transport failures** of idempotent reads are retried within a run-wide budget
//!   ([`RUN_RETRIES`]); see `http::Api::exchange`.
//!
//! One note sums up the trouble for the report ([`Throttle::note`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Most time one request spends waiting to be retried after refusals.
pub(crate) const RETRY_BUDGET: Duration = Duration::from_secs(30);
/// Longest single pause, whatever `Retry-After` asks.
const MAX_PAUSE: Duration = Duration::from_secs(8);
/// An endpoint (or the whole target) that has answered only refusals for this long, at least
/// `GIVE_UP_COUNT` times, is given up.
pub(crate) const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
const GIVE_UP_COUNT: u32 = 6;
/// Timeouts in a row, with no answer between, that trip an endpoint's breaker: its remaining
/// requests are not sent (a stalled or trickling endpoint would otherwise hold every case that
/// reads it for a request timeout per try).
pub(crate) const TIMEOUTS_TO_TRIP: u32 = 3;
/// Transport retries (timeouts, refused or reset connections) the whole run may spend.
pub(crate) const RUN_RETRIES: u64 = 200;
/// The window a run starts with (below `--concurrency` when that is larger).
const FIRST_WINDOW: f64 = 4.0;
/// Two decreases of the window are this far apart at least: one burst of trouble is one signal.
const CUT_SPACING: Duration = Duration::from_millis(500);

/// The window of requests in flight.
struct Window {
    limit: f64,
    in_flight: usize,
    ceiling: usize,
    last_cut: Option<Instant>,
}

/// Refusals in a row, with no other answer between them (per endpoint, and run-wide).
#[derive(Clone, Copy, Default)]
struct Streak {
    began: Option<Instant>,
    count: u32,
    given_up: bool,
}

impl Streak {
    /// One more refusal; whether the streak is now spent.
    fn refused(&mut self) -> bool {
        let began = *self.began.get_or_insert_with(Instant::now);
        self.count += 1;
        if self.count >= GIVE_UP_COUNT && began.elapsed() >= GIVE_UP_AFTER {
            self.given_up = true;
        }
        self.given_up
    }

    fn answered(&mut self) {
        if !self.given_up {
            *self = Self::default();
        }
    }
}

/// What went wrong on the way, for the report's note.
#[derive(Default)]
struct Trouble {
    timeouts: u64,
    connections: u64,
    refused_429: u64,
    refused_503: u64,
    given_up: u64,
    /// Requests in flight when the first trouble came.
    began_at: Option<usize>,
    /// The smallest window the run came down to.
    lowest: Option<usize>,
    /// The longest `Retry-After` asked, in seconds.
    longest_pause: f64,
}

/// What a transport failure was, for the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    Timeout,
    /// Refused, reset or closed before an answer.
    Connection,
}

/// What to do with a refused request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Retry after this pause (its permit kept).
    Retry(Duration),
    /// Stop: why (the request is not answered, its case is ignored).
    GiveUp(String),
}

/// The run's pacing, shared by every request.
pub(crate) struct Throttle {
    /// Seconds between two requests; zero: unlimited.
    spacing: Duration,
    /// The earliest moment the next request may go: the next token, or the end of a pause.
    next: Mutex<Option<Instant>>,
    window: Mutex<Window>,
    freed: Notify,
    trouble: Mutex<Trouble>,
    /// Refusal streaks by endpoint (`GET /v1/accounts/{id}`), and of the whole target (`""`).
    streaks: Mutex<HashMap<String, Streak>>,
    /// Timeouts in a row by endpoint; at [`TIMEOUTS_TO_TRIP`] the endpoint is given up.
    stalls: Mutex<HashMap<String, u32>>,
    retries_left: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(0.0)
    }
}

/// A place in the window; given back when dropped.
pub(crate) struct Permit<'a> {
    throttle: &'a Throttle,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut w = self.throttle.window.lock().unwrap_or_else(|e| e.into_inner());
        w.in_flight = w.in_flight.saturating_sub(1);
        drop(w);
        self.throttle.freed.notify_waiters();
    }
}

impl Throttle {
    /// `rate` requests per second at most (zero or less, or not finite: unlimited), and the
    /// default ceiling of 8 requests in flight.
    pub(crate) fn new(rate: f64) -> Self {
        let spacing = if rate.is_finite() && rate > 0.0 {
            Duration::from_secs_f64(1.0 / rate.min(10_000.0))
        } else {
            Duration::ZERO
        };
        Self {
            spacing,
            next: Mutex::default(),
            window: Mutex::new(Window { limit: FIRST_WINDOW, in_flight: 0, ceiling: 8, last_cut: None }),
            freed: Notify::new(),
            trouble: Mutex::default(),
            streaks: Mutex::default(),
            stalls: Mutex::default(),
            retries_left: AtomicU64::new(RUN_RETRIES),
        }
    }

    /// At most `ceiling` requests in flight (`--concurrency`; at least one).
    pub(crate) fn with_ceiling(self, ceiling: usize) -> Self {
        {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.ceiling = ceiling.max(1);
            w.limit = FIRST_WINDOW.min(w.ceiling as f64);
        }
        self
    }

    /// Waits for a place in the window, then for this request's turn.
    pub(crate) async fn acquire(&self) -> Permit<'_> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
                if (w.in_flight as f64) < w.limit.floor().max(1.0) {
                    w.in_flight += 1;
                    break;
                }
            }
            freed.await;
        }
        let permit = Permit { throttle: self };
        self.turn().await;
        permit
    }

    /// Waits for the next token, or the end of a pause.
    pub(crate) async fn turn(&self) {
        let turn = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let turn = next.map_or(now, |n| n.max(now));
            *next = Some(turn + self.spacing);
            turn
        };
        tokio::time::sleep_until(turn.into()).await;
    }

    /// An answer that is not a refusal: the window grows (by one per window's worth).
    pub(crate) fn answered(&self, endpoint: &str) {
        {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.limit = (w.limit + 1.0 / w.limit.max(1.0)).min(w.ceiling as f64);
        }
        self.freed.notify_waiters();
        let mut streaks = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        for key in ["", endpoint] {
            if let Some(s) = streaks.get_mut(key) {
                s.answered();
            }
        }
        drop(streaks);
        let mut stalls = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        if stalls.get(endpoint).is_some_and(|n| *n < TIMEOUTS_TO_TRIP) {
            stalls.remove(endpoint);
        }
    }

    /// Trouble: the window halves (once per burst).
    fn congestion(&self) {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let in_flight = w.in_flight;
        if w.last_cut.is_some_and(|t| t.elapsed() < CUT_SPACING) {
            return;
        }
        w.last_cut = Some(Instant::now());
        w.limit = (w.limit / 2.0).max(1.0);
        let limit = w.limit.floor() as usize;
        drop(w);
        let mut t = self.trouble.lock().unwrap_or_else(|e| e.into_inner());
        t.began_at.get_or_insert(in_flight);
        t.lowest = Some(t.lowest.map_or(limit, |l| l.min(limit)));
    }

    /// Why requests to `endpoint` are not sent any more, if they are not.
    pub(crate) fn given_up(&self, endpoint: &str) -> Option<String> {
        if let Some(why) = self.tripped(endpoint) {
            self.trouble.lock().unwrap_or_else(|e| e.into_inner()).given_up += 1;
            return Some(format!("not sent: {why}"));
        }
        let streaks = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        let gave_up = |key: &str| streaks.get(key).is_some_and(|s| s.given_up);
        let whom = if gave_up("") {
            "the target".to_string()
        } else if gave_up(endpoint) {
            endpoint.to_string()
        } else {
            return None;
        };
        drop(streaks);
        self.trouble.lock().unwrap_or_else(|e| e.into_inner()).given_up += 1;
        Some(format!(
            "not sent: {whom} answered only 429/503 (too busy) for over {}s, so the harness stopped sending to it \
             (§8 leaves rate limits open; see --rate-limit and --concurrency)",
            GIVE_UP_AFTER.as_secs()
        ))
    }

    /// A refusal (`status` 429 or 503, with its `Retry-After`) of a request to `endpoint`, whose
    /// retries so far waited `spent` (updated here).
    pub(crate) fn refused(
        &self,
        endpoint: &str,
        status: u16,
        retry_after: Option<Duration>,
        spent: &mut Duration,
    ) -> Refusal {
        {
            let mut t = self.trouble.lock().unwrap_or_else(|e| e.into_inner());
            if status == 429 {
                t.refused_429 += 1;
            } else {
                t.refused_503 += 1;
            }
            if let Some(r) = retry_after {
                t.longest_pause = t.longest_pause.max(r.as_secs_f64());
            }
        }
        self.congestion();
        let spent_streak = {
            let mut streaks = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
            let run = streaks.entry(String::new()).or_default().refused();
            let this = streaks.entry(endpoint.to_string()).or_default().refused();
            run || this
        };
        if spent_streak {
            return Refusal::GiveUp(self.given_up(endpoint).unwrap_or_default());
        }
        // No usable Retry-After: a backoff that doubles with each refusal of this request.
        let backoff = (*spent).max(Duration::from_millis(500));
        let pause = retry_after.unwrap_or(backoff).clamp(Duration::from_millis(50), MAX_PAUSE);
        if *spent + pause > RETRY_BUDGET {
            self.trouble.lock().unwrap_or_else(|e| e.into_inner()).given_up += 1;
            return Refusal::GiveUp(format!(
                "the target still refused it (status {status}) after {:.0}s of retries as asked (§8 leaves rate \
                 limits open; see --rate-limit and --concurrency)",
                spent.as_secs_f64()
            ));
        }
        *spent += pause;
        // Everyone pauses: the limit is the target's, for all the run's requests alike.
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let until = Instant::now() + pause;
        *next = Some(next.map_or(until, |n| n.max(until)));
        Refusal::Retry(pause)
    }

    /// Why `endpoint`'s breaker tripped, if it did: it timed out again and again.
    pub(crate) fn tripped(&self, endpoint: &str) -> Option<String> {
        let stalls = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        stalls.get(endpoint).is_some_and(|n| *n >= TIMEOUTS_TO_TRIP).then(|| {
            format!(
                "{endpoint} timed out {TIMEOUTS_TO_TRIP} times in a row with no answer between, so the harness stopped \
                 sending to it (§8 fixes no time; see --request-timeout)"
            )
        })
    }

    /// A transport failure of a request to `endpoint`; whether the run's retry budget allows
    /// one more try (never once the endpoint's breaker tripped).
    pub(crate) fn failed(&self, endpoint: &str, failure: Failure) -> bool {
        {
            let mut t = self.trouble.lock().unwrap_or_else(|e| e.into_inner());
            match failure {
                Failure::Timeout => t.timeouts += 1,
                Failure::Connection => t.connections += 1,
            }
        }
        if failure == Failure::Timeout {
            let mut stalls = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
            let n = stalls.entry(endpoint.to_string()).or_default();
            *n += 1;
            if *n >= TIMEOUTS_TO_TRIP {
                return false;
            }
        }
        self.congestion();
        self.retries_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// A request not answered in the end (its case is ignored).
    pub(crate) fn unanswered(&self) {
        self.trouble.lock().unwrap_or_else(|e| e.into_inner()).given_up += 1;
    }

    /// For the report: one robustness note summing up the transport trouble, if there was any.
    pub(crate) fn note(&self) -> Option<String> {
        let t = self.trouble.lock().unwrap_or_else(|e| e.into_inner());
        if t.timeouts + t.connections + t.refused_429 + t.refused_503 == 0 {
            return None;
        }
        let ceiling = self.window.lock().unwrap_or_else(|e| e.into_inner()).ceiling;
        let mut parts = Vec::new();
        for (n, what) in [
            (t.timeouts, "timeouts"),
            (t.connections, "refused, reset or closed connections"),
            (t.refused_429, "answers 429"),
            (t.refused_503, "answers 503"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let lost = match t.given_up {
            0 => "every request was answered in the end".to_string(),
            n => format!(
                "{} stayed unanswered and their cases were ignored (run INCOMPLETE)",
                crate::harness::vocab::outcome::count(n as usize, "request", "requests")
            ),
        };
        let began = t.began_at.map_or(String::new(), |n| {
            format!("; it began with {} in flight", crate::harness::vocab::outcome::count(n, "request", "requests"))
        });
        let lowest = t.lowest.unwrap_or(ceiling).max(1);
        let mut flags = vec![format!("--concurrency {lowest}")];
        if t.refused_429 + t.refused_503 > 0 {
            flags.push("--rate-limit <requests per second>".into());
        }
        if t.timeouts > 0 {
            flags.push("--request-timeout <longer>".into());
        }
        Some(format!(
            "robustness: transport trouble, not violations (§8 leaves timing and rate limits open): {}{began}; the \
             harness lowered its requests in flight to {lowest} (of --concurrency {ceiling}) and retried; {lost}. \
             Flags that help: {}",
            parts.join(", "),
            flags.join(", ")
        ))
    }
}

/// The endpoint a request goes to, ids left out: `GET /v1/accounts/{id}/transactions`.
pub(crate) fn endpoint(method: &str, segments: &[&str]) -> String {
    const NAMES: [&str; 5] = ["v1", "connections", "accounts", "transactions", "widget"];
    let path: Vec<&str> = segments.iter().map(|s| if NAMES.contains(s) { s } else { "{id}" }).collect();
    format!("{method} /{}", path.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_and_retried_within_the_budget() {
        let t = Throttle::new(0.0);
        let mut spent = Duration::ZERO;
        let mut retries = 0;
        while let Refusal::Retry(_) = t.refused("GET /a", 429, Some(Duration::from_secs(1)), &mut spent) {
            retries += 1;
            t.answered("GET /b");
            t.answered("GET /a");
        }
        assert_eq!(retries, 30, "a steady 1 s Retry-After is outlasted for the budget");
        assert!(t.note().is_some_and(|n| n.contains("31 answers 429")));
        let mut spent = Duration::ZERO;
        assert_eq!(t.refused("GET /c", 503, None, &mut spent), Refusal::Retry(Duration::from_millis(500)));
        assert_eq!(t.refused("GET /c", 503, None, &mut spent), Refusal::Retry(Duration::from_millis(500)));
        assert_eq!(t.refused("GET /c", 503, None, &mut spent), Refusal::Retry(Duration::from_millis(1000)));
    }

    #[test]
    fn an_endpoint_that_keeps_timing_out_trips_its_breaker() {
        let t = Throttle::new(0.0);
        assert!(t.failed("GET /a", Failure::Timeout), "a retry");
        t.answered("GET /a");
        assert!(t.failed("GET /a", Failure::Timeout) && t.failed("GET /a", Failure::Timeout), "an answer reset it");
        assert!(!t.failed("GET /a", Failure::Timeout), "the third in a row trips it");
        t.answered("GET /a");
        assert!(t.given_up("GET /a").is_some_and(|why| why.contains("timed out 3 times")), "for the rest of the run");
        assert!(t.given_up("GET /b").is_none() && t.failed("GET /b", Failure::Connection));
    }

    #[test]
    fn an_endpoint_that_only_refuses_is_given_up() {
        let t = Throttle::new(0.0);
        t.streaks.lock().unwrap().insert(
            "GET /a".into(),
            Streak { began: Some(Instant::now() - GIVE_UP_AFTER), count: GIVE_UP_COUNT, given_up: false },
        );
        let gave_up = t.refused("GET /a", 429, None, &mut Duration::default());
        assert!(matches!(gave_up, Refusal::GiveUp(ref why) if why.contains("GET /a")), "{gave_up:?}");
        t.answered("GET /a");
        assert!(t.given_up("GET /a").is_some(), "given up for the rest of the run");
        assert!(t.given_up("GET /b").is_none());
        assert_eq!(endpoint("GET", &["v1", "accounts", "acc_1", "transactions"]), "GET /v1/accounts/{id}/transactions");
    }

    #[tokio::test]
    async fn the_window_halves_on_trouble_and_grows_on_answers() {
        let t = Throttle::new(0.0).with_ceiling(8);
        assert_eq!(t.window.lock().unwrap().limit, 4.0);
        for _ in 0..40 {
            t.answered("GET /a");
        }
        assert_eq!(t.window.lock().unwrap().limit, 8.0, "never above the ceiling");
        let permits = [t.acquire().await, t.acquire().await, t.acquire().await];
        assert!(t.failed("GET /t", Failure::Timeout));
        assert_eq!(t.window.lock().unwrap().limit, 4.0);
        assert!(t.note().is_some_and(|n| n.contains("1 timeouts") && n.contains("began with 3")), "{:?}", t.note());
        drop(permits);
        assert_eq!(t.window.lock().unwrap().in_flight, 0);
        let one = Throttle::new(0.0).with_ceiling(1);
        let _held = one.acquire().await;
        assert!(tokio::time::timeout(Duration::from_millis(50), one.acquire()).await.is_err(), "one at a time");
    }

    #[tokio::test]
    async fn a_rate_spaces_requests() {
        let t = Throttle::new(100.0);
        let started = Instant::now();
        for _ in 0..5 {
            drop(t.acquire().await);
        }
        assert!(started.elapsed() >= Duration::from_millis(40));
        assert_eq!(Throttle::new(f64::INFINITY).spacing, Duration::ZERO);
    }
}
