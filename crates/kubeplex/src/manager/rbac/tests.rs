use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

use super::*;
use crate::controller::{Controller, Cx, Reconcile};
use crate::core::{Action, ContextName};
use crate::ha::{LeaderElection, Sharding};
use crate::members::{KubeconfigSecrets, LeavePolicy};
use crate::plan::{Child, Plan};

mod identity_and_webhooks;

/// A controller of Deployments; each test gives it its plan.
struct Planned;

impl Controller for Planned {
    type Resource = Deployment;
    type Context = ContextName;
    fn plan() -> Plan<ContextName> {
        Plan::new("planned")
    }
}

impl Reconcile for Planned {
    type Error = Infallible;
    async fn reconcile(
        &self,
        _: Arc<Deployment>,
        _: &Cx<ContextName>,
    ) -> Result<Action, Infallible> {
        Ok(Action::await_change())
    }
}

fn ctx(name: &'static str) -> ContextName {
    ContextName::new(name)
}

/// A manager running `plan`.
fn manager(plan: fn() -> Plan<ContextName>) -> Manager {
    Manager::new().controller_with(Planned, move |_| plan())
}

/// The rules of a role: (group, resource, verbs).
fn rules(rules: &Option<Vec<PolicyRule>>) -> Vec<(String, String, Vec<String>)> {
    let rules = rules.as_deref().unwrap_or_default();
    let one = |v: &Option<Vec<String>>| v.as_ref().unwrap().join(",");
    rules
        .iter()
        .map(|r| (one(&r.api_groups), one(&r.resources), r.verbs.clone()))
        .collect()
}

fn triple(group: &str, resource: &str, verbs: &str) -> (String, String, Vec<String>) {
    (
        group.into(),
        resource.into(),
        verbs.split(',').map(str::to_owned).collect(),
    )
}

/// `rbac` without the Role (and binding) in `kube-system` every cluster has for its identity
/// ([`identity_and_webhooks::every_cluster_may_read_its_identity`]).
fn without_identity(mut rbac: ContextRbac) -> ContextRbac {
    let identity = |namespace: &Option<String>| namespace.as_deref() == Some("kube-system");
    rbac.roles.retain(|r| !identity(&r.metadata.namespace));
    rbac.role_bindings
        .retain(|b| !identity(&b.metadata.namespace));
    rbac
}

fn namespaces_of(rbac: &ContextRbac) -> Vec<Option<String>> {
    rbac.roles
        .iter()
        .map(|r| r.metadata.namespace.clone())
        .collect()
}

#[test]
fn named_namespaces_give_a_role_in_each() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .with_namespaces(["crds"])
            .owns(
                Child::of::<ConfigMap>()
                    .with_contexts([ctx("edge")])
                    .with_namespaces(["a", "b"]),
            )
    })
    .rbac("operator", "ops");
    assert_eq!(rbac.contexts(), ["control", "edge"]);
    assert!(!rbac.in_members());
    let control = without_identity(rbac.for_context("control"));
    assert!(control.cluster_roles.is_empty() && control.cluster_role_bindings.is_empty());
    assert_eq!(namespaces_of(&control), [Some("crds".to_owned())]);
    assert_eq!(
        rules(&control.roles[0].rules),
        [
            triple("apps", "deployments", "get,list,watch,patch"),
            triple("apps", "deployments/finalizers", "update,patch"),
            triple("apps", "deployments/status", "patch"),
            triple("events.k8s.io", "events", "create,patch"),
        ]
    );
    let edge = without_identity(rbac.for_context("edge"));
    assert_eq!(
        namespaces_of(&edge),
        [Some("a".to_owned()), Some("b".to_owned())]
    );
    for role in &edge.roles {
        assert_eq!(
            rules(&role.rules),
            [triple(
                "",
                "configmaps",
                "get,list,watch,create,patch,delete"
            )]
        );
    }
    let binding = &edge.role_bindings[1];
    assert_eq!(binding.metadata.namespace.as_deref(), Some("b"));
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("Role", "operator")
    );
    let subject = &binding.subjects.as_ref().unwrap()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", "operator", Some("ops"))
    );
    assert!(rbac.for_context("elsewhere").is_empty());
}

