//! What a reconcile asks for next.

use std::time::Duration;

/// The outcome of a successful reconcile: reconcile again after a delay, or only when something changes.
///
/// The same vocabulary as kube-runtime's `Action`, readable by the runtime (which needs the delay).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Reconcile this object again after `duration`, even if nothing changes.
    pub const fn requeue(duration: Duration) -> Self {
        Self {
            requeue_after: Some(duration),
        }
    }

    /// Reconcile this object again only when it, or one of its children, changes.
    pub const fn await_change() -> Self {
        Self {
            requeue_after: None,
        }
    }

    /// The requested delay before the next reconcile, if any.
    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// How one reconcile (or deletion) ended: the [`Action`] the executor carries out, and whether the user's
/// code failed (which counts towards the object's error backoff). The one decision a run hands on: the
/// executor reads its action, the metrics its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The runtime's and the user's work succeeded, or failed in a way the runtime retries itself.
    Done(Action),
    /// The user's `reconcile` or `cleanup` failed.
    Failed(Action),
}

impl Verdict {
    /// What the executor does next with the object's key.
    pub(crate) fn action(self) -> Action {
        match self {
            Self::Done(action) | Self::Failed(action) => action,
        }
    }
}
