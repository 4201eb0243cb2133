//! Declaring children: what a reconcile asks for in each cluster, checked against the plan, with the
//! policies that decide whether the runtime may delete each child.

use kube::Resource;
use kube::api::ApiResource;
use serde::Serialize;

use super::Cx;
use crate::controller::ChildOptions;
use crate::controller::desired_child::{DesiredChild, DesiredChildren};
use crate::core::{ApiScope, Cluster, Context, Error, Result};
use crate::core::{
    DeletePolicy, ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION, PrunePolicy, SHARED_LABEL,
};

impl<C: Context> Cx<C> {
    /// Declares a child the object should have in a context or member.
    ///
    /// After the reconcile succeeds, the runtime applies every declared child (server-side apply, the
    /// controller as field manager), stamps each with a reference to its parent (labels and annotations,
    /// never an ownerReference across clusters), deletes the parent's children that were not declared this
    /// time, and records the outcome per cluster in the parent's status. Each cluster is synced on its own:
    /// an unreachable one never holds back the others.
    ///
    /// The order of the calls does not matter. Within one cluster the children are applied in dependency
    /// order, as Helm and kubectl order them: Namespaces, then CustomResourceDefinitions, then
    /// PriorityClasses, StorageClasses, ResourceQuotas, LimitRanges and NetworkPolicies, then
    /// ServiceAccounts, then ClusterRoles and Roles, then their bindings, then ConfigMaps and Secrets, then
    /// every other kind, and webhook configurations and APIServices last; children of one rank in the
    /// order declared. They are deleted in the reverse order. A child the API server refuses does not stop
    /// the others: the cluster's status is `Failed`, naming each child that failed and why, and the next
    /// try applies them again (`docs/ownership.md`).
    ///
    /// A child no longer declared is deleted, unless its policy keeps it; so is every child when the parent
    /// is deleted, unless its policy orphans it ([`child_with`](Self::child_with), `owns(Kind, prune =
    /// keep, on_delete = orphan)`): such a child is unlinked — no longer watched or owned — and left in
    /// place.
    ///
    /// Fails when the kind is not declared with `owns(..)` for that context (or with `members` for a
    /// member), the member is not one now, its namespace is not one of the declared namespaces, or the child
    /// has no name.
    pub fn child<K>(&self, cluster: impl Into<Cluster<C>>, child: K) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope: ApiScope> + Serialize,
    {
        self.child_with(cluster, child, ChildOptions::new())
    }

