//! Joins tried again by the member runner itself: a join that failed for a cause that may pass (an exec
//! credential plugin that failed) is tried again with backoff and jitter, so a member whose token server
//! was briefly down does not stay out of the fleet until its provider reports something new.
//!
//! A retry is one more join in its member's order: any newer change the provider reports for the member (a
//! credential change, a problem, a leave) supersedes the one pending. The backoff grows for as long as the
//! member's joins fail, and starts over once one succeeds or the member leaves.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::executor::RetryBackoff;

/// The first delay before a failed join is tried again.
pub(super) const JOIN_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest delay before jitter, which adds up to as much again: about five minutes at most.
pub(super) const JOIN_RETRY_MAX: Duration = Duration::from_secs(150);
/// While a member's join keeps failing for the same cause, how often it is logged at `warn` again.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(600);

/// The members whose join is to be tried again, and how long each waits.
#[derive(Default)]
pub(super) struct JoinRetries {
    members: BTreeMap<String, Retrying>,
}

/// One member whose joins fail.
struct Retrying {
    backoff: RetryBackoff,
    /// The join to try again, and when (`None`: superseded by a newer change of the member).
    due: Option<(Instant, Box<kube::Config>)>,
    /// The last cause logged at `warn`, and when.
    logged: Option<(String, Instant)>,
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
        let retrying = self
            .members
            .entry(member.to_owned())
            .or_insert_with(|| Retrying {
                backoff: RetryBackoff::new(JOIN_RETRY_MIN, JOIN_RETRY_MAX),
                due: None,
                logged: None,
            });
        let delay = retrying.backoff.next_delay();
        let now = Instant::now();
        retrying.due = Some((now + delay, config));
        let again = match &retrying.logged {
            Some((logged, at)) => {
                logged != cause || now.saturating_duration_since(*at) >= LOG_AGAIN_AFTER
            }
            None => true,
        };
        if again {
            tracing::warn!(context = %member, problem = %cause, retry_in = ?delay, "member could not join, for a cause that may pass: trying again with backoff");
            retrying.logged = Some((cause.to_owned(), now));
        } else {
            tracing::debug!(context = %member, problem = %cause, retry_in = ?delay, "member could not join: trying again with backoff");
        }
        delay
    }

    /// A join of `member` succeeded (or failed for good): its backoff starts over.
    pub(super) fn ended(&mut self, member: &str) {
        self.members.remove(member);
    }

    /// A newer change of `member` came: the join pending is dropped; the backoff stays.
    pub(super) fn superseded(&mut self, member: &str) {
        if let Some(retrying) = self.members.get_mut(member) {
            retrying.due = None;
        }
    }

    /// When the next join is due, if one is pending.
    pub(super) fn next_due(&self) -> Option<Instant> {
        let due = self.members.values().filter_map(|r| r.due.as_ref());
        due.map(|(at, _)| *at).min()
    }

    /// The joins due by now, taken.
    pub(super) fn take_due(&mut self) -> Vec<(String, Box<kube::Config>)> {
        let now = Instant::now();
        let mut due = Vec::new();
        for (member, retrying) in &mut self.members {
            if retrying.due.as_ref().is_some_and(|(at, _)| *at <= now)
                && let Some((_, config)) = retrying.due.take()
            {
                due.push((member.clone(), config));
            }
        }
        due
    }

    /// Whether a join of `member` is pending.
    #[cfg(test)]
    pub(super) fn pending(&self, member: &str) -> bool {
        self.members.get(member).is_some_and(|r| r.due.is_some())
    }
}

#[cfg(test)]
mod tests;
