//! What a reconcile sees besides its object: where it came from and how to reach every cluster.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexSet;
use kube::api::ApiResource;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;

use crate::core::Context;
use crate::core::PrimaryResource;
use crate::core::{Cluster, Member};
use crate::core::{Error, Result};
#[cfg(doc)]
use crate::plan::DEFAULT_ERROR_REQUEUE;
use crate::plan::{MAX_ERROR_REQUEUE, Plan};
use crate::readiness::ClusterReport;
use crate::runtime::Runtime;

mod children;
mod desired;
mod own_status;

/// A reconcile's own status fields, by name (see [`Cx::set_status`]).
pub(crate) type OwnStatus = serde_json::Map<String, serde_json::Value>;

use super::child_caches::ChildCaches;
use super::desired_child::DesiredChildren;

/// The reconcile context: the cluster the object came from, access to every cluster of the fleet, and the
/// children the reconcile wants.
pub struct Cx<C> {
    cluster: Cluster<C>,
    plan: Arc<Plan<C>>,
    runtime: Arc<Runtime>,
    desired: Mutex<DesiredChildren>,
    failures: u32,
    /// The controller's child caches and the UID of the parent reconciled, for [`Cx::children`].
    children: Option<(Arc<dyn ChildCaches>, String)>,
    /// In sharded mode, the shard of the parent reconciled: every client handed out writes behind its fence.
    shard: Option<usize>,
    /// The controller's primary kind, for what `cached` may read.
    primary: Option<ApiResource>,
    /// The reconcile's own status fields (see [`Cx::set_status`]).
    own_status: Mutex<Option<OwnStatus>>,
}

impl<C: Context> Cx<C> {
    pub(crate) fn new(
        cluster: Cluster<C>,
        plan: Arc<Plan<C>>,
        runtime: Arc<Runtime>,
        failures: u32,
    ) -> Self {
        Self {
            cluster,
            plan,
            runtime,
            desired: Mutex::default(),
            failures,
            children: None,
            shard: None,
            primary: None,
            own_status: Mutex::default(),
        }
    }

    /// The controller's primary kind is `primary`.
    pub(crate) fn of_primary(mut self, primary: ApiResource) -> Self {
        self.primary = Some(primary);
        self
    }

    /// Hands out clients whose writes pass the fence of `shard` as well (the parent's, in sharded mode).
    pub(crate) fn fenced_by(mut self, shard: Option<usize>) -> Self {
        self.shard = shard;
        self
    }

    /// The shard whose fence this reconcile's writes pass, in sharded mode.
    pub(crate) fn shard(&self) -> Option<usize> {
        self.shard
    }

    /// Reads the children of the parent with `parent_uid` from `caches` (see [`Cx::children`]).
    pub(crate) fn with_children(
        mut self,
        caches: Arc<dyn ChildCaches>,
        parent_uid: String,
    ) -> Self {
        self.children = Some((caches, parent_uid));
        self
    }

    /// Where the reconciled object came from: one of the controller's typed contexts
    /// (`Cluster::Context(Fleet::Control)`, which compares equal to `Fleet::Control`), or a member of the
    /// fleet when the plan watches its primaries in every member.
    pub fn cluster(&self) -> Cluster<C> {
        self.cluster.clone()
    }

    /// The name of the controller running this reconcile.
    pub fn controller(&self) -> &str {
        self.plan.name()
    }

    /// The client of any context the manager's controllers declared, or of a member of the fleet. Fails
    /// with [`Error::UndeclaredContext`] for a context no controller declared, [`Error::ClientConfig`] for
    /// one whose client could not be configured, and [`Error::Member`] for a member that is not one now.
    pub fn client(&self, cluster: impl Into<Cluster<C>>) -> Result<Client> {
        let cluster = cluster.into();
        self.runtime
            .client(cluster.name(), self.shard)
            .map_err(|error| match (cluster, error) {
                (Cluster::Member(member), Error::UndeclaredContext { .. }) => Error::Member {
                    member: member.name().to_owned(),
                    reason: "not a member of the fleet now (it left, or has not joined)".into(),
                },
                (_, error) => error,
            })
    }

