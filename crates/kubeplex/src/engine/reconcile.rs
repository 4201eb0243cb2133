//! Reconciling one object: read it from the cache, keep the finalizer, run the user's reconcile, then sync
//! its children in every cluster, settling each outcome into one status draft as it arrives, and write it.

use std::sync::Arc;

use kube::Resource;
use tracing::Instrument;

use futures::StreamExt;

use crate::controller::Cx;
use crate::controller::DynReconcile;
use crate::core::{Action, Verdict};
use crate::core::{ClusterOutcome, ClusterState};
use crate::core::{chain, namespaced_name};
use crate::engine::children::changes::ChildChanges;
use crate::engine::children::fan_out::Arrival;
use crate::engine::children::health::declared;
use crate::engine::children::parentage::Parentage;
use crate::engine::children::sync;
use crate::engine::engine::{Engine, Primary, ReconcileKey};
use crate::engine::status::draft::StatusDraft;
use crate::engine::status::events::{Note, context_notes, health_notes};

impl<R: DynReconcile> Engine<R> {
    /// Reconciles the object `key` names, every write behind the fence of `shard` as well (the parent's, in
    /// sharded mode); returns what the executor does next with the key.
    pub(crate) async fn reconcile(
        self: Arc<Self>,
        key: ReconcileKey<R>,
        shard: Option<usize>,
    ) -> Action {
        let namespace = key.object.namespace.as_deref();
        // Gone from the cache: deleted (the finalizer keeps objects that still have children).
        let Some(object) = self
            .primary_cache(&key.context, namespace)
            .and_then(|cache| cache.store().get(&key.object))
        else {
            self.failures().remove(&key);
            let parent = namespaced_name(namespace, &key.object.name);
            self.runtime.metrics.parent_gone(self.plan.name(), &parent);
            self.remove_orphans_of(&key, shard).await;
            return Action::await_change();
        };
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.plan.name(),
            cluster = %key.context,
            namespace = namespace.unwrap_or(""),
            name = %key.object.name,
            reconcile_id = %reconcile_id(),
        );
        let failures = self.failures().get(&key).copied().unwrap_or(0);
        let cx = Cx::new(
            key.context.clone(),
            self.plan.clone(),
            self.runtime.clone(),
            failures,
        );
        let parent_uid = object.meta().uid.clone().unwrap_or_default();
        let cx = (cx.with_children(self.clone(), parent_uid).fenced_by(shard))
            .of_primary(kube::core::ApiResource::erase::<Primary<R>>(&()));
        let began = tokio::time::Instant::now();
        let verdict = self.reconcile_object(object, &cx).instrument(span).await;
        let (metrics, controller) = (&self.runtime.metrics, self.plan.name());
        metrics.reconciled(controller, key.context.name(), verdict, began.elapsed());
        if let Verdict::Failed(_) = verdict {
            metrics.retried(controller);
            *self.failures().entry(key).or_insert(0) += 1;
        } else {
            self.failures().remove(&key);
        }
        verdict.action()
    }

    fn failures(
        &self,
    ) -> parking_lot::MutexGuard<'_, std::collections::HashMap<ReconcileKey<R>, u32>> {
        self.failures.lock()
    }

    async fn reconcile_object(&self, object: Arc<Primary<R>>, cx: &Cx<R::Context>) -> Verdict {
        let (context, shard) = (cx.cluster(), cx.shard());
        let write = (&*object, &context, shard);
        let deleting = object.meta().deletion_timestamp.is_some();
        if let Some(finalizer) = &self.finalizer {
            let has_finalizer = object
                .meta()
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == finalizer);
            if deleting {
                return if has_finalizer {
                    Box::pin(self.finalize(object.clone(), cx)).await
                } else {
                    Verdict::Done(Action::await_change())
                };
            }
            if !has_finalizer && let Err(error) = Box::pin(self.set_finalizer(write, true)).await {
                tracing::warn!(cluster = %context, error = %chain(&error), "adding the finalizer failed");
                return Verdict::Done(Action::requeue(self.plan.error_requeue_or_default()));
            }
        } else if deleting {
            return Verdict::Done(Action::await_change());
        }

        let action = match self.reconciler.reconcile(object.clone(), cx).await {
            Ok(action) => action,
            Err(error) => {
                if let Some(refusal) = crate::core::fenced(&*error) {
                    tracing::info!(cluster = %context, refusal, "the reconcile's write was fenced; the parent is left to the replica that holds the fence");
                    return Verdict::Done(Action::await_change());
                }
                let message = chain(&*error);
                tracing::warn!(cluster = %context, error = %message, "reconcile failed");
                if !self.plan.children().is_empty() {
                    Box::pin(self.write_failure(write, &message)).await;
                }
                // Repeats of a failure become one event series (the recorder's), not one per retry.
                let note = Note::warning("ReconcileFailed", "Reconcile", message);
                Box::pin(self.publish(&object, &context, shard, note)).await;
                return Verdict::Failed(self.reconciler.error_policy(object, &error, cx));
            }
        };
        let action = with_resync(action, self.plan.requeue_after());
        let own = cx.take_own_status();
        if self.plan.children().is_empty() {
            if let Some(own) = &own {
                Box::pin(self.write_own(write, own)).await;
            }
            return Verdict::Done(action);
        }
        let mut desired = cx.take_children();
        let places = self.places();
        let names = places.iter().map(|p| p.name.to_string()).collect();
        // What the status said before this reconcile: events tell changes of it, not every retry.
        let (before, own_before) = self.previous(&object, own.as_ref());
        let mut draft =
            StatusDraft::new(before, object.meta().generation, declared(&desired), names)
                .with_own(own, own_before);
        let leave_notes = self.record_orphaned_members(&object, &mut draft);
        let changes = ChildChanges::default();
        let parent = self.parent_ref(&object, &context);
        let link = Parentage {
            parent: &parent,
            controller: self.plan.name(),
            parent_kind: &self.parent_kind,
            metrics: &self.runtime.metrics,
            conflicts: &self.conflicts,
        };
        // The clusters that answered are recorded without waiting for a hung one's cap (an interim status),
        // and the final status is written over what the interim one left.
        {
            let arrivals = self.fan_out(places, shard, |place, client| {
                let desired = desired.remove(&*place.name).unwrap_or_default();
                let live = self.runtime.readiness.is_context_ready(&place.name);
                let (name, watches) = (place.name.clone(), place.watches.clone());
                let (link, changes) = (&link, &changes);
                async move {
                    let watches = watches.lent();
                    sync::sync_context(&name, client, desired, &watches, live, link, changes).await
                }
            });
            let mut arrivals = std::pin::pin!(arrivals);
            while let Some(arrival) = arrivals.next().await {
                match arrival {
                    Arrival::Answered(name, outcome, watches) => {
                        draft.settle(name, outcome, &watches.lent());
                    }
                    Arrival::InterimDue if !draft.fenced() => {
                        Box::pin(self.write_draft(write, &mut draft, true)).await;
                    }
                    Arrival::InterimDue => {}
                }
            }
        }
        if let Some(action) = self.stands_down(shard, draft.outcomes()) {
            return Verdict::Done(action);
        }
        for (cluster, outcome) in
            (draft.outcomes().iter()).filter(|(_, o)| o.state == ClusterState::Conflict)
        {
            let message = outcome.message.as_deref().unwrap_or_default();
            tracing::warn!(%cluster, %message, "a child's name is taken");
        }
        let mut notes = changes.notes();
        notes.extend(context_notes(draft.before(), draft.outcomes()));
        notes.extend(health_notes(draft.before(), draft.health()));
        notes.extend(leave_notes);
        // The status first: Events wait their turn among the controller's (a few at a time), and at a
        // thousand new parents that turn came seconds after the children were in place.
        Box::pin(self.write_draft(write, &mut draft, false)).await;
        Box::pin(self.publish_all(&object, &context, shard, notes)).await;
        // A cluster that failed is retried soon, whatever the reconcile asked for.
        if draft.outcomes().values().any(|o| !o.state.is_settled()) {
            let retry = self.plan.error_requeue_or_default();
            let sooner = action
                .requeue_after()
                .map_or(retry, |after| after.min(retry));
            return Verdict::Done(Action::requeue(sooner));
        }
        Verdict::Done(action)
    }
}

