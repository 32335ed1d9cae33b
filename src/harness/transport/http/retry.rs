//! What a request that got no (whole) answer is worth: sent again, paused, or left unanswered
//! (its case ignored, never failed: §8 leaves timing open).

use crate::harness::vocab::outcome::Stop;
use std::time::Duration;

/// Most tries of an idempotent read that gets no answer.
const MAX_TRIES: u32 = 3;

/// Most times a read is sent again at once, on a new connection, because its connection closed
/// before any byte of an answer (an idle close, [`closed_unanswered`]); past them it counts as
/// unanswered.
pub(super) const IDLE_RESENDS: u32 = 2;

/// Whether `error` says the connection closed (or was reset) before any byte of an answer came:
/// what a server's idle close looks like to a request sent on it. Not a timeout, not a refused
/// connection.
pub(super) fn closed_unanswered(error: &reqwest::Error) -> bool {
    if error.is_timeout() || error.is_connect() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
            if matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof) {
                return true;
            }
        }
        // hyper's IncompleteMessage: the connection ended before a response began.
        if e.to_string().contains("connection closed before message completed") {
            return true;
        }
        cause = e.source();
    }
    false
}

/// After try number `tries` of `request` got no (whole) answer (`error`, after `took`): the
/// pause before the next try, or why the request stays unanswered (its case is ignored). Only an
/// idempotent read is tried again, within the run's budget ([`crate::harness::transport::throttle::RUN_RETRIES`]).
pub(super) fn unanswered(
    throttle: &crate::harness::transport::throttle::Throttle,
    endpoint: &str,
    request: &str,
    error: &reqwest::Error,
    idempotent: bool,
    tries: u32,
    took: Duration,
) -> Result<Duration, Stop> {
    use crate::harness::transport::throttle::Failure;
    let failure = if error.is_timeout() { Failure::Timeout } else { Failure::Connection };
    let budget = throttle.failed(endpoint, failure);
    if idempotent && tries < MAX_TRIES && budget {
        return Ok(Duration::from_millis(500) * 2u32.pow(tries - 1));
    }
    throttle.unanswered();
    let why = if let Some(tripped) = throttle.tripped(endpoint) {
        tripped
    } else if !idempotent {
        "not retried: it is not idempotent".to_string()
    } else if tries < MAX_TRIES {
        "not retried: the run's retry budget is spent".to_string()
    } else {
        format!("{tries} tries")
    };
    Err(Stop::transport(format!(
        "not judged: the target did not answer {request} in {:.1} s ({}; {why}); transport trouble is not a \
         violation (§8), see the robustness note",
        took.as_secs_f64().max(0.0),
        transport_error(error)
    )))
}

/// Longest wait a `Retry-After` buys.
pub(super) const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// The wait a `Retry-After` value asks for, in seconds (the HTTP-date form is not honoured):
/// anything that is not a finite number (`NaN`, `inf`) is ignored, and the wait is kept
/// between 50 ms and [`MAX_RETRY_WAIT`].
pub(super) fn retry_wait(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite())?;
    let seconds = seconds.clamp(0.05, MAX_RETRY_WAIT.as_secs_f64());
    Duration::try_from_secs_f64(seconds).ok()
}

pub(super) fn transport_error(e: &reqwest::Error) -> String {
    crate::harness::transport::reach::network_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_defensively() {
        for hostile in ["NaN", "inf", "-inf", "1e400", "abc", ""] {
            assert!(retry_wait(hostile).is_none_or(|w| w <= MAX_RETRY_WAIT), "{hostile}");
        }
        assert_eq!(retry_wait("-5"), Some(Duration::from_millis(50)));
        assert_eq!(retry_wait("99999999999"), Some(MAX_RETRY_WAIT));
    }
}
