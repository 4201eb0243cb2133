//! The finalizer and the deletion path: keep the finalizer on every parent, and when a parent is deleted
//! run the user's cleanup, remove its children in every cluster (leaving in place, unlinked, those whose
//! delete policy orphans them), then let it go.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
// tokio's clock, so paused-time tests drive the abandon bounds.

use crate::controller::Cx;
use crate::controller::DynReconcile;
use crate::core::Context;
use crate::core::Error;
use crate::core::{Action, Verdict};
use crate::core::{ClusterOutcome, ClusterState};
use crate::core::{chain, namespaced_name};
use crate::engine::children::changes::ChildChanges;
use crate::engine::children::removal::{self, ChildPlace};
use crate::engine::engine::{Engine, ParentWrite, Primary};
use crate::engine::status::events::{Note, deletion_note};

/// How soon a deletion is tried again while the member provider has not reported its members.
const MEMBERS_UNKNOWN_RETRY: Duration = Duration::from_secs(1);

/// How often a finalizer patch is tried against a fresh copy when the cached one was stale.
const FINALIZER_ATTEMPTS: usize = 3;

impl<R: DynReconcile> Engine<R> {
    /// Adds (`present`) or removes the controller's finalizer. The patch tests the finalizer list it
    /// changes, so it never clobbers another writer's finalizer; when the cached object was stale the
    /// patch is retried at once against a fresh copy, not after the error backoff. Removing it from an
    /// object that is gone is done.
    pub(crate) async fn set_finalizer(
        &self,
        (object, context, shard): ParentWrite<'_, R>,
        present: bool,
    ) -> crate::core::Result<()> {
        let finalizer = self.finalizer.as_deref().unwrap_or_default();
        let api = self.parent_api(object, context, shard)?;
        let in_context = |source| Error::Kube {
            cluster: context.name().to_owned(),
            source,
        };
        let name = object.name_any();
        let mut current = object.finalizers().to_vec();
        for attempt in 1..=FINALIZER_ATTEMPTS {
            let Some(patch) = finalizer_patch(&current, finalizer, present) else {
                return Ok(());
            };
            let error = match api
                .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                Err(error) => error,
            };
            let stale = matches!(&error, kube::Error::Api(s) if s.code == 409 || s.code == 422);
            if !stale || attempt == FINALIZER_ATTEMPTS {
                return Err(in_context(error));
            }
            match api.get_opt(&name).await.map_err(in_context)? {
                Some(fresh) => current = fresh.finalizers().to_vec(),
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// The parent is being deleted: runs the user's cleanup, removes the children in every cluster, then the
    /// finalizer once they are gone. A cluster that cannot be reached keeps the finalizer (and says so in
    /// the status) until it returns, or until the abandon policy gives up on it; so does a child deleted but
    /// still there (kept by its own finalizers), until it goes (its deletion is an event of the parent, and
    /// the parent is checked again after `error_requeue` besides) or the terminating bound gives up on it.
    pub(crate) async fn finalize(&self, object: Arc<Primary<R>>, cx: &Cx<R::Context>) -> Verdict {
        let (context, shard) = (cx.cluster(), cx.shard());
        let write = (&*object, &context, shard);
        let uid = object.uid().unwrap_or_default();
        if self.finalized.contains(&uid) {
            // Its finalizer is gone already; the cache does not show it yet (a child's deletion queued
            // this reconcile while the finalizer was being removed). Cleanup ran; it is not run again.
            return Verdict::Done(Action::await_change());
        }
        if let Err(error) = self.reconciler.cleanup(object.clone(), cx).await {
            tracing::warn!(cluster = %context, error = %chain(&*error), "cleanup failed");
            return Verdict::Failed(self.reconciler.error_policy(object, &error, cx));
        }
        // What the status said before: DeletionBlocked and DeletionUnblocked are told on changes only.
        let before = self.previous_status(&object);
        let orphaned = ChildChanges::default();
        let parent = self.parent_ref(&object, &context);
        let mut outcomes: BTreeMap<String, ClusterOutcome> = self
            .per_child_context(shard, |place, client| {
                let name = place.name.clone();
                let places = self.child_places(&name);
                let parent = &parent;
                let counted = (&self.runtime.metrics, self.plan.name(), &self.conflicts);
                let (orphaned, lists) = (&orphaned, &self.deletion_lists);
                async move {
                    let removal = removal::remove_children(
                        &name, client, &places, parent, counted, orphaned, lists,
                    );
                    removal.await
                }
            })
            .await;
        if let Some(action) = self.stands_down(shard, &outcomes) {
            return Verdict::Done(action);
        }
        self.publish_all(&object, &context, shard, orphaned.notes())
            .await;
        if self.plan.has_member_children() {
            // A member not known yet, or whose children are not listed yet, may hold some: the finalizer
            // waits for it as for an unreachable cluster.
            if !self.runtime.members.is_settled() {
                tracing::debug!(cluster = %context, "deletion waits for the member provider to report its members");
                return Verdict::Done(Action::requeue(MEMBERS_UNKNOWN_RETRY));
            }
            self.members_not_listed(&mut outcomes);
        }
        let deleted_for = self.deletions.deleted_for(&*object);
        let past = |bound: Option<Duration>| bound.is_some_and(|after| deleted_for >= after);
        let abandon_unreachable = past(self.plan.abandon_unreachable_after());
        let abandon_terminating = past(self.plan.abandon_terminating_after());
        let mut blocked = false;
        for (name, outcome) in &mut outcomes {
            // Reachable, its children deleted, some still there: the terminating bound applies to it.
            let going = outcome.state == ClusterState::Deleting;
            let why = match outcome.state {
                ClusterState::Deleted => continue,
                _ if going && abandon_terminating => {
                    "children still there longer than the abandon policy allows; they were left to finish on their own"
                }
                _ if !going && abandon_unreachable => {
                    "unreachable for longer than the abandon policy allows; its children were left behind"
                }
                _ => {
                    blocked = true;
                    *outcome = ClusterOutcome {
                        fenced: None,
                        state: ClusterState::Deleting,
                        children: outcome.children,
                        message: outcome.message.take(),
                    };
                    continue;
                }
            };
            let message = format!("{why} ({})", outcome.message.take().unwrap_or_default());
            tracing::warn!(cluster = %name, %message, "abandoning children");
            let note = Note::warning("ChildrenAbandoned", "Delete", format!("{name}: {message}"))
                .about(name);
            self.publish(&object, &context, shard, note).await;
            *outcome = ClusterOutcome {
                fenced: None,
                state: ClusterState::Abandoned,
                children: outcome.children,
                message: Some(message),
            };
        }
        let parent = namespaced_name(object.namespace().as_deref(), &object.name_any());
        for (name, outcome) in &outcomes {
            let waits = outcome.state == ClusterState::Deleting;
            let metrics = &self.runtime.metrics;
            metrics.deletion_blocked(self.plan.name(), name, &parent, waits);
        }
        if let Some(note) = deletion_note(&before, &outcomes) {
            self.publish(&object, &context, shard, note).await;
        }
        if blocked {
            self.write_status(write, &before, &outcomes, &BTreeMap::new())
                .await;
            return Verdict::Done(Action::requeue(self.plan.error_requeue_or_default()));
        }
        // The abandonment is recorded in the status before the parent goes.
        if outcomes
            .values()
            .any(|o| o.state == ClusterState::Abandoned)
        {
            self.abandoned.lock().insert(uid.clone());
            self.write_status(write, &before, &outcomes, &BTreeMap::new())
                .await;
        }
        match self.set_finalizer(write, false).await {
            Ok(()) => {
                self.finalized.insert(&uid);
                self.deletions.forget(&uid);
                Verdict::Done(Action::await_change())
            }
            Err(error) => {
                tracing::warn!(cluster = %context, error = %chain(&error), "removing the finalizer failed");
                Verdict::Done(Action::requeue(self.plan.error_requeue_or_default()))
            }
        }
    }

    /// Adds the members that may hold children but were not pruned: joined with watches not listed when
    /// the removal began, or about to join. Each blocks the deletion until it has listed, or the abandon
    /// policy gives up.
    fn members_not_listed(&self, outcomes: &mut BTreeMap<String, ClusterOutcome>) {
        let members = &self.runtime.members;
        for name in members.names().into_iter().chain(members.joining()) {
            let message = format!("cluster {name}: a member whose children are not listed yet");
            outcomes.entry(name).or_insert(ClusterOutcome {
                fenced: None,
                state: ClusterState::Unreachable,
                children: 0,
                message: Some(message),
            });
        }
    }

    /// Every (child kind, namespace) this controller may have put in `context`, a fixed one or a member.
    fn child_places(&self, context: &str) -> Vec<ChildPlace> {
        let member = self.runtime.members.contains(context);
        // The namespace the member's configuration defaults to (a kind may live there only).
        let default = (self.runtime.members.client(context))
            .map(|client| client.default_namespace().to_owned())
            .unwrap_or_default();
        self.plan
            .children()
            .iter()
            .flat_map(|child| {
                let fixed = child.watches().filter(|(c, _)| c.name() == context);
                let fixed = fixed.map(|(_, namespace)| namespace);
                let members = (child.member_namespaces(&default).into_iter())
                    .filter(|_| member && child.in_members());
                fixed
                    .chain(members)
                    .map(|namespace| ChildPlace {
                        resource: child.resource().clone(),
                        namespace: namespace.map(str::to_owned),
                        shared: child.is_shared(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The JSON patch that adds (`present`) or removes `finalizer`, testing the list it changes; `None` when
/// there is nothing to do.
fn finalizer_patch(
    current: &[String],
    finalizer: &str,
    present: bool,
) -> Option<json_patch::Patch> {
    let position = current.iter().position(|f| f == finalizer);
    let list = "/metadata/finalizers".parse().expect("a valid pointer");
    let operations = match (present, position) {
        (true, Some(_)) | (false, None) => return None,
        (true, None) if current.is_empty() => vec![
            PatchOperation::Test(TestOperation {
                path: "/metadata/finalizers".parse().expect("a valid pointer"),
                value: serde_json::Value::Null,
            }),
            PatchOperation::Add(AddOperation {
                path: list,
                value: serde_json::json!([finalizer]),
            }),
        ],
        (true, None) => vec![
            PatchOperation::Test(TestOperation {
                path: list,
                value: serde_json::json!(current),
            }),
            PatchOperation::Add(AddOperation {
                path: "/metadata/finalizers/-".parse().expect("a valid pointer"),
                value: serde_json::json!(finalizer),
            }),
        ],
        (false, Some(index)) => {
            let at = format!("/metadata/finalizers/{index}");
            vec![
                PatchOperation::Test(TestOperation {
                    path: at.parse().expect("a valid pointer"),
                    value: serde_json::json!(finalizer),
                }),
                PatchOperation::Remove(RemoveOperation {
                    path: at.parse().expect("a valid pointer"),
                }),
            ]
        }
    };
    Some(json_patch::Patch(operations))
}

#[cfg(test)]
mod tests;
