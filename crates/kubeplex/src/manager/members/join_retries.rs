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
            tracing::warn!(cluster = %member, problem = %cause, ?retry_in, "member could not join, for a cause that may pass: trying again with backoff");
        } else {
            tracing::debug!(cluster = %member, problem = %cause, ?retry_in, "member could not join: trying again with backoff");
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
mod tests {
    //! The retry rules in paused time: delays that grow with jitter, a newer change that drops the pending
    //! join but keeps the backoff, and a success or a leave that starts it over.

    use std::time::Duration;

    use tokio::time::Instant;

    use super::{JOIN_RETRY_MIN, JoinRetries};

    fn config() -> Box<kube::Config> {
        Box::new(kube::Config::new(
            "https://member.example:6443".parse().unwrap(),
        ))
    }

    /// Whether `delay` lies in the jittered range of the `attempt`-th delay (0 first).
    fn in_range(delay: Duration, attempt: u32) -> bool {
        let base = JOIN_RETRY_MIN * 2u32.pow(attempt);
        delay >= base && delay < base * 2
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_join_is_due_after_a_growing_delay_and_taken_once() {
        let mut retries = JoinRetries::default();
        assert_eq!(retries.next_due(), None);
        let first = retries.failed("member-a", config(), "the plugin failed");
        assert!(in_range(first, 0), "{first:?}");
        let due = retries.next_due().expect("a join is pending");
        assert_eq!(due, Instant::now() + first);
        assert!(retries.take_due().is_empty(), "taken before it is due");
        tokio::time::sleep_until(due).await;
        let taken = retries.take_due();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0, "member-a");
        assert!(retries.take_due().is_empty(), "taken twice");
        assert_eq!(retries.next_due(), None);
        // It fails again: the delay doubles.
        let second = retries.failed("member-a", config(), "the plugin failed");
        assert!(in_range(second, 1), "{second:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_change_drops_the_pending_join_but_not_the_backoff() {
        let mut retries = JoinRetries::default();
        retries.failed("member-a", config(), "the plugin failed");
        retries.failed("member-b", config(), "the plugin failed");
        retries.superseded("member-a");
        assert!(!retries.pending("member-a") && retries.pending("member-b"));
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let taken: Vec<String> = retries.take_due().into_iter().map(|(m, _)| m).collect();
        assert_eq!(taken, ["member-b"], "a superseded join was tried again");
        // The newer change failed too: the delay goes on growing from where it was.
        let delay = retries.failed("member-a", config(), "the plugin failed");
        assert!(in_range(delay, 1), "{delay:?}");
        // A member never retried is not made pending by a change.
        retries.superseded("member-c");
        assert!(!retries.pending("member-c"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_or_a_leave_starts_the_backoff_over() {
        let mut retries = JoinRetries::default();
        for _ in 0..4 {
            retries.failed("member-a", config(), "the plugin failed");
        }
        retries.ended("member-a");
        assert!(!retries.pending("member-a"), "still pending after it ended");
        assert_eq!(retries.next_due(), None);
        let delay = retries.failed("member-a", config(), "the token server did not answer");
        assert!(in_range(delay, 0), "{delay:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_delay_stops_growing_at_the_cap() {
        let mut retries = JoinRetries::default();
        let delays: Vec<Duration> = (0..20)
            .map(|_| retries.failed("member-a", config(), "the plugin failed"))
            .collect();
        let cap = super::JOIN_RETRY_MAX;
        assert!(delays.iter().all(|d| *d < cap * 2), "{delays:?}");
        assert!(delays[19] >= cap, "{delays:?}");
    }
}
