//! What became of each child of one context in one pass, and the context's outcome it adds up to: a child
//! that fails is recorded and the pass goes on with the others, so that one refusal (a namespace not there
//! yet, an invalid object) neither hides nor holds back the rest, and the state names every child that
//! failed and why. Children a policy spared (kept, orphaned) are named in the message too.

use std::collections::BTreeMap;

use crate::core::{ClusterState, ContextOutcome, FleetStatus};

use super::requests::failure;

/// The children of one context, as one pass over them left them.
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
}

/// How a context's message tells the children kept: `2 children kept (no longer declared; ...): ...`.
const KEPT: &str = "kept (no longer declared; left in place, unlinked)";
/// How a context's message tells the children orphaned.
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
    ) -> Option<ContextOutcome> {
        let outcome = failure(error, what);
        if outcome.state == ClusterState::Unreachable || outcome.fenced.is_some() {
            return Some(outcome);
        }
        let message = outcome.message.unwrap_or_default();
        tracing::debug!(cluster = %context, error = %message, "a child failed; the others go on");
        self.failed.push(message);
        None
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
    /// else `Conflict`, else `Ready` (`NotTargeted` when no child was wanted).
    pub(crate) fn applied(self, wanted: usize) -> ContextOutcome {
        let kept = told(&self.kept, KEPT);
        let (state, mut notes) = if !self.failed.is_empty() {
            let mut all = self.failed;
            all.extend(self.conflicts);
            (ClusterState::Failed, all)
        } else if !self.conflicts.is_empty() {
            (ClusterState::Conflict, self.conflicts)
        } else if wanted == 0 {
            (ClusterState::NotTargeted, Vec::new())
        } else {
            (ClusterState::Ready, Vec::new())
        };
        notes.extend(kept);
        let message = (!notes.is_empty()).then(|| notes.join("; "));
        ContextOutcome {
            state,
            children: self.done,
            message,
            fenced: None,
        }
    }

    /// The outcome of removing every child: `Ready` when none is left; `Deleting` with the children still
    /// going (and why) while they are; `Failed` naming each child whose delete failed.
    pub(crate) fn removed(self) -> ContextOutcome {
        let going = (!self.going.is_empty())
            .then(|| format!("waiting for children to go: {}", self.going.join(", ")));
        let state = if !self.failed.is_empty() {
            ClusterState::Failed
        } else if going.is_some() {
            ClusterState::Deleting
        } else {
            ClusterState::Ready
        };
        let mut notes = self.failed;
        notes.extend(going);
        notes.extend(told(&self.orphaned, ORPHANED));
        let message = (!notes.is_empty()).then(|| notes.join("; "));
        ContextOutcome {
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

/// Keeps each context's note of the children it kept while the parent's spec is the one it was written
/// for: the unlink itself (the child leaves the controller's watch), a resync, any later reconcile would
/// otherwise wipe it at once. A new generation of the parent, or anything else to say, replaces it.
pub(in crate::engine) fn carry_kept(
    previous: &FleetStatus,
    generation: Option<i64>,
    outcomes: &mut BTreeMap<String, ContextOutcome>,
) {
    if generation.is_none() || previous.observed_generation() != generation {
        return;
    }
    for (context, outcome) in outcomes {
        let Some(before) = previous.clusters.get(context) else {
            continue;
        };
        let told_kept = before.message.as_deref().is_some_and(|m| m.contains(KEPT));
        if outcome.message.is_none() && outcome.state == before.state && told_kept {
            outcome.message.clone_from(&before.message);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::core::ClusterStatus;

    fn written(generation: i64, message: Option<&str>) -> FleetStatus {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut cluster = ClusterStatus::new(ClusterState::Ready, 1, now.clone());
        cluster.message = message.map(str::to_owned);
        let outcomes = BTreeMap::from([(
            "cluster-a".to_owned(),
            ContextOutcome {
                state: cluster.state,
                children: 1,
                message: cluster.message.clone(),
                fenced: None,
            },
        )]);
        FleetStatus::from_outcomes(
            &FleetStatus::default(),
            &outcomes,
            &BTreeMap::new(),
            Some(generation),
            &now,
        )
    }

    fn ready() -> BTreeMap<String, ContextOutcome> {
        let tally = Tally {
            done: 1,
            ..Tally::default()
        };
        BTreeMap::from([("cluster-a".to_owned(), tally.applied(1))])
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
        assert_eq!(kept.state, ClusterState::Ready);
        let told = "2 children kept (no longer declared; left in place, unlinked): Namespace team-blue, ConfigMap team-blue/settings";
        assert_eq!(kept.message.as_deref(), Some(told));

        // The next reconcile of the same generation (the unlink's own event, a resync) keeps saying so.
        let mut again = ready();
        carry_kept(&written(3, Some(told)), Some(3), &mut again);
        assert_eq!(again["cluster-a"].message.as_deref(), Some(told));
        // A new generation does not; nor does a state with its own message, nor a message of another kind.
        let mut changed = ready();
        carry_kept(&written(3, Some(told)), Some(4), &mut changed);
        assert_eq!(changed["cluster-a"].message, None);
        let mut failed = BTreeMap::from([(
            "cluster-a".to_owned(),
            failure(&kube::Error::LinesCodecMaxLineLengthExceeded, "applying x"),
        )]);
        carry_kept(&written(3, Some(told)), Some(3), &mut failed);
        assert!(
            !failed["cluster-a"]
                .message
                .as_deref()
                .unwrap()
                .contains(KEPT)
        );
        let mut other = ready();
        carry_kept(&written(3, Some("something else")), Some(3), &mut other);
        assert_eq!(other["cluster-a"].message, None);
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