    /// An `Api` for a namespaced kind in `namespace` of a context or member.
    pub fn api<K>(&self, cluster: impl Into<Cluster<C>>, namespace: &str) -> Result<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Ok(Api::namespaced(self.client(cluster)?, namespace))
    }

    /// Every cached object of kind `K` in a context or a member, without a request: from the watches the
    /// controller declared there — its primaries', its watched kinds' (`watches(..)`) and its children's
    /// declared with `Child::cache_objects` (other children are cached by their metadata only: read them
    /// with [`children`](Self::children)). A kind the controller watches nowhere in `cluster` is
    /// [`Error::NotWatched`], naming the declaration that would watch it; a member whose watches have not
    /// listed yet reads empty ([`clusters`](Self::clusters) says which have).
    pub fn cached<K: PrimaryResource>(
        &self,
        cluster: impl Into<Cluster<C>>,
    ) -> Result<Vec<Arc<K>>> {
        let cluster = cluster.into();
        if let Some(fix) = self.undeclared(&ApiResource::erase::<K>(&()), &cluster) {
            return Err(Error::NotWatched {
                cluster: cluster.name().to_owned(),
                kind: crate::core::kind_label::<K>(),
                fix,
            });
        }
        let watches = self.runtime.watches.watches_of::<K>(cluster.name());
        Ok(watches.iter().flat_map(|w| w.store().state()).collect())
    }

    /// Why the controller has no cache of `kind` in `cluster`, and the declaration that would give it one;
    /// `None` when it has.
    fn undeclared(&self, kind: &ApiResource, cluster: &Cluster<C>) -> Option<String> {
        let here = |contexts: &[C], members: bool| match cluster {
            Cluster::Context(context) => contexts.contains(context),
            Cluster::Member(_) => members,
        };
        let plan = &self.plan;
        if self.primary.as_ref() == Some(kind) && here(plan.contexts(), plan.in_members()) {
            return None;
        }
        if (plan.watched().iter()).any(|w| w.resource() == kind && w.is_watched_in(cluster)) {
            return None;
        }
        let owned = plan.children().iter().filter(|c| c.resource() == kind);
        let owned: Vec<_> = owned
            .filter(|c| here(c.contexts(), c.in_members()))
            .collect();
        match owned.first() {
            Some(_) if owned.iter().any(|c| c.caches_objects()) => None,
            Some(_) => Some(format!(
                "its children of this kind are cached by their metadata only: read them with \
                 `cx.children::<{}>`, or declare the child with `Child::cache_objects()`",
                kind.kind
            )),
            None => Some(format!(
                "declare it with `watches({}, ..)` in this cluster (`contexts = [..]`, or `members` for a member)",
                kind.kind
            )),
        }
    }

    /// Every cluster this controller works in — its contexts (the primaries', the children's and the
    /// watched kinds'), then every current member when it works in members — each with its readiness as
    /// `/readyz` reports it now: ready, starting (its watches have not all listed) or failing (with the
    /// reasons), and a member's phase (joining, ready, leaving).
    pub fn clusters(&self) -> Vec<(Cluster<C>, ClusterReport)> {
        let mut reports = self.runtime.readiness.report().clusters;
        let contexts = self.plan.all_contexts().into_iter().map(Cluster::Context);
        let members = self
            .plan
            .works_in_members()
            .then(|| self.members())
            .into_iter()
            .flatten();
        contexts
            .chain(members.map(Cluster::Member))
            .filter_map(|cluster| {
                let report = reports.remove(cluster.name())?;
                Some((cluster, report))
            })
            .collect()
    }

    /// The members of the fleet now (clusters that joined at run time and are not leaving), in name order.
    pub fn members(&self) -> Vec<Member> {
        let names = self.runtime.members.names();
        names.into_iter().map(Member::new).collect()
    }

    /// The contexts where children of kind `K` were declared (`owns(K, contexts = [..])`), each once, in
    /// declaration order: loop over these instead of naming the child contexts a second time.
    pub fn contexts_of<K: Resource<DynamicType = ()>>(&self) -> Vec<C> {
        let resource = ApiResource::erase::<K>(&());
        let contexts: IndexSet<C> = (self.plan.children().iter())
            .filter(|c| c.resource() == &resource)
            .flat_map(|c| c.contexts().iter().copied())
            .collect();
        contexts.into_iter().collect()
    }

    /// Everywhere children of kind `K` live now: the contexts of [`contexts_of`](Self::contexts_of), then
    /// every current member when the kind is declared with `members`.
    pub fn clusters_of<K: Resource<DynamicType = ()>>(&self) -> Vec<Cluster<C>> {
        let resource = ApiResource::erase::<K>(&());
        let mut clusters: Vec<Cluster<C>> = self
            .contexts_of::<K>()
            .into_iter()
            .map(Cluster::Context)
            .collect();
        let in_members =
            (self.plan.children().iter()).any(|c| c.resource() == &resource && c.in_members());
        if in_members {
            clusters.extend(self.members().into_iter().map(Cluster::Member));
        }
        clusters
    }

    /// The namespaces where children of kind `K` may live in a context or member, as declared; empty when
    /// the declaration names none (any namespace). A kind declared with
    /// [`Child::member_default_namespace`](crate::Child::member_default_namespace) lives in a member's own
    /// namespace, which is not listed here: give its children no namespace and they go there.
    pub fn namespaces_of<K: Resource<DynamicType = ()>>(
        &self,
        cluster: impl Into<Cluster<C>>,
    ) -> Vec<&str> {
        let (cluster, resource) = (cluster.into(), ApiResource::erase::<K>(&()));
        let namespaces: IndexSet<&str> = (self.declared(&resource, &cluster).into_iter())
            .flat_map(|c| c.namespaces().iter().map(AsRef::as_ref))
            .collect();
        namespaces.into_iter().collect()
    }

    /// How many reconciles of this object failed in a row before this one.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the default error policy waits before a retry: the plan's `error_requeue` (default
    /// [`DEFAULT_ERROR_REQUEUE`]), doubled for each earlier consecutive failure of this object, at most
    /// [`MAX_ERROR_REQUEUE`].
    pub fn error_requeue(&self) -> Duration {
        error_backoff(self.plan.error_requeue_or_default(), self.failures)
    }
}

