//! Declaring children: what a reconcile asks for in each context, checked against the plan, with the
//! policies that decide whether the runtime may delete each child.

use std::collections::BTreeMap;

use kube::Resource;
use kube::api::ApiResource;
use serde::Serialize;

use super::Cx;
use crate::controller::ChildOptions;
use crate::core::{ApiScope, Context, Error, Result, Target};
use crate::core::{DeletePolicy, ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION, PrunePolicy};

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

impl<C: Context> Cx<C> {
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
    /// A child no longer declared is deleted, unless its policy keeps it; so is every child when the parent
    /// is deleted, unless its policy orphans it ([`child_with`](Self::child_with), `owns(Kind, prune =
    /// keep, on_delete = orphan)`): such a child is unlinked — no longer watched or owned — and left in
    /// place.
    ///
    /// Fails when the kind is not declared with `owns(..)` for that context (or with `members` for a
    /// member), the member is not one now, its namespace is not one of the declared namespaces, or the child
    /// has no name.
    pub fn child<K>(&self, target: impl Into<Target<C>>, child: K) -> Result<()>
    where
        K: Resource<DynamicType = (), Scope: ApiScope> + Serialize,
    {
        self.child_with(target, child, ChildOptions::new())
    }

    /// As [`child`](Self::child), with this child's policies chosen: whether it is kept (unlinked and left
    /// in place) once no longer declared, and whether it is orphaned (likewise) when the parent is
    /// deleted. What `options` leaves unset comes from the object's own annotations
    /// ([`ON_PRUNE_ANNOTATION`](crate::ON_PRUNE_ANNOTATION),
    /// [`ON_DELETE_ANNOTATION`](crate::ON_DELETE_ANNOTATION)), else from its kind's `owns(..)`; the
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
        target: impl Into<Target<C>>,
        child: K,
        options: ChildOptions,
    ) -> Result<()>
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
        let declared = self.declared(&resource, &target);
        if declared.is_empty() {
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
        let annotations = &mut object["metadata"]["annotations"];
        let prune = match (
            options.get_prune(),
            annotation(annotations, ON_PRUNE_ANNOTATION),
        ) {
            (Some(policy), _) => policy,
            (None, Some(value)) => PrunePolicy::parse(value)
                .ok_or_else(|| invalid(unknown_policy(ON_PRUNE_ANNOTATION, value, "keep")))?,
            // Declarations of the kind that reach this place and disagree: the one that spares wins.
            (None, None) if declared.iter().any(|c| c.get_prune() == PrunePolicy::Keep) => {
                PrunePolicy::Keep
            }
            (None, None) => PrunePolicy::Delete,
        };
        let on_delete = match (
            options.get_on_delete(),
            annotation(annotations, ON_DELETE_ANNOTATION),
        ) {
            (Some(policy), _) => policy,
            (None, Some(value)) => DeletePolicy::parse(value)
                .ok_or_else(|| invalid(unknown_policy(ON_DELETE_ANNOTATION, value, "orphan")))?,
            (None, None)
                if declared
                    .iter()
                    .any(|c| c.get_on_delete() == DeletePolicy::Orphan) =>
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
    pub(super) fn declared(
        &self,
        resource: &ApiResource,
        target: &Target<C>,
    ) -> Vec<&crate::plan::Child<C>> {
        let declares = |c: &&crate::plan::Child<C>| {
            c.resource() == resource
                && match target {
                    Target::Context(context) => c.get_contexts().contains(context),
                    Target::Member(_) => c.in_members(),
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
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;
    use std::sync::Arc;

    use super::super::tests::cx;
    use super::*;
    use crate::Plan;
    use crate::controller::test_controller::{CLUSTER_A, CONTROL, runtime};

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

    /// A cx of a plan that owns ConfigMaps in cluster-a, kept on prune.
    fn keeping_cx() -> Cx<crate::ContextName> {
        let (client, _) = crate::client::fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let plan = Plan::new("keeps").contexts([CONTROL]).owns(
            crate::Child::of::<ConfigMap>()
                .contexts([CLUSTER_A])
                .keep_on_prune(),
        );
        Cx::new(
            Target::Context(CONTROL),
            Arc::new(plan),
            runtime(client.clone(), client),
            0,
        )
    }

    fn annotated(name: &str, key: &str, value: &str) -> ConfigMap {
        let mut child = config_map(Some("ns"), Some(name));
        child.metadata.annotations = Some([(key.to_owned(), value.to_owned())].into());
        child
    }

    /// The policy annotations each child taken carries, by name.
    fn policies(cx: &Cx<crate::ContextName>) -> Vec<(String, serde_json::Value)> {
        let taken = cx.take_children();
        (taken.into_values().flatten())
            .map(|c| (c.name, c.object["metadata"]["annotations"].clone()))
            .collect()
    }

    #[tokio::test]
    async fn a_childs_policies_come_from_its_options_else_its_annotations_else_its_kind() {
        use serde_json::json;
        let cx = keeping_cx();
        cx.child(CLUSTER_A, config_map(Some("ns"), Some("kind")))
            .unwrap();
        let options = ChildOptions::new()
            .orphan_on_delete()
            .prune(PrunePolicy::Delete);
        cx.child_with(
            CLUSTER_A,
            annotated("options", ON_PRUNE_ANNOTATION, "keep"),
            options,
        )
        .unwrap();
        cx.child(
            CLUSTER_A,
            annotated("annotated", ON_PRUNE_ANNOTATION, "delete"),
        )
        .unwrap();
        assert_eq!(
            policies(&cx),
            [
                ("kind".to_owned(), json!({ ON_PRUNE_ANNOTATION: "keep" })),
                (
                    "options".to_owned(),
                    json!({ ON_DELETE_ANNOTATION: "orphan" })
                ),
                ("annotated".to_owned(), json!({})),
            ]
        );

        // Without a policy in the plan, nothing is recorded; the object's own annotation is honoured.
        let cx = cx_of_test_controller();
        cx.child(CLUSTER_A, config_map(Some("ns"), Some("plain")))
            .unwrap();
        cx.child(
            CLUSTER_A,
            annotated("marked", ON_DELETE_ANNOTATION, "orphan"),
        )
        .unwrap();
        assert_eq!(
            policies(&cx),
            [
                ("plain".to_owned(), serde_json::Value::Null),
                (
                    "marked".to_owned(),
                    json!({ ON_DELETE_ANNOTATION: "orphan" })
                ),
            ]
        );
    }

    fn cx_of_test_controller() -> Cx<crate::ContextName> {
        cx(CONTROL, 0)
    }

    #[tokio::test]
    async fn an_annotation_that_names_no_policy_is_refused_with_the_values_it_takes() {
        let cx = keeping_cx();
        let refused = cx
            .child(CLUSTER_A, annotated("typo", ON_PRUNE_ANNOTATION, "kep"))
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "context cluster-a: child ConfigMap: annotation kubeplex.dev/on-prune is \"kep\": write keep or delete (or leave it out)"
        );
        let refused = cx
            .child(CLUSTER_A, annotated("typo", ON_DELETE_ANNOTATION, "keep"))
            .unwrap_err();
        assert!(
            refused.to_string().contains("write orphan or delete"),
            "{refused}"
        );
        assert!(cx.take_children().is_empty());
    }
}