#[test]
fn without_namespaces_the_grants_are_cluster_wide() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .owns(Child::of::<ConfigMap>().with_contexts([ctx("control")]))
    })
    .rbac("operator", "ops")
    .name("web-operator")
    .label("app", "web");
    let control = without_identity(rbac.for_context("control"));
    assert!(control.roles.is_empty());
    let role = &control.cluster_roles[0];
    assert_eq!(role.metadata.name.as_deref(), Some("web-operator"));
    assert_eq!(role.metadata.labels.as_ref().unwrap()["app"], "web");
    let found = rules(&role.rules);
    assert!(
        found.contains(&triple(
            "",
            "configmaps",
            "get,list,watch,create,patch,delete"
        )),
        "{found:?}"
    );
    assert!(
        found.contains(&triple("apps", "deployments", "get,list,watch,patch")),
        "{found:?}"
    );
    let binding = &control.cluster_role_bindings[0];
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    let kinds: Vec<_> = control
        .objects()
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding"]);
}

#[test]
fn a_cluster_scoped_child_gets_a_cluster_role_beside_the_namespaced_roles() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .with_namespaces(["crds"])
            .owns(Child::of::<Namespace>().with_contexts([ctx("edge")]))
            .owns(
                Child::of::<ConfigMap>()
                    .with_contexts([ctx("edge")])
                    .with_namespaces(["a"]),
            )
    })
    .rbac("operator", "ops");
    let edge = without_identity(rbac.for_context("edge"));
    assert_eq!(
        rules(&edge.cluster_roles[0].rules),
        [triple(
            "",
            "namespaces",
            "get,list,watch,create,patch,delete"
        )]
    );
    assert_eq!(namespaces_of(&edge), [Some("a".to_owned())]);
    assert_eq!(
        rules(&edge.roles[0].rules),
        [triple(
            "",
            "configmaps",
            "get,list,watch,create,patch,delete"
        )]
    );
}

#[test]
fn members_need_the_children_and_the_secrets_provider_its_secrets() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .with_namespaces(["crds"])
            .owns(Child::of::<ConfigMap>().members().with_namespaces(["a"]))
    })
    .members(
        KubeconfigSecrets::new(ctx("control"), "ops", "fleet=x"),
        LeavePolicy::Delete,
    )
    .rbac("operator", "ops");
    assert!(rbac.in_members());
    let members = without_identity(rbac.for_members());
    assert_eq!(namespaces_of(&members), [Some("a".to_owned())]);
    assert_eq!(
        rules(&members.roles[0].rules),
        [triple(
            "",
            "configmaps",
            "get,list,watch,create,patch,delete"
        )]
    );
    let control = without_identity(rbac.for_context("control"));
    assert_eq!(
        namespaces_of(&control),
        [Some("crds".to_owned()), Some("ops".to_owned())]
    );
    assert_eq!(
        rules(&control.roles[1].rules),
        [
            triple("", "secrets", "get,list,watch,patch"),
            triple("events.k8s.io", "events", "create,patch")
        ]
    );
}

#[test]
fn leader_election_and_sharding_need_their_leases() {
    let plan = || {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .with_namespaces(["crds"])
    };
    let elected =
        manager(plan).leader_election(LeaderElection::new(ctx("control"), "leases", "web"));
    let control = without_identity(elected.rbac("operator", "ops").for_context("control"));
    assert_eq!(
        namespaces_of(&control),
        [Some("crds".to_owned()), Some("leases".to_owned())]
    );
    assert_eq!(
        rules(&control.roles[1].rules),
        [triple("coordination.k8s.io", "leases", "get,create,update")]
    );
    // Without children there is no finalizer to keep.
    assert!(
        !rules(&control.roles[0].rules)
            .iter()
            .any(|r| r.1.ends_with("/finalizers"))
    );
    let sharded = manager(plan).sharding(Sharding::by_parent(ctx("control"), "crds", "web", 4));
    let control = without_identity(sharded.rbac("operator", "ops").for_context("control"));
    assert_eq!(namespaces_of(&control), [Some("crds".to_owned())]);
    let found = rules(&control.roles[0].rules);
    assert!(
        found.contains(&triple(
            "coordination.k8s.io",
            "leases",
            "get,list,create,update,delete"
        )),
        "{found:?}"
    );
}

