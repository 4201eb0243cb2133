//! The retry policy of watches: exponential with jitter, reset only by real progress.
//!
//! kube-runtime's `StreamBackoff` resets its backoff on every `Ok` item, and a watcher that retries emits
//! `Ok(Event::Init)` before each new list: a watch failing on connect, TLS, 401 or 403 would retry at the
//! initial delay forever. The watch task applies this policy itself instead, resetting only after a list
//! completed or an object arrived. The jitter (backon's: up to the current delay again) keeps the watches
//! to a returning cluster from reconnecting in lockstep.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The first retry delay of a failing watch.
pub(crate) const WATCH_RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest delay between two attempts of a failing watch (before jitter, which adds up to as much again).
pub(crate) const WATCH_RETRY_MAX: Duration = Duration::from_secs(8);

/// Exponential backoff with jitter from `min` doubling to `max`.
#[derive(Debug)]
pub(crate) struct RetryBackoff {
    builder: ExponentialBuilder,
    current: ExponentialBackoff,
}

impl RetryBackoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        let builder = ExponentialBuilder::default()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self {
            current: builder.build(),
            builder,
        }
    }

    /// The delay before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.current.next().unwrap_or(WATCH_RETRY_MAX)
    }

    /// Starts over from the first delay: call after real progress, not after a mere attempt.
    pub(crate) fn reset(&mut self) {
        self.current = self.builder.build();
    }
}

impl Default for RetryBackoff {
    fn default() -> Self {
        Self::new(WATCH_RETRY_MIN, WATCH_RETRY_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_jitter_up_to_the_cap_and_resets() {
        let mut backoff = RetryBackoff::new(Duration::from_millis(500), Duration::from_secs(4));
        let delays: Vec<Duration> = (0..8).map(|_| backoff.next_delay()).collect();
        // Each delay lies in [base, 2 × base): base 0.5, 1, 2, 4, 4, …
        let bases = [500, 1000, 2000, 4000, 4000, 4000, 4000, 4000].map(Duration::from_millis);
        for (delay, base) in delays.iter().zip(bases) {
            assert!(*delay >= base && *delay < base * 2, "{delays:?}");
        }
        // Jitter: eight draws are not all at the bottom of their ranges.
        assert!(delays.iter().zip(bases).any(|(d, b)| *d > b), "{delays:?}");
        backoff.reset();
        assert!(backoff.next_delay() < Duration::from_secs(1));
    }
}
