//! What became of each child of one cluster in one pass, and the cluster's outcome it adds up to: a child
//! that fails is recorded and the pass goes on with the others, so that one refusal (a namespace not there
//! yet, an invalid object) neither hides nor holds back the rest, and the state names every child that
//! failed and why. Children a policy spared (kept, orphaned) are named in the message too.

use crate::core::{ClusterOutcome, ClusterState, ClusterStatus};

use super::requests::failure;

/// The children of one cluster, as one pass over them left them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Children applied (or, removing, deleted).
    pub(crate) done: u32,
    /// What failed and why, one entry per child.
    failed: Vec<String>,
    /// Names taken by objects that are not this parent's.
    conflicts: Vec<String>,
    /// Children deleted that are still there, each with why.
    going: Vec<String>,
    /// Children no longer declared that were unlinked and left in place (prune policy keep).
    kept: Vec<String>,
    /// Children of a deleted parent that were unlinked and left in place (delete policy orphan).
    orphaned: Vec<String>,
    /// Shared children other parents share too, each naming them.
    shared: Vec<String>,
}

/// How a cluster's message tells the children kept: `2 children kept (no longer declared; ...): ...`.
const KEPT: &str = "kept (no longer declared; left in place, unlinked)";
/// How a cluster's message tells the shared children other parents share too.
const SHARED: &str = "shared with other parents";
/// How a cluster's message tells the children orphaned.
const ORPHANED: &str = "left in place, unlinked (delete policy orphan)";

impl Tally {
    /// Records a failed request about a child (`what`: `applying Deployment ns/web`) and goes on; or, when
    /// the cluster could not be reached or this replica's fence refused the write, stops: the outcome to
    /// report, since every other child would meet the same.
    pub(crate) fn fail(
        &mut self,
        context: &str,
        error: &kube::Error,
        what: &str,
    ) -> Option<ClusterOutcome> {
        let outcome = failure(error, what);
        if outcome.state == ClusterState::Unreachable || outcome.fenced.is_some() {
            return Some(outcome);
        }
        let message = outcome.message.unwrap_or_default();
        tracing::debug!(cluster = %context, error = %message, "a child failed; the others go on");
        self.failed.push(message);
        None
    }

    /// Adds what another pass over other children of the same cluster recorded.
    pub(crate) fn absorb(&mut self, other: Tally) {
        self.done += other.done;
        self.failed.extend(other.failed);
        self.conflicts.extend(other.conflicts);
        self.going.extend(other.going);
        self.kept.extend(other.kept);
        self.orphaned.extend(other.orphaned);
        self.shared.extend(other.shared);
    }

    /// Records a shared child that other parents share too (`child` names it and them).
    pub(crate) fn shared(&mut self, child: String) {
        self.shared.push(child);
    }

    /// Records a child whose name is taken (`why` says by whom).
    pub(crate) fn conflict(&mut self, why: String) {
        self.conflicts.push(why);
    }

    /// Records a deleted child that is still there (`child` names it and says why).
    pub(crate) fn going(&mut self, child: String) {
        self.going.push(child);
    }

    /// Records a child no longer declared that was unlinked and left in place (`child` names it).
    pub(crate) fn kept(&mut self, child: String) {
        self.kept.push(child);
    }

    /// Records a child of a deleted parent that was unlinked and left in place (`child` names it).
    pub(crate) fn orphaned(&mut self, child: String) {
        self.orphaned.push(child);
    }

    /// The outcome of applying (and pruning): `Failed` naming each child that failed (and any conflict),
    /// else `Conflict`, else `Applied` (`NotTargeted` when no child was wanted).
    pub(crate) fn applied(self, wanted: usize) -> ClusterOutcome {
        let kept = told(&self.kept, KEPT);
        let shared = told(&self.shared, SHARED);
        let (state, mut notes) = if !self.failed.is_empty() {
            let mut all = self.failed;
            all.extend(self.conflicts);
            (ClusterState::Failed, all)
        } else if !self.conflicts.is_empty() {
            (ClusterState::Conflict, self.conflicts)
        } else if wanted == 0 {
            (ClusterState::NotTargeted, Vec::new())
        } else {
            (ClusterState::Applied, Vec::new())
        };
        notes.extend(kept);
        notes.extend(shared);
        let message = (!notes.is_empty()).then(|| notes.join("; "));
        ClusterOutcome {
            state,
            children: self.done,
            message,
            fenced: None,
        }
    }

    /// The outcome of removing every child: `Deleted` when none is left; `Deleting` with the children still
    /// going (and why) while they are; `Failed` naming each child whose delete failed.
    pub(crate) fn removed(self) -> ClusterOutcome {
        let going = (!self.going.is_empty())
            .then(|| format!("waiting for children to go: {}", self.going.join(", ")));
        let state = if !self.failed.is_empty() {
            ClusterState::Failed
        } else if going.is_some() {
            ClusterState::Deleting
        } else {
            ClusterState::Deleted
        };
        let mut notes = self.failed;
        notes.extend(going);
        notes.extend(told(&self.orphaned, ORPHANED));
        let message = (!notes.is_empty()).then(|| notes.join("; "));
        ClusterOutcome {
            state,
            children: self.going.len() as u32,
            message,
            fenced: None,
        }
    }
}

