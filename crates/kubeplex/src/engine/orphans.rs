//! The orphan sweep: once the caches have listed, delete the children whose parent no longer exists
//! (deleted while the operator was not running, so its finalizer path never ran).
//!
//! Nothing is removed on missing information: a parent is judged only once the cache that would hold it
//! has listed, and a context whose cache never lists holds back only the children of its own parents.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use kube::ResourceExt;

use super::children;
use super::engine::{ChildWatch, Engine, Primary};
use crate::controller::Reconcile;
use crate::core::ParentRef;
use crate::core::chain;
use crate::ha::WORKING_FOR;
use crate::watch::SharedWatch;

impl<R: Reconcile> Engine<R> {
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
        // The parents of the cached children, grouped by the cache that would hold them.
        type Group<K> = (Arc<SharedWatch<K>>, Vec<ParentRef>);
        let mut groups: HashMap<usize, Group<Primary<R>>> = HashMap::new();
        for uid in watch.cache.parent_uids() {
            let children = watch.cache.children_of(&uid);
            let Some(parent) = children.first().and_then(ParentRef::of) else {
                continue;
            };
            let Some(key) = Self::key_for(&self.plan, &parent) else {
                continue; // Its parent lives in a context this controller does not watch: not ours to judge.
            };
            let Some(cache) = self.primary_cache(&key.context, parent.namespace.as_deref()) else {
                continue;
            };
            groups
                .entry(Arc::as_ptr(&cache).addr())
                .or_insert_with(|| (cache.clone(), Vec::new()))
                .1
                .push(parent);
        }
        join_all(groups.into_values().map(|(cache, parents)| async move {
            if cache.store().wait_until_ready().await.is_err() {
                return;
            }
            for parent in parents {
                let alive = cache
                    .store()
                    .get(&parent.object_ref())
                    .is_some_and(|p| p.uid().as_deref() == Some(parent.uid.as_str()));
                if alive {
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
                    None => self.remove_orphans(watch, &parent).await,
                    // Sharded: the owner of the parent's shard removes its orphans, fenced by that shard.
                    Some((shards, Some(shard))) if shards.holds(shard) => {
                        WORKING_FOR
                            .scope(shard, self.remove_orphans(watch, &parent))
                            .await;
                    }
                    Some(_) => {}
                }
            }
        }))
        .await;
    }

    async fn remove_orphans(&self, watch: &ChildWatch, parent: &ParentRef) {
        let Ok(client) = self.client(&watch.context) else {
            return;
        };
        for child in watch.cache.children_of(&parent.uid) {
            let name = child.name.clone().unwrap_or_default();
            tracing::info!(context = %watch.context, kind = %watch.resource.kind, %name, parent = %parent.name, "removing an orphaned child");
            if let Err(error) = children::delete(client.clone(), &watch.resource, &child).await {
                tracing::warn!(context = %watch.context, error = %chain(&error), "removing an orphaned child failed");
            }
        }
    }
}

#[cfg(test)]
mod tests;
