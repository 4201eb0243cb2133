//! The orphan sweep: once the caches have listed, delete the children whose parent no longer exists
//! (deleted while the operator was not running, so its finalizer path never ran), or unlink those whose
//! delete policy orphans them. Children unlinked before (kept, orphaned) carry no controller label: no
//! cache of the controller holds them, so the sweep never sees them. A child that appears for
//! a parent already gone (a late apply of a replica that lost its Lease re-created it) is removed when its
//! event asks for the parent, not at the next sweep.
//!
//! Nothing is removed on missing information: a parent is judged only once the cache that would hold it
//! has listed, and a cluster whose cache never lists holds back only the children of its own parents.
//!
//! Nor on one child's word: any object of a child kind with the controller's label asks for the parent it
//! names, so each child is judged by its own parent reference, and only the children whose whole reference
//! (cluster, namespace, name, UID) is the parent judged gone are removed. A UID counts as gone only when no
//! listed primary cache holds it; a child naming a parent that is gone under a UID a live parent has is a
//! conflict, reported and left alone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::join_all;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::controller::DynReconcile;
use crate::core::Cluster;
use crate::core::{DeletePolicy, ParentRef, is_shared, parents_of};
use crate::core::{chain, namespaced_name};
use crate::engine::children::removal::{self, Removed};
use crate::engine::children::sharing;
use crate::engine::engine::{ChildWatch, Engine, Primary, ReconcileKey};
use crate::engine::status::events::Note;
use crate::watch::SharedWatch;

/// A live parent, with the cluster it lives in.
type Holder<R> = (
    Cluster<<R as crate::controller::DynReconcile>::Context>,
    Arc<Primary<R>>,
);

impl<R: DynReconcile> Engine<R> {
    /// Sweeps every child cache of the controller, each on its own.
    pub(crate) async fn sweep_orphans(self: Arc<Self>) {
        let watches = self.all_child_watches();
        self.sweep_watches(&watches).await;
    }

    /// Sweeps these child caches (a member's, when it joins), each on its own.
    pub(crate) async fn sweep_watches(&self, watches: &[ChildWatch]) {
        join_all(watches.iter().map(|watch| self.sweep(watch))).await;
    }

    async fn sweep(&self, watch: &ChildWatch) {
        watch.cache.ready().await;
        // The parents the cached children name, grouped by the cache that would hold them. Each child names
        // its own: children of one UID may name different parents (one of them forged).
        type Group<K> = (Arc<SharedWatch<K>>, HashSet<ParentRef>);
        let mut groups: HashMap<usize, Group<Primary<R>>> = HashMap::new();
        let children = watch.cache.parent_uids().into_iter();
        let children = children.flat_map(|uid| watch.cache.children_of(&uid));
        for parent in children.flat_map(|child| parents_of(&child)) {
            let Some(key) = Self::key_for(&self.plan, &parent) else {
                continue; // Its parent lives in a cluster this controller does not watch: not ours to judge.
            };
            let Some(cache) = self.primary_cache(&key.context, parent.namespace.as_deref()) else {
                continue;
            };
            groups
                .entry(Arc::as_ptr(&cache).addr())
                .or_insert_with(|| (cache.clone(), HashSet::new()))
                .1
                .insert(parent);
        }
        join_all(groups.into_values().map(|(cache, parents)| async move {
            if !cache.listed().await {
                return;
            }
            for parent in parents {
                // A parent whose finalizer went (here, or in an earlier run) is gone, cached or not.
                let finalizer = self.finalizer.as_deref();
                let alive = !self.finalized.contains(&parent.uid)
                    && cache.store().get(&parent.object_ref()).is_some_and(|p| {
                        let released = p.meta().deletion_timestamp.is_some()
                            && finalizer.is_some_and(|f| !p.finalizers().iter().any(|x| x == f));
                        p.uid().as_deref() == Some(parent.uid.as_str()) && !released
                    });
                if alive {
                    continue;
                }
                if let Some(holder) = self.holder_of(&parent) {
                    let watches = std::slice::from_ref(watch);
                    self.report_conflicts(watches, &parent, holder, None).await;
                    continue;
                }
                let shards = self.runtime.shards.as_ref();
                let shard = shards.map(|s| {
                    (
                        s,
                        s.shard_of(&parent.context, parent.namespace.as_deref(), &parent.name),
                    )
                });
                match shard {
                    None => self.remove_orphans(watch, &parent, None).await,
                    // Sharded: the owner of the parent's shard removes its orphans, fenced by that shard.
                    Some((shards, Some(shard))) if shards.holds(shard) => {
                        self.remove_orphans(watch, &parent, Some(shard)).await;
                    }
                    Some(_) => {}
                }
            }
        }))
        .await;
    }

