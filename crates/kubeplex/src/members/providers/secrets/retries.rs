//! The Secrets whose handling failed (a read, or a write of the finalizer: a conflict, a 403, an API server
//! down), each tried again with backoff and jitter. A failure that would otherwise wait for the Secret's next
//! change never does: a Secret left without its finalizer would let a member's credentials go before its
//! children.
//!
//! A failure is logged at `warn` when its cause changes, and while it stays the same only once in a while; the
//! backoff grows for as long as the Secret's handling fails, and starts over once it succeeds or the Secret
//! goes.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::executor::RetryBackoff;

/// The first delay before a Secret whose handling failed is handled again.
pub(super) const RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay before jitter, which adds up to as much again: two minutes at most.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(60);
/// While a Secret's handling keeps failing for the same cause, how often it is logged at `warn` again.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(600);

/// The Secrets to handle again, and how long each waits.
#[derive(Default)]
pub(super) struct Retries {
    secrets: BTreeMap<String, Retrying>,
}

/// One Secret whose handling fails.
struct Retrying {
    backoff: RetryBackoff,
    /// When it is handled again (`None` once taken, until it fails again).
    due: Option<Instant>,
    /// The last failure logged at `warn`, and when.
    logged: Option<(String, Instant)>,
}

/// What to do about a failure: when it is tried again, and whether to log it at `warn`.
pub(super) struct Failed {
    pub(super) retry_in: Duration,
    pub(super) warn: bool,
}

impl Retries {
    /// Handling `secret` failed with `failure`: it is handled again after a delay.
    pub(super) fn failed(&mut self, secret: &str, failure: &str) -> Failed {
        let retrying = self
            .secrets
            .entry(secret.to_owned())
            .or_insert_with(|| Retrying {
                backoff: RetryBackoff::new(RETRY_MIN, RETRY_MAX),
                due: None,
                logged: None,
            });
        let retry_in = retrying.backoff.next_delay();
        let now = Instant::now();
        retrying.due = Some(now + retry_in);
        let warn = match &retrying.logged {
            Some((logged, at)) => {
                logged != failure || now.saturating_duration_since(*at) >= LOG_AGAIN_AFTER
            }
            None => true,
        };
        if warn {
            retrying.logged = Some((failure.to_owned(), now));
        }
        Failed { retry_in, warn }
    }

    /// `secret` was handled: its backoff starts over. Returns whether a failure of it had been logged.
    pub(super) fn succeeded(&mut self, secret: &str) -> bool {
        let retrying = self.secrets.remove(secret);
        retrying.is_some_and(|r| r.logged.is_some())
    }

    /// `secret` is gone: nothing of it is tried again.
    pub(super) fn forget(&mut self, secret: &str) {
        self.secrets.remove(secret);
    }

    /// When the next Secret is due, if one is.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.secrets.values().filter_map(|r| r.due).min()
    }

    /// The Secrets due by now, taken (their backoff stays until they are handled).
    pub(super) fn take_due(&mut self) -> Vec<String> {
        let now = Instant::now();
        let due = self
            .secrets
            .iter_mut()
            .filter(|(_, r)| r.due.is_some_and(|at| at <= now));
        due.map(|(secret, retrying)| {
            retrying.due = None;
            secret.clone()
        })
        .collect()
    }
}

#[cfg(test)]
mod tests;