impl<R: DynReconcile> Engine<R> {
    /// Adds to the `draft` the members that left with their children orphaned, so that the status says where
    /// they stayed, and those leaving; returns a `MemberLeaveWaits` warning for each leave that newly waits
    /// (or waits for something else than this parent was told): its children cannot be deleted yet.
    fn record_orphaned_members(&self, object: &Primary<R>, draft: &mut StatusDraft) -> Vec<Note> {
        let mut notes = Vec::new();
        if !self.plan.has_member_children() {
            return notes;
        }
        for name in self.runtime.members.orphaned() {
            let message =
                "left the fleet; its children there stay, no longer managed (leave policy orphan)";
            draft.member(
                name,
                ClusterOutcome {
                    fenced: None,
                    state: ClusterState::Left,
                    children: 0,
                    message: Some(message.to_owned()),
                },
            );
        }
        // And those leaving now, with what their leave waits for.
        let uid = object.meta().uid.as_deref().unwrap_or_default();
        for (name, waits) in self.runtime.members.leaving() {
            let message = match &waits {
                Some(why) => format!(
                    "member {name} is leaving the fleet; its children there are deleted once it answers and allows it: {why}"
                ),
                None => {
                    format!("member {name} is leaving the fleet; no child is put there any more")
                }
            };
            let news = self.told_leaves.tell(&name, uid, waits.as_deref());
            if let Some(why) = &waits
                && news
            {
                let text = format!(
                    "member {name} is leaving the fleet, but this parent's children there cannot be deleted yet; tried again until it answers and allows it: {why}"
                );
                notes.push(Note::warning("MemberLeaveWaits", "Delete", text).about(name.clone()));
            }
            draft.member(
                name,
                ClusterOutcome {
                    fenced: None,
                    state: ClusterState::Leaving,
                    children: 0,
                    message: Some(message),
                },
            );
        }
        notes
    }
}

/// A short id for one reconcile, so that its log lines can be told from another's of the same object: 12 hex
/// digits, a process-wide count mixed by a randomly keyed hash.
fn reconcile_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    let mut hasher = KEYS.get_or_init(std::hash::RandomState::new).build_hasher();
    hasher.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff)
}

/// When to reconcile again after a success: the plan's `requeue_after` is a resync period that holds
/// whatever the reconcile returned (`Action::await_change()` included), and a shorter `Action::requeue`
/// comes first.
pub(super) fn with_resync(action: Action, resync: Option<std::time::Duration>) -> Action {
    match (action.requeue_after(), resync) {
        (Some(a), Some(r)) => Action::requeue(a.min(r)),
        (a, r) => a.or(r).map_or(Action::await_change(), Action::requeue),
    }
}

#[cfg(test)]
mod tests;