#[test]
fn without_a_member_provider_members_need_nothing() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .with_namespaces(["crds"])
            .owns(Child::of::<ConfigMap>().members().with_namespaces(["a"]))
    })
    .rbac("operator", "ops");
    assert!(!rbac.in_members());
    assert!(rbac.for_members().is_empty());
    assert_eq!(rbac.contexts(), ["control"]);
}

#[test]
fn secure_metrics_review_scrapers_in_their_context_and_offer_a_reader_role() {
    let plan = || {
        Plan::new("web")
            .with_contexts([ctx("control"), ctx("edge")])
            .with_namespaces(["crds"])
    };
    let secure = manager(plan).secure_metrics(crate::readiness::SecureMetrics::new(
        ctx("control"),
        ":8443",
    ));
    let rbac = secure.rbac("operator", "ops");
    let control = without_identity(rbac.for_context("control"));
    assert_eq!(control.cluster_roles.len(), 1);
    assert_eq!(
        rules(&control.cluster_roles[0].rules),
        [
            triple("authentication.k8s.io", "tokenreviews", "create"),
            triple("authorization.k8s.io", "subjectaccessreviews", "create"),
        ]
    );
    let reader = control
        .metrics_reader
        .as_ref()
        .expect("a metrics reader role");
    assert_eq!(
        reader.metadata.name.as_deref(),
        Some("operator-metrics-reader")
    );
    let rule = &reader.rules.as_ref().unwrap()[0];
    assert_eq!(rule.non_resource_urls, Some(vec!["/metrics".to_owned()]));
    assert_eq!(rule.verbs, ["get"]);
    let objects = control.objects();
    assert_eq!(
        objects.last().unwrap()["metadata"]["name"],
        "operator-metrics-reader"
    );
    // Only where the scrapes are reviewed; and nothing without secure metrics.
    let edge = without_identity(rbac.for_context("edge"));
    assert!(edge.cluster_roles.is_empty() && edge.metrics_reader.is_none());
    let plain = without_identity(manager(plan).rbac("operator", "ops").for_context("control"));
    assert!(plain.cluster_roles.is_empty() && plain.metrics_reader.is_none());
}

#[test]
fn a_cluster_wide_grant_of_secrets_or_deletes_in_every_member_is_named() {
    let with = |child: fn() -> Child<ContextName>| {
        let plan = move || {
            Plan::new("web")
                .with_contexts([ctx("control")])
                .with_namespaces(["crds"])
                .owns(child())
        };
        let manager = Manager::new().controller_with(Planned, move |_| plan());
        let manager = manager.members(
            KubeconfigSecrets::new(ctx("control"), "ops", "fleet=x"),
            LeavePolicy::Delete,
        );
        without_identity(manager.rbac("operator", "ops").for_members())
    };
    let secrets = with(|| {
        Child::of::<k8s_openapi::api::core::v1::Secret>()
            .with_namespaces(["a"])
            .member_default_namespace()
    });
    assert_eq!(secrets.cluster_roles.len(), 1);
    assert_eq!(
        secrets.warnings,
        [
            "cluster-wide in every member: get, list, watch, create, patch, delete on secrets in every \
          namespace (every Secret); give the child kind namespaces to grant less"
        ]
    );
    let deployments = with(|| Child::of::<Deployment>().members());
    assert_eq!(deployments.warnings.len(), 1);
    assert!(
        deployments.warnings[0].contains("on deployments.apps in every namespace (deleting any"),
        "{:?}",
        deployments.warnings
    );
    // In named namespaces: Roles, nothing to warn of; nor in a fixed context.
    let named = with(|| Child::of::<Deployment>().members().with_namespaces(["a"]));
    assert!(named.warnings.is_empty() && named.cluster_roles.is_empty());
}
