//! The grants beside the controllers': each cluster's identity, and the webhooks' CA Secret.

use k8s_openapi::api::core::v1::ConfigMap;

use super::{ContextRbac, ctx, manager, rules, triple, without_identity};
use crate::plan::{Child, Plan};

#[test]
fn every_cluster_may_read_its_identity() {
    let rbac = manager(|| {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .owns(Child::of::<ConfigMap>().with_contexts([ctx("edge")]))
    })
    .rbac("operator", "ops");
    for context in ["control", "edge"] {
        let rbac = rbac.for_context(context);
        let role = (rbac.roles.iter())
            .find(|r| r.metadata.namespace.as_deref() == Some("kube-system"))
            .unwrap_or_else(|| panic!("{context}: no Role in kube-system: {rbac:#?}"));
        assert_eq!(rules(&role.rules), [triple("", "namespaces", "get")]);
        let bound = rbac.role_bindings.iter();
        assert!(
            bound
                .clone()
                .any(|b| b.metadata.namespace.as_deref() == Some("kube-system"))
        );
    }
}

#[test]
fn identities_read_from_cluster_properties_may_read_them_in_every_cluster() {
    let plan = || {
        Plan::new("web")
            .with_contexts([ctx("control")])
            .owns(Child::of::<ConfigMap>().with_contexts([ctx("edge")]))
    };
    let property = triple("about.k8s.io", "clusterproperties", "get");
    let cluster_rules = |rbac: &ContextRbac| -> Vec<_> {
        let roles = rbac.cluster_roles.iter();
        roles.flat_map(|r| rules(&r.rules)).collect()
    };
    let by_default = manager(plan).rbac("operator", "ops");
    for context in ["control", "edge"] {
        let rules = cluster_rules(&by_default.for_context(context));
        assert!(!rules.contains(&property), "{context}: {rules:?}");
    }
    let rbac = manager(plan)
        .identity_from_cluster_property()
        .rbac("operator", "ops");
    for context in ["control", "edge"] {
        let rules = cluster_rules(&rbac.for_context(context));
        assert!(rules.contains(&property), "{context}: {rules:?}");
    }
}

#[test]
fn webhooks_with_a_ca_secret_may_keep_it() {
    let webhooks =
        crate::webhook::Webhooks::new("0.0.0.0:9443").ca_secret(ctx("control"), "ops", "ca");
    let rbac = manager(|| Plan::new("web").with_contexts([ctx("control")]));
    let rbac = rbac.webhooks(webhooks).rbac("operator", "ops");
    let control = without_identity(rbac.for_context("control"));
    let ops = (control.roles.iter()).find(|r| r.metadata.namespace.as_deref() == Some("ops"));
    let rules = rules(
        &ops.unwrap_or_else(|| panic!("no Role in ops: {control:#?}"))
            .rules,
    );
    assert!(
        rules.contains(&triple("", "secrets", "get,create")),
        "{rules:?}"
    );
}
