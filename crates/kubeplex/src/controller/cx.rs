//! What a reconcile sees besides its object: where it came from and how to reach every context.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexSet;
use kube::api::ApiResource;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde::Serialize;

use crate::core::Context;
use crate::core::{ApiScope, PrimaryResource};
use crate::core::{Error, Result};
use crate::core::{Member, Target};
#[cfg(doc)]
use crate::plan::DEFAULT_ERROR_REQUEUE;
use crate::plan::{MAX_ERROR_REQUEUE, Plan};
use crate::runtime::Runtime;

/// A child the reconcile asked for, not yet applied (where it goes is the key it is kept under).
#[derive(Clone, Debug)]
pub(crate) struct DesiredChild {
    pub(crate) resource: ApiResource,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) object: serde_json::Value,
}

/// The children a reconcile asked for, by the context or member they go to, each in the order declared:
/// split once, as they are declared, so that each context's sync takes its own.
pub(crate) type DesiredChildren = BTreeMap<String, Vec<DesiredChild>>;

/// The reconcile context: the context the object came from, access to every declared context, and the
/// children the reconcile wants.
pub struct Cx<C> {
    context: Target<C>,
    plan: Arc<Plan<C>>,
    runtime: Arc<Runtime>,
    desired: Mutex<DesiredChildren>,
    failures: u32,
}

impl<C: Context> Cx<C> {
    pub(crate) fn new(
        context: Target<C>,
        plan: Arc<Plan<C>>,
        runtime: Arc<Runtime>,
        failures: u32,
    ) -> Self {
        Self {
            context,
            plan,
            runtime,
            desired: Mutex::default(),
            failures,
        }
    }

    /// Where the reconciled object came from: one of the controller's typed contexts
    /// (`Target::Context(Fleet::Control)`, which compares equal to `Fleet::Control`), or a member of the
    /// fleet when the plan watches its primaries in every member.
    pub fn context(&self) -> Target<C> {
        self.context.clone()
    }

    /// The name of the controller running this reconcile.
    pub fn controller(&self) -> &str {
        self.plan.name()
    }

    /// The client of any context the manager's controllers declared, or of a member of the fleet. Fails
    /// with [`Error::UndeclaredContext`] for a context no controller declared, [`Error::ClientConfig`] for
    /// one whose client could not be configured, and [`Error::Member`] for a member that is not one now.
    pub fn client(&self, target: impl Into<Target<C>>) -> Result<Client> {
        let target = target.into();
        self.runtime
            .client(target.name())
            .map_err(|error| match (target, error) {
                (Target::Member(member), Error::UndeclaredContext { .. }) => Error::Member {
                    context: member.name().to_owned(),
                    reason: "not a member of the fleet now (it left, or has not joined)".into(),
                },
                (_, error) => error,
            })
    }