/// `2 children {what}: A, B`, or nothing when there are none.
fn told(children: &[String], what: &str) -> Option<String> {
    let count = match children.len() {
        0 => return None,
        1 => "1 child".to_owned(),
        n => format!("{n} children"),
    };
    Some(format!("{count} {what}: {}", children.join(", ")))
}

/// Keeps a cluster's note of the children it kept while the parent's spec is the one it was written for
/// (`same_spec`): the unlink itself (the child leaves the controller's watch), a resync, any later
/// reconcile would otherwise wipe it at once. A new generation of the parent, or anything else to say,
/// replaces it. `before` is the cluster's status as the reconcile found it.
pub(in crate::engine) fn carry_kept(
    before: Option<&ClusterStatus>,
    same_spec: bool,
    outcome: &mut ClusterOutcome,
) {
    let Some(before) = before.filter(|b| same_spec && tells_kept(b)) else {
        return;
    };
    if outcome.message.is_none() && outcome.state == before.state {
        outcome.message.clone_from(&before.message);
    }
}

/// Whether a cluster's status names children kept. Derived from what the status persists, its state and
/// whether it has a message, never from the message's words: [`Tally::applied`] gives a settled cluster
/// (`Applied`, or `NotTargeted`) a message only to name the children kept, and no other outcome of a
/// reconcile is written with those states and a message. Nothing besides is persisted (a field of its
/// own would be user-visible, and lost under a CRD generated before it), and an engine's memory would be
/// lost on a restart or a move of the shard, while the status tells kept until the spec changes.
fn tells_kept(status: &ClusterStatus) -> bool {
    let settled = matches!(
        status.state,
        ClusterState::Applied | ClusterState::NotTargeted
    );
    settled && status.message.is_some()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// cluster-a as a status written before says it: `state`, with `message`.
    fn written(state: ClusterState, message: Option<&str>) -> ClusterStatus {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut cluster = ClusterStatus::new(state, 1, now);
        cluster.message = message.map(str::to_owned);
        cluster
    }

    fn ready() -> ClusterOutcome {
        let tally = Tally {
            done: 1,
            ..Tally::default()
        };
        tally.applied(1)
    }

    #[test]
    fn the_children_kept_are_told_until_the_spec_changes() {
        let mut tally = Tally {
            done: 1,
            ..Tally::default()
        };
        tally.kept("Namespace team-blue".into());
        tally.kept("ConfigMap team-blue/settings".into());
        let kept = tally.applied(1);
        assert_eq!(kept.state, ClusterState::Applied);
        let told = "2 children kept (no longer declared; left in place, unlinked): Namespace team-blue, ConfigMap team-blue/settings";
        assert_eq!(kept.message.as_deref(), Some(told));
        let before = written(ClusterState::Applied, Some(told));

        // The next reconcile of the same spec (the unlink's own event, a resync) keeps saying so.
        let mut again = ready();
        carry_kept(Some(&before), true, &mut again);
        assert_eq!(again.message.as_deref(), Some(told));
        // A new spec does not; nor does a state with its own message, nor a cluster that said nothing.
        let mut changed = ready();
        carry_kept(Some(&before), false, &mut changed);
        assert_eq!(changed.message, None);
        let mut failed = failure(&kube::Error::LinesCodecMaxLineLengthExceeded, "applying x");
        let said = failed.message.clone();
        carry_kept(Some(&before), true, &mut failed);
        assert_eq!(failed.message, said);
        let mut quiet = ready();
        carry_kept(
            Some(&written(ClusterState::Applied, None)),
            true,
            &mut quiet,
        );
        carry_kept(None, true, &mut quiet);
        assert_eq!(quiet.message, None);
    }

    /// Only a settled cluster's message names children kept: a failure that named some (its own words
    /// beside them) is not carried into a cluster settled since.
    #[test]
    fn kept_is_told_by_a_settled_state_with_a_message_whatever_its_words() {
        let failed_keeping = written(ClusterState::Failed, Some(KEPT));
        assert!(!tells_kept(&failed_keeping));
        let mut settled = ready();
        carry_kept(Some(&failed_keeping), true, &mut settled);
        assert_eq!(settled.message, None);
        let mut not_targeted = Tally::default().applied(0);
        let worded = written(
            ClusterState::NotTargeted,
            Some("1 child kept in other words"),
        );
        carry_kept(Some(&worded), true, &mut not_targeted);
        assert_eq!(not_targeted.message.as_deref(), worded.message.as_deref());
    }

    #[test]
    fn the_children_orphaned_are_told_beside_what_the_deletion_waits_for() {
        let mut tally = Tally::default();
        tally.orphaned("Namespace team-blue".into());
        tally.going("ConfigMap ns/held (Terminating)".into());
        let outcome = tally.removed();
        assert_eq!(outcome.state, ClusterState::Deleting);
        assert_eq!(outcome.children, 1, "the orphaned child is not waited for");
        assert_eq!(
            outcome.message.as_deref(),
            Some(
                "waiting for children to go: ConfigMap ns/held (Terminating); 1 child left in place, unlinked (delete policy orphan): Namespace team-blue"
            )
        );
    }
}
