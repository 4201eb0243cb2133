//! Joins tried again by the member runner itself: a join that failed for a cause that may pass (an exec
//! credential plugin that failed) is tried again with backoff and jitter, so a member whose token server
//! was briefly down does not stay out of the fleet until its provider reports something new.
//!
//! A retry is one more join in its member's order: any newer change the provider reports for the member (a
//! credential change, a problem, a leave) supersedes the one pending. The backoff grows for as long as the
//! member's joins fail, and starts over once one succeeds or the member leaves.

use std::time::Duration;

use tokio::time::Instant;

use crate::executor::{Failed, KeyedRetries};

/// The first delay before a failed join is tried again.
pub(super) const JOIN_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay before jitter, which adds up to as much again: about five minutes at most.
pub(super) const JOIN_RETRY_MAX: Duration = Duration::from_secs(150);
/// The members whose join is to be tried again, with the configuration to try, and how long each waits.
pub(super) struct JoinRetries(KeyedRetries<Box<kube::Config>>);

impl Default for JoinRetries {
    fn default() -> Self {
        Self(KeyedRetries::new(JOIN_RETRY_MIN, JOIN_RETRY_MAX))
    }
}

impl JoinRetries {
    /// The join of `member` with `config` failed for `cause`, which may pass: it is tried again after a
    /// delay, unless a newer change of the member comes first. Returns the delay.
    pub(super) fn failed(
        &mut self,
        member: &str,
        config: Box<kube::Config>,
        cause: &str,
    ) -> Duration {
        let Failed { retry_in, warn } = self.0.failed(member, config, cause);
        if warn {
            tracing::warn!(context = %member, problem = %cause, ?retry_in, "member could not join, for a cause that may pass: trying again with backoff");
        } else {
            tracing::debug!(context = %member, problem = %cause, ?retry_in, "member could not join: trying again with backoff");
        }
        retry_in
    }

    /// A join of `member` succeeded (or failed for good): its backoff starts over.
    pub(super) fn ended(&mut self, member: &str) {
        self.0.ended(member);
    }

    /// A newer change of `member` came: the join pending is dropped; the backoff stays.
    pub(super) fn superseded(&mut self, member: &str) {
        self.0.superseded(member);
    }

    /// When the next join is due, if one is pending.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.0.next_due()
    }

    /// The joins due by now, taken.
    pub(super) fn take_due(&mut self) -> Vec<(String, Box<kube::Config>)> {
        self.0.take_due()
    }

    /// Whether a join of `member` is pending.
    #[cfg(test)]
    pub(super) fn pending(&self, member: &str) -> bool {
        self.0.pending(member)
    }
}

#[cfg(test)]
mod tests;