/// `base` doubled once per earlier consecutive failure, at most [`MAX_ERROR_REQUEUE`] (or `base` if longer).
fn error_backoff(base: Duration, failures: u32) -> Duration {
    base.saturating_mul(1 << failures.min(16))
        .min(MAX_ERROR_REQUEUE.max(base))
}

impl<C: Context> fmt::Debug for Cx<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cx")
            .field("cluster", &self.cluster)
            .field("controller", &self.plan.name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_controller::{CLUSTER_A, CONTROL, cx};

    #[tokio::test]
    async fn a_cache_the_controller_does_not_keep_is_refused_naming_the_declaration_it_needs() {
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        let cx = cx(CONTROL, 0).of_primary(ApiResource::erase::<ConfigMap>(&()));
        assert!(cx.cached::<ConfigMap>(CONTROL).unwrap().is_empty());
        let refused = |error: Error| error.to_string();
        assert_eq!(
            refused(cx.cached::<ConfigMap>(CLUSTER_A).unwrap_err()),
            "cluster cluster-a: no cache of ConfigMap/v1 there; its children of \
             this kind are cached by their metadata only: read them with `cx.children::<ConfigMap>`, or \
             declare the child with `Child::cache_objects()`"
        );
        assert_eq!(
            refused(cx.cached::<Secret>(CONTROL).unwrap_err()),
            "cluster control: no cache of Secret/v1 there; declare it with \
             `watches(Secret, ..)` in this cluster (`contexts = [..]`, or `members` for a member)"
        );
        let in_member = cx.cached::<ConfigMap>(Member::new("cluster-c"));
        assert!(
            matches!(in_member, Err(Error::NotWatched { .. })),
            "{in_member:?}"
        );
    }

    #[tokio::test]
    async fn a_client_is_refused_in_the_words_of_what_was_asked_for() {
        let cx = cx(CONTROL, 0);
        assert!(cx.client(CLUSTER_A).is_ok());
        let undeclared = cx
            .client(crate::core::ContextName::new("elsewhere"))
            .err()
            .unwrap();
        assert!(
            matches!(&undeclared, Error::UndeclaredContext { context } if context == "elsewhere"),
            "{undeclared}"
        );
        let member = cx.client(Member::new("cluster-c")).err().unwrap();
        assert_eq!(
            member.to_string(),
            "member cluster-c: not a member of the fleet now (it left, or has not joined)"
        );
    }

    #[test]
    fn the_error_backoff_doubles_per_failure_up_to_the_cap() {
        let base = Duration::from_secs(5);
        let delays: Vec<u64> = (0..9).map(|f| error_backoff(base, f).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(
            error_backoff(Duration::from_secs(600), 3),
            Duration::from_secs(600)
        );
        assert_eq!(error_backoff(base, u32::MAX), MAX_ERROR_REQUEUE);
    }
}