    /// As [`child`](Self::child), with this child's policies chosen: whether it is kept (unlinked and left
    /// in place) once no longer declared, and whether it is orphaned (likewise) when the parent is
    /// deleted. What `options` leaves unset comes from the object's own annotations
    /// ([`ON_PRUNE_ANNOTATION`](crate::ownership::ON_PRUNE_ANNOTATION),
    /// [`ON_DELETE_ANNOTATION`](crate::ownership::ON_DELETE_ANNOTATION)), else from its kind's `owns(..)`; the
    /// outcome is recorded on the child as those annotations (`docs/ownership.md`).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::Namespace;
    /// # use kubeplex::{ChildOptions, ContextName, Cx};
    /// # fn declare(cx: &Cx<ContextName>, team: Namespace) -> kubeplex::Result<()> {
    /// // A team's namespace outlives a rename in the spec, and the parent's deletion.
    /// cx.child_with(
    ///     ContextName::new("cluster-a"),
    ///     team,
    ///     ChildOptions::new().keep_on_prune().orphan_on_delete(),
    /// )?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Fails as [`child`](Self::child) does, and when the object carries one of those annotations with a
    /// value that names no policy.
    pub fn child_with<K>(
        &self,
        cluster: impl Into<Cluster<C>>,
        child: K,
        options: ChildOptions,
    ) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope: ApiScope> + Serialize,
    {
        let cluster = cluster.into();
        let resource = ApiResource::erase::<K>(&());
        let invalid = |reason: String| Error::InvalidChild {
            cluster: cluster.name().to_owned(),
            kind: resource.kind.clone(),
            reason,
        };
        let declared = self.declared(&resource, &cluster);
        if declared.is_empty() {
            return Err(invalid(format!(
                "controller {} declares no owns({}{}) in this context",
                self.controller(),
                resource.kind,
                if matches!(cluster, Cluster::Member(_)) {
                    ", members"
                } else {
                    ""
                },
            )));
        }
        if let Cluster::Member(member) = &cluster
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
        let namespaced = <K::Scope as ApiScope>::NAMESPACED;
        let namespaces: Vec<String> = match &cluster {
            // The member's own namespace, where its child watch is.
            Cluster::Member(member)
                if namespaced && declared.iter().any(|c| c.in_member_default_namespace()) =>
            {
                let client = self.runtime.members.client(member.name());
                client
                    .map(|c| c.default_namespace().to_owned())
                    .into_iter()
                    .collect()
            }
            _ => (self.namespaces_of::<K>(cluster.clone()).into_iter())
                .map(str::to_owned)
                .collect(),
        };
        // A namespaced child without a namespace goes to the one namespace declared for it, if only one is.
        let namespace = match (&meta.namespace, namespaces.as_slice()) {
            (None, [only]) if namespaced => Some(only.clone()),
            (namespace, _) => namespace.clone(),
        };
        if !namespaces.is_empty()
            && !namespaces
                .iter()
                .any(|ns| Some(ns.as_str()) == namespace.as_deref())
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
            && cluster != self.cluster
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
        let annotations = &mut object["metadata"]["annotations"];
        let prune = match (
            options.prune(),
            annotation(annotations, ON_PRUNE_ANNOTATION),
        ) {
            (Some(policy), _) => policy,
            (None, Some(value)) => PrunePolicy::parse(value)
                .ok_or_else(|| invalid(unknown_policy(ON_PRUNE_ANNOTATION, value, "keep")))?,
            // Declarations of the kind that reach this place and disagree: the one that spares wins.
            (None, None) if declared.iter().any(|c| c.prune() == PrunePolicy::Keep) => {
                PrunePolicy::Keep
            }
            (None, None) => PrunePolicy::Delete,
        };
        let on_delete = match (
            options.on_delete(),
            annotation(annotations, ON_DELETE_ANNOTATION),
        ) {
            (Some(policy), _) => policy,
            (None, Some(value)) => DeletePolicy::parse(value)
                .ok_or_else(|| invalid(unknown_policy(ON_DELETE_ANNOTATION, value, "orphan")))?,
            (None, None)
                if declared
                    .iter()
                    .any(|c| c.on_delete() == DeletePolicy::Orphan) =>
            {
                DeletePolicy::Orphan
            }
            (None, None) => DeletePolicy::Delete,
        };
        record(
            annotations,
            ON_PRUNE_ANNOTATION,
            prune.as_str(),
            prune == PrunePolicy::Delete,
        );
        record(
            annotations,
            ON_DELETE_ANNOTATION,
            on_delete.as_str(),
            on_delete == DeletePolicy::Delete,
        );
        // Shared when its declaration says so, whatever the object's own labels say.
        if declared.iter().any(|c| c.is_shared()) {
            object["metadata"]["labels"][SHARED_LABEL] = "true".into();
        } else if let Some(labels) =
            (object["metadata"].get_mut("labels")).and_then(serde_json::Value::as_object_mut)
        {
            labels.remove(SHARED_LABEL);
        }
        let desired = DesiredChild {
            resource,
            namespace,
            name,
            object,
        };
        let mut declared = self.desired.lock();
        match declared.get_mut(cluster.name()) {
            Some(children) => children.push(desired),
            None => {
                declared.insert(cluster.name().to_owned(), vec![desired]);
            }
        }
        Ok(())
    }

    /// The declarations of `resource` that put children in `cluster`.
    pub(super) fn declared(
        &self,
        resource: &ApiResource,
        cluster: &Cluster<C>,
    ) -> Vec<&crate::plan::Child<C>> {
        let declares = |c: &&crate::plan::Child<C>| {
            c.resource() == resource
                && match cluster {
                    Cluster::Context(context) => c.contexts().contains(context),
                    Cluster::Member(_) => c.in_members(),
                }
        };
        self.plan.children().iter().filter(declares).collect()
    }

    /// The children declared so far, taken.
    pub(crate) fn take_children(&self) -> DesiredChildren {
        std::mem::take(&mut self.desired.lock())
    }
}

/// The value of the annotation `key` in an object's `metadata.annotations`.
fn annotation<'a>(annotations: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    annotations.get(key)?.as_str()
}

/// Why an annotation's value is refused: it names no policy.
fn unknown_policy(key: &str, value: &str, spares: &str) -> String {
    format!("annotation {key} is {value:?}: write {spares} or delete (or leave it out)")
}

/// Records a policy on the child: its value under `key`, or no annotation for the default (so that a
/// policy dropped from the plan is dropped from the child at the next apply).
fn record(annotations: &mut serde_json::Value, key: &str, value: &str, default: bool) {
    if default {
        if let Some(map) = annotations.as_object_mut() {
            map.remove(key);
        }
    } else {
        annotations[key] = serde_json::Value::String(value.to_owned());
    }
}

#[cfg(test)]
mod tests;
