//! The charts' RBAC against `fleet rbac`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{MODES, args, kinds, one};
use crate::support::helm::{
    CHILD_CHART, CONTROL_CHART, Document, fleet_rbac, grants, operator_flags, template,
};

/// The Roles each mode renders are what `fleet rbac --context control` prints for the Deployment's flags;
/// the child chart's are what `fleet rbac --context cluster-a` prints for its namespaces.
#[test]
fn the_charts_rbac_is_what_fleet_rbac_derives_from_the_plan() {
    for (mode, values) in MODES {
        let documents = template(CONTROL_CHART, values);
        let flags = operator_flags(&documents);
        let values: Vec<Value> = documents.iter().map(|d| d.value.clone()).collect();
        let namespaced: BTreeSet<_> = grants(&values)
            .into_iter()
            .filter(|g| g.0.is_some())
            .collect();
        let (expected, plans): (BTreeSet<_>, BTreeSet<_>) = grants(&fleet_rbac("control", &flags))
            .into_iter()
            .partition(|g| g.0.is_some());
        assert_eq!(
            namespaced,
            expected,
            "{mode}: the chart's Roles differ from `fleet rbac --context control {}`",
            flags.join(" ")
        );
        // The cluster-wide grants the plan needs: the webhooks' configurations, when served.
        let plans: BTreeSet<_> = (plans.into_iter())
            .map(|(_, group, resource, verb)| (group, resource, verb))
            .collect();
        // Each Role bound to the operator's ServiceAccount, under the same name.
        for role in documents.iter().filter(|d| d.kind() == "Role") {
            let binding = documents
                .iter()
                .find(|d| {
                    d.kind() == "RoleBinding"
                        && d.namespace() == role.namespace()
                        && d.value["roleRef"]["name"] == role.name()
                })
                .unwrap_or_else(|| panic!("{mode}: {} is not bound", role.describe()));
            assert_eq!(
                binding.value["subjects"],
                json!([{ "kind": "ServiceAccount", "name": "kubeplex-fleet",
                         "namespace": "kubeplex-system" }])
            );
        }
        // Cluster-wide: the plan's, the secure metrics' reviews, and the scrapers' role.
        let cluster_wide: BTreeSet<_> = grants(&values)
            .into_iter()
            .filter(|g| g.0.is_none())
            .map(|(_, group, resource, verb)| (group, resource, verb))
            .collect();
        let secure = args(&documents).contains(&"--secure-metrics-port");
        let reviews: BTreeSet<_> = [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ]
        .into_iter()
        .map(|(g, r)| (g.to_owned(), r.to_owned(), "create".to_owned()))
        .collect();
        if secure {
            assert_eq!(cluster_wide, &reviews | &plans, "{mode}");
            let reader = one(&documents, "ClusterRole", "kubeplex-fleet-metrics-reader");
            assert_eq!(
                reader.value["rules"],
                json!([{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }])
            );
        } else {
            assert_eq!(cluster_wide, plans, "{mode}");
            let roles = kinds(&documents).contains("ClusterRole");
            assert_eq!(roles, !plans.is_empty(), "{mode}");
        }
    }

    for children in [&["namespace-a", "namespace-b"][..], &["team-x"]] {
        let list = format!("childNamespaces={}", json!(children));
        let documents = template(CHILD_CHART, &["--set-json", &list]);
        let values: Vec<Value> = documents.iter().map(|d| d.value.clone()).collect();
        let flags = vec!["--child-namespaces".to_owned(), children.join(",")];
        assert_eq!(
            grants(&values),
            grants(&fleet_rbac("cluster-a", &flags)),
            "the child chart's Roles for {children:?}"
        );
        let namespaces: Vec<&str> = documents
            .iter()
            .filter(|d| d.kind() == "Namespace")
            .map(Document::name)
            .collect();
        assert_eq!(namespaces, children);
        let account = one(&documents, "ServiceAccount", "kubeplex-fleet");
        assert_eq!(account.value["automountServiceAccountToken"], false);
    }
}