    /// A request for a parent gone from its cache: removes the children still cached for it, in every
    /// cluster — those whose whole reference is the parent asked for. Judged as the sweep judges — by the
    /// parent's UID (which the event that asked carries), in a cache that has listed and holds no object of
    /// that UID, nor any other listed cache under another name (a conflict) — and run where the request is
    /// reconciled (the leader, or the owner of the parent's shard, fenced by `shard`).
    pub(crate) async fn remove_orphans_of(&self, request: &ReconcileKey<R>, shard: Option<usize>) {
        let Some(uid) = request.object.extra.uid.as_deref() else {
            return;
        };
        if self.abandoned.lock().contains(uid) {
            return; // Left behind by the abandon policy, as its status and Event said.
        }
        let namespace = request.object.namespace.as_deref();
        let Some(cache) = self.primary_cache(&request.context, namespace) else {
            return;
        };
        // Listed first: a cache that lists between the two reads would otherwise be judged by its empty past.
        let listed = cache.has_listed();
        let alive = cache
            .store()
            .get(&request.object)
            .is_some_and(|p| p.uid().as_deref() == Some(uid));
        if !listed || alive {
            return;
        }
        let parent = ParentRef {
            context: request.context.name().to_owned(),
            namespace: namespace.map(str::to_owned),
            name: request.object.name.clone(),
            uid: uid.to_owned(),
        };
        let watches = self.all_child_watches();
        if let Some(holder) = self.holder_of(&parent) {
            self.report_conflicts(&watches, &parent, holder, shard)
                .await;
            return;
        }
        for watch in &watches {
            self.remove_orphans(watch, &parent, shard).await;
        }
    }

    /// The live parent that has `parent`'s UID under another reference (cluster, namespace or name), in any
    /// primary cache of this controller that has listed: then `parent`, named by a child, is not a parent
    /// that is gone but a conflict.
    fn holder_of(&self, parent: &ParentRef) -> Option<Holder<R>> {
        let uid = Some(parent.uid.as_str());
        let caches = self.primaries.all().into_iter();
        let listed = caches.filter(|(_, cache)| cache.has_listed());
        listed
            .filter_map(|(context, cache)| {
                let holder = cache.store().find(|p| p.uid().as_deref() == uid)?;
                Some((context, holder))
            })
            .find(|(context, holder)| {
                let same = context.name() == parent.context
                    && holder.namespace() == parent.namespace
                    && holder.name_any() == parent.name;
                !same
            })
    }

    /// Reports the children in `watches` that name `parent`, whose UID `holder` has under another reference:
    /// a warning for each (once), and an Event on the real parent (written behind `shard`'s fence). None of
    /// them is touched.
    async fn report_conflicts(
        &self,
        watches: &[ChildWatch],
        parent: &ParentRef,
        (context, holder): Holder<R>,
        shard: Option<usize>,
    ) {
        let real = self.parent_ref(&holder, &context);
        for watch in watches {
            let kind = &watch.resource.kind;
            for child in watch.cache.children_of(&parent.uid) {
                if !parent.is_parent_of(&child) {
                    continue;
                }
                let why = format!(
                    "its UID label is the parent {}'s, its annotation names {}",
                    real.place(),
                    parent.place()
                );
                if !self.conflicts.report(&watch.context, kind, &child, &why) {
                    continue;
                }
                let name = child.name.as_deref().unwrap_or_default();
                let place = namespaced_name(child.namespace.as_deref(), name);
                let message = format!(
                    "{kind} {place} in {} carries this parent's UID but names another parent ({}): left alone",
                    watch.context,
                    parent.place()
                );
                let message = crate::engine::children::conflicts::capped(&message).to_owned();
                let note = Note::warning("ChildConflict", "Reconcile", message)
                    .about(watch.context.clone());
                self.publish(&holder, &context, shard, note).await;
            }
        }
    }

    /// Removes `parent`'s children in `watch`'s cache, behind the fence of `shard` (the parent's) as well.
    async fn remove_orphans(&self, watch: &ChildWatch, parent: &ParentRef, shard: Option<usize>) {
        let Ok(client) = self.client(&watch.context, shard) else {
            return;
        };
        let children = watch.cache.children_of(&parent.uid).into_iter();
        // Only the children that name this parent, all of it: another naming the same UID is judged by its own.
        let named = |child: &ObjectMeta| parent.is_parent_of(child) || parent.shares(child);
        for child in children.filter(named) {
            let name = child.name.clone().unwrap_or_default();
            tracing::info!(cluster = %watch.context, kind = %watch.resource.kind, %name, parent = %parent.name, "removing an orphaned child");
            if is_shared(&child) {
                let spare = DeletePolicy::of(&child) == DeletePolicy::Orphan;
                let controller = self.plan.name();
                let released = sharing::release(
                    client.clone(),
                    &watch.resource,
                    &child,
                    parent,
                    controller,
                    spare,
                );
                if let Err(error) = released.await {
                    tracing::warn!(cluster = %watch.context, error = %chain(&error), "letting go of an orphaned shared child failed");
                }
                continue;
            }
            let removal =
                removal::remove(client.clone(), &watch.resource, &child, self.plan.name());
            match removal.await {
                Ok(Removed::Deleted) => {}
                Ok(Removed::Orphaned) => {
                    tracing::info!(cluster = %watch.context, kind = %watch.resource.kind, %name, "its delete policy orphans it: unlinked, left in place");
                }
                Err(error) => {
                    tracing::warn!(cluster = %watch.context, error = %chain(&error), "removing an orphaned child failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