    /// An `Api` for a namespaced kind in `namespace` of a context or member.
    pub fn api<K>(&self, target: impl Into<Target<C>>, namespace: &str) -> Result<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Ok(Api::namespaced(self.client(target)?, namespace))
    }

    /// Every cached object of kind `K` in `context`, from the watches the controllers opened there
    /// (empty when none watches `K` there). Reading the cache costs no request.
    pub fn cached<K: PrimaryResource>(&self, context: C) -> Vec<Arc<K>> {
        self.runtime
            .watches
            .watches_of::<K>(context.name())
            .iter()
            .flat_map(|w| w.store().state())
            .collect()
    }

    /// The members of the fleet now (clusters that joined at run time and are not leaving), in name order.
    pub fn members(&self) -> Vec<Member> {
        let names = self.runtime.members.names();
        names.into_iter().map(Member::new).collect()
    }

    /// Declares a child the object should have in a context or member.
    ///
    /// After the reconcile succeeds, the runtime applies every declared child (server-side apply, the
    /// controller as field manager), stamps each with a reference to its parent (labels and annotations,
    /// never an ownerReference across clusters), deletes the parent's children that were not declared this
    /// time, and records the outcome per context in the parent's status. Each context is synced on its own:
    /// an unreachable one never holds back the others.
    ///
    /// The order of the calls does not matter. Within one context the children are applied in dependency
    /// order, as Helm and kubectl order them: Namespaces, then CustomResourceDefinitions, then
    /// PriorityClasses, StorageClasses, ResourceQuotas, LimitRanges and NetworkPolicies, then
    /// ServiceAccounts, then ClusterRoles and Roles, then their bindings, then ConfigMaps and Secrets, then
    /// every other kind, and webhook configurations and APIServices last; children of one rank in the
    /// order declared. They are deleted in the reverse order. A child the API server refuses does not stop
    /// the others: the context's status is `Failed`, naming each child that failed and why, and the next
    /// try applies them again (`docs/ownership.md`).
    ///
    /// Fails when the kind is not declared with `owns(..)` for that context (or with `members` for a
    /// member), the member is not one now, its namespace is not one of the declared namespaces, or the child
    /// has no name.
    pub fn child<K>(&self, target: impl Into<Target<C>>, child: K) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope: ApiScope> + Serialize,
    {
        let target = target.into();
        let resource = ApiResource::erase::<K>(&());
        let invalid = |reason: String| Error::InvalidChild {
            context: target.name().to_owned(),
            kind: resource.kind.clone(),
            reason,
        };
        if self.declared(&resource, &target).is_empty() {
            return Err(invalid(format!(
                "controller {} declares no owns({}{}) in this context",
                self.controller(),
                resource.kind,
                if matches!(target, Target::Member(_)) {
                    ", members"
                } else {
                    ""
                },
            )));
        }
        if let Target::Member(member) = &target
            && !self.runtime.members.is_current(member.name())
        {
            return Err(invalid(
                "not a member of the fleet now (it left, or has not joined)".into(),
            ));
        }
        let meta = child.meta();
        let name = meta
            .name
            .clone()
            .ok_or_else(|| invalid("the child has no metadata.name".into()))?;
        let namespaces = self.namespaces_of::<K>(target.clone());
        // A namespaced child without a namespace goes to the one namespace declared for it, if only one is.
        let namespaced = <K::Scope as ApiScope>::NAMESPACED;
        let namespace = match (&meta.namespace, namespaces.as_slice()) {
            (None, [only]) if namespaced => Some((*only).to_owned()),
            (namespace, _) => namespace.clone(),
        };
        if !namespaces.is_empty()
            && !namespaces
                .iter()
                .any(|ns| Some(*ns) == namespace.as_deref())
        {
            return Err(invalid(format!(
                "namespace {} is not one of the declared {}",
                namespace.as_deref().unwrap_or("(none)"),
                namespaces.join(", ")
            )));
        }
        if meta
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty())
            && target != self.context
        {
            return Err(invalid(
                "ownerReferences cannot span clusters (the garbage collector would delete the child as an \
                 orphan); kubeplex links the child to its parent itself"
                    .into(),
            ));
        }
        let mut object =
            serde_json::to_value(&child).map_err(|e| invalid(format!("cannot serialize: {e}")))?;
        if let Some(namespace) = &namespace {
            object["metadata"]["namespace"] = serde_json::Value::String(namespace.clone());
        }
        let desired = DesiredChild {
            resource,
            namespace,
            name,
            object,
        };
        let mut declared = self.desired.lock();
        match declared.get_mut(target.name()) {
            Some(children) => children.push(desired),
            None => {
                declared.insert(target.name().to_owned(), vec![desired]);
            }
        }
        Ok(())
    }

    /// The declarations of `resource` that put children in `target`.
    fn declared(&self, resource: &ApiResource, target: &Target<C>) -> Vec<&crate::plan::Child<C>> {
        let declares = |c: &&crate::plan::Child<C>| {
            c.resource() == resource
                && match target {
                    Target::Context(context) => c.get_contexts().contains(context),
                    Target::Member(_) => c.in_members(),
                }
        };
        self.plan.children().iter().filter(declares).collect()
    }

    /// The contexts where children of kind `K` were declared (`owns(K, contexts = [..])`), each once, in
    /// declaration order: loop over these instead of naming the child contexts a second time.
    pub fn contexts_of<K: Resource<DynamicType = ()>>(&self) -> Vec<C> {
        let resource = ApiResource::erase::<K>(&());
        let contexts: IndexSet<C> = (self.plan.children().iter())
            .filter(|c| c.resource() == &resource)
            .flat_map(|c| c.get_contexts().iter().copied())
            .collect();
        contexts.into_iter().collect()
    }

    /// Everywhere children of kind `K` live now: the contexts of [`contexts_of`](Self::contexts_of), then
    /// every current member when the kind is declared with `members`.
    pub fn targets_of<K: Resource<DynamicType = ()>>(&self) -> Vec<Target<C>> {
        let resource = ApiResource::erase::<K>(&());
        let mut targets: Vec<Target<C>> = self
            .contexts_of::<K>()
            .into_iter()
            .map(Target::Context)
            .collect();
        let in_members =
            (self.plan.children().iter()).any(|c| c.resource() == &resource && c.in_members());
        if in_members {
            targets.extend(self.members().into_iter().map(Target::Member));
        }
        targets
    }

    /// The namespaces where children of kind `K` may live in a context or member, as declared; empty when
    /// the declaration names none (any namespace).
    pub fn namespaces_of<K: Resource<DynamicType = ()>>(
        &self,
        target: impl Into<Target<C>>,
    ) -> Vec<&str> {
        let (target, resource) = (target.into(), ApiResource::erase::<K>(&()));
        let namespaces: IndexSet<&str> = (self.declared(&resource, &target).into_iter())
            .flat_map(|c| c.get_namespaces().iter().map(AsRef::as_ref))
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

    /// The children declared so far, taken.
    pub(crate) fn take_children(&self) -> DesiredChildren {
        std::mem::take(&mut self.desired.lock())
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
            .field("context", &self.context)
            .field("controller", &self.plan.name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::Controller;
    use crate::controller::test_controller::{CLUSTER_A, CONTROL, TestController, runtime};

    fn cx(context: crate::ContextName, failures: u32) -> Cx<crate::ContextName> {
        let (client, _) = crate::client::fake_api::client(|_, _, _| (200, serde_json::json!({})));
        Cx::new(
            Target::Context(context),
            Arc::new(TestController::plan()),
            runtime(client.clone(), client),
            failures,
        )
    }

    fn config_map(namespace: Option<&str>, name: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: name.map(str::to_owned),
                namespace: namespace.map(str::to_owned),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn a_declared_child_is_taken_and_each_undeclared_one_is_refused_with_the_reason() {
        let cx = cx(CONTROL, 0);
        cx.child(CLUSTER_A, config_map(Some("ns"), Some("ok")))
            .unwrap();
        let refused = |result: Result<()>| result.unwrap_err().to_string();
        assert_eq!(
            refused(cx.child(CLUSTER_A, Deployment::default())),
            "context cluster-a: child Deployment: controller test-controller declares no owns(Deployment) in this context"
        );
        assert_eq!(
            refused(cx.child(CONTROL, config_map(Some("ns"), Some("x")))),
            "context control: child ConfigMap: controller test-controller declares no owns(ConfigMap) in this context"
        );
        assert_eq!(
            refused(cx.child(CLUSTER_A, config_map(Some("other"), Some("x")))),
            "context cluster-a: child ConfigMap: namespace other is not one of the declared ns"
        );
        assert!(
            refused(cx.child(CLUSTER_A, config_map(Some("ns"), None)))
                .contains("has no metadata.name")
        );
        let mut owned = config_map(Some("ns"), Some("x"));
        owned.metadata.owner_references = Some(vec![OwnerReference::default()]);
        assert!(
            refused(cx.child(CLUSTER_A, owned)).contains("ownerReferences cannot span clusters")
        );
        let taken = cx.take_children();
        let names: Vec<(&str, Vec<&str>)> = (taken.iter())
            .map(|(context, children)| {
                (
                    context.as_str(),
                    children.iter().map(|c| c.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(names, [("cluster-a", vec!["ok"])]);
    }

    #[tokio::test]
    async fn the_declared_places_of_a_child_kind_and_its_default_namespace() {
        let cx = cx(CONTROL, 0);
        assert_eq!(cx.contexts_of::<ConfigMap>(), [CLUSTER_A]);
        assert!(cx.contexts_of::<Deployment>().is_empty());
        assert_eq!(cx.namespaces_of::<ConfigMap>(CLUSTER_A), ["ns"]);
        // Exactly one namespace is declared: a child without one goes there.
        cx.child(CLUSTER_A, config_map(None, Some("defaulted")))
            .unwrap();
        let taken = cx.take_children();
        let child = &taken["cluster-a"][0];
        assert_eq!(child.namespace.as_deref(), Some("ns"));
        assert_eq!(child.object["metadata"]["namespace"], "ns");
    }

    #[tokio::test]
    async fn children_are_split_by_context_as_they_are_declared() {
        let (client, _) = crate::client::fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let plan = Plan::new("split")
            .contexts([CONTROL])
            .owns(crate::Child::of::<ConfigMap>().contexts([CLUSTER_A, CONTROL]));
        let cx = Cx::new(
            Target::Context(CONTROL),
            Arc::new(plan),
            runtime(client.clone(), client),
            0,
        );
        for (context, name) in [(CLUSTER_A, "a1"), (CONTROL, "c1"), (CLUSTER_A, "a2")] {
            cx.child(context, config_map(Some("ns"), Some(name)))
                .unwrap();
        }
        let taken = cx.take_children();
        let names = |context: &str| -> Vec<&str> {
            taken[context].iter().map(|c| c.name.as_str()).collect()
        };
        assert_eq!(taken.len(), 2);
        assert_eq!(names("cluster-a"), ["a1", "a2"]);
        assert_eq!(names("control"), ["c1"]);
        assert!(cx.take_children().is_empty(), "taken once");
    }

    #[tokio::test]
    async fn a_client_is_refused_in_the_words_of_what_was_asked_for() {
        let cx = cx(CONTROL, 0);
        assert!(cx.client(CLUSTER_A).is_ok());
        let undeclared = cx
            .client(crate::ContextName::new("elsewhere"))
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
