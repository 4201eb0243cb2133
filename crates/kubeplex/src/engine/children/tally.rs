//! What became of each child of one context in one pass, and the context's outcome it adds up to: a child
//! that fails is recorded and the pass goes on with the others, so that one refusal (a namespace not there
//! yet, an invalid object) neither hides nor holds back the rest, and the state names every child that
//! failed and why.

use crate::core::{ClusterState, ContextOutcome};

use super::failure;

/// The children of one context, as one pass over them left them.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Children applied (or, removing, deleted).
    pub(super) done: u32,
    /// What failed and why, one entry per child.
    failed: Vec<String>,
    /// Names taken by objects that are not this parent's.
    conflicts: Vec<String>,
    /// Children deleted that are still there, each with why.
    going: Vec<String>,
}

impl Tally {
    /// Records a failed request about a child (`what`: `applying Deployment ns/web`) and goes on; or, when
    /// the cluster could not be reached or this replica's fence refused the write, stops: the outcome to
    /// report, since every other child would meet the same.
    pub(super) fn fail(
        &mut self,
        context: &str,
        error: &kube::Error,
        what: &str,
    ) -> Option<ContextOutcome> {
        let outcome = failure(error, what);
        if outcome.state == ClusterState::Unreachable || outcome.fenced.is_some() {
            return Some(outcome);
        }
        let message = outcome.message.unwrap_or_default();
        tracing::debug!(%context, error = %message, "a child failed; the others go on");
        self.failed.push(message);
        None
    }

    /// Records a child whose name is taken (`why` says by whom).
    pub(super) fn conflict(&mut self, why: String) {
        self.conflicts.push(why);
    }

    /// Records a deleted child that is still there (`child` names it and says why).
    pub(super) fn going(&mut self, child: String) {
        self.going.push(child);
    }

    /// The outcome of applying (and pruning): `Failed` naming each child that failed (and any conflict),
    /// else `Conflict`, else `Ready` (`NotTargeted` when no child was wanted).
    pub(super) fn applied(self, wanted: usize) -> ContextOutcome {
        let (state, message) = if !self.failed.is_empty() {
            let mut all = self.failed;
            all.extend(self.conflicts);
            (ClusterState::Failed, Some(all.join("; ")))
        } else if !self.conflicts.is_empty() {
            (ClusterState::Conflict, Some(self.conflicts.join("; ")))
        } else if wanted == 0 {
            (ClusterState::NotTargeted, None)
        } else {
            (ClusterState::Ready, None)
        };
        ContextOutcome {
            state,
            children: self.done,
            message,
            fenced: None,
        }
    }

    /// The outcome of removing every child: `Ready` when none is left; `Deleting` with the children still
    /// going (and why) while they are; `Failed` naming each child whose delete failed.
    pub(super) fn removed(self) -> ContextOutcome {
        let going = (!self.going.is_empty())
            .then(|| format!("waiting for children to go: {}", self.going.join(", ")));
        let (state, message) = if !self.failed.is_empty() {
            let mut all = self.failed;
            all.extend(going);
            (ClusterState::Failed, Some(all.join("; ")))
        } else if going.is_some() {
            (ClusterState::Deleting, going)
        } else {
            (ClusterState::Ready, None)
        };
        ContextOutcome {
            state,
            children: self.going.len() as u32,
            message,
            fenced: None,
        }
    }
}
