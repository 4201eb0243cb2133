//! A controller's primary caches by (cluster, namespace). Fixed for most controllers; in sharded-by-context
//! mode a context's caches come and go with its shard, so the map can change while reconciles read it.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::core::Cluster;
use crate::core::Context;
use crate::core::PrimaryResource;
use crate::core::Shrink;
use crate::watch::SharedWatch;

/// A typed context or a member, and a namespace (`None`: every namespace).
type CacheKey<C> = (Cluster<C>, Option<String>);

/// The primary caches of one controller; `C` is its context type.
pub(crate) struct PrimaryCaches<C, K: PrimaryResource> {
    caches: RwLock<HashMap<CacheKey<C>, Arc<SharedWatch<K>>>>,
}

impl<C, K: PrimaryResource> Default for PrimaryCaches<C, K> {
    fn default() -> Self {
        Self {
            caches: RwLock::default(),
        }
    }
}

impl<C: Context, K: PrimaryResource> PrimaryCaches<C, K> {
    /// The cache of `context` that holds objects of `namespace`: its namespace's, else the all-namespaces one.
    pub(crate) fn get(
        &self,
        context: &Cluster<C>,
        namespace: Option<&str>,
    ) -> Option<Arc<SharedWatch<K>>> {
        let caches = self.caches.read();
        let key = (context.clone(), namespace.map(str::to_owned));
        (caches.get(&key))
            .or_else(|| caches.get(&(context.clone(), None)))
            .cloned()
    }

    /// Every cache, with its cluster.
    pub(crate) fn all(&self) -> Vec<(Cluster<C>, Arc<SharedWatch<K>>)> {
        let caches = self.caches.read();
        caches
            .iter()
            .map(|((c, _), w)| (c.clone(), w.clone()))
            .collect()
    }

    /// Takes every cache of member `name` out.
    pub(crate) fn remove_member(&self, name: &str) {
        let mut caches = self.caches.write();
        caches.retain(|(place, _), _| place.as_member().is_none_or(|m| m.name() != name));
        caches.shrink_when_sparse();
    }

    /// Adds the cache of (`context`, `namespace`), or replaces it.
    pub(crate) fn insert(&self, key: CacheKey<C>, cache: Arc<SharedWatch<K>>) {
        let mut caches = self.caches.write();
        caches.insert(key, cache);
    }

    /// Whether the cache of (`context`, `namespace`) is there (exactly that key, no fallback).
    pub(crate) fn has(&self, context: C, namespace: Option<&str>) -> bool {
        let caches = self.caches.read();
        caches.contains_key(&(Cluster::Context(context), namespace.map(str::to_owned)))
    }

    /// Takes the cache of (`context`, `namespace`) out.
    pub(crate) fn remove(
        &self,
        context: C,
        namespace: Option<&str>,
    ) -> Option<Arc<SharedWatch<K>>> {
        let mut caches = self.caches.write();
        caches.remove(&(Cluster::Context(context), namespace.map(str::to_owned)))
    }
}
