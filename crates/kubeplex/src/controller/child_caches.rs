//! What `Cx::children` reads: a controller's child caches in each cluster, and whether the cluster answers.

use std::sync::Arc;

use kube::api::ApiResource;

use crate::watch::ChildCache;

/// A controller's child caches, as the engine keeps them.
pub(crate) trait ChildCaches: Send + Sync {
    /// The child caches in a context or member, with the kind each holds.
    fn caches_in(&self, target: &str) -> Vec<(ApiResource, Arc<dyn ChildCache>)>;
    /// Whether the context or member is ready (API server answering, every watch listed).
    fn context_ready(&self, target: &str) -> bool;
}
