//! The order in which one cluster's children are applied, and its reverse for deleting them: the kinds
//! others depend on first (a namespace before what lives in it, a CRD before its objects, a ServiceAccount
//! and its RBAC before the pods that run as it), as Helm orders an install and an uninstall. This file is
//! the one place the order is kept; `docs/ownership.md` and `Cx::child` describe it.

use kube::api::ApiResource;

/// The kinds applied before the others, tier by tier, each kind by (API group, kind).
const FIRST: &[&[(&str, &str)]] = &[
    &[("", "Namespace")],
    &[("apiextensions.k8s.io", "CustomResourceDefinition")],
    // What the workloads made later are admitted or scheduled under.
    &[
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "StorageClass"),
        ("", "ResourceQuota"),
        ("", "LimitRange"),
        ("networking.k8s.io", "NetworkPolicy"),
    ],
    &[("", "ServiceAccount")],
    &[
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "Role"),
    ],
    &[
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
    ],
    &[("", "ConfigMap"), ("", "Secret")],
];

/// The kinds applied after all others: they send the API server's own requests to a service, which should
/// be running before the server depends on it.
const LAST: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apiregistration.k8s.io", "APIService"),
];

/// Where a kind comes in the apply order: the lower, the earlier. Every kind not named above shares the
/// rank between [`FIRST`] and [`LAST`].
pub(crate) fn rank(resource: &ApiResource) -> usize {
    let is = |&(group, kind): &(&str, &str)| resource.group == group && resource.kind == kind;
    if let Some(tier) = FIRST.iter().position(|tier| tier.iter().any(is)) {
        return tier;
    }
    FIRST.len() + usize::from(LAST.iter().any(is)) // The rest, or last.
}

/// Sorts `items` into the apply order; items of one rank keep their order (as they were declared).
pub(crate) fn sort_for_apply<T>(items: &mut [T], resource: impl Fn(&T) -> &ApiResource) {
    items.sort_by_key(|item| rank(resource(item)));
}

/// Sorts `items` into the delete order, the apply order reversed (what depends on others goes first);
/// items of one rank keep their order.
pub(crate) fn sort_for_delete<T>(items: &mut [T], resource: impl Fn(&T) -> &ApiResource) {
    items.sort_by_key(|item| std::cmp::Reverse(rank(resource(item))));
}

#[cfg(test)]
mod tests {
    //! The apply order and its reverse.

    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota, Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::Resource;

    use super::*;

    fn of<K: Resource<DynamicType = ()>>() -> ApiResource {
        ApiResource::erase::<K>(&())
    }

    /// A custom kind whose name is a core kind's, in a group of its own.
    fn impostor() -> ApiResource {
        ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
        }
    }

    fn kinds(resources: &[(ApiResource, &str)]) -> Vec<String> {
        resources
            .iter()
            .map(|(r, name)| format!("{}/{name}", r.kind))
            .collect()
    }

    #[test]
    fn kinds_others_depend_on_come_first_and_the_rest_keep_their_declared_order() {
        let mut children = vec![
            (of::<Deployment>(), "web"),
            (of::<ValidatingWebhookConfiguration>(), "hook"),
            (of::<ResourceQuota>(), "quota"),
            (of::<ConfigMap>(), "settings"),
            (impostor(), "custom"),
            (of::<RoleBinding>(), "binding"),
            (of::<Deployment>(), "api"),
            (of::<Secret>(), "token"),
            (of::<ClusterRole>(), "role"),
            (of::<ServiceAccount>(), "runner"),
            (of::<CustomResourceDefinition>(), "crd"),
            (of::<Namespace>(), "team"),
        ];
        sort_for_apply(&mut children, |(r, _)| r);
        assert_eq!(
            kinds(&children),
            [
                "Namespace/team",
                "CustomResourceDefinition/crd",
                "ResourceQuota/quota",
                "ServiceAccount/runner",
                "ClusterRole/role",
                "RoleBinding/binding",
                "ConfigMap/settings",
                "Secret/token",
                "Deployment/web",
                "Namespace/custom",
                "Deployment/api",
                "ValidatingWebhookConfiguration/hook",
            ]
        );
    }

    #[test]
    fn deleting_goes_in_the_reverse_order() {
        let mut children = vec![
            (of::<Namespace>(), "team"),
            (of::<ServiceAccount>(), "runner"),
            (of::<Deployment>(), "web"),
            (of::<ResourceQuota>(), "quota"),
            (of::<Deployment>(), "api"),
        ];
        sort_for_delete(&mut children, |(r, _)| r);
        assert_eq!(
            kinds(&children),
            [
                "Deployment/web",
                "Deployment/api",
                "ServiceAccount/runner",
                "ResourceQuota/quota",
                "Namespace/team",
            ]
        );
    }
}
