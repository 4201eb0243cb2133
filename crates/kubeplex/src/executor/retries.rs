//! Work tried again by key, each with its own backoff: what failed, when it is due again, and whether its
//! failure is worth a `warn` line (a [`LogThrottle`] per key: when its cause changes, and while it stays the
//! same once in [`LOG_AGAIN_AFTER`]); the rest of its failures are for `debug`.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::RetryBackoff;
use crate::core::LogThrottle;

/// While a key keeps failing for the same cause, how often that is worth a `warn` line again.
pub(crate) const LOG_AGAIN_AFTER: Duration = Duration::from_secs(600);

/// The keys whose work is to be tried again, each with what it will be tried with (`V`).
pub(crate) struct KeyedRetries<V> {
    keys: BTreeMap<String, Retrying<V>>,
    min: Duration,
    max: Duration,
}

/// One key whose work fails.
struct Retrying<V> {
    backoff: RetryBackoff,
    /// When it is tried again, with what (`None` once taken or superseded, until it fails again).
    due: Option<(Instant, V)>,
    /// Which of its failures are worth a `warn` line.
    logged: LogThrottle,
}

/// What to do about a failure: when it is tried again, and whether to log it at `warn`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Failed {
    pub(crate) retry_in: Duration,
    pub(crate) warn: bool,
}

impl<V> KeyedRetries<V> {
    /// Backoff from `min` doubling to `max` (jitter adds up to as much again).
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        let keys = BTreeMap::new();
        Self { keys, min, max }
    }

    /// The work of `key` failed for `cause`: it is due again, with `value`, after the key's next delay.
    pub(crate) fn failed(&mut self, key: &str, value: V, cause: &str) -> Failed {
        let (min, max) = (self.min, self.max);
        let retrying = self.keys.entry(key.to_owned()).or_insert_with(|| Retrying {
            backoff: RetryBackoff::new(min, max),
            due: None,
            logged: LogThrottle::new(LOG_AGAIN_AFTER),
        });
        let retry_in = retrying.backoff.next_delay();
        retrying.due = Some((Instant::now() + retry_in, value));
        let warn = retrying.logged.warn(cause);
        Failed { retry_in, warn }
    }

    /// The work of `key` succeeded, failed for good, or has no key any more: its backoff starts over.
    /// Returns whether one of its failures was logged at `warn`.
    pub(crate) fn ended(&mut self, key: &str) -> bool {
        let retrying = self.keys.remove(key);
        retrying.is_some_and(|r| r.logged.logged())
    }

    /// Newer work of `key` came: the try pending is dropped; the backoff stays.
    pub(crate) fn superseded(&mut self, key: &str) {
        if let Some(retrying) = self.keys.get_mut(key) {
            retrying.due = None;
        }
    }

    /// When the next try is due, if one is pending.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let due = self.keys.values().filter_map(|r| r.due.as_ref());
        due.map(|(at, _)| *at).min()
    }

    /// The tries due by now, taken (their backoff stays until their key's work ends).
    pub(crate) fn take_due(&mut self) -> Vec<(String, V)> {
        let now = Instant::now();
        let mut due = Vec::new();
        for (key, retrying) in &mut self.keys {
            if retrying.due.as_ref().is_some_and(|(at, _)| *at <= now)
                && let Some((_, value)) = retrying.due.take()
            {
                due.push((key.clone(), value));
            }
        }
        due
    }

    /// Whether a try of `key` is pending.
    #[cfg(test)]
    pub(crate) fn pending(&self, key: &str) -> bool {
        self.keys.get(key).is_some_and(|r| r.due.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(1);

    fn retries() -> KeyedRetries<u32> {
        KeyedRetries::new(MIN, Duration::from_secs(60))
    }

    #[tokio::test(start_paused = true)]
    async fn a_cause_is_worth_a_warn_when_it_changes_and_then_once_in_a_while() {
        let mut retries = retries();
        assert!(retries.failed("a", 1, "refused").warn);
        assert!(!retries.failed("a", 2, "refused").warn);
        assert!(retries.failed("a", 3, "timed out").warn);
        tokio::time::advance(LOG_AGAIN_AFTER - Duration::from_secs(1)).await;
        assert!(!retries.failed("a", 4, "timed out").warn);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(retries.failed("a", 5, "timed out").warn);
        // Another key has a say of its own.
        assert!(retries.failed("b", 1, "timed out").warn);
        assert!(retries.ended("a"));
        assert!(!retries.ended("a"), "ended twice");
    }

    #[tokio::test(start_paused = true)]
    async fn a_try_is_due_after_its_delay_with_its_latest_value_and_a_superseded_one_never() {
        let mut retries = retries();
        let first = retries.failed("a", 1, "refused").retry_in;
        assert!(first >= MIN && first <= 2 * MIN, "{first:?}");
        let second = retries.failed("a", 2, "refused").retry_in;
        assert!(second >= 2 * MIN, "the backoff grows: {second:?}");
        assert_eq!(retries.next_due(), Some(Instant::now() + second));
        assert!(retries.take_due().is_empty());
        tokio::time::advance(second).await;
        assert_eq!(retries.take_due(), [("a".to_owned(), 2)]);
        assert!(!retries.pending("a"));

        retries.failed("b", 7, "refused");
        retries.superseded("b");
        assert!(!retries.pending("b"));
        assert_eq!(retries.next_due(), None);
        // The backoff stayed: the next failure waits longer than the first delay's cap.
        assert!(retries.failed("b", 8, "refused").retry_in >= 2 * MIN);
        // A key that ended starts over.
        retries.ended("b");
        assert!(retries.failed("b", 9, "refused").retry_in <= 2 * MIN);
    }
}
