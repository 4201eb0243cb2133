//! Reading the parent's children with their health, from the caches: what a reconcile that waits on its
//! children (a rollout that goes on to the next cluster once the previous one is healthy) asks.

use kube::Resource;
use kube::api::ApiResource;

use super::Cx;
use crate::core::{Assessment, ChildHealth, Cluster, Context, Health};

impl<C: Context> Cx<C> {
    /// The parent's children of kind `K` in a context or member, each with its health, the reason, and the
    /// projection it was judged from, read from the child caches (no request). A child the reconcile is
    /// about to declare for the first time is not there yet; one of a cluster that cannot be asked now
    /// (unreachable, or its caches not listed) reads [`Health::Unknown`].
    ///
    /// A change of a child's health reconciles its parent again (within the plan's
    /// [`health_debounce`](crate::Plan::health_debounce)), so a reconcile can wait for its children's
    /// health by returning and looking again, without polling.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// # use kubeplex::{ContextName, Cx};
    /// # fn next(cx: &Cx<ContextName>) {
    /// let cluster_a = ContextName::new("cluster-a");
    /// let children = cx.children::<Deployment>(cluster_a);
    /// if children.iter().all(|c| c.is_healthy()) {
    ///     // go on with cluster-b
    /// }
    /// # }
    /// ```
    pub fn children<K: Resource<DynamicType = ()>>(
        &self,
        cluster: impl Into<Cluster<C>>,
    ) -> Vec<ChildHealth> {
        let Some((caches, parent_uid)) = &self.children else {
            return Vec::new();
        };
        let (cluster, resource) = (cluster.into(), ApiResource::erase::<K>(&()));
        let mut children: Vec<ChildHealth> = (caches.caches_in(cluster.name()).iter())
            .filter(|(kind, _)| kind == &resource)
            .flat_map(|(_, cache)| cache.health_of(parent_uid))
            .collect();
        children.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        if !caches.context_ready(cluster.name()) {
            for child in &mut children {
                let why = Assessment::new(Health::Unknown, "the cluster cannot be asked now");
                (child.health, child.reason) = (why.health, why.reason);
            }
        }
        children
    }

    /// Whether every child of kind `K` in a context or member is [`Health::Healthy`] (and there is at least
    /// one): "is the rollout done in cluster-a?".
    pub fn all_healthy<K: Resource<DynamicType = ()>>(
        &self,
        cluster: impl Into<Cluster<C>>,
    ) -> bool {
        let children = self.children::<K>(cluster);
        !children.is_empty() && children.iter().all(ChildHealth::is_healthy)
    }
}
