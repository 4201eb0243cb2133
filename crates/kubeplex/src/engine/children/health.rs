//! How a parent's children are doing in each cluster, read from the child caches after a sync: what the
//! parent's status and `Ready` condition say, what `Cx::children` gives, and what the health metric counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::ApiResource;

use crate::controller::{ChildCaches, DesiredChildren, DynReconcile};
use crate::core::{Assessment, ChildHealth, ClusterHealth, ClusterState, Health};
use crate::engine::engine::{ChildWatch, Engine};
use crate::metrics::ChildrenByHealth;
use crate::watch::{ChildCache, missing};

/// A child a reconcile declared: its kind, namespace and name.
pub(crate) type Declared = (ApiResource, Option<String>, String);

/// The children declared in each cluster, before the sync takes them.
pub(crate) fn declared(desired: &DesiredChildren) -> BTreeMap<String, Vec<Declared>> {
    (desired.iter())
        .map(|(context, children)| {
            let children = children.iter();
            let declared =
                children.map(|c| (c.resource.clone(), c.namespace.clone(), c.name.clone()));
            (context.clone(), declared.collect())
        })
        .collect()
}

/// Every child of a cluster that cannot be asked, judged `Unknown` for `why`.
fn unknown(children: &[Declared], why: &str) -> Vec<ChildHealth> {
    (children.iter())
        .map(|(_, namespace, name)| {
            let verdict = Assessment::new(Health::Unknown, why);
            ChildHealth::without_projection(namespace.as_deref(), name, verdict)
        })
        .collect()
}

/// One declared child as the caches of its cluster have it.
fn judge(watches: &[&ChildWatch], (resource, namespace, name): &Declared) -> ChildHealth {
    let caches: Vec<&Arc<dyn ChildCache>> = (watches.iter())
        .filter(|w| &w.resource == resource)
        .map(|w| &w.cache)
        .collect();
    let of_kind = || watches.iter().filter(|w| &w.resource == resource);
    if let Some(found) = caches
        .iter()
        .find_map(|c| c.health(namespace.as_deref(), name))
    {
        of_kind().for_each(|w| w.answered.forget(namespace.as_deref(), name));
        return found;
    }
    // Applied in this reconcile, not delivered by its watch yet: as the server answered the apply.
    if let Some(answered) = of_kind().find_map(|w| w.answered.get(namespace.as_deref(), name)) {
        return answered;
    }
    if caches.is_empty() || caches.iter().any(|c| !c.has_listed()) {
        let verdict = Assessment::new(Health::Unknown, "the cluster's cache has not listed yet");
        return ChildHealth::without_projection(namespace.as_deref(), name, verdict);
    }
    missing(namespace.as_deref(), name)
}

/// How the `declared` children of one cluster are doing, read from its `watches` once its sync ended in
/// `state`: `Unknown` where the cluster could not be reached, none where the parent wants no children
/// there or it is leaving.
pub(crate) fn judged(
    declared: &[Declared],
    state: ClusterState,
    watches: &[&ChildWatch],
) -> Option<ClusterHealth> {
    if declared.is_empty() {
        return None;
    }
    let judged = match state {
        ClusterState::Unreachable => unknown(declared, "the cluster is unreachable"),
        ClusterState::Applied | ClusterState::Failed | ClusterState::Conflict => {
            declared.iter().map(|c| judge(watches, c)).collect()
        }
        _ => return None,
    };
    ClusterHealth::of(&judged)
}

/// What `Cx::children` reads: this controller's child caches in a context or member.
impl<R: DynReconcile> ChildCaches for Engine<R> {
    fn caches_in(&self, cluster: &str) -> Vec<(ApiResource, Arc<dyn ChildCache>)> {
        let watches = self.child_watches_in(cluster);
        let lent = watches.lent().into_iter();
        lent.map(|w| (w.resource.clone(), w.cache.clone()))
            .collect()
    }

    fn context_ready(&self, cluster: &str) -> bool {
        self.runtime.readiness.is_context_ready(cluster)
    }
}

/// Where `Unknown` is counted in [`Health::ALL`].
fn unknown_at() -> usize {
    (Health::ALL.iter())
        .position(|h| *h == Health::Unknown)
        .unwrap_or_default()
}

/// What the health metric reads at scrape time: every cached child by cluster and health.
impl<R: DynReconcile> ChildrenByHealth for Engine<R> {
    fn children_by_health(&self) -> Vec<(String, &'static str, u32)> {
        let mut counts: BTreeMap<String, [u32; Health::ALL.len()]> = BTreeMap::new();
        for watch in self.all_child_watches() {
            let mut by_health = watch.cache.health_counts();
            // A cluster that cannot be asked: its cache is as it last was, its children unknown.
            if !self.runtime.readiness.is_context_ready(&watch.context) {
                let all = by_health.iter().sum();
                by_health = [0; Health::ALL.len()];
                by_health[unknown_at()] = all;
            }
            let sum = counts.entry(watch.context.clone()).or_default();
            for (total, n) in sum.iter_mut().zip(by_health) {
                *total += n;
            }
        }
        (counts.into_iter())
            .flat_map(|(context, counts)| {
                (Health::ALL.iter().zip(counts))
                    .map(move |(health, n)| (context.clone(), health.as_str(), n))
            })
            .collect()
    }
}
