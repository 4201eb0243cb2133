//! The Secrets whose handling failed (a read, or a write of the finalizer: a conflict, a 403, an API server
//! down), each tried again with backoff and jitter. A failure that would otherwise wait for the Secret's next
//! change never does: a Secret left without its finalizer would let a member's credentials go before its
//! children.
//!
//! A failure is logged at `warn` when its cause changes, and while it stays the same only once in a while; the
//! backoff grows for as long as the Secret's handling fails, and starts over once it succeeds or the Secret
//! goes.

use std::time::Duration;

use tokio::time::Instant;

use crate::executor::{Failed, KeyedRetries};

/// The first delay before a Secret whose handling failed is handled again.
pub(super) const RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay before jitter, which adds up to as much again: two minutes at most.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(60);
/// The Secrets to handle again, and how long each waits.
pub(super) struct Retries(KeyedRetries<()>);

impl Default for Retries {
    fn default() -> Self {
        Self(KeyedRetries::new(RETRY_MIN, RETRY_MAX))
    }
}

impl Retries {
    /// Handling `secret` failed with `failure`: it is handled again after a delay.
    pub(super) fn failed(&mut self, secret: &str, failure: &str) -> Failed {
        self.0.failed(secret, (), failure)
    }

    /// `secret` was handled: its backoff starts over. Returns whether a failure of it had been logged.
    pub(super) fn succeeded(&mut self, secret: &str) -> bool {
        self.0.ended(secret)
    }

    /// `secret` is gone: nothing of it is tried again.
    pub(super) fn forget(&mut self, secret: &str) {
        self.0.ended(secret);
    }

    /// When the next Secret is due, if one is.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.0.next_due()
    }

    /// The Secrets due by now, taken (their backoff stays until they are handled).
    pub(super) fn take_due(&mut self) -> Vec<String> {
        self.0
            .take_due()
            .into_iter()
            .map(|(secret, ())| secret)
            .collect()
    }
}

#[cfg(test)]
mod tests;
