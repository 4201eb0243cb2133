//! Least privilege: what the Roles grant, and the check that they grant exactly that to the operator only.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::manifest::{Manifest, of_kind, one};
use super::{OPERATOR_NAMESPACE, SERVICE_ACCOUNT};

/// The (apiGroup, resource, verb) triples a Role grants; wildcards, resourceNames and nonResourceURLs fail.
fn grants(role: &Manifest) -> BTreeSet<(String, String, String)> {
    let rules = role
        .value
        .pointer("/rules")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{}: no rules", role.describe()));
    let strings = |rule: &Value, field: &str| -> Vec<String> {
        rule.get(field)
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{}: a rule without {field}", role.describe()))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let mut triples = BTreeSet::new();
    for rule in rules {
        for field in ["resourceNames", "nonResourceURLs"] {
            assert!(
                rule.get(field).is_none(),
                "{}: unexpected {field}",
                role.describe()
            );
        }
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in strings(rule, "verbs") {
                    for item in [&group, &resource, &verb] {
                        assert!(
                            !item.contains('*'),
                            "{}: wildcard {item:?}",
                            role.describe()
                        );
                    }
                    triples.insert((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    triples
}

pub(crate) fn triples(
    group: &str,
    resource: &str,
    verbs: &[&str],
) -> Vec<(String, String, String)> {
    verbs
        .iter()
        .map(|verb| (group.to_owned(), resource.to_owned(), (*verb).to_owned()))
        .collect()
}

/// What the Roles of one namespace grant, together.
pub(crate) type Grants = BTreeSet<(String, String, String)>;

/// The Roles are in exactly the namespaces of `expected` and grant there exactly what it says; each is
/// bound, by a RoleBinding in the same namespace, to the ServiceAccount kubeplex-system/kubeplex-fleet and
/// nothing else. Cluster-wide, the operator is granted exactly `cluster` (the secure metrics' reviews, or
/// nothing), and the only other ClusterRole is the unbound metrics reader a scraper is bound to.
pub(crate) fn assert_rbac(manifests: &[Manifest], expected: &[(&str, &Grants)], cluster: &Grants) {
    let namespaces: Vec<&str> = expected.iter().map(|(namespace, _)| *namespace).collect();
    let mut bound = Grants::new();
    let mut bound_roles = BTreeSet::new();
    for binding in of_kind(manifests, "ClusterRoleBinding") {
        assert_eq!(
            binding.value["subjects"],
            json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE }]),
            "{}: must bind the operator's ServiceAccount only",
            binding.describe()
        );
        let role_name = binding.value["roleRef"]["name"].as_str().unwrap();
        bound.extend(grants(one(manifests, "ClusterRole", None, role_name)));
        bound_roles.insert(role_name.to_owned());
    }
    assert_eq!(&bound, cluster, "what the operator is granted cluster-wide");
    for role in of_kind(manifests, "ClusterRole") {
        let name = role.value["metadata"]["name"].as_str().unwrap_or_default();
        if !bound_roles.contains(name) {
            assert_eq!(
                role.value["rules"],
                json!([{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }]),
                "{}: an unbound ClusterRole other than the metrics reader",
                role.describe()
            );
        }
    }
    let role_namespaces: BTreeSet<_> = of_kind(manifests, "Role")
        .iter()
        .map(|m| m.namespace().expect("a Role without namespace"))
        .collect();
    assert_eq!(
        role_namespaces,
        namespaces.iter().copied().collect(),
        "Roles in unexpected namespaces"
    );
    let binding_namespaces: BTreeSet<_> = of_kind(manifests, "RoleBinding")
        .iter()
        .map(|m| m.namespace().expect("a RoleBinding without namespace"))
        .collect();
    assert_eq!(
        binding_namespaces,
        namespaces.iter().copied().collect(),
        "RoleBindings in unexpected namespaces"
    );

    for (namespace, expected) in expected {
        let granted: Grants = of_kind(manifests, "Role")
            .into_iter()
            .filter(|role| role.namespace() == Some(namespace))
            .flat_map(grants)
            .collect();
        assert_eq!(
            &granted, *expected,
            "the Roles in {namespace} must grant exactly what the operator needs there"
        );
    }
    for binding in of_kind(manifests, "RoleBinding") {
        let namespace = binding.namespace();
        assert_eq!(
            binding.value["roleRef"],
            json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": binding.value["roleRef"]["name"] }),
            "{}: roleRef must name a Role",
            binding.describe()
        );
        let role_name = binding.value["roleRef"]["name"].as_str().unwrap();
        one(manifests, "Role", namespace, role_name);
        assert_eq!(
            binding.value["subjects"],
            json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE }]),
            "{}: must bind the operator's ServiceAccount only",
            binding.describe()
        );
    }
}
